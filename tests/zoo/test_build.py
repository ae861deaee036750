"""The resumable zoo build (`narbench.zoo.build`) and loading what it built as `real`."""

from __future__ import annotations

import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")


# ----------------------------------------------------------------------------- the build

FAKE_ZOO = textwrap.dedent(
    """
    import time
    import torch

    def ok():
        return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)), torch.randn(1, 4)

    def conv():
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 3)), torch.randn(1, 3, 8, 8)

    def ok2():
        return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh()), torch.randn(1, 4)

    def conv2():
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Sigmoid()), torch.randn(1, 3, 8, 8)

    def boom():
        raise ValueError("boom")

    def hang():
        time.sleep(3600)
    """
)


@pytest.fixture()
def fake_specs(tmp_path, monkeypatch):
    from narbench.zoo.spec import Spec

    mod_dir = tmp_path / "mods"
    mod_dir.mkdir()
    (mod_dir / "narbench_fake_zoo.py").write_text(FAKE_ZOO)
    monkeypatch.syspath_prepend(str(mod_dir))  # inherited by the spawned workers
    return [Spec("python", f"narbench_fake_zoo:{fn}", "test", (), fam)
            for fn, fam in (("ok", "mlp"), ("boom", "mlp"), ("hang", "mlp"), ("conv", "cnnfam"),
                            ("ok2", "mlp"), ("conv2", "cnnfam"))]


def test_build_isolates_failures_and_resumes(tmp_path, fake_specs):
    from narbench.data.store import read_graphs
    from narbench.zoo.build import build_real, read_result

    out = tmp_path / "build"
    ok, boom, hang, conv = fake_specs[:4]
    first = build_real(out, jobs=1, specs=[ok, boom, hang], timeout=8, mem_limit_gb=4, quiet=True)
    assert first["extracted"] == 1
    assert first["failed"] == {"exception": 1, "timeout": 1}
    assert "ValueError: boom" in read_result(out, boom)["error"]
    assert read_result(out, hang)["reason"] == "timeout"
    graphs, vocab, header, digest = read_graphs(first["path"], first["sha256"])
    # assembled onto the fixed canonical vocabulary (narbench.canonical), whatever ops were seen
    from narbench.data.canonical import canonical_vocabulary

    assert [g.name for g in graphs] == [ok.key] and vocab == list(canonical_vocabulary())
    assert sorted({vocab[i] for i in graphs[0].ops.tolist()}) == ["linear", "relu"]
    assert header["name"] == "real"

    # Resume: finished specs (ok or failed) are not redone; only the new one is extracted.
    stamp = {s.key: (out / "results").joinpath(s.slug + ".json.zst").stat().st_mtime_ns for s in (ok, boom, hang)}
    second = build_real(out, jobs=1, specs=[ok, boom, hang, conv], timeout=8, quiet=True)
    assert second["extracted"] == 2 and second["distinct"] == 2
    assert {s.key: (out / "results").joinpath(s.slug + ".json.zst").stat().st_mtime_ns for s in (ok, boom, hang)} == stamp
    assert second["families"] == {"mlp": 1, "cnnfam": 1}
    assert second["coarse"] == {"other": 1, "cnn": 1}

    # retry_failed redoes only the failures (the exception fails again, deterministically).
    third = build_real(out, jobs=1, specs=[ok, boom], timeout=8, retry_failed=True, quiet=True)
    assert third["failed"] == {"exception": 1} and third["extracted"] == 1


def test_build_dedups_identical_graphs(tmp_path, fake_specs):
    from narbench.zoo.build import build_real
    from narbench.zoo.spec import Spec

    ok = fake_specs[0]
    twin = Spec("python", ok.model, "test-twin", (), "other-family")
    summary = build_real(tmp_path / "b", jobs=1, specs=[ok, twin], timeout=30, quiet=True)
    assert summary["extracted"] == 2 and summary["distinct"] == 1 and summary["duplicates"] == 1
    assert summary["cross_family_duplicates"] == {"mlp|other-family": 1}


def test_select_specs_spreads_over_sources():
    from narbench.zoo.build import select_specs
    from narbench.zoo.spec import Spec

    specs = [Spec(src, f"m{i}", "t") for src in ("a", "b", "c") for i in range(10)]
    picked = select_specs(specs, limit=6)
    assert [s.source for s in picked] == ["a", "a", "b", "b", "c", "c"]
    assert [s.model for s in picked[:2]] == ["m0", "m5"]
    assert [s.key for s in select_specs(specs, only="b/m1")] == ["b/m1/t"]
    assert len(select_specs(specs, only="c/*")) == 10


def test_real_dataset_missing_artifact_is_explained(monkeypatch, tmp_path):
    from narbench.datasets.real import ENV_FILE, ArtifactMissingError, RealDataset

    monkeypatch.setenv(ENV_FILE, str(tmp_path / "nope.narg"))
    with pytest.raises(ArtifactMissingError, match="build-real"):
        RealDataset().load()


