"""A sweep's grid: which runs `narbench sweep` makes, read from a TOML file or one block given on
the command line. Each block is the product datasets x splits x protocols x models x objectives x
seeds; `narbench.harness.sweepplan` expands a `Grid` into planned runs.

Grid file (`leaderboard/grid.toml` is the committed leaderboard's)::

    seeds = [0, 1, 2]
    profile = "quick"                       # `--profile` overrides it

    [[block]]
    name = "table1"
    datasets = ["nas", "real"]
    splits = ["standard"]                   # default ["standard"]
    protocols = ["family"]                  # default ["family"]
    objectives = ["ce", "cl"]               # default: the profile's (ce+cl)
    models = ["gcn+none", { model = "ours+motif", save_weights = true, save_embeddings = [0],
                            params = { depth = 2 } }]
    init_from = { dataset = "nas", model = "ours+motif" }   # start from that run (same profile, seed)
    epochs = 15                             # the graph-level stage's epochs (default: the profile's)
    curve = true                            # learning curves (`narbench run --curve`; default false)
"""

from __future__ import annotations

import numbers
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from narbench.eval.holdout import HOLDOUT_RULES
from narbench.harness.runner import MAX_SEED
from narbench.train.protocol import DEFAULT_PROTOCOL

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_BLOCK_KEYS = {"name", "datasets", "splits", "protocols", "models", "objectives", "seeds", "init_from", "epochs", "curve",
               "holdout"}
_MODEL_KEYS = {"model", "params", "encoder_params", "save_weights", "save_embeddings"}


class GridError(ValueError):
    """A grid file or grid option that cannot be expanded (the message names the place)."""


@dataclass(frozen=True)
class Model:
    """An encoder with a splitter and its parameters, and which side files its runs save."""

    encoder: str
    splitter: str | None
    params: tuple[tuple[str, Any], ...] = ()
    encoder_params: tuple[tuple[str, Any], ...] = ()  # the encoder's PARAMS (e.g. the ablations of `ours`)
    save_weights: bool = False
    save_embeddings: tuple[int, ...] = ()  # seeds whose query embeddings are saved

    @property
    def label(self) -> str:
        """'encoder+splitter' as a grid names it ('gcn+none'), without parameters: what --models matches."""
        return f"{self.encoder}+{self.splitter or 'none'}"

    @classmethod
    def parse(cls, entry: Any, where: str) -> "Model":
        if isinstance(entry, str):
            entry = {"model": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("model"), str):
            raise GridError(f"{where}: a model is 'encoder+splitter' or {{ model = 'encoder+splitter', ... }}, "
                            f"got {entry!r}")
        unknown = set(entry) - _MODEL_KEYS
        if unknown:
            raise GridError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(_MODEL_KEYS))}")
        enc, _, spl = entry["model"].partition("+")
        for key in ("params", "encoder_params"):
            if not isinstance(entry.get(key) or {}, dict):
                raise GridError(f"{where}: {key} is a table like {{ key = value }}, got {entry[key]!r}")
        emb = entry.get("save_embeddings", [])
        if emb is True or emb is False or emb == []:
            emb = (0,) if emb is True else ()
        else:
            emb = parse_seeds(emb if isinstance(emb, list) else [emb], where, "save_embeddings")
        return cls(enc, spl or None, tuple(sorted((entry.get("params") or {}).items())),
                   tuple(sorted((entry.get("encoder_params") or {}).items())),
                   bool(entry.get("save_weights", False)), emb)


@dataclass(frozen=True)
class Block:
    """One product of options; `init_from` names the (dataset, model) whose run of the same seed it starts from."""

    name: str
    datasets: tuple[str, ...]
    models: tuple[Model, ...]
    splits: tuple[str, ...] = ("standard",)
    protocols: tuple[str, ...] = (DEFAULT_PROTOCOL,)
    objectives: tuple[str | None, ...] = (None,)
    seeds: tuple[int, ...] | None = None
    init_from: tuple[str, Model] | None = None
    epochs: int | None = None  # the graph-level stage's epochs (None: the profile's)
    curve: bool = False  # learning-curve runs (`narbench run --curve`)
    holdout: str = "family"  # the curve's validation split (`narbench run --holdout`)


@dataclass(frozen=True)
class Grid:
    blocks: tuple[Block, ...]
    seeds: tuple[int, ...] = (0,)
    profile: str = "quick"


