"""`narbench` command line: a thin layer over the Python API."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from narbench import registry
from narbench.profiles import OBJECTIVES, PROFILES
from narbench.protocol import DEFAULT_PROTOCOL, PROTOCOLS


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
    run.add_argument("--split", default="standard",
                     help="a split of the dataset: standard (default) or, on real, unseen (whole zoo models held out)")
    run.add_argument("--protocol", default=DEFAULT_PROTOCOL, choices=sorted(PROTOCOLS),
                     help="which labels trainable encoders get: family (default; the same for every encoder) "
                          "or paper (the paper's setting, for reproduction rows)")
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
    add_search_parser(sub)
    add_index_parser(sub)

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
        encoder=args.encoder, splitter=args.splitter, dataset=args.dataset, split=args.split,
        protocol=args.protocol, profile=args.profile,
        seed=args.seed, device=args.device, objective=args.objective, splitter_params=dict(args.params),
        out=args.out, progress=not args.no_progress, save_embeddings=args.save_embeddings,
        save_weights=args.save_weights, init_from=args.init_from,
    )
    ev = run(cfg, console=console)
    res = ev.result
    table = Table(title=f"{res.encoder} + {res.splitter} on {res.dataset['name']} · {res.split} "
                        f"({res.profile}, protocol {res.protocol}, seed {res.seed})")
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


# ----------------------------------------------------------------------------- search, index


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(x) for x in text.replace("x", ",").split(",") if x.strip())
    except ValueError:
        shape = ()
    if not shape or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers like 1,3,224,224, got {text!r}")
    return shape


def _json_object(text: str) -> dict:
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"width\": 64}}', got {text!r}")
    return value


def add_search_parser(sub) -> None:
    p = sub.add_parser("search", help="the real architectures most similar to a model, graph or graph name")
    p.add_argument("target", metavar="TARGET",
                   help="FILE.py:CLASS, MODULE:CLASS, timm:NAME, torchvision:NAME, transformers:TYPE[/HEAD], "
                        "a graph file written by narbench, or the name of a graph in the index")
    p.add_argument("-k", type=int, default=10, help="number of hits (default 10)")
    p.add_argument("--encoder", default=None, help="search the index built with this encoder (default: the shipped one)")
    p.add_argument("--index", default=None, metavar="FILE", help="search this index file")
    p.add_argument("--backend", default="exact", choices=["exact", "faiss"],
                   help="exact cosine search (default) or FAISS (pip install 'narbench[faiss]')")
    p.add_argument("--kwargs", type=_json_object, default=None, metavar="JSON",
                   help="constructor arguments of CLASS, as a JSON object")
    p.add_argument("--input-shape", type=_shape, default=None, metavar="N,C,H,W",
                   help="shape of the example input (default: chosen as the real dataset's build does)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=search_command)


def search_command(args) -> int:
    """`narbench search`: one-line errors (exit 2), a table or JSON on stdout."""
    import contextlib
    import json
    import warnings

    from narbench.backends import BackendError
    from narbench.engine import search
    from narbench.index import IndexFileError
    from narbench.target import TargetError

    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):  # user code's prints
            warnings.simplefilter("ignore")
            result = search(args.target, args.k, encoder=args.encoder, index=args.index, backend=args.backend,
                            input_shape=args.input_shape, kwargs=args.kwargs)
    except (TargetError, IndexFileError, BackendError) as exc:
        sys.stderr.write(f"narbench search: error: {' '.join(str(exc).split())}\n")
        return 2
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
        return 0
    print_result(result, Console() if sys.stdout.isatty() else Console(width=150))  # piped: no folded names
    return 0


def print_result(result, console: Console) -> None:
    """The hits as a table, then the query, why the top hit is close, and duplicates."""
    info = result.info
    how = f" · {info['input']} on {info['device']}" if info.get("device") else ""
    console.print(f"[bold]{escape(result.query)}[/bold]: {result.num_nodes:,} ops, {result.num_edges:,} edges, "
                  f"coarse {result.coarse}{escape(how)}")
    table = Table(title=f"top {len(result.hits)} in {escape(result.index)} · {result.backend}", title_justify="left")
    for col, justify in (("#", "right"), ("graph", "left"), ("family", "left"), ("coarse", "left"),
                         ("source", "left"), ("cosine", "right"), ("ops", "right"), ("edges", "right")):
        table.add_column(col, justify=justify, overflow="fold")
    for h in result.hits:
        table.add_row(str(h.rank), escape(h.name), escape(h.family), h.coarse, h.source, f"{h.similarity:.3f}",
                      f"{h.num_nodes:,}", f"{h.num_edges:,}")
    console.print(table)
    if result.hits:
        console.print(f"why #1 is close: {escape(result.why)}", soft_wrap=True)
    if result.kind == "index":
        console.print("in the index: yes, this is an index graph (left out of its own hits)", soft_wrap=True)
    elif result.duplicate_of:
        console.print(f"in the index: yes, an exact duplicate of {escape(', '.join(result.duplicate_of))}",
                      soft_wrap=True)
    else:
        console.print("in the index: no exact duplicate", soft_wrap=True)
    if result.unknown_ops:
        ops = ", ".join(f"{op} x{c}" for op, c in sorted(result.unknown_ops.items(), key=lambda kv: -kv[1]))
        console.print(f"not in the index's op vocabulary (spliced out before embedding): {escape(ops)}",
                      soft_wrap=True)


def add_index_parser(sub) -> None:
    p = sub.add_parser("index", help="build or inspect the search index")
    isub = p.add_subparsers(dest="index_command", required=True)
    b = isub.add_parser("build", help="fit an encoder on a whole dataset and embed every graph for search")
    b.add_argument("--encoder", default=None, help="registered encoder (default: the shipped index's)")
    b.add_argument("--dataset", default="real", help="registered dataset (default: real)")
    b.add_argument("--profile", default="quick", choices=sorted(PROFILES), help="training budget and recipe")
    b.add_argument("--protocol", default=DEFAULT_PROTOCOL, choices=sorted(PROTOCOLS), help="training labels")
    b.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda, cuda:N")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--param", dest="params", action="append", type=_parse_param, default=None, metavar="KEY=VALUE",
                   help="an encoder parameter (repeatable; default: the index defaults, e.g. wl dim=256)")
    b.add_argument("--max-dim", type=int, default=256, help="wider embeddings are randomly projected (default 256)")
    b.add_argument("--out", default=None, help="index file (default: $NARBENCH_CACHE/index/index-DATASET-ENCODER.nari)")
    b.add_argument("--no-progress", action="store_true", help="hide progress bars")
    b.set_defaults(func=index_build_command)
    i = isub.add_parser("info", help="check an index's hash and describe it")
    i.add_argument("--encoder", default=None, help="the index built with this encoder (default: the shipped one)")
    i.add_argument("--index", default=None, metavar="FILE", help="this index file")
    i.set_defaults(func=index_info_command)


def index_build_command(args) -> int:
    from pathlib import Path

    from narbench.dataset import CorruptFileError
    from narbench.index import SHIPPED, IndexConfig, build_index, cache_path, shipped_path, write_index
    from narbench.runner import ConfigError

    console = Console(stderr=True)
    encoder = args.encoder or SHIPPED.encoder
    cfg = IndexConfig(encoder=encoder, dataset=args.dataset, profile=args.profile, protocol=args.protocol,
                      seed=args.seed, device=args.device, params=dict(args.params) if args.params else None,
                      max_dim=args.max_dim, progress=not args.no_progress)
    try:
        index = build_index(cfg, console=console)
    except (registry.UnknownNameError, registry.RegistryError, ConfigError, CorruptFileError, ValueError) as exc:
        sys.stderr.write(f"narbench index build: error: {' '.join(str(exc).split())}\n")
        return 2
    path = Path(args.out) if args.out else cache_path(encoder, args.dataset)
    digest = write_index(index, path)
    print(f"index written to {path} ({path.stat().st_size / 1e6:.1f} MB): {index.describe()}")
    print(f"sha256 {digest}")
    if path.resolve().parent == shipped_path().resolve().parent:
        print(f'to ship it, set in narbench/index.py: SHIPPED = ShippedIndex("{encoder}", "{digest}")')
    return 0


def index_info_command(args) -> int:
    from narbench.index import IndexFileError, load_index

    try:
        index = load_index(args.encoder, args.index)
    except IndexFileError as exc:
        sys.stderr.write(f"narbench index info: error: {' '.join(str(exc).split())}\n")
        return 2
    h = index.header
    print(f"{index.path}: {index.describe()}")
    print(f"sha256 {index.sha256} (checked)")
    print(f"encoder {h['encoder']['name']} params {h['encoder']['params']} profile {h['profile']} "
          f"protocol {h['protocol']} trained on {h['trained_on']:,} graphs; built with narbench "
          f"{h.get('narbench_version')}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(stderr=True)
    out = Console()
    from narbench.checkpoint import CheckpointError
    from narbench.dataset import CorruptFileError
    from narbench.runner import ConfigError

    if getattr(args, "func", None) is not None:  # subcommands with their own handler
        return args.func(args)
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
