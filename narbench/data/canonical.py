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
op names lack, recorded by the extraction (`narbench.zoo.attributes.DesignAttributes`) as a suffix
of the raw name: `ConvolutionBackward0#pointwise`, `#patch`, `AddBackward0#causal`
(`split_name`). Version 2.1 ignores the suffix, so a graph extracted with attributes gives the
same 2.1 canonical graph as one without. `version="2.3"` (issue 59) adds a convolution's groups and
dimensions (`conv-groups-dims`: `#depthwise`, `#grouped`, `#1d`, `#3d` -> `conv_depthwise`,
`conv3d`, ...; 2.2 ignores those marks), norms folded by what their subgraph computes rather than by
their spelling (`narbench.data.canonical_algebra`), one form for what is left of quotients and
roots, and the tanh-GELU written with products; its rows in the same table. `version="2.4"` adds one pass
over canonical graphs, last (`UPGRADES`, `upgrade`): a tensor times a negative power of a tensor the graph does not
see is a batch norm in its inference form (`batchnorm-by-value`); its vocabulary is 2.3's. `version="2.5"` adds
another such pass after it (`narbench.data.canonical_spelling`): rotary position embedding's rotation of pairs
written per half is written as rotate-half writes it (`rope-pairs`), and a learned table indexed by ids is an
`embedding` (`table-lookup`); its vocabulary is 2.3's too. `version="2.6"` adds a third pass (same module): parameters
packed and unpacked before a Linear reads them are elided (`packed-weights`), a learned table read by a slice is an
`embedding` (`table-slice`), and one norm per projection of one tensor is one norm (`one-norm-per-projection`). `version="2.7"` adds a
fourth (same module): an attention core whose probabilities are also returned is folded, the returned branch dropped
(`returned-attention-maps`). `version="2.8"` a fifth: a learned table resized before it is added is a parameter
(`interpolated-tables`), and attention heads written one module each are one core (`heads-as-modules`).
`version="2.9"` withdraws `interpolated-tables` (`WITHDRAWS`): its passes are 2.7's and `heads-as-modules`.
`version="2.10"` reads raw names again, first (`narbench.data.canonical_complex`): rotary position embedding written
as a complex product is written as rotate-half writes it (`complex-rotation`); a graph canonical under 2.9 has lost
what the rule reads and reaches 2.10 as it is (its pass over canonical graphs does nothing). `version="2.11"` reads a
mark the extraction records since (`#causal_core`, `narbench.zoo.attributes`): the softmax of torch's own multi-head
attention given a causal mask (`nn.MultiheadAttention`, `nn.Transformer`'s layers), where the mask is applied inside a
call the recorder cannot see into, is causal (`torch-attention-causal`); it too reads only raw names. `version="2.12"`
adds a pass over canonical graphs again (`narbench.data.canonical_moments`): a layer norm written distributed over its
centring, `x * r - mean(x) * r` with r a negative power of x's variance (Keras 3's `LayerNormalization` on torch), is
one `layernorm` (`distributed-layernorm`); it changes none of real 2.3's graphs. `version="2.13"` another
(`narbench.data.canonical_projections`): a product of one tensor with a weight the graph does not see (Keras 3's
`EinsumDense`, an einsum with a kernel) is a `linear` (`weight-product`); it changes 312 of real 2.3's graphs.
`version="2.14"` another (`narbench.data.canonical_heads`): a selection of positions between the final norm and the
output head (`lm_head(x[:, [-1]])`, a generation shortcut) is elided (`head-selection`); 14 of real 2.3's graphs.
`version="2.15"` another (`narbench.data.canonical_scans`): a chain of index writes into one buffer is one `concat`
(`buffer-writes`) and a sum of a product of two tensors is a `matmul` (`product-sums`), a scan written as a loop read
as one written with tensor ops; 686 of real 2.3's graphs. `version="2.16"` reads raw names again, in pass 1: a
learned table that autograd records read whole, an `AliasBackward0` with no input (`pos[:, :t]` with `t` the table's
length), is read as the slice it is on any shorter input, so 2.6's `table-slice` makes it an `embedding`
(`table-alias`); a graph canonical under 2.15 has lost the alias and reaches 2.16 as it is. Versions are
ordered by `VERSIONS`, never as strings (`at_least`: "2.10" comes after "2.9").

Only op names and edges are read, so graphs stored by `real` 1.0 canonicalise exactly as a fresh
extraction does, except where 1.0 stored an in-place op on a view as `CopySlices`: the extraction
now records the op itself (`narbench.zoo.inplace.InPlaceOnViews`), which 1.0 did not keep. Surviving nodes keep their relative order (a folded group takes its last
member's place, merged selections their first's), so the numbering stays topological and
deterministic. Raw names the table does not know become `other` and are counted in `unknown`.

