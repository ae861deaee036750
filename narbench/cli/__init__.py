"""`narbench` command line: all argument parsing and dispatch, one handler per subcommand.

`build_parser` defines every subcommand and wires its handler with `set_defaults(func=...)`.
A handler takes the parsed arguments and returns the exit status: 0 done, 1 the gate failed,
2 bad input (said in one line on stderr, before any training) or a refused run (one line too:
an encoder's non-finite embeddings, after training), 130 interrupted. Handlers are
thin: the work is the Python API's (`narbench.run`, `narbench.leaderboard`, `narbench.harness.gate`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from narbench import __version__
from narbench.train import allocator
from narbench.train.profiles import OBJECTIVES, PROFILES
from narbench.train.protocol import DEFAULT_PROTOCOL, PROTOCOLS

# Heavy modules (torch, PyG, numpy, the leaderboard) are imported inside the handlers: `--version`,
# `--help` and argument errors answer without them (tests/test_cli_first_hour.py checks torch).

from narbench.cli_args import MAX_SEED, _console, _non_negative_float, _positive_int, _seed  # noqa: E402,F401 - argparse types (MAX_SEED re-exported)


class _Parser(argparse.ArgumentParser):
    """argparse, with an error in one line (no usage block): `narbench run: error: ... (see --help)`."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Version(argparse.Action):
    """`--version`: narbench's, torch's, PyG's and the registered datasets' versions (nothing imported)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from narbench.core.registry import static_versions

        print(versions_line(static_versions))
        parser.exit(0)


#: `narbench leaderboard --test` choices, the default first: `narbench.leaderboard.significance.TESTS`
#: (named here so that building the parser imports no numpy; a test keeps the two in step)
LEADERBOARD_TESTS = ("bootstrap", "bootstrap-query", "student", "fisher", "student-pooled")

def versions_line(dataset_versions) -> str:
    """`narbench 0.1.0 (torch 2.13.0+cpu, torch-geometric 2.8.1; datasets nas 1.0, real 1.0)`."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(dist: str) -> str:
        try:
            return f"{dist} {version(dist)}"
        except PackageNotFoundError:
            return f"{dist} not installed"

    datasets = ", ".join(f"{name} {v}" for name, v in dataset_versions("dataset").items())
    return (f"narbench {__version__} ({installed('torch')}, {installed('torch-geometric')}; "
            f"datasets {datasets or 'none registered'})")





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


