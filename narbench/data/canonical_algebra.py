"""Canonical 2.3's algebra of elementwise subgraphs: a normalisation is recognised by what its
subgraph computes, not by how it is spelled (`canonical-rules.csv`, rules `norm-by-value`,
`weight-standardization`, `quotient-form`).

A raw graph carries op names and edges but no constants: a `pow` does not say its exponent,
`x * x` has one data input and reads as a scaling (elided, like `x * 0.5`), `std` and `var` are
one op, and a quotient does not say which input is the denominator. So a subgraph cannot be
evaluated on numbers; it is evaluated in a small normal form that needs no constants: the value
of a subgraph of products, quotients, roots and powers is a *monomial* over bases and moments,

    x^1 * s(x)^e      s(x): second moment of x (mean or sum of x^2; ||x|| = s^(1/2))
    c^1 * v(x)^e      c = x - mean(x); v(x): variance (var, std, mean(c^2), E[x^2] - E[x]^2)

with exponents exact where an op fixes them (sqrt 1/2, rsqrt -1/2, reciprocal -1, a quotient's
other input -1) and known only by sign, or not at all, where a constant would say (`var` may be
a std: `+`; `pow`: `?`). A monomial of the first kind is `rmsnorm`, of the second `layernorm`
(every spelling of the two, mean and sum alike: the factor 1/n is a constant the graph elides);
the second of a tensor the graph does not see (a parameter: `w - mean(w)` has one data input, so
the centring reads as the `mean` itself) is weight standardisation, `batchnorm` with no input,
which is how `F.batch_norm` on a weight (timm's StdConv2d) already reads.
"""

from __future__ import annotations

from typing import Any, Sequence, Union

import numpy as np

#: Exponents: exact (a float: sums and products of +-1 and +-1/2 are exact in binary), or known only
#: by sign ("+", "-"), or unknown ("?").
Exp = Union[float, str]
POS, NEG, ANY = "+", "-", "?"
#: Roots and powers: op -> the exponent it applies (ANY: a pow's exponent is a constant, not recorded).
POWERS: dict[str, Exp] = {"sqrt": 0.5, "rsqrt": -0.5, "reciprocal": -1.0, "pow": ANY}
#: Reductions whose value is a moment (a sum is a mean times a constant).
MEANS = frozenset({"mean", "sum"})
#: What the statistic's side of a normalisation ends with (`fold_norm` tries nothing else).
STAT_SIDE = frozenset(POWERS) | MEANS | {"var", "vector_norm", "clamp"}
#: How many nodes one candidate's subgraph may hold (a norm has at most about 10).
BUDGET = 24
HALF, ONE = -0.5, 1.0
BOTTOM = ("x", None)  # a tensor the graph does not see: a parameter (or the model's input)


def _sign(e: Exp) -> int | None:
    if isinstance(e, float):
        return (e > 0) - (e < 0)
    return {POS: 1, NEG: -1}.get(e)


def add_exp(a: Exp, b: Exp) -> Exp:
    """The exponent of x^a * x^b."""
    if isinstance(a, float) and isinstance(b, float):
        return a + b
    sa, sb = _sign(a), _sign(b)
    if sa == 0 or sb == 0:
        return b if sa == 0 else a
    if sa is not None and sa == sb:
        return POS if sa > 0 else NEG
    return ANY


def scale_exp(e: Exp, k: Exp) -> Exp:
    """The exponent of (x^e)^k."""
    if k == ANY or e == ANY:
        return ANY
    if isinstance(e, float) and isinstance(k, float):
        return e * k
    s = _sign(e) * _sign(k)  # type: ignore[operator]  # one is a sign, the other a nonzero float or a sign
    return POS if s > 0 else NEG


Mono = dict  # term -> Exp


def product(a: Mono, b: Mono) -> Mono:
    out = dict(a)
    for t, e in b.items():
        out[t] = add_exp(out[t], e) if t in out else e
    return {t: e for t, e in out.items() if e != 0}


def power(a: Mono, k: Exp) -> Mono:
    return {t: scale_exp(e, k) for t, e in a.items()}


def _squared(e: Exp) -> bool:
    """An exponent a second moment's operand may carry: 2, or a pow's unknown one."""
    return e in (2.0, ANY, POS)


