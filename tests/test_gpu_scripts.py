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
