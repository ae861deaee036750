"""The passes over canonical graphs of 2.5 to 2.9 (`narbench.data.canonical.UPGRADES`): designs each written one
way, the rows of `canonical-rules.csv` of those versions. Every rule was chosen on the validation sets of outside
models (docs/wildval.md: 2.5's and 2.6's on `wildval`, 2.7's from `wildval2`, 2.8's from `wildval3`), where each was
the spelling that kept models from their family; 2.9 withdrew one of 2.8's on the zoo's own validation side.

2.5: `rope-pairs` (`rope_pairs`). RoPE rotates each pair of a head's channels by an angle of the position.
transformers writes it rotate-half, `x * cos + rotate_half(x) * sin`, whose canonical graph is `add(x, concat(x))`
(the halves' concatenation; the products with constants are elided). Meta's and torchtune's code pairs interleaved
channels and writes the rotation per half, `stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin])`: two sums reading x
alone (its selections are one node), concatenated, `concat(add(x), add(x))`. Which channels pair up is not in the
graph (GPT-J's interleaved `rotate_every_two` already reads as rotate-half), so the two are one design written two
ways; the pass writes the second as the first. In `wildval`, torchtune's LLaMA 3.2 and Gemma 2 retrieved GLM models,
whose partial rotary has a similar shape; their own families stood at ranks 153 and 62.

2.5: `table-lookup` (`table_lookup`). A `gather` with no data input, a learned table indexed by integer ids the graph
does not see (`W_E[tokens]`, a relative-position table indexed by a buffer), is an `embedding`: what `nn.Embedding`
computes (T5 holds its relative-position table as one). In `wildval`, transformer-lens indexes its token table, and
its GPT-2, GPT-Neo and Pythia retrieved Whisper and Longformer.

2.6 (`spell_26`), three rules:
- `packed-weights` (`packed_weights`): parameters concatenated and split again before a Linear reads them (fairseq's
  and WavLM's attention pass `cat([q.weight, k.weight, v.weight])` to `F.multi_head_attention_forward`, which splits
  it; BEiT's and Swin-V2's `cat([q_bias, zeros, v_bias])`) are a layout subgraph with no data input: it is elided, and
  the Linears that then read one tensor alone are one projection (2.2's `one-projection`). In `wildval`, s3prl's
  wav2vec 2.0 and funasr's data2vec retrieved WavLM, whose transformers code packs its weights the same way, and not
  their own family (hubert, data2vec-audio: nn.Linear projections).
- `table-slice` (`table_slice`): a `slice` with no input read only by sums, a learned table read for the first n
  positions and added (`x + W_pos[:n]`), is an `embedding` (of `arange(n)`, as transformers' GPT-2 reads its
  positions). transformer-lens. A slice with no input read otherwise (YOLOX's `Focus` slicing the image and
  concatenating the slices; a position table interpolated) stays a slice.
- `one-norm-per-projection` (`one_norm_per_projection`): norms of one op on one tensor, each read by one Linear alone,
  whose Linears are all read by the same nodes, are one norm (transformer-lens applies `ln1` once per q, k and v;
  a distilled head's two BatchNorm-Linear heads averaged); the Linears are then one projection. Two norms of one
  tensor read by different blocks (GPT-NeoX's parallel attention and MLP) stay two.
With all three, transformer-lens's GPT-2 is an exact twin of the corpus' GPT-2-family decoders.

2.7 (`spell_27`): `returned-attention-maps` (`returned_attention_maps`). A model that returns its attention
probabilities (`return out, attn`) reads its softmax twice, so the extraction's fold of the attention core, which
needs the softmax read by the core alone, leaves that core as `matmul -> softmax -> matmul`. What a model hands back
for inspection is not its design: the branch from the softmax that reads nothing else and leads only to outputs (at
most `MAP_NODES` nodes) is dropped and the core folded. The extraction saw the core's mask and this pass does not, so
the core takes the kind the graph's folded cores share when they all are `causal_attention` (a decoder's), else
`attention`. Chosen on `wildval2` (eole returns its last layer's map: its Phi-2, Mistral, Qwen3.5 and M2M-100 held one
unfolded core) and measured on both validation sets pooled; no graph of real 2.3 returns a map.

2.8 (`spell_28`), two rules, written from `wildval3`'s misses and measured on the three validation sets pooled:
- `interpolated-tables` (`interpolated_tables`): a learned table resized to the input before it is added (DINOv2's
  and DPT's position tables: slices of the table, `upsample`, `concat` with the class token's row, all fed by no
  data) is a parameter, as a table added as it is (an `nn.Parameter`, elided like a bias) is: the subgraph is dropped
  and the sum it fed, now of one tensor, elided. Meta's DINOv2 interpolates its table at any input size not its own;
  transformers' DINOv2 only when the size differs, so the corpus' DINOv2 graphs hold no table and DPT's, PVT's and
  YOLOS's did. Only subgraphs of `TABLE_OPS` whose sources are slices with no input and that hold an `upsample`, read
  by sums that read a data tensor besides: a slice of the input image (YOLOX's `Focus`) is read by a concatenation.
- `heads-as-modules` (`heads_as_modules`): attention cores of one kind reading the same inputs, read only by one
  concatenation read only by Linears (the output projection), are one core: the heads of a multi-head attention
  written as a module per head with its own q, k, v Linears (which 2.2's `one-projection` has made one projection),
  as tutorials and BabyBERT write it. DiffLlama's two cores, whose concatenation is split and combined before the
  projection (differential attention), stay two.

2.9 (`spell_29`): 2.8 without `interpolated-tables`, that is 2.7 and `heads-as-modules`
(`narbench.data.canonical.WITHDRAWS`). Folding resized tables made DPT's and YOLOS's encoders read as a ViT's, so ViTs
of a source the index had not seen met them first (the zoo's `source` side, family@1 per query 0.624 -> 0.495 over
three draws, all of it ViT) for one validation model gained (Meta's DINOv2).

Each rewrite is idempotent, so a graph already under a version comes back as it is.
"""

