"""Leaderboard: aggregation, tables, significance, determinism, plots, on hand-made result files."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

from narbench import leaderboard as lb
from narbench.result import RunResult
from narbench.validation import KnownDataset
from tests.handmade import write_result

N_QUERIES = 80


FLOORS = ("random", "ophist", "wl")


def _write(out, encoder, splitter, seed, per_query, *, dataset="nas", objective="ce+cl", device="cpu",
           init_from=None, created="2026-01-01T00:00:00+00:00", profile="quick", tag="", sha="ab" * 32,
           split="standard", protocol="family"):
    """A result file (+ sidecar) whose metrics are the means of `per_query` (one array for all).

    The floors (FLOORS) record no training labels, as the runner writes them."""
    per_query = np.asarray(per_query, dtype=np.float64)
    names = lb.ALL_METRICS
    pq = {m: per_query for m in names}
    means = {m: float(np.round(per_query, 6).mean()) for m in names}
    run = {"encoder": encoder, "splitter": splitter, "objective": objective, "seed": seed}
    if init_from:
        run["init_from"] = init_from
    res = RunResult(
        run_id=f"{dataset}-{split}-{encoder}-{splitter}-{profile}-{protocol}-s{seed}-{objective}{tag}",
        encoder=encoder, splitter=splitter,
        dataset={"name": dataset, "version": "1.0", "sha256": sha},
        profile=profile, seed=seed,
        config={"run": run, "encoder": {"train": {"objective": objective}},
                "labels": None if encoder in FLOORS else {"cl": "family", "ce": "family"}},
        split=split, protocol=protocol,
        metrics={m: means[m] for m in lb.METRICS}, metrics_extra={m: means[m] for m in lb.EXTRA},
        timings={"total": 1.0}, device=device, num_queries=len(per_query), num_corpus=100, num_train=50,
        created=created,
    )
    return res.write(out, pq)


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


def _base(seed):
    return np.random.default_rng(seed).uniform(0.6, 1.0, N_QUERIES)


@pytest.fixture
def results(tmp_path):
    """Table 1 on nas, 3 seeds: ours best; gat identical to ours per query; gcn clearly worse."""
    out = tmp_path / "res"
    for s in range(3):
        q = _base(s)
        _write(out, "ours", "motif", s, q)
        _write(out, "gat", "none", s, q)
        _write(out, "gcn", "none", s, q - 0.3)
        _write(out, "random", "none", s, np.full(N_QUERIES, 0.1) + 0.01 * s)
        _write(out, "ours", "node-number", s, q - 0.05)
    return out


def _table(tables, number):
    return next(t for t in tables if t.number == number)


def test_collect_skips_sidecars_and_aggregates_over_seeds(tmp_path):
    out = tmp_path / "res"
    for s, v in enumerate((0.5, 0.6, 0.7)):
        _write(out, "gcn", "none", s, np.full(10, v))
    # an older run with seed 0 is superseded by the later one: still n = 3
    _write(out, "gcn", "none", 0, np.full(10, 0.0), created="2025-01-01T00:00:00+00:00", tag="-old")
    recs = lb.collect([out])
    assert len(recs) == 4 and all(r.path.suffix == ".json" for r in recs)
    df = lb.aggregate(recs)
    assert len(df) == 1
    row = df.iloc[0]
    assert (row["dataset"], row["device"], row["encoder"], row["objective"], row["init"]) == ("nas", "cpu", "gcn", "ce+cl", "scratch")
    assert row["n"] == 3 and row["seeds"] == "0 1 2"
    assert row["ndcg@20 mean"] == pytest.approx(0.6, abs=1e-12)
    assert row["ndcg@20 std"] == pytest.approx(0.1, abs=1e-12)  # sample std, ddof=1
    assert row["map_capped@100 mean"] == pytest.approx(0.6, abs=1e-12)
    # a single seed has no std
    one = lb.aggregate([r for r in recs if r.result.seed == 1])
    assert one.iloc[0]["n"] == 1 and math.isnan(one.iloc[0]["mrr@20 std"])


def test_device_kind_and_objective_split_groups(tmp_path):
    out = tmp_path / "res"
    _write(out, "ours", "motif", 0, np.full(5, 0.5), device="cuda (NVIDIA H100 80GB HBM3)")
    _write(out, "ours", "motif", 0, np.full(5, 0.5), device="cpu", tag="-cpu")
    _write(out, "ours", "motif", 0, np.full(5, 0.5), objective="cl")
    df = lb.aggregate(lb.collect([out]))
    assert sorted(zip(df["device"], df["objective"])) == [("cpu", "ce+cl"), ("cpu", "cl"), ("cuda", "ce+cl")]


def test_malformed_file_names_it(tmp_path):
    out = tmp_path / "res"
    _write(out, "gcn", "none", 0, np.full(5, 0.5))
    bad = out / "broken.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json"):
        lb.collect([out])
    bad.write_text(json.dumps({"run_id": "x"}))
    with pytest.raises(ValueError, match="broken.json"):
        lb.collect([out])
    with pytest.raises(FileNotFoundError, match="nowhere"):
        lb.collect([tmp_path / "nowhere"])


def test_tables_best_bold_paper_numbers_and_significance(results):
    recs = lb.collect([results])
    tables = lb.build_tables(recs)
    t1 = _table(tables, 1)
    nas = next(b for b in t1.blocks if b.dataset == "nas" and b.rows)
    rows = {r.label: r for r in nas.rows}
    assert list(rows) == ["random (floor)", "gcn", "gat", "ours+motif"]
    # best: ours and gat tie (identical scores) -> both bold; gcn is not
    assert "ndcg@20" in rows["ours+motif"].bold and "ndcg@20" in rows["gat"].bold
    assert "ndcg@20" not in rows["gcn"].bold
    # significance: gcn (clearly worse) marked in every column; gat (identical to the best) never
    assert all(rows["gcn"].marks.get(m) == lb.SIG_MARK for m in lb.COLUMNS)
    assert all(rows["random (floor)"].marks.get(m) == lb.SIG_MARK for m in lb.COLUMNS)
    assert rows["gat"].marks == {} and rows["ours+motif"].marks == {}
    md = lb.tables_markdown(tables)
    line = {ln.split(" | ")[0][2:]: ln for ln in md.splitlines() if ln.startswith("| ")}
    assert lb.SIG_MARK in line["gcn"] and lb.SIG_MARK not in line["gat"]
    assert "**" in line["ours+motif"] and "**" not in line["gcn"]
    # the paper's numbers, labelled, beside ours (Table 1 NAS GCN: MAP@20 0.927, NDCG@20 0.953)
    gcn_paper = [ln for ln in md.splitlines() if ln.startswith("| *paper (their data): GCN* |")]
    assert len(gcn_paper) == 2  # nas (with our rows) and real (paper only)
    assert any("*0.927*" in ln and "*0.953*" in ln for ln in gcn_paper)
    assert "paper (their data): Pre-training with NAS" in md  # Table 4 reference when no init runs
    assert "map_capped" in md and "min(k, |R|)" in md
    assert "significantly worse" in md
    # Table 2 has ours+motif and ours+node-number; node-number is significantly worse
    t2 = {r.label: r for b in _table(tables, 2).blocks for r in b.rows}
    assert set(t2) == {"ours+motif", "ours+node-number"}
    assert t2["ours+node-number"].marks.get("ndcg@20") == lb.SIG_MARK


def test_submitted_encoder_is_a_table1_row_with_significance(results):
    """A third-party encoder's result files (any name, any splitter) land in Table 1, after the paper's rows."""
    for seed in range(3):
        _write(results, "my-encoder", "none", seed, _base(seed) - 0.2)
        _write(results, "my-encoder", "none", seed, _base(seed), objective="cl", tag="-cl")  # not Table 1
    t1 = _table(lb.build_tables(lb.collect([results])), 1)
    nas = next(b for b in t1.blocks if b.dataset == "nas" and b.rows)
    rows = {r.label: r for r in nas.rows}
    assert list(rows) == ["random (floor)", "gcn", "gat", "ours+motif", "my-encoder"]
    assert rows["my-encoder"].n == 3 and rows["my-encoder"].marks.get("ndcg@20") == lb.SIG_MARK
    assert "| my-encoder | 3 |" in lb.tables_markdown([t1])


def test_seed_matching_uses_only_common_seeds(results):
    recs = lb.collect([results])
    sel = lb.select_runs(recs)
    key_ours = next(k for k in sel if k.encoder == "ours" and k.splitter == "motif")
    key_gcn = next(k for k in sel if k.encoder == "gcn")
    a, b, seeds = lb.paired_scores(sel[key_ours], {1: sel[key_gcn][1]}, "ndcg@20")
    assert seeds == [1] and len(a) == len(b) == N_QUERIES
    a, b, seeds = lb.paired_scores(sel[key_ours], sel[key_gcn], "ndcg@20")
    assert seeds == [0, 1, 2] and len(a) == 3 * N_QUERIES
    assert lb.paired_test(a, a) == 1.0 and lb.paired_test(a, b) < 1e-6


def test_table4_only_with_init_from(results, tmp_path):
    assert not any(b.rows for b in _table(lb.build_tables(lb.collect([results])), 4).blocks)
    _write(results, "ours", "motif", 0, _base(0), dataset="real")
    _write(results, "ours", "motif", 0, _base(0) * 0.99, dataset="real", init_from="runs/nas-ours.pt", tag="-init")
    t4 = _table(lb.build_tables(lb.collect([results])), 4)
    (block,) = t4.blocks
    assert block.dataset == "real"
    assert [r.label for r in block.rows] == ["ours+motif, from scratch", "ours+motif, initialised from nas"]
    assert block.paper and t4.empty_note is None


def test_write_leaderboard_is_byte_identical(results, tmp_path):
    out_a, out_b = tmp_path / "lb_a", tmp_path / "lb_b"
    (out_a / "results").mkdir(parents=True)
    _write(out_a / "results", "gat", "none", 3, _base(3))  # <out>/results is always read
    _write(out_b / "results", "gat", "none", 3, _base(3))
    ra = lb.write_leaderboard([results], out_a, tsne=False)
    rb = lb.write_leaderboard([results], out_b, tsne=False)
    assert ra.read_bytes() == rb.read_bytes()
    for name in ("aggregate.csv", "aggregate.json", "plots/ndcg-nas-standard-quick-cpu-family.png"):
        assert (out_a / name).read_bytes() == (out_b / name).read_bytes(), name
    first = ra.read_bytes()
    assert lb.write_leaderboard([results], out_a, tsne=False).read_bytes() == first  # rerun in place
    text = first.decode()
    assert "plots/ndcg-nas-standard-quick-cpu-family.png" in text and "## Table 1" in text and "## Table 4" in text
    csv = (out_a / "aggregate.csv").read_text().splitlines()
    assert csv[0].startswith("dataset,split,profile,device,protocol,encoder,splitter,objective,init,n,seeds,")
    assert len(csv) == 1 + 5  # five configurations
    assert any(",gat,none,ce+cl,scratch,4,0 1 2 3," in ln for ln in csv)


def test_cli_parser_and_main(results, tmp_path, capsys):
    from narbench.cli import main

    assert main(["leaderboard", "--results", str(results), "--out", str(tmp_path / "lb"), "--no-plots"]) == 0
    assert (tmp_path / "lb" / "README.md").is_file()
    assert "Table 1" in capsys.readouterr().out
    assert main(["leaderboard", "--results", str(tmp_path / "missing"), "--out", str(tmp_path / "lb")]) == 2


def test_save_embeddings_and_tsne(toy_dataset, tmp_path):
    from narbench.runner import RunConfig, run

    plain = run(RunConfig(encoder="gcn", profile="smoke", out=str(tmp_path / "plain"), progress=False), dataset=toy_dataset)
    assert not list((tmp_path / "plain").glob("*.npz"))
    assert "save_embeddings" not in plain.result.config["run"]
    out = tmp_path / "res"
    for enc in ("gcn", "gat"):
        ev = run(RunConfig(encoder=enc, profile="smoke", out=str(out), progress=False, save_embeddings=True),
                 dataset=toy_dataset)
        npz = out / f"{ev.result.run_id}.embeddings.npz"
        with np.load(npz) as z:
            assert z["embeddings"].dtype == np.float16
            assert z["embeddings"].shape[0] == ev.result.num_queries == len(z["family"]) == len(z["coarse"])
            assert set(z["coarse"]) <= {"cnn", "attention", "other"}
    toy = [KnownDataset("toy", "0", None)]  # the in-memory toy dataset: declared, not registered
    paths = lb.plot_tsne(lb.collect([out], datasets=toy), tmp_path / "plots")
    assert [p.name for p in paths] == ["tsne-toy-standard-smoke-cpu-family.png"] and paths[0].stat().st_size > 1000


def _tables_script():
    """benchmarks/tables.py (a script, not a package module) loaded by path."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "tables.py"
    spec = importlib.util.spec_from_file_location("narbench_tables_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sweep_script_table4_starts_from_the_nas_run_with_weights(tmp_path):
    tables = _tables_script()
    args = argparse.Namespace(dataset="real", split="standard", protocol="family", profile="quick", device="cpu",
                              out=tmp_path, pretrained=None)
    # No nas source yet: the Table 4 cell is skipped, the scratch cell still runs.
    assert tables.command(args, "ours", "motif", "ce+cl", tables.PRETRAINED, 1) is None
    scratch = tables.command(args, "ours", "motif", "ce+cl", tables.SCRATCH, 1)
    assert "--init-from" not in scratch and "--save-weights" in scratch
    # A nas run of another seed, one without weights, and the matching one with weights.
    other_seed = _write(tmp_path, "ours", "motif", 0, _base(0))
    other_seed.with_name(other_seed.name.replace(".json", ".pt")).write_bytes(b"w")
    _write(tmp_path, "ours", "motif", 1, _base(1), tag="-a")
    with_weights = _write(tmp_path, "ours", "motif", 1, _base(1), tag="-b")
    assert tables.command(args, "ours", "motif", "ce+cl", tables.PRETRAINED, 1) is None
    with_weights.with_name(with_weights.name.replace(".json", ".pt")).write_bytes(b"w")
    cmd = tables.command(args, "ours", "motif", "ce+cl", tables.PRETRAINED, 1)
    assert cmd[cmd.index("--init-from") + 1] == str(with_weights)
    assert "--save-embeddings" not in cmd
    # Seed 0 of the Table 1 encoders saves embeddings for the t-SNE maps; other cells do not.
    assert "--save-embeddings" in tables.command(args, "gat", "none", "ce+cl", tables.SCRATCH, 0)
    assert "--save-embeddings" not in tables.command(args, "ours", "random", "ce+cl", tables.SCRATCH, 0)
    # Results already in --out are recognised per (dataset, split, protocol, cell, init, seed);
    # a floor's under protocol `any`, so one run serves every protocol.
    assert ("nas", "standard", "family", "ours", "motif", "ce+cl", "scratch", 1) in tables.existing(tmp_path)
    _write(tmp_path, "wl", "none", 0, _base(0))
    assert ("nas", "standard", "any", "wl", "none", "ce+cl", "scratch", 0) in tables.existing(tmp_path)
    assert tables.cell_protocol("wl", "paper") == "any" and tables.cell_protocol("gcn", "paper") == "paper"
    cmd = tables.command(argparse.Namespace(**{**vars(args), "split": "unseen", "protocol": "paper"}),
                         "gcn", "none", "ce+cl", tables.SCRATCH, 0)
    assert cmd[cmd.index("--split"):cmd.index("--split") + 4] == ["--split", "unseen", "--protocol", "paper"]
