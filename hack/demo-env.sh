# Where `make demo`'s cluster lives: a folder and ports of its own (+500), so the test suite's
# cluster (`make test`) never meets the demo's operator or job, in either order. Source it
# before hack/lib.sh; set GRPO_CLUSTER_DIR or GRPO_PORT_OFFSET yourself to move it.
# shellcheck shell=bash
: "${GRPO_CLUSTER_DIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.cache/demo-cluster}"
: "${GRPO_PORT_OFFSET:=500}"
export GRPO_CLUSTER_DIR GRPO_PORT_OFFSET