from __future__ import annotations

import copy

from typing import Any, Sequence

import numpy as np


def rope_pairs(g: Any) -> int:
    """`concat(add(x), add(x))` on a `RewriteGraph`, each sum reading x alone and read by the concatenation alone,
    becomes `add(x, concat(x))`: the first sum becomes the concatenation of x, the second the sum of x and it, and
    takes the old concatenation's consumers. The number of rotations rewritten."""
    done, pos = 0, None
    for c in list(g.order):
        if not g.alive(c) or g.op[c] != "concat" or len(g.preds[c]) != 2:
            continue
        pos = pos or {v: i for i, v in enumerate(g.order)}
        a1, a2 = sorted(g.preds[c], key=pos.__getitem__)
        if g.op[a1] != "add" or g.op[a2] != "add" or g.succs[a1] != {c} or g.succs[a2] != {c}:
            continue
        if len(g.preds[a1]) != 1 or list(g.preds[a1]) != list(g.preds[a2]):
            continue
        (x,) = g.preds[a1]
        g.op[a1], g.succs[a1] = "concat", {a2}
        g.preds[a2], g.succs[a2] = {x: None, a1: None}, set(g.succs[c])
        for k in g.succs[c]:
            g.preds[k] = {(a2 if q == c else q): None for q in g.preds[k]}
        del g.op[c], g.preds[c], g.succs[c]
        done += 1
    return done


def table_lookup(g: Any) -> int:
    """`gather` nodes with no input on a `RewriteGraph` become `embedding`; the number renamed."""
    done = 0
    for v in g.order:
        if g.alive(v) and g.op[v] == "gather" and not g.preds[v]:
            g.op[v] = "embedding"
            done += 1
    return done


def spell_25(g: Any) -> int:
    """2.5's pass: `rope_pairs` then `table_lookup`; the number of rewrites."""
    return rope_pairs(g) + table_lookup(g)


def may_spell_25(ops: Sequence[str], edges: np.ndarray) -> bool:
    """Whether `spell_25` can fire on a canonical graph (a cheap check, so that a graph where it cannot is not
    rebuilt): a `concat` fed by two `add`s, or a `gather` fed by nothing."""
    if "gather" not in ops and ("concat" not in ops or "add" not in ops):
        return False
    names = np.asarray(ops, dtype=object)
    src, dst = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    fed = np.bincount(dst, minlength=len(ops))
    if ((names == "gather") & (fed == 0)).any():
        return True
    pairs = np.bincount(dst[(names[dst] == "concat") & (names[src] == "add")], minlength=len(ops))
    return bool((pairs >= 2).any())


