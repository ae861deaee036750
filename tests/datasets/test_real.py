"""The `real` dataset loader (pinned artifact, corruption, split) and the datasheet."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from narbench.data.graph import ArchGraph
from narbench.data.store import CorruptFileError, write_graphs

VOCAB = ["AddmmBackward0", "ConvolutionBackward0", "ReluBackward0", "SoftmaxBackward0"]


def _chain(ops: list[int], name: str, family: str, coarse: str, source: str) -> ArchGraph:
    n = len(ops)
    return ArchGraph(ops, np.array([np.arange(n - 1), np.arange(1, n)]), name, family, coarse, source)


def _graphs() -> list[ArchGraph]:
    """60 distinct chains in 5 families of 12 (two sources), plus 3 singleton families."""
    out = []
    for f in range(5):
        for i in range(12):
            ops = [f % 4] + [2] * (i + 1) + [(f + 1) % 4]
            out.append(_chain(ops, f"m{f}-{i}", f"fam{f}", "cnn" if f < 3 else "attention",
                              "timm" if f % 2 else "transformers"))
    for s in range(3):
        out.append(_chain([3] * (20 + s), f"single{s}", f"lonely{s}", "other", "torchvision"))
    return out


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """A small artifact installed as the *shipped* (pinned) file, its sha256 pinned."""
    from narbench.datasets import real

    path = tmp_path / "data" / real.ARTIFACT
    digest = write_graphs(path, _graphs(), VOCAB, {"name": "real", "version": "1.0"})
    monkeypatch.delenv(real.ENV_FILE, raising=False)
    monkeypatch.setattr(real, "shipped_path", lambda artifact=real.ARTIFACT: path)
    monkeypatch.setattr(real.RealDataset, "expected_sha256", digest)
    return path, digest


def test_pinned_artifact_loads_and_split_is_stratified_and_fixed(shipped):
    from narbench.datasets.real import RealDataset

    path, digest = shipped
    ds = RealDataset().load()
    assert ds.sha256 == digest and len(ds) == 63 and len(ds.families) == 8
    again = RealDataset().load()
    assert np.array_equal(ds.split.test, again.split.test) and np.array_equal(ds.split.train, again.split.train)
    test_fams = Counter(ds.graphs[i].family for i in ds.split.test)
    # 10% of each 12-member family is queried (stratified), singletons never are.
    assert all(test_fams[f"fam{f}"] in (1, 2) for f in range(5)), test_fams
    assert not any(f.startswith("lonely") for f in test_fams)
    assert sorted(np.concatenate([ds.split.train, ds.split.test]).tolist()) == list(range(63))


def test_pinned_artifact_with_other_content_is_rejected(shipped, monkeypatch):
    from narbench.datasets import real

    path, digest = shipped
    write_graphs(path, _graphs()[:-1], VOCAB, {"name": "real", "version": "1.0"})  # valid file, other content
    with pytest.raises(CorruptFileError, match="sha256"):
        real.RealDataset().load()


def test_corrupted_artifact_is_rejected_with_a_clear_error(shipped):
    from narbench.datasets.real import RealDataset

    path, _ = shipped
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=str(path.name)):
        RealDataset().load()
    path.write_bytes(bytes(data[: len(data) // 3]))  # truncated
    with pytest.raises(CorruptFileError, match="truncated or corrupt"):
        RealDataset().load()


def test_datasheet_counts(shipped):
    from narbench.datasets.real import RealDataset
    from narbench.datasets.datasheet import datasheet

    ds = RealDataset().load()
    sheet = datasheet(ds)
    assert sheet.num_graphs == 63 and sheet.num_families == 8 and sheet.num_ops == 4
    assert sheet.per_source == {"transformers": 36, "timm": 24, "torchvision": 3}
    assert sheet.per_coarse == {"cnn": 36, "attention": 24, "other": 3}
    assert sheet.per_family["fam0"] == 12 and sheet.per_family["lonely2"] == 1
    assert sheet.split["singleton_families"] == 3 and sheet.split["query_families"] == 5
    assert sheet.split["corpus"] + sheet.split["queries"] == 63
    assert sheet.nodes["min"] == 3 and sheet.nodes["max"] == 22
    md = sheet.to_markdown()
    assert "| graphs (all distinct) | 63 |" in md and "| cnn | 36 | 57.1% |" in md
    assert "fam0 (transformers) | 12 |" in md


def test_datasheet_cli_writes_markdown(shipped, tmp_path):
    from narbench.cli import main

    out = tmp_path / "sheet.md"
    assert main(["datasheet", "real", "--markdown", str(out)]) == 0
    assert out.read_text().startswith("## Datasheet: `real` 2.1")


def test_shipped_artifact_is_pinned_large_and_distinct():
    """The packaged `real` file: sha256 pinned and checked, the issue's size floor, no duplicates."""
    from narbench.datasets.real import RealDataset, shipped_path

    assert shipped_path().is_file(), "narbench/data/real-2.1.narg is missing from the package"
    assert RealDataset.expected_sha256 is not None
    ds = RealDataset().load()  # raises if the content does not match the pin
    assert ds.meta["parts"]["real"] == RealDataset.expected_sha256  # ds.sha256 covers crossimpl too
    assert len(ds) >= 12_517 and len(ds.families) >= 150
    assert len({g.content_hash() for g in ds.core_graphs}) == len(ds.core_graphs)
    assert set(ds.coarse_labels) <= {"cnn", "attention", "other"}
    assert {g.source for g in ds.core_graphs} == {"timm", "torchvision", "transformers"}


