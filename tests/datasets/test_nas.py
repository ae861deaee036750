"""Tests for the clustered DARTS-space NAS dataset (narbench.datasets.nas)."""

from __future__ import annotations

import hashlib
import warnings
from collections import Counter

import numpy as np
import pytest

from narbench.datasets import nas
from narbench.datasets.nas import VOCAB, NASDataset, build_network, canonical, edit_distance, generate
from narbench.data.graph import ArchGraph
from narbench.data.store import encode_graphs

SMALL = dict(per_class=30)


@pytest.fixture(scope="module")
def small():
    return generate(seed=0, **SMALL)


def _digest(built) -> str:
    return hashlib.sha256(encode_graphs(*built)).hexdigest()


def _genotype(g: ArchGraph):
    return nas.genotype_from_meta(g.meta["genotype"])


def _centres(header):
    return [nas.genotype_from_meta(c) for c in header["centres"]]


# ------------------------------------------------------------------ determinism


def test_same_seed_same_graphs(small):
    again = generate(seed=0, **SMALL)
    assert [g.content_hash() for g in small[0]] == [g.content_hash() for g in again[0]]
    assert _digest(small) == _digest(again)


def test_different_seed_different_graphs(small):
    other = generate(seed=1, **SMALL)
    assert _digest(small) != _digest(other)
    assert {g.content_hash() for g in small[0]} != {g.content_hash() for g in other[0]}


# ------------------------------------------------------------------ structure


def _check_network(g: ArchGraph) -> None:
    g.validate(len(VOCAB), dag=True)
    n = g.meta["cells"]
    assert g.num_nodes == 13 * n + 3 and g.num_edges == 20 * n + 2
    ops = g.ops
    src, dst = g.edges
    # numbering is a topological order
    assert (src < dst).all()
    indeg = np.bincount(dst, minlength=g.num_nodes)
    outdeg = np.bincount(src, minlength=g.num_nodes)
    parents = [src[dst == v] for v in range(g.num_nodes)]
    assert ops[0] == VOCAB.index("stem_conv") and indeg[0] == 0
    assert (ops == VOCAB.index("stem_conv")).sum() == 1
    counts = Counter(VOCAB[o] for o in ops.tolist())
    assert counts["add"] == 4 * n and counts["concat"] == n
    assert sum(counts[o] for o in nas.OPS) == 8 * n
    for v in range(g.num_nodes):
        name = VOCAB[ops[v]]
        if name in nas.OPS:
            assert indeg[v] == 1 and outdeg[v] == 1
            (child,) = dst[src == v]
            assert VOCAB[ops[child]] == "add"
        elif name == "add":
            assert indeg[v] == 2 and all(VOCAB[ops[p]] in nas.OPS for p in parents[v])
        elif name == "concat":
            assert indeg[v] == 4 and all(VOCAB[ops[p]] == "add" for p in parents[v])
    for k in range(n):  # each cell block: 8 op nodes + 4 ADD + 1 concat, concat last
        block = [VOCAB[o] for o in ops[1 + 13 * k : 14 + 13 * k].tolist()]
        assert block.count("add") == 4 and block.count("concat") == 1
        assert sum(o in nas.OPS for o in block) == 8 and block[-1] == "concat"
    assert VOCAB[ops[-2]] == "global_avg_pool" and VOCAB[ops[-1]] == "linear"
    assert parents[-1].tolist() == [g.num_nodes - 2]
    assert parents[-2].tolist() == [g.num_nodes - 3] and VOCAB[ops[-3]] == "concat"
    assert outdeg[-1] == 0 and (outdeg[:-1] > 0).all()


def test_network_structure(small):
    graphs, vocab, _ = small
    assert vocab == VOCAB
    for g in graphs[::7]:
        _check_network(g)


def test_cell_inputs_follow_appendix():
    # ADD_0 reads c_{k-2} and c_{k-1}; with 5 cells, check where each cell's ADD_0 ops are fed
    geno = canonical([(0, 0), (1, 1), (2, 0), (0, 2), (3, 3), (1, 4), (4, 5), (2, 6)])
    ops, edges = build_network(geno, 5)
    g = ArchGraph(ops, edges, "x", "f", "f", meta={"cells": 5})
    _check_network(g)
    src, dst = edges
    concat = [1 + 13 * k + 12 for k in range(5)]
    for k in range(5):
        op0, op1 = 1 + 13 * k, 2 + 13 * k  # ADD_0's two op nodes: inputs c_{k-2}, c_{k-1}
        exp = (concat[k - 2] if k >= 2 else 0, concat[k - 1] if k >= 1 else 0)
        assert (src[dst == op0][0], src[dst == op1][0]) == exp
    # the op nodes carry the genotype's ops (vocab id = op code + 1)
    assert ops[1:14].tolist() == [1, 2, 8, 3, 1, 8, 5, 4, 8, 7, 6, 8, 9]


def test_every_distinct_and_labels(small):
    graphs, _, header = small
    hashes = [g.content_hash() for g in graphs]
    assert len(set(hashes)) == len(graphs)
    keys = {(nas.canonical(_genotype(g)), g.meta["cells"]) for g in graphs}
    assert len(keys) == len(graphs)
    assert len({g.name for g in graphs}) == len(graphs)
    for g in graphs:
        assert g.family == g.coarse and g.source == "nas"
        c = int(g.family.split("-")[1])
        assert g.name.startswith(f"nas-c{c}-")
        assert 5 <= g.meta["cells"] <= 8
    assert header["params"]["per_class"] == 30


def test_class_balance(small):
    graphs, _, header = small
    counts = Counter(g.family for g in graphs)
    assert len(counts) == 10 and set(counts.values()) == {30}
    assert [s["count"] for s in header["stats"]["per_class"]] == [30] * 10