#: layout ops that, fed by no data, only pack or unpack parameters (`packed-weights`)
LAYOUT = frozenset({"concat", "slice"})
#: what reads packed parameters beside one data tensor: a Linear, with or without bias (`MmBackward0` is `matmul`)
READERS = frozenset({"linear", "matmul"})
#: the norms `one-norm-per-projection` merges
NORMS = frozenset({"layernorm", "rmsnorm", "batchnorm", "groupnorm"})


def _drop(g: Any, v: int) -> None:
    for p in g.preds[v]:
        g.succs[p].discard(v)
    for c in g.succs[v]:
        g.preds[c].pop(v, None)
    del g.op[v], g.preds[v], g.succs[v]


def packed_weights(g: Any) -> int:
    """Layout nodes (`LAYOUT`) fed by no data, whose last ones are read only by Linears (or matmuls: a Linear without
    bias) that each read one data tensor besides, are elided on a `RewriteGraph`; such a matmul is then a `linear`,
    and those Linears' tensors get 2.2's `one-projection`. The nodes elided."""
    plumbing: set[int] = set()
    for v in g.order:
        if g.alive(v) and g.op[v] in LAYOUT and all(p in plumbing for p in g.preds[v]):
            plumbing.add(v)
    drop = {v for v in plumbing if g.succs[v] and not g.succs[v] & plumbing
            and all(g.op[c] in READERS and len(set(g.preds[c]) - plumbing) == 1 for c in g.succs[v])}
    stack = list(drop)  # and the plumbing that fed only them
    while stack:
        for p in g.preds[stack.pop()]:
            if p in plumbing and p not in drop and g.succs[p] <= drop:
                drop.add(p)
                stack.append(p)
    readers = {c for v in drop for c in g.succs[v]} - drop
    for v in sorted(drop, reverse=True):
        _drop(g, v)
    for c in readers:  # a matmul of one data tensor and a weight is a Linear without bias, as pass 1 reads MmBackward0
        if g.op[c] == "matmul" and len(g.preds[c]) == 1:
            g.op[c] = "linear"
    g.merge_projections(sources={p for c in readers for p in g.preds[c]})
    return len(drop)


def table_slice(g: Any) -> int:
    """`slice` nodes with no input read only by sums become `embedding` on a `RewriteGraph`; the number renamed. A
    slice with no input read otherwise stays: of the input itself (YOLOX's `Focus` concatenates slices of the image),
    or a table resized before use (a ViT's positions interpolated or concatenated to another resolution)."""
    done = 0
    for v in g.order:
        if (g.alive(v) and g.op[v] == "slice" and not g.preds[v] and g.succs[v]
                and all(g.op[c] == "add" for c in g.succs[v])):
            g.op[v] = "embedding"
            done += 1
    return done


def one_norm_per_projection(g: Any) -> int:
    """On a `RewriteGraph`, norms of one op on one tensor, each read only by a Linear that reads it alone, the Linears
    all read by the same nodes, become one norm, and its Linears one projection. The norms merged away."""
    groups: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for v in g.order:
        if g.alive(v) and g.op[v] in NORMS and len(g.preds[v]) == 1 and len(g.succs[v]) == 1:
            (c,) = g.succs[v]
            if g.op[c] == "linear" and list(g.preds[c]) == [v] and g.succs[c]:
                groups.setdefault((g.op[v], *g.preds[v]), []).append((v, c))
    done, merged = 0, []
    for (op, _), members in groups.items():
        if len(members) > 1 and len({frozenset(g.succs[c]) for _, c in members}) == 1:
            g.merge([v for v, _ in members], members[0][0], op)
            merged.append(members[0][0])
            done += len(members) - 1
    g.merge_projections(sources=merged)
    return done