def test_real_dataset_loads_a_built_file(monkeypatch, tmp_path, fake_specs):
    from narbench.datasets.real import ENV_FILE, RealDataset
    from narbench.zoo.build import build_real

    ok, _, _, conv, ok2, conv2 = fake_specs
    summary = build_real(tmp_path / "b", jobs=2, specs=[ok, conv, ok2, conv2], timeout=30, quiet=True)
    monkeypatch.setenv(ENV_FILE, summary["path"])

    class Tiny(RealDataset):
        test_size = 0.5  # 4 graphs in 2 families: the default 0.1 cannot stratify

    ds = Tiny().load()
    assert len(ds) == 4 and ds.families == ["cnnfam", "mlp"] and ds.sha256 == summary["sha256"] and ds.name == "real"


def test_no_model_zoo_imported_by_extraction_or_loading():
    import subprocess

    code = ("import sys, narbench.zoo, narbench.zoo.sources, narbench.zoo.specgraph, narbench.zoo.build, "
            "narbench.datasets.real; "
            "print(sorted(m for m in ('timm', 'torchvision', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_variants_of_a_failing_default_are_not_run(tmp_path, fake_specs):
    from narbench.zoo.build import build_real, read_result
    from narbench.zoo.spec import Spec

    boom = fake_specs[1]
    variant = Spec("python", boom.model, boom.task, (("depth", 2),), boom.family)
    summary = build_real(tmp_path / "b", jobs=1, specs=[boom, variant], timeout=30, quiet=True)
    assert summary["failed"] == {"exception": 1, "default-failed": 1}
    assert boom.key in read_result(tmp_path / "b", variant)["error"]


# ----------------------------------------------------------------------------- re-extraction (real 2.1)

INPLACE_ZOO = textwrap.dedent(
    """
    import torch

    class InPlace(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 8)

        def forward(self, x):
            return self.fc(x).relu_().sum()

    def inplace():
        return InPlace(), torch.randn(2, 3, 4)

    def plain():
        return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh()), torch.randn(1, 4)
    """
)


def _raw_file(path, graphs):
    """A 1.0-style raw graph file: (spec, raw op names, edges, family) per graph."""
    from narbench.data.graph import ArchGraph
    from narbench.data.store import write_graphs

    vocab = sorted({op for _, ops, _, _ in graphs for op in ops})
    arch = [ArchGraph(ops=[vocab.index(o) for o in ops], edges=edges, name=spec.key, family=fam, coarse="other",
                      source=spec.source, meta={"model": spec.model, "task": spec.task, "variant": dict(spec.variant)})
            for spec, ops, edges, fam in graphs]
    write_graphs(path, arch, vocab, {"name": "real", "version": "1.0"})
    return path


def test_reextract_replaces_only_graphs_holding_the_op_and_derive_applies_the_patch(tmp_path, monkeypatch):
    import numpy as np

    from narbench.data.store import read_graphs
    from narbench.zoo.derive import derive
    from narbench.zoo.reextract import reextract, select
    from narbench.zoo.spec import Spec

    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "narbench_inplace_zoo.py").write_text(INPLACE_ZOO)
    monkeypatch.syspath_prepend(str(mods))
    inplace = Spec("python", "narbench_inplace_zoo:inplace", "test")
    plain = Spec("python", "narbench_inplace_zoo:plain", "test")
    # as torch <= 2.14 recorded the in-place ReLU after an n-d Linear, before the recorder: CopySlices
    source = _raw_file(tmp_path / "real-1.0.narg", [
        (inplace, ["AddmmBackward0", "CopySlices", "SumBackward0"], np.array([[0, 1], [1, 2]]), "fam-a"),
        (plain, ["AddmmBackward0", "TanhBackward0"], np.array([[0], [1]]), "fam-b"),
    ])
    assert [s.key for _, s in select(source, ["CopySlices"])] == [inplace.key]
    with pytest.raises(ValueError, match="no graph holds NoSuchBackward"):
        select(source, ["NoSuchBackward"])

    summary = reextract(source, tmp_path / "b", ["CopySlices"], jobs=1, timeout=60, quiet=True)
    assert (summary["selected"], summary["patched"], summary["raw_changed"], summary["failed"]) == (1, 1, 1, {})
    patch, pvocab, pheader, _ = read_graphs(summary["path"], summary["sha256"])
    assert [g.name for g in patch] == [inplace.key] and pheader["reextracted_ops"] == ["CopySlices"]
    ops = [pvocab[i] for i in patch[0].ops.tolist()]
    assert "CopySlices" not in ops and "ReluBackward0" in ops  # the op, as every torch now records it
    assert patch[0].family == "fam-a" and patch[0].meta["model"] == inplace.model

    keep = lambda name, family, source, meta: (family, meta)  # noqa: E731 - no taxonomy for fake specs
    before = derive(source, tmp_path / "d0", relabel=keep)
    after = derive(source, tmp_path / "d1", relabel=keep, patch=summary["path"])
    assert after["patched"] == 1 and "patched" not in before
    g0, v0, _, _ = read_graphs(before["path"])
    g1, v1, h1, _ = read_graphs(after["path"])
    by = lambda gs, v: {g.name: sorted(v[i] for i in g.ops.tolist()) for g in gs}  # noqa: E731
    assert by(g0, v0)[plain.key] == by(g1, v1)[plain.key]
    assert "relu" not in by(g0, v0)[inplace.key] and "relu" in by(g1, v1)[inplace.key]
    assert h1["patched_with"] == {"sha256": summary["sha256"], "graphs": 1}

    # a patch naming a graph the source lacks is refused
    stray = _raw_file(tmp_path / "stray.narg", [(Spec("python", "x:y", "test"), ["TanhBackward0"], np.zeros((2, 0)), "f")])
    with pytest.raises(ValueError, match="not in"):
        derive(source, tmp_path / "d2", relabel=keep, patch=stray)


