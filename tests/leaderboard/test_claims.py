"""Claims of prose checked against the tables: a sentence that contradicts them is reported."""

from __future__ import annotations

import numpy as np

from narbench import leaderboard as lb
from narbench.leaderboard.claims import check, find_claims, findings_markdown, update_findings, FINDINGS_END, FINDINGS_START
from narbench.leaderboard.subsets import with_subsets
from tests.handmade import write_result
from tests.leaderboard.conftest import N_QUERIES, base
from tests.leaderboard.test_headline import _three_settings


def _evidence(folder):
    records = with_subsets(lb.collect([folder]))
    return records, lb.build_tables(records)


def test_claims_that_agree_pass_and_each_kind_of_contradiction_is_named(tmp_path):
    _three_settings(tmp_path / "res")
    records, tables = _evidence(tmp_path / "res")
    wl_unseen = next(r for b in tables[0].blocks if b.setting and b.setting[1] == "unseen" for r in b.rows
                     if r.label == "wl (floor)").mean["ndcg@20"]
    good = (f"On unseen `wl (floor)` ranks first on `real unseen` and `wl (floor)` ({wl_unseen:.3f}) "
            "is significantly above `gcn` on `real unseen`. `gcn` ranks first on `nas standard`.")
    assert [c.kind for c in find_claims(good)] == ["first", "above", "score", "first"]
    listed = "`gcn`, `wl (floor)` and `random (floor)` are significantly below `x` on `real unseen`."
    assert [(c.kind, c.labels) for c in find_claims(listed)] == [
        ("below", ("gcn", "x")), ("below", ("wl (floor)", "x")), ("below", ("random (floor)", "x"))]
    assert check("`random (floor)` and `gcn` are significantly below `wl (floor)` on `real unseen`.", records, tables) == []
    assert check(good, records, tables) == []
    bad = {
        "`gcn` ranks first on `real unseen`.": "`wl (floor)` ranks first",
        "`gcn` is significantly above `wl (floor)` on `real unseen`.": "is below",
        "`gcn` and `wl (floor)` are not significantly apart on `real unseen`.": "significantly apart",
        "On unseen `wl (floor)` (0.123) leads on `real unseen`.": "not 0.123",
        "`gin` ranks first on `real unseen`.": "no row `gin`",
        "`wl (floor)` ranks first on `real everything`.": "no Table 1 block",
        # the whole crossimpl split favours gcn (its exact queries); the reimpl subset does not
        "`gcn` is significantly above `wl (floor)` on `real crossimpl/reimpl`.": "is below",
        # lists: every pair is checked, and the one that fails is named
        "`random (floor)` and `gcn` are significantly below `wl (floor)` on `nas standard`.": "`gcn` (",
        "`wl (floor)` is not significantly apart from `random (floor)` on `real unseen`.": "significantly apart",
    }
    for sentence, why in bad.items():
        (problem,) = check(sentence, records, tables)
        assert why in problem and sentence in problem


def test_seed_noise_is_never_claimed_significant(tmp_path):
    rng = np.random.default_rng(1)
    q = base(0)
    for s in range(3):  # two encoders: the same per-query scores up to seed-level noise
        for enc in ("gcn", "gat"):
            write_result(tmp_path / "res", enc, "none", s, np.clip(q + rng.normal(0, 0.02) , 0, 1), dataset="real",
                         split="unseen")
    records, tables = _evidence(tmp_path / "res")
    assert check("`gcn` and `gat` are not significantly apart on `real unseen`.", records, tables) == []
    assert check("`gcn` is significantly above `gat` on `real unseen`.", records, tables)
    assert check("`gat` is significantly above `gcn` on `real unseen`.", records, tables)


def test_generated_findings_pass_their_own_check_and_land_between_markers(tmp_path):
    _three_settings(tmp_path / "res")
    records, tables = _evidence(tmp_path / "res")
    text = findings_markdown(records, tables)
    firsts = {(c.labels[0], c.setting) for c in find_claims(text) if c.kind == "first"}
    assert firsts == {("wl (floor)", "real unseen"), ("wl (floor)", "real crossimpl/reimpl"), ("gcn", "nas standard")}
    assert "`gcn` is significantly below `wl (floor)` on `real unseen`" in text
    assert check(text, records, tables) == []
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{FINDINGS_START}\nold\n{FINDINGS_END}\nend\n")
    assert update_findings(readme, records, tables) is True and update_findings(readme, records, tables) is False
    assert readme.read_text() == f"intro\n{FINDINGS_START}\n{text}\n{FINDINGS_END}\nend\n"
    (tmp_path / "plain.md").write_text("no markers\n")
    assert update_findings(tmp_path / "plain.md", records, tables) is None


def test_tables_and_code_are_not_read_as_claims():
    text = "```\n`gcn` ranks first on `real unseen`\n```\n| `gcn` ranks first on `real unseen` |\n"
    assert find_claims(text) == []


