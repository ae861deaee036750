"""Reading, validating and grouping result files (`narbench.leaderboard.records`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from narbench import leaderboard as lb
from tests.handmade import write_result


def test_collect_validates_and_groups_over_seeds(tmp_path):
    out = tmp_path / "res"
    for s, v in enumerate((0.5, 0.6, 0.7)):
        write_result(out, "gcn", "none", s, np.full(10, v))
    # an older run with seed 0 is superseded by the later one: still n = 3
    write_result(out, "gcn", "none", 0, np.full(10, 0.0), created="2025-01-01T00:00:00+00:00", tag="-old")
    recs = lb.collect([out])
    assert len(recs) == 4 and all(r.path.suffix == ".json" for r in recs)
    assert all(len(r.per_query["ndcg@20"]) == 10 for r in recs)  # the sidecar, read once, validated
    sel = lb.select_runs(recs)
    (key,) = sel
    assert key == lb.Key("nas", "standard", "quick", "cpu", "family", "gcn", "none", "ce+cl", "scratch")
    assert {s: round(r.result.metrics["ndcg@20"], 6) for s, r in sel[key].items()} == {0: 0.5, 1: 0.6, 2: 0.7}


def test_device_kind_objective_and_init_split_groups(tmp_path):
    out = tmp_path / "res"
    write_result(out, "ours", "motif", 0, np.full(5, 0.5), device="cuda (NVIDIA H100 80GB HBM3)")
    write_result(out, "ours", "motif", 0, np.full(5, 0.5), device="cpu", tag="-cpu")
    write_result(out, "ours", "motif", 0, np.full(5, 0.5), objective="cl")
    write_result(out, "ours", "motif", 0, np.full(5, 0.5), init_from="runs/a.pt", tag="-init")
    keys = sorted((k.device, k.objective, k.init) for k in lb.select_runs(lb.collect([out])))
    assert keys == [("cpu", "ce+cl", "pretrained"), ("cpu", "ce+cl", "scratch"), ("cpu", "cl", "scratch"),
                    ("cuda", "ce+cl", "scratch")]


def test_results_on_different_dataset_contents_are_never_averaged(tmp_path, plugin):
    """`toy` (a registered third-party dataset) pins no content: two contents of it are two datasets."""
    out = tmp_path / "res"
    for s in range(2):
        write_result(out, "gcn", "none", s, np.full(10, 0.5), dataset="toy", version="0")
        write_result(out, "gcn", "none", s, np.full(10, 0.9), dataset="toy", version="0", sha="cd" * 32, tag="-new")
    write_result(out, "gcn", "none", 0, np.full(10, 0.7), dataset="real")
    df = lb.aggregate(lb.collect([out]))
    rows = {r["dataset"]: (r["n"], r["ndcg@20 mean"]) for _, r in df.iterrows()}
    assert rows == {"toy 0 (abababab)": (2, pytest.approx(0.5)), "toy 0 (cdcdcdcd)": (2, pytest.approx(0.9)),
                    "real": (1, pytest.approx(0.7))}


def test_malformed_file_or_missing_folder_is_named(tmp_path):
    out = tmp_path / "res"
    write_result(out, "gcn", "none", 0, np.full(5, 0.5))
    bad = out / "broken.json"
    bad.write_text("{not json")
    with pytest.raises(lb.RejectedResultsError, match="broken.json: not a valid narbench result file"):
        lb.collect([out])
    bad.write_text(json.dumps({"run_id": "x"}))
    with pytest.raises(ValueError, match="broken.json"):
        lb.collect([out])
    with pytest.raises(FileNotFoundError, match="nowhere"):
        lb.collect([tmp_path / "nowhere"])


def test_runs_on_two_versions_of_a_query_only_part_are_labelled_apart(tmp_path):
    """crossimpl 2.0 and 2.1.1 runs share the corpus file but not the queries: never averaged together,
    and the standard split's rows keep their plain label."""
    import numpy as np

    from narbench import leaderboard as lb
    from tests.handmade import HAND_MADE_SHA256, write_result

    q = np.linspace(0.2, 0.9, 8)
    for part, tag in (("a" * 64, "old"), ("b" * 64, "new")):
        write_result(tmp_path, "wl", "none", 0, q, dataset="real", split="crossimpl", tag=tag,
                     parts={"real": HAND_MADE_SHA256, "crossimpl": part})
    write_result(tmp_path, "wl", "none", 0, q, dataset="real", split="standard",
                 parts={"real": HAND_MADE_SHA256, "crossimpl": "b" * 64})
    records = lb.collect([tmp_path])
    labels = sorted((r.result.split, r.dataset) for r in records)
    assert labels == [("crossimpl", "real [crossimpl aaaaaaaa]"), ("crossimpl", "real [crossimpl bbbbbbbb]"),
                      ("standard", "real")]
