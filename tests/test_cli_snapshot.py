"""The command line's face does not move under a refactor: every `--help` text and the exit status (and
one-line error) of a set of bad invocations equal the snapshot `tests/data/cli-snapshot.json`, taken
before the command line was split into `narbench/cli/` (issue 61).

A deliberate change of a help text or an exit status re-writes the snapshot, and the commit says why:
    python -m tests.test_cli_snapshot --write
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SNAPSHOT = Path(__file__).parent / "data" / "cli-snapshot.json"
ROOT = Path(__file__).resolve().parents[1]
COLUMNS = "100"

#: every `narbench` subcommand path whose --help is kept
COMMANDS = [[], ["run"], ["build-real"], ["build-crossimpl"], ["datasheet"], ["leaderboard"], ["sweep"],
            ["runs"], ["search"], ["index"], ["index", "build"], ["index", "info"], ["explore"], ["check"],
            ["datasets"], ["encoders"], ["splitters"]]

#: the documented `python -m` build and report scripts (README, docs/): their --help, by the snapshot's key
#: (the module path when the snapshot was taken) -> the module that answers now (inside `narbench/cli/`)
MODULES = {"narbench.zoo.taxonomy_build": "narbench.cli.taxonomy_build",
           "narbench.leaderboard.curves": "narbench.cli.curves",
           "narbench.leaderboard.declared": "narbench.cli.declared",
           "narbench.cli_ceiling": "narbench.cli.ceiling"}

_MISSING = "/nonexistent-narbench-snapshot"

#: invocations that must fail (or answer) at once, before any data is loaded or any model trained
PROBES: list[list[str]] = [
    [],
    ["nosuch"],
    *[[*c, "--no-such-flag"] for c in COMMANDS if c],
    ["run", "--encoder", "nope"],
    ["run", "--encoder", "gcn", "--splitter", "nope"],
    ["run", "--encoder", "gcn", "--dataset", "nope"],
    ["run", "--encoder", "gcn", "--splitter", "motif"],
    ["run", "--encoder", "gcn", "--device", "banana"],
    ["run", "--encoder", "gcn", "--seed", "-1"],
    ["run", "--encoder", "gcn", "--epochs", "0"],
    ["run", "--encoder", "gcn", "--param", "nokeyvalue"],
    ["run", "--encoder", "gcn", "--profile", "nope"],
    ["run", "--encoder", "gcn", "--init-from", f"{_MISSING}.pt"],
    ["leaderboard", "--results", _MISSING],
    ["leaderboard", "--test", "nope"],
    ["check", "--baseline", f"{_MISSING}.json"],
    ["sweep", f"{_MISSING}.toml"],
    ["runs", _MISSING],
    ["search"],
    ["search", f"{_MISSING}.py:Model"],
    ["search", "resnet", "--index", f"{_MISSING}.nari"],
    ["search", "resnet", "--encoder", "nosuch"],
    ["index", "build", "--max-dim", "0"],
    ["index", "info", "--index", f"{_MISSING}.nari"],
    ["index", "build", "--encoder", "nosuch"],
    ["index"],
    ["explore", "--port", "-1"],
    ["explore", "--port", "70000"],
    ["datasheet", "nope"],
    ["build-real", "--zoo", "nope"],
]


def _clean(text: str) -> str:
    """Output without what differs between hosts and runs: the checkout's folder, timings, versions."""
    text = text.replace(str(ROOT), "<ROOT>")
    text = re.sub(r"\b\d+\.\ds\b", "<SECONDS>", text)
    return re.sub(r"narbench \S+ \(torch [^)]*\)", "narbench <VERSIONS>", text)


def _main(argv: list[str]) -> tuple[int, str, str]:
    from narbench.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, _clean(out.getvalue()), _clean(err.getvalue())


def _module_help(module: str) -> str:
    env = {**os.environ, "COLUMNS": COLUMNS, "NARBENCH_NO_PROGRESS": "1"}
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return _clean(done.stdout)


def _renamed(text: str, old: str, new: str) -> str:
    """A module's help with the program name `python -m <old>` read as `python -m <new>`, and its usage block
    (up to the first blank line) with the whitespace folded: argparse wraps the usage to the program name's
    length, so only the name and where the usage lines break may differ from the snapshot."""
    text = text.replace(f"python -m {old}", f"python -m {new}")
    usage, blank, rest = text.partition("\n\n")
    return " ".join(usage.split()) + blank + rest


def capture(modules: bool = True) -> dict:
    """The snapshot as it stands now: {"help": {...}, "modules": {...}, "exits": {...}}."""
    snap: dict = {"help": {}, "modules": {}, "exits": {}}
    for command in COMMANDS:
        code, out, _ = _main([*command, "--help"])
        assert code == 0, command
        snap["help"][" ".join(["narbench", *command])] = out
    for argv in PROBES:
        code, _, err = _main(argv)
        snap["exits"][" ".join(argv) or "(no arguments)"] = {"code": code, "stderr": err}
    if modules:
        for key, module in MODULES.items():
            snap["modules"][key] = _module_help(module)
    return snap


@pytest.fixture(scope="module")
def snapshot() -> dict:
    return json.loads(SNAPSHOT.read_text())


@pytest.fixture()
def columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", COLUMNS)
    monkeypatch.setenv("NARBENCH_NO_PROGRESS", "1")


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "narbench")
def test_help_text_is_the_snapshot(command, snapshot, columns):
    code, out, _ = _main([*command, "--help"])
    assert code == 0
    assert out == snapshot["help"][" ".join(["narbench", *command])]


@pytest.mark.parametrize("argv", PROBES, ids=lambda a: " ".join(a) or "(no arguments)")
def test_exit_status_and_error_are_the_snapshot(argv, snapshot, columns, no_training):
    code, _, err = _main(argv)
    expected = snapshot["exits"][" ".join(argv) or "(no arguments)"]
    assert (code, err) == (expected["code"], expected["stderr"])


@pytest.mark.parametrize("key", MODULES)
def test_documented_module_help_is_the_snapshot(key, snapshot):
    module = MODULES[key]
    assert _renamed(_module_help(module), module, module) == _renamed(snapshot["modules"][key], key, module)


if __name__ == "__main__":  # python -m tests.test_cli_snapshot --write
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.test_cli_snapshot --write")
    os.environ.update(COLUMNS=COLUMNS, NARBENCH_NO_PROGRESS="1")
    SNAPSHOT.write_text(json.dumps(capture(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}")
