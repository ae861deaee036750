"""How `choose_index` measures a candidate on a validation side (issue 59): fitted on the side's pool, an index of
the side's training graphs, its validation queries searching the pool, its edited graphs the whole index
(`measure_side`); the `source` side's folds (`source_folds`, `measure_source`) and the `wildval` side, whose
models from packages outside the zoos search each `source` fold's whole index (`wildval_queries`)."""

from __future__ import annotations

import json
import time

import numpy as np

from benchmarks.search.index_quality import BY_FAMILY, QUALITY, SEARCH, outside_per_query, per_query, summarise
from benchmarks.search.robustness import Side
from benchmarks.timing import line

#: the side without edits (code of a known family from another source) and its number of folds
SOURCE = "source"
SOURCE_FOLDS = 2
#: the side of models from packages outside the zoos (docs/wildval.md), searched in the `source` folds' indexes
WILDVAL = "wildval"


def side_dataset(ds, side: Side):
    """The side's training graphs as a dataset of their own (what its index holds)."""
    from narbench.data.dataset import GraphDataset, Split

    graphs = [ds.graphs[i] for i in side.index]
    split = Split(np.arange(len(graphs)), np.zeros(0, dtype=np.int64), 0, 0.0)
    return GraphDataset(ds.name, ds.version, list(ds.vocab), graphs, ds.sha256, split, meta=ds.meta,
                        outside_sets=ds.outside_sets)  # graf-lda's `outside` reads the validation sets' models


def source_folds(ds, seed: int = 0, folds: int = SOURCE_FOLDS, train: np.ndarray | None = None) -> list[Side]:
    """The `source` side's folds: of `standard`'s `quick` training graphs (seed `seed`; or the positions `train`),
    for the families two sources implement (in a seeded order, every `folds`-th one to a fold), the graphs of the
    family's smallest source (ties: the first name) are the fold's queries; every other training graph is its
    pool, and the training graphs are its index. ValueError when no family has two sources."""
    from narbench.eval.holdout import smallest_sources
    from narbench.harness.runner import select
    from narbench.train.profiles import get_profile

    if train is None:
        train = select(ds, get_profile("quick"), seed, "standard")[0]
    train = np.sort(np.asarray(train))
    held = smallest_sources([str(ds.graphs[i].family) for i in train], [ds.graphs[i].source for i in train])
    if not held:
        raise ValueError("no family has training graphs from two sources; no source side")
    eligible = list(held)
    order = np.random.default_rng(seed).permutation(len(eligible)).tolist()
    out = []
    for fold in range(folds):
        val = [i for k, j in enumerate(order) if k % folds == fold for i in held[eligible[j]]]
        val_arr = np.sort(train[np.asarray(val, dtype=np.int64)])
        out.append(Side(f"{SOURCE}{fold}", train, np.setdiff1d(train, val_arr), val_arr))
    return [side for side in out if len(side.val)]


def side_edits(ds, side: Side, graphs_per_cell: int, seed: int) -> dict:
    """{(kind, size): (edited graphs, their originals' names)}: the side's validation graphs edited as
    `benchmarks.search.robustness` edits corpus graphs (its order, seeds and sizes)."""
    from benchmarks.search.robustness import SIZES, edited_graphs
    from narbench.data.edits import EDIT_KINDS

    out = {}
    for kind in EDIT_KINDS:
        for size in SIZES:
            edited, origin = edited_graphs(ds.core_graphs, list(ds.vocab), kind, size, graphs_per_cell, seed,
                                           among=side.val)
            out[kind, size] = (edited, [ds.core_graphs[p].name for p in origin])
    return out


