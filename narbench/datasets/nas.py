"""The NAS dataset: 30,000 DARTS-space networks in 10 edit-distance clusters.

This follows section 4.1, section 4.7 and appendix A.4 of the NAR paper. The exact procedure:

The search space, the network graph of a genotype and the edit distance are defined in
`narbench.datasets.darts` (and re-exported here). The classes and labels:

**Classes (section 4.7).** With ``rng = numpy.random.default_rng(seed)`` (the only source of
randomness; only ``rng.integers`` is used):

1. *Centres.* Draw a pool of ``pool_size = 2048`` random genotypes (each ADD: 2 distinct uniform
   inputs, uniform ops), canonicalise, drop repeats (up to isomorphism, see below), keep pool
   order. Greedy farthest-point selection: the first centre is ``pool[0]``; each next centre is
   the pool genotype maximising the minimum edit distance to the centres chosen so far (ties:
   first in pool order). This yields ``n_classes = 10`` diverse centres.
2. *Samples.* For class ``c`` (classes in order), repeatedly draw batches of candidates: each
   candidate draws a mutation budget ``m`` uniform in ``1..max_distance`` and applies ``m``
   random mutations in sequence to the centre, each with probability 1/2 an *op change* (a
   uniform pair gets a different uniform op) or an *input change* (a uniform pair of
   ``ADD_1..ADD_3`` gets a different uniform input, still distinct from the ADD's other input),
   then is canonicalised and draws a cell count uniform in ``cells``. A candidate is kept, in
   draw order, until ``per_class`` are kept, iff (a) its edit distance ``d`` to its own centre
   is ``<= max_distance`` (default 4), (b) ``d`` is strictly smaller than its distance to every
   other centre, (c) no kept network has the same canonical genotype and cell count, and (d) no
   network kept in *another* class has an isomorphic cell. (c) and (d) compare cells up to
   isomorphism (input swaps and relabelling the 4 ADD nodes, which the plain canonical form does
   not merge), so no two networks in the dataset are isomorphic and isomorphic cells never carry
   two different labels. Mutations may cancel out, so the centre itself (``d = 0``) can be a
   member of its class (with each cell count at most once). All ``n_classes * per_class``
   graphs are distinct (also checked with ``ArchGraph.content_hash``).
3. *Labels.* ``family = coarse = f"cluster-{c}"``: the NAS data has one level of labels, so the
   coarse label equals the fine one. ``name = f"nas-c{c}-{i:04d}"``, ``source = "nas"``, and
   ``meta = {"genotype": [[input, op_name], ... 8 pairs], "cells": n, "edit_distance": d}``.

The header stores every parameter, the centres and the distance statistics (per class: mean,
min and max distance to the own centre, the minimum distance to the nearest other centre and
the minimum margin; pairwise centre distances min/mean/max). Same seed -> identical graphs on
any machine (integer logic only); the default build is pinned by ``NASDataset.expected_sha256``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from narbench.data.dataset import DatasetProvider
from narbench.datasets.darts import (  # noqa: F401 - re-exported: the NAS dataset's search space
    ADD,
    CONCAT,
    EDGES_PER_CELL,
    GAP,
    LINEAR,
    N_ADD,
    N_OPS,
    N_PAIRS,
    NODES_PER_CELL,
    OPS,
    POOL_SIZE,
    STEM,
    VOCAB,
    Genotype,
    _build_batch,
    _canonicalise,
    _distances,
    _iso_keys,
    _mutate,
    _random_genotypes,
    build_network,
    canonical,
    edit_distance,
    genotype_from_meta,
    genotype_to_meta,
)
from narbench.data.graph import ArchGraph


def _select_centres(pool_i: np.ndarray, pool_o: np.ndarray, n_classes: int) -> list[int]:
    chosen = [0]
    mind = _distances(pool_i, pool_o, pool_i[:1], pool_o[:1])[:, 0]
    while len(chosen) < n_classes:
        nxt = int(np.argmax(mind))  # first maximum: ties go to pool order
        if mind[nxt] == 0:
            raise ValueError(f"the pool has fewer than {n_classes} distinct genotypes")
        chosen.append(nxt)
        new = _distances(pool_i, pool_o, pool_i[nxt : nxt + 1], pool_o[nxt : nxt + 1])[:, 0]
        mind = np.minimum(mind, new)
    return chosen


# ---------------------------------------------------------------- the dataset


def generate(
    seed: int = 0,
    n_classes: int = 10,
    per_class: int = 3000,
    cells: tuple[int, int] = (5, 8),
    max_distance: int = 4,
    pool_size: int = POOL_SIZE,
) -> tuple[list[ArchGraph], list[str], dict[str, Any]]:
    """Generate the clustered NAS dataset (see the module docstring): (graphs, vocab, header)."""
    lo_cells, hi_cells = int(cells[0]), int(cells[1])
    if not 1 <= lo_cells <= hi_cells:
        raise ValueError(f"cells must be a range (lo, hi) with 1 <= lo <= hi, got {cells}")
    if max_distance < 1:
        raise ValueError("max_distance must be >= 1")
    rng = np.random.default_rng(seed)
    cen_i, cen_o = _centres(rng, pool_size, n_classes)
    samples = _samples(rng, cen_i, cen_o, n_classes, per_class, (lo_cells, hi_cells), max_distance)
    s_cells = np.array([s[3] for s in samples])
    s_inp = np.array([s[1] for s in samples]).reshape(-1, N_PAIRS)
    s_op = np.array([s[2] for s in samples]).reshape(-1, N_PAIRS)
    graphs = _graphs(samples, s_cells, s_inp, s_op, (lo_cells, hi_cells), n_classes)
    params = {
        "seed": int(seed), "n_classes": int(n_classes), "per_class": int(per_class),
        "cells": [lo_cells, hi_cells], "max_distance": int(max_distance), "pool_size": int(pool_size),
    }
    s_cls = np.array([s[0] for s in samples])
    stats = _class_stats(s_inp, s_op, s_cls, cen_i, cen_o, n_classes, max_distance)
    return graphs, list(VOCAB), _header(params, cen_i, cen_o, n_classes, stats)


#: a kept network: (class, inputs, ops, cell count, edit distance to its centre)
Sample = tuple[int, np.ndarray, np.ndarray, int, int]


def _centres(rng: np.random.Generator, pool_size: int, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Step 1: the class centres (inputs, ops), by greedy farthest-point selection over a pool of distinct random
    cells."""
    pool_i, pool_o = _random_genotypes(rng, pool_size)
    _, first = np.unique(_iso_keys(pool_i, pool_o), return_index=True)
    keep = np.sort(first)
    pool_i, pool_o = pool_i[keep], pool_o[keep]
    chosen = _select_centres(pool_i, pool_o, n_classes)
    return pool_i[chosen], pool_o[chosen]


