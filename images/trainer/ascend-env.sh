# shellcheck shell=sh
# CANN's environment (toolkit and ATB libraries) for login shells and the image's entrypoint.
# CANN 8.x installs under ascend-toolkit/; 9.x under cann/ (with ascend-toolkit/ kept as a link
# on some images): the first that exists is used.
for _grpo_cann_env in /usr/local/Ascend/ascend-toolkit/set_env.sh /usr/local/Ascend/cann/set_env.sh; do
    if [ -f "$_grpo_cann_env" ]; then
        . "$_grpo_cann_env"
        break
    fi
done
if [ -f /usr/local/Ascend/nnal/atb/set_env.sh ]; then
    . /usr/local/Ascend/nnal/atb/set_env.sh
fi
unset _grpo_cann_env