def measure_side(ds, side: Side, cands: list, args, edit: bool = True, outside=None) -> tuple[dict, dict, dict]:
    """({(label, side): quality}, {(label, side, kind or "all", size): robustness cell}, {(label, side): (figures
    per query, the queries' families)}) of every candidate; no cells when not `edit`; with `outside` (graphs,
    expected families) also {(label, side/wildval): ...}: those graphs searching the whole index."""
    from benchmarks.search.robustness import cell
    from narbench.search_engine.index_build import IndexConfig, fit_encoder, index_params
    from narbench.search_engine.ranks import query_graph, ranks_of

    sub = side_dataset(ds, side)
    graphs = sub.core_graphs
    pool, val = side.positions()
    edits = side_edits(ds, side, args.graphs, args.seed) if edit else {}
    flat = [g for edited, _ in edits.values() for g in edited]
    names = [n for _, originals in edits.values() for n in originals]
    groups: dict[str, list] = {}
    for cand in cands:  # candidates that differ only in their fusion share one fit
        own = index_params(IndexConfig(encoder=cand.encoder, params=cand.params))[0]
        groups.setdefault(json.dumps([cand.encoder, own], sort_keys=True), []).append(cand)
    queries, digests, quality_rows, cells, raw = None, None, {}, {}, {}
    families = [str(graphs[i].family) for i in val]
    for key, members in groups.items():
        t = time.perf_counter()
        encoder, own = json.loads(key)
        fitted = fit_encoder(IndexConfig(encoder=encoder, dataset=ds.name, params=own, progress=False), sub,
                             train=pool)
        fit_s = time.perf_counter() - t
        for cand, index, embed in side_indexes(fitted, members, sub, ds.name):
            t = time.perf_counter()
            raw[cand.label, side.name] = (per_query(index, graphs, pool, val), families)
            if outside:
                raw[cand.label, f"{side.name}/{WILDVAL}"] = (outside_per_query(index, graphs, embed(outside[0]), outside[1]),
                                                             ["|".join(f) for f in outside[1]])
            quality_rows[cand.label, side.name] = summarise(*raw[cand.label, side.name])
            if edit and queries is None:  # mapped onto the (common) vocabulary of the side's indexes once
                queries = [query_graph(g, list(ds.vocab), index) for g in flat]
                digests = [q.content_hash() for q in queries]
            ranks = ranks_of(index, embed(queries), [index.row_of(n) for n in names], digests) if edit else None
            at = np.cumsum([0, *(len(e) for e, _ in edits.values())])
            by_cell = {ks: ranks[at[i]: at[i + 1]] for i, ks in enumerate(edits)}
            for size in sorted({z for _, z in edits}):
                pooled = np.concatenate([r for (k, z), r in by_cell.items() if z == size])
                cells[cand.label, side.name, "all", size] = cell(cand.label, "all", size, pooled, args.boot, args.seed)
                for (kind, z), r in by_cell.items():
                    if z == size:
                        cells[cand.label, side.name, kind, size] = cell(cand.label, kind, size, r, args.boot, args.seed)
            line("measured", candidate=cand.label, side=side.name, fit_s=fit_s, search_s=time.perf_counter() - t,
                 **{m: f"{quality_rows[cand.label, side.name][m]:.4f}" for m in QUALITY})
            fit_s = 0.0
    return quality_rows, cells, raw


def side_indexes(fitted, members: list, sub, dataset: str):
    """(candidate, its index of the side's graphs, what embeds query graphs as that index does) for each of
    `members` (one fit: fusions differ only in their share; their parts are computed once)."""
    import copy

    from narbench.search_engine.fusion import FusedEncoder, combine, cut
    from narbench.search_engine.index import normalised
    from narbench.search_engine.index_build import Fitted, IndexConfig, assemble, index_params
    from narbench.train.profiles import get_profile

    graphs, parts = sub.core_graphs, {}
    for cand in members:
        cfg = IndexConfig(encoder=cand.encoder, dataset=dataset, params=cand.params, progress=False)
        params, fusion = index_params(cfg)
        if fusion is None:
            index = assemble(cfg, sub, fitted, fitted.embedder.embed(fitted.trainer, graphs))
            yield cand, index, lambda qs, index=index: np.concatenate(
                [index.embed(qs[lo: lo + 512]) for lo in range(0, len(qs), 512)])
            continue
        shape = (fusion.dims, fusion.wl_dim, fusion.wl_alphabet)  # what the parts depend on (not the share)
        if shape not in parts:
            encoder = copy.deepcopy(fitted.encoder)
            cut(encoder, cand.encoder, fusion)
            fused = FusedEncoder(encoder, fusion, sub.vocab, get_profile(cfg.profile))
            parts[shape] = (encoder, fused.parts(fitted.trainer, graphs), {})
        encoder, corpus_parts, query_parts = parts[shape]
        fused = FusedEncoder(encoder, fusion, sub.vocab, get_profile(cfg.profile))
        this = Fitted(encoder, fitted.encoder_cls, fitted.splitter_name, fitted.splitter, params, fusion,
                      fitted.labels, fitted.train, fitted.trainer, fused)
        index = assemble(cfg, sub, this, combine(*corpus_parts, fusion.share))

        def embed(qs, fused=fused, index=index, query_parts=query_parts, label=cand.label):
            if "parts" not in query_parts:
                query_parts["parts"] = fused.parts(fitted.trainer, qs)
            emb = normalised(combine(*query_parts["parts"], fused.fusion.share), None)
            check = index.embed(qs[:8])  # the index's own path agrees
            if np.abs(check - emb[:8]).max() > 1e-5:
                raise AssertionError(f"{label}: the fused query embedding differs from the index's")
            return emb

        yield cand, index, embed


