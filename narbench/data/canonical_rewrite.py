"""Passes 2 and 3 of the canonical rewrite (`narbench.data.canonical`): the graph of kept nodes
after mapping and eliding, its merges of selections (and, in 2.2, of sibling projections), and
the folds of decomposed patterns (activations, norms, the attention core) into the op they
compute (in 2.3 norms by what they compute: `narbench.data.canonical_algebra`). `RewriteGraph`
holds the kept nodes with ordered predecessor sets, so every merge keeps the numbering
topological and deterministic.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from narbench.data.canonical_algebra import fold_norm

#: f in `x * f(x)` -> the activation that product is.
SELF_GATES = {"sigmoid": "silu", "erf": "gelu", "relu6": "hardswish", "hardsigmoid": "hardswish"}
#: 2.3 (`tanh-gelu-products`): the tanh-GELU's cubic written with products (`x * (1 + c * x * x)`)
#: reads as x, so what that GELU leaves is `x * tanh(x)`.
SELF_GATES_23 = {**SELF_GATES, "tanh": "gelu"}
#: Elementwise ops allowed between the two matmuls of the attention core besides the softmax.
SCORE_OPS = frozenset({"add", "mul", "div", "where", "tanh", "maximum", "clamp"})
#: How many such ops at most (Gemma-2 soft-capping is one tanh once scalings are elided).
SCORE_HOPS = 4
#: Ops a fold can produce (each is in the vocabulary).
FOLDED_OPS = frozenset({"silu", "gelu", "hardswish", "mish", "rmsnorm", "layernorm", "batchnorm", "attention", "slice"})


class RewriteGraph:
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

    @classmethod
    def of_canonical(cls, ops: Sequence[str], edges: np.ndarray) -> "RewriteGraph":
        """A canonical graph (op names, 2 x E edges, ids in topological order) as a graph to rewrite further."""
        preds: dict[int, dict[int, None]] = {v: {} for v in range(len(ops))}
        for s, d in np.asarray(edges, dtype=np.int64).reshape(2, -1).T.tolist():
            preds[d][s] = None
        return cls(dict(enumerate(ops)), preds)

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

    def merge_projections(self, exclude: set[int] = frozenset(), sources=None) -> None:
        """2.2 `one-projection`: the Linears whose only data input is one tensor are one Linear
        followed by one `slice` (how a fused projection reads once its selections are merged); `sources`:
        only the Linears of these tensors (a pass over canonical graphs, which cannot tell a patch embedding)."""
        only = None if sources is None else set(sources)
        for p in list(self.order):
            if not self.alive(p) or (only is not None and p not in only):
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

    def fold_patterns(self, algebra: bool = False) -> None:
        """The folds; `algebra` (2.3): norms by what they compute (`canonical_algebra.fold_norm`)
        and the tanh-GELU's product spellings."""
        norm = (lambda v: fold_norm(self, v)) if algebra else self._fold_norm
        for v in self.order:
            if not self.alive(v):
                continue
            name = self.op[v]
            if name == "mul" and (self._fold_gate(v, algebra) or norm(v)):
                continue
            if name == "div" and norm(v):
                continue
            if name == "matmul":
                self.fold_attention(v)

    def _single(self, v: int, want: str, consumer: int) -> int | None:
        """v's only input, if it is a `want` node whose only consumer is `consumer`."""
        ins = self.inputs(v)
        if len(ins) == 1 and self.op[ins[0]] == want and self.only_consumer(ins[0], consumer):
            return ins[0]
        return None

    def _fold_gate(self, v: int, v23: bool = False) -> bool:
        ins = self.inputs(v)
        if len(ins) != 2:
            return False
        gates = SELF_GATES_23 if v23 else SELF_GATES
        for f, x in (ins, ins[::-1]):
            if not self.only_consumer(f, v):
                continue
            fop, fin = self.op[f], self.inputs(f)
            if fop in gates and fin == [x]:
                self.merge([f, v], v, gates[fop])
                return True
            if fop == "tanh" and len(fin) == 1:
                a = fin[0]
                if self.op[a] == "softplus" and self.inputs(a) == [x] and self.only_consumer(a, f):
                    self.merge([a, f, v], v, "mish")
                    return True
                cubic = ("add", "mul") if v23 else ("add",)  # 2.3: x + c x^3 or x (1 + c x^2)
                if self.op[a] in cubic and self.only_consumer(a, f) and set(self.inputs(a)) >= {x}:
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

    def fold_attention(self, v: int) -> bool:
        """Fold the attention core that ends at matmul `v` (`matmul -> [SCORE_OPS]{0,4} -> softmax -> matmul`, inner
        nodes read by the core alone) into one node; whether it did."""
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

    def result(self) -> tuple[list[str], np.ndarray]:
        """The kept nodes' ops, renumbered 0.. in `order`, and the sorted unique 2 x E edge index."""
        kept = [v for v in self.order if v in self.op]  # self.order: topological, inserted nodes too
        new = {v: i for i, v in enumerate(kept)}
        n = len(kept)
        src = [new[p] for v in kept for p in self.preds[v]]
        dst = [new[v] for v in kept for _ in self.preds[v]]
        key = np.unique(np.asarray(src, dtype=np.int64) * n + np.asarray(dst, dtype=np.int64))
        return [self.op[v] for v in kept], np.stack([key // n, key % n])
