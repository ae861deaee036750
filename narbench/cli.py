"""`narbench` command line: a thin layer over the Python API."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from narbench import registry
from narbench.profiles import OBJECTIVES, PROFILES


def _parse_param(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    for cast in (int, float):
        try:
            return key, cast(value)
        except ValueError:
            pass
    return key, {"true": True, "false": False}.get(value.lower(), value)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="narbench", description="Neural Architecture Retrieval benchmark")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="train an encoder, retrieve, score, write a result file")
    run.add_argument("--encoder", default="ours", help="registered encoder name (see `narbench encoders`)")
    run.add_argument("--splitter", default=None, help="registered splitter name (default: the encoder's)")
    run.add_argument("--dataset", default="nas", help="registered dataset name (default: nas)")
    run.add_argument("--profile", default="quick", choices=sorted(PROFILES), help="data and recipe budget")
    run.add_argument("--objective", default=None, choices=OBJECTIVES, help="graph-level loss terms (default ce+cl)")
    run.add_argument("--param", dest="params", action="append", type=_parse_param, default=[],
                     metavar="KEY=VALUE", help="a splitter parameter (repeatable)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda, cuda:N")
    run.add_argument("--out", default="runs", help="directory for the result file (default: runs)")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument("--save-embeddings", action="store_true",
                     help="also write the query embeddings (for the leaderboard's t-SNE maps)")
    run.add_argument("--save-weights", action="store_true", help="also write the trained weights (<run_id>.pt)")
    run.add_argument("--init-from", default=None, metavar="RESULT_OR_CHECKPOINT",
                     help="start from saved weights: a result .json of a --save-weights run, or its .pt")
    run.add_argument("--jobs", type=int, default=None, metavar="N",
                     help="processes for splitting graphs not in the parts cache (default: all cores)")

    build = sub.add_parser("build-real", help="extract the `real` dataset from the model zoos (needs the zoo extra)")
    build.add_argument("--out", required=True, help="build folder (per-model results; resumable)")
    build.add_argument("--jobs", type=int, default=1, help="extraction processes in parallel")
    build.add_argument("--limit", type=int, default=None, help="only this many specs, spread over the zoos")
    build.add_argument("--only", action="append", default=None, help="spec glob or substring (repeatable)")
    build.add_argument("--timeout", type=float, default=180.0, help="seconds per model before it is killed")
    build.add_argument("--mem-limit-gb", type=float, default=8.0, help="address-space limit per worker")
    build.add_argument("--retry-failed", action="store_true", help="run models that failed before again")

    sheet = sub.add_parser("datasheet", help="counts per source/family/coarse label, sizes, vocabulary, split")
    sheet.add_argument("dataset", help="registered dataset name")
    sheet.add_argument("--markdown", default=None, metavar="FILE", help="also write the datasheet as Markdown")
    sheet.add_argument("--json", default=None, metavar="FILE", help="also write it as JSON")

    from narbench import gate, leaderboard

    leaderboard.add_parser(sub)
    gate.add_parser(sub)

    sub.add_parser("datasets", help="list registered datasets")
    sub.add_parser("encoders", help="list registered encoders")
    sub.add_parser("splitters", help="list registered splitters")
    return parser


def _list(kind: str, console: Console) -> int:
    table = Table(title=f"registered {kind}s (entry-point group {registry.GROUPS[kind]})")
    table.add_column("name")
    table.add_column("provided by")
    table.add_column("description")
    from importlib.metadata import entry_points

    for ep in sorted(entry_points(group=registry.GROUPS[kind]), key=lambda e: e.name):
        dist = ep.dist.name if ep.dist else "?"
        try:
            doc = (registry.load(kind, ep.name).__doc__ or "").strip().splitlines()[0]
        except Exception as exc:  # list it anyway, saying why it cannot be used
            doc = f"[red]fails to load: {exc}[/red]"
        table.add_row(ep.name, dist, doc)
    console.print(table)
    return 0


def _run(args, console: Console) -> int:
    from narbench.runner import RunConfig, run

    cfg = RunConfig(
        encoder=args.encoder, splitter=args.splitter, dataset=args.dataset, profile=args.profile,
        seed=args.seed, device=args.device, objective=args.objective, splitter_params=dict(args.params),
        out=args.out, progress=not args.no_progress, save_embeddings=args.save_embeddings,
        save_weights=args.save_weights, init_from=args.init_from, jobs=args.jobs,
    )
    ev = run(cfg, console=console)
    res = ev.result
    table = Table(title=f"{res.encoder} + {res.splitter} on {res.dataset['name']} ({res.profile}, seed {res.seed})")
    table.add_column("metric")
    for k in (20, 50, 100):
        table.add_column(f"@{k}", justify="right")
    scores = {**res.metrics, **res.metrics_extra}
    for label, metric in (("MRR", "mrr"), ("MAP", "map"), ("NDCG", "ndcg"), ("MAP, min(k,|R|)", "map_capped")):
        table.add_row(label, *[f"{scores[f'{metric}@{k}']:.4f}" for k in (20, 50, 100)])
    console.print(table)
    console.print(f"queries {res.num_queries}, corpus {res.num_corpus}, trained on {res.num_train}; device {res.device}")
    console.print("timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in res.timings.items()))
    if ev.path:
        console.print(f"result written to [bold]{ev.path}[/bold]")
    return 0


def _datasheet(args, console: Console) -> int:
    import json
    from pathlib import Path

    from rich.markdown import Markdown

    from narbench.datasheet import datasheet
    from narbench.dataset import load_dataset
    from narbench.store import atomic_write_bytes

    sheet = datasheet(load_dataset(args.dataset))
    text = sheet.to_markdown()
    console.print(Markdown(text))
    if args.markdown:
        atomic_write_bytes(Path(args.markdown), text.encode())
    if args.json:
        atomic_write_bytes(Path(args.json), json.dumps(sheet.to_json(), indent=1, sort_keys=True).encode())
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(stderr=True)
    out = Console()
    from narbench.checkpoint import CheckpointError
    from narbench.dataset import CorruptFileError
    from narbench.runner import ConfigError

    try:
        if args.command == "run":
            return _run(args, out)
        if args.command == "check":
            from narbench import gate

            return gate.main(args)
        if args.command == "leaderboard":
            from narbench import leaderboard

            return leaderboard.main(args)
        if args.command == "build-real":
            from narbench.zoo.build import build_real

            build_real(args.out, jobs=args.jobs, limit=args.limit, only=args.only, timeout=args.timeout,
                       mem_limit_gb=args.mem_limit_gb, retry_failed=args.retry_failed)
            return 0
        if args.command == "datasheet":
            return _datasheet(args, out)
        kind = {"datasets": "dataset", "encoders": "encoder", "splitters": "splitter"}[args.command]
        return _list(kind, out)
    except registry.UnknownNameError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    except (ConfigError, CheckpointError, registry.RegistryError, CorruptFileError, FileNotFoundError,
            RuntimeError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
