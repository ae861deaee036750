"""The one registry mechanism: Python entry points.

Encoders, splitters and datasets are all found through entry-point groups, so the shipped ones
and a third party's are registered the same way (in a `pyproject.toml`):

    [project.entry-points."narbench.encoders"]
    my-encoder = "my_package.module:MyEncoder"
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Iterator
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table

GROUPS = {
    "encoder": "narbench.encoders",
    "splitter": "narbench.splitters",
    "dataset": "narbench.datasets",
}


class UnknownNameError(KeyError):
    """A name that no installed entry point registers; the message lists the known names."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        self.kind, self.name, self.known = kind, name, known
        super().__init__(f"unknown {kind} {name!r}; known {kind}s: {', '.join(known) or '(none)'}")

    def __str__(self) -> str:
        return self.args[0]


class RegistryError(RuntimeError):
    """A registered entry point exists but cannot be loaded."""


class PluginError(RegistryError):
    """A third party's plugin raised in a call narbench made: the message names the plugin, its
    distribution, the call, the plugin's exception and the line that raised it (`plugin_call`)."""


#: the longest plugin message a `PluginError` quotes (a plugin may raise with pages of text)
PLUGIN_MESSAGE_MAX = 300


def _entry_points(kind: str) -> dict[str, EntryPoint]:
    eps = entry_points(group=GROUPS[kind])
    return {ep.name: ep for ep in sorted(eps, key=lambda e: e.name)}


def names(kind: str) -> list[str]:
    """Sorted names registered for `kind` ('encoder', 'splitter' or 'dataset')."""
    return list(_entry_points(kind))


def _entry_point(kind: str, name: str) -> EntryPoint:
    eps = _entry_points(kind)
    if name not in eps:
        raise UnknownNameError(kind, name, list(eps))
    return eps[name]


def load(kind: str, name: str) -> Any:
    """The object registered as `name` for `kind`; `UnknownNameError` lists the known names."""
    ep = _entry_point(kind, name)
    try:
        return ep.load()
    except Exception as exc:  # a broken plugin must not look like an unknown name
        raise RegistryError(f"{kind} {name!r} is registered as {ep.value!r} but fails to load: {exc}") from exc


@contextlib.contextmanager
def plugin_call(kind: str, name: str, call: str) -> Iterator[None]:
    """Around one call into the registered `name` of `kind` (`call` says which, e.g. "fit()"): an
    exception of a third party's plugin becomes a one-line `PluginError` naming the plugin and the call.

    narbench's own plugins, and errors of narbench's own types (which already say what is wrong),
    pass unchanged: a traceback there is a narbench bug, not a plugin's."""
    try:
        yield
    except Exception as exc:
        error = _plugin_error(kind, name, call, exc)
        if error is None:
            raise
        raise error from exc


def _plugin_error(kind: str, name: str, call: str, exc: Exception) -> PluginError | None:
    if type(exc).__module__.split(".")[0] == "narbench":
        return None
    try:
        where = origin(kind, name)
    except UnknownNameError:  # not a registered plugin (an object handed in by the Python API)
        return None
    if where["distribution"] in (None, "narbench"):
        return None
    message = " ".join(str(exc).split())
    if len(message) > PLUGIN_MESSAGE_MAX:
        message = message[: PLUGIN_MESSAGE_MAX - 3] + "..."
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" (raised at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return PluginError(f"{kind} {name!r} (plugin {where['value']} of {where['distribution']} {where['version']}) "
                       f"failed in {call}: {type(exc).__name__}{': ' + message if message else ''}{at}")


def origin(kind: str, name: str) -> dict[str, str | None]:
    """Where `name` comes from: its entry point and the distribution (name, version) registering it.

    Recorded in result files, so a submitted encoder's results say which package version made them.
    """
    ep = _entry_point(kind, name)
    dist = ep.dist
    return {"name": name, "value": ep.value, "distribution": dist.metadata["Name"] if dist else None,
            "version": dist.version if dist else None}


def static_versions(kind: str) -> dict[str, str]:
    """name -> the `version` class attribute of each registered `kind` (e.g. the datasets), read
    from the source with `ast`, without importing it (`narbench --version` must not pay for
    torch); "?" where the source does not assign it as a plain string."""
    import ast
    import importlib.util

    out = {}
    for name, ep in _entry_points(kind).items():
        module, _, attr = ep.value.partition(":")
        version = "?"
        try:
            spec = importlib.util.find_spec(module.strip())
            tree = ast.parse(open(spec.origin, encoding="utf-8").read()) if spec and spec.origin else None
        except (ImportError, ValueError, OSError, SyntaxError):
            tree = None
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.ClassDef) and node.name == attr.strip().split(".")[-1]:
                for stmt in node.body:
                    if (isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == "version" for t in stmt.targets)
                            and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)):
                        version = stmt.value.value
        out[name] = version
    return out


def table(kind: str) -> Table:
    """The registered names of `kind` as a table: who provides each and its docstring's first line."""
    from rich.markup import escape
    from rich.table import Table

    out = Table(title=f"registered {kind}s (entry-point group {GROUPS[kind]})")
    out.add_column("name")
    out.add_column("provided by")
    out.add_column("description")
    for ep in sorted(entry_points(group=GROUPS[kind]), key=lambda e: e.name):
        dist = ep.dist.name if ep.dist else "?"
        try:
            lines = (load(kind, ep.name).__doc__ or "").strip().splitlines()  # none: no docstring
            doc = escape(lines[0]) if lines else "[dim](no description)[/dim]"
        except Exception as exc:  # list it anyway, saying why it cannot be used
            doc = f"[red]fails to load: {escape(str(exc))}[/red]"
        out.add_row(ep.name, dist, doc)
    return out