def test_real_22_ships_pinned_beside_21_with_its_memberships_fixed():
    """`real-2.2`: the same specs under canonical rules 2.2, pinned, registered apart from `real` (2.1), results
    recording `real` 2.2; MC3 and R(2+1)D two families, the LiteText text tower MobileCLIP's, not SAM 3's."""
    from narbench.data.canonical import canonical_vocabulary
    from narbench.data.dataset import load_dataset
    from narbench.datasets.real import NEWEST, Real22Dataset, RealDataset, model_group

    assert NEWEST is Real22Dataset and Real22Dataset.expected_sha256 != RealDataset.expected_sha256
    ds = load_dataset("real-2.2")  # raises if the content does not match the pin
    assert (ds.name, ds.version) == ("real", "2.2") and ds.vocab == list(canonical_vocabulary("2.2"))
    assert "causal_attention" in ds.vocab and len(ds.core_graphs) > 16_000
    fam = {}
    for g in ds.core_graphs:
        fam.setdefault(g.meta["model"], set()).add(g.family)
    assert fam["mc3_18"] == {"mc3"} and fam["r2plus1d_18"] == {"r2plus1d"}
    assert fam["sam3_lite_text_text_model"] == {"mobileclip_text"} and fam["sam3_vit_model"] == {"sam3"}
    unseen = ds.splits["unseen"]
    group = np.array([model_group(g) for g in ds.core_graphs])
    assert not set(group[unseen.train]) & set(group[unseen.test]) and len(unseen.test) > 1000
    # a decoder's attention is causal, an encoder's is not: what keeps GPT-2 apart from ViT in 2.2
    causal = ds.vocab.index("causal_attention")
    share = {f: np.mean([causal in g.ops for g in ds.core_graphs if g.family == f]) for f in ("gpt2", "vit")}
    assert share["gpt2"] > 0.9 and share["vit"] == 0


def test_shipped_unseen_split_holds_out_whole_zoo_models():
    """No zoo model (any variant, task head, or the same name in another zoo) on both sides."""
    from narbench.data.dataset import load_dataset
    from narbench.datasets.real import model_group

    ds = load_dataset("real")
    assert set(ds.splits) == {"standard", "unseen", "crossimpl"} and ds.split is ds.splits["standard"]
    unseen = ds.splits["unseen"]
    group = np.array([model_group(g) for g in ds.graphs])
    family = np.array([g.family for g in ds.graphs])
    models = np.array([g.meta["model"] for g in ds.graphs])
    assert not set(group[unseen.train]) & set(group[unseen.test])
    assert not {(f, m) for f, m in zip(family[unseen.test], models[unseen.test])} & \
        {(f, m) for f, m in zip(family[unseen.train], models[unseen.train])}
    assert set(family[unseen.test]) <= set(family[unseen.train])
    assert len(unseen.test) >= 1000 and len(unseen.train) + len(unseen.test) == len(ds.core_graphs)
    # the standard split, by contrast, has variants of a query's model in the corpus
    std = ds.splits["standard"]
    assert set(group[std.train]) & set(group[std.test])
