"""`narbench search` on user code has limits (issue 57): the model runs in a child process with a
memory cap (`--max-memory`), its whole process group is killed at `--timeout`, and a time-out
never crashes the parent, even when the forward loops over torch ops. Real child processes, the
CLI called in-process as tests/test_search.py calls it (the exit status check runs the CLI as a
process of its own)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from narbench.cli import main  # noqa: E402
from narbench.search_engine.engine import search  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS, fork and /proc as Linux has them")

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "search_models.py"

LIMIT_MODELS = textwrap.dedent('''
    import os
    import subprocess
    import time

    import torch
    from torch import nn

    PID_FILE = {pid_file!r}


    class Base(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x)


    class Fills3GiB(Base):
        def __init__(self):
            super().__init__()
            self.big = torch.ones(3 << 30, dtype=torch.uint8, device="cpu")


    class Reserves5GiB(Base):
        """Over the default cap; never touched, so it costs nothing were the cap missing."""

        def __init__(self):
            super().__init__()
            self.big = torch.empty(5 << 30, dtype=torch.uint8, device="cpu")


    class BigOnTheCpu(nn.Module):
        """Reads a value (meta cannot): rebuilt on the CPU, where its weights take 4 GiB."""

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(32768, 32768)

        def forward(self, x):
            return self.fc(x) * float(x.sum().item() > 0)


    class ReadsAValue(nn.Module):
        """Meta cannot read a value: built again on the CPU, where filling its buffer runs torch's threads."""

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 64)
            self.register_buffer("scale", torch.ones(1 << 22))

        def forward(self, x):
            return self.fc(x) * float(x.sum().item() > 0)


    class LoopsOverTorchOps(Base):
        def forward(self, x):
            x = self.fc(x)
            while True:
                x = x + 1


    class StartsSleep(Base):
        def forward(self, x):
            proc = subprocess.Popen(["sleep", "300"])
            with open(PID_FILE, "w") as fh:
                fh.write(str(proc.pid))
            while True:
                time.sleep(1)


    class StartsSleepAndReturns(Base):
        def forward(self, x):
            proc = subprocess.Popen(["sleep", "300"])
            with open(PID_FILE, "w") as fh:
                fh.write(str(proc.pid))
            return self.fc(x)
''')


@pytest.fixture
def models(tmp_path) -> Path:
    path = tmp_path / "limit_models.py"
    path.write_text(LIMIT_MODELS.format(pid_file=str(tmp_path / "sleep.pid")))
    return path


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("NARBENCH_NO_PROGRESS", "1")


def _one_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err and captured.out == "", captured
    return lines[0]


def _rss() -> int:
    """This process's resident memory now, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def _gone(pid: int, wait: float = 5.0) -> bool:
    """Whether process `pid` has ended (gone, or a zombie no one has reaped yet) within `wait` s."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("cls, flags, cap", [
    ("Fills3GiB", ["--max-memory", "1G"], "1 GiB"),
    ("BigOnTheCpu", ["--max-memory", "1G"], "1 GiB"),
    ("Reserves5GiB", [], "4 GiB"),  # the default cap
])
def test_the_memory_cap_stops_a_model_with_one_line(cls, flags, cap, models, capsys):
    peak, rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, _rss()
    assert main(["search", f"{models}:{cls}", *flags]) == 2
    line = _one_line(capsys)
    assert line.startswith(f"narbench search: error: {models}:{cls} needs more memory than the cap of {cap} "), line
    assert "--max-memory SIZE" in line and "on cpu" in line
    # the model ran in the child: this process grew by neither its peak nor its resident memory
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - peak < 256 << 20
    assert _rss() - rss < 256 << 20


def test_a_forward_looping_over_torch_ops_stops_at_the_timeout_without_crashing(models, tmp_path):
    """It segfaulted the parent (exit 139) once the time-out freed the deep autograd graph it had built."""
    env = {**os.environ, "NARBENCH_NO_PROGRESS": "1", "TMPDIR": str(tmp_path)}
    target = f"{models}:LoopsOverTorchOps"
    proc = subprocess.run([sys.executable, "-m", "narbench.cli", "search", target, "--timeout", "3"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 2 and proc.stdout == "", proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"narbench search: error: {target} did not finish within 3 s (stopped in its forward pass, on meta)"), proc


@pytest.mark.parametrize("cls, flags, status", [("StartsSleep", ["--timeout", "3"], 2),
                                                ("StartsSleepAndReturns", ["-k", "1"], 0)])
def test_a_process_the_model_starts_does_not_outlive_the_search(cls, flags, status, models, tmp_path, capsys):
    pid_file = tmp_path / "sleep.pid"
    assert main(["search", f"{models}:{cls}", *flags]) == status
    pid = int(pid_file.read_text())
    try:
        assert _gone(pid), f"the model's `sleep 300` (pid {pid}) outlived the search"
    finally:
        if not _gone(pid, 0.0):
            os.kill(pid, 9)  # this test's own sleep
    if status == 2:
        assert "did not finish within 3 s (stopped in its forward pass, on meta)" in _one_line(capsys)


def test_a_small_model_searches_as_it_does_in_this_process(capsys):
    assert main(["search", f"{MODELS}:TinyCNN", "-k", "5", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    here = search(f"{MODELS}:TinyCNN", k=5, isolate=False, progress=False).to_json()
    for key in ("hits", "num_nodes", "num_edges", "coarse", "why", "duplicate_of", "unknown_ops"):
        assert got[key] == here[key], key
    assert got["info"]["device"] == here["info"]["device"] == "meta"


def test_a_model_run_on_the_cpu_after_the_parent_used_its_threads(models, capsys):
    """A fork copies none of the parent's OpenMP threads: a child that waited on them hung."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for _ in range(2):
            torch.ones(1 << 22).add_(1)  # the parent's thread pool at work
            assert main(["search", f"{models}:ReadsAValue", "-k", "1", "--json", "--timeout", "20"]) == 0
            assert json.loads(capsys.readouterr().out)["info"]["device"] == "cpu"
    finally:
        torch.set_num_threads(threads)


def test_the_transformer_of_the_docs_searches_under_the_default_cap():
    """docs/search.md's 64-layer transformer (2,438 raw ops, 710 canonical nodes) in a child with the default cap."""
    target, kwargs = f"{ROOT / 'examples' / 'out_of_zoo.py'}:TransformerEncoder", {"layers": 64}
    apart = search(target, kwargs=kwargs, k=5, progress=False)
    here = search(target, kwargs=kwargs, k=5, isolate=False, progress=False)
    assert apart.num_nodes == here.num_nodes == 710 and apart.info["device"] == "meta"
    assert [h.name for h in apart.hits] == [h.name for h in here.hits]


@pytest.mark.parametrize("value", ["abc", "-1", "4X", "nan", ""])
def test_a_bad_memory_cap_is_one_line(value, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["search", f"{MODELS}:TinyCNN", "--max-memory", value])
    assert exit_.value.code == 2
    assert _one_line(capsys) == (f"narbench search: error: argument --max-memory: expected a size like 4G, 512M or "
                                 f"0 (no cap), got {value!r} (see narbench search --help)")
