"""`narbench search` on user code that misbehaves: a forward that never returns (`--timeout`, in a
child process), a model that calls `sys.exit()`, a forward that returns None; each is one line and exit status 2,
with nothing left in the temp dir. Also: the API leaves no `torchinductor_<user>` folder there,
says once that a first search loads torch, and prints its hits as a table."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from narbench.cli import main
from narbench.search_engine.engine import search
from narbench.search_engine.index_file import load_index
from narbench.search_engine.target import TargetError

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "tests" / "search_models.py"

#: Hand-written misbehaving models (written to a temp folder: tests/search_models.py's class list is asserted).
BAD_MODELS = textwrap.dedent('''
    import sys
    import time

    import torch
    from torch import nn


    class Base(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)


    class Loops(Base):
        def forward(self, x):
            while True:
                pass


    class Sleeps(Base):
        def forward(self, x):
            time.sleep(3600)
            return self.fc(x)


    class Swallows(Base):
        """Catches every exception (an alarm too) and sleeps on."""

        def forward(self, x):
            while True:
                try:
                    time.sleep(3600)
                except BaseException:
                    continue


    class IgnoresTerm(Swallows):
        def forward(self, x):
            import signal

            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            return super().forward(x)


    class QuitsInInit(Base):
        def __init__(self):
            super().__init__()
            sys.exit(3)


    class QuitsInForward(Base):
        def forward(self, x):
            sys.exit("no")


    class ReturnsNone(Base):
        def forward(self, x):
            self.fc(x)


    class ReturnsNumber(Base):
        def forward(self, x):
            return 3
''')


@pytest.fixture
def bad(tmp_path) -> Path:
    path = tmp_path / "bad_models.py"
    path.write_text(BAD_MODELS)
    return path


@pytest.fixture
def temp_dir(tmp_path, monkeypatch) -> Path:
    """An empty system temp dir for the test (tempfile's and child processes'); asserted empty after."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv("NARBENCH_NO_PROGRESS", "1")
    yield tmp
    assert sorted(os.listdir(tmp)) == []


def _one_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err and captured.out == "", captured
    return lines[0]


@pytest.mark.parametrize("cls", ["Loops", "Sleeps"])
def test_a_forward_that_never_returns_stops_at_the_timeout(cls, bad, temp_dir, capsys):
    t0 = time.monotonic()
    assert main(["search", f"{bad}:{cls}", "--timeout", "2"]) == 2
    assert time.monotonic() - t0 < 30
    line = _one_line(capsys)
    assert line.startswith(f"narbench search: error: {bad}:{cls} did not finish within 2 s "
                           "(stopped in its forward pass, on meta)"), line
    assert "--timeout SECONDS" in line


@pytest.mark.parametrize("isolate", [None, False])  # in a child (a time limit), or here by the alarm
def test_the_api_timeout_gives_an_instance_its_weights_back(isolate, bad, monkeypatch):
    import importlib.util

    monkeypatch.syspath_prepend(str(bad.parent))
    spec = importlib.util.spec_from_file_location("bad_models_api", bad)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import signal

    model = module.Loops()
    weight, handler = model.fc.weight, signal.getsignal(signal.SIGALRM)
    with pytest.raises(TargetError, match=r"^Loops did not finish within 1 s \(stopped in its forward pass"):
        search(model, timeout=1, isolate=isolate, progress=False)
    assert model.fc.weight is weight and weight.device.type == "cpu"  # the meta copies are swapped back
    assert signal.getsignal(signal.SIGALRM) is handler


def test_an_outer_alarm_is_rearmed_after_the_limit():
    """A caller's own interval timer (pytest-timeout's) keeps running across a search's limit."""
    import signal

    from narbench.search_engine._target_run import time_limit

    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    outer, interval = signal.setitimer(signal.ITIMER_REAL, 50)
    try:
        with time_limit(5, "x"):
            pass
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 40 < left <= 50 and not fired
        with pytest.raises(TargetError, match="x did not finish within 0.2 s"):
            with time_limit(0.2, "x"):
                time.sleep(5)
        assert 40 < signal.getitimer(signal.ITIMER_REAL)[0] <= 50 and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, outer, interval)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("cls, expected", [
    ("QuitsInInit", "constructing {target} called sys.exit(3); a model must raise an exception instead of exiting"),
    ("QuitsInForward", "{target}.forward called sys.exit('no')"),
    ("ReturnsNone", "{target}.forward returned None; it must return a tensor (or tensors)"),
    ("ReturnsNumber", "{target}.forward returned no tensor (got int); it must return a tensor (or tensors)"),
])
def test_a_model_that_exits_or_returns_nothing_gives_one_line(cls, expected, bad, temp_dir, capsys):
    target = f"{bad}:{cls}"
    assert main(["search", target]) == 2
    line = _one_line(capsys)
    assert line.startswith("narbench search: error: " + expected.format(target=target)), line
    assert "autograd" not in line


