"""What can be checked is checked, and the gate cannot be loosened by hand (issue 57, items 8 and 11).

Result files: a self-consistent forgery (every per-query score 1.0, MAP@20 = 1.0) is refused by the
per-query bounds of its split; a training-free encoder's result is re-run and compared exactly
(`--verify`); a trained one is marked unverified. The gate: a band that is not what its derivation
gives refuses the reference; `check` finds the project's reference from any folder inside it, says
in one line when it is outside one, and never offers `--update` for a missing reference.

The data: `big`, four families of 40 toy graphs (30 of each in the corpus, so |R| = 30 > 20 and
MAP@20 can be at most 20/30), declared with a `load` so validation and the re-run can use it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from narbench import leaderboard as lb
from narbench.eval import validation
from narbench.eval.result import RunResult
from narbench.eval.validation import InvalidResultError, KnownDataset, read_sidecar, sidecar_path, validate_result

BIG_SHA = "cd" * 32


@pytest.fixture(scope="module")
def big_dataset():
    from narbench.data.dataset import GraphDataset, stratified_split
    from tests.conftest import toy_graphs

    graphs = toy_graphs(per_family=40)
    split = stratified_split([g.family for g in graphs], test_size=0.25, seed=0)
    return GraphDataset("big", "0", [f"op{i}" for i in range(8)], graphs, BIG_SHA, split)


@pytest.fixture
def big(big_dataset, monkeypatch):
    """`big` declared beside the registered datasets, loadable: what `narbench leaderboard` sees."""
    declared = validation.known_datasets
    known = KnownDataset("big", "0", BIG_SHA, ("standard",), load=lambda: big_dataset)
    monkeypatch.setattr(validation, "known_datasets", lambda: [*declared(), known])
    return [known]


@pytest.fixture(scope="module")
def floor_run(big_dataset, tmp_path_factory):
    """A real result of the training-free `ophist` on `big` (smoke, seed 0), written by the runner."""
    from narbench.harness.runner import RunConfig, run

    out = tmp_path_factory.mktemp("floor")
    cfg = RunConfig(encoder="ophist", dataset="big", profile="smoke", seed=0, device="cpu", out=str(out),
                    progress=False)
    return run(cfg, dataset=big_dataset).path


def _copy(path: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, folder / path.name)
    shutil.copy(sidecar_path(path), sidecar_path(folder / path.name))
    return folder / path.name


def _rewrite(path: Path, change) -> Path:
    """Apply `change(result, per_query)` and write both back self-consistently: the mean of each metric whose
    per-query scores changed is theirs."""
    result, per_query = RunResult.read(path), read_sidecar(sidecar_path(path))
    before = {m: v.copy() for m, v in per_query.items()}
    change(result, per_query)
    for m, values in per_query.items():
        if not np.array_equal(values, before[m]):
            target = result.metrics if m in result.metrics else result.metrics_extra
            target[m] = float(values.mean())
    result.write(path.parent, per_query)
    return path


def test_the_floor_run_passes_every_check(floor_run, big):
    result, per_query = validate_result(floor_run, datasets=big)
    assert result.num_queries == 40 and result.num_corpus == 120
    assert per_query["map@20"].max() <= 20 / 30 + 1e-6  # what |R| = 30 allows


def test_a_forged_all_one_result_is_refused_in_one_line_naming_it(floor_run, big, tmp_path, capsys):
    from narbench.cli import main

    forged = _rewrite(_copy(floor_run, tmp_path / "res"), lambda r, pq: [v.fill(1.0) for v in pq.values()])
    result = RunResult.read(forged)
    assert result.metrics["map@20"] == 1.0 and result.metrics["ndcg@20"] == 1.0  # consistent with its sidecar
    with pytest.raises(InvalidResultError, match=r"map@20 is 1\.000000 but its 30 relevant items allow at most "
                                                 r"0\.666667"):
        validate_result(forged, datasets=big)
    assert main(["leaderboard", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "lb"),
                 "--profile", "smoke", "--no-plots"]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if str(forged) in ln]
    assert len(lines) == 1 and "map@20 is 1.000000" in lines[0] and "Traceback" not in err
    assert not (tmp_path / "lb" / "aggregate.csv").exists()


def test_a_mean_that_is_not_the_mean_of_its_per_query_scores_is_refused(floor_run, big, tmp_path):
    path = _copy(floor_run, tmp_path)
    data = json.loads(path.read_text())
    data["metrics"]["ndcg@20"] = round(data["metrics"]["ndcg@20"] - 0.05, 6)
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidResultError, match="ndcg@20 .* but the mean of its 40 per-query scores"):
        validate_result(path, datasets=big)


def test_scores_no_ranking_gives_and_sizes_the_split_does_not_select_are_refused(floor_run, big, tmp_path):
    mrr = _rewrite(_copy(floor_run, tmp_path / "mrr"), lambda r, pq: pq["mrr@20"].__setitem__(0, 0.3))
    with pytest.raises(InvalidResultError, match="mrr@20 is 0.300000, not 0 nor 1/r"):
        validate_result(mrr, datasets=big)
    fewer = _copy(floor_run, tmp_path / "n")
    data = json.loads(fewer.read_text())
    data["num_corpus"] = 99
    fewer.write_text(json.dumps(data))
    with pytest.raises(InvalidResultError, match="num_corpus 99, but a smoke run with seed 0 on big 0 standard "
                                                 "scores 40 queries against 120 corpus graphs"):
        validate_result(fewer, datasets=big)


def test_the_bounds_pick_the_queries_and_corpus_the_runner_scores(big_dataset):
    from narbench.eval.bounds import evaluated
    from narbench.harness.runner import select
    from narbench.train.profiles import get_profile

    fam = np.array([g.family for g in big_dataset.graphs])
    for name, seed in (("smoke", 0), ("smoke", 3), ("quick", 1)):
        profile = replace(get_profile(name), max_corpus=50, max_queries=17) if seed == 3 else get_profile(name)
        _, corpus, queries = select(big_dataset, profile, seed)
        ev = evaluated(fam, big_dataset.split, profile.max_corpus, profile.max_queries, seed)
        assert ev.num_corpus == len(corpus)
        assert ev.relevant.tolist() == [int((fam[corpus] == fam[q]).sum()) for q in queries]


def test_a_floor_result_with_one_score_altered_is_caught_by_its_re_run(floor_run, big, tmp_path, capsys):
    from narbench.cli import main
    from narbench.harness.verify import FloorVerifier

    good = _copy(floor_run, tmp_path / "res")
    verifier = FloorVerifier()
    (rec,) = lb.collect([tmp_path / "res"], verify=verifier)
    assert rec.verified and verifier.rerun == 1
    df = lb.aggregate([rec])
    assert df.iloc[0]["verified"] == "re-run"

    def nudge(result, pq):  # one query's NDCG@100 (and the paper's, equal while |R| <= 100) 0.01 lower
        q = int(np.argmax(pq["ndcg@100"]))
        for m in ("ndcg@100", "ndcg_paper@100"):
            pq[m][q] = round(pq[m][q] - 0.01, 6)

    _rewrite(good, nudge)
    validate_result(good, datasets=big)  # possible scores, a consistent file: only a re-run tells
    with pytest.raises(lb.RejectedResultsError) as err:
        lb.collect([tmp_path / "res"], verify=FloorVerifier())
    assert len(err.value.errors) == 1 and err.value.errors[0].path == good
    assert "re-running training-free encoder 'ophist'" in str(err.value) and "ndcg@100" in str(err.value)
    capsys.readouterr()
    argv = ["leaderboard", "--results", str(tmp_path / "res"), "--out", str(tmp_path / "lb"), "--profile", "smoke",
            "--no-plots"]
    assert main([*argv, "--verify"]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if str(good) in ln]
    assert len(lines) == 1 and "re-running training-free encoder 'ophist'" in lines[0]


def test_a_trained_result_is_marked_unverified(floor_run, big, tmp_path):
    from narbench.harness.verify import FloorVerifier
    from tests.handmade import write_result

    write_result(tmp_path, "gcn", "none", 0, np.linspace(0.2, 0.9, 10))  # trained: never re-run
    _copy(floor_run, tmp_path)
    verifier = FloorVerifier()
    records = lb.collect([tmp_path], verify=verifier)
    assert {r.result.encoder: r.verified for r in records} == {"gcn": False, "ophist": True}
    assert verifier.rerun == 1 and verifier.skipped == 1
    df = lb.aggregate(records)
    assert dict(zip(df["encoder"], df["verified"])) == {"gcn": "unverified", "ophist": "re-run"}
    assert dict(zip(df["encoder"], lb.aggregate(lb.collect([tmp_path]))["verified"])) == {
        "gcn": "unverified", "ophist": "unverified"}  # without --verify nothing is re-run
    csv, js = lb.write_aggregate(df, tmp_path / "out")
    assert ",seeds,verified," in csv.read_text().splitlines()[0]
    assert {row["verified"] for row in json.loads(js.read_text())} == {"re-run", "unverified"}


def test_the_ledger_keeps_what_verify_re_ran_and_vouches_only_for_those_bytes(floor_run, big, tmp_path, capsys):
    from narbench.cli import main
    from narbench.leaderboard.ledger import Ledger

    good = _copy(floor_run, tmp_path / "res")
    out = tmp_path / "lb"
    argv = ["leaderboard", "--results", str(tmp_path / "res"), "--out", str(out), "--profile", "smoke",
            "--no-plots", "--test", "bootstrap-query"]  # `big` has no clusters of queries
    assert main(argv) == 0  # no --verify: nothing re-run, no ledger written
    assert not (out / "verified.csv").exists()
    assert json.loads((out / "aggregate.json").read_text())[0]["verified"] == "unverified"
    assert main([*argv, "--verify"]) == 0
    book = Ledger(out / "verified.csv")
    (entry,) = book.entries.values()
    assert (entry.file, entry.encoder, entry.seed) == (good.name, "ophist", 0) and book.knows(good)
    # a plain regeneration reads the ledger: the row stays `re-run`, nothing is re-run
    import narbench.harness.runner as runner
    ran = []
    original = runner.run
    runner_run = lambda *a, **k: ran.append(1) or original(*a, **k)  # noqa: E731
    try:
        runner.run = runner_run
        assert main(argv) == 0 and main([*argv, "--verify"]) == 0
    finally:
        runner.run = original
    assert ran == [] and json.loads((out / "aggregate.json").read_text())[0]["verified"] == "re-run"
    # one byte of the sidecar changed (a consistent rewrite of one score): not the bytes the ledger vouches for
    def nudge(result, pq):  # one query's NDCG@100 (and the paper's, equal while |R| <= 100) 0.01 lower
        q = int(np.argmax(pq["ndcg@100"]))
        for m in ("ndcg@100", "ndcg_paper@100"):
            pq[m][q] = round(pq[m][q] - 0.01, 6)

    _rewrite(good, nudge)
    assert not book.knows(good)
    assert main(argv) == 0
    assert json.loads((out / "aggregate.json").read_text())[0]["verified"] == "unverified"
    capsys.readouterr()
    assert main([*argv, "--verify"]) == 2  # and --verify re-runs it and finds the change
    assert "re-running training-free encoder 'ophist'" in capsys.readouterr().err


def test_ledgers_made_side_by_side_merge_and_a_foreign_csv_is_refused(floor_run, tmp_path):
    from narbench.leaderboard.ledger import Ledger, merge

    a, b = Ledger(tmp_path / "a.csv"), Ledger(tmp_path / "b.csv")
    result = RunResult.read(floor_run)
    a.add(floor_run, result)
    other = _copy(floor_run, tmp_path / "other")
    _rewrite(other, lambda r, pq: pq["mrr@20"].__setitem__(0, 1.0 if pq["mrr@20"][0] != 1.0 else 0.5))
    b.add(other, result)
    assert merge([tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "a.csv"], tmp_path / "all.csv") == 2
    merged = Ledger(tmp_path / "all.csv")
    assert merged.knows(floor_run) and merged.knows(other) and len(merged) == 2
    (tmp_path / "foreign.csv").write_text("name,value\nx,1\n")
    with pytest.raises(ValueError, match="not a ledger of re-run results"):
        Ledger(tmp_path / "foreign.csv")


def test_runs_lists_no_file_that_the_leaderboard_refuses(tmp_path, capsys):
    from narbench.cli import main
    from tests.handmade import write_result

    good = write_result(tmp_path, "gcn", "none", 0, np.linspace(0.2, 0.9, 10))
    bad = {}
    for name, change in (("nan", lambda d: d["metrics"].update({"ndcg@20": float("nan")})),
                         ("inf", lambda d: d["metrics"].update({"mrr@20": float("inf")})),
                         ("negative", lambda d: d["metrics"].update({"map@20": -0.1})),
                         ("schema", lambda d: d.update(schema=99))):
        path = _copy(good, tmp_path / name)
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))
        bad[name] = path
    capsys.readouterr()
    assert main(["runs", str(tmp_path), "--json"]) == 0
    out = capsys.readouterr()
    assert [row["path"] for row in json.loads(out.out)] == [str(good)]
    for path in bad.values():
        assert str(path) in out.err
    assert "schema 99" in out.err


# -- the gate ----------------------------------------------------------------------------------------------
@pytest.fixture
def toy_project(plugin, tmp_path):
    """A narbench checkout in miniature: pyproject.toml naming the project, its reference made on `toy`."""
    from narbench.harness import gate

    root = tmp_path / "project"
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "narbench"\n')
    gate.check(root / gate.DEFAULT_REFERENCE, encoders=["random", "nodefreq"], datasets=["toy"], update=True)
    return root


def _check(argv: list[str], capsys) -> tuple[int, str, str]:
    from narbench.cli import main

    capsys.readouterr()
    code = main(["check", "--encoders", "random,nodefreq", "--datasets", "toy", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("loosen", [
    lambda e: e["band"].update({m: 1e9 for m in e["band"]}),  # bands of 1e9
    lambda e: e["band"].update({"ndcg@20": 0.5}),  # one band by hand
    lambda e: (e["derivation"].update(factor=1e9), e["band"].update({m: 0.0 for m in e["band"]})),
    lambda e: (e["derivation"]["spread"].update({m: 1e9 for m in e["band"]}),
               e["band"].update({m: 3e9 for m in e["band"]})),  # a spread no metric in [0, 1] has
])
def test_a_reference_with_loosened_bands_is_refused(toy_project, capsys, loosen):
    ref = toy_project / "leaderboard" / "reference.json"
    data = json.loads(ref.read_text())
    loosen(data["entries"]["toy/random/none"])
    ref.write_text(json.dumps(data))
    for strict in ([], ["--strict"]):
        code, out, err = _check(["--reference", str(ref), *strict], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "toy/random/none" in err, err
        assert "not a usable narbench reference" in err and "gate passed" not in out


def test_a_training_free_entry_derived_as_a_trained_one_is_refused(toy_project, capsys):
    ref = toy_project / "leaderboard" / "reference.json"
    data = json.loads(ref.read_text())
    entry = data["entries"]["toy/random/none"]
    entry["derivation"].update(trained=True, floor=1e-5)
    entry["band"] = {m: 1e-5 for m in entry["band"]}  # what the trained rule gives: a floor instead of exact
    ref.write_text(json.dumps(data))
    code, _, err = _check(["--reference", str(ref)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "random is training-free" in err


def test_check_from_a_subfolder_uses_the_projects_reference(toy_project, capsys, monkeypatch):
    monkeypatch.chdir(toy_project / "docs" / "deep")
    code, out, _ = _check([], capsys)
    assert code == 0 and "gate passed" in out


def test_check_outside_a_project_says_so_in_one_line(plugin, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _check([], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not inside a narbench checkout" in err


def test_a_missing_reference_never_suggests_update(toy_project, capsys, monkeypatch):
    (toy_project / "leaderboard" / "reference.json").unlink()
    monkeypatch.chdir(toy_project / "docs")
    code, _, err = _check([], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "reference.json does not exist" in err and "--update" not in err


def _read_only_folder(tmp_path: Path) -> Path:
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # root writes anywhere a mode allows none: sysfs refuses
        if not sys.platform.startswith("linux"):
            pytest.skip("needs a folder this process cannot write in")
        return Path("/sys")
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    return folder


@pytest.mark.parametrize("flag", ["--update", "--record"])
def test_a_read_only_target_for_update_or_record_is_one_line(toy_project, tmp_path, capsys, flag):
    target = _read_only_folder(tmp_path) / "narbench-gate.json"
    ref = toy_project / "leaderboard" / "reference.json"
    argv = ["--reference", str(target), "--update", "--no-measure"] if flag == "--update" else \
        ["--reference", str(ref), "--record", str(target)]
    code, out, err = _check(argv, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(target) in err and "Traceback" not in err
    assert "gate" not in out  # refused before anything ran


def test_an_index_other_than_the_shipped_one_is_marked_unpinned_in_every_output(tmp_path):
    """A self-consistent index (its checksum recomputed after an edit) reads as valid: only the shipped
    one is pinned, and the description that heads every output, the result and its JSON say which."""
    from narbench.data.dataset import GraphDataset, stratified_split
    from narbench.search_engine.engine import search
    from narbench.search_engine.index import SHIPPED, SearchIndex
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.index_file import read_index, write_index
    from tests.conftest import toy_graphs

    graphs = toy_graphs()
    split = stratified_split([g.family for g in graphs], test_size=0.25, seed=0)
    ds = GraphDataset("toy", "0", [f"op{i}" for i in range(8)], graphs, "0" * 64, split)
    path = tmp_path / "mine.nari"
    write_index(build_index(IndexConfig(encoder="wl", progress=False), dataset=ds), path)
    index = read_index(path)
    assert index.sha256 and index.sha256 != SHIPPED.sha256
    assert not index.pinned and "unpinned" in index.describe()
    result = search(index.names[0], 3, index=index, progress=False)  # an index graph by its name
    assert result.index_pinned is False and "unpinned" in result.index and "unpinned" in str(result)
    assert result.to_json()["index_pinned"] is False
    shipped_like = SearchIndex.__new__(SearchIndex)
    shipped_like.sha256 = SHIPPED.sha256
    assert shipped_like.pinned


def test_every_committed_training_free_result_is_in_the_ledger():
    """The committed leaderboard's training-free rows read `re-run` because `leaderboard/verified.csv` holds
    each shown floor file's bytes: a new or changed floor result is committed with `narbench leaderboard
    --verify` run over it (it re-runs only files the ledger does not know)."""
    from narbench.harness.verify import deterministic_floor
    from narbench.leaderboard.ledger import Ledger
    from narbench.leaderboard.tables import PAPER_PROFILES

    root = Path(__file__).resolve().parents[2] / "leaderboard"
    book = Ledger(root / "verified.csv")
    missing, floors = [], 0
    for path in sorted((root / "results").rglob("*.json")):
        if path.name.endswith(".queries.json"):
            continue
        head = json.loads(path.read_text())
        if head.get("profile") not in PAPER_PROFILES or not deterministic_floor(head.get("encoder", "")):
            continue
        floors += 1
        if not book.knows(path):
            missing.append(path.name)
    assert floors > 0 and missing == [], f"{len(missing)} of {floors} not re-run: {missing[:5]}"
