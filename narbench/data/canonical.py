"""Canonical graphs: an extracted graph rewritten so that it describes the design, not the code.

`canonicalize(ops, edges)` takes a graph of raw autograd node names (as `narbench.zoo.extract`
records them, or as `real` 1.0 stored them) and returns the canonical graph, in three passes:

1. **Map and elide** (`narbench.data.ops`, the table `narbench/data/ops.csv`): each node becomes its
   canonical op; layout nodes, and arithmetic with a single data input (scaling, bias, masks),
   are spliced through: their producers feed their consumers. The number of data inputs is
   counted after splicing, so `x + x.view(...)` is a node with one data input.
2. **Selections**: a selection of a selection is one selection, and the selections of one tensor
   (`q, k, v = qkv.unbind(0)` vs `qkv[0], qkv[1], qkv[2]` vs `qkv.chunk(3)`) are one `slice` node.
3. **Folds** of decomposed patterns into the op they compute, each a fixed pattern whose inner
   nodes have no other consumer:
   * `x * f(x)` with f = sigmoid -> `silu`, erf -> `gelu`, relu6 or hardsigmoid -> `hardswish`,
     tanh(softplus(x)) -> `mish`; tanh-GELU `x * tanh(x + pow(x))` -> `gelu`;
   * `x * rsqrt(mean(pow(x)))` or `x / sqrt(mean(pow(x)))` -> `rmsnorm`; the same of
     `c = x - mean(x)`, or with `var(x)`, -> `layernorm`;
   * the attention core `matmul -> [elementwise: scale, bias, mask, soft-cap]{0,4} -> softmax ->
     matmul` -> `attention` (hand-written, `nn.MultiheadAttention` and
     `scaled_dot_product_attention` give the same node).

**Versions.** `version="2.1"` (the default) is what `real` 2.1 and the shipped index were built
with. `version="2.2"` adds design-level equivalences (issue 38), each a row of the table
`narbench/data/canonical-rules.csv` with its reason: a convolution over non-overlapping windows
is a `linear` and unfolding into such windows is layout (`window-linear`, `patch-unfold-layout`);
sibling Linears of one input are one projection and a split (`one-projection`); a causally masked
attention core is `causal_attention` (`causal-attention`). Those read *design attributes* that
op names lack, recorded by the extraction (`narbench.zoo.extract.DesignAttributes`) as a suffix
of the raw name: `ConvolutionBackward0#pointwise`, `#patch`, `AddBackward0#causal`
(`split_name`). Version 2.1 ignores the suffix, so a graph extracted with attributes gives the
same 2.1 canonical graph as one without.

Only op names and edges are read, so graphs stored by `real` 1.0 canonicalise exactly as a fresh
extraction does, except where 1.0 stored an in-place op on a view as `CopySlices`: the extraction
now records the op itself (`narbench.zoo.extract.InPlaceOnViews`), which 1.0 did not keep. Surviving nodes keep their relative order (a folded group takes its last
member's place, merged selections their first's), so the numbering stays topological and
deterministic. Raw names the table does not know become `other` and are counted in `unknown`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import csv
from functools import lru_cache
from importlib import resources

import numpy as np

from narbench.data.ops import ELIDED, UNKNOWN_OP, load_table, vocabulary

#: Rule sets, oldest first; the default is the one `real` 2.1 and the shipped index use.
VERSIONS = ("2.1", "2.2")
DEFAULT_VERSION = "2.1"
#: Separates a raw op name from its design attributes (`ConvolutionBackward0#pointwise`).
ATTR_SEP = "#"
#: Design attributes the extraction records (`narbench.zoo.extract.DesignAttributes`).
POINTWISE, PATCH, CAUSAL = "pointwise", "patch", "causal"
ATTRIBUTES = frozenset({POINTWISE, PATCH, CAUSAL})

#: f in `x * f(x)` -> the activation that product is.
SELF_GATES = {"sigmoid": "silu", "erf": "gelu", "relu6": "hardswish", "hardsigmoid": "hardswish"}
#: Elementwise ops allowed between the two matmuls of the attention core besides the softmax.
SCORE_OPS = frozenset({"add", "mul", "div", "where", "tanh", "maximum", "clamp"})
#: How many such ops at most (Gemma-2 soft-capping is one tanh once scalings are elided).
SCORE_HOPS = 4
#: Ops a fold can produce (each is in the vocabulary).
FOLDED_OPS = frozenset({"silu", "gelu", "hardswish", "mish", "rmsnorm", "layernorm", "attention", "slice"})
#: Ops that only version 2.2's rules produce (not in the op table, so appended to its vocabulary).
OPS_2_2 = ("causal_attention",)


class CanonicalError(ValueError):
    """A graph cannot be canonicalised (no node survives, or it is not a DAG)."""


@dataclass
class CanonicalGraph:
    """A canonical graph: canonical op names, a sorted unique 2 x E edge index, unknown raw names."""

    ops: list[str]
    edges: np.ndarray
    unknown: dict[str, int] = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return len(self.ops)


def split_name(raw: str) -> tuple[str, frozenset[str]]:
    """A raw op name and its design attributes: `"ConvolutionBackward0#pointwise"` ->
    `("ConvolutionBackward0", {"pointwise"})`; a name without `#` has none."""
    if ATTR_SEP not in raw:
        return raw, frozenset()
    base, *attrs = raw.split(ATTR_SEP)
    return base, frozenset(a for a in attrs if a)


def check_version(version: str) -> str:
    if version not in VERSIONS:
        raise CanonicalError(f"unknown canonical version {version!r}; known: {', '.join(VERSIONS)}")
    return version


@dataclass(frozen=True)
class Rule:
    """A row of `canonical-rules.csv`: a rewrite (or a deliberate non-rewrite) and its reason."""

    rule: str
    version: str
    what: str
    why: str


@lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    """The documented canonical rules added after 2.0's op table and folds (`canonical-rules.csv`)."""
    path = Path(str(resources.files("narbench"))) / "data" / "canonical-rules.csv"
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != ["rule", "version", "what", "why"]:
            raise CanonicalError(f"{path}: expected columns rule,version,what,why; got {reader.fieldnames}")
        out = []
        for line, row in enumerate(reader, start=2):
            if None in row or not all((row[k] or "").strip() for k in ("rule", "version", "what", "why")):
                raise CanonicalError(f"{path}:{line}: malformed row {row}")
            if row["version"] not in VERSIONS:
                raise CanonicalError(f"{path}:{line}: unknown version {row['version']!r}")
            out.append(Rule(**{k: row[k].strip() for k in ("rule", "version", "what", "why")}))
    return tuple(out)


