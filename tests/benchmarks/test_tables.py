"""The sweep script `benchmarks/tables.py`: which cells it runs, and from which weights."""

from __future__ import annotations

import argparse

from tests.handmade import write_result
from tests.leaderboard.conftest import base


def _tables_script():
    """benchmarks/tables.py (a script, not a package module) loaded by path."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "tables.py"
    spec = importlib.util.spec_from_file_location("narbench_tables_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sweep_script_table4_starts_from_the_nas_run_with_weights(tmp_path):
    tables = _tables_script()
    args = argparse.Namespace(dataset="real", split="standard", protocol="family", profile="quick", device="cpu",
                              out=tmp_path, pretrained=None)
    # No nas source yet: the Table 4 cell is skipped, the scratch cell still runs.
    assert tables.command(args, "ours", "motif", "ce+cl", tables.PRETRAINED, 1) is None
    scratch = tables.command(args, "ours", "motif", "ce+cl", tables.SCRATCH, 1)
    assert "--init-from" not in scratch and "--save-weights" in scratch
    # A nas run of another seed, one without weights, and the matching one with weights.
    other_seed = write_result(tmp_path, "ours", "motif", 0, base(0))
    other_seed.with_name(other_seed.name.replace(".json", ".pt")).write_bytes(b"w")
    write_result(tmp_path, "ours", "motif", 1, base(1), tag="-a")
    with_weights = write_result(tmp_path, "ours", "motif", 1, base(1), tag="-b")
    assert tables.command(args, "ours", "motif", "ce+cl", tables.PRETRAINED, 1) is None
    with_weights.with_name(with_weights.name.replace(".json", ".pt")).write_bytes(b"w")
    cmd = tables.command(args, "ours", "motif", "ce+cl", tables.PRETRAINED, 1)
    assert cmd[cmd.index("--init-from") + 1] == str(with_weights)
    assert "--save-embeddings" not in cmd
    # Seed 0 of the Table 1 encoders saves embeddings for the t-SNE maps; other cells do not.
    assert "--save-embeddings" in tables.command(args, "gat", "none", "ce+cl", tables.SCRATCH, 0)
    assert "--save-embeddings" not in tables.command(args, "ours", "random", "ce+cl", tables.SCRATCH, 0)
    # Results already in --out are recognised per (dataset, split, protocol, cell, init, seed);
    # a floor's under protocol `any`, so one run serves every protocol.
    assert ("nas", "standard", "family", "ours", "motif", "ce+cl", "scratch", 1) in tables.existing(tmp_path)
    write_result(tmp_path, "wl", "none", 0, base(0))
    assert ("nas", "standard", "any", "wl", "none", "ce+cl", "scratch", 0) in tables.existing(tmp_path)
    assert tables.cell_protocol("wl", "paper") == "any" and tables.cell_protocol("gcn", "paper") == "paper"
    cmd = tables.command(argparse.Namespace(**{**vars(args), "split": "unseen", "protocol": "paper"}),
                         "gcn", "none", "ce+cl", tables.SCRATCH, 0)
    assert cmd[cmd.index("--split"):cmd.index("--split") + 4] == ["--split", "unseen", "--protocol", "paper"]