def spell_26(g: Any) -> int:
    """2.6's pass: `packed_weights`, `table_slice`, then `one_norm_per_projection`; the number of rewrites."""
    return packed_weights(g) + table_slice(g) + one_norm_per_projection(g)


def may_spell_26(ops: Sequence[str], edges: np.ndarray) -> bool:
    """Whether `spell_26` can fire on a canonical graph (a cheap check): a `concat` or `slice` fed by nothing, or two
    norms of one op fed by the same single node."""
    names = np.asarray(ops, dtype=object)
    src, dst = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    fed = np.bincount(dst, minlength=len(ops))
    if (((names == "slice") | (names == "concat")) & (fed == 0)).any():
        return True
    norm = np.isin(names, list(NORMS))
    if norm.sum() < 2:
        return False
    one = norm & (fed == 1)
    keys = [(names[d], s) for s, d in zip(src.tolist(), dst.tolist()) if one[d]]
    return len(keys) != len(set(keys))


#: the most nodes a returned attention map's branch may hold (a selection, a mean over heads, a reshape or two)
MAP_NODES = 8
#: the folded attention cores (2.2's two kinds)
CORES = frozenset({"attention", "causal_attention"})


def _returned(g: Any, s: int, core: int) -> list[int] | None:
    """The nodes that read softmax `s` besides the core's matmul `core`, and every node after them, when they read
    nothing else and lead only to the graph's outputs (a returned attention map); None otherwise."""
    branch: list[int] = []
    todo = sorted(g.succs[s] - {core})
    seen = set(todo)
    while todo:
        u = todo.pop(0)
        branch.append(u)
        if len(branch) > MAP_NODES:
            return None
        for c in sorted(g.succs[u] - seen):
            seen.add(c)
            todo.append(c)
    inside = set(branch) | {s}
    if not branch or any(set(g.preds[u]) - inside for u in branch):
        return None
    return branch


def returned_attention_maps(g: Any) -> int:
    """On a `RewriteGraph`: an attention core left as `matmul -> softmax -> matmul` because its probabilities are also
    returned (`_returned`) is folded and the returned branch dropped; the core is `causal_attention` when every folded
    core of the graph is, else `attention`. The cores folded."""
    kinds = {g.op[v] for v in g.order if g.alive(v) and g.op[v] in CORES}
    kind = "causal_attention" if kinds == {"causal_attention"} else "attention"
    folded = 0
    for v in list(g.order):
        if not g.alive(v) or g.op[v] != "matmul":
            continue
        for s in g.inputs(v):
            if g.op[s] != "softmax" or len(g.preds[s]) != 1 or g.succs[s] == {v}:
                continue
            branch = _returned(g, s, v)
            if branch is None:
                continue
            before = copy.deepcopy(g.__dict__)
            for u in reversed(branch):
                _drop(g, u)
            if g.fold_attention(v):
                g.op[v] = kind
                folded += 1
            else:  # the core does not fold for another reason: the graph as it was
                g.__dict__.update(before)
            break
    return folded


def spell_27(g: Any) -> int:
    """2.7's pass: `returned_attention_maps`; the cores folded."""
    return returned_attention_maps(g)


def may_spell_27(ops: Sequence[str], edges: np.ndarray) -> bool:
    """Whether `spell_27` can fire on a canonical graph (a cheap check): a `softmax` read by a `matmul` and by another
    node."""
    names = np.asarray(ops, dtype=object)
    src, dst = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    soft = names[src] == "softmax"
    if not soft.any():
        return False
    readers = np.bincount(src[soft], minlength=len(ops))
    by_matmul = np.zeros(len(ops), dtype=bool)
    by_matmul[src[soft & (names[dst] == "matmul")]] = True
    return bool((by_matmul & (readers > 1)).any())


#: what an interpolated table is made of: slices of the table, the resampling, the concatenation with its other rows
TABLE_OPS = frozenset({"slice", "upsample", "concat"})


def _splice(g: Any, v: int) -> None:
    """Remove `v`, which has one input: its readers read that input in its place."""
    (p,) = g.preds[v]
    for c in list(g.succs[v]):
        g.preds[c] = dict.fromkeys(p if q == v else q for q in g.preds[c])
        g.succs[p].add(c)
    g.succs[p].discard(v)
    del g.op[v], g.preds[v], g.succs[v]


