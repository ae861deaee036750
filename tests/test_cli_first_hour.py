"""A new user's first hour (issue 23): one-line errors before any work, no stray files, a fast
`--version`, a leaderboard command that can be run twice, SIGTERM that gives the cursor back."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from narbench import process
from narbench.cli import args as cli_args
from narbench.cli import listing
from narbench.harness import preflight
from narbench.cli import main

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_DIR = ROOT / "tests" / "plugin"
TOY = ["--dataset", "toy", "--profile", "smoke", "--no-progress"]


@pytest.fixture
def cache(monkeypatch, tmp_path) -> Path:
    monkeypatch.setenv("NARBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _status(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse
        return int(exc.code)


def _one_line(err: str, expected: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert expected in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("argv, expected", [
    (["run", "--seed", "-1"], "argument --seed: expected an integer from 0 to 4294967295, got '-1'"),
    (["run", "--seed", "99999999999999999999"], "argument --seed: expected an integer from 0 to 4294967295"),
    (["run", "--jobs", "0"], "argument --jobs: expected a positive integer, got '0'"),
    (["run", "--jobs", "-2"], "argument --jobs: expected a positive integer, got '-2'"),
    (["search", "m.py:Net", "-k", "-3"], "argument -k: expected a positive integer, got '-3'"),
    (["search", "m.py:Net", "-k", "0"], "argument -k: expected a positive integer, got '0'"),
    (["check", "--tolerance", "-1"], "argument --tolerance: expected a number >= 0, got '-1'"),
    (["search", "m.py:Net", "--input-shape", "1,x"], "argument --input-shape: expected positive integers"),
    (["search", "m.py:Net", "--input-shape", "1,,3"], "argument --input-shape: expected positive integers"),
])
def test_out_of_range_options_are_refused_in_one_line(argv, expected, capsys, no_training):
    assert _status(argv) == 2
    line = _one_line(capsys.readouterr().err, expected)
    assert line.startswith(f"narbench {argv[0]}: error: ")


def test_input_shape_still_takes_both_spellings():
    assert cli_args.shape("1,3,224,224") == cli_args.shape("1x3x224x224") == (1, 3, 224, 224)


def test_seed_range_is_the_runners(no_training, cache):
    from narbench.harness.runner import MAX_SEED, ConfigError, RunConfig, run

    assert cli_args.MAX_SEED == MAX_SEED
    for bad in ({"seed": -1}, {"seed": MAX_SEED + 1}, {"jobs": 0}):
        with pytest.raises(ConfigError):
            run(RunConfig(encoder="gcn", out=None, **bad))


def test_bad_splitter_parameter(capsys, tmp_path, cache, no_training):
    argv = ["run", "--encoder", "ours", "--splitter", "node-number", "--param", "nodes_per_part=-4",
            "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    _one_line(capsys.readouterr().err, "bad parameters for splitter 'node-number': nodes_per_part must be a positive")
    assert not (tmp_path / "out").exists()


def test_out_name_longer_than_the_file_system_allows(capsys, tmp_path, cache, no_training):
    assert main(["run", "--encoder", "gcn", "--out", str(tmp_path / ("r" * 300))]) == 2
    _one_line(capsys.readouterr().err, "a name of 300 bytes; the file system allows 255")


def test_out_without_free_space_for_the_run(capsys, tmp_path, cache, no_training, monkeypatch):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(preflight.shutil, "disk_usage", lambda p: usage(10 << 30, 10 << 30, 1 << 20))
    assert main(["run", "--encoder", "gcn", "--out", str(tmp_path / "out")]) == 2
    _one_line(capsys.readouterr().err, "1.0 MiB free on its file system; this run writes up to 8 MiB there")
    monkeypatch.setattr(preflight.shutil, "disk_usage", shutil.disk_usage)
    assert preflight.output_bytes(save_weights=True, save_embeddings=True) > preflight.output_bytes()


def _read_only_under(monkeypatch, folder: Path) -> None:
    """mkstemp fails with EROFS under `folder` (root ignores permission bits, so they cannot show it)."""
    real = preflight.tempfile.mkstemp

    def mkstemp(*a, dir=None, **k):
        if dir is not None and Path(dir).resolve().is_relative_to(folder.resolve()):
            raise OSError(errno.EROFS, "Read-only file system")
        return real(*a, dir=dir, **k)

    monkeypatch.setattr(preflight.tempfile, "mkstemp", mkstemp)


def test_read_only_cache(capsys, tmp_path, cache, no_training, monkeypatch):
    cache.mkdir()
    _read_only_under(monkeypatch, cache)
    assert main(["run", "--encoder", "gcn", "--out", str(tmp_path / "out")]) == 2
    _one_line(capsys.readouterr().err, f"narbench cache (NARBENCH_CACHE) {cache}: cannot write in {cache} "
                                       "(Read-only file system); set NARBENCH_CACHE to a folder you can write in")


def test_read_only_parts_cache_is_reported_and_skipped(tmp_path, toy_dataset):
    from narbench.train.partcache import PartsCache, split_graphs
    from narbench.splitters.uniform import NodeNumberSplitter

    (tmp_path / "ro").write_text("a file where the cache folder should be")
    graphs = toy_dataset.graphs[:5]
    with pytest.warns(RuntimeWarning, match="unusable .*cannot create"):
        parts = split_graphs(NodeNumberSplitter(), graphs, jobs=1, cache=PartsCache(tmp_path / "ro" / "p.sqlite"))
    assert len(parts) == len(graphs)


def test_leaderboard_out_onto_a_file_or_a_read_only_folder(capsys, tmp_path, cache, monkeypatch):
    (tmp_path / "results").mkdir()
    (tmp_path / "file").write_text("keep me")
    assert main(["leaderboard", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "file")]) == 2
    _one_line(capsys.readouterr().err, f"leaderboard folder {tmp_path / 'file'} is a file, not a folder")
    assert (tmp_path / "file").read_text() == "keep me"
    (tmp_path / "ro").mkdir()
    _read_only_under(monkeypatch, tmp_path / "ro")
    assert main(["leaderboard", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "ro" / "lb")]) == 2
    _one_line(capsys.readouterr().err, "cannot write in")
    assert list((tmp_path / "ro").iterdir()) == []


def test_sigterm_closes_the_progress_bar_and_gives_the_cursor_back(capsys, monkeypatch, cache):
    from rich.console import Console
    from rich.progress import Progress

    screen = io.StringIO()

    def handler(args) -> int:
        with Progress(console=Console(file=screen, force_terminal=True)) as prog:
            prog.add_task("work", total=10)
            os.kill(os.getpid(), signal.SIGTERM)
            raise AssertionError("SIGTERM did not stop the handler")

    monkeypatch.setattr(listing, "run", handler)
    before = signal.getsignal(signal.SIGTERM)
    assert main(["datasets"]) == process.TERMINATED
    text = screen.getvalue()
    assert "\x1b[?25l" in text and text.rindex("\x1b[?25h") > text.rindex("\x1b[?25l")
    _one_line(capsys.readouterr().err, "interrupted")
    assert signal.getsignal(signal.SIGTERM) is before  # the scope put the previous handler back


def _env(tmp_path: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "IR_DATASETS_HOME", "NUMBA_CACHE_DIR")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(PLUGIN_DIR), str(ROOT)]), **extra)
    return env


def test_version_names_torch_pyg_and_datasets_without_importing_torch(tmp_path):
    code = ("import sys\nfrom narbench.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "print('heavy:', sorted(m for m in ('torch', 'torch_geometric', 'numpy', 'ranx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path),
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    first, last = out.stdout.strip().splitlines()
    from importlib.metadata import version

    from narbench import __version__

    assert first.startswith(f"narbench {__version__} (torch {version('torch')}, torch-geometric "
                            f"{version('torch-geometric')}; datasets ")
    assert "nas 1.0" in first and "real 2.3" in first and "real-2.2 2.2" in first and "real-2.1 2.1" in first
    assert "toy" in first
    assert last == "heavy: []"


def test_help_and_argument_errors_do_not_import_torch(tmp_path):
    code = ("import sys\nfrom narbench.cli import main\nfor argv in (['--help'], ['run', '--seed', 'x']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path),
                         cwd=tmp_path, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout + out.stderr


@pytest.mark.slow
def test_a_gcn_run_writes_nothing_outside_out_and_cache(tmp_path):
    """HOME and TMPDIR point to empty folders: after a gcn run (PyG, ranx, matplotlib imported) both
    are still empty; the result went to --out and the generated data to the cache."""
    home, tmp, out, cache = (tmp_path / n for n in ("home", "tmp", "out", "cache"))
    home.mkdir()
    tmp.mkdir()
    env = _env(tmp_path, HOME=str(home), TMPDIR=str(tmp), NARBENCH_CACHE=str(cache))
    proc = subprocess.run([sys.executable, "-m", "narbench", "run", "--encoder", "gcn", *TOY, "--out", str(out)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir() if p.suffix == ".json") and list(cache.iterdir())
    assert list(tmp.rglob("*")) == [] and list(home.rglob("*")) == []
    # the one-line result path, not folded by rich in a pipe
    assert f"result written to {out}/" in proc.stdout


def _toy_results(folder: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGIN_DIR))
    monkeypatch.setenv("NARBENCH_NO_PROGRESS", "1")
    for seed in range(2):
        assert main(["run", "--encoder", "nodefreq", *TOY, "--seed", str(seed), "--out", str(folder)]) == 0


def test_the_readmes_leaderboard_command_runs_twice(tmp_path, capsys, cache, monkeypatch):
    """`narbench leaderboard --results runs --out runs/leaderboard`: its own aggregate.json, under
    runs/, is not read back as a result file the second time."""
    monkeypatch.chdir(tmp_path)
    _toy_results(tmp_path / "runs", monkeypatch)
    argv = ["leaderboard", "--results", "runs", "--out", "runs/leaderboard", "--profile", "smoke", "--no-plots"]
    assert main(argv) == 0
    first = (tmp_path / "runs" / "leaderboard" / "README.md").read_text()
    assert (tmp_path / "runs" / "leaderboard" / "aggregate.json").is_file()
    assert main(argv) == 0
    assert (tmp_path / "runs" / "leaderboard" / "README.md").read_text() == first
    assert "result files rejected" not in capsys.readouterr().err


def test_leaderboard_with_nothing_to_show_says_why(tmp_path, capsys, cache, monkeypatch):
    (tmp_path / "empty").mkdir()
    assert main(["leaderboard", "--results", str(tmp_path / "empty"), "--out", str(tmp_path / "lb")]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: nothing to show: no result files in ") and not (tmp_path / "lb" / "README.md").exists()
    _toy_results(tmp_path / "runs", monkeypatch)  # smoke results: not shown by default
    capsys.readouterr()
    assert main(["leaderboard", "--results", str(tmp_path / "runs"), "--out", str(tmp_path / "lb")]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "are 2 of profile smoke; the leaderboard shows quick and paper unless asked: add --profile paper " \
           "--profile quick --profile smoke" in line


def test_log_progress_prints_a_line_per_step():
    from rich.console import Console

    from narbench.train.progress import LogProgress, progress_bars

    buf = io.StringIO()
    console = Console(file=buf, width=200)
    assert not console.is_terminal
    with progress_bars(console) as prog:
        assert isinstance(prog, LogProgress)
        task = prog.add_task("train", total=200, info="")
        for i in range(200):
            prog.update(task, advance=1, info=f"loss {i}")
    lines = buf.getvalue().splitlines()
    assert len(lines) == 11 and lines[0].startswith("train    0%  1/200  loss 0  0:0")  # it started
    assert lines[1].startswith("train   10%  20/200  loss 19  0:0")
    assert lines[-1].startswith("train  100%  200/200  loss 199")


def test_first_compile_is_announced_when_a_kernel_cache_is_missing(monkeypatch, tmp_path):
    from rich.console import Console

    from narbench.core import jit

    buf = io.StringIO()
    kernels = (("narbench.train", "", ("_parts_kernels",)),)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(Path, "glob", lambda self, pattern: iter(()))  # nothing beside the sources
    assert jit.announce_first_compile(Console(file=buf), kernels)
    assert buf.getvalue().strip() == f"note: {jit.FIRST_COMPILE}"
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "_parts_kernels.adjacency-12.py311.nbi").write_bytes(b"")
    assert jit.uncompiled(kernels) == []