def rules_sha256() -> str:
    """sha256 of `canonical-rules.csv`: recorded with a dataset built under version 2.2 or later."""
    import hashlib

    return hashlib.sha256((Path(str(resources.files("narbench"))) / "data" / "canonical-rules.csv").read_bytes()).hexdigest()


def canonicalize(ops: Sequence[str], edges: np.ndarray, version: str = DEFAULT_VERSION) -> CanonicalGraph:
    """The canonical graph of a raw graph (op names per node, 2 x E producer -> consumer edges),
    under the rules of `version` (see the module docstring)."""
    v22 = check_version(version) >= "2.2"
    n = len(ops)
    edges = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    order = _topological(n, edges)
    if order != list(range(n)):  # renumber in topological order: the passes rely on ids being one
        pos = np.empty(n, dtype=np.int64)
        pos[np.asarray(order, dtype=np.int64)] = np.arange(n)
        ops, edges, order = [ops[v] for v in order], pos[edges], list(range(n))
    preds_raw: list[list[int]] = [[] for _ in range(n)]
    for s, d in edges.T.tolist():
        preds_raw[d].append(s)

    table = load_table()
    unknown: Counter = Counter()
    rep: list[tuple[int, ...]] = [()] * n  # a kept node: itself; an elided one: its inputs
    op: dict[int, str] = {}
    preds: dict[int, dict[int, None]] = {}  # ordered sets
    causal: set[int] = set()  # kept nodes carrying a causal mask (2.2)
    patches: set[int] = set()  # `linear` nodes that are patch embeddings (2.2: not merged)
    for v in order:
        ins = dict.fromkeys(s for p in preds_raw[v] for s in rep[p])
        base, attrs = split_name(ops[v])
        r = table.get(base)
        if r is None:
            unknown[base] += 1
            name = UNKNOWN_OP
        else:
            name = r.resolve(len(ins))
        if v22 and attrs:
            if name == "conv" and attrs & {POINTWISE, PATCH}:  # window-linear
                name = "linear"
                if PATCH in attrs:
                    patches.add(v)
            elif name == "unfold" and PATCH in attrs:  # patch-unfold-layout
                name = ELIDED
            if CAUSAL in attrs:  # causal-attention: the mask's mark passes to what it masks
                causal.update(ins if name == ELIDED else (v,))
        if name == ELIDED:
            rep[v] = tuple(ins)
        else:
            rep[v] = (v,)
            op[v] = name
            preds[v] = ins
    if not op:
        raise CanonicalError("no operation is left once layout and scalings are elided")

    g = _Graph(op, preds, causal=causal)
    g.merge_selections()
    if v22:
        g.merge_projections(exclude=patches)
    g.fold_patterns()
    return g.result(dict(unknown))


