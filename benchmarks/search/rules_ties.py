"""Rows whose top-1 a candidate canonical pass loses, and whether each loss is a tie (validation only)

    python -m benchmarks.search.rules_ties --candidate attention-projections --set wildval wildval2 ... wildval18

The decision rule for candidates measured after 2026-12-02 (docs/canonical-graphs.md, "Deciding the next candidate")
does not count a set's fall in top-1 when every row that loses its top-1 is one the pass leaves unchanged and, in the
candidate's index, a graph of one of its expected families is among the hits within `--tie` (0.005) of the first hit's
cosine: twin designs whose order a refitted index swaps. This script builds the candidate's index as
`benchmarks.search.rules_next --measure` does (the pass over every corpus graph, the out-of-family score refitted as
the shipped index's is), searches each set in it and in the shipped index, and prints each set's top-1 both ways, each
row that loses its top-1 (changed by the pass or not, a tie or not) and whether the set's fall counts. No test query,
no `crossimpl` query and no wild-set model is read.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np

from benchmarks.search.rules_next import CANDIDATES, _outside, apply, candidate_index
from benchmarks.timing import line, report, study_parser
from narbench.datasets.wild import VALIDATIONS

#: hits within this much cosine of the first are a tie
TIE = 0.005


def is_tie(result, expected: tuple[str, ...], tie: float = TIE) -> bool:
    """Whether a hit with one of `expected`'s families is within `tie` of the first hit's cosine in `result`
    (`engine.SearchResult`)."""
    first = result.hits[0].similarity
    return any(h.similarity >= first - tie and set(h.families) & set(expected) for h in result.hits)


def losses(shipped: dict, candidate: dict, expected: list, changed: list[bool], tie: float = TIE) -> list[dict]:
    """The fitting rows right first in `shipped` and not in `candidate` (`benchmarks.search.wild.measure`'s figures):
    each with whether the pass changed it and whether its loss is a tie."""
    out = []
    for i, want in enumerate(expected):
        if want and shipped["top1"][i] and not candidate["top1"][i]:
            r = candidate["results"][i]
            out.append({"row": i, "changed": bool(changed[i]), "tie": is_tie(r, want, tie),
                        "first": r.hits[0].family, "cosine": round(float(r.hits[0].similarity), 4)})
    return out


def counts(fall: bool, lost: list[dict]) -> bool:
    """Whether a set's fall in top-1 counts against the candidate: unless every loss is an unchanged row's tie."""
    return fall and not all(not x["changed"] and x["tie"] for x in lost)


def main(argv: list[str] | None = None) -> int:
    from narbench.data.dataset import load_dataset
    from narbench.search_engine.index_build import newest_corpus
    from narbench.search_engine.index_file import load_index
    from narbench.search_engine.outside_fit import outside_queries

    from benchmarks.search.wild import measure

    parser = study_parser(__doc__)
    parser.add_argument("--candidate", choices=sorted(CANDIDATES), required=True)
    parser.add_argument("--set", nargs="+", choices=VALIDATIONS, required=True)
    parser.add_argument("--canonical-version", default="2.11", metavar="RULES", help="each set's file under these rules")
    parser.add_argument("--tie", type=float, default=TIE, help="cosine within which hits tie (default 0.005)")
    args = parser.parse_args(argv)
    ds = newest_corpus(load_dataset(args.dataset))
    vocab, run = list(ds.vocab), CANDIDATES[args.candidate]
    index = candidate_index(ds, [apply(g, vocab, run) for g in ds.core_graphs], args.dataset)
    shipped = load_index()
    summary: dict = {"candidate": args.candidate, "shipped": shipped.sha256[:12], "tie": args.tie, "sets": {}}
    for s in args.set:
        val, expected = outside_queries(replace(ds, outside=_outside(s, args.canonical_version)))
        applied = [apply(g, vocab, run) for g in val]
        a = measure(shipped, val, expected, vocab)
        b = measure(index, [g for g, _ in applied], expected, vocab)
        fits = np.array([bool(f) for f in expected])
        before = float(a["top1"][fits].mean()) if fits.any() else float("nan")
        after = float(b["top1"][fits].mean()) if fits.any() else float("nan")
        lost = losses(a, b, expected, [n > 0 for _, n in applied], args.tie)
        for x in lost:
            x["model"] = val[x.pop("row")].name
            line("lost", set=s, **x)
        fall = bool(fits.any() and after < before)
        summary["sets"][s] = {"top1_shipped": round(before, 4), "top1_candidate": round(after, 4), "falls": fall,
                              "counts": counts(fall, lost), "lost": lost}
        line("set", set=s, top1_shipped=before, top1_candidate=after, falls=fall, counts=counts(fall, lost))
    report(summary, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
