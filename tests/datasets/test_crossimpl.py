"""`real`'s cross-implementation queries: the table, the shipped file, the `crossimpl` split, the builder."""

from __future__ import annotations

import numpy as np
import pytest

from narbench.data.graph import ArchGraph

VOCAB = ["AddmmBackward0", "ConvolutionBackward0", "ReluBackward0", "SoftmaxBackward0"]


def _chain(ops: list[int], name: str, family: str, source: str = "timm", **meta) -> ArchGraph:
    n = len(ops)
    return ArchGraph(ops, np.array([np.arange(n - 1), np.arange(1, n)]), name, family,
                     "cnn", source, meta=dict(meta))


def _real() -> list[ArchGraph]:
    """40 graphs: 4 families of 10, two models per family (so `unseen` has something to hold out)."""
    return [_chain([f] + [2] * (i + 1) + [(f + 1) % 4], f"timm/m{f}-{i}", f"fam{f}", model=f"m{f}-{i % 2}")
            for f in range(4) for i in range(10)]


def _queries() -> list[ArchGraph]:
    return [_chain([1, 2, 2, 0], "crossimpl/pkg/a", "fam0", "pkg"), _chain([3, 3, 2], "crossimpl/pkg/b", "fam3", "pkg")]


def _attached(queries=None, vocab=VOCAB):
    from narbench.datasets import crossimpl
    from narbench.datasets.real import RealDataset

    q = _queries() if queries is None else queries
    return crossimpl.attach(RealDataset(), _real(), VOCAB, {"name": "real"}, "a" * 64,
                            extra=(q, vocab, {"versions": {"pkg": "1"}}, "b" * 64))


# ----------------------------------------------------------------------------- the table


def test_table_loads_and_every_family_is_a_taxonomy_family():
    from narbench.datasets import taxonomy
    from narbench.datasets.crossimpl import read_table

    rows = read_table()
    assert 40 <= len(rows) <= 150
    families = {r.family for r in taxonomy.read_rows(taxonomy.data_path())}
    assert {r.family for r in rows} <= families, sorted({r.family for r in rows} - families)
    assert len({r.package for r in rows}) >= 3
    assert len({r.identity for r in rows}) == len(rows)
    assert all(len(r.input_shape) == 4 for r in rows)
    # CNNs, ViTs and others: several families each with attention and without
    assert {"resnet", "densenet", "vit", "efficientnet"} <= {r.family for r in rows}


def test_the_widened_table_keeps_the_101_and_is_wide():
    """crossimpl 2.2's table (issue 38): >= 300 queries from >= 8 packages outside the zoos, every
    family a taxonomy family, the 2.1 rows kept for comparison, no package of the zoos' own code."""
    from narbench.datasets import taxonomy
    from narbench.datasets.crossimpl import read_table, table_path

    old, wide = read_table(table_path("2.1")), read_table(table_path("2.2"))
    assert len(wide) >= 300 and len({r.package for r in wide}) >= 8
    assert [r.identity for r in wide[: len(old)]] == [r.identity for r in old]
    assert len({r.identity for r in wide}) == len(wide)
    families = {r.family for r in taxonomy.read_rows(taxonomy.data_path())}
    assert {r.family for r in wide} <= families, sorted({r.family for r in wide} - families)
    assert not {r.package for r in wide} & {"timm", "torchvision", "transformers", "geffnet"}
    assert all(len(r.input_shape) == 4 for r in wide)


def test_malformed_table_rows_are_named(tmp_path):
    from narbench.datasets.crossimpl import COLUMNS, read_table

    path = tmp_path / "t.csv"
    head = ",".join(COLUMNS)
    path.write_text(f"{head}\npkg,m,mod:fn,,image:1x3x8x8,resnet,,\npkg,m,mod:fn,,image:1x3x8x8,resnet,,\n")
    with pytest.raises(ValueError, match=r"t.csv:3: pkg m is listed twice"):
        read_table(path)
    path.write_text(f"{head}\npkg,m,mod:fn,{{bad,image:1x3x8x8,resnet,,\n")
    with pytest.raises(ValueError, match=r"t.csv:2"):
        read_table(path)
    path.write_text(f"{head}\npkg,m,mod:fn,,text:12,resnet,,\n")
    with pytest.raises(ValueError, match=r"t.csv:2: .*image:<shape>"):
        read_table(path)