Pass 1 is here (`canonicalize`); passes 2 and 3 are `narbench.data.canonical_rewrite` (2.3's
norms and quotients: `narbench.data.canonical_algebra`), and the table of the rules since 2.2 with
their reasons is read by `narbench.data.canonical_rules`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from narbench.data.canonical_algebra import may_fold_unseen, quotient_form, unseen_batchnorm
from narbench.data.canonical_complex import complex_rotations
from narbench.data.canonical_heads import head_selections, may_select_head
from narbench.data.canonical_moments import distributed_layernorm, may_fold_distributed
from narbench.data.canonical_projections import may_weight_product, weight_products
from narbench.data.canonical_rewrite import FOLDED_OPS, RewriteGraph
from narbench.data.canonical_scans import may_scan, scans
from narbench.data.canonical_spelling import (may_spell_25, may_spell_26, may_spell_27, may_spell_28, may_spell_29,
                                              spell_25, spell_26, spell_27, spell_28, spell_29)
from narbench.data.ops import ELIDED, UNKNOWN_OP, load_table, vocabulary
from narbench.data.rawname import ATTR_SEP, split_name  # noqa: F401 - re-exported: raw names are read here

#: Rule sets, oldest first; the default is the one `real` 2.1 and the shipped index use.
VERSIONS = ("2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.11", "2.12", "2.13", "2.14", "2.15",
            "2.16")
DEFAULT_VERSION = "2.1"
#: Design attributes the extraction records (`narbench.zoo.attributes.DesignAttributes`).
POINTWISE, PATCH, CAUSAL = "pointwise", "patch", "causal"
#: ... and since 2.3 a convolution's groups and dimensions (2-D dense: no mark).
DEPTHWISE, GROUPED, CONV_1D, CONV_3D = "depthwise", "grouped", "1d", "3d"
#: ... and since 2.11 the softmax of torch's multi-head attention given a causal mask (`torch-attention-causal`).
CAUSAL_CORE = "causal_core"
ATTRIBUTES = frozenset({POINTWISE, PATCH, CAUSAL, DEPTHWISE, GROUPED, CONV_1D, CONV_3D, CAUSAL_CORE})

#: Ops that only version 2.2's rules produce (not in the op table, so appended to its vocabulary).
OPS_2_2 = ("causal_attention",)
#: Ops that only version 2.3's rules produce (`conv-groups-dims`: a convolution by its dimensions and
#: groups; the dense 2-D one stays `conv`), appended after 2.2's.
OPS_2_3 = ("conv1d", "conv1d_depthwise", "conv1d_grouped", "conv3d", "conv3d_depthwise", "conv3d_grouped",
           "conv_depthwise", "conv_grouped")


def no_pass(g) -> int:
    """The pass over canonical graphs of a version whose rule reads only raw names or marks (2.10, 2.11, 2.16): none;
    0 rewrites."""
    return 0


def never(ops: Sequence[str], edges: np.ndarray) -> bool:
    """Whether such a version's pass can change a canonical graph: never, so the previous version's graph is its own."""
    return False


#: Versions whose rules add to the previous version's only a pass over canonical graphs (no raw name or mark read):
#: a graph canonical under the previous rules is canonical under these once the pass is applied (`upgrade`), so an
#: index reads its corpus under the newest of them (`narbench.search_engine.index_build.newest_corpus`); with each
#: pass, a cheap check of whether it can fire at all (a graph where it cannot is not rebuilt)
UPGRADES = {"2.4": (unseen_batchnorm, may_fold_unseen), "2.5": (spell_25, may_spell_25),
            "2.6": (spell_26, may_spell_26), "2.7": (spell_27, may_spell_27), "2.8": (spell_28, may_spell_28),
            "2.9": (spell_29, may_spell_29), "2.10": (no_pass, never), "2.11": (no_pass, never),
            "2.12": (distributed_layernorm, may_fold_distributed), "2.13": (weight_products, may_weight_product),
            "2.14": (head_selections, may_select_head), "2.15": (scans, may_scan), "2.16": (no_pass, never)}
#: A version whose pass replaces an earlier version's (later -> the version whose pass it withdraws): 2.9 is 2.7 and
#: `heads-as-modules`, 2.8 without `interpolated-tables` (which made DPT's and YOLOS's encoders read as a ViT's). A
#: graph under the withdrawn version does not reach the later one by passes (`upgrade_passes`, `reaches`).
WITHDRAWS = {"2.9": "2.8"}


def _index(version: str) -> int:
    return VERSIONS.index(check_version(version))


def upgrade_passes(version: str) -> list:
    """The passes over canonical graphs (`UPGRADES`: (pass, cheap check)) that make a 2.3 graph one of `version`, in
    order: those of every version up to it, less the ones a later version up to it withdraws (`WITHDRAWS`)."""
    upto = [v for v in UPGRADES if _index(v) <= _index(version)]
    withdrawn = {WITHDRAWS[v] for v in upto if v in WITHDRAWS}
    return [UPGRADES[v] for v in upto if v not in withdrawn]


def at_least(version: str, earliest: str) -> bool:
    """Whether `version` is `earliest` or later, in the order of `VERSIONS` (as strings "2.10" < "2.9")."""
    return _index(version) >= _index(earliest)