def _tables(g: Any) -> set[int]:
    """The `TABLE_OPS` nodes fed by no data: slices with no input, and what reads only such nodes."""
    table: set[int] = set()
    for v in g.order:
        if g.alive(v) and g.op[v] in TABLE_OPS and (
                (not g.preds[v] and g.op[v] == "slice") or (g.preds[v] and all(p in table for p in g.preds[v]))):
            table.add(v)
    return table


def interpolated_tables(g: Any) -> int:
    """On a `RewriteGraph`: each connected part of `_tables` that holds an `upsample` and is read only by sums that
    each read a data tensor besides is dropped, and those sums, of one tensor now, elided. The tables dropped."""
    table = _tables(g)
    pos = {v: i for i, v in enumerate(g.order)}
    done, seen = 0, set()
    for v in sorted(table, key=pos.__getitem__):
        if v in seen:
            continue
        part, todo = {v}, [v]
        while todo:
            u = todo.pop()
            for w in [*g.preds[u], *g.succs[u]]:
                if w in table and w not in part:
                    part.add(w)
                    todo.append(w)
        seen |= part
        readers = {c for u in part for c in g.succs[u]} - part
        if (not any(g.op[u] == "upsample" for u in part) or not readers
                or any(g.op[c] != "add" or not set(g.preds[c]) - part for c in readers)):
            continue
        for u in sorted(part, key=pos.__getitem__, reverse=True):
            _drop(g, u)
        for c in sorted(readers, key=pos.__getitem__):
            if len(g.preds[c]) == 1:
                _splice(g, c)
        done += 1
    return done


def heads_as_modules(g: Any) -> int:
    """On a `RewriteGraph`: attention cores of one kind that read the same inputs, each read only by one
    concatenation that reads nothing else and is read only by Linears, are one core. The cores merged away."""
    done = 0
    for c in list(g.order):
        if not g.alive(c) or g.op[c] != "concat" or len(g.preds[c]) < 2:
            continue
        heads = list(g.preds[c])
        if (len({g.op[h] for h in heads}) != 1 or g.op[heads[0]] not in CORES
                or len({tuple(g.preds[h]) for h in heads}) != 1 or any(g.succs[h] != {c} for h in heads)
                or not g.succs[c] or any(g.op[r] != "linear" for r in g.succs[c])):
            continue
        g.merge([*heads, c], c, g.op[heads[0]])
        done += len(heads) - 1
    return done


def spell_28(g: Any) -> int:
    """2.8's pass: `interpolated_tables`, then `heads_as_modules`; the number of rewrites."""
    return interpolated_tables(g) + heads_as_modules(g)


def _may_tables(names: np.ndarray, src: np.ndarray, dst: np.ndarray) -> bool:
    fed = np.bincount(dst, minlength=len(names))
    return bool((names == "upsample").any() and ((names == "slice") & (fed == 0)).any())


def _may_heads(names: np.ndarray, src: np.ndarray, dst: np.ndarray) -> bool:
    cores = np.isin(names[src], list(CORES)) & (names[dst] == "concat")
    return bool(cores.any() and np.bincount(dst[cores], minlength=len(names)).max() > 1)


def may_spell_28(ops: Sequence[str], edges: np.ndarray) -> bool:
    """Whether `spell_28` can fire on a canonical graph (a cheap check): an `upsample` and a `slice` with no input, or
    a concatenation of two or more attention cores."""
    names = np.asarray(ops, dtype=object)
    src, dst = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    return _may_tables(names, src, dst) or _may_heads(names, src, dst)


def spell_29(g: Any) -> int:
    """2.9's pass: `heads_as_modules` alone (2.8's without `interpolated_tables`); the cores merged away."""
    return heads_as_modules(g)


def may_spell_29(ops: Sequence[str], edges: np.ndarray) -> bool:
    """Whether `spell_29` can fire on a canonical graph (a cheap check): a concatenation of two or more attention
    cores."""
    src, dst = np.asarray(edges, dtype=np.int64).reshape(2, -1)
    return _may_heads(np.asarray(ops, dtype=object), src, dst)
