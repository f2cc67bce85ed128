# The README's first two commands: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=
# Test extras: the framework adapters are tested on their real libraries (CPU builds).
TEST_EXTRAS ?= test,torch,hf,lightning

.PHONY: run test bench soak generate install install-test clean

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

# Starts the exporter on :9435; without npu-smi on PATH it runs the built-in simulator.
run: install
	$(BIN)/cann-exporter serve --simulate auto $(ARGS)

test: install-test
	$(BIN)/python -m pytest -q $(ARGS)

bench: install-test
	$(BIN)/python -m benchmarks $(ARGS)

# Opt-in soak: 16 chips, 8 hook jobs, scrapes and faults for SOAK_SECONDS (default 1200); writes benchmarks/SOAK.md.
soak: install-test
	$(BIN)/python -m benchmarks.soak $(ARGS)

# alerts/ and grafana/ from exporter/generate/thresholds.yaml, then the Kubernetes copies of them.
generate: install
	$(BIN)/cann-exporter generate
	$(BIN)/python deploy/kubernetes/generate.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
