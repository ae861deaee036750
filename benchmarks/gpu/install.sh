#!/usr/bin/env bash
# Install what a lent GPU machine lacks, without the network (issues 60 and 62): the carried wheels
# (WHEELS, default .whl: ranx and its needs, zstandard; py3.12) and narbench itself (from a copy of the checkout,
# `pip --no-deps --target`) into SITE (default /tmp/site); then PYTHONPATH names SITE and NARBENCH_CACHE
# (default /tmp/nbcache) holds the carried nas graphs (.gpucache/nas-1.0.narg). Sourced from the checkout's
# root by lease.sh and paper_sweep.sh (INSTALL=1); returns 3 when an install fails or when a package narbench
# needs is missing (the lease of 2026-11-30 lost its first call to a missing zstandard: every run failed at
# its first dataset read), naming what to carry. benchmarks/gpu/wheels.sh downloads the wheels here.
#
#   . benchmarks/gpu/install.sh || exit 3
site=${SITE:-/tmp/site}
py=${PYTHON:-python3}
$py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    "${WHEELS:-.whl}"/*.whl || return 3
_copy=$(mktemp -d)
cp -r narbench baselines splitters pyproject.toml README.md "$_copy"/
$py -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target "$site" "$_copy" || return 3
# every package narbench declares (extras aside) must be there, from the image or the carried wheels
PYTHONPATH=$site $py benchmarks/gpu/needs.py || return 3
export PYTHONPATH=$site
export NARBENCH_CACHE=${NARBENCH_CACHE:-/tmp/nbcache}
mkdir -p "$NARBENCH_CACHE"
[ -f .gpucache/nas-1.0.narg ] && cp .gpucache/nas-1.0.narg "$NARBENCH_CACHE"/
return 0
