#!/usr/bin/env bash
# The wheels a lent GPU machine lacks (its image: Python 3.12, torch, torch-geometric, numba, pandas, scikit-learn,
# rich, matplotlib; /work/.library/device/KINDS.md lists it), downloaded here into DIR (default .whl, which
# .git/info/exclude should ignore) for `carry`: ranx and what `import ranx` loads beyond the image (ir_datasets,
# cbor2, lz4, orjson), and zstandard (narbench's compressed files). Versions: those of this checkout's .venv.
#
#   bash benchmarks/gpu/wheels.sh [DIR]
set -euo pipefail
dir=${1:-.whl}
py=${PYTHON:-.venv/bin/python}
mkdir -p "$dir"
for name in ranx ir_datasets cbor2 lz4 orjson zstandard; do
    version=$($py -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name")
    $py -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$dir" "$name==$version"
done
ls "$dir"