class _Cone:
    """The value of one candidate's subgraph (`value`) and the nodes it consists of (`members`).
    Terms: ("x", node) a base (BOTTOM: one the graph does not see); ("c", base) its centring;
    ("s", base, bare) its second moment; ("v", base, bare) its variance; `bare`: read off a mean
    of the base itself, whose square (`x * x`) the graph elided."""

    def __init__(self, g: Any) -> None:
        self.g = g
        self.members: list[int] = []  # a journal: what a failed sub-evaluation added is cut off
        self.budget = BUDGET

    def value(self, u: int, direct: bool = False) -> Mono:
        """The monomial `u` computes; `direct`: u is a factor of the candidate itself."""
        g = self.g
        op, ins = g.op[u], g.inputs(u)
        self.budget -= 1
        if self.budget < 0:
            return {("x", u): ONE}
        if not ins:
            return self.hidden(u, op, direct)
        if len(g.succs[u]) != 1:
            return self.shared(u, op, ins)
        mark = len(self.members)
        out = self.compute(u, op, ins)
        if out is None:  # a base: forget what its inputs added
            del self.members[mark:]
            return {("x", u): ONE}
        self.members.append(u)
        return out

    def hidden(self, u: int, op: str, direct: bool) -> Mono:
        """A reduction of a tensor the graph does not see: `mean(w)` stands for `w - mean(w)`
        (the difference has one data input, so it reads as the mean), `var(w)` for its variance,
        except var_mean's one node read both as a factor and elsewhere: there it is the mean."""
        if op == "mean" or (op == "var" and direct and len(self.g.succs[u]) > 1):
            self.members.append(u)
            return {("c", BOTTOM): ONE}
        if op == "var":
            self.members.append(u)
            return {("v", BOTTOM, False): POS}
        return {("x", u): ONE}

    def shared(self, u: int, op: str, ins: list[int]) -> Mono:
        """A node with several consumers: a base, unless it is a centring, or the mean (or
        var_mean's node) a centring uses, read where the subgraph reads it again."""
        centred = self.centring(u)
        if centred is not None:
            return centred
        if op in ("mean", "var") and len(ins) == 1 and any(self.centres(c, u) for c in self.g.succs[u]):
            self.members.append(u)
            base = ("x", ins[0])
            return {("v", base, False): POS} if op == "var" else {("s", base, True): ONE}
        return {("x", u): ONE}

    def centres(self, c: int, m: int) -> bool:
        """c = x - m with m a mean (or var_mean) of x."""
        g = self.g
        ins = g.inputs(c)
        return g.op[c] == "add" and len(ins) == 2 and m in ins and g.inputs(m) == [x for x in ins if x != m]

    def centring(self, u: int) -> Mono | None:
        for m in self.g.inputs(u):
            if self.g.op[m] in ("mean", "var") and self.centres(u, m):
                self.members += (u, m)
                return {("c", ("x", self.g.inputs(m)[0])): ONE}
        return None

    def compute(self, u: int, op: str, ins: list[int]) -> Mono | None:
        if op == "mul" and len(ins) == 2:
            return product(self.value(ins[0]), self.value(ins[1]))
        if op == "div" and len(ins) == 2:  # which input divides is not recorded: a moment does
            a, b = self.value(ins[0]), self.value(ins[1])
            moment = [_moments(a), _moments(b)]
            if moment.count(True) != 1:
                return None
            return product(a, power(b, -1.0)) if moment[1] else product(b, power(a, -1.0))
        if op in POWERS and len(ins) == 1:
            return power(self.value(ins[0]), POWERS[op])
        if op == "add" and len(ins) == 2:
            return self.centring(u) or self.variance(self.value(ins[0]), self.value(ins[1]))
        if len(ins) != 1 or op not in MEANS | {"var", "vector_norm", "clamp"}:
            return None
        inner = self.value(ins[0])
        if op == "clamp":  # clamp_min(eps) of a moment: how F.normalize writes + eps
            return inner if _moments(inner) else None
        return moment_of(op, inner)

    @staticmethod
    def variance(a: Mono, b: Mono) -> Mono | None:
        """E[x^2] - E[x]^2 (the graph cannot tell - from +; E[x^2] + E[x]^2 normalises nothing)."""
        for sq, m in ((a, b), (b, a)):
            if len(sq) == len(m) == 1:
                (ts, es), (tm, em) = next(iter(sq.items())), next(iter(m.items()))
                if ts[0] == tm[0] == "s" and ts[1] == tm[1] and not ts[2] and tm[2] and es == 1 and _squared(em):
                    return {("v", ts[1], False): ONE}
        return None


