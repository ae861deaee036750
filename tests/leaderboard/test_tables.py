"""The tables as data (`narbench.leaderboard.tables`): rows, labels, the one rule of bold and †."""

from __future__ import annotations

import numpy as np

from narbench import leaderboard as lb
from tests.handmade import write_result
from tests.leaderboard.conftest import N_QUERIES, base


def _table(tables, number):
    return next(t for t in tables if t.number == number)


def _block(tables, number, dataset="nas"):
    return next(b for b in _table(tables, number).blocks if b.dataset == dataset and b.rows)


def test_table1_rows_labels_bold_significance_and_paper_numbers(results):
    tables = lb.build_tables(lb.collect([results]))
    rows = {r.label: r for r in _block(tables, 1).rows}
    assert list(rows) == ["random (floor)", "gcn", "gat", "ours+motif"]
    # ours and gat tie (identical per-query scores): both bold, neither tested; gcn and the floor †
    assert all(m in rows["ours+motif"].bold and m in rows["gat"].bold for m in lb.COLUMNS)
    assert rows["gat"].marks == {} and rows["ours+motif"].marks == {}
    assert all(rows["gcn"].marks.get(m) == lb.SIG_MARK for m in lb.COLUMNS)
    assert all(rows["random (floor)"].marks.get(m) == lb.SIG_MARK for m in lb.COLUMNS)
    # the paper's numbers beside ours (Table 1 NAS GCN: MAP@20 0.927 under MAPc, NDCG@20 0.953)
    paper = dict(_block(tables, 1).paper)
    assert paper["paper (their data): GCN"]["map_capped@20"] == 0.927 and "map@20" not in paper["paper (their data): GCN"]
    assert [b.dataset for b in _table(tables, 1).blocks] == ["nas", "real"]  # real: the paper's rows only
    # Table 2 holds ours' splitters; node-number is significantly worse
    t2 = {r.label: r for r in _block(tables, 2).rows}
    assert set(t2) == {"ours+motif", "ours+node-number"}
    assert t2["ours+node-number"].marks.get("ndcg@20") == lb.SIG_MARK


def test_one_rule_per_column_bold_is_best_dagger_is_worse_than_it(tmp_path):
    """gcn is best on NDCG@20, gat on MRR@20: each is bold in its column and tested in the other."""
    rng = np.random.default_rng(0)
    for s in range(3):
        hi, lo = rng.uniform(0.7, 0.9, N_QUERIES), rng.uniform(0.2, 0.4, N_QUERIES)
        write_result(tmp_path, "gcn", "none", s, {"ndcg@20": hi, "mrr@20": lo})
        write_result(tmp_path, "gat", "none", s, {"ndcg@20": lo, "mrr@20": hi})
        close = np.clip(hi - 0.002 + rng.normal(0, 0.05, N_QUERIES), 0, 1)  # a hair below gcn, noisy
        write_result(tmp_path, "random", "none", s, {"ndcg@20": close, "mrr@20": lo})
    tables = lb.build_tables(lb.collect([tmp_path]))
    rows = {r.label: r for r in _block(tables, 1).rows}
    gcn, gat, floor = rows["gcn"], rows["gat"], rows["random (floor)"]
    assert "ndcg@20" in gcn.bold and "mrr@20" in gat.bold
    assert gat.marks["ndcg@20"] == lb.SIG_MARK and gcn.marks["mrr@20"] == lb.SIG_MARK
    assert floor.mean["ndcg@20"] < gcn.mean["ndcg@20"] and "ndcg@20" not in floor.bold | set(floor.marks)
    for r in rows.values():  # never both bold and †
        assert not set(r.bold) & set(r.marks)
    note = _table(tables, 1).notes[0]
    assert "best mean of the column among rows with at least 2 seeds" in note and "that column's best row" in note


