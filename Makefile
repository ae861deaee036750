# Two entry points for a fresh machine: `make run` (set up + main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test test-fast bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -e ".[test]"
	touch $(STAMP)

setup: $(STAMP)

## The main job: benchmark on the default dataset (nas), quick profile, CPU or GPU.
run: setup
	$(BIN)/narbench run --encoder ours --splitter motif --dataset nas

## The whole test suite (GPU tests skip themselves without CUDA).
test: setup
	$(BIN)/python -m pytest -ra

## Without the tests marked slow.
test-fast: setup
	$(BIN)/python -m pytest -ra -m "not slow"

bench: setup
	$(BIN)/python benchmarks/bench.py

clean:
	rm -rf $(VENV) build dist *.egg-info
