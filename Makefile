# Two entry points for a fresh machine: `make run` (set up + main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# Which PyTorch build: the CPU build where this machine has no CUDA device (no working
# `nvidia-smi`, no /dev/nvidia0), else the CUDA build. `CPU=1` / `GPU=0` force the CPU build,
# `CPU=0` / `GPU=1` the CUDA build. One install stamp per build, so asking for the other build
# switches the virtual environment in place (no `make clean`): 1.7 GB with the CPU build, 6.2 GB
# with the CUDA libraries.
HAVE_CUDA := $(shell { nvidia-smi -L >/dev/null 2>&1 || test -e /dev/nvidia0; } && echo 1)
ifeq ($(CPU),1)
  BUILD := cpu
else ifeq ($(CPU),0)
  BUILD := cuda
else ifeq ($(GPU),1)
  BUILD := cuda
else ifeq ($(GPU),0)
  BUILD := cpu
else ifeq ($(HAVE_CUDA),1)
  BUILD := cuda
else
  BUILD := cpu
endif
WHY_cpu := $(if $(CPU)$(GPU),asked for,no CUDA device found on this machine; GPU=1 installs the CUDA build)
WHY_cuda := $(if $(CPU)$(GPU),asked for,a CUDA device was found; CPU=1 installs the CPU build)
STAMP := $(VENV)/.installed-$(BUILD)
# The CPU build is installed and checked by tools/install_torch.py: TORCH_CPU (the requirement)
# alone (--no-deps) from PyTorch's CPU wheel index TORCH_CPU_INDEX when it answers, its
# dependencies from the default index; else with plain pip (this project's machines keep the +cpu
# wheel in pip's find-links); then it fails unless torch.version.cuda is None and no
# nvidia-*/triton/cuda-* package is left, and says where torch came from. TORCH_CPU_INDEX= skips
# the index. Every install is constrained to the versions CI tested (CONSTRAINTS, constraints.txt;
# CONSTRAINTS= installs without them), pip itself first.
TORCH_CPU ?= torch==2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
CONSTRAINTS ?= constraints.txt
PIN := $(if $(CONSTRAINTS),-c $(CONSTRAINTS))

.PHONY: setup run test test-fast bench clean

$(VENV)/.installed-cpu: pyproject.toml tools/install_torch.py $(CONSTRAINTS)
	@echo "make: installing PyTorch's CPU build ($(WHY_cpu))"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	rm -f $(VENV)/.installed-*
	$(BIN)/python -m pip install $(PIN) --upgrade pip
	$(BIN)/python tools/install_torch.py --torch "$(TORCH_CPU)" --index "$(TORCH_CPU_INDEX)" \
		--editable ".[test]" --why "$(WHY_cpu)" --constraint "$(CONSTRAINTS)"
	touch $@

$(VENV)/.installed-cuda: pyproject.toml $(CONSTRAINTS)
	@echo "make: installing PyTorch's CUDA build ($(WHY_cuda))"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	rm -f $(VENV)/.installed-*
	$(BIN)/python -m pip install $(PIN) --upgrade pip
	$(BIN)/python -c "from importlib.metadata import version; assert '+cpu' in version('torch')" 2>/dev/null \
		&& $(BIN)/python -m pip uninstall -y torch || true
	$(BIN)/python -m pip install $(PIN) -e ".[test]"
	touch $@
	@$(BIN)/python -c "from importlib.metadata import version; print(f'make: installed PyTorch {version(\"torch\")}, the CUDA build, in $(VENV)')"

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
	$(BIN)/python -m benchmarks.speed.bench

clean:
	rm -rf $(VENV) build dist *.egg-info
