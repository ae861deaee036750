"""One declared configuration per method: chosen on validation records alone, shown alone in Table 1."""

from __future__ import annotations

import numpy as np

from narbench import leaderboard as lb
from narbench.eval.result import RunResult
from narbench.leaderboard.declared import NO_RECORD, Config, is_declared, read_declared, select, to_csv
from narbench.leaderboard.headline import headline_markdown
from narbench.leaderboard.records import Key
from narbench.leaderboard.subsets import with_subsets
from narbench.leaderboard.variants import VARIANTS, declare_tables, versus_markdown
from tests.handmade import write_result
from tests.leaderboard.conftest import N_QUERIES, base
from tests.leaderboard.test_headline import _three_settings


def _validation_file(out, encoder, seed, *, dataset="real", split="standard", variant="", selection=None,
                     curve=None, test=0.5, splitter="none", trained=True):
    """A result file carrying only what selection reads: its encoder's `selection` or a learning curve
    (validation per epoch), and test metrics `test` everywhere else."""
    config = {"run": {"encoder": encoder, "seed": seed}, "encoder": {"variant": variant} if variant else {},
              "labels": {"ce": "family"} if trained else None}
    if selection is not None:
        config["encoder_stats"] = {"selection": selection}
    if curve is not None:
        holdout, values = curve
        config["learning_curve"] = {"holdout": holdout, "epochs": [
            {"epoch": i + 1, "validation": {"ndcg@20": v}, "test": {"ndcg@20": test}} for i, v in enumerate(values)]}
    res = RunResult(run_id=f"{dataset}-{split}-{encoder}-{variant}-s{seed}", encoder=encoder, splitter=splitter,
                    dataset={"name": dataset, "version": "2.2", "sha256": "x"}, profile="quick", seed=seed,
                    config=config, split=split, protocol="family", metrics={"ndcg@20": test}, metrics_extra={},
                    timings={"total": 1.0}, num_queries=N_QUERIES, num_corpus=100, num_train=50, device="cpu")
    res.write(out)


def _lda(out, seed, variant, score, holdout=None, *, test=0.5):
    sel = {"metric": "ndcg@20", "scores": {"shrinkage=0.3,dims=32": score, "shrinkage=0.1,dims=32": score - 0.1}}
    if holdout:
        sel["holdout"] = holdout
    _validation_file(out, "graf-lda", seed, variant=variant, selection=sel, test=test)


def _rows(declared):
    return {(d.method, d.dataset): d for d in declared}


def test_real_compares_on_the_cross_source_hold_out_and_replaces_the_reference_only_when_significant(tmp_path):
    """graf-lda's registered configuration has records on the stratified hold-out only (higher numbers, never
    compared with the others'); of the cross-source ones, the simplest is the reference, and the variant
    above it in every run replaces it; one level with it does not."""
    for s in range(3):
        _lda(tmp_path, s, "", 0.95)
        _lda(tmp_path, s, "holdout=cross-source", 0.70 + 0.01 * s, "cross-source")
        _lda(tmp_path, s, "holdout=cross-source,sources=nuisance", 0.70 + 0.01 * s + (0.002, -0.001, 0.0)[s],
             "cross-source")
        _lda(tmp_path, s, "holdout=cross-source,wl_rounds=3", 0.78 + 0.012 * s, "cross-source")
    d = _rows(select([tmp_path], []))[("graf-lda", "real")]
    assert d.config == Config("none", variant="holdout=cross-source,wl_rounds=3")
    assert d.validated_on == "cross-source hold-out" and d.records == 3 and round(d.validation, 4) == 0.792
    assert d.choice.startswith("significantly above the simplest validated (holdout=cross-source)")
    assert "holdout=cross-source,sources=nuisance +0.000" in d.compared and d.not_validated == "as registered"
    assert d.label == "graf-lda (holdout=cross-source,wl_rounds=3)"


def test_selection_never_reads_a_test_metric(tmp_path):
    """The same validation records with other test numbers (the variant far better on test) give the same file."""
    for folder, test in (("a", 0.2), ("b", 0.99)):
        for s in range(3):
            _lda(tmp_path / folder, s, "holdout=cross-source", 0.70 + 0.01 * s, "cross-source", test=0.5)
            _lda(tmp_path / folder, s, "holdout=cross-source,wl_rounds=3", 0.70 + 0.01 * s, "cross-source", test=test)
    a, b = (to_csv(select([tmp_path / f], [])).replace(str(tmp_path / f), "folder") for f in ("a", "b"))
    assert a == b and "holdout=cross-source,wl_rounds=3 +0.000" in a


