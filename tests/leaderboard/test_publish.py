"""Publishing (`narbench.leaderboard.publish`): what the regenerated folder holds, byte for byte."""

from __future__ import annotations

import numpy as np

from narbench import leaderboard as lb
from tests.handmade import write_result
from tests.leaderboard.conftest import N_QUERIES, base


def test_write_leaderboard_is_byte_identical(results, tmp_path):
    out_a, out_b = tmp_path / "lb_a", tmp_path / "lb_b"
    write_result(out_a / "results", "gat", "none", 3, base(3))  # <out>/results is always read
    write_result(out_b / "results", "gat", "none", 3, base(3))
    ra = lb.write_leaderboard([results], out_a, tsne=False)
    rb = lb.write_leaderboard([results], out_b, tsne=False)
    files = sorted(p.relative_to(out_a) for p in out_a.rglob("*") if p.is_file() and "results" not in p.parts)
    assert [f.as_posix() for f in files][:3] == ["README.md", "aggregate.csv", "aggregate.json"]
    for name in files:
        assert (out_a / name).read_bytes() == (out_b / name).read_bytes(), name
    first = ra.read_bytes()
    assert lb.write_leaderboard([results], out_a, tsne=False).read_bytes() == first == rb.read_bytes()
    text = first.decode()
    assert "plots/table1-nas-standard-quick-cpu-family.png" in text and "## Table 1" in text and "## Table 4" in text
    csv = (out_a / "aggregate.csv").read_text().splitlines()
    assert len(csv) == 1 + 5 and any(",gat,none,ce+cl,scratch,,4,0 1 2 3," in ln for ln in csv)


def test_smoke_is_never_ranked_beside_the_paper_by_default(results, tmp_path):
    """A one-seed smoke result that beats everything: left out, and the README says so."""
    write_result(results, "gcn", "none", 0, np.full(N_QUERIES, 0.99), profile="smoke")
    readme = lb.write_leaderboard([results], tmp_path / "lb", plots=False).read_text()
    assert "smoke" not in (tmp_path / "lb" / "aggregate.csv").read_text()
    assert "Left out: 1 of profile `smoke`" in readme and "0.9900" not in readme
    assert "MAP@20 <= 0.007 for any encoder" not in readme and "with its full corpus" in readme
    readme = lb.write_leaderboard([results], tmp_path / "lb", profiles=("quick", "smoke"), plots=False).read_text()
    smoke = readme[readme.index("### nas · split standard · smoke"):]
    smoke = smoke[:smoke.index("\n\n", smoke.index("|"))]
    assert "| gcn | 1\\* | 0.9900" in smoke and "paper (their data)" not in smoke and "**" not in smoke


def test_stale_figures_are_removed_and_progress_is_reported(results, tmp_path):
    plots = tmp_path / "lb" / "plots"
    plots.mkdir(parents=True)
    (plots / "ndcg-nas-quick-cpu.png").write_bytes(b"old name")
    (plots / "table9-gone.png").write_bytes(b"a block that is gone")
    (plots / "tsne-kept.png").write_bytes(b"t-SNE maps are not drawn this time: left alone")
    steps = []
    lb.write_leaderboard([results], tmp_path / "lb", tsne=False, progress=steps.append)
    assert sorted(p.name for p in plots.iterdir()) == [
        "table1-nas-standard-quick-cpu-family.png", "table2-nas-standard-quick-cpu-family.png", "tsne-kept.png"]
    assert steps[0].startswith("reading and validating the result files in")
    assert steps[1].startswith("15 result files valid") and any(s.startswith("drawing table1-") for s in steps)
    assert steps[-1].startswith("done in")
