"""`narbench build-real` and `narbench build-crossimpl`: the `real` dataset and its cross-implementation
queries, extracted from the model zoos (`narbench.zoo.build`, `narbench.zoo.derive`, `narbench.zoo.crossimpl`)."""

from __future__ import annotations

import argparse
import os
import sys

from narbench.cli.args import ShowDefaults, positive_int


def register(sub) -> None:
    """Add `build-real` and `build-crossimpl` to the subcommands."""
    p = sub.add_parser("build-real", help="extract the `real` dataset from the model zoos (needs the zoo extra)",
                       formatter_class=ShowDefaults)
    p.add_argument("--out", required=True, help="build folder (per-model results; resumable)")
    p.add_argument("--jobs", type=positive_int, default=1, help="extraction processes in parallel")
    p.add_argument("--limit", type=int, default=None, help="only this many specs, spread over the zoos")
    p.add_argument("--only", action="append", default=None, help="spec glob or substring (repeatable)")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per model before it is killed")
    p.add_argument("--mem-limit-gb", type=float, default=8.0, help="address-space limit per worker")
    p.add_argument("--retry-failed", action="store_true", help="run models that failed before again")
    p.add_argument("--from", dest="from_graphs", default=None, metavar="FILE",
                   help="derive the canonical dataset from a raw graph file (real-1.0.narg) instead of extracting")
    p.add_argument("--patch", default=None, metavar="FILE",
                   help="with --from: re-extracted raw graphs that replace those of the same name "
                        "(narbench/data/real-1.0-reextracted.narg)")
    p.add_argument("--reextract", action="append", default=None, metavar="OP",
                   help="with --from: first re-extract (needs the zoo extra) every graph holding this raw op "
                        "('*': every graph), into <out>/real-1.0-reextracted.narg, and derive with it as --patch "
                        "(repeatable)")
    p.add_argument("--attributes", action="store_true",
                   help="record design attributes in the extracted graphs (narbench.zoo.extract.DesignAttributes; "
                        "canonical 2.2 reads them)")
    p.add_argument("--canonical-version", default=None, metavar="V",
                   help="with --from: canonical rules and dataset version to derive (default 2.1; 2.2 needs a "
                        "patch extracted with --attributes)")
    p.set_defaults(func=run_real)

    c = sub.add_parser("build-crossimpl", help="extract the cross-implementation queries of `real` "
                       "(narbench/data/crossimpl.csv; needs the crossimpl extra)", formatter_class=ShowDefaults)
    c.add_argument("--out", required=True, help="folder for crossimpl-2.1.1.narg (crossimpl-<V>.narg under another V)")
    c.add_argument("--canonical-version", default=None, metavar="V",
                   help="canonical rules (default 2.1); 2.2 extracts with design attributes and needs --corpus")
    c.add_argument("--corpus", default=None, metavar="FILE",
                   help="the real graph file of that version, whose graphs isomorphic to a query are its twins")
    c.set_defaults(func=run_crossimpl)


def _version(command: str, given: str | None) -> str:
    """The canonical version asked for (default: the current one); an unknown one stops the command."""
    from narbench.data.canonical import DEFAULT_VERSION, VERSIONS

    version = given or DEFAULT_VERSION
    if version not in VERSIONS:
        raise SystemExit(f"narbench {command}: unknown --canonical-version {version!r}; known: {', '.join(VERSIONS)}")
    return version


def run_real(args: argparse.Namespace) -> int:
    """`narbench build-real`: extract the `real` dataset from the model zoos (resumable), or derive it."""
    if (args.patch or args.reextract) and not args.from_graphs:
        raise SystemExit("narbench build-real: --patch and --reextract go with --from FILE")
    if args.patch and args.reextract:
        raise SystemExit("narbench build-real: give --patch or --reextract, not both")
    version = _version("build-real", args.canonical_version)
    if args.canonical_version and not args.from_graphs:
        raise SystemExit("narbench build-real: --canonical-version goes with --from FILE")
    if args.attributes:
        from narbench.zoo.attributes import ATTRIBUTES_ENV

        os.environ[ATTRIBUTES_ENV] = "1"  # the extraction workers inherit it
    if args.from_graphs:
        return _derive(args, version)
    from narbench.zoo.build import build_real

    build_real(args.out, jobs=args.jobs, limit=args.limit, only=args.only, timeout=args.timeout,
               mem_limit_gb=args.mem_limit_gb, retry_failed=args.retry_failed)
    return 0


def _derive(args: argparse.Namespace, version: str) -> int:
    """`build-real --from FILE`: derive the canonical dataset (after re-extracting `--reextract` ops)."""
    import json

    from narbench.zoo.derive import derive

    patch = args.patch
    if args.reextract:
        from narbench.zoo.reextract import reextract

        summary = reextract(args.from_graphs, args.out, args.reextract, jobs=args.jobs, timeout=args.timeout,
                            mem_limit_gb=args.mem_limit_gb, retry_failed=args.retry_failed)
        print(json.dumps({"reextracted": summary}, indent=1))
        patch = summary["path"]
    summary = derive(args.from_graphs, args.out, patch=patch, jobs=args.jobs, canonical_version=version,
                     progress=lambda i, n: print(f"canonical graphs: {i:,} of {n:,}", file=sys.stderr, flush=True))
    print(json.dumps(summary, indent=1))
    return 0


def run_crossimpl(args: argparse.Namespace) -> int:
    """`narbench build-crossimpl`: extract every row of `narbench/data/crossimpl.csv` (`narbench.zoo.crossimpl`)."""
    from pathlib import Path

    from narbench.data.canonical import DEFAULT_VERSION
    from narbench.zoo.crossimpl import run_cli

    version = _version("build-crossimpl", args.canonical_version)
    if version != DEFAULT_VERSION and not args.corpus:
        raise SystemExit(f"narbench build-crossimpl: --canonical-version {version} needs --corpus "
                         f"(the real file of {version})")
    return run_cli(Path(args.out), version, Path(args.corpus) if args.corpus else None)