def test_curves_choose_at_the_profile_budget_and_a_variant_without_records_is_never_chosen(tmp_path):
    """ours-ft: validation at epoch 5 (quick's budget) decides, not the last epoch; `ours` has records for its
    registered configuration only: `default: no validation record`, its other configurations listed."""
    for s in range(3):
        late = [0.5, 0.6, 0.7, 0.72, 0.74, 0.90, 0.95]
        _validation_file(tmp_path, "ours-ft", s, splitter="motif", curve=("family", late))
        _validation_file(tmp_path, "ours-ft", s, splitter="motif", variant="stage1_positive=augmented",
                         curve=("family", [0.5, 0.6, 0.7, 0.75, 0.76 + 0.001 * s, 0.80, 0.81]))
        _validation_file(tmp_path, "ours", s, splitter="motif", curve=("family", late))
        write_result(tmp_path / "res", "ours", "motif", s, base(s), dataset="real", version="2.2", objective="cl")
    rows = _rows(select([tmp_path / "res"], [tmp_path]))
    ft, ours = rows[("ours-ft", "real")], rows[("ours", "real")]
    assert ft.config.variant == "stage1_positive=augmented" and "+0.021" in ft.compared
    assert "validation at epoch 5" in ft.source
    assert ours.config == Config("motif") and ours.choice == NO_RECORD and ours.not_validated == "objective cl"


def test_one_configuration_and_training_free_floors(tmp_path):
    for s in range(2):
        write_result(tmp_path, "wl", "none", s, base(s))
        write_result(tmp_path, "gcn", "none", s, base(s))
    rows = _rows(select([tmp_path], []))
    assert rows[("wl", "nas")].choice == "training-free: one configuration" and rows[("wl", "nas")].validation is None
    assert rows[("gcn", "nas")].choice == "one configuration" and rows[("gcn", "nas")].config == Config("none")


def test_a_newer_version_declares_once_it_holds_every_method_of_the_current_one(tmp_path):
    """As the headline takes a version (`headline._blocks`): real 2.3 with only the floors run leaves every method
    declared on 2.2; once 2.3 holds them all, 2.3 is declared."""
    for s in range(2):
        for enc in ("wl", "gcn"):
            write_result(tmp_path, enc, "none", s, base(s), dataset="real", version="2.2")
        write_result(tmp_path, "wl", "none", s, base(s), dataset="real", version="2.3")
    assert {d.version for d in select([tmp_path], []) if d.dataset == "real"} == {"2.2"}
    for s in range(2):
        write_result(tmp_path, "gcn", "none", s, base(s), dataset="real", version="2.3")
    assert {d.version for d in select([tmp_path], []) if d.dataset == "real"} == {"2.3"}


def test_a_variant_carried_to_a_newer_version_without_records_says_where_it_was_chosen(tmp_path):
    """graf-lda's variant chosen on 2.2's validation records and the only configuration run on 2.3 (no
    validation record there): 2.3 declares it and names 2.2's choice; a registered configuration alone says
    only "one configuration"."""
    for s in range(3):
        _lda(tmp_path, s, "holdout=cross-source", 0.70 + 0.01 * s, "cross-source")
        _lda(tmp_path, s, "holdout=cross-source,wl_rounds=3", 0.78 + 0.012 * s, "cross-source")
        write_result(tmp_path, "graf-lda", "none", s, base(s), dataset="real", version="2.3",
                     variant="holdout=cross-source,wl_rounds=3")
    d = _rows(select([tmp_path], []))[("graf-lda", "real")]
    assert d.version == "2.3" and d.config == Config("none", variant="holdout=cross-source,wl_rounds=3")
    assert d.records == 0 and d.validation is None
    assert d.choice == ("one configuration, the one declared on real 2.2 (significantly above the simplest "
                        "validated (holdout=cross-source) (paired t, p < 0.05))")
    for s in range(3):
        write_result(tmp_path / "b", "gcn", "none", s, base(s), dataset="real", version="2.2")
        write_result(tmp_path / "b", "gcn", "none", s, base(s), dataset="real", version="2.3")
    assert _rows(select([tmp_path / "b"], []))[("gcn", "real")].choice == "one configuration"


