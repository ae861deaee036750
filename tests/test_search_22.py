"""Search over an index of canonical 2.2 graphs: a query is extracted with design attributes and
rewritten by 2.2's rules, so an encoder and a decoder with the same blocks stay apart (issue 38)."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from narbench.data.canonical import canonical_vocabulary  # noqa: E402
from narbench.data.dataset import GraphDataset, stratified_split  # noqa: E402
from narbench.data.graph import ArchGraph  # noqa: E402
from narbench.search_engine.engine import search  # noqa: E402
from narbench.search_engine.index_build import IndexConfig, build_index  # noqa: E402
from narbench.search_engine.target import resolve_target  # noqa: E402
from narbench.zoo.attributes import ATTRIBUTES_ENV, recording_attributes  # noqa: E402
from narbench.zoo.extract import extract_graph  # noqa: E402
from tests.test_canonical_22 import T, TextModel  # noqa: E402


def _tokens():
    torch.manual_seed(0)
    return torch.randint(0, 50, (2, T))


def _dataset(version: str) -> GraphDataset:
    """Two designs with the same blocks, canonicalised by `version`: an encoder and a causal decoder."""
    vocab = list(canonical_vocabulary(version))
    at = {op: i for i, op in enumerate(vocab)}
    graphs = []
    for i, (name, model) in enumerate([("encoder", TextModel()), ("decoder", TextModel(mask="index"))] * 2):
        torch.manual_seed(i)
        c = extract_graph(model, (_tokens(),), attributes=True).canonical(version)
        graphs.append(ArchGraph(ops=np.array([at[o] for o in c.ops], dtype=np.int64), edges=c.edges,
                                name=f"{name}{i}", family=name, coarse="attention", source="test"))
    labels = [g.family for g in graphs]
    return GraphDataset("mini", "0", vocab, graphs, "0" * 64, stratified_split(labels, test_size=0.5),
                        meta={"ops": {"version": version}})


def test_an_index_records_the_canonical_rules_of_its_graphs():
    assert build_index(IndexConfig(encoder="wl", progress=False), dataset=_dataset("2.2")).canonical_version == "2.2"
    assert build_index(IndexConfig(encoder="wl", progress=False), dataset=_dataset("2.1")).canonical_version == "2.1"


def test_a_decoder_query_finds_the_decoder_under_22_and_not_under_21():
    """Under 2.1 the causal mask is elided: the decoder's graph is the encoder's, and the query ties.
    Under 2.2 the query is extracted with its attributes, keeps `causal_attention`, and finds its design."""
    idx22 = build_index(IndexConfig(encoder="wl", progress=False), dataset=_dataset("2.2"))
    q = resolve_target(TextModel(mask="index"), idx22, inputs=_tokens())
    assert q.ops.get("causal_attention", 0) > 0
    hits = search(TextModel(mask="index"), index=idx22, inputs=_tokens(), k=4, progress=False)
    assert [h.family for h in hits][:2] == ["decoder", "decoder"] and hits.duplicate_of

    idx21 = build_index(IndexConfig(encoder="wl", progress=False), dataset=_dataset("2.1"))
    q21 = resolve_target(TextModel(mask="index"), idx21, inputs=_tokens())
    assert "causal_attention" not in q21.ops
    hits21 = search(TextModel(mask="index"), index=idx21, inputs=_tokens(), k=4, progress=False)
    assert {h.family for h in hits21} == {"encoder", "decoder"} and hits21.hits[0].similarity == hits21.hits[3].similarity


def test_recording_attributes_overrides_the_environment_within_it_only(monkeypatch):
    monkeypatch.delenv(ATTRIBUTES_ENV, raising=False)
    model = TextModel(mask="index")
    marked = lambda g: any("#" in o for o in g.ops)  # noqa: E731
    assert not marked(extract_graph(model, (_tokens(),)))
    with recording_attributes(True):
        assert marked(extract_graph(model, (_tokens(),)))
        assert not marked(extract_graph(model, (_tokens(),), attributes=False))  # an explicit argument wins
    monkeypatch.setenv(ATTRIBUTES_ENV, "1")
    with recording_attributes(False):
        assert not marked(extract_graph(model, (_tokens(),)))
    assert marked(extract_graph(model, (_tokens(),)))
    assert os.environ[ATTRIBUTES_ENV] == "1"


def test_a_causal_mask_buffer_is_read_off_the_meta_device():
    """A model built on meta for search holds its `tril` mask buffer there, with no values to read: on an
    index of canonical 2.2 or later (the shipped one reads 2.6) search runs it where the buffer has them (the
    CPU), so the causal mask is kept; a model without such a buffer stays on meta."""
    from narbench.search_engine.index_file import load_index

    shipped = load_index()
    assert shipped.canonical_version in ("2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.11", "2.12", "2.13", "2.14", "2.15", "2.16")
    q = resolve_target("examples/out_of_zoo.py:GPT2Decoder", shipped)
    assert q.info["device"] == "cpu" and q.ops.get("causal_attention", 0) == 12 and "attention" not in q.ops
    bert = resolve_target("examples/out_of_zoo.py:BertEncoder", shipped)
    assert bert.info["device"] == "meta" and "causal_attention" not in bert.ops
    inst = resolve_target(TextModel(mask="buffer"), shipped, inputs=_tokens())  # an instance: its own device
    assert inst.ops.get("causal_attention", 0) > 0
