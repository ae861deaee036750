"""The README's headline table: regenerated between its markers from Table 1, never typed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from narbench import leaderboard as lb
from narbench.leaderboard.headline import END, START, HeadlineError, headline_markdown
from tests.handmade import write_result
from tests.leaderboard.conftest import N_QUERIES, base

pytestmark = pytest.mark.usefixtures("unchecked_scores")  # real's pinned content, hand-made scores
SETTINGS = (("nas", "standard"), ("real", "standard"), ("real", "unseen"), ("real", "crossimpl"))
#: crossimpl's subsets: the first half of the queries are `exact` (isomorphic to a corpus graph)
SUBSETS = {"exact": list(range(N_QUERIES // 2)), "reimpl": list(range(N_QUERIES // 2, N_QUERIES))}


def _three_settings(out, *, skip=()):
    """gcn beats wl on nas and real-standard; wl beats gcn on real-unseen; on crossimpl gcn wins the
    `exact` queries by far and wl the others (`reimpl`); 3 seeds each."""
    for ds, split in SETTINGS:
        if (ds, split) in skip:
            continue
        for s in range(3):
            q = base(s)
            unseen = split == "unseen"
            subsets = SUBSETS if split == "crossimpl" else None
            gcn, wl = q - (0.2 if unseen else 0.0), q - (0.0 if unseen else 0.2)
            if subsets:  # gcn: perfect on exact, 0.3 below wl on reimpl
                gcn = np.where(np.arange(N_QUERIES) < N_QUERIES // 2, 1.0, np.clip(q - 0.3, 0, 1))
                wl = q
            write_result(out, "gcn", "none", s, gcn, dataset=ds, split=split, subsets=subsets)
            write_result(out, "wl", "none", s, wl, dataset=ds, split=split, subsets=subsets)
            write_result(out, "random", "none", s, np.full(N_QUERIES, 0.05), dataset=ds, split=split, subsets=subsets)


def _tables(folder):
    from narbench.leaderboard.subsets import with_subsets

    return lb.build_tables(with_subsets(lb.collect([folder])))


def test_headline_leads_with_the_settings_that_separate_methods_sorted_by_unseen(tmp_path):
    _three_settings(tmp_path / "res")
    text = headline_markdown(_tables(tmp_path / "res"))
    lines = [ln for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("| method")]
    assert [ln.split(" | ")[0] for ln in lines] == ["| wl (floor)", "| gcn", "| random (floor)"]
    # standard is not a headline column; crossimpl is shown without its `exact` queries
    assert "| method | real · unseen | real · crossimpl/reimpl | nas · standard |" in text
    wl, gcn = lines[0].split(" | "), lines[1].split(" | ")
    assert wl[1].startswith("**") and gcn[1].rstrip(" |").endswith("†")  # unseen: wl best, gcn worse
    assert wl[2].startswith("**") and gcn[2].endswith("†")  # reimpl: wl best, though gcn wins crossimpl as a whole
    assert gcn[3].rstrip(" |").startswith("**") and wl[3].rstrip(" |").endswith("†")  # nas: the other way round
    assert "`quick` profile" in text and "protocol `family`" in text


def test_headline_waits_for_every_column(tmp_path):
    _three_settings(tmp_path / "res", skip={("real", "unseen")})
    assert headline_markdown(_tables(tmp_path / "res")).startswith("*No `quick`")


def test_leaderboard_rewrites_only_the_marked_block_of_the_readme(tmp_path):
    _three_settings(tmp_path / "lb" / "results")
    readme = tmp_path / "README.md"
    readme.write_text(f"# project\n\nintro\n\n{START}\nstale numbers typed by hand\n{END}\n\nmore text\n")
    lb.write_leaderboard([], tmp_path / "lb", plots=False, readme=readme)
    text = readme.read_text()
    assert text.startswith("# project\n\nintro\n\n" + START + "\nNDCG@20") and text.endswith(END + "\n\nmore text\n")
    assert "stale" not in text and "| wl (floor) |" in text
    first = text
    lb.write_leaderboard([], tmp_path / "lb", plots=False, readme=readme)
    assert readme.read_text() == first  # regenerated identically


def test_readme_without_markers_is_refused_before_anything_is_written(tmp_path):
    _three_settings(tmp_path / "lb" / "results")
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    with pytest.raises(HeadlineError, match="narbench:headline:start"):
        lb.write_leaderboard([], tmp_path / "lb", plots=False, readme=readme)
    assert not (tmp_path / "lb" / "README.md").exists() and readme.read_text() == "# no markers\n"


def test_ceiling_rows_come_from_the_ceiling_table(tmp_path):
    from narbench.leaderboard.headline import read_ceiling

    _three_settings(tmp_path / "res")
    path = tmp_path / "ceiling.csv"
    path.write_text("dataset,version,split,resolution,rule,ndcg@20\n"
                    "real,2.1,unseen,iso,label,1.0\nreal,2.1,unseen,iso,vote,0.5\nreal,2.1,crossimpl/reimpl,iso,label,0.9745\n"
                    "real,2.1,unseen,nd,label,0.95982\n")
    ceiling = read_ceiling(path)
    assert ceiling == {("real", "2.1", "unseen", "iso"): 1.0, ("real", "2.1", "crossimpl/reimpl", "iso"): 0.9745,
                       ("real", "2.1", "unseen", "nd"): 0.95982}
    text = headline_markdown(_tables(tmp_path / "res"), ceiling)
    rows = [ln for ln in text.splitlines() if ln.startswith("| *")]
    # only the isomorphism oracle is a bound; the near-duplicate row (a WL-resolution reference) is not shown
    assert rows == ["| *bound: graph-only oracle, isomorphic graphs tied* | *1.000* | *0.975* | – |"]
    assert "no method that reads only the graph can score above it" in text
    assert read_ceiling(tmp_path / "missing.csv") == {}
    assert "bound" not in headline_markdown(_tables(tmp_path / "res"))


def test_a_column_takes_the_ceiling_of_its_own_dataset_version():
    """real 2.1's and 2.2's oracles differ; a column labelled with a version reads that version's row,
    an unversioned label reads the only version there is, and none when several are there."""
    from narbench.leaderboard.headline import ceiling_of

    ceiling = {("real", "2.1", "unseen", "iso"): 0.9, ("real", "2.2", "unseen", "iso"): 0.95,
               ("nas", "1.0", "standard", "iso"): 1.0}
    assert ceiling_of(ceiling, "real 2.2 (115ecfa4)", "unseen", "iso") == 0.95
    assert ceiling_of(ceiling, "real 2.1 (98efc55d)", "unseen", "iso") == 0.9
    assert ceiling_of(ceiling, "real 2.3 (00000000)", "unseen", "iso") is None
    assert ceiling_of(ceiling, "real", "unseen", "iso") is None
    assert ceiling_of(ceiling, "nas", "standard", "iso") == 1.0
    assert ceiling_of(ceiling, "nas", "standard", "nd") is None


def test_per_package_table_averages_each_package_over_seeds(tmp_path):
    from narbench.leaderboard.subsets import package_markdown

    half = N_QUERIES // 2
    packages = {"package:a": list(range(half)), "package:b": list(range(half, N_QUERIES))}
    for s in range(2):
        q = np.where(np.arange(N_QUERIES) < half, 0.2 + 0.1 * s, 0.8)  # a: 0.2 and 0.3 over the seeds, b: 0.8
        write_result(tmp_path, "gcn", "none", s, q, dataset="real", split="crossimpl", subsets=packages)
    text = package_markdown(lb.collect([tmp_path]))
    assert f"| method | a ({half}) | b ({N_QUERIES - half}) |" in text
    assert "| gcn | 0.250 | 0.800 |" in text
    assert package_markdown(lb.collect([tmp_path]), "mrr@20").startswith("## Per package")
    assert package_markdown([]) == ""


def test_headline_takes_the_paper_profile_only_when_it_holds_every_method(tmp_path):
    """A paper grid run part of the way (its floors on a CPU, some trained encoders still waiting
    for a GPU) must not head the README with part of the methods; once it holds them all, it does."""
    _three_settings(tmp_path / "res")
    for ds, split in SETTINGS:  # the paper profile: floors everywhere, gcn everywhere but unseen, gat there
        subsets = SUBSETS if split == "crossimpl" else None
        trained = "gat" if split == "unseen" else "gcn"
        for s in range(3):
            for enc, pq in (("wl", base(s)), ("random", np.full(N_QUERIES, 0.05)), (trained, base(s))):
                write_result(tmp_path / "res", enc, "none", s, pq, dataset=ds, split=split, subsets=subsets,
                             profile="paper")
    assert "`quick` profile" in headline_markdown(_tables(tmp_path / "res"))
    for s in range(3):
        write_result(tmp_path / "res", "gcn", "none", s, base(s), dataset="real", split="unseen", profile="paper")
    text = headline_markdown(_tables(tmp_path / "res"))
    assert "`paper` profile" in text and "| gat |" in text


def test_a_new_dataset_version_heads_the_readme_only_once_it_holds_every_method_of_every_column(tmp_path):
    """real 2.2's results arrive over several sessions: its floors alone, or some of its splits, must not
    replace real 2.1's columns; once every real split of 2.2 holds 2.1's methods, all real columns come
    from 2.2 (the headline's and the claims checker's), and nas is untouched."""
    from narbench.datasets.real import Real22Dataset
    from narbench.leaderboard.claims import _headline_blocks

    _three_settings(tmp_path / "res")  # real "1.0" (hand-made content) and nas
    new = dict(version="2.2", sha=Real22Dataset.expected_sha256, dataset="real", tag="-v2.2")

    def write(encoders, splits):
        for split in splits:
            for s in range(3):
                for enc in encoders:
                    pq = np.full(N_QUERIES, 0.05) if enc == "random" else base(s)
                    cx = split == "crossimpl"  # 2.2's own query file, as real-2.2 records it
                    write_result(tmp_path / "res", enc, "none", s, pq, split=split, subsets=SUBSETS if cx else None,
                                 parts={"real": new["sha"], "crossimpl": "c" * 64} if cx else None, **new)

    write(("wl", "random"), ("standard", "unseen", "crossimpl"))  # the floors first
    text = headline_markdown(_tables(tmp_path / "res"))
    assert "real 1.0 (" in text and "real 2.2 (" not in text
    write(("gcn",), ("standard", "unseen"))
    assert "real 2.2 (" not in headline_markdown(_tables(tmp_path / "res"))  # gcn on 2.2's crossimpl missing
    write(("gcn",), ("crossimpl",))
    text = headline_markdown(_tables(tmp_path / "res"))
    assert "| real 2.2 (115ecfa4) · unseen | real 2.2 (115ecfa4) · crossimpl/reimpl | nas · standard |" in text
    profile, blocks = _headline_blocks(_tables(tmp_path / "res"))
    assert profile == "quick" and blocks["real unseen"].setting[0] == blocks["real standard"].setting[0] == \
        "real 2.2 (115ecfa4)"