def reaches(frm: str, to: str) -> bool:
    """Whether a graph canonical under `frm` becomes one of `to` by passes alone: every version after `frm` up to
    `to` adds a pass, and none withdraws a pass the graph already had."""
    later = VERSIONS[_index(frm) + 1:_index(to) + 1]
    return all(v in UPGRADES and not (v in WITHDRAWS and _index(WITHDRAWS[v]) <= _index(frm)) for v in later)

#: A later version's own op -> the op that earlier rules write for the same node (they ignore the mark the later
#: op reads): how a canonical graph saved under later rules meets an index of earlier ones (`narbench.data.mapping`).
EARLIER_OP: dict[str, str] = {"causal_attention": "attention", **dict.fromkeys(OPS_2_3, "conv")}


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


def rules_of(vocab: Sequence[str]) -> str | None:
    """The canonical version whose vocabulary `vocab` is (a graph file's), or None (raw names, another list)."""
    return next((v for v in VERSIONS if list(vocab) == list(canonical_vocabulary(v))), None)


def check_version(version: str) -> str:
    if version not in VERSIONS:
        raise CanonicalError(f"unknown canonical version {version!r}; known: {', '.join(VERSIONS)}")
    return version




def conv_op(attrs: frozenset[str]) -> str:
    """2.3 `conv-groups-dims`: a convolution's op by its dimensions and groups (`conv1d_depthwise`)."""
    dims = "1d" if CONV_1D in attrs else "3d" if CONV_3D in attrs else ""
    groups = "_depthwise" if DEPTHWISE in attrs else "_grouped" if GROUPED in attrs else ""
    return f"conv{dims}{groups}"


def canonicalize(ops: Sequence[str], edges: np.ndarray, version: str = DEFAULT_VERSION) -> CanonicalGraph:
    """The canonical graph of a raw graph (op names per node, 2 x E producer -> consumer edges),
    under the rules of `version` (see the module docstring)."""
    v22 = at_least(version, "2.2")
    v23 = at_least(version, "2.3")
    v211 = at_least(version, "2.11")
    v216 = at_least(version, "2.16")
    n = len(ops)
    edges = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    if at_least(version, "2.10"):  # complex-rotation: raw names, before they are mapped
        ops, edges, _ = complex_rotations(ops, edges)
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
        if v216 and base == "AliasBackward0" and not preds_raw[v]:  # table-alias: a table read whole is a slice of it
            base = "SliceBackward0"
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
            elif name == "conv" and v23:  # conv-groups-dims
                name = conv_op(attrs)
            if CAUSAL in attrs or (v211 and CAUSAL_CORE in attrs):  # causal-attention (2.11: torch-attention-causal)
                causal.update(ins if name == ELIDED else (v,))
        if name == ELIDED:
            rep[v] = tuple(ins)
        else:
            rep[v] = (v,)
            op[v] = name
            preds[v] = ins
    if not op:
        raise CanonicalError("no operation is left once layout and scalings are elided")

    g = RewriteGraph(op, preds, causal=causal)
    g.merge_selections()
    if v22:
        g.merge_projections(exclude=patches)
    g.fold_patterns(algebra=v23)
    if v23:
        quotient_form(g)
    for run, _ in upgrade_passes(version):  # last: a 2.4 graph is its 2.3 graph with 2.4's pass applied (`upgrade`), ...
        run(g)
    kept_ops, kept_edges = g.result()
    return CanonicalGraph(ops=kept_ops, edges=kept_edges, unknown=dict(unknown))


def upgrade(ops: Sequence[str], edges: np.ndarray, version: str) -> CanonicalGraph:
    """A canonical graph (canonical op names, topologically numbered) with the passes of `UPGRADES` up to `version`
    applied: a 2.3 graph becomes its 2.4 graph. Each pass is idempotent, so a graph already under `version` comes
    back as it is (the same ops and edges). A graph under a version that `version` withdraws a pass of (2.8 for 2.9)
    keeps what that pass rewrote (`reaches`)."""
    edges = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    passes = [f for f, may in upgrade_passes(version) if may(ops, edges)]
    if not passes:
        return CanonicalGraph(list(ops), edges)
    g = RewriteGraph.of_canonical(ops, edges)
    for run in passes:
        run(g)
    kept_ops, kept_edges = g.result()
    return CanonicalGraph(kept_ops, kept_edges)


def canonical_vocabulary(version: str = DEFAULT_VERSION) -> tuple[str, ...]:
    """The fixed vocabulary of canonical graphs of `version`: the op table's
    (`narbench.data.ops.vocabulary`), then for 2.2 `causal_attention` (and for 2.3 `OPS_2_3`)
    before `other`."""
    vocab = vocabulary()
    missing = FOLDED_OPS - set(vocab)
    if missing:  # the table and the folds must agree; a test keeps them so
        raise CanonicalError(f"ops produced by folds are missing from the op table: {sorted(missing)}")
    if at_least(version, "2.2"):
        vocab = vocab[:-1] + OPS_2_2 + (OPS_2_3 if at_least(version, "2.3") else ()) + vocab[-1:]
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