def test_an_import_that_exits_gives_one_line(tmp_path, temp_dir, capsys):
    path = tmp_path / "quits.py"
    path.write_text("import sys\nsys.exit(3)\n")
    assert main(["search", f"{path}:Net"]) == 2
    assert _one_line(capsys) == (f"narbench search: error: importing {path} called sys.exit(3); a model must raise "
                                 "an exception instead of exiting")


@pytest.mark.parametrize("cls", ["Swallows", "IgnoresTerm"])
def test_code_that_catches_the_stop_is_killed_at_the_limit(cls, bad, temp_dir, capsys):
    """A forward that catches every exception, or ignores SIGTERM too: the child's group is killed
    (SIGTERM, then SIGKILL after the grace), one line, exit 2, soon after the limit."""
    from narbench.core.child import GRACE

    t0 = time.monotonic()
    assert main(["search", f"{bad}:{cls}", "--timeout", "1"]) == 2
    assert time.monotonic() - t0 < 1 + GRACE + 20  # the parent's imports and the fork under load
    assert _one_line(capsys).startswith(f"narbench search: error: {bad}:{cls} did not finish within 1 s "
                                        "(stopped in its forward pass, on meta)")


# ------------------------------------------------------------------ the API


def test_the_api_leaves_nothing_in_the_temp_dir(tmp_path):
    """torch's meta kernels import torch._dynamo, which makes `torchinductor_<user>` in the temp dir."""
    tmp, cache = tmp_path / "tmp", tmp_path / "cache"
    tmp.mkdir()
    code = ("import os, narbench; narbench.search('tests.search_models:TinyCNN', k=3); "
            "print(os.environ.get('TORCHINDUCTOR_CACHE_DIR'))")
    env = {**os.environ, "TMPDIR": str(tmp), "NARBENCH_CACHE": str(cache), "NARBENCH_NO_PROGRESS": "1"}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "None"  # torch's variable is unset again: the caller's torch.compile is unchanged
    assert sorted(os.listdir(tmp)) == []
    assert not (cache / "torchinductor").exists()


def test_the_first_search_says_it_loads_torch_once(monkeypatch, capsys):
    from narbench.search_engine import engine

    index = load_index()
    monkeypatch.delenv("NARBENCH_NO_PROGRESS", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setattr(engine, "_announced", False)
    fresh = type(index)(index.header, index.arrays, sha256=index.sha256)  # its encoder not loaded yet
    search(fresh.names[0], index=fresh, k=2)
    search(fresh.names[1], index=fresh, k=2)
    err = capsys.readouterr().err
    assert err == (f"narbench search: loading torch and the search index ({index.describe()}); the first search "
                   "in a process takes a few seconds...\n")
    for quiet in ({"progress": False}, {}):
        monkeypatch.setattr(engine, "_announced", False)
        if not quiet:
            monkeypatch.setenv("NARBENCH_NO_PROGRESS", "1")
        search(fresh.names[0], index=type(index)(index.header, index.arrays, sha256=index.sha256), k=2, **quiet)
        assert capsys.readouterr().err == ""


def test_printed_hits_are_a_table():
    result = search(f"{MODELS}:TinyCNN", k=3, progress=False)
    text = str(result)
    lines = text.splitlines()
    assert lines[0] == f"{MODELS}:TinyCNN: top 3 in {result.index}"
    # the table, then the out-of-family verdict when the index's score fires (`engine.no_fit_line`)
    assert lines[1].split() == ["#", "graph", "family", "cosine"] and len(lines) == 5 + result.no_family_fits
    if result.no_family_fits:
        assert lines[-1].startswith("no family in the index fits: out-of-family score")
    for line, h in zip(lines[2:], result.hits):
        assert line.split()[:3] == [str(h.rank), h.name, h.family] and f"{h.similarity:.3f}" in line
    assert repr(result) == text
    # the data are as before: a list of hits, their fields, JSON
    assert result[0] is result.hits[0] and len(result) == 3 and [h.rank for h in result] == [1, 2, 3]
    assert result.to_json()["hits"][0]["name"] == result.hits[0].name