def canonical_vocabulary(version: str = DEFAULT_VERSION) -> tuple[str, ...]:
    """The fixed vocabulary of canonical graphs of `version`: the op table's
    (`narbench.data.ops.vocabulary`), then for 2.2 `causal_attention` before `other`."""
    vocab = vocabulary()
    missing = FOLDED_OPS - set(vocab)
    if missing:  # the table and the folds must agree; a test keeps them so
        raise CanonicalError(f"ops produced by folds are missing from the op table: {sorted(missing)}")
    if check_version(version) >= "2.2":
        vocab = vocab[:-1] + OPS_2_2 + vocab[-1:]
    return vocab


def _topological(n: int, edges: np.ndarray) -> list[int]:
    src, dst = edges
    if not src.size or bool((src < dst).all()):
        return list(range(n))
    from narbench.data.graph import ArchGraph

    order = ArchGraph(ops=np.zeros(n), edges=edges, name="", family="", coarse="").topological_order()
    if order.shape[0] != n:
        raise CanonicalError("the graph has a cycle")
    return order.tolist()


class _Graph:
    """Kept nodes with ordered predecessor sets and successor sets, and the merges between them."""

    def __init__(self, op: dict[int, str], preds: dict[int, dict[int, None]],
                 causal: set[int] | None = None) -> None:
        self.op = op
        self.preds = preds
        self.causal = set(causal or ())  # nodes carrying a causal mask (their merges inherit it)
        self.succs: dict[int, set[int]] = {v: set() for v in op}
        for v, ps in preds.items():
            for p in ps:
                self.succs[p].add(v)
        self.order = sorted(op)  # ids of kept nodes in a topological order (inserted nodes too)
        self._next_id = max(op, default=-1) + 1

    # ------------------------------------------------------------------ primitives

    def alive(self, v: int) -> bool:
        return v in self.op

    def only_consumer(self, v: int, c: int) -> bool:
        return self.succs[v] == {c}

    def inputs(self, v: int) -> list[int]:
        return list(self.preds[v])

    def merge(self, group: Sequence[int], keep: int, name: str) -> None:
        """Replace `group` by one node at `keep` named `name`, wired to the group's outside."""
        members = set(group)
        ext_preds = dict.fromkeys(p for m in sorted(members) for p in self.preds[m] if p not in members)
        ext_succs = {c for m in members for c in self.succs[m] if c not in members}
        for m in members:
            for p in self.preds[m]:
                if p not in members:
                    self.succs[p].discard(m)
            for c in self.succs[m]:
                if c not in members:
                    self.preds[c].pop(m, None)
            if m != keep:
                del self.op[m], self.preds[m], self.succs[m]
        if members & self.causal:
            self.causal -= members
            self.causal.add(keep)
        self.op[keep] = name
        self.preds[keep] = ext_preds
        self.succs[keep] = ext_succs
        for p in ext_preds:
            self.succs[p].add(keep)
        for c in ext_succs:
            self.preds[c][keep] = None

    def insert_after(self, v: int, name: str) -> int:
        """A new node `name` between `v` and all of v's consumers; it comes right after v."""
        u = self._next_id
        self._next_id += 1
        consumers = self.succs[v]
        for c in consumers:
            self.preds[c] = {(u if p == v else p): None for p in self.preds[c]}
        self.op[u], self.preds[u], self.succs[u] = name, {v: None}, set(consumers)
        self.succs[v] = {u}
        self.order.insert(self.order.index(v) + 1, u)
        return u

    # ------------------------------------------------------------------ pass 2: selections

    def merge_selections(self) -> None:
        for v in self.order:  # a selection of a selection is one selection
            if self.alive(v) and self.op[v] == "slice" and len(self.preds[v]) == 1:
                (p,) = self.preds[v]
                if self.op[p] == "slice":
                    self.merge([p, v], p, "slice")
        for p in self.order:  # the selections of one tensor are one node
            if not self.alive(p):
                continue
            parts = sorted(c for c in self.succs[p] if self.op[c] == "slice" and len(self.preds[c]) == 1)
            if len(parts) > 1:
                self.merge(parts, parts[0], "slice")

    def merge_projections(self, exclude: set[int] = frozenset()) -> None:
        """2.2 `one-projection`: the Linears whose only data input is one tensor are one Linear
        followed by one `slice` (how a fused projection reads once its selections are merged)."""
        for p in list(self.order):
            if not self.alive(p):
                continue
            group = sorted(c for c in self.succs[p]
                           if self.op[c] == "linear" and c not in exclude and list(self.preds[c]) == [p])
            if len(group) > 1:
                self.merge(group, group[0], "linear")
                self.insert_after(group[0], "slice")
                self.merge_selections_of(group[0])

    def merge_selections_of(self, v: int) -> None:
        """After a projection merge: a selection of the new `slice` is the same selection."""
        (s,) = self.succs[v]
        for c in sorted(self.succs[s]):
            if self.alive(c) and self.op[c] == "slice" and list(self.preds[c]) == [s]:
                self.merge([s, c], s, "slice")

    # ------------------------------------------------------------------ pass 3: folds

    def fold_patterns(self) -> None:
        for v in self.order:
            if not self.alive(v):
                continue
            name = self.op[v]
            if name == "mul" and (self._fold_gate(v) or self._fold_norm(v)):
                continue
            if name == "div" and self._fold_norm(v):
                continue
            if name == "matmul":
                self._fold_attention(v)

    def _single(self, v: int, want: str, consumer: int) -> int | None:
        """v's only input, if it is a `want` node whose only consumer is `consumer`."""
        ins = self.inputs(v)
        if len(ins) == 1 and self.op[ins[0]] == want and self.only_consumer(ins[0], consumer):
            return ins[0]
        return None

    def _fold_gate(self, v: int) -> bool:
        ins = self.inputs(v)
        if len(ins) != 2:
            return False
        for f, x in (ins, ins[::-1]):
            if not self.only_consumer(f, v):
                continue
            fop, fin = self.op[f], self.inputs(f)
            if fop in SELF_GATES and fin == [x]:
                self.merge([f, v], v, SELF_GATES[fop])
                return True
            if fop == "tanh" and len(fin) == 1:
                a = fin[0]
                if self.op[a] == "softplus" and self.inputs(a) == [x] and self.only_consumer(a, f):
                    self.merge([a, f, v], v, "mish")
                    return True
                if self.op[a] == "add" and self.only_consumer(a, f) and set(self.inputs(a)) >= {x}:
                    rest = [u for u in self.inputs(a) if u != x]
                    if (len(rest) == 1 and self.op[rest[0]] == "pow" and self.inputs(rest[0]) == [x]
                            and self.only_consumer(rest[0], a)):
                        self.merge([rest[0], a, f, v], v, "gelu")
                        return True
        return False

    def _fold_norm(self, v: int) -> bool:
        """`a * rsqrt(s)` / `a / sqrt(s)` with s the second moment of a (or var of x)."""
        ins = self.inputs(v)
        if len(ins) != 2:
            return False
        root = "rsqrt" if self.op[v] == "mul" else "sqrt"
        for r, a in (ins, ins[::-1]):
            if self.op[r] != root or not self.only_consumer(r, v) or len(self.inputs(r)) != 1:
                continue
            s = self.inputs(r)[0]
            if not self.only_consumer(s, r):
                continue
            stats: list[int]
            if self.op[s] == "mean" and len(self.inputs(s)) == 1:
                pw = self.inputs(s)[0]
                if self.op[pw] != "pow" or self.inputs(pw) != [a] or not self.only_consumer(pw, s):
                    continue
                stats = [pw, s, r]
            elif self.op[s] == "var" and len(self.inputs(s)) == 1:
                stats = [s, r]
            else:
                continue
            centred = self._centred(a)
            if centred is not None:
                x, m = centred
                if self.op[s] == "var" and self.inputs(s) != [x]:
                    continue
                if self.succs[a] != {v, stats[0]} and self.succs[a] != {v}:
                    continue
                self.merge([m, a, *stats, v], v, "layernorm")
                return True
            if self.op[s] == "mean":
                self.merge([*stats, v], v, "rmsnorm")
                return True
        return False

    def _centred(self, a: int) -> tuple[int, int] | None:
        """(x, m) when a = x - m with m = mean(x) used only by a."""
        if self.op[a] != "add" or len(self.inputs(a)) != 2:
            return None
        for m, x in (self.inputs(a), self.inputs(a)[::-1]):
            if self.op[m] == "mean" and self.inputs(m) == [x] and self.only_consumer(m, a):
                return x, m
        return None

    def _fold_attention(self, v: int) -> bool:
        for s in self.inputs(v):
            if self.op[s] != "softmax" or not self.only_consumer(s, v) or len(self.inputs(s)) != 1:
                continue
            chain: list[int] = []
            cur, nxt = self.inputs(s)[0], s
            for _ in range(SCORE_HOPS + 1):
                if not self.only_consumer(cur, nxt):
                    break
                if self.op[cur] == "matmul":
                    group = [cur, *chain, s, v]
                    causal = any(m in self.causal for m in group)
                    self.merge(group, v, "causal_attention" if causal else "attention")
                    return True
                if self.op[cur] not in SCORE_OPS:
                    break
                chain.append(cur)
                cands = [u for u in self.inputs(cur) if self.op[u] == "matmul" and self.only_consumer(u, cur)]
                cands = cands or [u for u in self.inputs(cur) if self.op[u] in SCORE_OPS and self.only_consumer(u, cur)]
                if not cands:
                    break
                cur, nxt = cands[0], cur
        return False

    # ------------------------------------------------------------------ result

    def result(self, unknown: dict[str, int]) -> CanonicalGraph:
        kept = [v for v in self.order if v in self.op]  # self.order: topological, inserted nodes too
        new = {v: i for i, v in enumerate(kept)}
        n = len(kept)
        src = [new[p] for v in kept for p in self.preds[v]]
        dst = [new[v] for v in kept for _ in self.preds[v]]
        key = np.unique(np.asarray(src, dtype=np.int64) * n + np.asarray(dst, dtype=np.int64))
        return CanonicalGraph(ops=[self.op[v] for v in kept], edges=np.stack([key // n, key % n]),
                              unknown=unknown)
