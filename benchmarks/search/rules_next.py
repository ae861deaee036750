"""Candidate canonical passes after 2.6-2.8, chosen from the validation sets' misses: what each would change (validation only)

    python -m benchmarks.search.rules_next                 # corpus graphs and wildval models each pass changes (1 min)
    python -m benchmarks.search.rules_next --measure       # also wildval searched in an index of the changed corpus

Each candidate is a pass over canonical graphs, like 2.4's, 2.5's and 2.6's (`narbench.data.canonical.UPGRADES`), not
yet a rule (2.5 adopted two: `rope-pairs`, and `table-lookup`, measured here as `lookup-is-embedding` on 2026-11-29;
2.6 three: `packed-weights`, `table-slice` and `one-norm-per-projection`, measured here on 2026-11-30 as
`packed-weights`, `table-slice` and `qkv-norms`, benchmarks/results/rules-next-2.6-wildval-1.1-2026-11-30; 2.7 one,
`returned-attention-maps`, measured here on 2026-11-30 as `attention-maps` on `wildval` and `wildval2` pooled,
benchmarks/results/rules-next-2.7-pooled-2026-11-30; 2.8 two, `interpolated-tables` and `heads-as-modules`, measured
here under those names on the three sets pooled, benchmarks/results/rules-next-2.8-pooled-2026-11-30):
- `norms-of-one-tensor`: norms of one op on the same input (not a selection) are one norm (their affine parts are
  elided, so the canonical values are one). Why: transformer-lens applies `ln1` three times, once per q, k and v,
  so its blocks hold three LayerNorms where the corpus's hold one.
- `kv-cache-layout`: a concatenation with one data input read only by attention cores is elided (what it appends
  is a tensor the graph does not see: a cache's past keys and values). Why: transformers' decoders concatenate
  onto an (empty) cache in every forward; torchtune's and transformer-lens's decoders have no cache.
- `attention-inputs` (2026-11-30, for 2.7): what an attention core reads through parameter-free nodes with no other
  input (`FREE`: heads split, keys repeated, positions rotated however written) is read as one form, the sources and
  rotate-half's `add(x, concat(x))` of each source whose path computes; per-projection norms are then one norm and
  one projection. Why: transformer-lens's Pythia rotates by scatter, ibm-fms's Mixtral by a sum of pair products
  (each found its own family at cosine 0.56-0.58, flagged), transformers' Phi-3 graphs concatenate an empty
  pass-through that torchtune's Phi-3 lacks.
  `rotations`: the same, only for cores whose region computes. `sum-of-sums`: a sum read only by a sum is part of it
  (`(x + attn) + mlp` is `x + (attn + mlp)`, GPT-NeoX's parallel block written two ways).
- `weight-matmul` (2026-12-01, for 2.12): a `matmul` reading one tensor is a `linear` (its other operand a weight the
  canonical graph does not see, as `MmBackward0` with one data input is a Linear), then one projection over the
  tensors read. Why: Keras 3's EinsumDense on torch (tfvit's ViTs in `wildval8`, found `xlnet`, whose einsums read
  weights the same way) and easytransformer's BERT (`wildval11`). Not adopted (results/rules-next-2.12-2026-12-01),
  then withdrawn: selections of one tensor are one `slice` node, so a product of two selections (`a(x) @ b(x).T`,
  Mamba-2's `C @ B.T`, a gated delta rule's `q @ k.T`) reads one node and is renamed too (492 of its 804
  graphs hold only such products).
  `weight-product` (2026-12-01): the same, less the matmuls whose one input is a `slice` (312 graphs, 11 families).
  Not adopted: top-1 falls on `wildval6` (0.85 -> 0.80), whose models it does not change (the same results folder).
`attention-projections` (2026-12-02): `weight-product` for products fed by or feeding attention cores alone (tfclip's
  Keras towers, `wildval17`, meet `xlnet`); with `weight-product` again on `wildval` 1-17 not adopted, both failing on
  one tie of `wildval6` (results/rules-next-*-17-2026-12-02). `distributed-layernorm` is canonical 2.12.
`buffer-writes`, `product-sums` (2026-12-03, from `wildval21`'s Mamba) and `writes+sums` (both) measure canonical
2.15's rules (`narbench.data.canonical_scans`; results/canonical-2.15-2026-12-03).
All change corpus graphs (printed) but `distributed-layernorm`. `--measure` applies the pass to every corpus graph and builds the shipped
index's encoder on them (`narbench index build` reads that corpus under the newest rules, 2.8, on top), and
searches `wildval` with the pass applied (its graphs then read as the index reads them); the changed corpus keeps
every other field of the dataset, so the index's out-of-family score is refitted as the shipped one is (on
`outside_sets`' `REFIT_SETS`; before 2026-12-01 the candidate index was built without them and its score fitted the
other way, `choose_on`, which moved flags that the pass did not). `--canonical-version 2.11` reads every set from its
file under 2.11 (rules on raw names reach it). No test query of any
split, no `crossimpl` query and no wild-set model is read.

The decision rule for candidates measured after `weight-matmul` (written 2026-12-01, before any such figure): on the
validation sets pooled under the newest pinned rules, against the shipped index, top-1 and P@10 do not fall and top-1
falls on no set; the flags are compared at one operating point, the candidate index's score read at the threshold that
flags as many fitting models as the shipped index does (the lowest threshold flagging no more), where `none` flagged
may fall by at most 1 (a pass that changes corpus graphs refits the score, and a refitted threshold alone moved four
flags of `weight-matmul` at unchanged scores); then the zoo's validation sides as for 2.8. `weight-matmul` was to be
re-decided on a validation set built after this rule; it was withdrawn before (its design defect, above), and
`weight-product`, its mend, failed this rule on the thirteen sets.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np

from narbench.data.canonical_spelling import CORES as ATTENTION, NORMS as NORM_OPS, _drop, _splice

from narbench.data.canonical_moments import distributed_layernorm
from narbench.data.canonical_heads import head_selections
from narbench.data.canonical_projections import weight_products
from narbench.data.canonical_scans import buffer_writes, product_sums, scans

from benchmarks.timing import line, report, study_parser
from narbench.datasets.wild import VALIDATIONS

#: the norms `norms-of-one-tensor` merges
NORMS = NORM_OPS


def norms_of_one_tensor(g) -> int:
    n, seen = 0, {}
    for v in list(g.order):
        if not g.alive(v) or g.op[v] not in NORMS:
            continue
        ins = tuple(g.inputs(v))
        if not ins or any(g.op[p] == "slice" for p in ins):  # a merged projection's parts are different tensors
            continue
        k = seen.setdefault((g.op[v], ins), v)
        if k != v and g.alive(k):
            g.merge([k, v], k, g.op[v])
            n += 1
    if n:
        g.merge_projections()  # the q, k, v Linears now read one tensor: one projection (2.2)
    return n


def kv_cache_layout(g) -> int:
    n = 0
    for v in list(g.order):
        if not (g.alive(v) and g.op[v] == "concat" and len(g.inputs(v)) == 1 and g.succs[v]
                and all(g.op[c] in ATTENTION for c in g.succs[v])):
            continue
        _splice(g, v)  # the concatenation's consumers read its input in its place
        n += 1
    return n


#: ops with no parameters that only move or combine their inputs' elements: between a projection and an attention
#: core, with no input from elsewhere, they split heads, repeat keys for grouped queries, or rotate positions
FREE = frozenset({"slice", "concat", "scatter", "add", "mul", "sum", "flip", "roll"})
#: of those, the ones that compute (a rotation: x cos + rot(x) sin, a complex product's real part, a sum of pairs)
ARITH = frozenset({"add", "mul", "sum"})


def _region(g, a: int, pos: dict[int, int]) -> set[int]:
    """The `FREE` nodes before attention core `a`, each with a data input, read only by `a` and by each other."""
    region: set[int] = set()
    frontier = set(g.preds[a])
    for v in reversed(g.order[: pos[a]]):  # consumers first: a node's readers are decided before it
        if v in frontier and g.alive(v) and g.op[v] in FREE and g.preds[v] and g.succs[v] <= region | {a}:
            region.add(v)
            frontier.update(g.preds[v])
    return region


def _paths(g, a: int, region: set[int], pos: dict[int, int]) -> tuple[set[int], set[int]]:
    """(the tensors outside `region` that reach `a` through it; those of them that reach it through arithmetic)."""
    plain: dict[int, set[int]] = {}
    rotated: dict[int, set[int]] = {}
    for v in sorted(region, key=pos.__getitem__):
        arith = g.op[v] in ARITH
        pl, ro = set(), set()
        for p in g.preds[v]:
            if p in region:
                (ro if arith else pl).update(plain[p])
                ro.update(rotated[p])
            else:
                (ro if arith else pl).add(p)
        plain[v], rotated[v] = pl, ro
    sources, through = set(), set()
    for p in g.preds[a]:
        if p in region:
            sources |= plain[p] | rotated[p]
            through |= rotated[p]
        else:
            sources.add(p)
    return sources, through


def _in_form(g, a: int, region: set[int], sources: set[int], through: set[int]) -> bool:
    """Whether `a` already reads its sources and `add(x, concat(x))` of each rotated x (and nothing else)."""
    if len(region) != 2 * len(through) or set(g.preds[a]) - region != sources:
        return False
    for x in through:
        cats = [v for v in region if g.op[v] == "concat" and list(g.preds[v]) == [x]]
        if len(cats) != 1 or not any(g.op[v] == "add" and set(g.preds[v]) == {x, cats[0]} for v in region):
            return False
    return True


def _node(g, name: str, preds: list[int], after: int) -> int:
    u = g._next_id
    g._next_id += 1
    g.op[u], g.preds[u], g.succs[u] = name, dict.fromkeys(preds), set()
    for p in preds:
        g.succs[p].add(u)
    g.order.insert(g.order.index(after) + 1, u)
    return u


def _elide_regions(g, rotations_only: bool = False) -> dict[int, set[int]]:
    """Every attention core's region (`_region`) elided, the core reading the region's sources; {core: its sources
    read through arithmetic} of the cores changed."""
    pos = {v: i for i, v in enumerate(g.order)}
    changed: dict[int, set[int]] = {}
    for a in [v for v in g.order if g.alive(v) and g.op[v] in ATTENTION]:
        region = _region(g, a, pos)
        if not region:
            continue
        sources, through = _paths(g, a, region, pos)
        if (rotations_only and not through) or _in_form(g, a, region, sources, through):
            continue
        changed[a] = through
        for v in sorted(region, key=pos.__getitem__, reverse=True):
            _drop(g, v)
        for p in sorted(sources, key=pos.__getitem__):
            g.preds[a][p] = None
            g.succs[p].add(a)
    return changed


def _norms_per_reader(g) -> None:
    """Norms of one op on one tensor, each read only by a Linear that reads it alone, whose Linears are read by the
    same nodes, are one norm and one projection (2.6's `one-norm-per-projection`, grouped by the Linears' readers,
    so a block's other norm of the same tensor, GPT-NeoX's MLP's, does not stop the merge)."""
    groups: dict[tuple, list[int]] = {}
    for v in g.order:
        if g.alive(v) and g.op[v] in NORMS and len(g.preds[v]) == 1 and len(g.succs[v]) == 1:
            (c,) = g.succs[v]
            if g.op[c] == "linear" and list(g.preds[c]) == [v] and g.succs[c]:
                groups.setdefault((g.op[v], *g.preds[v], frozenset(g.succs[c])), []).append(v)
    merged = []
    for (op, *_), norms in groups.items():
        if len(norms) > 1:
            g.merge(norms, norms[0], op)
            merged.append(norms[0])
    g.merge_projections(sources=merged)


def attention_inputs(g, rotations_only: bool = False) -> int:
    """On a `RewriteGraph`: what an attention core reads through parameter-free nodes (`FREE`) that take no other
    input (heads split, keys repeated for grouped queries, positions rotated, however written) is read as one form:
    the core reads those nodes' sources, and `add(x, concat(x))` (rotate-half's form) of each source whose path
    computes (`ARITH`); per-projection norms are then one norm and one projection (`_norms_per_reader`). The cores
    changed."""
    rotated = _elide_regions(g, rotations_only)
    if not rotated:
        return 0
    _norms_per_reader(g)
    for a, through in _elide_regions(g, rotations_only).items():  # a projection merged just now reads through its split
        rotated.setdefault(a, set()).update(through)
    for a, through in rotated.items():
        if not g.alive(a) or not through:
            continue
        pos = {v: i for i, v in enumerate(g.order)}
        sources = sorted(g.preds[a], key=pos.__getitem__)
        for x in [p for p in sources if p in through] or sources[:1]:  # merged away: the projection that took it
            c = _node(g, "concat", [x], x)
            s = _node(g, "add", [x, c], c)
            g.preds[a][s] = None
            g.succs[s].add(a)
    return len(rotated)


def sum_of_sums(g) -> int:
    """On a `RewriteGraph`, a sum read only by another sum is part of it: `(x + attn) + mlp` and `x + (attn + mlp)`
    are one sum of three terms. The sums merged away."""
    done = 0
    for v in list(g.order):
        if g.alive(v) and g.op[v] == "add" and len(g.succs[v]) == 1:
            (c,) = g.succs[v]
            if g.op[c] == "add":
                g.merge([v, c], c, "add")
                done += 1
    return done


def rotations(g) -> int:
    return attention_inputs(g, rotations_only=True)


def attention_inputs_and_sums(g) -> int:
    return attention_inputs(g) + sum_of_sums(g)


def weight_matmul(g) -> int:
    """On a `RewriteGraph`, a `matmul` reading one tensor is a `linear`: its other operand is a tensor the graph does
    not see (a weight, viewed or permuted by layout ops the canonical graph drops), as `MmBackward0` with one data
    input is a Linear without bias; the Linears then reading one tensor alone are one projection (2.2's
    one-projection, over those tensors only). The matmuls renamed."""
    return weight_products(g, lambda g, v, source: True)


def weight_product(g) -> int:
    """`weight_matmul` less the matmuls whose one input is a `slice` (a product of two selections of one tensor, which
    are one node: `a(x) @ b(x).T`); the matmuls renamed. Canonical 2.13's pass since 2026-12-02."""
    return weight_products(g)


def attention_projections(g) -> int:
    """`weight_product` for a `matmul` of one tensor read by attention cores alone (q, k, v) or reading one (o)."""
    return weight_products(g, lambda g, v, source: g.op[source] != "slice" and (
        g.op[source] in ATTENTION or bool(g.succs[v]) and all(g.op[c] in ATTENTION for c in g.succs[v])))


CANDIDATES = {"norms-of-one-tensor": norms_of_one_tensor, "kv-cache-layout": kv_cache_layout,
              "attention-inputs": attention_inputs, "rotations": rotations, "sum-of-sums": sum_of_sums,
              "attention-inputs+sum-of-sums": attention_inputs_and_sums, "weight-matmul": weight_matmul, "weight-product":
              weight_product, "distributed-layernorm": distributed_layernorm, "attention-projections": attention_projections,
              "head-selection": head_selections,  # canonical 2.14's pass since 2026-12-02
              "buffer-writes": buffer_writes, "product-sums": product_sums, "writes+sums": scans}  # 2.15's, 2026-12-03


def apply(graph, vocab: list[str], run) -> tuple[object, int]:
    """(the graph with the pass applied, over `vocab`; how often it fired)."""
    from narbench.data.canonical_rewrite import RewriteGraph
    from narbench.data.graph import ArchGraph

    g = RewriteGraph.of_canonical([vocab[i] for i in graph.ops.tolist()], graph.edges)
    n = run(g)
    if not n:
        return graph, 0
    kept, edges = g.result()
    return ArchGraph(ops=np.array([vocab.index(o) for o in kept]), edges=edges, name=graph.name, family=graph.family,
                     coarse=graph.coarse, source=graph.source, meta=graph.meta), n


def _outside(name: str, canonical: str = "2.3"):
    """`GraphDataset.outside` for another set of outside models: (graphs, vocabulary, expected families), its file
    under the rules `canonical`."""
    from narbench.datasets.wild import read_graphs

    def read():
        w = read_graphs(canonical=canonical, name=name)
        return w.graphs, w.vocab, w.families

    return read


def _figures(name: str, m: dict, fits: np.ndarray) -> dict:
    """A set's figures, as `benchmarks.search.wild` reports them: over fitting models top-1 and P@10, and how many
    fitting and `none` models are flagged."""
    return {f"{name}_top1": round(float(m["top1"][fits].mean()), 4), f"{name}_p10": round(float(m["p10"][fits].mean()), 4),
            f"{name}_fit_flagged": int(m["flagged"][fits].sum()), f"{name}_none_flagged": int(m["flagged"][~fits].sum())}


def matched_none(m: dict, fits: np.ndarray, fit_flagged: int) -> int:
    """`none` models the score of `m` (a `measure`'s figures) flags at the lowest threshold that flags at most
    `fit_flagged` fitting models: the flags compared at one operating point, whatever the refit did to the threshold."""
    score = np.asarray(m["score"], dtype=np.float64)
    cut = min((t for t in np.unique(score) if (score[fits] >= t).sum() <= fit_flagged), default=np.inf)
    return int((score[~fits] >= cut).sum())


def _measured(index, sets: dict, queries: dict, vocab: list[str]) -> dict:
    """Each set's figures in `index` (`_figures`), and all of them pooled when there are several; `queries` gives
    each set's graphs as searched. Under "_pooled", the figures `matched_none` reads."""
    from benchmarks.search.wild import measure

    row, pooled = {}, []
    for s, (_, expected) in sets.items():
        fits = np.array([bool(f) for f in expected])
        m = measure(index, queries[s], expected, vocab)
        row |= _figures(s, m, fits)
        pooled.append((m, fits))
    m = {k: np.concatenate([p[0][k] for p in pooled]) for k in ("top1", "p10", "flagged", "score")}
    fits = np.concatenate([p[1] for p in pooled])
    if len(sets) > 1:
        row |= _figures("pooled", m, fits)
    row["_pooled"] = (m, fits)
    return row


def candidate_index(ds, corpus: list, dataset: str):
    """The index a candidate pass would ship: built as `narbench index build` builds one, on `ds` with its core graphs
    replaced by `corpus` (`apply`'s (graph, fired) pairs). Every other field kept, so the out-of-family score is
    refitted on `outside_sets` as the index build fits it."""
    from narbench.search_engine.index_build import IndexConfig, build_index

    changed = replace(ds, graphs=[g for g, _ in corpus] + ds.graphs[len(corpus):])
    return build_index(IndexConfig(dataset=dataset, progress=False), dataset=changed)


def main(argv: list[str] | None = None) -> int:
    from narbench.search_engine.outside_fit import outside_queries
    from narbench.data.dataset import load_dataset
    from narbench.search_engine.index_build import newest_corpus

    parser = study_parser(__doc__)
    parser.add_argument("--measure", action="store_true", help="also search wildval in an index of the changed corpus")
    parser.add_argument("--only", nargs="+", choices=sorted(CANDIDATES), help="these candidates alone")
    parser.add_argument("--set", nargs="+", choices=VALIDATIONS, default=["wildval"],
                        help="the validation sets of outside models searched (default: the dataset's own, wildval); "
                             "several: each, and all of them pooled")
    parser.add_argument("--canonical-version", metavar="RULES",
                        help="read every set from its file under these rules (e.g. 2.11: rules on raw names reach it); "
                             "default: wildval as the dataset reads it, the others under 2.3")
    args = parser.parse_args(argv)
    ds = newest_corpus(load_dataset(args.dataset))  # as the index build reads it: the candidates apply after 2.8
    vocab = list(ds.vocab)
    sets = {name: outside_queries(replace(ds, outside=_outside(name, args.canonical_version or "2.3"))
                                  if args.canonical_version or name != "wildval" else ds)
            for name in args.set}
    summary = {"dataset": f"{ds.name} {ds.version}", "read_under": ds.canonical_version, "sets": args.set,
               "candidates": {}}
    shipped = None
    if args.measure:
        from narbench.search_engine.index_file import load_index

        index = load_index()
        if index.header["dataset"]["sha256"] == ds.sha256:  # the shipped index is of this dataset: the baseline
            shipped = _measured(index, sets, {s: val for s, (val, _) in sets.items()}, vocab)
            m, fits = shipped.pop("_pooled")
            summary["shipped"] = {"index": index.sha256[:12], **shipped}
            shipped_fit_flagged = int(m["flagged"][fits].sum())
            line("shipped", index=index.sha256[:12], **shipped)
    for name, run in CANDIDATES.items():
        if args.only and name not in args.only:
            continue
        corpus = [apply(g, vocab, run) for g in ds.core_graphs]
        queries = {s: [apply(g, vocab, run) for g in val] for s, (val, _) in sets.items()}
        families = sorted({g.family for g, n in corpus if n})
        row = {"corpus_graphs": sum(1 for _, n in corpus if n), "families": families}
        row |= {f"{s}_models": [g.name for g, n in q if n] for s, q in queries.items()}
        if args.measure:
            index = candidate_index(ds, corpus, args.dataset)
            row |= _measured(index, sets, {s: [g for g, _ in q] for s, q in queries.items()}, vocab)
            m, fits = row.pop("_pooled")
            if shipped is not None:  # `none` flagged where the candidate flags as many fitting models as shipped
                row["none_flagged_at_shipped_fit_flagged"] = matched_none(m, fits, shipped_fit_flagged)
        summary["candidates"][name] = row
        line("candidate", candidate=name, corpus_graphs=row["corpus_graphs"], families=len(families),
             **{f"{s}_models": len(row[f"{s}_models"]) for s in sets},
             **{k: v for k, v in row.items() if not k.endswith("_models") and k not in ("corpus_graphs", "families")})
    report(summary, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