# ----------------------------------------------------------------------------- the shipped file


def test_shipped_file_matches_its_pin_and_the_table():
    from narbench.data.canonical import canonical_vocabulary
    from narbench.datasets import crossimpl

    assert crossimpl.EXPECTED_SHA256 is not None
    graphs, vocab, header, digest = crossimpl.read()  # raises if the content does not match the pin
    assert digest == crossimpl.EXPECTED_SHA256
    assert vocab == list(canonical_vocabulary())
    rows = crossimpl.read_table()
    assert [g.name for g in graphs] == [r.identity for r in rows]
    assert [(g.family, g.source) for g in graphs] == [(r.family, r.package) for r in rows]
    assert all(g.meta["identity"] == g.name and g.meta["package_version"] for g in graphs)
    assert set(header["versions"]) == {"torch"} | {r.package for r in rows}
    assert {g.coarse for g in graphs} <= {"cnn", "attention", "other"}
    # 2.1.1's cleaning: no query has an `other` node left (2.0's EfficientNets had 20%), and the
    # build recorded each query's isomorphic corpus graphs (the `exact` subset)
    assert max(crossimpl.other_share(g, vocab) for g in graphs) <= crossimpl.MAX_OTHER_SHARE
    assert all(isinstance(g.meta["corpus_twins"], list) for g in graphs)
    effnet = [g for g in graphs if g.source == "efficientnet-pytorch"]
    assert effnet and all(g.meta["renamed_functions"] == {"SwishImplementationBackward": g.meta["renamed_functions"]
                                                          ["SwishImplementationBackward"]} for g in effnet)
    assert header["version"] == crossimpl.VERSION and header["max_other_share"] == crossimpl.MAX_OTHER_SHARE


