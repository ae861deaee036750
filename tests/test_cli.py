"""The command line (`narbench.cli`): handlers, exit statuses, one-line errors before any training."""

from __future__ import annotations

import errno
import json
import os

import pytest

from narbench.cli import build_parser, leaderboard, listing, main
from narbench.cli import run as run_command

TOY = ["--dataset", "toy", "--profile", "smoke", "--no-progress"]


def _one_error_line(err: str, expected: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("error: ") and expected in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["run", "--encoder", "nope"], "unknown encoder 'nope'; known encoders: "),
        (["run", "--encoder", "gcn", "--splitter", "nope"], "unknown splitter 'nope'; known splitters: "),
        (["run", "--encoder", "gcn", "--dataset", "nope"], "unknown dataset 'nope'; known datasets: "),
        (["run", "--encoder", "gcn", "--splitter", "motif"], "takes no splitter"),
        (["run", "--encoder", "gcn", "--device", "banana"],
         "unknown device 'banana'; narbench runs on auto (CUDA when available, else the CPU), cpu, cuda, or cuda:N"),
        (["run", "--encoder", "gcn", "--device", "cuda:99"], "device 'cuda:99': "),
    ],
)
def test_bad_inputs_fail_first_in_one_line(args, expected, capsys, tmp_path, no_training):
    code = main(args + ["--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    line = _one_error_line(err, expected)
    assert "privateuseone" not in line  # not torch's list of internal device types
    assert list(tmp_path.iterdir()) == []


def test_out_that_is_a_file_or_under_a_file(capsys, tmp_path, no_training):
    target = tmp_path / "results.txt"
    target.write_text("keep me")
    assert main(["run", "--encoder", "random", "--out", str(target)]) == 2
    _one_error_line(capsys.readouterr().err, f"output folder {target} is a file, not a folder")
    assert main(["run", "--encoder", "random", "--out", str(target / "sub")]) == 2
    _one_error_line(capsys.readouterr().err, f"{target} is a file, not a folder")
    assert target.read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == ["results.txt"]


def test_out_that_cannot_be_written(capsys, read_only_folder, no_training):
    out, reason = read_only_folder
    assert main(["run", "--encoder", "random", "--out", str(out / "new")]) == 2
    _one_error_line(capsys.readouterr().err, f"output folder {out / 'new'}: cannot write in {out} ({reason})")
    assert list(out.iterdir()) == []


def test_init_from_a_file_that_is_not_a_checkpoint(capsys, tmp_path, no_training):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    out = tmp_path / "out"
    assert main(["run", "--encoder", "gcn", "--init-from", str(notes), "--out", str(out)]) == 2
    _one_error_line(capsys.readouterr().err, f"{notes} is a text file, not a checkpoint torch can read; expected the "
                                             "`<run_id>.pt` that `narbench run --save-weights` writes")
    assert not out.exists()


def test_missing_real_artifact_fails_before_training(capsys, tmp_path, monkeypatch, no_training):
    monkeypatch.setenv("NARBENCH_REAL_FILE", str(tmp_path / "nope.narg"))
    code = main(["run", "--encoder", "gcn", "--splitter", "none", "--dataset", "real", "--out", str(tmp_path / "o")])
    line = _one_error_line(capsys.readouterr().err, "does not exist")
    assert code == 2 and "narbench[zoo]" in line and "build-real" in line and not (tmp_path / "o").exists()


def test_a_failed_write_still_prints_the_metrics_and_leaves_nothing(plugin, capsys, tmp_path, monkeypatch):
    from narbench.eval.result import RunResult

    def disk_full(self, out_dir, per_query=None):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RunResult, "write", disk_full)
    out = tmp_path / "out"
    assert main(["run", "--encoder", "nodefreq", *TOY, "--save-embeddings", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "MRR" in captured.out and "NDCG" in captured.out and "result written" not in captured.out
    _one_error_line(captured.err, f"cannot write the result to {out}: No space left on device; nothing was written")
    assert list(out.iterdir()) == []  # the embeddings written before the failure are gone too


def test_ctrl_c_is_one_line_exit_130_and_nothing_written(plugin, capsys, tmp_path, monkeypatch):
    import narbench.harness.runner as runner
    from narbench.eval.result import RunResult

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    out = tmp_path / "out"
    with monkeypatch.context() as m:
        m.setattr(runner, "score_rankings", interrupt)  # during the run
        assert main(["run", "--encoder", "nodefreq", *TOY, "--out", str(out)]) == 130
    assert capsys.readouterr().err == "interrupted; nothing written (a re-run goes on from the last finished training epoch)\n"
    assert not out.exists()
    monkeypatch.setattr(RunResult, "write", interrupt)  # while writing, after the embeddings
    assert main(["run", "--encoder", "nodefreq", *TOY, "--save-embeddings", "--out", str(out)]) == 130
    assert capsys.readouterr().err == "interrupted; nothing written (a re-run goes on from the last finished training epoch)\n" and list(out.iterdir()) == []


def test_result_files_are_readable_by_others(plugin, capsys, tmp_path):
    old = os.umask(0o022)
    try:
        assert main(["run", "--encoder", "nodefreq", *TOY, "--out", str(tmp_path / "out")]) == 0
    finally:
        os.umask(old)
    files = sorted((tmp_path / "out").iterdir())
    assert len(files) == 2 and all(p.stat().st_mode & 0o777 == 0o644 for p in files)


def test_version_and_run_help_show_the_defaults(capsys):
    from narbench import __version__

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith(f"narbench {__version__} (torch ")
    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["run"].format_help().split())
    for default in ("(default: ours)", "(default: nas)", "(default: quick)", "(default: family)", "(default: auto)",
                    "(default: runs)", "(default: standard)"):
        assert default in help_text


def test_unknown_profile_is_rejected_by_argparse(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--profile", "huge"])
    assert exc.value.code == 2
    assert "invalid choice: 'huge'" in capsys.readouterr().err


def test_listing_commands(capsys, plugin, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["encoders"]) == 0
    out = capsys.readouterr().out
    assert "gcn" in out and "gat" in out and "nodefreq" in out and "fails to load" in out
    assert main(["splitters"]) == 0
    assert "none" in capsys.readouterr().out


def test_datasets_lists_version_size_families_and_splits(capsys, plugin, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert listing.run(build_parser().parse_args(["datasets"])) == 0
    rows = {ln.split("│")[1].strip(): [c.strip() for c in ln.split("│")[1:-1]]
            for ln in capsys.readouterr().out.splitlines() if ln.count("│") > 5}
    for name in ("real", "real-2.3"):  # the current version, and pinned by its version's name
        assert rows[name][:6] == [name, "2.3", "16,905", "382", "3", "standard, unseen, crossimpl, novel"]
        assert rows[name][6].startswith("pinned ec83856c9cd3") and rows[name][8] == "ready"
    assert rows["real-2.2"][:6] == ["real-2.2", "2.2", "16,965", "382", "3", "standard, unseen, crossimpl, novel"]
    assert rows["real-2.2"][6].startswith("pinned 115ecfa4e50e") and rows["real-2.2"][8] == "ready"
    assert rows["real-2.1"][:6] == ["real-2.1", "2.1", "17,181", "380", "3", "standard, unseen, crossimpl"]
    assert rows["real-2.1"][6].startswith("pinned 98efc55d90dd") and rows["real-2.1"][8] == "ready"
    assert rows["nas"][:2] == ["nas", "1.0"] and rows["nas"][5] == "standard"
    assert rows["toy"][8].startswith("not built yet") and rows["toy"][7] == "narbench-testplugin"


def test_run_through_the_handler_with_a_third_party_plugin(plugin, tmp_path, capsys):
    args = build_parser().parse_args(["run", "--encoder", "nodefreq", *TOY, "--out", str(tmp_path)])
    assert args.func is run_command.run and run_command.run(args) == 0
    (path,) = [p for p in tmp_path.iterdir() if p.suffix == ".json"]
    data = json.loads(path.read_text())
    assert data["encoder"] == "nodefreq" and data["dataset"]["name"] == "toy" and len(data["dataset"]["sha256"]) == 64
    assert "MRR" in capsys.readouterr().out


def test_corrupt_dataset_cache_is_rebuilt(plugin, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "--encoder", "random", *TOY, "--out", str(out)]) == 0
    cache = next((tmp_path / "cache").glob("toy-*.narg"))
    first = json.loads(next(out.glob("*.json")).read_text())["dataset"]["sha256"]
    cache.write_bytes(cache.read_bytes()[:100])
    with pytest.warns(UserWarning, match="corrupt"):
        assert main(["run", "--encoder", "random", *TOY, "--out", str(tmp_path / "out2")]) == 0
    second = json.loads(next((tmp_path / "out2").glob("*.json")).read_text())["dataset"]["sha256"]
    assert first == second


def test_leaderboard_handler_prints_progress_and_a_compact_table(tmp_path, capsys, plugin):
    """Result files of a registered third-party dataset (`toy`, unpinned), through the leaderboard command."""
    for seed in range(2):
        assert main(["run", "--encoder", "nodefreq", *TOY, "--seed", str(seed), "--out", str(tmp_path / "lb" / "results")]) == 0
    capsys.readouterr()
    args = build_parser().parse_args(["leaderboard", "--out", str(tmp_path / "lb"), "--no-tsne", "--profile", "smoke"])
    assert args.func is leaderboard.run and leaderboard.run(args) == 0
    captured = capsys.readouterr()
    assert "reading and validating" in captured.err and "done in" in captured.err
    assert "NDCG@20" in captured.out and "MRR@20" in captured.out and "NDCG@100" not in captured.out
    assert "README.md" in captured.out and (tmp_path / "lb" / "README.md").is_file()
    assert main(["leaderboard", "--results", str(tmp_path / "missing"), "--out", str(tmp_path / "lb")]) == 2
    err = capsys.readouterr().err  # after the progress line: the error, in one line
    assert err.splitlines()[-1] == f"error: results directory {tmp_path / 'missing'} does not exist"


def test_run_table_and_runs_show_the_capped_map_and_label_the_uncut_one(plugin, tmp_path, capsys, monkeypatch):
    """Issue 57: MAPc (AP / min(k, |R|)) is the MAP shown; ranx's uncut MAP (AP / |R|) and the paper's NDCG
    are labelled as uncut, with a line saying why they are small."""
    from narbench.harness.runtable import UNCUT_NOTE

    monkeypatch.setenv("COLUMNS", "250")
    assert main(["run", "--encoder", "nodefreq", *TOY, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    data = json.loads(next(tmp_path.glob("*.json")).read_text())
    rows = {ln.split("│")[1].strip(): [c.strip() for c in ln.split("│")[2:-1]] for ln in out.splitlines()
            if ln.count("│") == 5}
    scores = {**data["metrics"], **data["metrics_extra"]}
    for label, metric in (("MAPc (AP / min(k,|R|))", "map_capped"), ("MAP uncut (AP / |R|, ranx)", "map"),
                          ("NDCG uncut ideal (all |R|, paper's)", "ndcg_paper"), ("NDCG", "ndcg"), ("MRR", "mrr")):
        assert rows[label] == [f"{scores[f'{metric}@{k}']:.4f}" for k in (20, 50, 100)], label
    assert "MAP" not in rows and " ".join(UNCUT_NOTE.split()) in " ".join(out.split())
    assert main(["runs", str(tmp_path)]) == 0
    listing = capsys.readouterr().out
    header = next(ln for ln in listing.splitlines() if "MAPc@20" in ln)
    row = next(ln for ln in listing.splitlines() if "nodefreq" in ln)
    cells = dict(zip([c.strip() for c in header.split("┃")], [c.strip() for c in row.split("│")]))
    assert cells["MAPc@20"] == f"{scores['map_capped@20']:.4f}" and cells["MAP@20 uncut"] == f"{scores['map@20']:.4f}"
    assert main(["runs", str(tmp_path), "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["metrics"] == data["metrics"] and listed["metrics_extra"]["map_capped@20"] == scores["map_capped@20"]


def test_run_table_rows_name_their_metric():
    """Every row of the run table shows its own metric (values all distinct, unlike a toy run's MAP and MAPc)."""
    from types import SimpleNamespace

    from rich.console import Console

    from narbench.harness.runtable import RENDERED, render

    metrics = {f"{m}@{k}": round(0.01 * i + 0.001 * j, 4) for i, (_, m) in enumerate(RENDERED, 1)
               for j, k in enumerate((20, 50, 100))}
    res = SimpleNamespace(encoder="e", splitter="s", dataset={"name": "d"}, split="standard", profile="p",
                          protocol="family", seed=0, metrics=metrics, metrics_extra={}, num_queries=1, num_corpus=2,
                          num_train=3, device="cpu", timings={"total": 1.0})
    console = Console(width=200, record=True)
    render(SimpleNamespace(result=res, path=None), console)
    text = console.export_text()
    for label, metric in RENDERED:
        line = next(ln for ln in text.splitlines() if f"│ {label} " in ln)
        assert [c.strip() for c in line.split("│")[2:-1]] == [f"{metrics[f'{metric}@{k}']:.4f}" for k in (20, 50, 100)]