def test_single_seed_row_is_marked_and_never_bold(results):
    """A one-seed row with the highest mean is not bold: the best three-seed row is."""
    write_result(results, "my-encoder", "none", 0, np.full(N_QUERIES, 0.99))
    tables = lb.build_tables(lb.collect([results]))
    rows = {r.label: r for r in _block(tables, 1).rows}
    lucky = rows["my-encoder"]
    assert lucky.n == 1 and lucky.n_text == "1*" and not lucky.bold
    assert "ndcg@20" in rows["ours+motif"].bold
    assert "| my-encoder | 1\\* |" in lb.tables_markdown(tables)


def test_tables_3_and_4_carry_significance_marks(results):
    for s in range(3):
        write_result(results, "ours", "motif", s, base(s) * 0.8, objective="cl")
        write_result(results, "ours", "motif", s, base(s), dataset="real")
        write_result(results, "ours", "motif", s, base(s) * 0.9, dataset="real", init_from="runs/nas.pt", tag="-init")
    tables = lb.build_tables(lb.collect([results]))
    t3 = {r.label: r for r in _block(tables, 3).rows}
    assert list(t3) == ["ours+motif (cl)", "ours+motif (ce+cl)"]
    assert t3["ours+motif (cl)"].marks["ndcg@20"] == lb.SIG_MARK and "ndcg@20" in t3["ours+motif (ce+cl)"].bold
    t4 = _block(tables, 4, "real")
    assert [r.label for r in t4.rows] == ["ours+motif (ce+cl)", "ours+motif (ce+cl, pretrained)"]
    assert t4.rows[1].marks["ndcg@20"] == lb.SIG_MARK and t4.paper


def test_ablations_are_table3_rows_only(results):
    for s in range(3):
        write_result(results, "ours", "motif", s, base(s) * 0.7, variant="stage1=False")
        write_result(results, "ours", "motif", s, base(s) * 0.95, variant="motif_examples=occurrences")
        write_result(results, "ours", "motif", s, base(s), dataset="real")
        write_result(results, "ours", "motif", s, base(s), dataset="real", init_from="runs/nas.pt", tag="-init")
        write_result(results, "ours", "motif", s, base(s), dataset="real", variant="stage1=False")
    records = lb.collect([results])
    assert {r.key.variant for r in records} == {"", "stage1=False", "motif_examples=occurrences"}
    tables = lb.build_tables(records)
    t3 = {r.label: r for r in _block(tables, 3).rows}
    assert list(t3) == ["ours+motif", "ours+motif (motif_examples=occurrences)", "ours+motif (stage1=False)"]
    assert t3["ours+motif (stage1=False)"].marks["ndcg@20"] == lb.SIG_MARK and "ndcg@20" in t3["ours+motif"].bold
    assert [r.label for r in _block(tables, 1).rows] == ["random (floor)", "gcn", "gat", "ours+motif"]
    assert {r.label for r in _block(tables, 2).rows} == {"ours+motif", "ours+node-number"}
    assert [r.label for r in _block(tables, 4, "real").rows] == ["ours+motif", "ours+motif (pretrained)"]
    assert "variant" in lb.aggregate(records).columns


def test_a_floor_with_parameters_is_a_table1_floor_of_its_own(results):
    """Training-free rows have no ablations to hide: a floor run with other parameters (`best-floor` with
    `fuse=8`) is a Table 1 floor named with them, after the floor as shipped."""
    for s in range(3):
        write_result(results, "wl", "none", s, base(s) * 0.9, variant="rounds=2")
        write_result(results, "wl", "none", s, base(s) * 0.8)
    rows = [r.label for r in _block(lb.build_tables(lb.collect([results])), 1).rows]
    assert rows == ["random (floor)", "wl (floor)", "wl (floor, rounds=2)", "gcn", "gat", "ours+motif"]


