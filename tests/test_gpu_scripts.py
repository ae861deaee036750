"""The scripts a lent GPU machine runs (benchmarks/gpu) cannot be run here, so what can be checked is:
they parse, they install through one script, and that script stops on a failed install."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

GPU = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu"
bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@bash
@pytest.mark.parametrize("script", sorted(p.name for p in GPU.glob("*.sh")))
def test_every_gpu_script_parses(script):
    done = subprocess.run(["bash", "-n", str(GPU / script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_lease_and_the_sweep_install_through_one_script():
    for script in ("lease.sh", "paper_sweep.sh"):
        text = (GPU / script).read_text()
        assert ". benchmarks/gpu/install.sh" in text and "pip install" not in text, script


@bash
def test_install_returns_3_when_a_wheel_does_not_install(tmp_path):
    """A failed install stops the lease before any run (rc 3), with PYTHONPATH not pointing at a half-filled site."""
    root = GPU.parents[1]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "broken-0.1-py3-none-any.whl").write_bytes(b"not a zip")
    script = (f'. benchmarks/gpu/install.sh; rc=$?; echo "rc=$rc site=${{PYTHONPATH:-unset}}"')
    done = subprocess.run(["bash", "-c", script], cwd=root, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "SITE": str(tmp_path / "site"), "WHEELS": str(wheels),
                               "PYTHON": shutil.which("python") or "python3", "HOME": str(tmp_path)})
    assert "rc=3 site=unset" in done.stdout, done.stdout + done.stderr


def test_needs_names_what_narbench_declares_and_this_python_lacks():
    """install.sh's check (benchmarks/gpu/needs.py): a missing package is named; markers and extras are read."""
    pytest.importorskip("packaging")
    import importlib.util

    spec = importlib.util.spec_from_file_location("needs", GPU / "needs.py")
    needs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(needs)
    got = needs.missing(["zstandard>=0.21", "numpy>=1.24", "surely-not-a-package-narbench>=1",
                         "tomli>=1.1; python_version < '3.0'", "faiss-cpu>=1.7; extra == 'faiss'"])
    assert got == ["surely-not-a-package-narbench"]
    assert needs.missing(["zstandard>=0.21"]) == []


def test_results_and_snapshots_come_back_in_separate_files():
    """A lease's results must not sit in one tar with the snapshots: a lost part of that tar lost results."""
    text = (GPU / "paper_sweep.sh").read_text()
    results = next(line for line in text.splitlines() if '"$out/results.tar.gz"' in line and "tar -C" in line)
    assert "--exclude=.snapshots" in results
    assert '"$out/snapshots.tar.gz" .snapshots' in text


def test_a_benchmark_child_runs_here_once_cuda_is_initialised(monkeypatch):
    """benchmarks.speed.peer_training._in_child forks on the CPU; after CUDA is initialised (or with fork=False)
    a forked child could not use the GPU, so fn runs in this process."""
    torch = pytest.importorskip("torch")
    from benchmarks.speed import peer_training

    seen: list[int] = []

    def fn(x):
        seen.append(x)
        return x * 2

    assert peer_training._in_child(fn, 1) == 2 and seen == []  # forked: this process's list untouched
    assert peer_training._in_child(fn, 2, fork=False) == 4 and seen == [2]
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert peer_training._in_child(fn, 3) == 6 and seen == [2, 3]


def test_the_epoch_probe_times_steps_and_scales_them_to_a_whole_run(toy_dataset):
    """benchmarks.speed.epoch_probe (lease.sh's PROBES): steps of a probed epoch as the batch size makes them, and
    a whole run's estimate as seconds per step x the steps of a full epoch x the profile's epochs."""
    import math

    from benchmarks.speed.epoch_probe import probe
    from narbench.train.profiles import get_profile

    smoke = get_profile("smoke")
    r = probe("gcn", toy_dataset, "standard", 30, 2, "smoke", "cpu")
    n_train = len(toy_dataset.get_split("standard").train)
    assert r["steps_per_epoch"] == math.ceil(min(30, n_train) / smoke.train.batch_size)
    assert r["train_graphs"] == min(n_train, smoke.max_train)
    assert r["full_steps"] == math.ceil(r["train_graphs"] / smoke.train.batch_size)
    assert r["estimate_train_s"] == pytest.approx(r["seconds_per_step"] * r["full_steps"] * smoke.train.epochs)
    assert 0 < sum(r["phases"].values()) <= r["seconds_per_step"]
    assert math.isnan(r["peak_gib"])  # no CUDA memory on a CPU run


def test_warming_the_encodings_fills_the_cache_a_gps_run_reads(toy_dataset, tmp_path, monkeypatch):
    """benchmarks/gpu/warm_encodings.py (lease.sh's WARM_GPS): every graph's encoding is in the on-disk cache after
    it, under the kind a gps encoder reads, with the values that encoder computes itself."""
    import importlib.util

    import numpy as np

    from narbench.baselines.gnn import random_walk_pe
    from narbench.core import registry
    from narbench.train.encodingcache import EncodingCache, source_digest
    from narbench.train.profiles import get_profile

    monkeypatch.setenv("NARBENCH_CACHE", str(tmp_path / "cache"))
    spec = importlib.util.spec_from_file_location("warm_encodings", GPU / "warm_encodings.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.warm(toy_dataset, jobs=2)
    enc = registry.load("encoder", "gps")(8, 4, get_profile("smoke"))
    kind = f"rwpe:L{enc.walk_length}:{source_digest(random_walk_pe)}"
    hashes = [g.content_hash() for g in toy_dataset.graphs]
    cache = EncodingCache()
    assert cache.path.is_relative_to(tmp_path) and cache.path.is_file()
    stored = cache.get_arrays(kind, hashes)
    assert set(stored) == set(hashes)
    enc.encoding_cache = None  # computed afresh, without the cache
    for g, pe in zip(toy_dataset.graphs[:5], enc.positional_encodings(toy_dataset.graphs[:5])):
        np.testing.assert_array_equal(stored[g.content_hash()], pe.numpy())
