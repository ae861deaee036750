"""Result-file validation (`narbench.validation`): tampered and inconsistent files are rejected, named."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from narbench.eval import validation
from narbench.leaderboard import RejectedResultsError, collect
from narbench.eval.validation import InvalidResultError, KnownDataset, validate_result
from tests.conftest import HAND_MADE_SHA256
from tests.handmade import write_result

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "leaderboard" / "results"


def _registered():
    return [d for d in validation.known_datasets() if d.sha256 != HAND_MADE_SHA256]


def _edit(path: Path, change) -> Path:
    """Apply `change` to the parsed JSON of `path` and write it back."""
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return path


def _reason(path: Path, **kw) -> str:
    with pytest.raises(InvalidResultError) as err:
        validate_result(path, **kw)
    assert err.value.path == path and str(err.value).startswith(f"{path}: ")
    return err.value.reason


@pytest.fixture
def good(tmp_path) -> Path:
    return write_result(tmp_path, "gcn", "none", 0, np.linspace(0.2, 0.9, 40))


def test_committed_results_are_valid():
    records = collect([COMMITTED], datasets=_registered())
    assert len(records) >= 60 and {r.result.dataset["name"] for r in records} == {"nas", "real"}
    assert all(len(r.per_query["ndcg@20"]) == r.result.num_queries for r in records)


def test_the_tampered_copy_from_the_issue_is_rejected_with_its_path(tmp_path, capsys):
    """A committed nas gcn result copied with ndcg@20 edited to 7.5 and its seed to 1: never averaged in."""
    from narbench.cli import main

    src = next(COMMITTED.glob("nas-*gcn-none-quick-*s0-*.json"))
    out = tmp_path / "lb" / "results"
    shutil.copytree(COMMITTED, out)
    stamp = src.name.rsplit("-", 1)[1]  # a new file name: seed 1, a time no committed file has
    bad = out / src.name.replace("-s0-", "-s1-").replace(stamp, "20990101T000000000000Z.json")
    shutil.copy(src, bad)
    shutil.copy(validation.sidecar_path(src), validation.sidecar_path(bad))

    def tamper(ndcg):
        def change(d):
            d["run_id"], d["seed"], d["config"]["run"]["seed"] = bad.name[:-5], 1, 1
            d["metrics"]["ndcg@20"] = ndcg
        return change

    _edit(bad, tamper(7.5))
    assert _reason(bad, datasets=_registered()) == "metric ndcg@20 is 7.5, outside its range [0, 1]"
    _edit(bad, tamper(0.99))  # in range, consistent seed and run_id: only its sidecar disagrees
    assert "metric ndcg@20 is 0.99 but the mean of its" in _reason(bad, datasets=_registered())
    assert main(["leaderboard", "--out", str(tmp_path / "lb"), "--no-plots"]) == 2
    err = capsys.readouterr().err.splitlines()[1:]  # after the progress line
    assert err[0] == "error: 1 result file rejected (nothing was aggregated):"
    assert err[1].startswith(f"  {bad}: metric ndcg@20 is 0.99 but the mean of its")
    assert not (tmp_path / "lb" / "README.md").exists() and not (tmp_path / "lb" / "aggregate.csv").exists()


def test_metric_out_of_range_or_not_a_number(good):
    for value, shown in ((1.2, "1.2"), (-0.1, "-0.1"), ("0.5", "'0.5'"), (float("nan"), "nan"), (True, "True")):
        _edit(good, lambda d: d["metrics"].__setitem__("mrr@20", value))
        assert _reason(good) == f"metric mrr@20 is {shown}, outside its range [0, 1]"
    _edit(good, lambda d: d["metrics"].pop("mrr@20"))
    assert _reason(good) == "missing metrics mrr@20"


def test_means_must_equal_the_sidecar_within_its_rounding(good):
    mean = json.loads(good.read_text())["metrics"]["ndcg@20"]
    _edit(good, lambda d: d["metrics"].__setitem__("ndcg@20", mean + 4e-7))  # within the sidecar's rounding
    validate_result(good)
    _edit(good, lambda d: d["metrics"].__setitem__("ndcg@20", mean + 0.01))
    assert f"metric ndcg@20 is {mean + 0.01!r} but the mean of its 40 per-query scores" in _reason(good)


def test_sidecar_missing_short_or_out_of_range(good):
    side = validation.sidecar_path(good)
    scores = json.loads(gzip.decompress(side.read_bytes()))
    side.unlink()
    assert "per-query sidecar" in _reason(good) and "is missing" in _reason(good)
    side.write_bytes(gzip.compress(json.dumps({**scores, "map@20": scores["map@20"][:-1]}).encode()))
    assert "has 39 map@20 scores for 40 queries" in _reason(good)
    side.write_bytes(gzip.compress(json.dumps({**scores, "mrr@50": [2.0] * 40}).encode()))
    assert "a per-query mrr@50 is outside [0, 1]" in _reason(good)
    side.write_bytes(b"not gzip")
    assert "unreadable" in _reason(good)


def test_paper_convention_ndcg_is_optional_but_checked_when_present(tmp_path, good):
    """Files written before `ndcg_paper@k` stay valid; a file that holds it is checked like the rest."""
    assert "ndcg_paper@20" not in json.loads(good.read_text())["metrics_extra"]
    validate_result(good)
    q = np.linspace(0.2, 0.9, 40)
    new = write_result(tmp_path / "new", "gcn", "none", 0, {"ndcg@20": q, "ndcg_paper@20": q / 4,
                                                             "ndcg_paper@50": q / 3, "ndcg_paper@100": q / 2})
    _, per_query = validate_result(new)
    assert per_query["ndcg_paper@20"].tolist() == pytest.approx((q / 4).tolist(), abs=1e-6)
    _edit(new, lambda d: d["metrics_extra"].__setitem__("ndcg_paper@50", 1.5))
    assert _reason(new) == "metric ndcg_paper@50 is 1.5, outside its range [0, 1]"
    _edit(new, lambda d: d["metrics_extra"].__setitem__("ndcg_paper@50", 0.9))
    assert "metric ndcg_paper@50 is 0.9 but the mean of its 40 per-query scores" in _reason(new)
    side = validation.sidecar_path(new)
    scores = json.loads(gzip.decompress(side.read_bytes()))
    _edit(new, lambda d: d["metrics_extra"].__setitem__("ndcg_paper@50", float(np.round(q / 3, 6).mean())))
    side.write_bytes(gzip.compress(json.dumps({k: v for k, v in scores.items() if k != "ndcg_paper@100"}).encode()))
    assert "has none ndcg_paper@100 scores for 40 queries" in _reason(new)


def test_dataset_must_be_registered_with_its_pinned_content(tmp_path):
    nas_pin = next(d.sha256 for d in _registered() if d.name == "nas")
    q = np.full(10, 0.5)
    assert "dataset 'zoo' is not a registered dataset (known: nas, real" in _reason(
        write_result(tmp_path, "gcn", "none", 0, q, dataset="zoo"))
    assert "version '2.0' is not the registered version '1.0'" in _reason(
        write_result(tmp_path, "gcn", "none", 1, q, version="2.0"))
    other = write_result(tmp_path, "gcn", "none", 2, q, sha="cd" * 32)
    assert f"has sha256 cdcdcdcdcdcdcdcd..., not the pinned {nas_pin[:16]}..." in _reason(other)
    assert "not a sha256 digest" in _reason(write_result(tmp_path, "gcn", "none", 3, q, sha="abc"))
    assert "dataset nas has no split 'unseen'; its splits: standard" in _reason(
        write_result(tmp_path, "gcn", "none", 4, q, sha=nas_pin, split="unseen"), datasets=_registered())
    # a dataset that pins no content (a third party's toy) is accepted by name and version
    toy = [KnownDataset("toy", "0", None)]
    validate_result(write_result(tmp_path, "gcn", "none", 5, q, dataset="toy", version="0", sha="ef" * 32), datasets=toy)


def test_profile_protocol_seed_and_file_name(tmp_path, good):
    q = np.full(10, 0.5)
    assert "unknown profile 'huge'" in _reason(write_result(tmp_path, "gcn", "none", 0, q, profile="huge"))
    assert "unknown protocol 'coarse'; known protocols: family, paper" in _reason(
        write_result(tmp_path, "gcn", "none", 0, q, protocol="coarse"))
    assert "unknown protocol 'schema1-mixed'" in _reason(write_result(tmp_path, "gcn", "none", 0, q, protocol="schema1-mixed"))
    _edit(good, lambda d: d["config"]["run"].__setitem__("seed", 3))
    assert "seed 0 disagrees with config.run.seed 3" in _reason(good)
    renamed = good.with_name("copy.json")
    shutil.copy(write_result(tmp_path, "gat", "none", 0, q), renamed)
    assert "the file name does not match its run_id" in _reason(renamed)
    _edit(renamed, lambda d: d.__setitem__("schema", 3))
    assert "schema 3: this narbench reads result schemas 1 to 2" in _reason(renamed)


def test_one_bad_file_rejects_the_collection_and_names_every_bad_file(tmp_path):
    for seed in range(3):
        write_result(tmp_path, "gcn", "none", seed, np.full(10, 0.5))
    bad = [_edit(write_result(tmp_path, "gat", "none", s, np.full(10, 0.5)), lambda d: d.__setitem__("profile", "nope"))
           for s in (0, 1)]
    with pytest.raises(RejectedResultsError) as err:
        collect([tmp_path])
    assert [e.path for e in err.value.errors] == bad
    assert str(err.value).startswith("2 result files rejected (nothing was aggregated):")
    twin = tmp_path / "twin"
    twin.mkdir()
    good = write_result(tmp_path / "ok", "gcn", "none", 0, np.full(10, 0.5))
    shutil.copy(good, twin / good.name)
    shutil.copy(validation.sidecar_path(good), validation.sidecar_path(twin / good.name))
    with pytest.raises(RejectedResultsError, match="is also .*one run, counted once"):
        collect([tmp_path / "ok", twin])


@pytest.mark.parametrize("family_sizes", [(3, 5, 8), (25, 40, 130), (1, 60, 250)])
def test_every_score_a_ranking_gives_is_within_its_bounds(family_sizes):
    """Rankings drawn at random (and perfect ones, and ones with a corpus item listed twice), scored by the
    metrics narbench writes, never trip the per-query checks: they refuse only what no ranking gives."""
    from narbench.eval.bounds import bound_problem, shape_problem
    from narbench.eval.metrics import score_rankings

    rng = np.random.default_rng(sum(family_sizes))
    corpus = np.repeat(np.arange(len(family_sizes)), family_sizes)
    queries = np.repeat(np.arange(len(family_sizes)), 4)
    ranked = np.stack([rng.permutation(len(corpus))[:100] for _ in queries])
    ranked[:4] = np.argsort(corpus != queries[0], kind="stable")[:100]  # perfect for the first family
    ranked[5, 1] = ranked[5, 0]  # a corpus item listed twice
    _, per_query = score_rankings(queries, corpus, ranked)
    per_query = {m: np.array([round(float(v), 6) for v in vals]) for m, vals in per_query.items()}  # as written
    relevant = np.array(family_sizes)[queries]
    assert shape_problem(per_query) is None and bound_problem(per_query, relevant) is None
    assert per_query["map@20"][:4].tolist() == [round(min(20, relevant[0]) / relevant[0], 6)] * 4  # at the bound
    forged = {m: np.ones_like(v) for m, v in per_query.items()}
    assert (bound_problem(forged, relevant) is None) == (max(family_sizes) <= 20)
