"""The near-duplicate table `taxonomy-near-duplicates.csv`: every family pair of the shipped `real` with
graphs at WL cosine >= 0.999 (`narbench.datasets.near_duplicates`) or with source graphs its dedup merged
across families (`merged_cross_family`), each with its reason.

The reason is the first matching row of the hand-written `taxonomy-near-duplicate-reasons.csv`, or a
mechanical one when all of a pair's graph pairs are depth-truncated variants. A family pair without a
reason (`unexplained`) makes the build fail after writing. Reasons are never chosen by looking at
retrieval scores.
"""

from __future__ import annotations

import csv
import io
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.datasets import taxonomy as tx
from narbench.datasets.near_duplicates import NEAR_DUPLICATE_COLUMNS, family_pair
from narbench.zoo.taxonomy_rules import TRUNCATING, read_csv_rows

#: a pair reason: (families_a, families_b, group, reason)
PairReason = tuple[set[str], set[str], str, str]
#: the mechanical reason of a family pair whose every graph pair involves a depth-truncated variant
TRUNCATED_GROUP = "only truncated variants coincide"
TRUNCATED_REASON = ("separate designs (each its own paper); only variants truncated to 1-2 layers/blocks coincide, "
                    "where the parts that tell the designs apart are cut away")


def read_pair_reasons(path: Path | None = None) -> list[PairReason]:
    """`taxonomy-near-duplicate-reasons.csv`: (families_a, families_b, group, reason) rows, first match wins."""
    path = path or tx.data_path("taxonomy-near-duplicate-reasons.csv")
    rows = read_csv_rows(path)
    for r in rows:
        if None in r or not all(r.get(c) for c in ("families_a", "families_b", "group", "reason")):
            raise ValueError(f"{path}: a row needs families_a, families_b, group and reason, and no unquoted comma in "
                             f"its reason: {r}")
    return [(set(r["families_a"].split()), set(r["families_b"].split()), r["group"].strip(), r["reason"].strip())
            for r in rows]


def pair_reason(a: str, b: str, reasons: list[PairReason]) -> tuple[str, str]:
    """(group, reason) of the first row listing families a and b on its two sides; ("", "") if none does."""
    for fa, fb, group, why in reasons:
        if (a in fa and b in fb) or (b in fa and a in fb):
            return group, why
    return "", ""


def near_duplicate_table(graphs: list[ArchGraph], pairs: np.ndarray, reasons: list[PairReason],
                         merged: Counter | None = None) -> str:
    """family_a, family_b, pairs, graphs (distinct graphs involved), truncated_pairs (pairs where a graph is a
    depth-truncated variant), merged (source graphs dropped by the dataset's dedup as identical to a graph of the
    other family: `merged_cross_family`), group, reason: one row per family pair, most graph pairs first."""
    merged = merged or Counter()
    stats: dict[tuple[str, str], list] = defaultdict(lambda: [0, set(), 0])
    for i, j in pairs.tolist():
        gi, gj = graphs[i], graphs[j]
        if gi.family == gj.family:
            continue
        s = stats[family_pair(gi.family, gj.family)]
        s[0] += 1
        s[1].update((i, j))
        vi, vj = gi.meta.get("variant") or {}, gj.meta.get("variant") or {}
        if any(int(v.get(k, 99)) <= 2 for v in (vi, vj) for k in TRUNCATING):
            s[2] += 1
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(NEAR_DUPLICATE_COLUMNS)
    for fp in merged:
        stats[fp]  # noqa: B018 - a family pair met only at dedup gets a row too
    for (a, b), (n, members, trunc) in sorted(stats.items(), key=lambda kv: (-kv[1][0], -merged[kv[0]], kv[0])):
        group, why = pair_reason(a, b, reasons)
        if not why and n and trunc == n and not merged[(a, b)]:
            group, why = TRUNCATED_GROUP, TRUNCATED_REASON
        w.writerow([a, b, n, len(members), trunc, merged[(a, b)], group, why])
    return out.getvalue()


def unexplained(table: str) -> list[tuple[str, str, int]]:
    return [(r["family_a"], r["family_b"], int(r["pairs"])) for r in csv.DictReader(io.StringIO(table))
            if not r["reason"].strip()]


def merged_cross_family(raw: list[ArchGraph], work: list[tuple[list[str], Any]], shipped: list[ArchGraph],
                        taxonomy: tx.Taxonomy, progress: bool = False) -> Counter:
    """Graph counts per family pair of `raw` graphs whose canonical graph is identical to a `shipped` graph of
    another family: the cross-family duplicates that the shipped version's dedup merged (keeping the first
    spec's family), which no pair of shipped graphs shows. `work`: per raw graph the (raw op names, edges) the
    shipped version was derived from (`derivation_work`). Canonicalises every one (about a minute for real 1.0)."""
    from narbench.data.canonical import canonical_vocabulary
    from narbench.zoo.derive import _canonical

    versions = {w[2] for w in work if len(w) > 2}
    index = {op: i for i, op in enumerate(canonical_vocabulary(*versions))}
    family_of = {g.content_hash(): g.family for g in shipped}
    out: Counter = Counter()
    for k, (g, labelled, w) in enumerate(zip(raw, taxonomy.relabel(raw), work)):
        canon = _canonical(w)
        kept = family_of.get(canon.to_arch_graph(index, name=g.name, coarse="")
                             .content_hash())
        if kept is not None and kept != labelled.family:
            out[family_pair(kept, labelled.family)] += 1
        if progress and (k + 1) % 5000 == 0:
            print(f"  canonicalised {k + 1:,} of {len(raw):,}", file=sys.stderr)
    return out
