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
        "import narbench.baselines.gnn, narbench.splitters.none, narbench.datasets.nas, narbench.cli.run;"
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


def _pins() -> dict[str, str]:
    from packaging.utils import canonicalize_name

    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version and not any(c in version for c in "<>=!~,;"), f"not an exact pin: {line}"
            pins[canonicalize_name(name)] = version
    return pins


def test_constraints_pin_every_runtime_and_test_dependency_within_pyproject_bounds():
    """constraints.txt (the versions CI tested, `make setup`'s -c) pins each dependency exactly, pip too, and
    each pin satisfies pyproject's own bounds (which stay lower bounds: a library's metadata does not pin).
    torch alone is left to pyproject's range and the Makefile: the project supports 2.13-2.15 and a fresh
    CUDA install gets the newest."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = _pins()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for text in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue  # tomli on Python < 3.11
        name = canonicalize_name(req.name)
        if name == "torch":
            assert name not in pins, "torch is chosen by pyproject's range and the Makefile, not pinned"
            continue
        assert name in pins, f"{req.name} is not pinned in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), f"{req.name}=={pins[name]} outside {req.specifier}"
    assert "pip" in pins and "narbench" not in pins


def test_constraints_cover_what_the_dependencies_need():
    """Each installed distribution that narbench[test] needs, directly or not, is pinned (a new transitive
    dependency shows here): the closure of requirements from this environment's metadata."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins, seen, todo = _pins(), set(), [("narbench", frozenset({"test"}))]
    while todo:
        name, extras = todo.pop()
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        key = (canonicalize_name(dist.metadata["Name"]), extras)
        if key in seen:
            continue
        seen.add(key)
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
                todo.append((req.name, frozenset(req.extras)))
    needed = {name for name, _ in seen} - {"narbench", "torch"}  # torch: its range (the test above)
    assert sorted(needed - set(pins)) == []