class _ShowDefaults(argparse.HelpFormatter):
    """Help that names each option's default, where it has one worth naming."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default is None or action.default is False or action.default == [] \
                or action.default == argparse.SUPPRESS:
            return text
        return text + " (default: %(default)s)"


def build_parser() -> argparse.ArgumentParser:
    """The `narbench` parser: every subcommand, each with its handler as `func`."""
    parser = _Parser(prog="narbench", description="Neural Architecture Retrieval benchmark")
    parser.add_argument("--version", action=_Version, help="show the versions of narbench, torch, PyG and the datasets")
    parser.add_argument("--no-malloc-tuning", dest="malloc_tuning", action="store_false",
                        help="leave glibc's malloc settings alone (by default the command keeps freed batch memory "
                             "for reuse, see narbench.train.allocator; also NARBENCH_MALLOC_TUNING=0)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    defaults = _ShowDefaults

    run = sub.add_parser("run", help="train an encoder, retrieve, score, write a result file", formatter_class=defaults)
    run.add_argument("--encoder", default="ours", help="registered encoder name (see `narbench encoders`)")
    run.add_argument("--splitter", default=None, help="registered splitter name (default: the encoder's)")
    run.add_argument("--dataset", default="nas", help="registered dataset name (see `narbench datasets`)")
    run.add_argument("--split", default="standard",
                     help="a split of the dataset: standard or, on real, unseen (whole zoo models held out)")
    run.add_argument("--protocol", default=DEFAULT_PROTOCOL, choices=sorted(PROTOCOLS),
                     help="which labels trainable encoders get: family (the same for every encoder) "
                          "or paper (the paper's setting, for reproduction rows)")
    run.add_argument("--profile", default="quick", choices=sorted(PROFILES), help="data and recipe budget")
    run.add_argument("--objective", default=None, choices=OBJECTIVES, help="graph-level loss terms (default: the "
                                                                         "profile's, ce+cl)")
    run.add_argument("--param", dest="params", action="append", type=_parse_param, default=[],
                     metavar="KEY=VALUE", help="a splitter parameter (repeatable)")
    run.add_argument("--encoder-param", dest="encoder_params", action="append", type=_parse_param, default=[],
                     metavar="KEY=VALUE", help="an encoder parameter (repeatable; e.g. ours: stage1=false, "
                                               "motif_examples=occurrences, stage1_lr=0.01; see docs/encoders.md)")
    run.add_argument("--epochs", type=_positive_int, default=None, metavar="N",
                     help="epochs of the graph-level stage instead of the profile's (e.g. 15, Table 5's)")
    run.add_argument("--curve", action="store_true",
                     help="learning curve: hold a validation split out of the training graphs and record validation "
                          "and test NDCG@20, MRR@20 and MAPc@20 after every epoch of the last training stage")
    run.add_argument("--holdout", default="family", choices=("family", "cross-source"),
                     help="with --curve: the validation split, stratified by family, or the graphs of one source "
                          "of some families that several sources implement (docs/running.md)")
    run.add_argument("--seed", type=_seed, default=0, help="seed of the data subsets, initialisation and training")
    run.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N")
    run.add_argument("--out", default="runs", help="folder for the result file")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument("--save-embeddings", action="store_true",
                     help="also write the query embeddings (for the leaderboard's t-SNE maps)")
    run.add_argument("--save-weights", action="store_true", help="also write the trained weights (<run_id>.pt)")
    run.add_argument("--init-from", default=None, metavar="RESULT_OR_CHECKPOINT",
                     help="start from saved weights: a result .json of a --save-weights run, or its .pt")
    run.add_argument("--jobs", type=_positive_int, default=None, metavar="N",
                     help="processes for splitting graphs not in the parts cache (default: all cores)")
    run.add_argument("--compile", action="store_true",
                     help="run the model's forward through torch.compile (faster training and embedding after a "
                          "compilation of tens of seconds; results agree with eager ones to rounding, not bit for bit)")
    run.add_argument("--no-resume", action="store_true",
                     help="train from scratch even if a killed run of the same configuration left epoch snapshots, "
                          "and keep none")
    run.add_argument("--json", action="store_true", help="print the result as JSON on stdout (the table goes to stderr)")
    run.set_defaults(func=cmd_run, interrupted="interrupted; nothing written (a re-run goes on from the last finished training epoch)")

    build = sub.add_parser("build-real", help="extract the `real` dataset from the model zoos (needs the zoo extra)",
                           formatter_class=defaults)
    build.add_argument("--out", required=True, help="build folder (per-model results; resumable)")
    build.add_argument("--jobs", type=_positive_int, default=1, help="extraction processes in parallel")
    build.add_argument("--limit", type=int, default=None, help="only this many specs, spread over the zoos")
    build.add_argument("--only", action="append", default=None, help="spec glob or substring (repeatable)")
    build.add_argument("--timeout", type=float, default=180.0, help="seconds per model before it is killed")
    build.add_argument("--mem-limit-gb", type=float, default=8.0, help="address-space limit per worker")
    build.add_argument("--retry-failed", action="store_true", help="run models that failed before again")
    build.add_argument("--from", dest="from_graphs", default=None, metavar="FILE",
                       help="derive the canonical dataset from a raw graph file (real-1.0.narg) instead of extracting")
    build.add_argument("--patch", default=None, metavar="FILE",
                       help="with --from: re-extracted raw graphs that replace those of the same name "
                            "(narbench/data/real-1.0-reextracted.narg)")
    build.add_argument("--reextract", action="append", default=None, metavar="OP",
                       help="with --from: first re-extract (needs the zoo extra) every graph holding this raw op "
                            "('*': every graph), into <out>/real-1.0-reextracted.narg, and derive with it as --patch "
                            "(repeatable)")
    build.add_argument("--attributes", action="store_true",
                       help="record design attributes in the extracted graphs (narbench.zoo.extract.DesignAttributes; "
                            "canonical 2.2 reads them)")
    build.add_argument("--canonical-version", default=None, metavar="V",
                       help="with --from: canonical rules and dataset version to derive (default 2.1; 2.2 needs a "
                            "patch extracted with --attributes)")
    build.set_defaults(func=cmd_build_real)

    cross = sub.add_parser("build-crossimpl", help="extract the cross-implementation queries of `real` "
                           "(narbench/data/crossimpl.csv; needs the crossimpl extra)", formatter_class=defaults)
    cross.add_argument("--out", required=True, help="folder for crossimpl-2.1.1.narg (crossimpl-<V>.narg under another V)")
    cross.add_argument("--canonical-version", default=None, metavar="V",
                       help="canonical rules (default 2.1); 2.2 extracts with design attributes and needs --corpus")
    cross.add_argument("--corpus", default=None, metavar="FILE",
                       help="the real graph file of that version, whose graphs isomorphic to a query are its twins")
    cross.set_defaults(func=cmd_build_crossimpl)

    sheet = sub.add_parser("datasheet", help="counts per source/family/coarse label, sizes, vocabulary, split")
    sheet.add_argument("dataset", help="registered dataset name")
    sheet.add_argument("--markdown", default=None, metavar="FILE", help="also write the datasheet as Markdown")
    sheet.add_argument("--json", default=None, metavar="FILE", help="also write it as JSON")
    sheet.set_defaults(func=cmd_datasheet)

    lb = sub.add_parser("leaderboard", help="aggregate result files into the leaderboard (tables, plots)",
                        formatter_class=defaults)
    lb.add_argument("--results", action="append", default=[], metavar="DIR",
                    help="extra folder of result files (repeatable; <out>/results is always read)")
    lb.add_argument("--out", default="leaderboard", help="leaderboard folder")
    lb.add_argument("--readme", default=None, metavar="FILE",
                    help="rewrite the headline table between the narbench:headline markers of FILE (default: the "
                         "README.md beside the leaderboard folder, when it has the markers)")
    lb.add_argument("--profile", dest="profiles", action="append", default=None, choices=sorted(PROFILES),
                    help="a profile to show (repeatable; default: quick and paper, the ones comparable with the "
                         "paper; any other gets blocks of its own without the paper's numbers)")
    lb.add_argument("--no-plots", action="store_true", help="skip the plots")
    lb.add_argument("--no-tsne", action="store_true", help="skip the t-SNE maps (the slowest part)")
    lb.add_argument("--redraw", action="store_true", help="redraw every figure, even those whose inputs are unchanged")
    lb.add_argument("--verify", action="store_true",
                    help="re-run every shown result of a training-free encoder and refuse one that differs (takes as "
                         "long as those runs took; rows re-run in full are `re-run` in aggregate.csv's verified column)")
    lb.add_argument("--test", default=LEADERBOARD_TESTS[0], choices=LEADERBOARD_TESTS,
                    help="significance test of the tables' marks (default: a two-level bootstrap over clusters of "
                         "dependent queries and seeds; bootstrap-query: over single queries)")
    lb.set_defaults(func=cmd_leaderboard)

    from narbench.harness import gate
    from narbench.cli_sweep import add_runs_parser, add_sweep_parser
    add_sweep_parser(sub, defaults)
    add_runs_parser(sub)
    add_search_parser(sub)
    add_index_parser(sub)
    from narbench.cli_explore import add_explore_parser
    add_explore_parser(sub, defaults)

    check = sub.add_parser("check", help="regression gate: smoke-run the encoders and compare with a reference")
    check.add_argument("--baseline", "--reference", dest="reference", default=gate.DEFAULT_REFERENCE,
                       help=f"reference JSON (default: {gate.DEFAULT_REFERENCE})")
    check.add_argument("--tolerance", type=_non_negative_float, default=None,
                       help="one allowed drop for every metric instead of the reference's measured bands")
    check.add_argument("--encoders", action="append", default=None, metavar="A,B",
                       help="only these encoders (comma-separated or repeated; default: all registered)")
    check.add_argument("--datasets", action="append", default=None, metavar="A,B",
                       help="only these datasets (default: all registered; unavailable ones are skipped)")
    check.add_argument("--update", action="store_true",
                       help="rewrite the reference with this run's metrics and re-derive their bands: this run, the "
                            "other kernel ISAs this machine can simulate (subprocesses), and --spread files")
    check.add_argument("--spread", action="append", default=[], metavar="FILE",
                       help="with --update: also derive the bands from this measurement (a --record file of another "
                            "environment: torch release, CUDA wheel, host); repeatable")
    check.add_argument("--no-measure", action="store_true",
                       help="with --update: do not run the simulated environments (bands from this run and --spread)")
    check.add_argument("--record", metavar="FILE", default=None,
                       help="also write this run's metrics and environment to FILE (a measurement for --spread)")
    check.add_argument("--no-compare", action="store_true", help="only run (with --record): no reference needed")
    check.add_argument("--threads", type=_positive_int, default=gate.GATE_THREADS,
                       help=f"CPU threads of the gate's runs (default {gate.GATE_THREADS}; other values measure bands)")
    check.add_argument("--strict", action="store_true",
                       help="a reference entry or metric missing for what ran fails the gate")
    check.add_argument("--allow-improvements", action="store_true",
                       help="a metric above its band passes (by default it fails: the smoke metrics fingerprint the "
                            "code's behaviour, and a regression such as a leak can raise them)")
    check.add_argument("--quiet", action="store_true", help="leave unchanged metrics out of the table")
    check.set_defaults(func=cmd_check)

    sub.add_parser("datasets", help="list registered datasets: version, size, families, splits").set_defaults(
        func=cmd_datasets)
    for kind in ("encoder", "splitter"):
        sub.add_parser(f"{kind}s", help=f"list registered {kind}s").set_defaults(func=cmd_list, kind=kind)
    return parser


def _error(message: str) -> None:
    from rich.markup import escape

    _console(stderr=True).print(f"[red]error:[/red] {escape(message)}", soft_wrap=True, highlight=False)


# ------------------------------------------------------------------------------------ handlers


def run_config(args: argparse.Namespace):
    """The `RunConfig` of `narbench run`'s arguments (what a sweep's command line must reproduce)."""
    from narbench.harness.runner import RunConfig

    return RunConfig(
        encoder=args.encoder, splitter=args.splitter, dataset=args.dataset, split=args.split,
        protocol=args.protocol, profile=args.profile,
        seed=args.seed, device=args.device, objective=args.objective, splitter_params=dict(args.params),
        encoder_params=dict(args.encoder_params), out=args.out, progress=not args.no_progress, save_embeddings=args.save_embeddings,
        save_weights=args.save_weights, init_from=args.init_from, jobs=args.jobs, compile=args.compile,
        resume=not args.no_resume, epochs=args.epochs, curve=args.curve, holdout=args.holdout,
    )


def cmd_run(args: argparse.Namespace) -> int:
    """`narbench run`: one benchmark run; prints its metrics even when its files cannot be written."""
    from narbench.harness.runner import ResultWriteError, render, run

    cfg = run_config(args)
    out = _console(stderr=True) if args.json else _console()
    try:
        ev = run(cfg, console=_console(stderr=True))
    except ResultWriteError as exc:
        render(exc.evaluation, out)
        _error(str(exc))
        return 2
    render(ev, out)
    if args.json:
        import json

        print(json.dumps({**ev.result.to_dict(), "path": str(ev.path) if ev.path else None}, indent=1, sort_keys=True))
    return 0


def cmd_build_real(args: argparse.Namespace) -> int:
    """`narbench build-real`: extract the `real` dataset from the model zoos (resumable), or derive it."""
    if (args.patch or args.reextract) and not args.from_graphs:
        raise SystemExit("narbench build-real: --patch and --reextract go with --from FILE")
    if args.patch and args.reextract:
        raise SystemExit("narbench build-real: give --patch or --reextract, not both")
    from narbench.data.canonical import DEFAULT_VERSION, VERSIONS

    version = args.canonical_version or DEFAULT_VERSION
    if version not in VERSIONS:
        raise SystemExit(f"narbench build-real: unknown --canonical-version {version!r}; known: {', '.join(VERSIONS)}")
    if args.canonical_version and not args.from_graphs:
        raise SystemExit("narbench build-real: --canonical-version goes with --from FILE")
    if args.attributes:
        from narbench.zoo.extract import ATTRIBUTES_ENV

        os.environ[ATTRIBUTES_ENV] = "1"  # the extraction workers inherit it
    if args.from_graphs:
        import json

        from narbench.zoo.derive import derive

        patch = args.patch
        if args.reextract:
            from narbench.zoo.reextract import reextract

            summary = reextract(args.from_graphs, args.out, args.reextract, jobs=args.jobs, timeout=args.timeout,
                                mem_limit_gb=args.mem_limit_gb)
            print(json.dumps({"reextracted": summary}, indent=1))
            patch = summary["path"]
        summary = derive(args.from_graphs, args.out, patch=patch, jobs=args.jobs, canonical_version=version,
                         progress=lambda i, n: print(f"canonical graphs: {i:,} of {n:,}", file=sys.stderr, flush=True))
        print(json.dumps(summary, indent=1))
        return 0
    from narbench.zoo.build import build_real

    build_real(args.out, jobs=args.jobs, limit=args.limit, only=args.only, timeout=args.timeout,
               mem_limit_gb=args.mem_limit_gb, retry_failed=args.retry_failed)
    return 0


def cmd_build_crossimpl(args: argparse.Namespace) -> int:
    """`narbench build-crossimpl`: extract every row of `narbench/data/crossimpl.csv` (`narbench.zoo.crossimpl`)."""
    from pathlib import Path

    from narbench.data.canonical import DEFAULT_VERSION, VERSIONS
    from narbench.zoo.crossimpl import run_cli

    version = args.canonical_version or DEFAULT_VERSION
    if version not in VERSIONS:
        raise SystemExit(f"narbench build-crossimpl: unknown --canonical-version {version!r}; known: {', '.join(VERSIONS)}")
    if version != DEFAULT_VERSION and not args.corpus:
        raise SystemExit(f"narbench build-crossimpl: --canonical-version {version} needs --corpus (the real file of {version})")
    return run_cli(Path(args.out), version, Path(args.corpus) if args.corpus else None)


def cmd_datasheet(args: argparse.Namespace) -> int:
    """`narbench datasheet NAME`: what is in a dataset, computed from the loaded data."""
    import json

    from rich.markdown import Markdown

    from narbench.data.dataset import load_dataset
    from narbench.datasets.datasheet import datasheet
    from narbench.data.store import atomic_write_bytes

    sheet = datasheet(load_dataset(args.dataset))
    if args.dataset != sheet.name:
        sheet.registered = args.dataset  # a version registered beside the current one: say how to regenerate it
    text = sheet.to_markdown()
    _console().print(Markdown(text))
    if args.markdown:
        atomic_write_bytes(Path(args.markdown), text.encode())
    if args.json:
        atomic_write_bytes(Path(args.json), json.dumps(sheet.to_json(), indent=1, sort_keys=True).encode())
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """`narbench leaderboard`: regenerate the leaderboard folder; progress on stderr, compact tables on stdout."""
    import time

    from rich.markup import escape

    from narbench.leaderboard import PAPER_PROFILES, write_leaderboard
    from narbench.leaderboard.headline import START
    from narbench.harness.preflight import check_output

    check_output(args.out, what="leaderboard folder")  # a file in the way, read-only: one line, nothing read
    err, t0 = _console(stderr=True), time.perf_counter()

    def progress(text: str) -> None:
        err.print(f"[dim]leaderboard {time.perf_counter() - t0:5.1f}s[/dim] {escape(text)}", soft_wrap=True,
                  highlight=False)

    headline = args.readme
    beside = Path(args.out).resolve().parent / "README.md"
    if headline is None and beside.is_file() and START in beside.read_text(errors="replace"):
        headline = beside
    verify = None
    if args.verify:
        from narbench.harness.verify import FloorVerifier
        verify = FloorVerifier(progress)
    readme = write_leaderboard(args.results, args.out, profiles=args.profiles or PAPER_PROFILES,
                               plots=not args.no_plots, tsne=not args.no_tsne, stat_test=args.test,
                               redraw=args.redraw, readme=headline, console=_console(), progress=progress,
                               verify=verify)
    _console().print(f"leaderboard written to [bold]{escape(str(readme))}[/bold]", soft_wrap=True, highlight=False)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """`narbench check`: the regression gate; 0 passed (or updated), 1 failed, 2 unusable input."""
    import tempfile
    import time
    from pathlib import Path

    from narbench.core.project import resolve_default
    from narbench.harness import bands, gate

    if args.no_compare and not args.record:
        raise gate.GateError("--no-compare only runs; give --record FILE to keep what it measured")
    if args.no_compare and args.update:
        raise gate.GateError("--no-compare and --update exclude each other")
    if (args.spread or args.no_measure) and not args.update:
        raise gate.GateError("--spread and --no-measure only apply with --update")
    if not args.no_compare:  # the default reference is the project's, from any folder inside it
        args.reference = str(resolve_default(args.reference, gate.DEFAULT_REFERENCE))
    for target, given in (("reference file", args.update and args.reference), ("measurement file", args.record)):
        if given:
            gate.check_writable(given, target)  # refused in one line before minutes of runs
    spread = [bands.read_measurement(p) for p in args.spread]
    if args.update and Path(args.reference).exists():
        gate.load_reference(args.reference)  # a bad reference is refused before minutes of measuring
    t = time.perf_counter()
    console = _console()
    if args.update and not args.no_measure:
        with tempfile.TemporaryDirectory(prefix="narbench-bands-") as tmp:
            for isa, threads in bands.local_variants(args.threads):
                console.print(f"measuring the bands: ATEN_CPU_CAPABILITY={isa}, {threads} threads")
                spread.append(bands.measure(isa, threads, args.encoders, args.datasets,
                                            Path(tmp) / f"{isa}-{threads}.json"))
    report = gate.check(args.reference, tolerance=args.tolerance, encoders=args.encoders, datasets=args.datasets,
                        update=args.update, threads=args.threads, compare_with_reference=not args.no_compare,
                        spread=spread, allow_improvements=args.allow_improvements, console=_console(stderr=True))
    if args.record:
        bands.write_measurement(args.record, bands.measurement(report.entries, bands.Environment.current(args.threads)))
    gate.render(report, console, strict=args.strict, verbose=not args.quiet)
    if args.record:
        console.print(f"measurement written to {args.record}", soft_wrap=True, highlight=False)
    console.print(f"gate wall time {time.perf_counter() - t:.1f} s")
    return 0 if report.passed(args.strict) else 1


def cmd_datasets(args: argparse.Namespace) -> int:
    """`narbench datasets`: every registered dataset with its version, size, families and splits."""
    from narbench.datasets.datasheet import datasets_table

    table = datasets_table()
    _console().print(table)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """`narbench encoders` / `narbench splitters`: the registered names, who provides them, what they are."""
    from narbench.core import registry

    table = registry.table(args.kind)
    _console().print(table)
    return 0


# ----------------------------------------------------------------------------- search, index


def _shape(text: str) -> tuple[int, ...]:
    parts = text.replace("x", ",").split(",")
    shape = tuple(int(x) for x in parts if x.strip().isdigit()) if all(x.strip().isdigit() for x in parts) else ()
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
    from narbench.cli_args import add_max_memory

    p = sub.add_parser("search", help="the real architectures most similar to a model, graph or graph name",
                       description="The real architectures most similar to a model, graph or graph name. A TARGET "
                                   "given as code (FILE.py:CLASS, MODULE:CLASS, a zoo name) is imported and run, with "
                                   "your rights, in a child process under --max-memory and --timeout (docs/search.md, "
                                   "Security).")
    p.add_argument("target", metavar="TARGET",
                   help="FILE.py:CLASS, MODULE:CLASS, timm:NAME, torchvision:NAME, transformers:TYPE[/HEAD], "
                        "a graph file written by narbench, or the name of a graph in the index")
    p.add_argument("-k", type=_positive_int, default=10, help="number of hits (default 10)")
    p.add_argument("--encoder", default=None, help="search the index built with this encoder (default: the shipped one)")
    p.add_argument("--index", default=None, metavar="FILE", help="search this index file")
    p.add_argument("--backend", default="exact", choices=["exact", "faiss"],
                   help="exact cosine search (default) or FAISS (pip install 'narbench[faiss]')")
    p.add_argument("--kwargs", type=_json_object, default=None, metavar="JSON",
                   help="constructor arguments of CLASS, as a JSON object")
    p.add_argument("--input-shape", type=_shape, action="append", default=None, metavar="N,C,H,W",
                   help="shape of the example input (default: chosen as the real dataset's build does); "
                        "repeat it for a forward that takes several tensors")
    p.add_argument("--inputs", default=None, metavar="FILE.py:FUNC",
                   help="a function returning the example inputs: a tensor, a tuple of positional inputs, "
                        "a dict of keyword inputs, or (args, kwargs)")
    p.add_argument("--timeout", type=_non_negative_float, default=120.0, metavar="SECONDS",
                   help="stop with an error if importing, building and running the model takes longer; its "
                        "process group is killed (default 120; 0: no limit)")
    add_max_memory(p, "memory the model's process")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no status line on stderr while the first search loads torch and the index")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_search)


def cmd_search(args) -> int:
    """`narbench search`: one-line errors (exit 2), a table or JSON on stdout.

    User code (the model, `--inputs`) runs in a child process under `--timeout` and `--max-memory`
    (`narbench.search_engine._target_child`)."""
    import contextlib
    import json
    import warnings

    from narbench.eval.retrieval import EmbeddingError
    from narbench.search_engine.backends import BackendError
    from narbench.search_engine.engine import render, search
    from narbench.search_engine.index import IndexFileError
    from narbench.search_engine.target import TargetError

    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):  # user code's prints
            warnings.simplefilter("ignore")
            result = search(args.target, args.k, encoder=args.encoder, index=args.index, backend=args.backend,
                            input_shape=args.input_shape, kwargs=args.kwargs, inputs=args.inputs,
                            timeout=args.timeout, max_memory=args.max_memory, progress=not args.quiet)
    except (TargetError, IndexFileError, BackendError, EmbeddingError) as exc:
        sys.stderr.write(f"narbench search: error: {' '.join(str(exc).split())}\n")
        return 2
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
        return 0
    render(result, _console())  # piped: 160 columns, no folded names
    return 0


def add_index_parser(sub) -> None:
    p = sub.add_parser("index", help="build or inspect the search index")
    isub = p.add_subparsers(dest="index_command", required=True)
    b = isub.add_parser("build", help="fit an encoder on a whole dataset and embed every graph for search")
    b.add_argument("--encoder", default=None, help="registered encoder (default: the shipped index's)")
    b.add_argument("--dataset", default="real", help="registered dataset (default: real)")
    b.add_argument("--profile", default="quick", choices=sorted(PROFILES), help="training budget and recipe")
    b.add_argument("--protocol", default=DEFAULT_PROTOCOL, choices=sorted(PROTOCOLS), help="training labels")
    b.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda, cuda:N")
    b.add_argument("--seed", type=_seed, default=0)
    b.add_argument("--param", dest="params", action="append", type=_parse_param, default=None, metavar="KEY=VALUE",
                   help="an encoder parameter (repeatable; default: the index defaults, e.g. wl dim=256)")
    b.add_argument("--max-dim", type=_positive_int, default=256,
                   help="wider embeddings are randomly projected (default 256)")
    b.add_argument("--out", default=None, help="index file, in a folder that exists "
                                               "(default: $NARBENCH_CACHE/index/index-DATASET-ENCODER.nari)")
    b.add_argument("--no-progress", action="store_true", help="hide progress bars")
    b.set_defaults(func=cmd_index_build)
    i = isub.add_parser("info", help="check an index's hash and describe it")
    i.add_argument("--encoder", default=None, help="the index built with this encoder (default: the shipped one)")
    i.add_argument("--index", default=None, metavar="FILE", help="this index file")
    i.set_defaults(func=cmd_index_info)


def cmd_index_build(args) -> int:
    from pathlib import Path

    from narbench.data.dataset import CorruptFileError
    from narbench.eval.retrieval import EmbeddingError
    from narbench.search_engine.index import SHIPPED, IndexConfig, build_index, cache_path, shipped_path, write_index
    from narbench.harness.preflight import check_output, check_output_file
    from narbench.harness.runner import ConfigError
    from narbench.core.cache import WriteError

    from narbench.core import registry

    console = _console(stderr=True)
    encoder = args.encoder or SHIPPED.encoder
    cfg = IndexConfig(encoder=encoder, dataset=args.dataset, profile=args.profile, protocol=args.protocol,
                      seed=args.seed, device=args.device, params=dict(args.params) if args.params else None,
                      max_dim=args.max_dim, progress=not args.no_progress)
    path = Path(args.out) if args.out else cache_path(encoder, args.dataset)
    try:  # the target first: a folder, a missing folder or a read-only one is refused before minutes of fitting
        check_output_file(path, what="index file") if args.out else check_output(path.parent, what="index folder")
        index = build_index(cfg, console=console)
        try:
            digest = write_index(index, path)
        except WriteError:
            raise
        except OSError as exc:  # a read-only file system, a permission: one line, nothing left
            raise WriteError(path, exc) from exc
    except (registry.UnknownNameError, registry.RegistryError, ConfigError, CorruptFileError, ValueError,
            EmbeddingError, WriteError) as exc:  # PreflightError is a ValueError
        sys.stderr.write(f"narbench index build: error: {' '.join(str(exc).split())}\n")
        return 2
    print(f"index written to {path} ({path.stat().st_size / 1e6:.1f} MB): {index.describe()}")
    print(f"sha256 {digest}")
    if path.resolve().parent == shipped_path().resolve().parent:
        print(f'to ship it, set in narbench/search_engine/index.py: SHIPPED = ShippedIndex("{encoder}", "{digest}")')
    return 0


def cmd_index_info(args) -> int:
    from narbench.search_engine.index import IndexFileError, load_index

    try:
        index = load_index(args.encoder, args.index)
    except IndexFileError as exc:
        sys.stderr.write(f"narbench index info: error: {' '.join(str(exc).split())}\n")
        return 2
    h = index.header
    print(f"{index.path}: {index.describe()}")
    print(f"sha256 {index.sha256} (checked); hits are weak below cosine {index.weak_below}")
    print(f"encoder {h['encoder']['name']} params {h['encoder']['params']} profile {h['profile']} "
          f"protocol {h['protocol']} trained on {h['trained_on']:,} graphs; built with narbench "
          f"{h.get('narbench_version')}")
    return 0


# ------------------------------------------------------------------------------------ dispatch


def _input_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean bad input or a refused run (exit 2, one line), as opposed to a bug (a traceback)."""
    from narbench.core import registry
    from narbench.core.cache import WriteError
    from narbench.eval.retrieval import EmbeddingError
    from narbench.train.checkpoint import CheckpointError
    from narbench.harness.gate import GateError
    from narbench.leaderboard import NothingToShowError, RejectedResultsError
    from narbench.leaderboard.headline import HeadlineError
    from narbench.harness.preflight import PreflightError
    from narbench.harness.runner import ConfigError
    from narbench.data.store import CorruptFileError
    from narbench.core.safeio import RefusedFileError
    from narbench.harness.sweep import GridError
    from narbench.eval.validation import InvalidResultError
    from narbench.explorer.app import ExplorerError

    return (registry.UnknownNameError, registry.RegistryError, ConfigError, PreflightError, CheckpointError,
            CorruptFileError, FileNotFoundError, GateError, RejectedResultsError, InvalidResultError, HeadlineError,
            NothingToShowError, GridError, EmbeddingError, WriteError, ExplorerError, RefusedFileError)


