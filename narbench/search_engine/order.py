"""The order of search's hits: by a family vote (default), family first, or by cosine alone (issue 59).

By cosine, the families of the first ten hits interleave: a model's own family, its neighbours', its family again.
The other two orders take the first `POOL` hits by cosine and group them by family.

Family first orders them by the best hit of their families, then by cosine: every graph of the nearest graph's
families first, then those of the next family met, and so on; the first hit never changes. Where a graph has
several families (real 2.3 keeps every family of a shared graph), it goes with whichever of them comes first, so a
first hit of many families (a LLaMA-style decoder that thirteen families share) pulls every graph of any of them
ahead, those that share none with the query too.

By vote (`family_vote`) weighs the families instead: the first `VOTERS` hits by cosine vote, the hit at rank r
with weight r^-`DECAY` shared evenly among its families, so that a family's votes say how likely the query belongs
to it as its nearest graphs see it; each of the `POOL` hits then scores the summed votes of its families (how likely
it shares one with the query, which is what family precision counts) and they are ordered by that score, then by
cosine. The first hit may change: a graph at cosine 0.985 of the family the next hits agree on goes before an exact
twin of another family.

Chosen on validation. Family first (2026-11-30, `python -m benchmarks.search.family_first`,
benchmarks/results/family-first-2026-11-30): family precision@10 on `wildval` 0.715 -> 0.786, on the zoo's
`standard` side 0.878 -> 0.905 per family (MAP@20 0.947 -> 0.985), on `unseen` 0.756 -> 0.757; family@1 the same by
construction. The vote (2026-12-01, benchmarks/results/order-vote-2026-12-01; its weights chosen on `wildval` 1-13
re-extracted under canonical 2.11, its adoption by a rule written before the zoo's figures): `standard` family@1
0.979 -> 0.988 and P@10 0.905 -> 0.909 per family, `unseen` the same (0.924, 0.757), `wildval` 1-13's pinned graphs
pooled top-1 0.756 -> 0.774 and P@10 0.710 -> 0.728, no set lower.

Before the vote, the hits are ordered by cosine + `KINDS` x the overlap of query's and hit's op kinds
(`kind_overlap`, `by_kinds`): the embedding ignores how a design is spelled (`spellings`), so of graphs equally near
the one using the query's own ops goes first and leads the vote (a hand-written GPT-2 with GELU before OPT's ReLU
twin). Chosen on `wildval` 1-33 (top-1 412 -> 424 of 544, P@10 0.698 -> 0.717) within 0.005 of the vote on the zoo's
sides; adopted at 0.3 by its carry rule on `wildval34` (2026-12-04, benchmarks/results/order-kinds-2026-12-04).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

ORDERS = ("vote", "family", "cosine")
DEFAULT_ORDER = "vote"
#: how many hits by cosine the family-first and vote orders reorder
POOL = 100
#: how many hits by cosine vote (`family_vote`), and how fast a vote's weight falls with rank (r^-DECAY)
VOTERS = 10
DECAY = 2.0
#: the weight of the op-kind overlap (`kind_overlap`) added to a hit's cosine before the vote groups the `POOL` hits
#: (`by_kinds`; family first and the cosine order never read it: `weighs_kinds`); 0 leaves the cosine order as it
#: is. 0.3 since session 86: chosen on the validation sets `wildval` 1-33 and the zoo's validation sides, adopted by
#: its carry rule on `wildval34` (docs/search.md "Op kinds in the order")
KINDS = 0.3

T = TypeVar("T")


def check_order(order: str) -> str:
    """`order` if it is one of `ORDERS`; ValueError naming them if not."""
    if order not in ORDERS:
        raise ValueError(f"unknown hit order {order!r}; the orders are {', '.join(ORDERS)}")
    return order


def depth(k: int, order: str) -> int:
    """How many hits by cosine a search must rank to give `k` hits in `order` (family first and vote reorder `POOL`)."""
    return k if check_order(order) == "cosine" else max(k, POOL)


def weighs_kinds(order: str, kinds: float | None = None) -> bool:
    """Whether `order` reads the op-kind overlaps at weight `kinds` (default `KINDS`, read now: a study may set it):
    the vote does at any weight but 0; family first and the cosine order never. Callers compute the overlaps only
    then."""
    return check_order(order) == "vote" and bool(KINDS if kinds is None else kinds)


def kind_overlap(query: Iterable[Hashable], hit: Iterable[Hashable]) -> float:
    """The Jaccard overlap of two sets of op kinds (names; any iterable, a dict's keys): shared / either; 1.0 when
    both are empty. The embedding is built to ignore how a design is spelled (`spellings`), so two graphs a query
    is equally near by cosine can differ in the op kinds they use; this says which uses the query's."""
    a, b = set(query), set(hit)
    return len(a & b) / len(a | b) if a | b else 1.0


def by_kinds(items: Sequence[T], cosines: Sequence[float], overlaps: Sequence[float], weight: float) -> list[T]:
    """`items` (best first by cosine) ordered by cosine + `weight` x op-kind overlap, then by position; as they are
    when `weight` is 0."""
    if not weight:
        return list(items)
    score = [c + weight * o for c, o in zip(cosines, overlaps, strict=True)]
    return [items[p] for p in sorted(range(len(items)), key=lambda p: (-score[p], p))]


def family_first(items: Sequence[T], families_of: Callable[[T], Sequence[Hashable]]) -> list[T]:
    """`items` (best first) ordered by the first position any of an item's families reaches, then by position."""
    first: dict[Hashable, int] = {}
    for pos, item in enumerate(items):
        for f in families_of(item):
            first.setdefault(f, pos)
    key = [min((first[f] for f in families_of(item)), default=pos) for pos, item in enumerate(items)]
    return [items[p] for p in sorted(range(len(items)), key=lambda p: (key[p], p))]


def family_vote(items: Sequence[T], families_of: Callable[[T], Sequence[Hashable]], voters: int = VOTERS,
                decay: float = DECAY) -> list[T]:
    """`items` (best first) ordered by the summed vote shares of their families (the first `voters` items vote, the
    one at position p with weight (p + 1)^-`decay` split evenly among its families), then by position. Sums are
    exact (`math.fsum`), so the order does not depend on the order families are listed in."""
    share: dict[Hashable, list[float]] = {}
    for pos, item in enumerate(items[:voters]):
        own = set(families_of(item))
        for f in own:
            share.setdefault(f, []).append((pos + 1) ** -decay / len(own))
    votes = {f: math.fsum(w) for f, w in share.items()}
    score = [math.fsum(votes.get(f, 0.0) for f in set(families_of(item))) for item in items]
    return [items[p] for p in sorted(range(len(items)), key=lambda p: (-score[p], p))]


def reorder(items: Sequence[T], families_of: Callable[[T], Sequence[Hashable]], order: str,
            cosines: Sequence[float] | None = None, overlaps: Sequence[float] | None = None,
            kinds: float | None = None) -> list[T]:
    """`items` (best first by cosine) in `order`: the one place every order is applied (search, the benchmarks).
    Given each item's cosine and op-kind overlap with the query, the vote first orders them by `by_kinds` (weight
    `kinds`, default `KINDS`: what was chosen and carried); family first (its first hit is the cosine order's) and
    the cosine order never."""
    order = check_order(order)
    if weighs_kinds(order, kinds) and overlaps is not None:
        items = by_kinds(items, cosines, overlaps, KINDS if kinds is None else kinds)
    if order == "family":
        return family_first(items, families_of)
    if order == "vote":
        return family_vote(items, families_of)
    return list(items)


def order_hits(hits: list, order: str, k: int | None = None, overlaps: Sequence[float] | None = None,
               kinds: float | None = None) -> list:
    """The first `k` (all: None) of search's hits (`engine.Hit`, by cosine) in `order`, ranks numbered from 1;
    `overlaps`: each hit's op-kind overlap with the query (`kind_overlap`), read when `kinds` (default `KINDS`)
    is not 0."""
    if check_order(order) == "cosine":
        return hits[:k]
    ordered = reorder(hits, lambda h: h.families, order, [h.similarity for h in hits], overlaps, kinds)
    return [dataclasses.replace(h, rank=i + 1) for i, h in enumerate(ordered[:k])]
