"""Near-duplicate graphs across families: the pairs of graphs at WL cosine >= `NEAR_DUPLICATE_WL` (the
shipped `wl` floor's features, decided exactly: `narbench.datasets.exact_cosine`), counted per family
pair, and the taxonomy's invariant (b): every such family pair is listed with a reason in
`taxonomy-near-duplicates.csv` (`unlisted_near_duplicates`).
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.datasets.exact_cosine import pairs_at_least
from narbench.datasets.taxonomy import data_path

NEAR_DUPLICATES = "taxonomy-near-duplicates.csv"
NEAR_DUPLICATE_COLUMNS = ("family_a", "family_b", "pairs", "graphs", "truncated_pairs", "merged", "group", "reason")
#: WL cosine at or above which two graphs of different families must be explained
NEAR_DUPLICATE_WL = 0.999


def wl_counts(graphs: list[ArchGraph]) -> np.ndarray:
    """The shipped `wl` floor's features (3 iterations, 2048 dims) as exact integer counts, int64 [N, 2048]."""
    from narbench.baselines.floors import WLEncoder, wl_features

    return wl_features(graphs, WLEncoder.iterations, WLEncoder.dim, dtype=np.int64)


def near_duplicate_pairs(counts: np.ndarray, threshold: float = NEAR_DUPLICATE_WL, chunk: int = 1024) -> np.ndarray:
    """All pairs (i < j) of integer count rows (`wl_counts`) with cosine >= `threshold`, int64 [P, 2];
    decided exactly (`cosine_at_least`), so the pairs and every count built on them are the same on any CPU."""
    return pairs_at_least(counts, threshold, chunk)


def family_pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def cross_family_pairs(graphs: list[ArchGraph], pairs: np.ndarray) -> Counter:
    """Graph pairs per unordered family pair, for the pairs whose graphs are in two families."""
    out: Counter = Counter()
    for i, j in pairs.tolist():
        a, b = graphs[i].family, graphs[j].family
        if a != b:
            out[family_pair(a, b)] += 1
    return out


def twin_share(graphs: list[ArchGraph], pairs: np.ndarray) -> float:
    """Share of graphs with a near-duplicate (a row of `pairs`) in another family."""
    if not graphs:
        return 0.0
    has = np.zeros(len(graphs), dtype=bool)
    for i, j in pairs.tolist():
        if graphs[i].family != graphs[j].family:
            has[i] = has[j] = True
    return float(has.mean())


def read_near_duplicates(path: Path | None = None) -> dict[tuple[str, str], str]:
    """The listed cross-family near-duplicate family pairs -> their reason."""
    p = path or data_path(NEAR_DUPLICATES)
    with open(p, newline="") as f:
        return {family_pair(r["family_a"], r["family_b"]): r["reason"] for r in csv.DictReader(f)}


def unlisted_near_duplicates(graphs: list[ArchGraph], pairs: np.ndarray,
                             listed: dict[tuple[str, str], str]) -> dict[tuple[str, str], int]:
    """Invariant (b): cross-family near-duplicate family pairs with no listed reason (empty: holds)."""
    return {fp: n for fp, n in cross_family_pairs(graphs, pairs).items() if not listed.get(fp, "").strip()}


def read_near_duplicate_rows(path: Path | None = None) -> list[dict[str, str]]:
    """The rows of `taxonomy-near-duplicates.csv` (columns `NEAR_DUPLICATE_COLUMNS`), most graph pairs first."""
    p = path or data_path(NEAR_DUPLICATES)
    with open(p, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in NEAR_DUPLICATE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{p}: missing column(s) {', '.join(missing)}; has {reader.fieldnames}")
        return list(reader)


#: (reason, family pairs, graph pairs, merged graphs)
ReasonCount = tuple[str, int, int, int]


def near_duplicate_groups(rows: list[dict[str, str]]) -> list[tuple[str, int, int, int, list[ReasonCount]]]:
    """Per reason group: (group, family pairs, graph pairs, merged graphs, [(reason, family pairs, graph pairs,
    merged graphs), ...]), most graph pairs first (reasons too)."""
    acc: dict[str, dict[str, list[int]]] = {}
    for r in rows:
        c = acc.setdefault(r["group"] or "(no reason)", {}).setdefault(r["reason"], [0, 0, 0])
        c[0] += 1
        c[1] += int(r["pairs"])
        c[2] += int(r["merged"])
    out = []
    for group, reasons in acc.items():
        listed = sorted(((why, nf, ng, nm) for why, (nf, ng, nm) in reasons.items()),
                        key=lambda t: (-t[2], -t[3], t[0]))
        out.append((group, sum(t[1] for t in listed), sum(t[2] for t in listed), sum(t[3] for t in listed), listed))
    return sorted(out, key=lambda t: (-t[2], -t[3], t[0]))