def _moments(m: Mono) -> bool:
    return bool(m) and all(t[0] in ("s", "v") for t in m)


def moment_of(op: str, inner: Mono) -> Mono | None:
    """The moment `op` (mean, sum, var, vector_norm) computes of `inner`, a power of one base."""
    if len(inner) != 1:
        return None
    (t, e), = inner.items()
    if t[0] not in ("x", "c"):
        return None
    base = t[1] if t[0] == "c" else t
    kind = "v" if t[0] == "c" else "s"
    if op == "var":
        return {("v", base, False): POS} if e == 1 else None
    if op == "vector_norm":
        return {(kind, base, False): 0.5} if e == 1 else None
    if e == 1 or _squared(e):  # mean of x: of x * x, whose square was elided, or of x^2
        return {(kind, base, e == 1): ONE}
    return None


def _accepts(e: Exp, bare: bool) -> bool:
    """A normalisation's exponent: negative; a root (-1/2) or unknown where the square was elided
    (then a plain quotient by the mean, -1, is a sum normalisation, not this)."""
    if bare:
        return e == HALF or e == ANY
    return e == ANY or e == NEG or (isinstance(e, float) and e < 0)


def norm_of(mono: Mono) -> str | None:
    """The norm a monomial is (`rmsnorm`, `layernorm`, `batchnorm` for a standardised parameter), or None."""
    if len(mono) != 2:
        return None
    (t1, e1), (t2, e2) = mono.items()
    for (num, en), (stat, es) in (((t1, e1), (t2, e2)), ((t2, e2), (t1, e1))):
        if en != 1 or stat[0] not in ("s", "v") or not _accepts(es, stat[2]):
            continue
        if num[0] == "x" and stat[0] == "s" and stat[1] == num and num != BOTTOM:
            return "rmsnorm"
        if num[0] == "c" and stat[0] == "v" and stat[1] == num[1]:
            return "batchnorm" if num[1] == BOTTOM else "layernorm"
    return None


def fold_norm(g: Any, v: int) -> bool:
    """Fold the normalisation whose last node is the product or quotient `v` into one node."""
    ins = g.inputs(v)
    if g.op[v] not in ("mul", "div") or len(ins) != 2 or not any(g.op[u] in STAT_SIDE for u in ins):
        return False
    orders = [ins] if g.op[v] == "mul" else [ins, ins[::-1]]  # a quotient's order is not recorded
    for a, b in orders:
        cone = _Cone(g)
        na = cone.value(a, direct=True)
        nb = cone.value(b, direct=True)
        mono = product(na, nb if g.op[v] == "mul" else power(nb, -1.0))
        name = norm_of(mono)
        members = {*cone.members, v}
        if name and all(g.succs[u] <= members for u in members if u != v):
            g.merge(sorted(members), v, name)
            return True
    return False


#: A root or power by its exponent (`quotient_form`); any other exponent is a `pow`.
ROOT_OP = {0.5: "sqrt", HALF: "rsqrt", -1.0: "reciprocal"}


