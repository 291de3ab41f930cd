#!/bin/bash
# Runs its arguments (the image's ENTRYPOINT gives `grpo-train`) with CANN's environment loaded,
# as a login shell would have it.
set -e
# shellcheck source=ascend-env.sh
. /etc/profile.d/ascend-env.sh
exec "$@"
