"""Hand-made result files shared by the leaderboard tests."""

from __future__ import annotations

import numpy as np
import pytest

from tests.handmade import write_result

N_QUERIES = 80


def base(seed: int) -> np.ndarray:
    """Per-query scores of a good encoder for one seed: uniform in [0.6, 1.0)."""
    return np.random.default_rng(seed).uniform(0.6, 1.0, N_QUERIES)


@pytest.fixture
def results(tmp_path):
    """Table 1 on nas, 3 seeds: ours best; gat identical to ours per query; gcn clearly worse."""
    out = tmp_path / "res"
    for s in range(3):
        q = base(s)
        write_result(out, "ours", "motif", s, q)
        write_result(out, "gat", "none", s, q)
        write_result(out, "gcn", "none", s, q - 0.3)
        write_result(out, "random", "none", s, np.full(N_QUERIES, 0.1) + 0.01 * s)
        write_result(out, "ours", "node-number", s, q - 0.05)
    return out


@pytest.fixture(autouse=True)
def real_pins_declared(monkeypatch):
    """Some tests here write files that claim `real`'s pinned contents with a few made-up queries: those
    queries are declared independent (one cluster each), as `hand_made_datasets` declares its own. The
    committed results (tests/test_readme_claims.py, outside this folder) keep their dataset's clusters."""
    from narbench.datasets.real import RealDataset, Real22Dataset
    from narbench.leaderboard import clusters

    for cls in (RealDataset, Real22Dataset):
        monkeypatch.setitem(clusters.DECLARED, (cls.name, cls.version, cls.expected_sha256), clusters.one_per_query)
