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
# The machine's build cache (hack/lib.sh): what is built or downloaded once per version.
BUILD_CACHE := $(shell . hack/lib.sh && echo "$$CACHE_ROOT")
LINT_PATHS := operator trainer kubectl tests hack charts benchmarks images

.PHONY: help install unit check demo demo-down cluster-up cluster-down test test-images node-up node-down test-real-node e2e-kind kind-node-image lint images engine-up engine-down base-images

help:
	@echo "make demo         a cluster of its own, our images, a real node, Helm install, a GRPOJob trained in Ray pods"
	@echo "make demo-down    stop the demo's cluster"
	@echo "make unit         every test that needs no cluster, in parallel (the inner loop: minutes)"
	@echo "make check        lint (types included) and unit: what to run before a commit"
	@echo "make test         install, the local cluster, our images and a real node (root), the whole test suite"
	@echo "make install      virtualenv in $(VENV) with the development extras"
	@echo "make cluster-up   build (cached) and start the local test cluster"
	@echo "make cluster-down stop it (test namespaces first)"
	@echo "make node-up      a real node for the cpu pool (kubelet + containerd) joined to the local cluster"
	@echo "make node-down    take it out again (its pods' containers stop)"
	@echo "make test-real-node  the tests of real pods on that node (GRPO_REAL_NODE=1)"
	@echo "make e2e-kind     the e2e tier on a kind cluster of a node image made here (root: kind's own dockerd)"
	@echo "make kind-node-image  that node image alone (hack/kind-node-image.sh)"
	@echo "make lint         ruff check, format check, the import-layer contracts and types (part of make test)"
	@echo "make images       build the operator and trainer images (Docker)"
	@echo "make test-images  build the operator and CPU trainer images and run them (tests/containers)"
	@echo "make engine-up    a Docker engine: the one running, or Debian's docker.io installed and started"
	@echo "make engine-down  stop the dockerd that engine-up started (by its pid)"
	@echo "make base-images  Debian-made base images for engines that cannot pull (images/base.sh)"

# llama.cpp's GGUF tools for the TRL engine's export: built from the llama-cpp-python sdist only
# when the build cache (hack/lib.sh's CACHE_ROOT, ~/.cache/grpo-operator) has no finished build of
# the pinned version (13 CPU-minutes: ~7 min on an idle 2-core machine, once per version and
# machine; it prints its steps).
install: $(VENV)/.installed
	$(PY) -m grpo_trainer.engines.trl.gguf_tools install

# The CUDA image's verl, for the contract tests against verl's own code (tests/unit/verl_engine).
VERL_VERSION := $(shell sed -n 's/^CUDA_VERL_VERSION=//p' images/versions.env)
EXTRAS := dev,trl-cpu,verl-cpu,gguf
# The virtualenv's wheels, kept in the build cache and keyed by what decides them: pip keeps no
# cache of its downloads where the registry forbids storing its replies, so without this every
# fresh clone downloads ~3 GB again. Installs read only the wheelhouse (--no-index): what the
# virtualenv holds is what was downloaded once, whatever the registry serves later.
# Keyed by the two distributions' [project] tables (what they depend on) and the images' versions:
# a lint setting in pyproject.toml downloads nothing again.
WHEELHOUSE := $(BUILD_CACHE)/wheels-$(shell { sed -n '/^\[project\]/,/^\[project.scripts\]/p' pyproject.toml kubectl/pyproject.toml; cat images/versions.env; } | sha256sum | cut -c1-12)
PIP_LOCAL := $(PY) -m pip install --quiet --no-index --find-links $(WHEELHOUSE)