def test_samples_nearest_own_centre(small):
    graphs, _, header = small
    centres = _centres(header)
    assert len(set(centres)) == 10
    for g in graphs:
        c = int(g.family.split("-")[1])
        d = [edit_distance(_genotype(g), z) for z in centres]
        assert d[c] == g.meta["edit_distance"] <= header["params"]["max_distance"]
        assert all(d[c] < d[o] for o in range(10) if o != c)
    stats = header["stats"]
    assert stats["centre_distance_min"] > 2 * header["params"]["max_distance"]
    assert all(s["margin_min"] >= 1 for s in stats["per_class"])


def test_other_parameters():
    graphs, _, header = generate(seed=3, n_classes=4, per_class=12, cells=(2, 3), max_distance=3)
    assert Counter(g.family for g in graphs) == Counter({f"cluster-{c}": 12 for c in range(4)})
    assert all(2 <= g.meta["cells"] <= 3 and g.meta["edit_distance"] <= 3 for g in graphs)
    for g in graphs[::5]:
        _check_network(g)


# ------------------------------------------------------------------ edit distance


def _random(rng):
    inp, op = nas._random_genotypes(rng, 1)
    return tuple(zip(inp[0].tolist(), op[0].tolist()))


def test_edit_distance_properties():
    rng = np.random.default_rng(5)
    gs = [_random(rng) for _ in range(40)]
    for a in gs:
        assert edit_distance(a, a) == 0
    for a, b in zip(gs, gs[1:]):
        assert edit_distance(a, b) == edit_distance(b, a)
        assert 0 <= edit_distance(a, b) <= 24
    for a, b, c in zip(gs, gs[1:], gs[2:]):
        assert edit_distance(a, c) <= edit_distance(a, b) + edit_distance(b, c)
    # the vectorised form agrees with the scalar one
    ai = np.array([[p[0] for p in g] for g in gs])
    ao = np.array([[p[1] for p in g] for g in gs])
    mat = nas._distances(ai, ao, ai, ao)
    assert mat.tolist() == [[edit_distance(a, b) for b in gs] for a in gs]


def test_edit_distance_input_swap_invariant():
    a = [(0, 0), (1, 1), (2, 3), (0, 2), (1, 4), (3, 5), (4, 6), (0, 0)]
    swapped = [a[1], a[0], a[3], a[2], a[5], a[4], a[7], a[6]]
    assert edit_distance(a, swapped) == 0
    assert canonical(a) == canonical(swapped)
    ha = ArchGraph(*build_network(a, 5), "a", "f", "f").content_hash()
    hb = ArchGraph(*build_network(swapped, 5), "b", "f", "f").content_hash()
    assert ha == hb


def test_edit_distance_costs():
    a = canonical([(0, 0), (1, 1), (2, 3), (0, 2), (1, 4), (3, 5), (4, 6), (0, 0)])
    one_op = list(a)
    one_op[4] = (one_op[4][0], (one_op[4][1] + 1) % 7)
    assert edit_distance(a, one_op) == 1
    new_input = list(a)
    new_input[6] = (2, a[6][1])  # ADD_3: input ADD_2 -> ADD_0, same op
    assert edit_distance(a, new_input) == 2
    new_input[6] = (2, (a[6][1] + 1) % 7)  # and a different op
    assert edit_distance(a, new_input) == 3


def test_invalid_genotypes_rejected():
    with pytest.raises(ValueError):
        canonical([(0, 0), (0, 1)] + [(0, 0), (1, 1)] * 3)  # ADD_0 reads c_{k-2} twice
    with pytest.raises(ValueError):
        canonical([(0, 0), (1, 1), (0, 0), (3, 1)] + [(0, 0), (1, 1)] * 2)  # ADD_1 reads ADD_1
    with pytest.raises(ValueError):
        canonical([(0, 0), (1, 7)] + [(0, 0), (1, 1)] * 3)  # op out of range


# ------------------------------------------------------------------ provider and cache


class _SmallNAS(NASDataset):
    name = "nas-small-test"
    expected_sha256 = None

    def build(self):
        return generate(seed=0, **SMALL)


def test_truncated_cache_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("NARBENCH_CACHE", str(tmp_path))
    provider = _SmallNAS()
    first = provider.load()
    path = provider.cache_path()
    assert path.is_file() and len(first) == 300
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.warns(UserWarning, match="corrupt"):
        again = provider.load()
    assert again.sha256 == first.sha256 == _digest(generate(seed=0, **SMALL))
    assert path.read_bytes() == data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cached = provider.load()  # a sound cache is used silently
    assert cached.sha256 == first.sha256


@pytest.mark.slow
def test_full_dataset_through_provider(tmp_path, monkeypatch):
    from narbench.data.dataset import load_dataset

    monkeypatch.setenv("NARBENCH_CACHE", str(tmp_path))
    ds = load_dataset("nas")
    assert ds.name == "nas" and ds.version == "1.0"
    assert len(ds) == 30_000 and ds.vocab == VOCAB
    assert ds.sha256 == NASDataset.expected_sha256
    counts = Counter(g.family for g in ds.graphs)
    assert len(counts) == 10 and set(counts.values()) == {3000}
    assert ds.coarse_labels == ds.families
    assert len({g.content_hash() for g in ds.graphs}) == 30_000
    assert len(ds.split.test) == 3000
    # a truncated cache of the real dataset is detected and rebuilt to the pinned content
    path = NASDataset().cache_path()
    path.write_bytes(path.read_bytes()[:-1000])
    with pytest.warns(UserWarning, match="corrupt"):
        again = load_dataset("nas")
    assert again.sha256 == NASDataset.expected_sha256
