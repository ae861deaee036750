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