def test_shipped_file_loads_without_the_packages():
    import subprocess
    import sys

    code = ("import sys; from narbench.datasets import crossimpl; crossimpl.read(); "
            "print(sorted(m for m in ('pytorchcv', 'vit_pytorch', 'monai', 'efficientnet_pytorch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ----------------------------------------------------------------------------- the split (hand-built data)


def test_crossimpl_split_appends_queries_and_keeps_the_other_splits():
    from narbench.datasets import crossimpl
    from narbench.datasets.real import RealDataset

    plain = RealDataset().dataset(_real(), VOCAB, {"name": "real"}, "a" * 64)  # not canonical: no crossimpl
    assert set(plain.splits) == {"standard", "unseen"} and plain.sha256 == "a" * 64 and plain.query_only == 0
    ds = _attached()
    assert set(ds.splits) == {"standard", "unseen", "crossimpl"} == set(RealDataset.split_names)
    for name in ("standard", "unseen"):
        assert np.array_equal(ds.splits[name].train, plain.splits[name].train)
        assert np.array_equal(ds.splits[name].test, plain.splits[name].test)
    sp = ds.get_split("crossimpl")
    assert sp.test.tolist() == [40, 41] and sp.train.tolist() == list(range(40))
    assert [ds.graphs[i].name for i in sp.test] == ["crossimpl/pkg/a", "crossimpl/pkg/b"]
    assert ds.query_only == 2 and len(ds.core_graphs) == 40 and ds.families == plain.families
    # the dataset's sha256 stays the corpus file's (its pin); the queries' file is recorded beside it
    assert ds.sha256 == "a" * 64
    assert ds.meta["parts"] == {"real": "a" * 64, "crossimpl": "b" * 64} == ds.describe("crossimpl")["parts"]


def test_runner_queries_exactly_the_crossimpl_graphs():
    from narbench.train.profiles import get_profile
    from narbench.harness.runner import select

    ds = _attached()
    train, corpus, queries = select(ds, get_profile("quick"), 0, "crossimpl")
    assert queries.tolist() == [40, 41]
    assert corpus.tolist() == train.tolist() == list(range(40))


def test_missing_query_families_drop_the_split_and_vocabularies_must_agree():
    with pytest.warns(UserWarning, match="no split crossimpl: its query families newfam have no graph"):
        ds = _attached([_chain([1, 2], "crossimpl/pkg/c", "newfam", "pkg")])
    assert set(ds.splits) == {"standard", "unseen"} and len(ds) == 40 and ds.sha256 == "a" * 64
    with pytest.raises(ValueError, match="another op vocabulary"):
        _attached(vocab=VOCAB[::-1])


def test_datasheet_counts_core_graphs_and_lists_the_split():
    from narbench.datasets.datasheet import datasheet

    sheet = datasheet(_attached())
    assert sheet.num_graphs == 40 and "pkg" not in sheet.per_source
    assert sheet.splits["crossimpl"]["queries"] == 2 and sheet.splits["crossimpl"]["corpus"] == 40
    assert "| `crossimpl` | 40 | 2 |" in sheet.to_markdown()


def test_search_index_leaves_out_the_queries():
    from narbench.search_engine.index_build import IndexConfig, build_index

    index = build_index(IndexConfig(encoder="ophist", profile="smoke", progress=False, params={}),
                        dataset=_attached())
    assert len(index) == 40


# ----------------------------------------------------------------------------- the builder


def tiny_cnn(width: int = 4, kernel: int = 3):
    import torch

    return torch.nn.Sequential(torch.nn.Conv2d(3, width, 3), torch.nn.ReLU(), torch.nn.Conv2d(width, width, kernel),
                               torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                               torch.nn.Flatten(), torch.nn.Linear(width, 2))


def test_builder_extracts_labels_and_writes_a_loadable_file(tmp_path):
    pytest.importorskip("torch")
    from narbench.data.canonical import canonical_vocabulary
    from narbench.datasets.crossimpl import Row
    from narbench.data.store import read_graphs
    from narbench.zoo.crossimpl import build

    rows = [Row("torch", "tiny", "tests.datasets.test_crossimpl:tiny_cnn", {"width": 5}, "image:1x3x9x9", "resnet")]
    twin = _chain([0], "timm/twin", "resnet")
    summary = build(tmp_path, rows, corpus=("two graphs", [twin, twin]))
    graphs, vocab, header, digest = read_graphs(summary["path"], summary["sha256"])
    (g,) = graphs
    assert vocab == list(canonical_vocabulary()) and header["versions"]["torch"]
    assert (g.name, g.family, g.source, g.coarse) == ("crossimpl/torch/tiny", "resnet", "torch", "cnn")
    assert g.meta["device"] == "meta" and g.meta["kwargs"] == {"width": 5} and g.meta["params"] == 3 * 5 * 9 + 5 + 5 * 5 * 9 + 5 + 5 * 2 + 2
    assert g.meta["corpus_twins"] == [] and summary["exact"] == [] and header["corpus"] == "two graphs"
    assert build(tmp_path / "again", rows, corpus=("two graphs", [twin, twin]))["sha256"] == digest  # deterministic
    # the same graph in the corpus makes the query `exact`
    again = build(tmp_path / "twin", rows, corpus=("itself", [g, twin]))
    assert again["exact"] == ["crossimpl/torch/tiny"]
    assert read_graphs(again["path"])[0][0].meta["corpus_twins"] == ["crossimpl/torch/tiny"]


def test_builder_under_22_reads_design_attributes_and_needs_its_corpus(tmp_path):
    pytest.importorskip("torch")
    from narbench.data.canonical import canonical_vocabulary
    from narbench.datasets.crossimpl import Row
    from narbench.data.store import read_graphs
    from narbench.zoo.crossimpl import build

    rows = [Row("torch", "pw", "tests.datasets.test_crossimpl:tiny_cnn", {"kernel": 1}, "image:1x3x9x9", "resnet")]
    with pytest.raises(ValueError, match="needs the real graphs of that version"):
        build(tmp_path, rows, version="2.2")
    s21 = build(tmp_path / "21", rows, corpus=("none", []))
    s22 = build(tmp_path / "22", rows, corpus=("none", []), version="2.2")
    assert s22["path"].endswith("crossimpl-2.2.narg") and s21["path"].endswith("crossimpl-2.1.1.narg")
    (g21,), v21, _, _ = read_graphs(s21["path"])
    (g22,), v22, h22, _ = read_graphs(s22["path"])
    assert v22 == list(canonical_vocabulary("2.2")) and h22["ops"]["version"] == "2.2" and h22["version"] == "2.2"
    ops = lambda g, v: [v[i] for i in g.ops.tolist()]  # noqa: E731
    assert ops(g21, v21).count("conv") == 2 and ops(g22, v22).count("conv") == 1  # the 1x1 is a Linear in 2.2
    # the coarse label stays the raw graph's, as the taxonomy labels `real` (2.2's graph alone would say `other`)
    assert g21.coarse == g22.coarse == "cnn"


def test_build_crossimpl_cli_checks_the_version(tmp_path):
    from narbench.cli import main

    with pytest.raises(SystemExit, match="needs --corpus"):
        main(["build-crossimpl", "--out", str(tmp_path), "--canonical-version", "2.2"])
    with pytest.raises(SystemExit, match="unknown --canonical-version"):
        main(["build-crossimpl", "--out", str(tmp_path), "--canonical-version", "3"])


def test_builder_names_the_row_that_fails(tmp_path):
    from narbench.datasets.crossimpl import Row
    from narbench.zoo.crossimpl import build

    rows = [Row("torch", "nope", "tests.datasets.test_crossimpl:no_such_builder", {}, "image:1x3x9x9", "resnet")]
    with pytest.raises(RuntimeError, match="crossimpl/torch/nope"):
        build(tmp_path, rows, corpus=("none", []))


class _Swish:
    """A custom autograd function (as efficientnet-pytorch's memory-efficient Swish), built lazily."""

    @staticmethod
    def function(name: str):
        import torch

        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * torch.sigmoid(x)

        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            s = torch.sigmoid(x)
            return g * (s * (1 + x * (1 - s)))

        return type(name, (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})


def custom_fn_cnn(name: str = "UnmappedSwish", blocks: int = 3):
    import torch

    fn = _Swish.function(name)

    class Act(torch.nn.Module):
        def forward(self, x):
            return fn.apply(x)

    layers = []
    for _ in range(blocks):
        layers += [torch.nn.Conv2d(3, 3, 1), Act()]
    return torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 2))


