"""Learning curves (`narbench run --curve`, `narbench.harness.curve`) and the epoch override."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from rich.console import Console

from narbench.harness.confighash import config_hash, result_hash
from narbench.harness.curve import hold_out
from narbench.harness.runner import SNAPSHOTS, ConfigError, RunConfig, run
from narbench.harness.grid import GridError, parse_grid
from narbench.harness.sweepplan import expand, planned_fields, task_of
from narbench.train.profiles import TrainConfig
from narbench.train.resume import Snapshots
from narbench.train.trainer import Trainer, seed_everything

QUIET = Console(stderr=True, quiet=True)


def _run(ds, out=None, **kw):
    return run(RunConfig(encoder="gcn", profile="smoke", out=str(out) if out else None, progress=False, **kw),
               dataset=ds)


def _fit(toy_dataset, evaluate=None, epochs=3):
    from narbench.baselines.gnn import GNNStack, gcn_conv
    from narbench.train.encoder import graph_to_data

    seed_everything(0)
    model = GNNStack(gcn_conv, 16, 2, 0.5, num_ops=8)  # dropout: a consumer of the global generator
    datas = [graph_to_data(g, 8) for g in toy_dataset.graphs]
    trainer = Trainer("cpu", 0, progress=False, jobs=1)
    hist = trainer.fit(model, datas, TrainConfig(epochs=epochs, batch_size=8), lambda m, b: m(b).pow(2).mean(),
                       evaluate=evaluate)
    return model, hist


def test_the_per_epoch_probe_leaves_the_training_trajectory_alone(toy_dataset):
    plain, plain_hist = _fit(toy_dataset)

    def noisy(epoch):  # draws from every global generator and flips the model's mode
        torch.rand(5), np.random.rand(3)
        import random

        random.random()
        return {"draws": epoch}

    probed, hist = _fit(toy_dataset, evaluate=noisy)
    assert hist.losses == plain_hist.losses
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(), probed.state_dict().values()))
    assert [e["epoch"] for e in hist.evals] == [1, 2, 3] and plain_hist.evals == []


def test_a_curve_run_records_every_epoch_and_ends_on_its_result(toy_dataset, tmp_path):
    ev = _run(toy_dataset, tmp_path, curve=True, epochs=3)
    curve = ev.result.config["learning_curve"]
    assert [e["epoch"] for e in curve["epochs"]] == [1, 2, 3]
    assert ev.result.config["profile"]["train"]["epochs"] == 3
    last = curve["epochs"][-1]["test"]
    for metric, value in last.items():
        assert value == pytest.approx({**ev.result.metrics, **ev.result.metrics_extra}[metric], abs=1e-6)
    # the validation queries are training graphs held out: trained on the pool only
    fam = toy_dataset.family_ids()
    assert ev.result.num_train == curve["pool"] and curve["validation_queries"] >= 1
    split = hold_out(np.sort(toy_dataset.get_split("standard").train), fam)
    assert not set(split.val) & set(split.pool)
    assert "evals" not in ev.result.config["training_history"][0]
    stored = json.loads(ev.path.read_text())
    assert stored["config"]["run"]["curve"] is True and stored["config_hash"] == result_hash(ev.result)


def test_curve_and_epochs_are_configurations_of_their_own(toy_dataset):
    plain = _run(toy_dataset)
    longer = _run(toy_dataset, epochs=3)
    curve = _run(toy_dataset, curve=True)
    hashes = {result_hash(e.result) for e in (plain, longer, curve)}
    assert len(hashes) == 3
    assert "curve" not in plain.result.config and longer.result.config["profile"]["train"]["epochs"] == 3


def test_bad_curve_and_epoch_options_are_refused_before_anything_runs(toy_dataset):
    with pytest.raises(ConfigError, match="training-free"):
        run(RunConfig(encoder="ophist", profile="smoke", out=None, progress=False, curve=True), dataset=toy_dataset)
    for bad in (0, -2, True, 2.5):
        with pytest.raises(ConfigError, match="epochs must be a positive integer"):
            _run(toy_dataset, epochs=bad)


def test_a_killed_curve_run_keeps_the_curve_of_the_epochs_before_the_kill(toy_dataset, tmp_path, monkeypatch):
    whole = _run(toy_dataset, tmp_path / "whole", curve=True, epochs=3)
    save = Snapshots.save

    def save_then_die(self, index, stage, done, *a, **k):
        path = save(self, index, stage, done, *a, **k)
        if done == 2:
            raise KeyboardInterrupt
        return path

    out = tmp_path / "killed"
    with monkeypatch.context() as m:
        m.setattr(Snapshots, "save", save_then_die)
        with pytest.raises(KeyboardInterrupt):
            _run(toy_dataset, out, curve=True, epochs=3)
    assert list((out / SNAPSHOTS).rglob("*.pt"))
    again = _run(toy_dataset, out, curve=True, epochs=3)
    assert again.result.config["resumed"][0]["epochs_done"] == 2
    assert again.result.config["learning_curve"] == whole.result.config["learning_curve"]


def test_a_sweep_block_plans_curve_runs_whose_command_line_has_their_hash(plugin, tmp_path):
    from narbench.cli import build_parser
    from narbench.cli.run import run_config

    grid = parse_grid({"seeds": [0], "profile": "smoke", "block": [
        {"name": "curves", "datasets": ["toy"], "epochs": 4, "curve": True, "models": ["gcn+none"]},
        {"name": "plain", "datasets": ["toy"], "models": ["gcn+none"]}]})
    plan = expand(grid, out=tmp_path / "out", console=QUIET)
    assert len(plan.runs) == 2
    by_block = {r.block: r for r in plan.runs}
    assert by_block["curves"].cfg.curve and by_block["curves"].cfg.epochs == 4 and by_block["curves"].name.endswith("-ep4-curve")
    for planned in plan.runs:
        parsed = run_config(build_parser().parse_args(["run", *task_of(planned, tmp_path, threads=1).argv]))
        assert (parsed.curve, parsed.epochs) == (planned.cfg.curve, planned.cfg.epochs)
        assert config_hash(planned_fields(parsed)) == planned.hash
    for bad in ({"epochs": 0}, {"epochs": "15"}, {"curve": "yes"}):
        with pytest.raises(GridError, match="epochs|curve"):
            parse_grid({"block": [{"name": "b", "datasets": ["toy"], "models": ["gcn+none"], **bad}]})


def test_the_curves_page_tables_and_plots_each_setting(toy_dataset, tmp_path):
    from narbench.cli import curves as curves_command
    from narbench.leaderboard import curves
    from narbench.leaderboard.records import Record

    runs = tmp_path / "runs"
    for encoder in ("gcn", "gin"):
        for seed in (0, 1):
            run(RunConfig(encoder=encoder, profile="smoke", seed=seed, out=str(runs), progress=False, curve=True,
                          epochs=3), dataset=toy_dataset)
    plain = _run(toy_dataset, runs)  # not a curve run: skipped
    assert curves_command.main([str(runs), "--out", str(tmp_path / "lb")]) == 0
    page = (tmp_path / "lb" / "curves.md").read_text()
    assert "## toy / standard (smoke, epochs 1-3)" in page
    assert "| gcn | 2 |" in page and "| gin | 2 |" in page and page.count("| gcn |") == 1
    assert "- validation: the order at epoch 2" in page and "- test: the order at epoch 2" in page
    png = tmp_path / "lb" / "plots" / "curves-toy-standard-smoke.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (group,) = curves.settings(curves.load_curves(runs)).values()
    gcn = next(c for c in group if c.method == "gcn")
    assert gcn.matrix("test").shape == (2, 3)
    # in the leaderboard a curve run is a row of its own, never averaged into the plain encoder's
    assert Record(plain.path, plain.result).variant == ""
    curve_file = next(p for p in runs.glob("*.json") if p != plain.path and not p.name.endswith(".queries.json"))
    from narbench.eval.result import RunResult

    assert Record(curve_file, RunResult.read(curve_file)).variant == "epochs=3,curve=True"
    assert curves_command.main([str(tmp_path / "empty")]) == 2


def test_curves_of_two_versions_of_a_dataset_are_never_grouped(toy_dataset, tmp_path):
    """real 2.1's curve runs stay committed while 2.2's arrive: a seed of one version must not replace
    the same seed of the other in one curve; each version is its own setting, labelled by its version."""
    import dataclasses

    from narbench.cli import curves as curves_command
    from narbench.leaderboard import curves

    runs = tmp_path / "runs"
    run(RunConfig(encoder="gcn", profile="smoke", seed=0, out=str(runs), progress=False, curve=True, epochs=2),
        dataset=toy_dataset)
    newer = dataclasses.replace(toy_dataset, version="9.9")
    run(RunConfig(encoder="gcn", profile="smoke", seed=0, out=str(runs), progress=False, curve=True, epochs=2),
        dataset=newer)
    loaded = curves.load_curves(runs)
    assert sorted(c.dataset for c in loaded) == [f"toy {toy_dataset.version}", "toy 9.9"]
    assert all(len(c.seeds) == 1 for c in loaded)
    assert curves_command.main([str(runs), "--out", str(tmp_path / "lb")]) == 0
    assert (tmp_path / "lb" / "plots" / "curves-toy-9.9-standard-smoke.png").is_file()


def test_curves_of_the_budget_alone_have_one_column_per_side(toy_dataset, tmp_path):
    """Curves that stop at the profile's budget: no second column, no order 'holding' at the same epoch."""
    from narbench.cli import curves as curves_command

    runs = tmp_path / "runs"
    for encoder in ("gcn", "gin"):
        run(RunConfig(encoder=encoder, profile="smoke", out=str(runs), progress=False, curve=True), dataset=toy_dataset)
    assert curves_command.main([str(runs), "--out", str(tmp_path / "lb")]) == 0
    page = (tmp_path / "lb" / "curves.md").read_text()
    assert "| encoder | n | val @2 | best val epoch | test @2 |" in page and "holds at" not in page