def test_findings_state_the_papers_claim_and_what_ours_ft_changes(tmp_path):
    """ours below gcn, ours-ft above both: each said once per setting, in the checked phrasing."""
    for s in range(3):
        q = base(s)
        write_result(tmp_path / "res", "gcn", "none", s, q, dataset="real", split="unseen")
        write_result(tmp_path / "res", "ours", "motif", s, np.clip(q - 0.2, 0, 1), dataset="real", split="unseen")
        write_result(tmp_path / "res", "ours-ft", "motif", s, np.clip(q + 0.1, 0, 1), dataset="real", split="unseen")
        write_result(tmp_path / "res", "wl", "none", s, np.clip(q - 0.05, 0, 1), dataset="real", split="unseen")
    records, tables = _evidence(tmp_path / "res")
    text = findings_markdown(records, tables)
    assert "The paper's claim, its method above GCN: `ours+motif` (" in text
    pairs = [(c.kind, c.labels) for c in find_claims(text) if c.kind != "score" and c.labels[-1] in ("gcn", "ours+motif")]
    assert pairs == [("below", ("ours+motif", "gcn")), ("above", ("ours-ft+motif", "gcn")),
                     ("above", ("ours-ft+motif", "ours+motif"))]
    assert check(text, records, tables) == []


def test_prose_that_speaks_of_results_outside_the_checked_phrasing_is_reported():
    from narbench.leaderboard.claims import unchecked

    ok = ("narbench ships two datasets and 16,965 graphs (14.1 MB, Python >= 3.10, torch 2.13-2.15). "
          "`wl (floor)` (0.812) ranks first on `real unseen`. `gcn` is significantly below `wl (floor)` on `real unseen`.\n\n"
          "<!-- narbench:headline:start -->\nbold: best of its column, 0.812 ranks second\n<!-- narbench:headline:end -->\n\n"
          "| `gcn` is second (0.5) |\n```\nthe best 0.999\n```\n")
    assert unchecked(ok) == []
    bad = ["It is the best training-free row.", "On real unseen it is second, 0.867.", "798 of its 799 query models.",
           "Not the rows that are `graf-lda`'s three cross-source ones.", "`gps` leads on `real unseen`.",
           "`wl (floor)` (0.812) ranks first on `real unseen`, 0.05 above `gcn`.", "It is above `gcn` there.",
           "`gcn` (0.7) beats the floors on `real unseen` and `nas standard`."]
    for sentence in bad:
        (problem,) = unchecked(sentence)
        assert problem.startswith(repr(sentence)), sentence


def test_a_method_name_finds_its_one_row_and_the_findings_use_it(tmp_path):
    """A declared Table 1 holds one graf-lda row, `graf-lda (holdout=cross-source)`: prose may call it `graf-lda`."""
    from narbench.leaderboard.declared import Config
    from narbench.leaderboard.variants import declare_tables

    for s in range(3):
        q = base(s)
        write_result(tmp_path / "res", "graf-lda", "none", s, q, dataset="real", split="unseen", variant="holdout=cross-source")
        write_result(tmp_path / "res", "graf-lda", "none", s, np.clip(q + 0.1, 0, 1), dataset="real", split="unseen")
        write_result(tmp_path / "res", "wl", "none", s, np.clip(q - 0.2, 0, 1), dataset="real", split="unseen")
    records, tables = _evidence(tmp_path / "res")
    tables = declare_tables(tables, records, {("graf-lda", "real"): Config("none", variant="holdout=cross-source")})
    assert check("`graf-lda` ranks first on `real unseen`.", records, tables) == []
    assert check("`graf-lda (holdout=cross-source)` ranks first on `real unseen`.", records, tables) == []
    (problem,) = check("`graf-lda (floor)` ranks first on `real unseen`.", records, tables)
    assert "no row" in problem
    assert findings_markdown(records, tables).startswith("- `graf-lda` (")


def test_a_single_seed_trained_row_above_the_rest_neither_breaks_nor_wins_the_findings(tmp_path):
    """A folder of single-seed runs (as `narbench leaderboard --results runs` sees a user's first runs):
    a trained row with one seed cannot rank, in the findings and in the check of "ranks first" alike."""
    q = base(0)
    for s in range(2):
        write_result(tmp_path / "res", "wl", "none", s, q * 0.8, dataset="real", split="unseen")
    write_result(tmp_path / "res", "gcn", "none", 0, np.clip(q * 0.8 + 0.1, 0, 1), dataset="real", split="unseen")
    records, tables = _evidence(tmp_path / "res")
    text = findings_markdown(records, tables)  # raised "generated findings fail their own check" before
    assert "`wl (floor)`" in text and "ranks first on `real unseen`" in text
    assert check("`wl (floor)` ranks first on `real unseen`.", records, tables) == []