def main(argv: list[str] | None = None) -> int:
    """Parse `argv` (default: the command line), run the subcommand's handler, return its exit status."""
    restore = _degrade_unencodable_output()
    try:
        return _main(argv)
    finally:
        restore()


def _degrade_unencodable_output():
    """stdout / stderr that are not UTF-8 (`PYTHONIOENCODING=ascii`, a C locale) write `?` for a character
    they cannot encode (the tables' `·`, `…`, box lines) instead of raising UnicodeEncodeError. Returns a
    function that restores them."""
    undo = []
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
        errors = getattr(stream, "errors", None)
        if encoding.startswith("utf") or errors != "strict" or not hasattr(stream, "reconfigure"):
            continue
        try:
            stream.reconfigure(errors="replace")
        except (ValueError, OSError, TypeError):  # a stream that cannot be reconfigured: left as it is
            continue
        undo.append(stream)

    def restore() -> None:
        for stream in undo:
            try:
                stream.reconfigure(errors="strict")
            except (ValueError, OSError, TypeError):
                pass
    return restore


def _main(argv: list[str] | None) -> int:
    from narbench import process

    args = build_parser().parse_args(argv)
    errors = _input_errors()
    try:
        # PyG, ir_datasets, matplotlib write into a temp dir; SIGTERM unwinds; freed batch memory is reused
        with process.scope(), allocator.tuned(args.malloc_tuning and allocator.enabled_by_environment()):
            return args.func(args)
    except KeyboardInterrupt as exc:
        process.show_cursor()
        _console(stderr=True).print(getattr(args, "interrupted", "interrupted"), soft_wrap=True, highlight=False)
        return process.TERMINATED if isinstance(exc, process.Terminated) else 130
    except errors as exc:
        _error(str(exc))
        return 2