def _samples(rng: np.random.Generator, cen_i: np.ndarray, cen_o: np.ndarray, n_classes: int, per_class: int,
             cells: tuple[int, int], max_distance: int) -> list[Sample]:
    """Step 2: `per_class` networks around each centre, in draw order (the rules (a)-(d) of the module docstring)."""
    lo_cells, hi_cells = cells
    iso_class: dict[int, int] = {}  # iso key -> class that owns it
    samples: list[Sample] = []
    batch = max(64, 2 * per_class)
    for c in range(n_classes):
        seen: set[tuple[int, int]] = set()
        kept = 0
        draws = 0
        while kept < per_class:
            draws += 1
            if draws > 1000:
                raise RuntimeError(f"class {c}: cannot find {per_class} distinct samples")
            mi, mo = _mutate(rng, cen_i[c], cen_o[c], batch, max_distance)
            ncell = rng.integers(lo_cells, hi_cells + 1, size=batch)
            dist = _distances(mi, mo, cen_i, cen_o)
            own = dist[:, c]
            other = np.delete(dist, c, axis=1).min(axis=1) if n_classes > 1 else own + 1
            ok = np.flatnonzero((own <= max_distance) & (own < other))
            keys = _iso_keys(mi[ok], mo[ok])
            for j, key in zip(ok.tolist(), keys.tolist()):
                owner = iso_class.setdefault(key, c)
                if owner != c or (key, int(ncell[j])) in seen:
                    continue
                seen.add((key, int(ncell[j])))
                samples.append((c, mi[j], mo[j], int(ncell[j]), int(own[j])))
                kept += 1
                if kept == per_class:
                    break
    return samples