def test_another_trained_encoders_variant_is_a_table1_row_with_significance(results):
    """Only the paper method's variants are ablations (Table 3); another trained encoder run with other
    parameters (`graf-lda` validated across sources) is a Table 1 row of its own, tested like the rest."""
    for s in range(3):
        write_result(results, "graf-lda", "none", s, base(s) * 0.5, variant="holdout=cross-source")
        write_result(results, "graf-lda", "none", s, base(s) * 0.6)
        write_result(results, "ours", "motif", s, base(s) * 0.95, variant="stage1=False")
    rows = {r.label: r for r in _block(lb.build_tables(lb.collect([results])), 1).rows}
    row = rows["graf-lda (holdout=cross-source)"]
    assert row.n == 3 and row.marks.get("ndcg@20") == lb.SIG_MARK
    assert not any("stage1=False" in label for label in rows)


def test_table4_only_with_init_from(results):
    t4 = _table(lb.build_tables(lb.collect([results])), 4)
    assert not any(b.rows for b in t4.blocks) and t4.empty_note and t4.blocks[0].paper


def test_submitted_encoder_is_a_table1_row_with_significance(results):
    """A third-party encoder's result files (any name, any splitter) land in Table 1, after the paper's rows."""
    for seed in range(3):
        write_result(results, "my-encoder", "none", seed, base(seed) - 0.2)
        write_result(results, "my-encoder", "none", seed, base(seed), objective="cl", tag="-cl")  # not Table 1
    rows = {r.label: r for r in _block(lb.build_tables(lb.collect([results])), 1).rows}
    assert list(rows)[-1] == "my-encoder (ce+cl)" and "my-encoder (cl)" not in rows
    assert rows["my-encoder (ce+cl)"].n == 3 and rows["my-encoder (ce+cl)"].marks.get("ndcg@20") == lb.SIG_MARK


def test_paper_numbers_only_beside_the_quick_and_paper_profiles(results):
    for s in range(2):
        write_result(results, "gcn", "none", s, np.full(N_QUERIES, 0.5), profile="smoke")
    blocks = {b.setting[2]: b for b in _table(lb.build_tables(lb.collect([results])), 1).blocks if b.rows}
    assert blocks["quick"].paper and blocks["smoke"].paper == []


def test_one_label_per_configuration():
    """The objective is named wherever the leaderboard holds a method with more than one; never elsewhere."""
    key = lb.Key("nas", "standard", "quick", "cpu", "family", "ours", "motif", "ce+cl", "scratch")
    gcn, wl = key._replace(encoder="gcn", splitter="none"), key._replace(encoder="wl", splitter="none", protocol="any")
    ce, init = key._replace(objective="ce"), key._replace(init="pretrained")
    assert lb.row_labels([key, gcn, wl, init]) == {key: "ours+motif", gcn: "gcn", wl: "wl (floor)",
                                                   init: "ours+motif (pretrained)"}
    labels = lb.row_labels([key, gcn, wl, init, ce, ce._replace(dataset="real")])
    assert [labels[k] for k in (key, ce, init, gcn)] == ["ours+motif (ce+cl)", "ours+motif (ce)",
                                                         "ours+motif (ce+cl, pretrained)", "gcn"]


def test_table2_4_blocks_with_one_configuration_are_left_out(tmp_path):
    """A Table 2-4 block compares variants of ours: a setting where only ours+motif ran shows no block."""
    out = tmp_path / "res"
    for s in range(2):
        q = base(s)
        write_result(out, "ours", "motif", s, q)
        write_result(out, "ours", "node-number", s, q - 0.05)
        write_result(out, "ours", "motif", s, q, split="unseen", dataset="real")
    tables = lb.build_tables(lb.collect([out]))
    t2 = [(b.dataset, b.setting[1] if b.setting else None, len(b.rows)) for b in _table(tables, 2).blocks]
    assert ("nas", "standard", 2) in t2
    assert not any(split == "unseen" for _, split, _ in t2)  # one configuration there: no block
    t1 = [(b.dataset, b.setting[1] if b.setting else None) for b in _table(tables, 1).blocks]
    assert ("real", "unseen") in t1  # Table 1 keeps every setting


