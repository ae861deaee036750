"""Outside models searched as a new user searches them: the model itself, no inputs given (narbench guesses them).

    PYTHONPATH=DIR python -m benchmarks.search.inputs --set wildval4 --out FILE.jsonl   # DIR: the set's packages
    python -m benchmarks.search.inputs --summary FILE.jsonl [FILE.jsonl ...]            # the table again

The wild benchmark (`benchmarks.search.wild`) searches each row's pinned graph, extracted on the inputs the row
states. A new user has no such row: they hand `narbench search` (or `narbench.search`) their model and let it
choose the input. This script does that for every row of an outside set (`narbench/data/<set>-*.csv`): the row's
model built as the set builds it (`narbench.zoo.wild.build_model`, random weights, offline), searched as an
instance with no inputs (`narbench.search_engine.engine.search`, the shipped index, family-first order), in a child
process under the command line's default limits (120 s, 4 GiB more memory). Per row:
whether it runs at all, the input narbench chose, top-1 family, family P@10 and the out-of-family flag; and the
same figures of the row's pinned graph, so that the table says what choosing the input costs. A row whose search
fails counts as a miss (fitting rows) and as not flagged (`none` rows): a new user gets no answer.

Needs the set's packages (`pip install --no-deps --no-build-isolation --ignore-requires-python --target DIR -r
narbench/data/<set>-requirements.txt`, then PYTHONPATH=DIR). Results go to `--out` one JSON line per row as they
come (a rerun skips the rows already there). The validation sets (`wildval` 1-4) may be read row by row; the wild
set (the test set) is reported, not chosen on.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from narbench.datasets.wild import VALIDATIONS

SETS = ("wild", *VALIDATIONS)
#: the command line's defaults (`narbench search --timeout`, `--max-memory`): the model runs in a child under them
TIMEOUT, MAX_MEMORY = 120.0, 4 << 30


def pinned(setname: str, index) -> dict[str, dict]:
    """The wild benchmark's figures of each row's pinned graph (`benchmarks.search.wild.measure`)."""
    from benchmarks.search.wild import measure
    from narbench.datasets.wild import read_newest

    wild = read_newest(setname, index.canonical_version, index.vocab)
    m = measure(index, wild.graphs, wild.families, wild.vocab)
    return {g.name: {"top1": bool(m["top1"][i]), "p10": float(m["p10"][i]), "flag": bool(m["flagged"][i]),
                     "cos": round(float(m["cosine"][i]), 4)} for i, g in enumerate(wild.graphs)}


def search_row(row, index) -> dict:
    """One row's model searched with no inputs given: what ran and what came back (or the error line)."""
    import torch

    from narbench.search_engine.engine import search
    from narbench.zoo.wild import build_model, no_network

    t0 = time.perf_counter()
    try:
        torch.manual_seed(0)
        model = build_model(row)
        with no_network():
            r = search(model, 10, index=index, isolate=True, timeout=TIMEOUT, max_memory=MAX_MEMORY, progress=False)
    except Exception as exc:  # noqa: BLE001 - a row's failure is its figure
        return {"ok": False, "error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}",
                "seconds": round(time.perf_counter() - t0, 1)}
    hit = [bool(set(h.families) & set(row.families)) for h in r.hits]
    return {"ok": True, "input": r.info.get("input"), "top1": hit[0], "p10": float(np.mean(hit)),
            "flag": bool(r.no_family_fits), "first": r.hits[0].name, "cos": round(float(r.hits[0].similarity), 4),
            "seconds": round(time.perf_counter() - t0, 1)}


def run(setname: str, out: Path) -> None:
    from narbench.search_engine.index_file import load_index
    from narbench.zoo.wild import read_table

    index = load_index(None, None)
    done = {json.loads(line)["id"] for line in out.read_text().splitlines() if line} if out.exists() else set()
    reference = pinned(setname, index)
    for row in read_table(name=setname):
        if row.identity in done:
            continue
        rec = {"id": row.identity, "set": setname, "want": list(row.families), "stated": row.input,
               "index": index.sha256[:12], "pinned": reference.get(row.identity), "auto": search_row(row, index)}
        with out.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        a = rec["auto"]
        print(f"{row.identity}: " + (f"{a['input']}; top-1 {a['top1']}; flagged {a['flag']}" if a["ok"]
                                     else a["error"][:160]), flush=True)


def summary(records: list[dict]) -> str:
    """Per set: rows, rows that run with no inputs, and top-1 / P@10 / flags with guessed inputs vs pinned graphs."""
    lines = ["| set | rows | run without inputs | top-1 (fit) guessed / pinned | P@10 guessed / pinned "
             "| none flagged guessed / pinned | fit flagged guessed / pinned |", "|---|---:|---:|---|---|---|---|"]
    for name in [s for s in SETS if any(r["set"] == s for r in records)] + ["all"]:
        rs = [r for r in records if name in ("all", r["set"])]
        fit = [r for r in rs if r["want"]]
        none = [r for r in rs if not r["want"]]

        def mean(rows, key, side):
            vals = [bool(r[side].get(key)) if key != "p10" else float(r[side].get("p10", 0.0)) for r in rows
                    if side == "auto" or r["pinned"]]
            return f"{np.mean(vals):.3f}" if vals else "-"

        def count(rows, side):
            return f"{sum(bool(r[side].get('flag')) for r in rows if r[side])}/{len(rows)}"

        ran = sum(r["auto"]["ok"] for r in rs)
        lines.append(f"| {name} | {len(rs)} | {ran} ({ran / len(rs):.0%}) | {mean(fit, 'top1', 'auto')} / "
                     f"{mean(fit, 'top1', 'pinned')} | {mean(fit, 'p10', 'auto')} / {mean(fit, 'p10', 'pinned')} | "
                     f"{count(none, 'auto')} / {count(none, 'pinned')} | {count(fit, 'auto')} / {count(fit, 'pinned')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", choices=SETS, help="the outside set whose rows are searched")
    parser.add_argument("--out", type=Path, help="JSON lines, one per row (appended; rows already there skipped)")
    parser.add_argument("--summary", type=Path, nargs="+", help="print the table of these result files only")
    args = parser.parse_args(argv)
    if args.summary:
        records = [json.loads(line) for f in args.summary for line in f.read_text().splitlines() if line]
        print(summary(records))
        return 0
    if not (args.set and args.out):
        parser.error("give --set and --out (or --summary FILES)")
    run(args.set, args.out)
    print(summary([json.loads(line) for line in args.out.read_text().splitlines() if line]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
