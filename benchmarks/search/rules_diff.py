"""Which rows of a set of outside models two canonical versions read differently, and their search under each.

A rule on raw names (canonical 2.10's `complex-rotation`) changes nothing in a pinned file extracted before it, so its
effect is measured here from the models themselves: each row built and run on its stated input (the packages on
PYTHONPATH, docs/wildval.md), its raw graph canonicalised under `--before` and `--after`, and where the two differ,
searched in the shipped index under each (as a saved graph is). One JSON line per row:

    PYTHONPATH=DIR python -m benchmarks.search.rules_diff --set wildval4 --before 2.9 --after 2.10 > F.jsonl
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
from pathlib import Path


def _searched(ops, edges, index, want) -> dict:
    from narbench.data.store import write_graphs
    from narbench.search_engine.engine import search
    from narbench.zoo.extract import RawGraph

    vocab = list(index.vocab)
    g = RawGraph(ops=ops, edges=edges, meta={}).to_arch_graph(vocab, name="q", family="?")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "q.narg"
        write_graphs(path, [g], vocab, {"name": "rules-diff"})
        r = search(str(path), 10, index=index, progress=False)
    hits = [bool(set(h.families) & set(want)) for h in r.hits]
    return {"nodes": len(ops), "flag": bool(r.no_family_fits), "top1": hits[0], "p10": sum(hits) / len(hits),
            "top": [(h.family, round(h.similarity, 3)) for h in r.hits[:3]]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", required=True, help="a set of outside models (wild, wildval, wildval2, ...)")
    parser.add_argument("--before", required=True, help="canonical version read first (e.g. 2.9)")
    parser.add_argument("--after", required=True, help="canonical version read second (e.g. 2.10)")
    parser.add_argument("--row-seconds", type=int, default=300, help="a row that takes longer is reported as failed")
    args = parser.parse_args(argv)

    import numpy as np
    import torch

    from narbench.data.canonical import canonicalize
    from narbench.search_engine.index_file import load_index
    from narbench.zoo.extract import extract_graph
    from narbench.zoo.wild import build_model, make_inputs, no_network, read_table

    index = load_index()

    def too_long(*_):
        raise TimeoutError(f"the row took over {args.row_seconds} s")

    signal.signal(signal.SIGALRM, too_long)
    for row in read_table(name=args.set):
        out = {"set": args.set, "id": row.identity, "want": list(row.families)}
        signal.alarm(args.row_seconds)
        try:
            torch.manual_seed(0)
            model = build_model(row)
            a, k = make_inputs(row.inputs)
            with no_network():
                raw = extract_graph(model, a, k, attributes=True, functions=True)
            b, c = (canonicalize(raw.ops, raw.edges, v) for v in (args.before, args.after))
        except Exception as exc:  # noqa: BLE001 - a package's model may raise anything; the row is reported
            print(json.dumps({**out, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}), flush=True)
            continue
        finally:
            signal.alarm(0)
        out["differs"] = not (b.ops == c.ops and np.array_equal(b.edges, c.edges))
        if out["differs"]:
            out[args.before] = _searched(b.ops, b.edges, index, row.families)
            out[args.after] = _searched(c.ops, c.edges, index, row.families)
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
