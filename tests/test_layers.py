"""The house as drawn in docs/development.md: which part of narbench may import which.

Every import in narbench's code (module level and inside functions alike, read with `ast`) is
checked against `MAY_IMPORT`; the table itself must point down, part by part (`LAYER`), and
every subpackage's docstring must say the same as its row. The modules must not import one
another in a circle. Every room is one a reader takes in at a sitting: no module over 420 lines, no
function over 100 (the package, its plugins and benchmarks/), and argument parsing only in the
command line's rooms, `narbench/cli/`.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: each part: the modules it holds, by dotted prefix (the longest prefix names a module's part)
PARTS = {
    "package": ("narbench",),
    "core": ("narbench.core",),
    "data": ("narbench.data",),
    "train": ("narbench.train",),
    "eval": ("narbench.eval",),
    "splitters": ("narbench.splitters",),
    "baselines": ("narbench.baselines",),
    "datasets": ("narbench.datasets",),
    "zoo": ("narbench.zoo",),
    "harness": ("narbench.harness",),
    "leaderboard": ("narbench.leaderboard",),
    "search_engine": ("narbench.search_engine",),
    "explorer": ("narbench.explorer",),
    "faces": ("narbench.__main__", "narbench.cli",
              "narbench.process",
              "narbench.pytest_plugin", "narbench.encoder"),
}

#: the floor of each part: an arrow goes from a higher floor to a lower one, never level or up
LAYER = {"package": 0, "core": 0, "data": 1, "train": 2, "eval": 3, "splitters": 3, "baselines": 4, "harness": 4,
         "leaderboard": 4, "datasets": 5, "zoo": 6, "search_engine": 7, "explorer": 8, "faces": 9}

#: which parts each part may import (besides itself); anyone may import `package` (`__version__`)
MAY_IMPORT = {
    "package": set(),
    "core": set(),
    "data": {"core"},
    "train": {"core", "data"},
    "eval": {"core", "data", "train"},
    "splitters": {"core", "data", "train"},
    "baselines": {"core", "data", "train", "eval", "splitters"},
    "harness": {"core", "data", "train", "eval"},
    "leaderboard": {"core", "data", "train", "eval"},
    "datasets": {"core", "data", "train", "splitters", "baselines"},
    "zoo": {"core", "data", "datasets"},
    "search_engine": {"core", "data", "train", "eval", "harness", "zoo"},
    "explorer": {"data", "eval", "splitters", "leaderboard", "search_engine"},
    "faces": {"core", "data", "train", "eval", "splitters", "baselines", "harness", "leaderboard", "datasets", "zoo",
              "search_engine", "explorer"},
}

#: where each namespace's sources lie (baselines/ and splitters/ install as narbench.baselines/.splitters)
SOURCES = {"narbench": "narbench", "narbench.baselines": "baselines", "narbench.splitters": "splitters"}


def modules(root: Path) -> dict[str, Path]:
    """Every module of the tree under `root`, by dotted name."""
    out = {}
    for package, folder in SOURCES.items():
        base = root / folder
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base).with_suffix("").parts
            if rel[-1] == "__init__":
                rel = rel[:-1]
            name = ".".join((package, *rel))
            if package == "narbench" and name.split(".")[1:2] and f"narbench.{name.split('.')[1]}" in SOURCES:
                continue  # not a source folder of this tree
            out[name] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, module) for every import of narbench in the module, wherever it stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                full = f"{mod}.{a.name}"
                out.append((node.lineno, full if full in known else mod))
    return [(line, mod) for line, mod in out if mod == "narbench" or mod.startswith("narbench.")]


def part_of(module: str) -> str | None:
    best = None
    for part, prefixes in PARTS.items():
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (part, prefix)
    if best and best[1] == "narbench" and module != "narbench":
        return None  # a module at the top of the package that no part names
    return best[0] if best else None


def violations(root: Path) -> list[str]:
    """Each import that the table does not allow, and each module that no part holds, one line each."""
    known = modules(root)
    out = []
    for name, path in known.items():
        here = part_of(name)
        where = path.relative_to(root)
        if here is None:
            out.append(f"{where}: module {name} is in no part of the house (tests/test_layers.py PARTS)")
            continue
        for line, mod in imports(name, path, known):
            there = part_of(mod)
            if there is None:
                out.append(f"{where}:{line}: imports {mod}, which is in no part (a module moved or removed?)")
            elif there != here and there != "package" and there not in MAY_IMPORT[here]:
                out.append(f"{where}:{line}: {here} imports {mod} ({there}); {here} may import "
                           f"{', '.join(sorted(MAY_IMPORT[here])) or 'nothing of narbench'}")
    return out


def cycles(root: Path) -> list[list[str]]:
    """The modules that import one another in a circle (strongly connected, two or more)."""
    known = modules(root)
    graph = {n: {m for _, m in imports(n, p, known) if m in known and m != n} for n, p in known.items()}
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# ----------------------------------------------------------------------------- the house


def test_every_import_is_allowed_by_the_table():
    assert violations(ROOT) == []


def test_no_module_imports_another_in_a_circle():
    assert cycles(ROOT) == []


def test_the_table_points_down_a_layer():
    assert set(PARTS) == set(LAYER) == set(MAY_IMPORT)
    for part, allowed in MAY_IMPORT.items():
        for other in allowed:
            assert LAYER[other] < LAYER[part], f"{part} (floor {LAYER[part]}) may import {other} (floor {LAYER[other]})"


def test_each_subpackage_says_what_it_may_import():
    for part, (prefix, *_) in PARTS.items():
        if part in ("package", "faces"):
            continue  # the top of the package: no subpackage
        namespace = prefix if prefix in SOURCES else "narbench"
        init = ROOT / SOURCES[namespace] / Path(*prefix.split(".")[len(namespace.split(".")):]) / "__init__.py"
        said = re.search(r"May import: (.*?)(?:\n\n|$)", ast.get_docstring(ast.parse(init.read_text())), re.S)
        assert said, f"{init} says nothing about what it may import"
        named = set(re.findall(r"narbench\.(\w+)", said.group(1)))
        expected = {PARTS[p][0].split(".")[1] for p in MAY_IMPORT[part]}
        assert named == expected, f"{init}: the docstring names {sorted(named)}, the table {sorted(expected)}"


def test_the_package_face_imports_nothing_when_imported():
    """`narbench/__init__.py` hands its names on lazily: importing it loads no other part."""
    tree = ast.parse((ROOT / "narbench" / "__init__.py").read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert top == []


# ----------------------------------------------------------------------------- the check itself


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in {"narbench/__init__.py": "", "narbench/data/__init__.py": "", "narbench/harness/__init__.py": "",
                      "baselines/__init__.py": "", "splitters/__init__.py": "", **files}.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


def test_an_upward_import_is_found(tmp_path):
    root = _tree(tmp_path, {
        "narbench/data/graph.py": "import numpy\n",
        "narbench/harness/runner.py": "from narbench.data.graph import ArchGraph\n",
    })
    assert violations(root) == []
    (root / "narbench/data/graph.py").write_text("import numpy\nfrom narbench.harness import runner\n")
    found = violations(root)
    assert len(found) == 1 and "narbench/data/graph.py:2: data imports narbench.harness.runner (harness)" in found[0]


def test_an_upward_import_inside_a_function_or_relative_is_found(tmp_path):
    root = _tree(tmp_path, {
        "narbench/data/graph.py": "def f():\n    from ..harness.runner import run\n    return run\n",
        "narbench/harness/runner.py": "def run():\n    pass\n",
        "baselines/gnn.py": "def g():\n    import narbench.harness.runner\n",
    })
    found = violations(root)
    assert len(found) == 2
    assert "narbench/data/graph.py:2: data imports narbench.harness.runner" in found[0]
    assert "baselines/gnn.py:2: baselines imports narbench.harness.runner" in found[1]


def test_an_old_path_or_a_loose_module_is_found(tmp_path):
    root = _tree(tmp_path, {"narbench/data/graph.py": "from narbench.store import read_graphs\n",
                            "narbench/loose.py": ""})
    found = violations(root)
    assert any("imports narbench.store, which is in no part" in f for f in found)
    assert any("module narbench.loose is in no part" in f for f in found)


def test_a_circle_is_found(tmp_path):
    root = _tree(tmp_path, {"narbench/data/a.py": "from narbench.data import b\n",
                            "narbench/data/b.py": "def f():\n    from narbench.data.a import x\n",
                            "narbench/data/c.py": "from narbench.data import a\n"})
    assert cycles(root) == [["narbench.data.a", "narbench.data.b"]]


# ----------------------------------------------------------------------------- the public face


def test_the_public_api_stays_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        import narbench
        from narbench.encoder import Encoder
        from narbench.train.encoder import Encoder as defined

        assert Encoder is defined
        assert callable(narbench.search) and callable(narbench.run) and callable(narbench.load_dataset)


# ----------------------------------------------------------------------------- the rooms' size

#: the most lines of a module, and of a function (its `def` to its last line, docstring included): a room
#: a reader takes in at one sitting (issue 61)
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 420, 100
#: the folders whose modules are held to those sizes: the package, its plugins, the benchmark scripts
SIZED = ("narbench", "baselines", "splitters", "benchmarks")
#: argument parsing lives in the command line's rooms only
CLI_FOLDER = "narbench/cli"


def _sources(root: Path, folders=SIZED):
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            yield path.relative_to(root), path.read_text()


def oversized(root: Path) -> list[str]:
    """Each module over MAX_MODULE_LINES and each function over MAX_FUNCTION_LINES, one line each."""
    out = []
    for rel, text in _sources(root):
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            out.append(f"{rel}: {lines} lines (at most {MAX_MODULE_LINES}: split it by concept)")
        for node in ast.walk(ast.parse(text, str(rel))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    out.append(f"{rel}:{node.lineno}: function {node.name} is {length} lines "
                               f"(at most {MAX_FUNCTION_LINES})")
    return out


def argparse_outside_cli(root: Path) -> list[str]:
    """Each import of argparse in the package (narbench, baselines, splitters) outside narbench/cli/."""
    out = []
    for rel, text in _sources(root, ("narbench", "baselines", "splitters")):
        if rel.as_posix().startswith(CLI_FOLDER + "/"):
            continue
        for node in ast.walk(ast.parse(text, str(rel))):
            names = [a.name for a in node.names] if isinstance(node, (ast.Import, ast.ImportFrom)) else []
            if (isinstance(node, ast.Import) and "argparse" in names) or \
                    (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse"):
                out.append(f"{rel}:{node.lineno}: imports argparse (argument parsing belongs in {CLI_FOLDER}/)")
    return out


def test_no_module_or_function_is_larger_than_a_room():
    assert oversized(ROOT) == []


def test_argument_parsing_is_only_in_the_command_line():
    assert argparse_outside_cli(ROOT) == []


def test_an_oversized_module_or_function_and_a_stray_argparse_are_found(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    root = _tree(tmp_path, {"narbench/data/long.py": f"def long():\n{body}\n",
                            "narbench/data/ok.py": "x = 1\n" * MAX_MODULE_LINES,
                            "narbench/data/big.py": "x = 1\n" * (MAX_MODULE_LINES + 1),
                            "narbench/data/parse.py": "from argparse import ArgumentParser\n",
                            "narbench/cli/run.py": "import argparse\n"})
    for folder in ("benchmarks",):
        (root / folder).mkdir(exist_ok=True)
    found = oversized(root)
    assert found == [f"narbench/data/big.py: {MAX_MODULE_LINES + 1} lines (at most {MAX_MODULE_LINES}: split it by concept)",
                     f"narbench/data/long.py:1: function long is {MAX_FUNCTION_LINES + 1} lines (at most {MAX_FUNCTION_LINES})"]
    assert argparse_outside_cli(root) == ["narbench/data/parse.py:1: imports argparse (argument parsing belongs in "
                                          "narbench/cli/)"]
