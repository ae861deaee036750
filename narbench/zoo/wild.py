"""The wild set: models from pip packages narbench has never looked at, with the family their design
expects, frozen before any search (`narbench/data/wild-1.0.csv`, docs/wild.md).

Each row names a package (pinned version), a builder (`module:attribute[.attribute]`) and its
keyword arguments (JSON; an object with a `__builder__` key is itself built, so a row can pass a
config object or a sub-module), an input spec, the expected family (a `real` family, several
joined by `|`, or `none` when no family of the corpus fits) and the reason from the design. It is a
test set: reported per release, never used to choose a rule, a setting or an encoder.

`run_all()` builds every row offline with random weights and runs its forward once (no graph is
extracted here: `narbench.zoo.wild_graphs` extracts them into the shipped `wild-1.0.narg`, which
`narbench.datasets.wild` reads); the packages are installed apart from narbench (docs/wild.md says
how). Reading and checking the table needs none of them.
"""

from __future__ import annotations

import csv
import json
import os
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator

from narbench.datasets.wild import NAME, NONE, families_of, outside_set  # NONE: "no family fits"

#: crossimpl's columns, then the package's pinned version and where its code comes from
COLUMNS = ("package", "model", "builder", "kwargs", "input", "family", "zoo_model", "reason", "version", "provenance")
#: a JSON object with this key is built: `{"__builder__": "module:attr", **kwargs}`
BUILDER_KEY = "__builder__"
#: input kinds drawn from a normal distribution (the name says what the tensor holds)
FLOAT_KINDS = frozenset({"image", "video", "audio", "spectrogram", "sequence", "tensor"})
#: input kind of integer ids in [0, high): `tokens:<shape>:<high>`
INT_KIND = "tokens"
#: the model zoos: a wild row's package is none of them and its model holds no module of theirs
ZOO_PACKAGES = ("timm", "torchvision", "transformers")


@dataclass(frozen=True)
class InputSpec:
    """One input of a model: `[name=]kind:AxBxC[:high]` (keyword input when named)."""

    kind: str
    shape: tuple[int, ...]
    high: int | None = None
    name: str | None = None


@dataclass(frozen=True)
class WildRow:
    """One model of the wild set: how to build and feed it, and what its design expects."""

    package: str
    model: str
    builder: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    input: str = ""
    family: str = ""
    zoo_model: str = ""
    reason: str = ""
    version: str = ""
    provenance: str = ""
    #: the set the row belongs to (`wild`, or `wildval`, the validation set): its identity's prefix
    collection: str = NAME

    @property
    def identity(self) -> str:
        return f"{self.collection}/{self.package}/{self.model}"

    @property
    def families(self) -> tuple[str, ...]:
        """The expected families; () when no family of the corpus fits (`none`)."""
        return families_of(self.family)

    @property
    def inputs(self) -> tuple[InputSpec, ...]:
        return parse_inputs(self.input)


def parse_inputs(spec: str) -> tuple[InputSpec, ...]:
    """The inputs of `spec`: `;`-separated `[name=]kind:AxBxC[:high]`; ValueError naming the bad part."""
    out = []
    for part in (p.strip() for p in spec.split(";")):
        name, eq, rest = part.partition("=")
        if not eq:
            name, rest = None, part
        kind, _, tail = rest.partition(":")
        shape_s, _, high_s = tail.partition(":")
        try:
            shape = tuple(int(s) for s in shape_s.split("x")) if shape_s else ()
            high = int(high_s) if high_s else None
        except ValueError:
            raise ValueError(f"input {part!r}: shape is AxBxC of integers (tokens add :high)") from None
        if kind not in FLOAT_KINDS and kind != INT_KIND:
            raise ValueError(f"input {part!r}: kind {kind!r} is not one of {sorted(FLOAT_KINDS | {INT_KIND})}")
        if not shape or min(shape) < 1:
            raise ValueError(f"input {part!r}: give a shape of positive sizes, e.g. image:1x3x224x224")
        if (kind == INT_KIND) != (high is not None and high > 0):
            raise ValueError(f"input {part!r}: token ids take an upper bound (tokens:1x16:1000), other kinds none")
        if name is not None and not name.isidentifier():
            raise ValueError(f"input {part!r}: {name!r} is not a keyword name")
        out.append(InputSpec(kind, shape, high, name))
    return tuple(out)