# ----------------------------------------------------------------------------- cross-source hold-out


def test_cross_source_split_holds_out_one_source_of_families_several_implement():
    from narbench.eval.holdout import cross_source_split

    labels = np.array(["a", "a", "a", "a", "b", "b", "c", "c", "c", "c", "c"])
    sources = np.array(["s1", "s1", "s1", "s2", "s1", "s1", "s1", "s2", "s2", "s3", "s3"])
    pool, val = cross_source_split(labels, sources, fraction=1.0)
    assert sorted(val.tolist()) == [3, 6]  # a's smallest source (s2), c's (s1: one graph)
    assert sorted(pool.tolist() + val.tolist()) == list(range(11))
    for i in val:  # the relevant graphs stay in the pool, from other sources
        assert any(labels[j] == labels[i] and sources[j] != sources[i] for j in pool)
    pool1, val1 = cross_source_split(labels, sources, fraction=0.01)
    assert len(val1) == 1 and set(val1) <= {3, 6}
    with pytest.raises(ValueError, match="two sources"):
        cross_source_split(np.array(["a", "a", "b"]), np.array(["s", "s", "s"]))


def _two_sources(toy_dataset):
    from dataclasses import replace as dc_replace

    graphs = [dc_replace(g, source=("zoo-a" if i % 3 else "zoo-b")) for i, g in enumerate(toy_dataset.graphs)]
    return dc_replace(toy_dataset, graphs=graphs)