FLAKY_ZOO = textwrap.dedent(
    """
    import os
    import torch

    def flaky():
        if os.path.exists(os.environ["NARBENCH_TEST_FLAKY"]):
            raise RuntimeError("could not create a primitive")
        return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh()), torch.randn(1, 4)
    """
)


def test_reextract_skips_a_failed_spec_until_asked_to_retry_it(tmp_path, monkeypatch):
    import numpy as np

    from narbench.zoo.reextract import reextract
    from narbench.zoo.spec import Spec

    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "narbench_flaky_zoo.py").write_text(FLAKY_ZOO)
    monkeypatch.syspath_prepend(str(mods))
    marker = tmp_path / "fail-now"
    marker.touch()
    monkeypatch.setenv("NARBENCH_TEST_FLAKY", str(marker))  # inherited by the spawned workers
    flaky = Spec("python", "narbench_flaky_zoo:flaky", "test")
    source = _raw_file(tmp_path / "real-1.0.narg", [(flaky, ["AddmmBackward0", "CopySlices"], np.array([[0], [1]]), "f")])
    first = reextract(source, tmp_path / "b", ["CopySlices"], jobs=1, timeout=60, quiet=True)
    assert (first["patched"], first["failed"]) == (0, {"exception": 1})
    marker.unlink()  # the cause is gone: a resumed run still skips the spec, a retry extracts it
    assert reextract(source, tmp_path / "b", ["CopySlices"], jobs=1, timeout=60, quiet=True)["patched"] == 0
    again = reextract(source, tmp_path / "b", ["CopySlices"], jobs=1, timeout=60, quiet=True, retry_failed=True)
    assert (again["patched"], again["failed"]) == (1, {})


def test_build_real_patch_flags_need_from(tmp_path):
    from narbench.cli import main

    with pytest.raises(SystemExit, match="go with --from"):
        main(["build-real", "--out", str(tmp_path / "o"), "--patch", str(tmp_path / "p.narg")])
    with pytest.raises(SystemExit, match="not both"):
        main(["build-real", "--out", str(tmp_path / "o"), "--from", str(tmp_path / "a.narg"),
              "--patch", str(tmp_path / "p.narg"), "--reextract", "CopySlices"])
    assert not (tmp_path / "o").exists()


CAUSAL_ZOO = textwrap.dedent(
    """
    import torch

    class Decoder(torch.nn.Module):
        def __init__(self, causal):
            super().__init__()
            self.causal = causal
            self.embed, self.q, self.k, self.v = (torch.nn.Embedding(10, 8), torch.nn.Linear(8, 8),
                                                  torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))

        def forward(self, t):
            x = self.embed(t)
            s = self.q(x) @ self.k(x).transpose(-2, -1)
            if self.causal:
                s = s.masked_fill(torch.ones(t.shape[-1], t.shape[-1], dtype=torch.bool).triu(1), float("-inf"))
            return s.softmax(-1) @ self.v(x)

    def decoder():
        return Decoder(True), torch.zeros(1, 5, dtype=torch.long)

    def encoder():
        return Decoder(False), torch.zeros(1, 5, dtype=torch.long)
    """
)


