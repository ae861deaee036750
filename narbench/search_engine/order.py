"""The order of search's hits: family first (default) or by cosine alone (issue 59).

By cosine, the families of the first ten hits interleave: a model's own family, its neighbours', its family again.
Family first takes the first `POOL` hits by cosine and orders them by the best hit of their families, then by
cosine: every graph of the nearest graph's families first, then those of the next family met, and so on. The first
hit never changes (a family's best hit is its first). Where a graph has several families (real 2.3 keeps every family
of a shared graph), it goes with whichever of them comes first.

Chosen on validation (`python -m benchmarks.search.family_first`, benchmarks/results/family-first-2026-11-30):
family precision@10 on `wildval` 0.715 -> 0.786, on the zoo's `standard` side 0.878 -> 0.905 per family (MAP@20
0.947 -> 0.985), on `unseen` 0.756 -> 0.757 (MAP@20 0.934 -> 0.942); family@1 the same by construction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

ORDERS = ("family", "cosine")
DEFAULT_ORDER = "family"
#: how many hits by cosine the family-first order reorders
POOL = 100

T = TypeVar("T")


def check_order(order: str) -> str:
    """`order` if it is one of `ORDERS`; ValueError naming them if not."""
    if order not in ORDERS:
        raise ValueError(f"unknown hit order {order!r}; the orders are {', '.join(ORDERS)}")
    return order


def depth(k: int, order: str) -> int:
    """How many hits by cosine a search must rank to give `k` hits in `order` (family first reorders `POOL`)."""
    return max(k, POOL) if check_order(order) == "family" else k


def family_first(items: Sequence[T], families_of: Callable[[T], Sequence[Hashable]]) -> list[T]:
    """`items` (best first) ordered by the first position any of an item's families reaches, then by position."""
    first: dict[Hashable, int] = {}
    for pos, item in enumerate(items):
        for f in families_of(item):
            first.setdefault(f, pos)
    key = [min((first[f] for f in families_of(item)), default=pos) for pos, item in enumerate(items)]
    return [items[p] for p in sorted(range(len(items)), key=lambda p: (key[p], p))]


def order_hits(hits: list, order: str, k: int | None = None) -> list:
    """The first `k` (all: None) of search's hits (`engine.Hit`, by cosine) in `order`, ranks numbered from 1."""
    if check_order(order) == "cosine":
        return hits[:k]
    return [dataclasses.replace(h, rank=i + 1) for i, h in enumerate(family_first(hits, lambda h: h.families)[:k])]