def test_a_cross_source_curve_is_a_configuration_of_its_own(toy_dataset):
    ds = _two_sources(toy_dataset)
    family = _run(ds, curve=True)
    cross = _run(ds, curve=True, holdout="cross-source")
    lc = cross.result.config["learning_curve"]
    assert lc["holdout"] == "cross-source" and "holdout" not in family.result.config["learning_curve"]
    assert result_hash(family.result) != result_hash(cross.result)
    assert cross.result.config["run"]["holdout"] == "cross-source"
    with pytest.raises(ConfigError, match="goes with --curve"):
        _run(ds, holdout="cross-source")
    with pytest.raises(ConfigError, match="unknown hold-out"):
        _run(ds, curve=True, holdout="zoo")


def test_a_family_holdout_hashes_as_before_the_option(toy_dataset):
    from narbench.harness.confighash import result_fields

    ev = _run(toy_dataset, curve=True)
    assert ev.result.config["run"]["holdout"] == "family" and "holdout" not in result_fields(ev.result)


def test_a_sweep_block_plans_cross_source_curves(plugin, tmp_path):
    from narbench.cli import build_parser
    from narbench.cli.run import run_config

    grid = parse_grid({"seeds": [0], "profile": "smoke", "block": [
        {"name": "x", "datasets": ["toy"], "curve": True, "holdout": "cross-source", "models": ["gcn+none"]}]})
    (planned,) = expand(grid, out=tmp_path / "out", console=QUIET).runs
    assert planned.cfg.holdout == "cross-source" and planned.name.endswith("-curve-cross-source")
    parsed = run_config(build_parser().parse_args(["run", *task_of(planned, tmp_path, threads=1).argv]))
    assert parsed.holdout == "cross-source" and config_hash(planned_fields(parsed)) == planned.hash
    for bad in ({"holdout": "zoo", "curve": True}, {"holdout": "cross-source"}):
        with pytest.raises(GridError, match="holdout"):
            parse_grid({"block": [{"name": "b", "datasets": ["toy"], "models": ["gcn+none"], **bad}]})


