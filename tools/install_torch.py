#!/usr/bin/env python3
"""Install PyTorch's CPU build into a virtual environment and prove that it is one.

The Makefile's CPU recipe runs this with the environment's own python. It installs the torch
requirement from PyTorch's CPU wheel index (download.pytorch.org/whl/cpu) when that answers, else
with plain `pip install torch==X`: this project's machines keep the +cpu wheel in pip's
find-links, but on public PyPI plain pip gets the CUDA wheel. Hence the check afterwards:
`torch.version.cuda is None` and no nvidia-*/triton/cuda-* package left, else exit 1 with one line.

Where each package comes from: from PyTorch's index, torch alone (`--index-url` that index and
`--no-deps`), never with the default index as an extra one (pip takes a name from whichever index
offers the best version, so one index could serve a package meant to come from the other: the
dependency-confusion pattern); torch's own dependencies, then narbench (`--editable`), from the
default index. `--constraint FILE` (the Makefile's constraints.txt) applies to every install.
Imports neither narbench nor torch (torch may be missing, or the wrong build, until this ran);
everything it does to the environment goes through `pip` and `python -c` subprocesses.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable, Optional

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# distributions only the CUDA build needs (the old Makefile's CUDA_ONLY)
CUDA_ONLY = re.compile(r"^(nvidia-|triton|cuda-)", re.I)
GPU_LOCAL = ("cu", "rocm", "xpu")  # local version tags of PyTorch's GPU wheels: 2.13.0+cu128

LIST_DISTS = """
import importlib.metadata as md, json
out = {}
for d in md.distributions():
    name = d.metadata["Name"]
    if name:
        out[name.lower()] = {"version": d.version, "requires": d.requires or []}
print(json.dumps(out))
"""
TORCH_BUILD = "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda]))"

Runner = Callable[..., subprocess.CompletedProcess]
Probe = Callable[[str, float], Optional[str]]


class Failed(Exception):
    """One line for the user; main() prints it and exits 1."""


def run(cmd: list[str], capture: bool = False) -> subprocess.CompletedProcess:
    """Run a command: pip's output streams to the terminal, queries are captured."""
    return subprocess.run(cmd, capture_output=capture, text=True)


def probe(url: str, timeout: float) -> Optional[str]:
    """None when the index answers `url`, else why not (one short phrase)."""
    ctx = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as r:
            r.read(1)
        return None
    except urllib.error.HTTPError as e:
        return f"HTTP {e.code}"
    except urllib.error.URLError as e:
        return str(e.reason)
    except (OSError, ValueError) as e:
        return str(e) or type(e).__name__


def is_gpu_build(info: dict) -> bool:
    """Whether installed torch metadata is a GPU build: a +cuXXX version or CUDA packages required."""
    local = info["version"].partition("+")[2]
    return local.startswith(GPU_LOCAL) or any(
        re.match(r"(nvidia-|triton|pytorch-triton)", r, re.I) for r in info["requires"])


class Installer:
    """The steps, against one environment's python; `runner` and `prober` are swapped out by the tests."""

    def __init__(self, python: str, runner: Runner = run, prober: Probe = probe):
        self.python, self.run, self.probe = python, runner, prober

    def dists(self) -> dict:
        p = self.run([self.python, "-c", LIST_DISTS], capture=True)
        if p.returncode != 0:
            raise Failed(f"cannot list the packages of {self.python}: {last_line(p.stderr)}")
        return json.loads(p.stdout)

    def pip(self, *args: str) -> int:
        return self.run([self.python, "-m", "pip", *args]).returncode

    def install_torch(self, spec: list[str], index: str, timeout: float, pins: tuple[str, ...] = ()) -> tuple[str, str]:
        """Install `spec`: torch alone from `index` if it answers, then its dependencies from the default
        index; else all of it with plain pip. `pins`: pip's constraint options. Returns (source, why that source)."""
        have = self.dists()
        if "torch" in have and is_gpu_build(have["torch"]):
            say(f"replacing torch {have['torch']['version']} (a CUDA build)")
            if self.pip("uninstall", "-y", "torch") != 0:
                raise Failed("pip could not uninstall the CUDA build of torch")
        report = pip_version(have.get("pip", {}).get("version", "0")) >= (22, 2)
        tries, note = [], ""
        if index:
            host = urllib.parse.urlsplit(index).netloc or index
            err = self.probe(index.rstrip("/") + "/torch/", timeout)
            if err is None:  # that index alone, for torch alone
                tries.append((["--no-deps", "--index-url", index], f"PyTorch's CPU index {index}"))
            else:
                note = f"{host} unreachable ({err})"
                say(f"{note}; installing with plain pip (local wheel cache / find-links, else the configured index)")
        tries.append(([], f"plain pip: {note}" if note else "plain pip"))
        with tempfile.TemporaryDirectory() as tmp:
            for n, (where, how) in enumerate(tries):
                out = Path(tmp) / f"report{n}.json"
                rc = self.pip("install", *spec, *where, *pins, *(["--report", str(out)] if report else []))
                if rc == 0 and where:  # torch is in: its dependencies from the default index (torch kept)
                    if self.pip("install", *spec, *pins) != 0:
                        raise Failed(f"pip could not install the dependencies of {' '.join(spec)} from the default "
                                     "index")
                    return source_of(out), f"{how}; its dependencies from the default index"
                if rc == 0:
                    return source_of(out), how
                if n + 1 < len(tries):
                    note = f"pip install from {where[-1]} failed (exit {rc})"
                    tries[n + 1] = ([], f"plain pip: {note}")
                    say(f"{note}; falling back to plain pip")
            raise Failed(f"pip could not install {' '.join(spec)} (exit {rc}; tried: {'; '.join(t[1] for t in tries)})")

    def remove_cuda_only(self) -> None:
        """Uninstall what only the CUDA build needs (left by a CUDA build or pulled in by plain pip)."""
        names = self.leftovers()
        if names:
            say(f"removing {len(names)} CUDA-only packages: {' '.join(names)}")
            if self.pip("uninstall", "-y", *names) != 0:
                raise Failed(f"pip could not uninstall {' '.join(names)}")

    def torch_build(self) -> tuple[str, Optional[str]]:
        """(torch.__version__, torch.version.cuda) as the environment's python imports them."""
        p = self.run([self.python, "-c", TORCH_BUILD], capture=True)
        if p.returncode != 0:
            raise Failed(f"torch does not import in {self.python}: {last_line(p.stderr)}")
        version, cuda = json.loads(p.stdout.strip().splitlines()[-1])
        return version, cuda

    def leftovers(self) -> list[str]:
        return sorted(n for n in self.dists() if CUDA_ONLY.match(n))