def _graphs(samples: list[Sample], s_cells: np.ndarray, s_inp: np.ndarray, s_op: np.ndarray,
            cells: tuple[int, int], n_classes: int) -> list[ArchGraph]:
    """Step 3: the samples' network graphs, built per cell count in one vectorised pass, named per class."""
    lo_cells, hi_cells = cells
    graphs: list[ArchGraph | None] = [None] * len(samples)
    for n in range(lo_cells, hi_cells + 1):
        idx = np.flatnonzero(s_cells == n)
        if idx.size == 0:
            continue
        ops, edges = _build_batch(s_inp[idx], s_op[idx], n)
        for row, gi in enumerate(idx.tolist()):
            c, gi_inp, gi_op, ncell, d = samples[gi]
            graphs[gi] = ArchGraph(
                ops=ops[row],
                edges=edges[row],
                name="",
                family=f"cluster-{c}",
                coarse=f"cluster-{c}",
                source="nas",
                meta={
                    "genotype": genotype_to_meta(zip(gi_inp.tolist(), gi_op.tolist())),
                    "cells": ncell,
                    "edit_distance": d,
                },
            )
    counters = [0] * n_classes
    for g, s in zip(graphs, samples):
        g.name = f"nas-c{s[0]}-{counters[s[0]]:04d}"
        counters[s[0]] += 1
    if len({g.content_hash() for g in graphs}) != len(graphs):  # guaranteed by construction
        raise RuntimeError("duplicate graphs generated")
    return graphs


def _class_stats(s_inp: np.ndarray, s_op: np.ndarray, s_cls: np.ndarray, cen_i: np.ndarray, cen_o: np.ndarray,
                 n_classes: int, max_distance: int) -> list[dict[str, Any]]:
    """Step 4: per class, the distances of its members to their own centre and to the nearest other one."""
    all_d = _distances(s_inp, s_op, cen_i, cen_o)
    per_class_stats = []
    for c in range(n_classes):
        dc = all_d[s_cls == c]
        own = dc[:, c]
        other = np.delete(dc, c, axis=1).min(axis=1) if n_classes > 1 else own + 1
        hist = np.bincount(own, minlength=max_distance + 1)
        per_class_stats.append({
            "class": f"cluster-{c}",
            "count": int(dc.shape[0]),
            "own_mean": round(float(own.mean()), 4),
            "own_min": int(own.min()),
            "own_max": int(own.max()),
            "own_histogram": [int(x) for x in hist],
            "nearest_other_min": int(other.min()),
            "nearest_other_mean": round(float(other.mean()), 4),
            "margin_min": int((other - own).min()),
        })
    return per_class_stats


def _header(params: dict[str, Any], cen_i: np.ndarray, cen_o: np.ndarray, n_classes: int,
            per_class_stats: list[dict[str, Any]]) -> dict[str, Any]:
    """The file header: every parameter, the centres and the distance statistics."""
    cdist = _distances(cen_i, cen_o, cen_i, cen_o)
    off = cdist[~np.eye(n_classes, dtype=bool)] if n_classes > 1 else np.zeros(1, dtype=np.int64)
    return {
        "generator": "narbench.datasets.nas.generate",
        "description": "DARTS-space networks (op nodes on every edge), clustered by cell edit distance "
                       "around farthest-point centres; family == coarse (one label level)",
        "params": {
            **params,
            "rng": "numpy.random.default_rng(seed).integers",
            "mutations": "budget uniform 1..max_distance; each op change or input change with p=1/2",
            "distance": "cell GED upper bound, natural correspondence, min over each ADD's 2 input matchings",
            "dedup": "canonical genotype up to isomorphism + cell count; isomorphic cells never in 2 classes",
        },
        "ops": OPS,
        "input_codes": "0 = c_{k-2}, 1 = c_{k-1}, 2+j = ADD_j",
        "centres": [genotype_to_meta(zip(ci.tolist(), co.tolist())) for ci, co in zip(cen_i, cen_o)],
        "stats": {
            "centre_distance_min": int(off.min()),
            "centre_distance_mean": round(float(off.mean()), 4),
            "centre_distance_max": int(off.max()),
            "centre_distances": cdist.tolist(),
            "per_class": per_class_stats,
        },
    }


class NASDataset(DatasetProvider):
    """30,000 DARTS-space architectures in 10 edit-distance clusters (`generate(seed=0)`)."""

    name = "nas"
    version = "1.0"
    expected_sha256 = "984cc985b14557f7902c47351830567c9fbaec1d1116b95483bc049c285efbfe"

    def build(self) -> tuple[list[ArchGraph], list[str], dict[str, Any]]:
        return generate(seed=0)
