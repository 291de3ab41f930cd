# grpo-operator: the commands a developer and CI run. `make help` lists them.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
KUBECTL = $(shell . hack/lib.sh && echo "$$BIN_DIR/kubectl")
KUBECONFIG_LOCAL = $(shell . hack/lib.sh && echo "$$CLUSTER_DIR/kubeconfig")
PYTEST_ARGS ?=
LINT_PATHS := operator trainer tests hack

.PHONY: help install demo cluster-up cluster-down test e2e-kind lint

help:
	@echo "make demo         build and start the local cluster, show its node pools"
	@echo "make test         install, start the local cluster, run the whole test suite"
	@echo "make install      virtualenv in $(VENV) with the development extras"
	@echo "make cluster-up   build (cached) and start the local test cluster"
	@echo "make cluster-down stop it (test namespaces first)"
	@echo "make e2e-kind     the same suite on a kind cluster (needs Docker)"
	@echo "make lint         ruff check and format check"

install: $(VENV)/.installed

# Reinstalled when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# The volume provisioner runs from the virtualenv (lightkube).
cluster-up: install
	hack/cluster-up.sh

cluster-down:
	hack/cluster-down.sh

demo: cluster-up
	@echo
	@"$(KUBECTL)" --kubeconfig "$(KUBECONFIG_LOCAL)" get nodes -o custom-columns='NAME:.metadata.name,POOL:.metadata.labels.grpo\.dev/pool,READY:.status.conditions[?(@.type=="Ready")].status,CPU:.status.allocatable.cpu,MEMORY:.status.allocatable.memory,NVIDIA-GPU:.status.allocatable.nvidia\.com/gpu,ASCEND-NPU:.status.allocatable.huawei\.com/Ascend910,PRODUCT:.metadata.labels.nvidia\.com/gpu\.product,ACCELERATOR:.metadata.labels.accelerator'
	@echo
	@echo "export KUBECONFIG=$(KUBECONFIG_LOCAL)"

# The one test command (CI runs it through .ci/run). pytest's exit code 5, "no tests ran",
# fails too. Under CI the cluster is stopped afterwards so no process outlives the job.
test: install cluster-up
	rc=0; GRPO_TEST_CLUSTER=local $(PY) -m pytest $(PYTEST_ARGS) tests || rc=$$?; \
	if [[ -n "$${CI:-}" ]]; then hack/cluster-down.sh || true; fi; \
	if [[ $$rc -eq 5 ]]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

# Needs Docker: creates a kind cluster, cordons its node, adds the KWOK pools and the same
# out-of-cluster KubeRay and fake Ray job API, and runs the same suite against it.
e2e-kind: install
	hack/kind-up.sh
	rc=0; GRPO_TEST_CLUSTER=kind $(PY) -m pytest $(PYTEST_ARGS) tests || rc=$$?; \
	hack/kind-down.sh || true; \
	if [[ $$rc -eq 5 ]]; then echo "make e2e-kind: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

lint: install
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