def pip_version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:2]) or (0,)


def source_of(report: Path) -> str:
    """Where pip really took torch from, by its --report: a local wheel, an index's host, or kept as it was."""
    if not report.exists():  # pip < 22.2 writes no report
        return "installed"
    for item in json.loads(report.read_text()).get("install", []):
        if item.get("metadata", {}).get("name", "").lower() == "torch":
            url = urllib.parse.unquote(item.get("download_info", {}).get("url", ""))
            if url.startswith("file://"):
                return f"installed from the local wheel {url[len('file://'):]}"
            return f"installed from {urllib.parse.urlsplit(url).netloc or url}"
    return "already installed, kept"


def last_line(text: str) -> str:
    lines = [x for x in (text or "").strip().splitlines() if x.strip()]
    return lines[-1].strip() if lines else "no output"


def say(msg: str) -> None:
    print(f"install_torch: {msg}", flush=True)


def main(argv: Optional[list[str]] = None, runner: Runner = run, prober: Probe = probe) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="the environment's python (default: this one)")
    ap.add_argument("--torch", default="torch==2.13.0", help="the requirement, as pip arguments")
    ap.add_argument("--index", default=CPU_INDEX, help="PyTorch's CPU wheel index; '' for plain pip only")
    ap.add_argument("--editable", default="", help="then `pip install -e` this (e.g. '.[test]'), before the check")
    ap.add_argument("--constraint", default="", help="pip constraints file for every install (e.g. constraints.txt)")
    ap.add_argument("--why", default="asked for", help="why the CPU build, for the last line")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the index to answer")
    a = ap.parse_args(argv)
    env = Installer(a.python, runner, prober)
    venv = Path(a.python).parent.parent
    pins = ("-c", a.constraint) if a.constraint else ()
    try:
        if a.constraint and not Path(a.constraint).is_file():
            raise Failed(f"constraints file {a.constraint} not found")
        source, how = env.install_torch(shlex.split(a.torch), a.index, a.timeout, pins)
        if a.editable and env.pip("install", *pins, "-e", a.editable) != 0:
            raise Failed(f"pip install -e {a.editable} failed")
        version, cuda = env.torch_build()  # before removing CUDA libraries, which a CUDA build needs to import
        if cuda is not None:
            raise Failed(f"torch {version} ({source}; {how}) is a CUDA build (torch.version.cuda = {cuda}), "
                         "not the CPU build: make PyTorch's CPU index reachable (TORCH_CPU_INDEX) or put its "
                         "+cpu wheel in pip's find-links")
        env.remove_cuda_only()
        if env.leftovers():
            raise Failed(f"CUDA-only packages still installed next to the CPU build: {' '.join(env.leftovers())}")
    except Failed as e:
        print(f"install_torch: error: {e}", file=sys.stderr, flush=True)
        return 1
    say(f"PyTorch {version}, the CPU build (torch.version.cuda is None), {source} ({how}), in {venv}; "
        f"CPU build because: {a.why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