def parse_seeds(value: Any, where: str, key: str = "seeds") -> tuple[int, ...]:
    """Seeds as numpy and torch take them: integers from 0 to MAX_SEED (a TOML integer, not a string)."""
    seeds = _names(value, where, key) if not isinstance(value, tuple) else value
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= MAX_SEED:
            raise GridError(f"{where}: {key} must be integers from 0 to {MAX_SEED} (unquoted in TOML), got {seed!r}")
    return tuple(int(s) for s in seeds)


def _names(value: Any, where: str, key: str, kind: type | tuple[type, ...] = object) -> tuple:
    if isinstance(value, (str, int)):
        value = [value]
    if not isinstance(value, list) or not value:
        raise GridError(f"{where}: {key} must be a non-empty list, got {value!r}")
    bad = [v for v in value if not isinstance(v, kind)]
    if bad:
        raise GridError(f"{where}: {key} must be a list of names (strings), got {bad[0]!r}")
    return tuple(value)


def parse_grid(data: dict[str, Any], source: str = "grid") -> Grid:
    """A `Grid` from the parsed TOML (`source` names it in errors)."""
    unknown = set(data) - {"seeds", "profile", "block"}
    if unknown:
        raise GridError(f"{source}: unknown top-level key(s) {', '.join(sorted(unknown))}; known: block, profile, seeds")
    blocks, raw_blocks = [], data.get("block") or []
    if not isinstance(raw_blocks, list) or not all(isinstance(raw, dict) for raw in raw_blocks):
        raise GridError(f"{source}: block must be a list of tables ([[block]] in TOML, one per block), "
                        f"got {raw_blocks!r}"[:300])
    for i, raw in enumerate(raw_blocks):
        where = f"{source}: block {raw.get('name', i + 1)!r}"
        bad = set(raw) - _BLOCK_KEYS
        if bad:
            raise GridError(f"{where}: unknown key(s) {', '.join(sorted(bad))}; known: {', '.join(sorted(_BLOCK_KEYS))}")
        for key in ("datasets", "models"):
            if key not in raw:
                raise GridError(f"{where}: {key} is required")
        init = raw.get("init_from")
        if init is not None:
            if not isinstance(init, dict) or set(init) != {"dataset", "model"}:
                raise GridError(f"{where}: init_from is {{ dataset = NAME, model = 'encoder+splitter' }}, got {init!r}")
            init = (str(init["dataset"]), Model.parse(init["model"], where))
        epochs = raw.get("epochs")
        if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1):
            raise GridError(f"{where}: epochs must be a positive integer, got {epochs!r}")
        curve = raw.get("curve", False)
        if not isinstance(curve, bool):
            raise GridError(f"{where}: curve must be true or false, got {curve!r}")
        holdout = raw.get("holdout", "family")
        if holdout not in HOLDOUT_RULES:
            raise GridError(f"{where}: holdout must be one of {', '.join(HOLDOUT_RULES)}, got {holdout!r}")
        if holdout != "family" and not curve:
            raise GridError(f"{where}: holdout goes with curve = true")
        blocks.append(Block(
            epochs=epochs, curve=curve, holdout=holdout,
            name=str(raw.get("name", f"block{i + 1}")),
            datasets=_names(raw["datasets"], where, "datasets", str),
            models=tuple(Model.parse(m, where) for m in _names(raw["models"], where, "models")),
            splits=_names(raw.get("splits", ["standard"]), where, "splits", str),
            protocols=_names(raw.get("protocols", [DEFAULT_PROTOCOL]), where, "protocols", str),
            objectives=_names(raw["objectives"], where, "objectives", str) if "objectives" in raw else (None,),
            seeds=parse_seeds(raw["seeds"], where) if "seeds" in raw else None,
            init_from=init,
        ))
    if not blocks:
        raise GridError(f"{source}: no [[block]] in the grid")
    return Grid(tuple(blocks), parse_seeds(data.get("seeds", [0]), source),
                str(data.get("profile", "quick")))


def load_grid(path: str | Path) -> Grid:
    """Read a grid TOML file; `GridError` names the file and what is wrong."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"grid file {path} does not exist") from None
    except IsADirectoryError:
        raise GridError(f"grid file {path} is a folder, not a TOML file") from None
    except UnicodeDecodeError as exc:
        raise GridError(f"grid file {path} is not text (UTF-8 TOML): {exc.reason} at byte {exc.start}") from None
    except OSError as exc:
        raise GridError(f"grid file {path} cannot be read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise GridError(f"{path}: not valid TOML ({exc})") from exc
    return parse_grid(data, str(path))
