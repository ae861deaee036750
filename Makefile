# Two entry points for a fresh machine: `make run` (set up + main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# CPU-only machines: `make run CPU=1` (or `make test CPU=1`) installs PyTorch's CPU build first
# (a 1.7 GB virtual environment instead of 6.2 GB with the CUDA libraries). TORCH_CPU names that
# build: the default is the CPU wheel this project's machines keep on local disk; elsewhere use
# TORCH_CPU="torch --index-url https://download.pytorch.org/whl/cpu".
TORCH_CPU ?= torch==2.13.0

.PHONY: setup run test test-fast bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
ifdef CPU
	$(BIN)/python -m pip install $(TORCH_CPU)
endif
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
