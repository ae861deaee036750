"""Whether a model given as code may be built: it must name an `nn.Module` class defined where it says.

`FILE.py:CLASS` and `MODULE:CLASS` make narbench call what they name. A server that runs them for
a client (`narbench explore --allow-code`) first checks, after importing the file or module and
before calling anything, that the name is a `torch.nn.Module` subclass whose `__module__` is the
module loaded from that file or module name. So an installed module's functions and anything the
module merely imports (`http.server:test`, `os:system`, `mymodel:Linear` from `torch.nn`) are refused
without being called. The CLI and `narbench.search` take functions returning a model too; this
check is for callers that must not.
"""

from __future__ import annotations

import re
from pathlib import Path

from narbench.search_engine.target import ZOOS, TargetError, _import_file, _import_module, _load_attr, _parse_colon

_NAME = re.compile(r"[A-Za-z_][\w.]*")


def code_target(target: str) -> tuple[str, str] | None:
    """(FILE.py or MODULE, CLASS) when `target` names a model as code, else None (a zoo name, a graph
    name or file). Decided by the text alone: nothing is imported and no file is looked at."""
    colon = _parse_colon(target)
    if not colon or colon[0] in ZOOS:
        return None
    head, attr = colon
    if head.endswith(".py") or (_NAME.fullmatch(head) and _NAME.fullmatch(attr) and not head.endswith(".narg")):
        return head, attr
    return None


def check_code_target(target: str) -> type:
    """Import the file or module `target` names and return its class, or raise TargetError (one line)
    when the name is not an `nn.Module` subclass defined there. Imports (the module's top level runs),
    never calls what it names."""
    import torch

    parsed = code_target(target)
    if parsed is None:
        raise TargetError(f"{target!r} is not a model given as code (FILE.py:CLASS or MODULE:CLASS)")
    head, attr = parsed
    if head.endswith(".py"):
        path = Path(head)
        if not path.is_file():
            raise TargetError(f"file not found: {path}; check the path (TARGET is FILE.py:CLASS)")
        module, where = _import_file(path), str(path)
    else:
        if Path(head).exists():  # resolve_target would read it as a graph file, not import a module
            raise TargetError(f"{head!r} is a path, not a module name; give FILE.py:CLASS or MODULE:CLASS")
        module, where = _import_module(head), f"module {head}"
    obj = _load_attr(target, module, attr, where)
    if not (isinstance(obj, type) and issubclass(obj, torch.nn.Module)):
        kind = "class" if isinstance(obj, type) else type(obj).__name__
        raise TargetError(f"{target}: {attr} is a {kind}, not an nn.Module subclass; name a model class "
                          f"defined in {where}")
    if obj.__module__ != module.__name__:
        raise TargetError(f"{target}: {attr} is defined in {obj.__module__}, not in {where}; name a model class "
                          "defined there")
    return obj