def test_builder_fails_on_a_query_of_mostly_unmapped_ops_and_maps_listed_functions(tmp_path):
    pytest.importorskip("torch")
    from narbench.datasets.crossimpl import MAX_OTHER_SHARE, Row
    from narbench.zoo.crossimpl import build, extract_row

    rows = [Row("pkg", "unmapped", "tests.datasets.test_crossimpl:custom_fn_cnn", {}, "image:1x3x4x4", "resnet")]
    with pytest.raises(RuntimeError, match=r"crossimpl/pkg/unmapped: .*% of its \d+ nodes are `other`.*UnmappedSwishBackward"):
        build(tmp_path, rows, corpus=("none", []))
    assert MAX_OTHER_SHARE < 3 / 8  # three of its eight nodes are the function
    # efficientnet-pytorch's function by its name: renamed to the silu it computes, recorded in meta
    graph, _ = extract_row(Row("pkg", "swish", "tests.datasets.test_crossimpl:custom_fn_cnn",
                               {"name": "SwishImplementation"}, "image:1x3x4x4", "resnet"))
    assert "unknown_ops" not in graph.meta and graph.meta["renamed_functions"] == {"SwishImplementationBackward": 3}
    from narbench.data.canonical import canonical_vocabulary

    assert [list(canonical_vocabulary())[o] for o in graph.ops].count("silu") == 3


