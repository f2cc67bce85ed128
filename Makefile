# The README's first two commands: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=
# Test extras: the framework adapters are tested on their real libraries (CPU builds).
TEST_EXTRAS ?= test,torch,hf,lightning

.PHONY: run test lint test-under-load example bench soak generate image install install-test bytecode clean

$(BIN)/cann-exporter: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	@touch $@

install: $(BIN)/cann-exporter

$(VENV)/.test-deps: $(BIN)/cann-exporter pyproject.toml
	$(BIN)/pip install --quiet -e '.[$(TEST_EXTRAS)]'
	@touch $@

install-test: $(VENV)/.test-deps

# An editable install is not byte-compiled: until a simulated npu-smi or hccn_tool call has
# written them (a stand-in runs isolated, so PYTHONDONTWRITEBYTECODE does not stop it), and for
# good where the tree is read-only, every call compiles the simulator's modules again: more than
# half of its CPU. Only changed files are compiled again.
bytecode: install
	@$(BIN)/python -m compileall -q exporter

# The demo: the exporter on :9435, on the built-in simulator when npu-smi is not on PATH and the
# machine shows no NPU (it says so in its first log lines). A real node runs `cann-exporter serve`, which never simulates.
run: install bytecode
	$(BIN)/cann-exporter serve --simulate auto $(ARGS)

# Installs the Debian packages the real-tool tests need when it can; otherwise says what will be skipped.
# TEST_WORKERS pytest-xdist workers (0: one process), a file per unit; the end-to-end Prometheus
# stacks one after another on one worker (tests/support/groups.py).
TEST_WORKERS ?= 2
test: install-test bytecode lint
	@scripts/install-test-packages
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadscope $(ARGS)

# ruff (lint, and the format every file is in) and mypy, configured in pyproject.toml.
lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The whole suite RUNS times (default 3) with two busy processes per core beside it.
test-under-load: install-test bytecode
	@scripts/install-test-packages
	TEST_WORKERS=$(TEST_WORKERS) scripts/test-under-load $(ARGS)

# The training-hook example: steps to `make run`'s exporter (or a temporary one it starts), then
# the npu_job_* series they became. PyTorch when installed, else a standard-library loop.
example: install bytecode
	$(BIN)/python examples/train_with_hooks.py $(ARGS)

bench: install-test bytecode
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m benchmarks $(ARGS)

# Opt-in soak: 16 chips, 8 hook jobs, scrapes and faults for SOAK_SECONDS (default 1200); writes benchmarks/SOAK.md.
soak: install-test bytecode
	$(BIN)/python -m benchmarks.soak $(ARGS)

# alerts/ and grafana/ from exporter/thresholds/thresholds.yaml, then the Kubernetes copies of them,
# and the runbooks the exporter serves at /runbooks.
# RUNBOOK_URL=https://.../docs/runbooks.md: the alerts link there (cann-exporter generate --runbook-url).
generate: install
	$(BIN)/cann-exporter generate $(if $(RUNBOOK_URL),--runbook-url '$(RUNBOOK_URL)')
	cp docs/runbooks.md exporter/web/runbooks.md
	$(BIN)/python deploy/kubernetes/generate.py

# The container image for both architectures Ascend servers come in (x86_64 and Kunpeng aarch64).
# A multi-platform result must go to a registry (PUSH=1, IMAGE=registry/name:tag) or to Docker's
# containerd image store; PLATFORMS=linux/arm64 builds one.
IMAGE ?= cann-exporter:0.1.0
PLATFORMS ?= linux/amd64,linux/arm64
image:
	docker buildx build --platform $(PLATFORMS) -t $(IMAGE) $(if $(PUSH),--push) .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