def test_a_floor_in_two_protocol_blocks_is_marked_in_each_on_its_own(tmp_path):
    """A training-free row joins the family and the paper block; bold in one must not leak into the other."""
    out = tmp_path / "res"
    for s in range(2):
        q = base(s)
        write_result(out, "wl", "none", s, q)
        write_result(out, "gcn", "none", s, np.clip(q + 0.2, 0, 1))  # family: gcn best, the floor †
        write_result(out, "gcn", "none", s, q - 0.3, protocol="paper")  # paper: the floor best
    tables = lb.build_tables(lb.collect([out]))
    blocks = {b.setting[4]: {r.label: r for r in b.rows} for b in _table(tables, 1).blocks if b.setting}
    fam, pap = blocks["family"], blocks["paper"]
    assert fam["wl (floor)"] is not pap["wl (floor)"]
    assert fam["wl (floor)"].marks.get("ndcg@20") == lb.SIG_MARK and "ndcg@20" not in fam["wl (floor)"].bold
    assert "ndcg@20" in pap["wl (floor)"].bold and "ndcg@20" not in pap["wl (floor)"].marks
    for rows in blocks.values():  # the one rule: never bold and † at once
        assert all(not (r.bold & set(r.marks)) for r in rows.values())


def test_floors_run_on_a_cpu_join_the_block_of_encoders_trained_on_a_gpu(tmp_path):
    """The paper profile's trained runs come from a GPU, its floors from a CPU: one block, where the
    floor is compared with them; a floor with no trained block of its profile stays a block of its own."""
    out = tmp_path / "res"
    for s in range(2):
        q = base(s)
        write_result(out, "gcn", "none", s, q - 0.2, profile="paper", device="cuda")
        write_result(out, "wl", "none", s, q, profile="paper", device="cpu")
        write_result(out, "wl", "none", s, q, profile="paper", device="cpu", dataset="real")
    blocks = {b.setting: {r.label for r in b.rows} for b in _table(lb.build_tables(lb.collect([out])), 1).blocks
              if b.setting}
    assert blocks[("nas", "standard", "paper", "cuda", "family")] == {"gcn", "wl (floor)"}
    assert not any(s[:4] == ("nas", "standard", "paper", "cpu") for s in blocks)  # no block of its own
    assert blocks[("real", "standard", "paper", "cpu", "any")] == {"wl (floor)"}


def test_rows_of_an_encoder_that_is_not_device_bound_join_every_device_kinds_block(tmp_path):
    """graf-lda fits with NumPy on the CPU whatever the device: its CPU rows sit beside the GPU-trained
    encoders of their protocol, with no block of their own; a device-bound encoder run on the CPU keeps
    its own block, and where no device-bound encoder shares the setting graf-lda's block stays."""
    from narbench.leaderboard.tables import device_bound

    assert device_bound("gcn") and not device_bound("graf-lda") and device_bound("no-such-encoder")
    out = tmp_path / "res"
    for s in range(2):
        q = base(s)
        write_result(out, "gcn", "none", s, q - 0.2, profile="paper", device="cuda")
        write_result(out, "graf-lda", "none", s, q - 0.1, profile="paper", device="cpu")
        write_result(out, "wl", "none", s, q, profile="paper", device="cpu")
        write_result(out, "gat", "none", s, q - 0.3, profile="paper", device="cpu", split="unseen")
        write_result(out, "graf-lda", "none", s, q, profile="paper", device="cpu", dataset="real")
    tables = lb.build_tables(lb.collect([out]))
    blocks = {b.setting: {r.label for r in b.rows} for b in _table(tables, 1).blocks if b.setting}
    assert blocks[("nas", "standard", "paper", "cuda", "family")] == {"gcn", "graf-lda", "wl (floor)"}
    assert not any(s[:4] == ("nas", "standard", "paper", "cpu") for s in blocks)
    assert blocks[("nas", "unseen", "paper", "cpu", "family")] == {"gat"}  # gat trained on the CPU: apart
    assert blocks[("real", "standard", "paper", "cpu", "family")] == {"graf-lda"}