def test_reextract_everything_with_attributes_then_derive_22(tmp_path, monkeypatch):
    """`--reextract '*' --attributes`, derived at 2.2: a decoder and an encoder of the same layers,
    one canonical graph under 2.1, two under 2.2 (the causal mask and one projection)."""
    import numpy as np

    from narbench.data.canonical import canonical_vocabulary
    from narbench.data.store import read_graphs
    from narbench.zoo.derive import derive
    from narbench.zoo.attributes import ATTRIBUTES_ENV
    from narbench.zoo.reextract import ALL, reextract, select
    from narbench.zoo.spec import Spec

    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "narbench_causal_zoo.py").write_text(CAUSAL_ZOO)
    monkeypatch.syspath_prepend(str(mods))
    dec, enc = Spec("python", "narbench_causal_zoo:decoder", "test"), Spec("python", "narbench_causal_zoo:encoder", "test")
    source = _raw_file(tmp_path / "real-1.0.narg", [(dec, ["TanhBackward0"], np.zeros((2, 0)), "gpt"),
                                                    (enc, ["TanhBackward0"], np.zeros((2, 0)), "bert")])
    assert [s.key for _, s in select(source, [ALL])] == [dec.key, enc.key]
    monkeypatch.setenv(ATTRIBUTES_ENV, "1")
    summary = reextract(source, tmp_path / "b", [ALL], jobs=1, timeout=60, quiet=True)
    assert summary["patched"] == 2 and summary["failed"] == {}
    _, pvocab, pheader, _ = read_graphs(summary["path"])
    assert pheader["design_attributes"] is True and any(op.endswith("#causal") for op in pvocab)

    keep = lambda name, family, source, meta: (family, meta)  # noqa: E731 - no taxonomy for fake specs
    d21 = derive(source, tmp_path / "d21", relabel=keep, patch=summary["path"])
    d22 = derive(source, tmp_path / "d22", relabel=keep, patch=summary["path"], canonical_version="2.2")
    assert d21["path"].endswith("real-2.1.narg") and d22["path"].endswith("real-2.2.narg")
    assert d21["distinct"] == 1 and d22["distinct"] == 2  # 2.1: the decoder is the encoder
    g22, v22, h22, _ = read_graphs(d22["path"])
    assert v22 == list(canonical_vocabulary("2.2")) and h22["version"] == "2.2" and h22["ops"]["version"] == "2.2"
    ops = {g.family: [v22[i] for i in g.ops.tolist()] for g in g22}
    assert "causal_attention" in ops["gpt"] and "attention" in ops["bert"] and "causal_attention" not in ops["bert"]
    assert ops["gpt"].count("linear") == 1 and "slice" in ops["gpt"]  # q, k, v: one projection


def test_build_real_canonical_version_is_checked(tmp_path):
    from narbench.cli import main

    with pytest.raises(SystemExit, match="unknown --canonical-version '9.9'"):
        main(["build-real", "--out", str(tmp_path / "o"), "--from", "x.narg", "--canonical-version", "9.9"])
    with pytest.raises(SystemExit, match="--canonical-version goes with --from"):
        main(["build-real", "--out", str(tmp_path / "o"), "--canonical-version", "2.2"])


def test_overlay_replaces_by_name_keeps_order_and_refuses_strangers(tmp_path):
    """2.3's patch is 2.2's full re-extraction with the graphs re-extracted for 2.3 laid over it."""
    import numpy as np
    import pytest

    from narbench.data.graph import ArchGraph
    from narbench.data.store import read_graphs, write_graphs
    from narbench.zoo.reextract import overlay

    def graph(name, ops, meta):
        return ArchGraph(ops=ops, edges=np.array([[0], [1]]), name=name, family="f", coarse="c", meta=meta)

    write_graphs(tmp_path / "base.narg", [graph("a", [0, 1], {"v": 2.2}), graph("b", [1, 0], {"v": 2.2})],
                 ["AddBackward0", "ConvolutionBackward0"], {"name": "base"})
    write_graphs(tmp_path / "top.narg", [graph("b", [0, 1], {"v": 2.3})],
                 ["ConvolutionBackward0#depthwise", "ReluBackward0"], {"name": "top", "through_functions": True})
    out = overlay(tmp_path / "base.narg", tmp_path / "top.narg", tmp_path / "o.narg")
    assert (out["graphs"], out["from_top"], out["from_base"]) == (2, 1, 1)
    graphs, vocab, header, _ = read_graphs(tmp_path / "o.narg")
    assert [g.name for g in graphs] == ["a", "b"]
    assert [[vocab[i] for i in g.ops] for g in graphs] == [["AddBackward0", "ConvolutionBackward0"],
                                                           ["ConvolutionBackward0#depthwise", "ReluBackward0"]]
    assert [g.meta["v"] for g in graphs] == [2.2, 2.3] and header["through_functions"] is True
    write_graphs(tmp_path / "stranger.narg", [graph("z", [0, 1], {})], ["AddBackward0", "ReluBackward0"], {})
    with pytest.raises(ValueError, match="not in"):
        overlay(tmp_path / "base.narg", tmp_path / "stranger.narg", tmp_path / "x.narg")
