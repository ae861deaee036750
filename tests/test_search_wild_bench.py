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
