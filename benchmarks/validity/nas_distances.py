"""Graph-level edit distances of the `nas` classes, beside the genotype figures of the datasheet.

The `nas` generator clusters cells by the *genotype* edit distance
(`narbench.datasets.nas.edit_distance`): the cost of an edit path between the two cell graphs
under the natural node correspondence (inputs to inputs, ADD_i to ADD_i), so an upper bound of
their graph edit distance (GED). The true GED of the cell graphs (15 nodes: 2 inputs, 8 op nodes,
4 ADDs, a concat; unit costs) may also map ADD_i to ADD_j and swap the two inputs. Exact GED
with networkx takes tens of seconds per pair at these sizes, so this script brackets it for every
network and every centre:

- `graph_ub`: the cheapest edit path over all 4! x 2 = 48 correspondences of ADDs and inputs
  (op relabel 1, moved input edge 2, per ADD the cheaper of its two edge matchings); an upper
  bound of the GED, never above the genotype distance;
- `graph_lb`: 8 minus the size of the common multiset of op labels (every op node whose label has
  no partner must be relabelled or deleted); a lower bound of the GED.

Prints one `name key=value ...` line per figure (all 30,000 networks, about a minute on one core).

    python -m benchmarks.validity.nas_distances
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from benchmarks.timing import line
from narbench.data.dataset import load_dataset
from narbench.datasets.nas import N_ADD, N_OPS, genotype_from_meta


def _arrays(genotypes) -> tuple[np.ndarray, np.ndarray]:
    g = np.array(genotypes, dtype=np.int64)  # [N, 8, 2]
    return g[:, :, 0], g[:, :, 1]


def correspondences() -> list[tuple[np.ndarray, np.ndarray]]:
    """(input-code map, ADD order): every relabelling of the 4 ADDs and the 2 cell inputs."""
    out = []
    for perm in itertools.permutations(range(N_ADD)):
        for swap in (False, True):
            code = np.array([1, 0] if swap else [0, 1], dtype=np.int64)
            code = np.concatenate([code, 2 + np.array(perm, dtype=np.int64)])
            out.append((code, np.array(perm, dtype=np.int64)))
    return out


def upper_bound(ai, ao, bi, bo) -> np.ndarray:
    """[N, M] cheapest edit-path cost over all ADD / input correspondences (an upper bound of GED)."""
    best = None
    for code, perm in correspondences():
        # member's ADD_i plays the centre's ADD_perm[i]; its input codes are renamed by `code`
        mi, mo = code[ai], ao
        order = np.argsort(perm)  # centre ADD j is played by member ADD order[j]
        cols = np.stack([2 * order, 2 * order + 1], axis=1).reshape(-1)
        mi, mo = mi[:, cols], mo[:, cols]
        total = 0
        for a in range(N_ADD):
            p, q = 2 * a, 2 * a + 1
            c = lambda x, y: 2 * (mi[:, None, x] != bi[None, :, y]) + (mo[:, None, x] != bo[None, :, y])
            total = total + np.minimum(c(p, p) + c(q, q), c(p, q) + c(q, p))
        best = total if best is None else np.minimum(best, total)
    return best


def lower_bound(ao, bo) -> np.ndarray:
    """[N, M] 8 minus the common multiset of op labels (a lower bound of GED)."""
    ha = np.stack([(ao == o).sum(1) for o in range(N_OPS)], axis=1)
    hb = np.stack([(bo == o).sum(1) for o in range(N_OPS)], axis=1)
    return ao.shape[1] - np.minimum(ha[:, None, :], hb[None, :, :]).sum(-1)


def main() -> None:
    t0 = time.perf_counter()
    ds = load_dataset("nas")
    centres = [genotype_from_meta(c) for c in ds.meta["centres"]]
    ci, co = _arrays(centres)
    cls = np.array([int(g.family.split("-")[1]) for g in ds.graphs])
    mi, mo = _arrays([genotype_from_meta(g.meta["genotype"]) for g in ds.graphs])
    from narbench.datasets.nas import _distances

    geno = _distances(mi, mo, ci, co)
    ub, lb = upper_bound(mi, mo, ci, co), lower_bound(mo, co)
    rows = np.arange(len(cls))
    mask = np.ones_like(geno, dtype=bool)
    mask[rows, cls] = False
    for name, own_d, other_d in (("genotype", geno, geno), ("graph-ub", ub, ub), ("graph-bracket", ub, lb)):
        own = own_d[rows, cls]
        other = np.where(mask, other_d, np.iinfo(np.int64).max).min(axis=1)
        line(f"nas-{name}", networks=len(cls), own_mean=f"{own.mean():.2f}", own_max=own.max(),
             nearest_other_min=other.min(), nearest_other_mean=f"{other.mean():.2f}",
             share_nearest_other_le7=f"{np.mean(other <= 7):.3f}", margin_min=(other - own).min(),
             own_strictly_nearest=f"{np.mean(other > own):.4f}")
    cub = upper_bound(ci, co, ci, co)[~np.eye(len(centres), dtype=bool)]
    clb = lower_bound(co, co)[~np.eye(len(centres), dtype=bool)]
    line("nas-centres", genotype_min=_distances(ci, co, ci, co)[~np.eye(len(centres), dtype=bool)].min(),
         graph_ub_min=cub.min(), graph_ub_mean=f"{cub.mean():.2f}", graph_lb_min=clb.min())
    line("nas-distances", seconds=f"{time.perf_counter() - t0:.1f}")


if __name__ == "__main__":
    main()