def test_functions_table_rows_are_checked(tmp_path):
    from narbench.datasets.crossimpl import read_functions

    table = read_functions()
    assert table["SwishImplementationBackward"] == "SiluBackward0"
    path = tmp_path / "f.csv"
    path.write_text("raw,as,package,reason\nFooBackward,NoSuchBackward0,pkg,why\n")
    with pytest.raises(ValueError, match=r"f.csv:2: NoSuchBackward0 is not in the op table"):
        read_functions(path)
    path.write_text("raw,as,package,reason\nFooBackward,SiluBackward0,pkg,why\nFooBackward,SiluBackward0,pkg,why\n")
    with pytest.raises(ValueError, match=r"f.csv:3: FooBackward is listed twice"):
        read_functions(path)
    path.write_text("raw,as,package,reason\nFooBackward,SiluBackward0,pkg,\n")
    with pytest.raises(ValueError, match=r"f.csv:2: raw, as and reason are required"):
        read_functions(path)


# ----------------------------------------------------------------------------- subsets


def test_query_subsets_partition_the_queries_and_runs_report_them(tmp_path):
    from narbench.datasets.crossimpl import query_subsets
    from narbench.harness.runrecord import subset_metrics, subset_positions

    qs = [_chain([1, 2], "crossimpl/a/x", "fam0", "a", corpus_twins=["timm/m0-0"]),
          _chain([1, 2, 2], "crossimpl/b/y", "fam1", "b", corpus_twins=[]),
          _chain([1, 3], "crossimpl/a/z", "fam1", "a", corpus_twins=[])]
    subsets = query_subsets(qs)
    assert {k: v.tolist() for k, v in subsets.items()} == {"exact": [0], "reimpl": [1, 2], "package:a": [0, 2],
                                                           "package:b": [1]}
    ds = _attached(qs)
    sp = ds.get_split("crossimpl")
    assert sp.describe()["subsets"] == {"exact": 1, "reimpl": 2, "package:a": 2, "package:b": 1}
    # a run that scored only some queries reports its subsets over those
    pos = subset_positions(sp, np.array([40, 42]))
    assert {k: v.tolist() for k, v in pos.items()} == {"exact": [0], "reimpl": [1], "package:a": [0, 1], "package:b": []}
    out = subset_metrics(pos, {"ndcg@20": np.array([1.0, 0.5])})
    assert out["reimpl"] == {"queries": 1, "positions": [1], "metrics": {"ndcg@20": 0.5}}
    assert out["package:a"]["metrics"]["ndcg@20"] == 0.75
    assert out["package:b"]["queries"] == 0
    # 2.0's file (no corpus_twins recorded) gives no subsets
    assert _attached().get_split("crossimpl").subsets == {}
    # a widened file (crossimpl 2.2) keeps 2.1.1's queries as a subset of their own, for the comparison
    wide = query_subsets(qs, first={"crossimpl/a/x", "crossimpl/b/y"})
    assert wide["v2.1.1"].tolist() == [0, 1] and wide["reimpl"].tolist() == [1, 2]


# ----------------------------------------------------------------------------- the shipped dataset


@pytest.mark.slow
def test_shipped_real_has_the_crossimpl_split(tmp_path, monkeypatch):
    from narbench.cli import main
    from narbench.data.dataset import load_dataset
    from narbench.datasets import crossimpl

    from narbench.core import registry

    ds = load_dataset("real")
    queries, _, _, digest = crossimpl.read(registry.load("dataset", "real").canonical_version)
    sp = ds.get_split("crossimpl")
    assert [ds.graphs[i].name for i in sp.test] == [g.name for g in queries]
    assert len(sp.train) == len(ds.core_graphs) == len(ds) - len(queries)
    assert not set(sp.train) & set(sp.test)
    for name in ("standard", "unseen"):
        assert ds.splits[name].test.max() < len(ds.core_graphs) and ds.splits[name].train.max() < len(ds.core_graphs)
    assert ds.meta["parts"]["crossimpl"] == digest
    # `exact`: the recorded twins are real graphs, isomorphic to their query (checked afresh here)
    from narbench.datasets.isomorphism import canonical_hash

    by_name = {g.name: g for g in ds.core_graphs}
    exact = sp.subsets["exact"].tolist()
    assert exact and sorted(exact + sp.subsets["reimpl"].tolist()) == list(range(len(queries)))
    for i in exact:
        twins = queries[i].meta["corpus_twins"]
        assert twins and all(canonical_hash(by_name[t]) == canonical_hash(queries[i]) for t in twins)
    assert main(["run", "--encoder", "wl", "--dataset", "real", "--split", "crossimpl", "--profile", "smoke",
                 "--no-progress", "--out", str(tmp_path)]) == 0


