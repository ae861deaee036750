"""`narbench check`: the regression gate (`narbench.harness.gate`): smoke-run the encoders and compare with a
reference; exit 0 passed (or updated), 1 failed, 2 unusable input."""

from __future__ import annotations

import argparse
from pathlib import Path

from narbench.cli.args import console, non_negative_float, positive_int


def register(sub) -> None:
    """Add `check` to the subcommands."""
    from narbench.harness import gate

    p = sub.add_parser("check", help="regression gate: smoke-run the encoders and compare with a reference")
    p.add_argument("--baseline", "--reference", dest="reference", default=gate.DEFAULT_REFERENCE,
                   help=f"reference JSON (default: {gate.DEFAULT_REFERENCE})")
    p.add_argument("--tolerance", type=non_negative_float, default=None,
                   help="one allowed drop for every metric instead of the reference's measured bands")
    p.add_argument("--encoders", action="append", default=None, metavar="A,B",
                   help="only these encoders (comma-separated or repeated; default: all registered)")
    p.add_argument("--datasets", action="append", default=None, metavar="A,B",
                   help="only these datasets (default: all registered; unavailable ones are skipped)")
    p.add_argument("--update", action="store_true",
                   help="rewrite the reference with this run's metrics and re-derive their bands: this run, the "
                        "other kernel ISAs this machine can simulate (subprocesses), and --spread files")
    p.add_argument("--spread", action="append", default=[], metavar="FILE",
                   help="with --update: also derive the bands from this measurement (a --record file of another "
                        "environment: torch release, CUDA wheel, host); repeatable")
    p.add_argument("--no-measure", action="store_true",
                   help="with --update: do not run the simulated environments (bands from this run and --spread)")
    p.add_argument("--record", metavar="FILE", default=None,
                   help="also write this run's metrics and environment to FILE (a measurement for --spread)")
    p.add_argument("--no-compare", action="store_true", help="only run (with --record): no reference needed")
    p.add_argument("--threads", type=positive_int, default=gate.GATE_THREADS,
                   help=f"CPU threads of the gate's runs (default {gate.GATE_THREADS}; other values measure bands)")
    p.add_argument("--strict", action="store_true",
                   help="a reference entry or metric missing for what ran fails the gate")
    p.add_argument("--allow-improvements", action="store_true",
                   help="a metric above its band passes (by default it fails: the smoke metrics fingerprint the "
                        "code's behaviour, and a regression such as a leak can raise them)")
    p.add_argument("--quiet", action="store_true", help="leave unchanged metrics out of the table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """`narbench check`: the regression gate; 0 passed (or updated), 1 failed, 2 unusable input."""
    import tempfile
    import time

    from narbench.core.project import resolve_default
    from narbench.harness import bands, gate, gatetable

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
    out = console()
    if args.update and not args.no_measure:
        with tempfile.TemporaryDirectory(prefix="narbench-bands-") as tmp:
            for isa, threads in bands.local_variants(args.threads):
                out.print(f"measuring the bands: ATEN_CPU_CAPABILITY={isa}, {threads} threads")
                spread.append(bands.measure(isa, threads, args.encoders, args.datasets,
                                            Path(tmp) / f"{isa}-{threads}.json"))
    report = gate.check(args.reference, tolerance=args.tolerance, encoders=args.encoders, datasets=args.datasets,
                        update=args.update, threads=args.threads, compare_with_reference=not args.no_compare,
                        spread=spread, allow_improvements=args.allow_improvements, console=console(stderr=True))
    if args.record:
        bands.write_measurement(args.record, bands.measurement(report.entries, bands.Environment.current(args.threads)))
    gatetable.render(report, out, strict=args.strict, verbose=not args.quiet)
    if args.record:
        out.print(f"measurement written to {args.record}", soft_wrap=True, highlight=False)
    out.print(f"gate wall time {time.perf_counter() - t:.1f} s")
    return 0 if report.passed(args.strict) else 1
