"""Shared fixtures: small datasets built by the tests themselves."""

from __future__ import annotations

import os

import numpy as np
import pytest

from narbench.data.dataset import GraphDataset, stratified_split
from narbench.data.graph import ArchGraph


def chain_graph(name: str, family: str, coarse: str, block: list[int], repeats: int, *, skip: bool) -> ArchGraph:
    """A stem (op 0), `repeats` copies of `block` (with an optional residual edge), a head (op 1)."""
    ops = [0]
    edges = []
    prev = 0
    for _ in range(repeats):
        start = prev
        for op in block:
            ops.append(op)
            edges.append((prev, len(ops) - 1))
            prev = len(ops) - 1
        if skip:
            edges.append((start, prev))
    ops.append(1)
    edges.append((prev, len(ops) - 1))
    return ArchGraph(ops=np.array(ops), edges=np.array(edges).T, name=name, family=family, coarse=coarse, source="test")


def edge_list_graph(ops, edges, *, name: str = "g", family: str = "f", coarse: str = "c") -> ArchGraph:
    """A hand-built graph: op ids and a list of (producer, consumer) edges."""
    return ArchGraph(ops=np.array(ops), edges=np.array(edges, dtype=np.int64).reshape(-1, 2).T, name=name,
                     family=family, coarse=coarse)


def toy_graphs(per_family: int = 12, seed: int = 0) -> list[ArchGraph]:
    """Four families whose blocks differ, each with varying depth; coarse labels cnn/attention."""
    rng = np.random.default_rng(seed)
    blocks = {
        "resnetish": ([2, 3, 4, 2, 3], True, "cnn"),
        "vggish": ([2, 3, 4], False, "cnn"),
        "vitish": ([5, 6, 7, 6, 5], True, "attention"),
        "mlpish": ([6, 4], False, "other"),
    }
    graphs = []
    for fam, (block, skip, coarse) in blocks.items():
        depths = rng.choice(np.arange(2, 2 + 3 * per_family), size=per_family, replace=False)
        for i, d in enumerate(depths):
            graphs.append(chain_graph(f"{fam}-{i}", fam, coarse, block, int(d), skip=skip))
    return graphs


@pytest.fixture
def toy_dataset() -> GraphDataset:
    graphs = toy_graphs()
    split = stratified_split([g.family for g in graphs], test_size=0.25, seed=0)
    vocab = [f"op{i}" for i in range(8)]
    return GraphDataset("toy", "0", vocab, graphs, "0" * 64, split)


#: The content hand-made result files in the tests claim (`dataset.sha256`); see `hand_made_datasets`.
HAND_MADE_SHA256 = "ab" * 32


@pytest.fixture(autouse=True)
def hand_made_datasets(monkeypatch):
    """Declare the data the tests' hand-made result files claim, so that validation accepts them.

    The leaderboard accepts results only on registered datasets with their pinned content
    (`narbench.validation`); hand-made files say `nas` / `real` 1.0 with sha256 HAND_MADE_SHA256.
    Declared here, as any tool declares a toy dataset (`datasets=`), beside the registered ones.
    """
    from narbench.eval import validation

    registered = validation.known_datasets
    hand_made = [validation.KnownDataset(name, "1.0", HAND_MADE_SHA256, ("standard", "unseen", "crossimpl")) for name in ("nas", "real")]
    monkeypatch.setattr(validation, "known_datasets", lambda: [*registered(), *hand_made])
    from narbench.leaderboard import clusters  # their queries: independent, one cluster each (no dataset to ask)

    monkeypatch.setattr(clusters, "DECLARED", {**clusters.DECLARED, **{
        (d.name, d.version, d.sha256): clusters.one_per_query for d in hand_made}})
    return hand_made


PLUGIN_DIR = __import__("pathlib").Path(__file__).resolve().parent / "plugin"


@pytest.fixture
def unchecked_scores(monkeypatch):
    """Hand-made result files that claim a registered dataset's pinned content (real 2.2) with arbitrary
    per-query scores: validation checks them as on data it cannot load (no `KnownDataset.load`), since
    against the real data (`narbench.eval.bounds`) their scores are impossible, as a forgery's would be."""
    from dataclasses import replace

    from narbench.eval import validation

    declared = validation.known_datasets
    monkeypatch.setattr(validation, "known_datasets", lambda: [replace(d, load=None) for d in declared()])


@pytest.fixture
def plugin(monkeypatch, tmp_path):
    """Install the test-only distribution `narbench-testplugin` (on sys.path) and a fresh cache."""
    monkeypatch.syspath_prepend(str(PLUGIN_DIR))
    monkeypatch.setenv("NARBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("NARBENCH_NO_PROGRESS", "1")
    return PLUGIN_DIR


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if a run gets as far as loading data or building its trainer."""
    import narbench.harness.runner as runner

    def forbidden(*a, **k):
        raise AssertionError("the run went past its pre-flight checks")

    monkeypatch.setattr(runner, "load_dataset", forbidden)
    monkeypatch.setattr(runner, "Trainer", forbidden)


# ------------------------------------------------------------------ the entry points the session sees
# `python -m pytest` puts the checkout first on sys.path, and `pip install -e .` leaves a
# `narbench.egg-info` there: importlib.metadata reads the project's entry points from the first
# metadata folder it finds, that one, not the installed dist-info. Stop 44's CI lost every entry
# point after tests/test_protocol.py and 60 tests failed for it; these report what the session reads
# and stop the run, naming the module after which the project's entry points went missing.

SHIPPED = {"encoder": "gcn", "splitter": "none", "dataset": "nas"}


def _metadata_seen() -> str:
    from importlib.metadata import distributions

    seen = [f"{getattr(d, '_path', '?')} ({sum(ep.group.startswith('narbench.') for ep in d.entry_points)} entry points)"
            for d in distributions() if (d.metadata["Name"] or "").lower() == "narbench"]
    return "; ".join(seen) or "no narbench distribution on sys.path"


def _missing_entry_points() -> list[str]:
    from narbench.core import registry

    return [f"{kind} {name!r}" for kind, name in SHIPPED.items() if name not in registry.names(kind)]


def pytest_report_header(config):
    return f"narbench metadata read from: {_metadata_seen()}"


@pytest.fixture(autouse=True, scope="module")
def _entry_points_stay(request):
    """After each test module: the shipped entry points are still registered, else stop the run."""
    yield
    missing = _missing_entry_points()
    if missing:
        pytest.exit(f"after {request.module.__name__} the shipped entry points {', '.join(missing)} are gone; "
                    f"narbench metadata now read from: {_metadata_seen()}", returncode=3)


@pytest.fixture
def read_only_folder(tmp_path, monkeypatch):
    """(folder, reason): an empty folder narbench cannot write in, and the reason its one-line error gives.
    Root writes anywhere, so there the preflight's probe file stands in for a read-only file system."""
    import errno
    import stat

    out = tmp_path / "ro"
    out.mkdir()
    if os.geteuid() == 0:
        import narbench.harness.preflight as preflight

        def read_only(*a, **k):
            raise OSError(errno.EROFS, "Read-only file system")

        monkeypatch.setattr(preflight.tempfile, "mkstemp", read_only)
        reason = "Read-only file system"
    else:
        out.chmod(stat.S_IRUSR | stat.S_IXUSR)
        reason = "Permission denied"
    try:
        yield out, reason
    finally:
        out.chmod(0o755)

