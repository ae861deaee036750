"""Outside models extracted as the command line builds them: from code, no inputs given, one new model per row.

    PYTHONPATH=DIR python -m benchmarks.search.build_path --set wildval14 --out FILE.jsonl [--match keras]
    python -m benchmarks.search.build_path --compare BEFORE.jsonl AFTER.jsonl

`benchmarks.search.inputs` hands search an instance (`narbench.search(model)`); `narbench search FILE.py:CLASS`
instead imports the code and builds the model itself, which is what lets a change to the guessed inputs start from a
model no call has touched (`narbench.search_engine._target_run.built_at_first_call`). This script extracts each row of
an outside set (`narbench/data/<set>-*.csv`) that way: the row's model built by `narbench.zoo.wild.build_model` inside
the build callable `narbench.search_engine._target_run.extract` calls, in a child process per row (400 s), and writes
per row the input narbench chose, the device and the canonical graph's signature, or the error line. Run it at two
commits (PYTHONPATH=CHECKOUT) and `--compare` the files: the rows whose input, graph or failure changed. `--match`
keeps the rows whose builder, arguments or provenance mention a text (e.g. `keras`). No search, no index: a
validation set's rows may be read; the wild set is reported, not chosen on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

#: seconds one row may take (import, build, every guess on meta and the CPU)
TIMEOUT = 400

_CHILD = r"""
import json, os, sys
os.environ.setdefault("KERAS_BACKEND", "torch")
import torch
from narbench.search_engine._target_run import extract
from narbench.zoo.wild import build_model, no_network, read_table
row = next(r for r in read_table(name=sys.argv[1]) if r.identity == sys.argv[2])
torch.manual_seed(0)
rec = {"id": row.identity}
try:
    with no_network():
        raw, info = extract(row.identity, lambda: build_model(row), None)
    rec.update(ok=True, input=info["input"], device=info["device"], nodes=raw.num_nodes,
               canonical=raw.canonical().signature()[:16])
except Exception as exc:  # noqa: BLE001 - a row's failure is its record
    rec.update(ok=False, error=f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
print("RECORD" + json.dumps(rec))
"""


def mentions(row, text: str) -> bool:
    """Whether the row's builder, arguments, package or provenance mention `text` (any case)."""
    return text.lower() in json.dumps([row.package, row.builder, row.kwargs, row.provenance]).lower()


def extract_row(setname: str, identity: str) -> dict:
    """One row extracted through the build path in a child process: its record (ok, input, device, nodes, canonical
    signature) or the error."""
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, setname, identity], capture_output=True, text=True,
                              timeout=TIMEOUT, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        return {"id": identity, "ok": False, "error": f"timed out after {TIMEOUT} s"}
    line = next((x[len("RECORD"):] for x in done.stdout.splitlines() if x.startswith("RECORD")), None)
    if line is None:
        return {"id": identity, "ok": False, "error": "child: " + " ".join(done.stderr.split())[-300:]}
    return json.loads(line)


def run(setname: str, out: Path, match: str | None = None) -> None:
    from narbench.zoo.wild import read_table

    done = {json.loads(line)["id"] for line in out.read_text().splitlines() if line} if out.exists() else set()
    for row in read_table(name=setname):
        if row.identity in done or (match and not mentions(row, match)):
            continue
        rec = {**extract_row(setname, row.identity), "set": setname}
        with out.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(f"{row.identity}: " + (rec["input"] if rec["ok"] else rec["error"][:160]), flush=True)


def compare(before: list[dict], after: list[dict]) -> str:
    """Lines for the rows of both files whose outcome differs (ok, input, canonical graph), then a count."""
    old = {r["id"]: r for r in before}
    lines, same = [], 0

    def outcome(r):
        return (r["ok"], r.get("input"), r.get("canonical"))

    def said(r):
        return f"{r['input']} ({r['nodes']} nodes)" if r["ok"] else "fails: " + r["error"][:100]

    for r in after:
        if r["id"] not in old:
            continue
        if outcome(old[r["id"]]) == outcome(r):
            same += 1
        else:
            lines.append(f"{r['id']}: {said(old[r['id']])} -> {said(r)}")
    return "\n".join([*lines, f"{len(lines)} rows changed, {same} the same"])


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def main(argv: list[str] | None = None) -> int:
    from narbench.datasets.wild import SETS

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", choices=list(SETS), help="the outside set whose rows are extracted")
    parser.add_argument("--out", type=Path, help="JSON lines, one per row (appended; rows already there skipped)")
    parser.add_argument("--match", help="only the rows whose builder, arguments or provenance mention this text")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"),
                        help="print the rows whose outcome differs between two result files")
    args = parser.parse_args(argv)
    if args.compare:
        print(compare(*map(_read, args.compare)))
        return 0
    if not (args.set and args.out):
        parser.error("give --set and --out (or --compare BEFORE AFTER)")
    run(args.set, args.out, args.match)
    return 0


if __name__ == "__main__":
    sys.exit(main())
