"""`narbench run`: one benchmark run (train an encoder, retrieve, score, write a result file).

The work is `narbench.harness.runner.run`; this module turns the arguments into its `RunConfig`
(`run_config`, which a sweep's command line must reproduce) and draws the result.
"""

from __future__ import annotations

import argparse

from narbench.cli.args import ShowDefaults, console, parse_param, positive_int, seed
from narbench.cli.errors import error
from narbench.train.profiles import OBJECTIVES, PROFILES
from narbench.train.protocol import DEFAULT_PROTOCOL, PROTOCOLS


def register(sub) -> None:
    """Add `run` to the subcommands."""
    p = sub.add_parser("run", help="train an encoder, retrieve, score, write a result file", formatter_class=ShowDefaults)
    p.add_argument("--encoder", default="ours", help="registered encoder name (see `narbench encoders`)")
    p.add_argument("--splitter", default=None, help="registered splitter name (default: the encoder's)")
    p.add_argument("--dataset", default="nas", help="registered dataset name (see `narbench datasets`)")
    p.add_argument("--split", default="standard",
                   help="a split of the dataset: standard or, on real, unseen (whole zoo models held out)")
    p.add_argument("--protocol", default=DEFAULT_PROTOCOL, choices=sorted(PROTOCOLS),
                   help="which labels trainable encoders get: family (the same for every encoder) "
                        "or paper (the paper's setting, for reproduction rows)")
    p.add_argument("--profile", default="quick", choices=sorted(PROFILES), help="data and recipe budget")
    p.add_argument("--objective", default=None, choices=OBJECTIVES, help="graph-level loss terms (default: the "
                                                                       "profile's, ce+cl)")
    p.add_argument("--param", dest="params", action="append", type=parse_param, default=[],
                   metavar="KEY=VALUE", help="a splitter parameter (repeatable)")
    p.add_argument("--encoder-param", dest="encoder_params", action="append", type=parse_param, default=[],
                   metavar="KEY=VALUE", help="an encoder parameter (repeatable; e.g. ours: stage1=false, "
                                             "motif_examples=occurrences, stage1_lr=0.01; see docs/encoders.md)")
    p.add_argument("--epochs", type=positive_int, default=None, metavar="N",
                   help="epochs of the graph-level stage instead of the profile's (e.g. 15, Table 5's)")
    p.add_argument("--curve", action="store_true",
                   help="learning curve: hold a validation split out of the training graphs and record validation "
                        "and test NDCG@20, MRR@20 and MAPc@20 after every epoch of the last training stage")
    p.add_argument("--holdout", default="family", choices=("family", "cross-source"),
                   help="with --curve: the validation split, stratified by family, or the graphs of one source "
                        "of some families that several sources implement (docs/running.md)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the data subsets, initialisation and training")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N")
    p.add_argument("--out", default="runs", help="folder for the result file")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument("--save-embeddings", action="store_true",
                   help="also write the query embeddings (for the leaderboard's t-SNE maps)")
    p.add_argument("--save-weights", action="store_true", help="also write the trained weights (<run_id>.pt)")
    p.add_argument("--init-from", default=None, metavar="RESULT_OR_CHECKPOINT",
                   help="start from saved weights: a result .json of a --save-weights run, or its .pt")
    p.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                   help="processes for splitting graphs not in the parts cache (default: all cores)")
    p.add_argument("--compile", action="store_true",
                   help="run the model's forward through torch.compile (faster training and embedding after a "
                        "compilation of tens of seconds; results agree with eager ones to rounding, not bit for bit)")
    p.add_argument("--no-resume", action="store_true",
                   help="train from scratch even if a killed run of the same configuration left epoch snapshots, "
                        "and keep none")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout (the table goes to stderr)")
    p.set_defaults(func=run, interrupted="interrupted; nothing written (a re-run goes on from the last finished "
                                         "training epoch)")


def run_config(args: argparse.Namespace):
    """The `RunConfig` of `narbench run`'s arguments (what a sweep's command line must reproduce)."""
    from narbench.harness.runner import RunConfig

    return RunConfig(
        encoder=args.encoder, splitter=args.splitter, dataset=args.dataset, split=args.split,
        protocol=args.protocol, profile=args.profile,
        seed=args.seed, device=args.device, objective=args.objective, splitter_params=dict(args.params),
        encoder_params=dict(args.encoder_params), out=args.out, progress=not args.no_progress,
        save_embeddings=args.save_embeddings, save_weights=args.save_weights, init_from=args.init_from,
        jobs=args.jobs, compile=args.compile, resume=not args.no_resume, epochs=args.epochs, curve=args.curve,
        holdout=args.holdout,
    )


def run(args: argparse.Namespace) -> int:
    """`narbench run`: one benchmark run; prints its metrics even when its files cannot be written."""
    from narbench.harness.runner import ResultWriteError, render
    from narbench.harness.runner import run as run_benchmark

    cfg = run_config(args)
    out = console(stderr=True) if args.json else console()
    try:
        ev = run_benchmark(cfg, console=console(stderr=True))
    except ResultWriteError as exc:
        render(exc.evaluation, out)
        error(str(exc))
        return 2
    render(ev, out)
    if args.json:
        import json

        print(json.dumps({**ev.result.to_dict(), "path": str(ev.path) if ev.path else None}, indent=1, sort_keys=True))
    return 0
