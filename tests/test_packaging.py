"""The shipped encoders and splitters import under the narbench namespace from a wheel too."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_editable_install_maps_baselines_and_splitters():
    import narbench.baselines.gnn
    import narbench.splitters.none

    assert Path(narbench.baselines.gnn.__file__).resolve().parent == ROOT / "baselines"
    assert Path(narbench.splitters.none.__file__).resolve().parent == ROOT / "splitters"


def source_copy(dest: Path) -> Path:
    """What a wheel is built from, copied: building in the checkout would write a `narbench.egg-info`
    there, which `python -m pytest` (checkout first on sys.path) then reads the entry points from."""
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    for name in ("narbench", "baselines", "splitters"):
        shutil.copytree(ROOT / name, dest / name, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    return dest


@pytest.mark.slow
def test_wheel_install_imports_namespaced_packages(tmp_path):
    wheel_dir, site = tmp_path / "wheel", tmp_path / "site"
    pip = [sys.executable, "-m", "pip"]
    before = sorted(p.name for p in ROOT.glob("*.egg-info"))
    src = source_copy(tmp_path / "src")
    subprocess.run(pip + ["wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheel_dir), str(src)],
                   check=True, capture_output=True)
    assert sorted(p.name for p in ROOT.glob("*.egg-info")) == before  # the checkout's metadata untouched
    wheel = next(wheel_dir.glob("narbench-*.whl"))
    subprocess.run(pip + ["install", "-q", "--no-deps", "--target", str(site), str(wheel)], check=True,
                   capture_output=True)
    assert not (site / "baselines").exists() and not (site / "splitters").exists()
    code = (
        "import narbench.baselines.gnn, narbench.splitters.none, narbench.datasets.nas;"
        "from importlib.metadata import entry_points;"
        "print(narbench.baselines.gnn.__file__);"
        "print(sorted(e.name for e in entry_points(group='narbench.encoders') if e.dist.name == 'narbench'));"
        "from narbench.leaderboard import load_paper; print(len(load_paper()))"
    )
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {code}"],
                         check=True, capture_output=True, text=True, cwd=tmp_path).stdout.splitlines()
    assert out[0].startswith(str(site))
    assert {"gcn", "gat"} <= set(eval(out[1]))
    assert out[2] == "22"  # the paper's numbers ship as package data
