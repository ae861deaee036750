"""What a TARGET's text says, before anything is looked at or run: its `FILE:NAME` / `MODULE:CLASS` parts
(`parse_colon`), whether it names a zoo model or a model given as code (`code_target`), and its kind for a
server that takes targets from clients (`kind_of`: an index graph name, code, or a path)."""

from __future__ import annotations

import re

ZOOS = ("timm", "torchvision", "transformers")
#: A dotted Python name (MODULE, CLASS).
NAME = re.compile(r"[A-Za-z_][\w.]*")


def parse_colon(target: str) -> tuple[str, str] | None:
    """(head, tail) of `HEAD:TAIL` when the tail is a name (no path separator in it), else None."""
    head, sep, tail = target.rpartition(":")
    return (head, tail) if sep and head and tail and "/" not in tail and "\\" not in tail else None


def code_target(target: str) -> tuple[str, str] | None:
    """(FILE.py or MODULE, CLASS) when `target` names a model as code, else None (a zoo name, a graph
    name or file). Decided by the text alone: nothing is imported and no file is looked at."""
    colon = parse_colon(target)
    if not colon or colon[0] in ZOOS:
        return None
    head, attr = colon
    if head.endswith(".py") or (NAME.fullmatch(head) and NAME.fullmatch(attr) and not head.endswith(".narg")):
        return head, attr
    return None


def kind_of(target: str, index) -> str:
    """`index` (a graph name of `index`), `code` (`FILE.py:CLASS`, `MODULE:CLASS`, a zoo name, a `.py`
    file) or `path` (anything else: a file), from the text and the index's names alone."""
    if index.row_of(target) is not None:
        return "index"
    colon = parse_colon(target)
    if (colon and colon[0] in ZOOS) or code_target(target) is not None or target.endswith(".py"):
        return "code"
    return "path"
