"""`benchmarks.search.build_path`: outside models extracted as the command line builds them, compared across commits."""

from __future__ import annotations

from types import SimpleNamespace

from benchmarks.search.build_path import compare, mentions


def _rec(identity, ok=True, input_="tensor [1, 3, 224, 224]", canonical="aa", nodes=10):
    if not ok:
        return {"id": identity, "ok": False, "error": "TargetError: the forward pass failed"}
    return {"id": identity, "ok": True, "input": input_, "canonical": canonical, "nodes": nodes}


def test_compare_names_the_rows_whose_input_graph_or_failure_changed():
    before = [_rec("s/p/same"), _rec("s/p/graph"), _rec("s/p/ran", ok=False), _rec("s/p/input"), _rec("s/p/gone")]
    after = [_rec("s/p/same", nodes=11),  # the node count alone is not an outcome: the canonical graph is
             _rec("s/p/graph", canonical="bb", nodes=9), _rec("s/p/ran", input_="tensor [1, 16, 2]"),
             _rec("s/p/input", input_="tensor [1, 3, 256, 256]"), _rec("s/p/new")]
    lines = compare(before, after).splitlines()
    assert lines[-1] == "3 rows changed, 1 the same"
    assert lines[0] == "s/p/graph: tensor [1, 3, 224, 224] (10 nodes) -> tensor [1, 3, 224, 224] (9 nodes)"
    assert lines[1].startswith("s/p/ran: fails: TargetError") and lines[1].endswith("-> tensor [1, 16, 2] (10 nodes)")
    assert lines[2].startswith("s/p/input: ")


def test_match_reads_the_builder_arguments_package_and_provenance():
    row = SimpleNamespace(package="bayesflow", builder="bayesflow.networks:SetTransformer",
                          kwargs={"name": {"__builder__": "os:environ.setdefault", "value": "torch"}},
                          provenance="pip package bayesflow==2.0.12; upstream x; code: Keras 3 layers")
    assert mentions(row, "keras") and mentions(row, "SETTRANSFORMER") and not mentions(row, "timm")