# Reinstalled when pyproject.toml or the images' versions change.
$(VENV)/.installed: pyproject.toml kubectl/pyproject.toml images/versions.env
	@echo "[install] Python packages into $(VENV) (first time on a machine: ~3 GB of wheels into $(WHEELHOUSE), CPU torch among them; several minutes)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# trl-cpu: torch and TRL for the TRL engine's CPU tests (PyPI's Linux torch, ~2.7 GB, once);
	# verl-cpu: what verl's dataset, reward loop, agent loop and checkpoint code import.
	# gguf: the GGUF export's reader and the converter's sentencepiece.
	# verl comes without its declared dependencies (vLLM and the CUDA stack), which CPU tests do
	# not need; setuptools and wheel build the editable installs. Sources become wheels here, so
	# that installing needs no registry. One line per package it fetches.
	if [[ ! -f $(WHEELHOUSE)/.complete ]]; then \
	  rm -rf $(WHEELHOUSE).part && mkdir -p $(WHEELHOUSE).part && \
	  $(PY) -m pip download --progress-bar off -d $(WHEELHOUSE).part '.[$(EXTRAS)]' 'setuptools>=69' wheel | { grep --line-buffered -E '^(Collecting|Saved)' | cut -c1-120 || true; } && \
	  $(PY) -m pip download --quiet --no-deps -d $(WHEELHOUSE).part 'verl==$(VERL_VERSION)' && \
	  shopt -s nullglob && sources=($(WHEELHOUSE).part/*.tar.gz $(WHEELHOUSE).part/*.zip) && \
	  if (( $${#sources[@]} )); then $(PY) -m pip wheel --quiet --no-deps -w $(WHEELHOUSE).part "$${sources[@]}" && rm -f "$${sources[@]}"; fi && \
	  touch $(WHEELHOUSE).part/.complete && rm -rf $(WHEELHOUSE) && mv $(WHEELHOUSE).part $(WHEELHOUSE); \
	fi
	@echo "[install] from the wheelhouse $(WHEELHOUSE)"
	$(PIP_LOCAL) -e '.[$(EXTRAS)]'
	# The plugin is its own distribution (kubectl/pyproject.toml); its dependencies came with [dev].
	$(PIP_LOCAL) --no-deps -e kubectl
	$(PIP_LOCAL) --no-deps 'verl==$(VERL_VERSION)'
	touch $@

# The volume provisioner runs from the virtualenv (lightkube).
cluster-up: install
	hack/cluster-up.sh

cluster-down:
	hack/cluster-down.sh

# The main job on the local default (hack/demo.sh): a cluster of its own, the operator and CPU
# trainer images built, a real node for the cpu pool, `helm install` (the operator as a pod of its
# image), and examples/colours-cpu.yaml trained for real in Ray pods until Succeeded. The
# virtualenv only (llama.cpp's GGUF tools, which the demo's job does not use, build at `make
# install`), installed in the background while the cluster's binaries build (hack/demo.sh).
demo:
	hack/demo.sh

demo-down:
	source hack/demo-env.sh && hack/cluster-down.sh

# The suite's two tiers, by folder (tests/unit/test_tiers.py keeps every folder of tests/ in one):
# what needs no cluster (the pure code, verl's and TRL's own code on tiny models, the benchmarks'
# own code), run UNIT_WORKERS at a time; and what runs against the local cluster, its real node or
# the container engine, one at a time (they share one cluster and this machine's cores).
UNIT_TESTS := tests/unit tests/benchmarks
CLUSTER_TESTS := tests/integration tests/e2e tests/containers tests/cluster

# The inner loop: the first tier, each test within UNIT_TIMEOUT seconds. `make test` runs the same
# tests again, with the rest.
UNIT_WORKERS ?= 2
UNIT_TIMEOUT ?= 120
unit: install
	rc=0; $(PY) -m pytest -q -m "not cluster" -n $(UNIT_WORKERS) --timeout=$(UNIT_TIMEOUT) -p no:cacheprovider $(PYTEST_ARGS) $(UNIT_TESTS) || rc=$$?; \
	if [[ $$rc -eq 5 ]]; then echo "make unit: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

check: lint unit

# The one test command (CI runs it through .ci/run): lint first (seconds), then the local cluster
# with its real node (hack/real-backend-up.sh: the operator and CPU trainer images built while the
# cluster starts, then the kubelet and containerd; root), Kueue's controller for its tests (built
# once per version into the build cache, like the cluster's binaries), then both tiers: the first
# UNIT_WORKERS at a time, then the cluster's one at a time, the real-pod tests (GRPO_REAL_NODE=1)
# and the images' containers included, each ending with its slowest tests (where the suite's time
# goes). Either tier's pytest exit code 5, "no tests ran", fails too. The real node stops
# afterwards (one NetworkPolicy enforcer per machine: `make demo` runs its own), and under CI the
# cluster too, so no process outlives the job.
test: lint
	@echo "[$$(date +%T)] make test: the local cluster, its real node and our images"
	hack/real-backend-up.sh
	@echo "[$$(date +%T)] make test: Kueue's controller"
	hack/addons/build-kueue.sh
	@echo "[$$(date +%T)] make test: the tests that need no cluster, $(UNIT_WORKERS) at a time"
	unit=0; GRPO_REAL_NODE=1 GRPO_TEST_CLUSTER=local $(PY) -m pytest -m "not cluster" -n $(UNIT_WORKERS) --durations=15 $(PYTEST_ARGS) $(UNIT_TESTS) || unit=$$?; \
	echo "[$$(date +%T)] make test: the tests of the cluster, its real node and our images"; \
	rc=0; GRPO_REAL_NODE=1 GRPO_TEST_CLUSTER=local $(PY) -m pytest --durations=30 $(PYTEST_ARGS) $(CLUSTER_TESTS) || rc=$$?; \
	hack/node-down.sh >/dev/null || true; \
	if [[ -n "$${CI:-}" ]]; then hack/cluster-down.sh || true; fi; \
	echo "[$$(date +%T)] make test: done (pytest exit codes: $$unit without the cluster, $$rc with it)"; \
	for code in $$unit $$rc; do \
	  if [[ $$code -eq 5 ]]; then echo "make test: pytest collected no tests in a tier" >&2; exit 1; fi; \
	done; \
	if [[ $$unit -ne 0 ]]; then exit $$unit; fi; \
	exit $$rc

# The images tier: the operator and CPU trainer images built (cached by layer) and run as
# containers by the engine (started here if none runs), the operator against the local cluster.
test-images: cluster-up
	$(MAKE) images IMAGES="operator cpu"
	rc=0; GRPO_TEST_CLUSTER=local $(PY) -m pytest $(PYTEST_ARGS) tests/containers || rc=$$?; \
	if [[ $$rc -eq 5 ]]; then echo "make test-images: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

# The real node of the cpu pool (hack/node-up.sh): a kubelet with containerd joined to the local
# cluster, running pods of the operator and CPU trainer images (built first, cached by layer).
# Opt-in: the tests marked real_node are collected only with GRPO_REAL_NODE=1.
node-up: install
	hack/real-backend-up.sh

node-down:
	hack/node-down.sh

test-real-node: node-up
	rc=0; GRPO_REAL_NODE=1 GRPO_TEST_CLUSTER=local $(PY) -m pytest $(PYTEST_ARGS) -m real_node tests || rc=$$?; \
	if [[ $$rc -eq 5 ]]; then echo "make test-real-node: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

# The kind backend: hack/kind-up.sh makes the node image here if it is missing
# (hack/kind-node-image.sh: Debian's packages and binaries built from Go modules; 43 min cold on 2
# busy cores, most of it kube-network-policies' Go build; instant once built), starts kind's own
# dockerd beside any other engine, creates a one-node kind cluster (6 min to a ready backend at
# load 20-34), cordons its node and starts the KWOK pools, KubeRay, the fake Ray job API, the Ray
# head and the volume provisioner against its API server. It then runs the e2e tier (tests/e2e:
# helm install of the chart, the examples, each job's whole life, the real path's training and
# its fail-fast cases; the real-pod module needs the local cluster's real node and is deselected)
# and the backend's own checks (tests/cluster/test_kind.py: the
# control plane, CoreDNS, kube-proxy and kindnet are kind's, from the images made here). Not the whole suite:
# the unit and integration tiers do not depend on the backend, and on 2 cores the whole suite on
# kind takes over an hour. Needs root (kind's dockerd).
KIND_CLUSTER_DIR = $(shell . hack/lib.sh && . hack/kind-lib.sh && echo "$$KIND_CLUSTER_DIR")
e2e-kind: install
	hack/kind-up.sh
	rc=0; GRPO_TEST_CLUSTER=kind GRPO_KIND_CLUSTER_DIR=$(KIND_CLUSTER_DIR) \
	  $(PY) -m pytest $(PYTEST_ARGS) tests/e2e tests/cluster/test_kind.py || rc=$$?; \
	hack/kind-down.sh || true; \
	if [[ $$rc -eq 5 ]]; then echo "make e2e-kind: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

# kind's node image alone (hack/kind-node-image.sh), cached in kind's own engine.
kind-node-image:
	hack/kind-node-image.sh

# The import contracts (pyproject.toml [tool.importlinter]) keep the layers: the operator never
# imports the trainer, engines never import the driver or the CLI, no import circles. The docs
# check keeps links whole and the README short; mypy checks the types (pyproject.toml [tool.mypy]),
# its cache in the build cache so a fresh clone starts warm.
lint: install
	@echo "[$$(date +%T)] make lint"
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	PYTHONPATH=operator:trainer:kubectl $(VENV)/bin/lint-imports --no-cache
	$(PY) hack/check_docs.py
	MYPY_CACHE_DIR=$(BUILD_CACHE)/mypy $(VENV)/bin/mypy

# Starts the engine if none runs (hack/engine-up.sh). IMAGES="operator cpu" builds those; REGISTRY,
# TAG, PLATFORM, PUSH=1 and BASE_IMAGES pass through (images/build.sh).
images: engine-up
	images/build.sh $(IMAGES)

# The container engine: one already running is used as it is; otherwise Debian's docker.io is
# installed (root) and dockerd started, its pid in .cache/engine (hack/engine-up.sh).
engine-up:
	hack/engine-up.sh

engine-down:
	hack/engine-down.sh

base-images: engine-up
	images/base.sh debian python