def test_real_22_queries_the_widened_crossimpl_built_under_its_rules():
    """real 2.2's crossimpl: the widened file (600 queries, 17 packages), pinned, on 2.2's vocabulary, with
    2.1.1's 101 queries as the subset `v2.1.1` and the exact/reimpl partition; 2.1 keeps 2.1.1's 101."""
    from narbench.data.dataset import load_dataset
    from narbench.datasets import crossimpl
    from narbench.datasets.crossimpl import read_table, table_path

    queries, vocab, header, digest = crossimpl.read("2.2")  # raises if the content does not match the pin
    assert digest == crossimpl.SHIPPED["2.2"].sha256 and header["version"] == "2.2" and len(queries) == 600
    assert "real-2.2.narg" in header["corpus"] and {g.name for g in queries} == \
        {r.identity for r in read_table(table_path("2.2"))}
    ds = load_dataset("real-2.2")  # `real` was 2.2 until 2.3
    assert ds.vocab == vocab and ds.query_only == 600 and ds.meta["crossimpl"]["version"] == "2.2"
    sp = ds.splits["crossimpl"]
    first = {r.identity for r in read_table(table_path("2.1"))}
    names = [ds.graphs[i].name for i in sp.test]
    assert sorted(names[i] for i in sp.subsets["v2.1.1"]) == sorted(first)
    assert sorted([*sp.subsets["exact"], *sp.subsets["reimpl"]]) == list(range(600))
    assert len([k for k in sp.subsets if k.startswith("package:")]) == 17
    assert "v2.1.1" not in load_dataset("real-2.1").splits["crossimpl"].subsets



def _masked_lm():
    """A one-block causal LM whose mask is a `tril` buffer (nanoGPT's way): on the meta device it has no values."""
    import torch
    from torch import nn

    class MaskedLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.qkv, self.out = nn.Embedding(11, 8), nn.Linear(8, 24), nn.Linear(8, 11)
            self.register_buffer("bias", torch.ones(5, 5).tril())

        def forward(self, tokens):
            q, k, v = self.qkv(self.embed(tokens)).chunk(3, -1)
            scores = (q @ k.transpose(-2, -1)).masked_fill(self.bias == 0, float("-inf"))
            return self.out(scores.softmax(-1) @ v)

    return MaskedLM()


def test_a_mask_buffer_unread_on_meta_is_read_on_the_cpu_when_the_set_asks():
    """`QuerySet.read_masks` (the wild sets): a graph extracted on meta with a square buffer there is extracted
    again on the CPU, as `narbench search` does, so the buffer's causal mask is kept; crossimpl's queries keep
    the meta graph (their files are part of `real`)."""
    torch = pytest.importorskip("torch")
    from narbench.data.canonical import canonical_vocabulary
    from narbench.datasets.crossimpl import Row
    from narbench.zoo.crossimpl import crossimpl_set, extract_row
    from narbench.zoo.wild_graphs import query_set

    def make(row, dev):
        with torch.device(dev):
            model = _masked_lm()
        return model, (torch.randint(0, 11, (1, 5), device=dev),), {}

    vocab = list(canonical_vocabulary("2.3"))
    row = Row("pkg", "masked", "tests.datasets.test_crossimpl:_masked_lm", {}, "image:1x3x4x4", "gpt2")
    kept, info = extract_row(row, "2.3", make)
    assert info["device"] == "meta" and "attention" in [vocab[o] for o in kept.ops]
    read, info = extract_row(row, "2.3", make, read_masks=True)
    ops = [vocab[o] for o in read.ops]
    assert info["device"] == "cpu" and info["masks_unread_on"] == "meta"
    assert "causal_attention" in ops and "attention" not in ops
    assert query_set(name="wildval").read_masks and query_set().read_masks and not crossimpl_set("2.3").read_masks
