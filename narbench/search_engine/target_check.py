"""What a search may run or read of a target that a client sent: a server's policy (`Served`), and the check
that a model given as code names an `nn.Module` class defined where it says (`check_code_target`).

`FILE.py:CLASS` and `MODULE:CLASS` make narbench call what they name. A server that runs them for
a client (`narbench explore --allow-code`) first checks, after importing the file or module and
before calling anything, that the name is a `torch.nn.Module` subclass whose `__module__` is the
module loaded from that file or module name. So an installed module's functions and anything the
module merely imports (`http.server:test`, `os:system`, `mymodel:Linear` from `torch.nn`) are refused
without being called. The CLI and `narbench.search` take functions returning a model too; this
check is for callers that must not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from narbench.search_engine._target_inputs import TargetError
from narbench.search_engine._target_model import import_file, import_module, load_attr
from narbench.search_engine.target_text import code_target


@dataclass(frozen=True)
class Served:
    """Which targets a search takes from a client (`narbench explore`), each read as its text's kind says
    (`narbench.search_engine.target_text.kind_of`), never otherwise:

    * `index`: a graph name of the index, always; looked up in the index alone, no file looked at;
    * `code` (`FILE.py:CLASS`, `MODULE:CLASS`, a zoo name): only when `code`; always in a child process,
      where `FILE.py:CLASS` and `MODULE:CLASS` must pass `check_code_target` before anything is built;
    * `path` (a graph file on the server): only when `paths`; a regular file of at most `max_file` bytes,
      read as data; any failure is `TargetRefused(unreadable=True)`, which says nothing of the file.
    """

    code: bool = False
    paths: bool = False
    max_file: int = 64 << 20


class TargetRefused(TargetError):
    """A client's target that a search does not take (`Served`): its `kind` is not allowed, or (`unreadable`)
    it is a path that is no graph file the server reads. The words for the client are the server's."""

    def __init__(self, target: str, kind: str, unreadable: bool = False) -> None:
        super().__init__(f"{target!r}: {'unreadable ' if unreadable else ''}{kind} target refused")
        self.target, self.kind, self.unreadable = target, kind, unreadable


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
        module, where = import_file(path), str(path)
    else:
        if Path(head).exists():  # resolve_target would read it as a graph file, not import a module
            raise TargetError(f"{head!r} is a path, not a module name; give FILE.py:CLASS or MODULE:CLASS")
        module, where = import_module(head), f"module {head}"
    obj = load_attr(target, module, attr, where)
    if not (isinstance(obj, type) and issubclass(obj, torch.nn.Module)):
        kind = "class" if isinstance(obj, type) else type(obj).__name__
        raise TargetError(f"{target}: {attr} is a {kind}, not an nn.Module subclass; name a model class "
                          f"defined in {where}")
    if obj.__module__ != module.__name__:
        raise TargetError(f"{target}: {attr} is defined in {obj.__module__}, not in {where}; name a model class "
                          "defined there")
    return obj
