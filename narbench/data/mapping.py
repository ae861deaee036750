"""A graph of raw op names onto a vocabulary: how a search query meets the index's graphs.

Over a canonical vocabulary (`version`: the rules the vocabulary's graphs follow) a raw graph is
canonicalised first by those rules (`narbench.data.canonical`): raw names the op table does not
know become `other` and are counted in `unknown`. A graph already canonical under later rules (a
2.3 graph file in a 2.2 index) has its later ops read as the earlier rules write them
(`EARLIER_OP`: `conv_grouped` -> `conv`); one under earlier rules is a subset and maps as it is. Over any other vocabulary, ops it lacks are
spliced out (`splice`: their producers feed their consumers) and counted. The coarse label is
taken before anything is spliced (`narbench.data.coarse.coarse_label`), unless the graph has one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from narbench.data.canonical import (EARLIER_OP, UPGRADES, VERSIONS, WITHDRAWS, canonical_vocabulary, canonicalize,
                                     check_version, reaches, upgrade)
from narbench.data.coarse import coarse_label


@dataclass
class Mapped:
    """A graph over a vocabulary: op ids, a 2 x E edge index, and what the raw graph held."""

    ops: np.ndarray  # int64 ids into the vocabulary
    edges: np.ndarray  # int64, (2, E)
    counts: dict[str, int] = field(default_factory=dict)  # op-type counts, by name, before splicing
    unknown: dict[str, int] = field(default_factory=dict)  # ops the vocabulary (or the op table) lacks
    coarse: str = ""


def onto_vocabulary(raw_ops: Sequence[str], edges: np.ndarray, vocab: Sequence[str], version: str | None = None,
                    coarse: str | None = None) -> Mapped:
    """`raw_ops` and `edges` over `vocab` (module docstring); `coarse`: the graph's coarse label if known."""
    index = {op: i for i, op in enumerate(vocab)}
    unknown: dict[str, int] = {}
    if version is not None and list(vocab) == list(canonical_vocabulary(version)) and not set(raw_ops) <= set(index):
        if set(raw_ops) <= set(canonical_vocabulary(VERSIONS[-1])):  # canonical under later rules: read as these
            raw_ops = [op if op in index else EARLIER_OP.get(op, op) for op in raw_ops]
        else:
            c = canonicalize(raw_ops, edges, version)
            raw_ops, edges, unknown = c.ops, c.edges, c.unknown
    elif version is not None and list(vocab) == list(canonical_vocabulary(version)) and len(raw_ops):
        c = upgrade(raw_ops, edges, version)  # canonical under the rules before: 2.4's pass over canonical graphs
        raw_ops, edges = c.ops, c.edges
    counts = Counter(raw_ops)
    unknown = unknown or {op: c for op, c in counts.items() if op not in index}
    coarse = coarse or coarse_label(raw_ops, edges)
    keep = np.array([op in index for op in raw_ops], dtype=bool)
    if not keep.all():
        edges = splice(edges, keep)
    renum = np.cumsum(keep) - 1
    ops = np.array([index[op] for op, k in zip(raw_ops, keep) if k], dtype=np.int64)
    edges = renum[edges] if edges.size else edges.reshape(2, 0)
    return Mapped(ops=ops, edges=edges, counts=dict(counts), unknown=unknown, coarse=coarse)


def splice(edges: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Edges after removing the nodes where `keep` is False, connecting their producers to their
    consumers (as `narbench.zoo.extract` splices dropped autograd nodes). Node ids unchanged."""
    n = len(keep)
    preds: list[list[int]] = [[] for _ in range(n)]
    for s, d in edges.T.tolist():
        preds[d].append(s)
    resolved: dict[int, list[int]] = {}
    out: set[tuple[int, int]] = set()
    for v in range(n):  # ids are a topological order (producers first)
        srcs: list[int] = []
        for p in preds[v]:
            srcs.extend([p] if keep[p] else resolved.get(p, []))
        if keep[v]:
            out.update((s, v) for s in srcs)
        else:
            resolved[v] = list(dict.fromkeys(srcs))
    return np.array(sorted(out), dtype=np.int64).reshape(-1, 2).T.copy()


def newest_rules(version: str | None, upto: str | None = None) -> str | None:
    """The newest canonical rules reachable from `version` by passes over canonical graphs alone (`UPGRADES`): what
    a corpus canonical under `version` can be read under without extracting it again (2.3 -> 2.6); `upto`: none
    newer than it (an index of earlier passes, to measure what later ones change)."""
    if version not in VERSIONS:
        return version
    if upto is not None:
        check_version(upto)  # CanonicalError naming the versions there are
    newest = version
    for later in VERSIONS[VERSIONS.index(version) + 1:]:
        if later not in UPGRADES or (upto is not None and VERSIONS.index(later) > VERSIONS.index(upto)):
            break
        if reaches(version, later):  # 2.8 does not reach 2.9, which withdraws one of its passes
            newest = later
    return newest


def read_newest(graphs, vocab, version: str | None, upto: str | None = None) -> tuple[list, str | None]:
    """`graphs` (`ArchGraph`s over `vocab`, canonical under `version`) read under `newest_rules(version, upto)`, and
    that version: each graph through the passes (`upgrade`), a graph they leave as it is kept as the same object."""
    from dataclasses import replace

    newest = newest_rules(version, upto)
    if newest == version:
        return list(graphs), version
    names = np.asarray(list(vocab), dtype=object)
    pos = {op: i for i, op in enumerate(vocab)}
    out = []
    for g in graphs:
        up = _upgraded(names[g.ops].tolist(), g.edges, newest)
        out.append(g if up is None else replace(g, ops=np.array([pos[o] for o in up.ops], dtype=np.int64),
                                                edges=up.edges))
    return out, newest


def _upgraded(ops: list[str], edges: np.ndarray, version: str):
    """The canonical graph `ops`, `edges` is under `version` (`upgrade`), or None when the passes leave it as it is."""
    up = upgrade(ops, edges, version)
    if up.ops == ops and np.array_equal(up.edges, np.asarray(edges).reshape(2, -1)):
        return None
    return up


def corpus_rules(version: str | None, graphs, vocab) -> str | None:
    """The canonical rules an index of `graphs` (canonical under `version`) reads queries by: the newest later version
    of `narbench.data.canonical.UPGRADES` (a pass over canonical graphs) that leaves every graph as it is, since such
    a corpus is a corpus of those rules too (real 2.3 is a 2.4 corpus: 2.4's pass finds nothing in its 16,905
    graphs); `version` when the next one changes a graph or is no such pass. An index build reads its corpus under
    `newest_rules` first (`read_newest`), so its corpus is a fixed point of them all (real 2.3 read under 2.6)."""
    if version not in VERSIONS:
        return version
    names = np.asarray(list(vocab), dtype=object)
    start = version
    for later in VERSIONS[VERSIONS.index(start) + 1:]:
        if later not in UPGRADES or not reaches(start, later):
            break
        if later in WITHDRAWS.values():  # a withdrawn version is no version to read queries by
            continue
        may = UPGRADES[later][1]
        for g in graphs:
            ops = names[g.ops].tolist()
            if may(ops, g.edges) and _upgraded(ops, g.edges, later) is not None:
                return version
        version = later
    return version