def test_a_reversal_between_budgets_is_judged_against_seed_noise():
    """Swapped pairs are listed with their paired differences; a swap counts as beyond seed noise only
    when the reversed difference at the last epoch is significant over the seeds."""
    from narbench.leaderboard.curves import Curve, swaps

    def curve(method, vals):  # vals: per seed, validation at epochs 1..3
        c = Curve("nas", "standard", "quick", method, budget=1)
        c.seeds = {s: {"validation": v, "test": v} for s, v in enumerate(vals)}
        return c

    a = curve("a", [[0.90, 0.0, 0.80], [0.91, 0.0, 0.81], [0.92, 0.0, 0.79]])
    b = curve("b", [[0.80, 0.0, 0.90], [0.81, 0.0, 0.92], [0.79, 0.0, 0.91]])  # reverses, every seed by ~0.1
    c = curve("c", [[0.70, 0.0, 0.95], [0.71, 0.0, 0.70], [0.72, 0.0, 0.78]])  # above a at 3 by luck of a seed
    out = swaps([a, b, c], "validation", 1, 3)
    assert len(out) == 2 and all(" over " in s for s in out)
    ab = next(s for s in out if s.startswith("a over b"))
    assert ab.endswith("beyond seed noise") and "at 1 (+0.110, p 0.01)" in ab and "at 3 (-0.110," in ab
    ac = next(s for s in out if s.startswith("a over c"))
    assert ac.endswith("within seed noise")
    assert not any(s.startswith("b over c") for s in out)  # b stays above c: no swap
    one = [curve(m.method, [m.seeds[0]["validation"]]) for m in (a, b)]
    assert swaps(one, "validation", 1, 3)[0].endswith("untested (fewer than 2 seeds with a spread)")


def test_the_budget_verdict_covers_registered_encoders_and_variants_face_their_base(toy_dataset, tmp_path):
    """A variant (here invariant with other rewrite rates) is compared with its base on validation and
    is not part of the registered encoders' order; the summary says whether that order holds."""
    from narbench.leaderboard import curves

    runs = tmp_path / "runs"
    for seed in (0, 1):
        for encoder, params in (("gcn", {}), ("invariant", {}), ("invariant", {"swap": 0.4})):
            run(RunConfig(encoder=encoder, profile="smoke", seed=seed, out=str(runs), progress=False, curve=True,
                          epochs=3, encoder_params=params), dataset=toy_dataset)
    (group,) = curves.settings(curves.load_curves(runs)).values()
    bases = {c.method: c.base for c in group}
    assert bases == {"gcn": "", "invariant": "", "invariant (swap=0.4)": "invariant"}
    page = curves.markdown(curves.load_curves(runs))
    assert "## Does the ranking at the profile's budget hold at the last epoch?" in page
    row = next(line for line in page.splitlines() if line.startswith("| toy / standard |"))
    assert row.startswith("| toy / standard | 2 -> 3 | 2 | 2 |")
    assert "invariant (swap=0.4) against invariant, validation:" in page and "seeds in common: 2." in page
    order_lines = [line for line in page.splitlines() if line.startswith("- validation: the order")]
    assert order_lines and all("swap" not in line for line in order_lines)