def measure_source(ds, cands: list, args, sides_meta: dict) -> dict:
    """{(label, "source"): quality}: each candidate fitted and searched on every fold of the `source` side (drawn
    from `args.source_graphs`), the folds' queries pooled (each figure a mean over them, or per family first); with
    `wildval` among the sides also {(label, "wildval"): quality}, its fitting models searched in each fold's index."""
    train = ds.get_split("standard").train if args.source_graphs == "split" else None
    folds = source_folds(ds, args.seed, train=train)
    sides = getattr(args, "sides", [SOURCE])
    outside = wildval_queries(ds) if WILDVAL in sides else None
    per_fold = []
    for fold in folds:
        families = sorted({str(ds.graphs[i].family) for i in fold.val})
        sides_meta[fold.name] = {"index": int(len(fold.index)), "pool": int(len(fold.pool)), "val": int(len(fold.val)),
                                 "families": families}
        line("side", side=fold.name, index=len(fold.index), pool=len(fold.pool), val=len(fold.val),
             families=len(families))
        per_fold.append(measure_side(ds, fold, cands, args, edit=False, outside=outside)[2])
    sides_meta[SOURCE] = {"folds": [f.name for f in folds], "val": int(sum(len(f.val) for f in folds)),
                          "graphs": args.source_graphs}
    out = {}
    for cand in cands:
        if outside:
            rows = [raw[cand.label, f"{fold.name}/{WILDVAL}"] for raw, fold in zip(per_fold, folds)]
            out[cand.label, WILDVAL] = summarise({m: np.concatenate([r[0][m] for r in rows]) for m in QUALITY},
                                                 [f for r in rows for f in r[1]])
            line("measured", candidate=cand.label, side=WILDVAL,
                 **{m + BY_FAMILY: f"{out[cand.label, WILDVAL][m + BY_FAMILY]:.4f}" for m in SEARCH})
        if SOURCE not in sides:
            continue
        rows = [raw[cand.label, fold.name] for raw, fold in zip(per_fold, folds)]
        each = {m: np.concatenate([r[0][m] for r in rows]) for m in QUALITY}
        out[cand.label, SOURCE] = summarise(each, [f for r in rows for f in r[1]])
        line("measured", candidate=cand.label, side=SOURCE, **{m: f"{out[cand.label, SOURCE][m]:.4f}" for m in QUALITY},
             **{m + BY_FAMILY: f"{out[cand.label, SOURCE][m + BY_FAMILY]:.4f}" for m in SEARCH})
    return out


def wildval_queries(ds) -> tuple[list, list[tuple[str, ...]]]:
    """`wildval`'s models that fit a family, in `ds`'s vocabulary: (graphs, expected families); ValueError when it
    ships none in that vocabulary."""
    from narbench.search_engine.outside_fit import outside_queries

    graphs, families = outside_queries(ds)
    if not graphs:
        raise ValueError(f"wildval ships no graphs in {ds.name} {ds.version}'s vocabulary")
    return [g for g, f in zip(graphs, families) if f], [f for f in families if f]