def make_inputs(specs: tuple[InputSpec, ...], device: str = "cpu", seed: int = 0) -> tuple[tuple, dict[str, Any]]:
    """(args, kwargs) for `model(*args, **kwargs)`: normal floats, or integer ids in [0, high)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for s in specs:
        if s.kind == INT_KIND:
            t = torch.randint(0, int(s.high or 1), s.shape, generator=gen)
        else:
            t = torch.randn(*s.shape, generator=gen)
        t = t.to(device)
        if s.name is None:
            args.append(t)
        else:
            kwargs[s.name] = t
    return tuple(args), kwargs


def table_path(name: str = NAME) -> Path:
    return Path(str(resources.files("narbench"))) / "data" / outside_set(name).table


def _parse_row(rec: dict[str, str], collection: str = NAME) -> WildRow:
    """One table record as a row; ValueError saying what is wrong with it."""
    empty = [c for c in COLUMNS if c not in ("kwargs", "zoo_model") and not rec.get(c)]
    if empty:
        raise ValueError(f"{', '.join(empty)} required")
    try:
        kwargs = json.loads(rec["kwargs"]) if rec["kwargs"] else {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"kwargs: {exc}") from None
    if not isinstance(kwargs, dict):
        raise ValueError("kwargs is a JSON object")
    row = WildRow(**{**rec, "kwargs": kwargs}, collection=collection)
    if ":" not in row.builder:
        raise ValueError(f"builder {row.builder!r} is not module:attribute")
    parse_inputs(row.input)
    return row


def read_table(path: str | os.PathLike | None = None, name: str = NAME) -> list[WildRow]:
    """The rows of the set's table (default: the wild set's; `path`: another file of its columns, rows of set
    `name`); ValueError naming the line of a malformed or repeated row."""
    path = Path(path) if path is not None else table_path(name)
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ValueError(f"{path}: columns {reader.fieldnames}, expected {list(COLUMNS)}")
        records = list(reader)
    rows: dict[str, WildRow] = {}
    for line, rec in enumerate(records, start=2):
        try:
            row = _parse_row(rec, name)
        except ValueError as exc:
            raise ValueError(f"{path}:{line}: {exc}") from None
        if rows.setdefault(row.identity, row) is not row:
            raise ValueError(f"{path}:{line}: {row.package} {row.model} is listed twice")
    return list(rows.values())


def construct(value: Any, resolve: Callable[[str], Callable[..., Any]]) -> Any:
    """`value` with every `{"__builder__": "module:attr", **kwargs}` built (innermost first) and JSON
    lists as tuples, as crossimpl reads its kwargs (some APIs assert tuples for stage sizes)."""
    if isinstance(value, list):
        return tuple(construct(v, resolve) for v in value)
    if isinstance(value, dict):
        built = {k: construct(v, resolve) for k, v in value.items() if k != BUILDER_KEY}
        return resolve(value[BUILDER_KEY])(**built) if BUILDER_KEY in value else built
    return value


@contextmanager
def no_network() -> Iterator[None]:
    """Within it, opening a network connection raises: a build that would download weights fails."""
    def refuse(*_a: Any, **_k: Any) -> Any:
        raise OSError("the wild set builds offline: this model tried to open a network connection")

    saved = socket.socket.connect, socket.create_connection
    socket.socket.connect, socket.create_connection = refuse, refuse  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        socket.socket.connect, socket.create_connection = saved  # type: ignore[method-assign]


def build_model(row: WildRow) -> Any:
    """The row's model, built offline with random weights, in eval mode."""
    from narbench.zoo.crossimpl import resolve

    with no_network():
        model = construct({BUILDER_KEY: row.builder, **row.kwargs}, resolve)
    return model.eval()


@dataclass(frozen=True)
class RunResult:
    """What running one row's forward gave: ok, or the error in one line."""

    identity: str
    ok: bool
    params: int = 0
    seconds: float = 0.0
    outputs: str = ""
    error: str = ""


def _describe(out: Any) -> tuple[str, bool]:
    """A short description of a forward's outputs and whether any depends on a parameter (tensors, and the
    tensors inside dicts, tuples, lists and dataclasses, as the extraction reads them)."""
    import dataclasses

    import torch

    if isinstance(out, torch.Tensor):
        return f"{list(out.shape)}", out.grad_fn is not None
    if dataclasses.is_dataclass(out) and not isinstance(out, type):
        out = {f.name: getattr(out, f.name, None) for f in dataclasses.fields(out)}
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        parts = [_describe(o) for o in out]
        return "(" + ", ".join(p[0] for p in parts) + ")", any(p[1] for p in parts)
    return type(out).__name__, False


def zoo_modules(model: Any) -> tuple[str, ...]:
    """The zoo packages (timm, torchvision, transformers) that any module of `model` is a class of:
    a model built from a zoo's modules is no wild model."""
    return tuple(sorted({type(m).__module__.split(".")[0] for m in model.modules()} & set(ZOO_PACKAGES)))


def run_row(row: WildRow) -> RunResult:
    """Build the row's model and run its forward once on its stated input (CPU)."""
    import torch

    from narbench.zoo.extract import eager_execution

    start = time.perf_counter()
    try:
        torch.manual_seed(0)
        model = build_model(row)
        zoo = zoo_modules(model)
        if zoo:
            raise RuntimeError(f"it is built from modules of {', '.join(zoo)}")
        args, kwargs = make_inputs(row.inputs)
        with no_network(), eager_execution():  # as extraction runs it, so a check leaves no compiled state behind
            out = model(*args, **kwargs)
        described, tracked = _describe(out)
        if not tracked:
            raise RuntimeError(f"no output of the forward depends on a parameter ({described})")
    except Exception as exc:  # noqa: BLE001 - reported per row
        return RunResult(row.identity, False, seconds=time.perf_counter() - start,
                         error=f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
    return RunResult(row.identity, True, int(sum(p.numel() for p in model.parameters())),
                     time.perf_counter() - start, described)


def run_all(rows: list[WildRow] | None = None, *,
            progress: Callable[[RunResult], None] | None = None) -> list[RunResult]:
    """Run every row (default: the shipped table), each once; a failing row is reported, not raised."""
    results = []
    for row in read_table() if rows is None else rows:
        result = run_row(row)
        results.append(result)
        if progress:
            progress(result)
    return results


def _print(r: RunResult) -> None:
    status = f"ok  {r.params:>11,} params  {r.seconds:6.1f}s  {r.outputs}" if r.ok else f"FAIL {r.error}"
    print(f"{r.identity}: {status}", flush=True)


def main() -> int:
    """Run every row and print one line per model; exit status 1 if any failed."""
    results = run_all(progress=_print)
    failed = [r.identity for r in results if not r.ok]
    print(f"{len(results) - len(failed)} of {len(results)} models built and ran" +
          (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