def test_the_verdict_names_a_change_beyond_noise():
    from narbench.leaderboard.curves import Curve, verdict

    def curve(method, vals):
        c = Curve("nas", "standard", "quick", method, budget=1)
        c.seeds = {s: {"validation": v, "test": v} for s, v in enumerate(vals)}
        return c

    a = curve("a", [[0.90, 0.80], [0.91, 0.81], [0.92, 0.79]])
    b = curve("b", [[0.80, 0.90], [0.81, 0.92], [0.79, 0.91]])
    c = curve("c", [[0.70, 0.95], [0.71, 0.70], [0.72, 0.78]])
    assert verdict([a, b], "validation", 1, 2) == "changes beyond seed noise"
    assert verdict([a, c], "validation", 1, 2) == "changes within seed noise"
    assert verdict([b, c], "validation", 1, 1) == "holds"
    single = [curve("a", [[0.9, 0.8]]), curve("b", [[0.8, 0.9]])]
    assert verdict(single, "validation", 1, 2) == "changes, untested"


def test_holm_adjusts_step_down_and_keeps_the_order():
    from narbench.leaderboard.curves import holm

    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])  # 3*0.01; max(2*0.03, 1*0.04) twice
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([0.02]) == [0.02] and holm([]) == []


def test_the_rule_judges_reversals_after_holm_over_every_setting():
    """Two settings each with one reversal: the family adjusts their p-values together, and a reversal
    that is beyond noise alone can fall within it once adjusted (the page gives both p-values)."""
    from narbench.leaderboard import curves as C

    def curve(split, method, vals):
        c = C.Curve("nas", split, "quick", method, budget=1)
        c.seeds = {s: {"validation": v, "test": v} for s, v in enumerate(vals)}
        return c

    one = [curve("standard", "a", [[0.90, 0.80], [0.91, 0.81], [0.92, 0.79]]),
           curve("standard", "b", [[0.80, 0.85], [0.81, 0.85], [0.79, 0.87]])]  # p 0.042 at epoch 2
    two = [curve("unseen", "a", [[0.90, 0.80], [0.91, 0.81], [0.92, 0.79]]),
           curve("unseen", "b", [[0.80, 0.84], [0.81, 0.85], [0.79, 0.86]])]  # p 0.038
    raw = [C._paired(g[0], g[1], "validation", 2)[1] for g in (one, two)]
    assert all(p < 0.05 for p in raw)  # each reversal alone: beyond seed noise
    fam = C.family(one + two, "validation")
    adjusted = [fam[("nas", split, "quick")][("a", "b")] for split in ("standard", "unseen")]
    assert adjusted == pytest.approx(C.holm(raw)) and max(adjusted) >= 0.05
    assert C.verdict(one, "validation", 1, 2) == "changes beyond seed noise"
    weaker = two if raw[1] > raw[0] else one
    setting = ("nas", weaker[0].split, "quick")
    assert C.verdict(weaker, "validation", 1, 2, adjusted=fam[setting]) == "changes within seed noise"
    (phrase,) = C.swaps(weaker, "validation", 1, 2, adjusted=fam[setting], tested=2)
    assert "Holm-adjusted over the 2 reversals tested" in phrase and phrase.endswith("within seed noise")
    page = C.markdown(one + two)
    assert "(validation: 2, test: 2)" in page and "with 2 pairs of encoders under watch" in page


def test_the_page_says_which_curves_ran_on_another_kind_of_machine():
    from narbench.leaderboard import curves as C

    def curve(method, device, seeds=(0, 1)):
        c = C.Curve("nas", "standard", "quick", method, budget=1, devices={device: set(seeds)})
        c.seeds = {s: {"validation": [0.5 + s / 100, 0.6], "test": [0.5, 0.6 + s / 100]} for s in range(2)}
        return c

    page = C.markdown([curve("a", "cpu"), curve("b", "cpu"), curve("c", "cuda (H100)")])
    assert "Devices: every curve on cpu but c on cuda (H100)." in page
    assert "Devices:" not in C.markdown([curve("a", "cpu"), curve("b", "cpu")])
    mixed = curve("c", "cpu", seeds=(0,))
    mixed.devices["cuda (H200)"] = {1}
    page = C.markdown([curve("a", "cpu"), curve("b", "cpu"), mixed])
    assert "Devices: every curve on cpu but c: seed 0 on cpu, seed 1 on cuda (H200)." in page
