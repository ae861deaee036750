"""Which rows of a set of outside models two canonical versions read differently, and their search under each.

A rule on raw names (canonical 2.10's `complex-rotation`) changes nothing in a pinned file extracted before it, so its
effect is measured here from the models themselves: each row's raw graph extracted as its set's file is built
(`narbench.zoo.crossimpl.extract_raw` with `wild_graphs.make`: its stated input, meta first; the packages on
PYTHONPATH, docs/wildval.md), canonicalised under `--before` and `--after`, and where the two differ, searched in the
shipped index under each (as a saved graph is). One JSON line per row:

    PYTHONPATH=DIR python -m benchmarks.search.rules_diff --set wildval4 --before 2.9 --after 2.10 > F.jsonl
"""

from __future__ import annotations

import argparse
import json
import signal
import sys


def _searched(index, graphs, want) -> list[dict]:
    """Each graph searched as `narbench search FILE` searches a saved graph (`wild.measure`), in brief."""
    from benchmarks.search.wild import measure

    m = measure(index, graphs, [want] * len(graphs), list(index.vocab))
    return [{"nodes": g.num_nodes, "flag": bool(m["flagged"][i]), "top1": bool(m["top1"][i]), "p10": float(m["p10"][i]),
             "top": [(h.family, round(h.similarity, 3)) for h in m["results"][i].hits[:3]]}
            for i, g in enumerate(graphs)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", required=True, help="a set of outside models (wild, wildval, wildval2, ...)")
    parser.add_argument("--before", required=True, help="canonical version read first (e.g. 2.9)")
    parser.add_argument("--after", required=True, help="canonical version read second (e.g. 2.10)")
    parser.add_argument("--row-seconds", type=int, default=300, help="a row that takes longer is reported as failed")
    args = parser.parse_args(argv)

    import numpy as np

    from narbench.data.canonical import canonicalize
    from narbench.search_engine.index_file import load_index
    from narbench.zoo.extract import RawGraph
    from narbench.zoo.crossimpl import extract_raw
    from narbench.zoo.wild import no_network, read_table
    from narbench.zoo.wild_graphs import make

    index = load_index()
    vocab = list(index.vocab)

    def too_long(*_):
        raise TimeoutError(f"the row took over {args.row_seconds} s")

    signal.signal(signal.SIGALRM, too_long)
    for row in read_table(name=args.set):
        out = {"set": args.set, "id": row.identity, "want": list(row.families)}
        signal.alarm(args.row_seconds)
        try:  # as the set's file is built (`narbench.zoo.wild_graphs`): meta first, custom functions renamed
            with no_network():
                raw, _, _ = extract_raw(row, args.after, make, read_masks=True)
            b, c = (canonicalize(raw.ops, raw.edges, v) for v in (args.before, args.after))
        except Exception as exc:  # noqa: BLE001 - a package's model may raise anything; the row is reported
            print(json.dumps({**out, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}), flush=True)
            continue
        finally:
            signal.alarm(0)
        out["differs"] = not (b.ops == c.ops and np.array_equal(b.edges, c.edges))
        if out["differs"]:
            graphs = [RawGraph(ops=g.ops, edges=g.edges, meta={}).to_arch_graph(vocab, name=row.identity, family="?")
                      for g in (b, c)]
            out[args.before], out[args.after] = _searched(index, graphs, row.families)
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
