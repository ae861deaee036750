"""`benchmarks.search.wild`: an outside set searched in the shipped index, per package and per model."""

from __future__ import annotations

import numpy as np

from benchmarks.search import wild
from narbench.datasets.wild import outside_set, read_graphs


def test_the_report_counts_every_model_and_measure_keeps_each_result(capsys):
    assert wild.main(["--set", "wildval5", "--per-model"]) == 0
    out = capsys.readouterr().out
    graphs = read_graphs(canonical=next(iter(outside_set("wildval5").files)), name="wildval5")
    fits = sum(bool(f) for f in graphs.families)
    total = next(line for line in out.splitlines() if line.startswith("| all "))
    cells = [c.strip() for c in total.strip("|").split("|")]
    assert cells[1:3] == [str(fits), str(len(graphs.graphs) - fits)]
    assert sum(line.startswith("wildval5/") for line in out.splitlines()) == len(graphs.graphs)


def test_measure_returns_the_searches_it_scored():
    from narbench.search_engine.index_file import load_index

    index = load_index(None, None)
    w = next(w for w in (read_graphs(canonical=c, name="wildval5") for c in outside_set("wildval5").files)
             if list(w.vocab) == list(index.vocab))
    m = wild.measure(index, w.graphs[:4], w.families[:4], w.vocab)
    fits = np.array([True, False, True, False])
    assert [r.hits[0].similarity for r in m["results"][fits]] == list(m["cosine"][fits])
    assert all(len(r.hits) == 10 for r in m["results"])


def test_a_local_build_is_searched_in_place_of_the_shipped_file(tmp_path, capsys):
    """`--graphs FILE`: a set's graphs from a local build (here the first five of `wildval9`'s, written again) are
    the ones searched and counted, and the report names the file; a file over another vocabulary is refused (2)."""
    from narbench.data.store import write_graphs

    w = read_graphs(canonical=next(iter(outside_set("wildval9").files)), name="wildval9")
    path = tmp_path / "wildval9-local.narg"
    write_graphs(path, w.graphs[:5], list(w.vocab), w.header)
    assert wild.main(["--set", "wildval9", "--graphs", str(path), "--per-model", "--order", "family"]) == 0
    out = capsys.readouterr().out
    assert f"({path}, a local build" in out
    assert sum(line.startswith("wildval9/") for line in out.splitlines()) == 5
    other = tmp_path / "other.narg"
    write_graphs(other, w.graphs[:1], [*w.vocab[:-1], "not-an-op"], w.header)
    assert wild.main(["--set", "wildval9", "--graphs", str(other)]) == 2
    assert f"{other} has" in capsys.readouterr().err


def test_rules_a_set_ships_no_file_of_are_built_into_a_file_of_their_own():
    """`narbench.zoo.wild_graphs.query_set`: a set's own rules write its shipped file's name; newer ones
    `<name>-<version>-canonical-<rules>.narg`, which nothing pins."""
    from narbench.zoo.wild_graphs import query_set

    chosen = outside_set("wildval9")
    assert query_set(None, "wildval9").version == chosen.files[chosen.canonical].version
    assert query_set("2.11", "wildval9").version == f"{chosen.version}-canonical-2.11"
    assert query_set("2.11", "wildval13").version == outside_set("wildval13").files["2.11"].version


def test_a_set_is_read_under_the_rules_asked_for(capsys):
    """`--canonical-version`: the set's file under those rules (its rows re-extracted, the version in the report);
    rules it ships no file of are refused (2), naming the ones it has."""
    assert wild.main(["--set", "wildval9", "--canonical-version", "2.11"]) == 0
    assert "wildval9 1.0-canonical-2.11:" in capsys.readouterr().out
    assert wild.main(["--set", "wildval13", "--canonical-version", "2.3"]) == 2
    assert "no wildval13 graphs under canonical '2.3'; there are: 2.11" in capsys.readouterr().err
