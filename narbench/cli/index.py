"""`narbench index build` and `narbench index info`: the search index (`narbench.search_engine.index`)."""

from __future__ import annotations

import argparse

from narbench.cli.args import console, parse_param, positive_int, seed
from narbench.cli.errors import one_line
from narbench.train.profiles import PROFILES
from narbench.train.protocol import DEFAULT_PROTOCOL, PROTOCOLS


def register(sub) -> None:
    """Add `index` and its `build` and `info` to the subcommands."""
    p = sub.add_parser("index", help="build or inspect the search index")
    isub = p.add_subparsers(dest="index_command", required=True)
    b = isub.add_parser("build", help="fit an encoder on a whole dataset and embed every graph for search")
    b.add_argument("--encoder", default=None, help="registered encoder (default: the shipped index's)")
    b.add_argument("--dataset", default="real", help="registered dataset (default: real)")
    b.add_argument("--profile", default="quick", choices=sorted(PROFILES), help="training budget and recipe")
    b.add_argument("--protocol", default=DEFAULT_PROTOCOL, choices=sorted(PROTOCOLS), help="training labels")
    b.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda, cuda:N")
    b.add_argument("--seed", type=seed, default=0)
    b.add_argument("--param", dest="params", action="append", type=parse_param, default=None, metavar="KEY=VALUE",
                   help="an encoder parameter (repeatable; default: the index defaults, e.g. wl dim=256)")
    b.add_argument("--max-dim", type=positive_int, default=256,
                   help="wider embeddings are randomly projected (default 256)")
    b.add_argument("--out", default=None, help="index file, in a folder that exists "
                                               "(default: $NARBENCH_CACHE/index/index-DATASET-ENCODER.nari)")
    b.add_argument("--rules", default=None, type=_rules, metavar="VERSION",
                   help="read the corpus under passes over canonical graphs up to these rules only (default: all; "
                        "an index of earlier rules, to compare)")
    b.add_argument("--no-progress", action="store_true", help="hide progress bars")
    b.set_defaults(func=run_build)
    i = isub.add_parser("info", help="check an index's hash and describe it")
    i.add_argument("--encoder", default=None, help="the index built with this encoder (default: the shipped one)")
    i.add_argument("--index", default=None, metavar="FILE", help="this index file")
    i.set_defaults(func=run_info)


def _rules(value: str) -> str:
    """A canonical version for `--rules` (read when given: the table of versions needs numpy)."""
    from narbench.data.canonical import VERSIONS

    if value not in VERSIONS:
        raise argparse.ArgumentTypeError(f"unknown canonical rules {value!r}; known: {', '.join(VERSIONS)}")
    return value


def run_build(args: argparse.Namespace) -> int:
    """`narbench index build`: the output is checked first, then the encoder fitted and the index written."""
    from pathlib import Path

    from narbench.core import registry
    from narbench.core.cache import WriteError
    from narbench.data.dataset import CorruptFileError
    from narbench.eval.retrieval import EmbeddingError
    from narbench.harness.preflight import check_output, check_output_file
    from narbench.harness.runner import ConfigError
    from narbench.search_engine.index import SHIPPED, cache_path, shipped_path
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.index_file import write_index

    encoder = args.encoder or SHIPPED.encoder
    cfg = IndexConfig(encoder=encoder, dataset=args.dataset, profile=args.profile, protocol=args.protocol,
                      seed=args.seed, device=args.device, params=dict(args.params) if args.params else None,
                      max_dim=args.max_dim, rules=args.rules, progress=not args.no_progress)
    path = Path(args.out) if args.out else cache_path(encoder, args.dataset)
    try:  # the target first: a folder, a missing folder or a read-only one is refused before minutes of fitting
        check_output_file(path, what="index file") if args.out else check_output(path.parent, what="index folder")
        index = build_index(cfg, console=console(stderr=True))
        try:
            digest = write_index(index, path)
        except WriteError:
            raise
        except OSError as exc:  # a read-only file system, a permission: one line, nothing left
            raise WriteError(path, exc) from exc
    except (registry.UnknownNameError, registry.RegistryError, ConfigError, CorruptFileError, ValueError,
            EmbeddingError, WriteError) as exc:  # PreflightError is a ValueError
        return one_line("index build", exc)
    print(f"index written to {path} ({path.stat().st_size / 1e6:.1f} MB): {index.describe()}")
    print(f"sha256 {digest}")
    if path.resolve().parent == shipped_path().resolve().parent:
        print(f'to ship it, set in narbench/search_engine/index.py: SHIPPED = ShippedIndex("{encoder}", "{digest}")')
    return 0


def run_info(args: argparse.Namespace) -> int:
    """`narbench index info`: load the index (its hash checked) and describe it."""
    from narbench.search_engine.index import IndexFileError
    from narbench.search_engine.index_file import load_index

    try:
        index = load_index(args.encoder, args.index)
    except IndexFileError as exc:
        return one_line("index info", exc)
    h = index.header
    print(f"{index.path}: {index.describe()}")
    print(f"sha256 {index.sha256} (checked); hits are weak below cosine {index.weak_below}")
    print(f"encoder {h['encoder']['name']} params {h['encoder']['params']} profile {h['profile']} "
          f"protocol {h['protocol']} trained on {h['trained_on']:,} graphs; built with narbench "
          f"{h.get('narbench_version')}")
    fit = h["encoder"].get("fit") or {}
    if fit.get("picked"):  # what the encoder chose on its inner hold-out (an index built since 2026-11-30)
        chosen = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in fit["picked"].items())
        print(f"chose {chosen} on its inner hold-out ({fit.get('metric', '?')}, {fit.get('validation_queries', '?')} "
              f"queries)")
    if h.get("canonical_version"):
        print(f"corpus and queries read under canonical {h['canonical_version']}")
    return 0