def quotient_form(g: Any) -> None:
    """One spelling of what is left of products, quotients and roots (2.3 `quotient-form`), in one
    topological sweep over nodes whose inner parts have no other consumer:

    * a root or power of a root or power is one node by its exponent: `reciprocal(sqrt(v))` is
      `rsqrt(v)`, `sqrt(rsqrt(v))` a `pow`; a root of `var` is `var` (std and var are one op), so
      `rsqrt(var)` is `reciprocal(var)`;
    * a product with a reciprocal is a quotient: `a * reciprocal(z)` is `a / z`, and `a * rsqrt(z)`
      is `a / sqrt(z)`. A quotient is not turned back (its graph does not say which input divides).
    """
    for u in list(g.order):
        if not g.alive(u):
            continue
        op, ins = g.op[u], g.inputs(u)
        if op in POWERS and len(ins) == 1 and g.only_consumer(ins[0], u):
            (p,) = ins
            if g.op[p] in POWERS and len(g.inputs(p)) == 1:
                e = scale_exp(POWERS[g.op[p]], POWERS[op])
                if e != ONE:
                    g.merge([p, u], u, ROOT_OP.get(e, "pow"))  # type: ignore[call-overload]
            elif g.op[p] == "var" and op in ("sqrt", "rsqrt"):
                if op == "sqrt":
                    g.merge([p, u], u, "var")
                else:
                    g.op[u] = "reciprocal"
        elif op == "mul" and len(ins) == 2:
            for r in ins:
                if g.op[r] in ("reciprocal", "rsqrt") and g.only_consumer(r, u) and len(g.inputs(r)) == 1:
                    if g.op[r] == "reciprocal":
                        g.merge([r, u], u, "div")
                    else:
                        g.op[r], g.op[u] = "sqrt", "div"
                    break


def unseen_batchnorm(g: Any) -> int:
    """2.4 `batchnorm-by-value`: a tensor times a negative power of a tensor the graph does not see (a chain of
    roots and reciprocals with no input: a statistic held as a parameter), or divided by a positive power of
    one, is a batch norm in its inference form, `(x - mean) * rsqrt(var + eps) * g + b` written out (Keras on
    torch writes every `BatchNormalization` so): the product or quotient and the chain become one `batchnorm`
    of the tensor. The factor may also feed the shift added to the product, `x * s + (b - mean * s)` with
    `s = g * rsqrt(var + eps)` (a frozen batch norm's spelling): that sum joins it. A chain with a `pow`
    (exponent unknown) or another consumer is left. The number folded."""
    folded = 0
    for u in list(g.order):
        if not g.alive(u) or g.op[u] not in ("mul", "div") or len(g.inputs(u)) != 2:
            continue
        for r in g.inputs(u):
            shift = _shift(g, u, r)
            chain, e = _unseen_power(g, r, {u} | ({shift} if shift is not None else set()))
            if chain and ((g.op[u] == "mul" and e < 0) or (g.op[u] == "div" and e > 0)):
                g.merge([*chain, u, *(() if shift is None else (shift,))], u if shift is None else shift, "batchnorm")
                folded += 1
                break
    return folded


def may_fold_unseen(ops: Sequence[str], edges: np.ndarray) -> bool:
    """Whether `unseen_batchnorm` can fire on a canonical graph: a root or reciprocal with no input (a cheap check,
    so that a graph without one is not rebuilt)."""
    if "rsqrt" not in ops and "sqrt" not in ops and "reciprocal" not in ops:  # most graphs: a scan in C
        return False
    roots = [i for i, op in enumerate(ops) if op in ("rsqrt", "sqrt", "reciprocal")]
    fed = np.zeros(len(ops), dtype=bool)
    fed[np.asarray(edges, dtype=np.int64).reshape(2, -1)[1]] = True
    return not bool(fed[roots].all())


def _shift(g: Any, u: int, r: int) -> int | None:
    """The `add` that is the product `u`'s only consumer and whose other input is the factor `r` itself (the shift
    computed from it), or None."""
    (a, *more) = sorted(g.succs[u]) or [None]
    if a is None or more or g.op[a] != "add" or set(g.inputs(a)) != {u, r}:
        return None
    return a


def _unseen_power(g: Any, r: int, readers: set[int]) -> tuple[list[int], float]:
    """([the chain's nodes], its exponent) when `r` ends a chain of roots and reciprocals that begins with no input,
    `r` read by `readers` only and every other node of it by the next; ([], 0.0) otherwise."""
    chain, e, v = [], 1.0, r
    while True:
        k = POWERS.get(g.op[v])
        if not isinstance(k, float) or (g.succs[v] != readers if v == r else not g.only_consumer(v, chain[-1])):
            return [], 0.0
        chain.append(v)
        e *= k
        ins = g.inputs(v)
        if not ins:
            return chain, e
        if len(ins) != 1:
            return [], 0.0
        v = ins[0]