def test_table_1_shows_the_declared_rows_and_the_variants_move_to_their_own_table(tmp_path):
    """gcn (registered) beats its variant on test, but the variant is declared: Table 1 shows the variant alone,
    marked among Table 1's rows; both gcn rows are in the variants' table, and `versus_markdown` says so."""
    _three_settings(tmp_path / "res")
    for ds, split in (("nas", "standard"), ("real", "unseen"), ("real", "crossimpl")):
        for s in range(3):
            write_result(tmp_path / "res", "gcn", "none", s, np.clip(base(s) - 0.25, 0, 1), dataset=ds, split=split,
                         variant="layers=9")
    records = with_subsets(lb.collect([tmp_path / "res"]))
    declared = {("gcn", "real"): Config("none", variant="layers=9"), ("gcn", "nas"): Config("none", variant="layers=9"),
                ("wl", "real"): Config("none"), ("wl", "nas"): Config("none")}
    tables = declare_tables(lb.build_tables(records), records, declared)
    t1, var = tables[0], next(t for t in tables if t.number == VARIANTS)
    nas = next(b for b in t1.blocks if b.setting and b.setting[:2] == ("nas", "standard"))
    assert [r.label for r in nas.rows] == ["random (floor)", "wl (floor)", "gcn (layers=9)"]
    assert "ndcg@20" in next(r for r in nas.rows if r.label == "wl (floor)").bold  # best among the declared rows
    vnas = next(b for b in var.blocks if b.setting == nas.setting)
    assert sorted(r.label for r in vnas.rows) == ["gcn", "gcn (layers=9)"]
    text = headline_markdown(tables)
    assert "| gcn |" in text and "(layers=9)" not in text.split("\n\n")[1]
    assert "`gcn` layers=9 on real and nas" in text
    assert "| nas · standard | gcn | gcn (layers=9) |" in versus_markdown(tables)


def test_rows_of_an_undeclared_method_stay_and_a_missing_declared_row_is_noted(tmp_path):
    declared = {("gcn", "real"): Config("none", variant="layers=9")}
    key = Key("real 2.2 (115ecfa4)", "unseen", "quick", "cpu", "family", "gcn", "none", "ce+cl", "scratch", "")
    assert is_declared(key, declared) is False and is_declared(key._replace(variant="layers=9"), declared) is True
    assert is_declared(key._replace(encoder="gin"), declared) is None
    for s in range(3):
        write_result(tmp_path / "res", "gcn", "none", s, base(s), dataset="real", split="unseen")
        write_result(tmp_path / "res", "gin", "none", s, base(s), dataset="real", split="unseen")
    records = lb.collect([tmp_path / "res"])
    block = declare_tables(lb.build_tables(records), records, declared)[0].blocks[0]
    assert [r.label for r in block.rows] == ["gin"]
    assert block.notes[0].startswith("gcn: its declared configuration (layers=9) has no result in this setting")


def test_the_file_round_trips(tmp_path):
    for s in range(3):
        _lda(tmp_path, s, "holdout=cross-source", 0.7, "cross-source")
    path = tmp_path / "declared.csv"
    path.write_text(to_csv(select([tmp_path], [])))
    assert read_declared(path) == {("graf-lda", "real"): Config("none", variant="holdout=cross-source")}
    assert read_declared(tmp_path / "missing.csv") == {}


def test_the_headline_takes_the_paper_profile_once_it_holds_every_declared_row(tmp_path):
    """The paper profile heads the README when each column's paper block holds every method of its quick block,
    each in its declared configuration: gcn's registered configuration at the paper profile does not count."""
    _three_settings(tmp_path / "res")
    declared = {("gcn", "real"): Config("none", variant="layers=9"), ("gcn", "nas"): Config("none", variant="layers=9")}

    def write(variant):
        for ds, split in (("nas", "standard"), ("real", "unseen"), ("real", "crossimpl")):
            for s in range(3):
                subsets = {"exact": list(range(N_QUERIES // 2)), "reimpl": list(range(N_QUERIES // 2, N_QUERIES))}
                for enc, v in (("gcn", variant), ("wl", ""), ("random", "")):
                    write_result(tmp_path / "res", enc, "none", s, base(s), dataset=ds, split=split, variant=v,
                                 profile="paper", subsets=subsets if split == "crossimpl" else None,
                                 tag=f"-{variant or 'registered'}")
                write_result(tmp_path / "res", "gcn", "none", s, base(s), dataset=ds, split=split, variant="layers=9",
                             subsets=subsets if split == "crossimpl" else None, tag="-quick")

    def profile():
        records = with_subsets(lb.collect([tmp_path / "res"]))
        return headline_markdown(declare_tables(lb.build_tables(records), records, declared)).split("`")[1]

    write("")
    assert profile() == "quick"
    write("layers=9")
    assert profile() == "paper"
