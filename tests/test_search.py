"""`narbench search`: every target kind, every bad input, the index file, API = CLI, FAISS = exact."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import narbench
from narbench.search_engine.backends import ExactBackend, make_backend
from narbench.cli import main
from narbench.search_engine.engine import explain, search
from narbench.search_engine.index import SHIPPED, IndexFileError, shipped_path
from narbench.search_engine.index_file import load_index, read_index
from narbench.data.mapping import splice
from narbench.search_engine.target import TargetError, resolve_target

HERE = Path(__file__).resolve().parent
MODELS = HERE / "search_models.py"


@pytest.fixture(scope="module")
def index():
    return load_index()


# ------------------------------------------------------------------ the index


def test_shipped_index_loads_with_its_pinned_hash(index):
    assert index.sha256 == SHIPPED.sha256
    assert index.encoder_name == SHIPPED.encoder
    from narbench.data.dataset import load_dataset

    assert len(index) == len(load_dataset("real").core_graphs) and index.arrays["embeddings"].dtype == np.float16
    assert shipped_path().stat().st_size <= 15_000_000
    norms = np.linalg.norm(index.embeddings, axis=1)
    assert np.allclose(norms, 1, atol=1e-2)
    rec = index.record(0)
    assert set(rec) == {"name", "family", "coarse", "source", "num_nodes", "num_edges"}
    assert sum(index.op_counts(0).values()) == rec["num_nodes"]


def test_damaged_and_unpinned_index_files_are_refused(tmp_path):
    data = shipped_path().read_bytes()
    bad = tmp_path / "bad.nari"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(IndexFileError, match="damaged.*narbench index build"):
        read_index(bad)
    with pytest.raises(IndexFileError, match="damaged.*does not match the expected 0000"):
        read_index(shipped_path(), "0" * 64)
    with pytest.raises(IndexFileError, match="not found"):
        read_index(tmp_path / "none.nari")
    assert main(["search", "timm/x", "--index", str(bad)]) == 2


@pytest.fixture(scope="module")
def toy_index():
    """A `wl` index of the four toy families (no training: built in well under a second)."""
    from narbench.data.dataset import GraphDataset, stratified_split
    from narbench.search_engine.index_build import IndexConfig, build_index
    from tests.conftest import toy_graphs

    graphs = toy_graphs()
    split = stratified_split([g.family for g in graphs], test_size=0.25, seed=0)
    ds = GraphDataset("toy", "0", [f"op{i}" for i in range(8)], graphs, "0" * 64, split)
    return build_index(IndexConfig(encoder="wl", progress=False), dataset=ds)


def test_a_flipped_bit_or_inconsistent_arrays_make_an_index_unreadable(toy_index, tmp_path):
    from narbench.search_engine.index_file import write_index

    path = tmp_path / "toy.nari"
    digest = write_index(toy_index, path)
    assert read_index(path).sha256 == digest
    good = path.read_bytes()
    for byte in (3, 30, len(good) // 2, len(good) - 1):  # magic, checksum, frame
        data = bytearray(good)
        data[byte] ^= 4
        path.write_bytes(bytes(data))
        with pytest.raises(IndexFileError, match=f"index {path} is damaged .*(checksum mismatch|cannot decompress)"):
            read_index(path)
    bad = type(toy_index)(dict(toy_index.header), {**toy_index.arrays, "family": toy_index.arrays["family"][:-1]})
    write_index(bad, path)
    with pytest.raises(IndexFileError, match="array 'family' has 47 rows for 48 graph names"):
        read_index(path)
    ops = toy_index.arrays["opc_op"].copy()
    ops[0] = len(toy_index.vocab)
    write_index(type(toy_index)(dict(toy_index.header), {**toy_index.arrays, "opc_op": ops}), path)
    with pytest.raises(IndexFileError, match="op id 8 outside the vocabulary of 8 ops"):
        read_index(path)


def test_unknown_encoder_index_names_the_build_command(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("NARBENCH_CACHE", str(tmp_path))  # a registered encoder whose index was never built
    assert main(["search", "x.py:Y", "--encoder", "gcn"]) == 2
    err = capsys.readouterr().err  # (an encoder that is not registered is "unknown": tests/test_bad_input.py)
    assert "narbench index build --encoder gcn" in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------ targets


def test_module_instance(index):
    from tests.search_models import TinyCNN

    model = TinyCNN().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = narbench.search(model, k=5)
    assert len(result) == 5 and [h.rank for h in result] == [1, 2, 3, 4, 5]
    assert result.coarse == "cnn" and result.hits[0].coarse == "cnn"
    assert result.order == "vote"
    by_cosine = narbench.search(model, k=5, order="cosine")
    by_family = narbench.search(model, k=5, order="family")
    assert all(a.similarity >= b.similarity for a, b in zip(by_cosine.hits, by_cosine.hits[1:]))
    assert by_family.hits[0] == by_cosine.hits[0]  # family first keeps the cosine order's first hit
    assert model.training and all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert "overlap" in result.why and result.duplicate_of == []


def test_file_and_module_targets_agree(index):
    by_file = search(f"{MODELS}:TinyCNN", index=index)
    by_module = search("tests.search_models:TinyCNN", index=index)
    assert by_file.kind == "file" and by_module.kind == "import"
    assert [h.name for h in by_file] == [h.name for h in by_module]
    with_kwargs = search(f"{MODELS}:TinyMLP", index=index, kwargs={"width": 4})
    by_factory = search(f"{MODELS}:make_mlp", index=index)
    assert [h.name for h in with_kwargs] == [h.name for h in by_factory]
    assert with_kwargs.info["device"] == "meta"
    assert search(f"{MODELS}:DataDependent", index=index, input_shape=(1, 3, 32, 32)).info["device"] == "cpu"


def test_language_model_gets_token_ids(index):
    result = search(f"{MODELS}:TinyTagger", index=index)
    assert result.info["input"] == "token ids [1, 16]"
    assert result.unknown_ops == {} and result.hits


def test_an_unknown_op_is_embedded_as_other_and_named(index, capsys):
    """A custom autograd function is in no op table: its node becomes `other` (never dropped) and is reported."""
    from narbench.search_engine.engine import render

    result = search(f"{MODELS}:CustomOpMLP", index=index, input_shape=(1, 8))
    assert result.unknown_ops == {"_CubeBackward": 1} and result.unknown_as == "other"
    assert result.num_nodes == 3  # linear, other, linear: nothing spliced out
    from rich.console import Console

    render(result, Console(width=200))
    assert "unknown to the op table (embedded as `other`): _CubeBackward x1" in capsys.readouterr().out


def test_input_shape_override(index):
    q = resolve_target(f"{MODELS}:TinyCNN", index, input_shape=(1, 3, 32, 32))
    assert q.info["input"] == "tensor [1, 3, 32, 32]"


def test_normalise_inputs():
    from narbench.search_engine._target_inputs import normalise_inputs

    x, y = torch.zeros(1), torch.ones(1)
    assert normalise_inputs(x) == ((x,), {})
    assert normalise_inputs((x, y)) == ((x, y), {}) and normalise_inputs([x, y]) == ((x, y), {})
    assert normalise_inputs({"a": x}) == ((), {"a": x})
    assert normalise_inputs(((x,), {"a": y})) == ((x,), {"a": y})
    assert normalise_inputs(({"a": x},)) == (({"a": x},), {})  # one positional dict


def test_several_keyword_and_dict_inputs(index):
    """A forward of several inputs, a keyword input or a dict: given as inputs or shapes, API and CLI."""
    from tests.search_models import TwoInputs

    x, extra = torch.randn(1, 3, 32, 32), torch.randn(1, 4)
    guessed = search(f"{MODELS}:TwoInputs", index=index)  # each argument as the layer that reads it (session 84)
    assert guessed.info["input"] == "tensor [1, 3, 224, 224], tensor [1, 16, 4]"
    model = TwoInputs()
    by_inputs = search(model, index=index, inputs=(x, extra))
    assert by_inputs.info["input"] == "tensor [1, 3, 32, 32], tensor [1, 4]" and by_inputs.info["device"] == "meta"
    assert x.device.type == "cpu" and all(p.device.type == "cpu" for p in model.parameters())
    assert resolve_target(model, index, inputs=(x, extra)).ops["tanh"] == 1  # the second input's branch
    by_shapes = search(f"{MODELS}:TwoInputs", index=index, input_shape=[(1, 3, 32, 32), (1, 4)])
    names = [h.name for h in by_inputs]
    assert [h.name for h in by_shapes] == names and by_shapes.info["input"] == by_inputs.info["input"]
    batch = {"image": x, "features": extra}
    assert [h.name for h in search(f"{MODELS}:DictInput", index=index, inputs=(batch,))] == names
    assert [h.name for h in search(f"{MODELS}:KeywordInput", index=index, inputs=((x,), {"extra": extra}))] == names
    assert [h.name for h in search(f"{MODELS}:KeywordInput", index=index, inputs={"x": x, "extra": extra})] == names
    for extra_args in (["--input-shape", "1,3,32,32", "--input-shape", "1,4"],
                       ["--inputs", f"{MODELS}:two_inputs"]):
        assert main(["search", f"{MODELS}:TwoInputs", "--json", *extra_args]) == 0
    assert main(["search", f"{MODELS}:DictInput", "--json", "--inputs", "tests.search_models:dict_input"]) == 0
    assert main(["search", f"{MODELS}:KeywordInput", "--json", "--inputs", f"{MODELS}:keyword_input"]) == 0


@pytest.mark.parametrize("target, extra, expected", [
    (f"{MODELS}:TwoInputs", ["--input-shape", "1,3,32,32", "--inputs", f"{MODELS}:two_inputs"], "not both"),
    (f"{MODELS}:TwoInputs", ["--inputs", f"{MODELS}:failing_inputs"],
     "calling .*failing_inputs failed \\(OSError: no such data file\\)"),
    (f"{MODELS}:TwoInputs", ["--inputs", f"{MODELS}:nope"], "has no 'nope'"),
    (f"{MODELS}:TwoInputs", ["--inputs", "two_inputs"], "--inputs takes FILE.py:FUNC or MODULE:FUNC"),
    (f"{MODELS}:KeywordInput", ["--inputs", f"{MODELS}:two_inputs"],
     "forward pass of .*KeywordInput.* on tensor \\[1, 3, 32, 32\\], tensor \\[1, 4\\] failed .*check the example inputs"),
    ("timm:resnet18", ["--inputs", f"{MODELS}:two_inputs"], "a zoo model runs on the real build's input"),
    ("timm/resnet18/classification", ["--input-shape", "1,3,8,8"], "is a graph: it needs no example input"),
])
def test_bad_inputs_give_one_line_and_exit_2(target, extra, expected, capsys):
    import re

    assert main(["search", target, *extra]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err and captured.out == ""
    assert re.search(expected, lines[0]), lines[0]


def test_saved_graph_and_index_name(index, tmp_path):
    from narbench.data.store import write_graphs

    q = resolve_target(f"{MODELS}:TinyCNN", index)
    path = tmp_path / "q.narg"
    # a different vocabulary order: ops are matched by name
    vocab = list(reversed(index.vocab))
    remap = np.array([vocab.index(op) for op in index.vocab])
    g = q.graph
    g2 = type(g)(ops=remap[g.ops], edges=g.edges, name="mine", family="", coarse="cnn")
    write_graphs(path, [g2], vocab, {})
    by_file = search(str(path), index=index)
    assert by_file.kind == "graph-file"
    assert [h.name for h in by_file] == [h.name for h in search(f"{MODELS}:TinyCNN", index=index)]

    name = index.names[123]
    by_name = search(name, index=index, k=3)
    assert by_name.kind == "index" and name not in [h.name for h in by_name] and len(by_name) == 3
    assert by_name.duplicate_of == [name]


def test_exact_duplicate_is_found(index):
    from narbench.data.dataset import GraphDataset, stratified_split
    from narbench.search_engine.index_build import IndexConfig, build_index

    q = resolve_target(f"{MODELS}:TinyCNN", index)
    other = resolve_target(f"{MODELS}:TinyTagger", index)
    graphs = []
    for i, (g, fam) in enumerate([(q.graph, "a"), (other.graph, "b"), (q.graph, "a"), (other.graph, "b")]):
        graphs.append(type(g)(ops=g.ops, edges=g.edges, name=f"g{i}", family=fam, coarse=g.coarse, source="test"))
    graphs[2].edges = graphs[2].edges[:, :-1]  # not an exact copy any more
    ds = GraphDataset("mini", "0", index.vocab, graphs, "0" * 64, stratified_split(["a", "b", "a", "b"], test_size=0.5))
    small = build_index(IndexConfig(encoder="wl", progress=False), dataset=ds)
    result = search(f"{MODELS}:TinyCNN", index=small, k=4)
    assert result.duplicate_of == ["g0"] and result.hits[0].name == "g0"
    assert result.hits[0].similarity == pytest.approx(1.0, abs=1e-3)
    # float16 rows are unit vectors only to +-5e-4: a cosine is never shown above 1
    small = build_index(IndexConfig(encoder="wl", progress=False), dataset=ds)
    small.arrays["embeddings"][small.row_of("g0")] *= np.float16(1.002)
    result = search(f"{MODELS}:TinyCNN", index=small, k=4)
    assert result.hits[0].name == "g0" and result.hits[0].similarity == 1.0
    assert all(-1.0 <= h.similarity <= 1.0 for h in result)


@pytest.mark.skipif(not any(__import__("importlib.util").util.find_spec(z) for z in ("timm",)),
                    reason="timm is not installed")
def test_zoo_target_is_the_real_graph(index):
    result = search("timm:resnet18", index=index)
    assert result.kind == "zoo" and result.duplicate_of and result.hits[0].similarity > 0.999


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("target, extra, expected", [
    ("nowhere/my_net.py:Net", [], "file not found: nowhere/my_net.py"),
    (f"{MODELS}:Missing", [], "has no 'Missing' \\(it defines: BadForward, Broken, CustomOpMLP, DataDependent, DictInput, KeywordInput, TinyCNN"),
    (f"{MODELS}:Broken", [], "building .*Broken failed \\(ValueError: bad config\\).*--kwargs"),
    (f"{MODELS}:TinyMLP", [], "building .*TinyMLP failed .*width.*--kwargs"),
    (f"{MODELS}:BadForward", [], "forward pass of .*BadForward.* failed \\(RuntimeError: boom in forward\\)"),
    (f"{MODELS}:TinyCNN", ["--input-shape", "1,4,32,32"], "forward pass .*\\[1, 4, 32, 32\\].*--input-shape"),
    ("notamodule_xyz:Net", [], "cannot import module 'notamodule_xyz'"),
    ("no/such/graph", [], "neither a file nor a graph name"),
    (str(MODELS), [], "name the model class too"),
])
def test_bad_targets_give_one_line_and_exit_2(target, extra, expected, capsys):
    import re

    assert main(["search", target, *extra]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err and captured.out == ""
    assert re.search(expected, lines[0]), lines[0]


def test_zoo_not_installed_and_unknown_zoo_name(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "timm" else real(name, *a))
    assert main(["search", "timm:resnet50"]) == 2
    assert "zoo 'timm' is not installed; pip install timm" in capsys.readouterr().err
    monkeypatch.undo()
    if real("timm") is not None:
        assert main(["search", "timm:resnet5O"]) == 2
        assert "timm has no model 'resnet5O'" in capsys.readouterr().err


def _fake_transformers() -> dict[str, str]:
    """A transformers whose auto mappings load but whose model class fails on first access."""
    from narbench.zoo.tables import TRANSFORMERS_HEADS

    mappings = "\n".join(f"{m} = {{'bert': 'BertModel'}}" for m in TRANSFORMERS_HEADS.values())
    return {"transformers/__init__.py": "def __getattr__(name):\n"
                                        "    raise RuntimeError(f'Failed to import transformers.models.bert: {name}')\n",
            "transformers/models/__init__.py": "", "transformers/models/auto/__init__.py": "",
            "transformers/models/auto/modeling_auto.py": mappings}


@pytest.mark.parametrize("target, files, expected", [
    ("timm:resnet50", {"timm/__init__.py": "raise RuntimeError('numpy.dtype size changed')"},
     "zoo 'timm' fails to import \\(RuntimeError: numpy.dtype size changed\\); reinstall it"),
    ("torchvision:resnet18", {"torchvision/__init__.py": "",
                              "torchvision/models/__init__.py": "raise AttributeError('no attribute library')"},
     "zoo 'torchvision' fails to import torchvision.models \\(AttributeError: no attribute library\\)"),
    ("transformers:bert", _fake_transformers(),
     "zoo 'transformers' fails to import transformers.BertModel \\(RuntimeError: Failed to import "
     "transformers.models.bert: BertModel\\)"),
])
def test_a_zoo_that_fails_to_import_gives_one_line(target, files, expected, tmp_path, monkeypatch, capsys):
    """Whatever a broken zoo raises on import (not only ImportError): one line naming zoo and exception."""
    import re

    zoo = target.split(":")[0]
    if any(m == zoo or m.startswith(f"{zoo}.") for m in sys.modules):
        pytest.skip(f"{zoo} is installed and imported here")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert main(["search", target]) == 2
        with pytest.raises(TargetError, match=expected):
            search(target)
    finally:
        for m in [m for m in sys.modules if m == zoo or m.startswith(f"{zoo}.")]:
            del sys.modules[m]
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err and re.search(expected, lines[0]), captured.err


def test_bad_graph_file(tmp_path, capsys):
    path = tmp_path / "g.narg"
    path.write_bytes(b"not a graph file")
    assert main(["search", str(path)]) == 2
    assert "cannot decompress" in capsys.readouterr().err


# ------------------------------------------------------------------ API = CLI, output


def test_api_and_cli_agree(capsys, index):
    assert main(["search", f"{MODELS}:TinyCNN", "-k", "7", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    api = search(f"{MODELS}:TinyCNN", k=7)
    assert [h["name"] for h in cli["hits"]] == [h.name for h in api]
    assert [h["similarity"] for h in cli["hits"]] == [h.similarity for h in api]
    assert cli["why"] == api.why and cli["duplicate_of"] == api.duplicate_of


def test_table_output(capsys):
    assert main(["search", f"{MODELS}:TinyCNN", "-k", "3"]) == 0
    out = capsys.readouterr().out
    assert "why #1 is close:" in out and "in the index: no exact duplicate" in out and "cosine" in out


def test_explain_names_shared_ops():
    line = explain({"ConvolutionBackward0": 4, "ReluBackward0": 4}, {"ConvolutionBackward0": 2, "AddBackward0": 1})
    assert line.startswith("22% of their op counts overlap; most shared: Convolution x2")
    assert "largest difference: Relu (+4 in the query)" in line


def test_explain_counts_ops_by_role_for_an_index_that_reads_them_so():
    """A ReLU network against its GELU twin: by op, the activations differ entirely; by role (how an index in roles
    reads them) they are one op and the line says so."""
    query, hit = {"conv": 4, "relu": 4, "batchnorm": 4}, {"conv": 4, "gelu": 4, "layernorm": 3}
    plain = explain(query, hit)
    assert plain.startswith("21% of their op counts overlap; most shared: conv x4")
    by_role = explain(query, hit, roles=True)
    assert by_role.startswith("92% of their op counts overlap (activations and norms by role); most shared: "
                              "activation x4, conv x4, norm x3")
    assert by_role.endswith("largest difference: norm (+1 in the query)")


def test_only_an_index_in_roles_explains_by_role(index):
    from narbench.search_engine.index import SearchIndex

    parts = ((index.header.get("fusion") or {}).get("wl_alphabet"), index.header["encoder"]["params"].get("wl_alphabet"))
    assert index.reads_roles == ("roles" in parts)
    ops = SearchIndex({"encoder": {"params": {"holdout": "family"}}, "fusion": {"share": 0.2}}, {})
    roles = SearchIndex({"encoder": {"params": {"wl_alphabet": "roles"}}}, {})
    assert not ops.reads_roles and roles.reads_roles


def test_splice_connects_producers_to_consumers():
    edges = np.array([[0, 1, 1, 2], [1, 2, 3, 3]])
    out = splice(edges, np.array([True, False, True, True]))
    assert out.T.tolist() == [[0, 2], [0, 3], [2, 3]]


# ------------------------------------------------------------------ weak hits


def test_weak_threshold_is_a_quantile_of_the_nearest_other_model():
    from narbench.search_engine.weak import weak_threshold

    # unit vectors at angles 0, 10, 60 and 150 degrees; a and a' are one model
    emb = np.array([[np.cos(a), np.sin(a)] for a in np.radians([0, 10, 60, 150])], dtype=np.float32)
    groups = ["m/a", "m/a", "m/b", "m/c"]
    nearest_other = np.cos(np.radians([60, 50, 50, 90]))  # a, a' and b: b or a'; c: b
    for q in (0.0, 0.05, 0.5, 1.0):
        assert weak_threshold(emb, groups, quantile=q) == pytest.approx(np.quantile(nearest_other, q), abs=1e-4)
    assert weak_threshold(emb, ["one"] * 4) is None  # no other model: no threshold
    sampled = weak_threshold(np.repeat(emb, 50, axis=0), [g for g in groups for _ in range(50)], sample=20)
    assert sampled in np.round(nearest_other, 4)


def test_a_built_index_records_its_weak_threshold(toy_index):
    from narbench.search_engine.weak import weak_threshold

    weak = toy_index.header["weak_below"]
    assert weak["quantile"] == 0.05 and weak["sample"] == len(toy_index) and toy_index.weak_below == weak["cosine"]
    groups = [f"{toy_index.record(i)['family']}/{name}" for i, name in enumerate(toy_index.names)]  # no meta
    assert weak["cosine"] == pytest.approx(weak_threshold(toy_index.embeddings, groups), abs=2e-3)  # float16 rows


def test_models_are_grouped_as_the_unseen_split_groups_them():
    from narbench.datasets.real import model_group as unseen_group
    from narbench.search_engine.weak import model_group
    from tests.conftest import toy_graphs

    graphs = toy_graphs(per_family=2)
    graphs[0].meta = {"model": "resnet50"}
    assert [model_group(g) for g in graphs] == [unseen_group(g) for g in graphs]
    assert model_group(graphs[0]) == f"{graphs[0].family}/resnet50"


def test_weak_hits_are_marked_in_the_table_and_json(index, capsys, monkeypatch):
    assert index.weak_below is not None
    strong = search("examples/out_of_zoo.py:ResidualCNN", index=index, k=5)
    assert strong.weak_below == index.weak_below and not any(h.weak for h in strong)
    assert main(["search", f"{MODELS}:TinyTagger", "-k", "5", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["weak_below"] == index.weak_below
    assert [h["weak"] for h in result["hits"]] == [h["similarity"] < index.weak_below for h in result["hits"]]
    # which hits are weak depends on the encoder's geometry (docs/search.md measures it); the marking
    # does not: with the index's threshold above the tagger's best hit, every hit is weak, and said so
    top = max(h["similarity"] for h in result["hits"])
    monkeypatch.setitem(index.header, "weak_below", {**index.header["weak_below"], "cosine": round(top + 0.01, 4)})
    assert main(["search", f"{MODELS}:TinyTagger", "-k", "5", "--json"]) == 0
    assert all(h["weak"] for h in json.loads(capsys.readouterr().out)["hits"])
    assert main(["search", f"{MODELS}:TinyTagger", "-k", "5"]) == 0
    out = capsys.readouterr().out
    assert out.count(" weak │") == 5 and f"no close match: every hit is weak (cosine below {index.weak_below:.3f}" in out
    monkeypatch.undo()
    assert main(["search", "examples/out_of_zoo.py:ResidualCNN", "-k", "5"]) == 0
    assert "weak" not in capsys.readouterr().out


def test_an_index_without_a_threshold_marks_no_hit_weak(toy_index):
    bare = type(toy_index)({k: v for k, v in toy_index.header.items() if k != "weak_below"}, toy_index.arrays)
    result = search(toy_index.names[0], index=bare, k=5)
    assert bare.weak_below is None and result.weak_below is None and not any(h.weak for h in result)
    strict = type(toy_index)({**toy_index.header, "weak_below": {"cosine": 1.5}}, toy_index.arrays)
    assert all(h.weak for h in search(toy_index.names[0], index=strict, k=5))


@pytest.mark.slow
def test_shipped_weak_threshold(index):
    """The shipped index's threshold (in its header) is what `weak_threshold` gives on its
    embeddings and the `real` dataset's models."""
    from narbench.data.dataset import load_dataset
    from narbench.search_engine.weak import model_group, weak_threshold

    graphs = load_dataset("real").core_graphs
    row = {n: i for i, n in enumerate(index.names)}
    # the build sampled rows in the dataset's order (the index stores them in content order) from
    # float32 embeddings (the index keeps float16): the same sample, so only rounding differs
    emb = index.embeddings[[row[g.name] for g in graphs]]
    groups = [model_group(g) for g in graphs]
    assert weak_threshold(emb, groups, seed=index.header["seed"]) == pytest.approx(index.weak_below, abs=1e-3)


# ------------------------------------------------------------------ backends


def test_exact_backend_breaks_ties_by_row():
    emb = np.array([[1, 0], [0, 1], [1, 0], [0.6, 0.8]], dtype=np.float32)
    rows, scores = ExactBackend(emb).search(np.array([1, 0], dtype=np.float32), 3)
    assert rows[0].tolist() == [0, 2, 3] and scores[0, 0] == pytest.approx(1.0)


def test_exact_backend_ranks_the_same_whatever_the_summation_order():
    """Rows that tie in exact arithmetic (presence-bit embeddings, stored as float16 like an index's)
    get bit-equal scores ordered by row, and permuting the features (the order another host's BLAS
    sums in) changes neither rows nor scores."""
    g = np.random.default_rng(0)
    bits = (g.random((300, 64)) < 0.3).astype(np.float64)
    emb = (bits / np.linalg.norm(bits, axis=1, keepdims=True).clip(1e-12)).astype(np.float16)
    q = emb[:20].astype(np.float32)
    perm = g.permutation(64)
    rows, scores = ExactBackend(emb).search(q, 40)
    rows_p, scores_p = ExactBackend(np.ascontiguousarray(emb[:, perm])).search(np.ascontiguousarray(q[:, perm]), 40)
    assert np.array_equal(rows, rows_p) and np.array_equal(scores, scores_p)
    for r, sc in zip(rows, scores):
        for i in range(len(r) - 1):
            assert sc[i] > sc[i + 1] or (sc[i] == sc[i + 1] and r[i] < r[i + 1])


def test_faiss_and_exact_agree_on_a_small_corpus(index):
    pytest.importorskip("faiss")
    emb = index.embeddings[:3000]
    queries = index.embeddings[3000:3020]
    exact = make_backend("exact", emb).search(queries, 10)
    flat = make_backend("faiss", emb).search(queries, 10)
    ivf = make_backend("faiss", emb, factory="IVF16,Flat", nprobe=16).search(queries, 10)
    for got in (flat, ivf):
        assert np.allclose(got[1], exact[1], atol=1e-4)
        assert np.mean(got[0][:, 0] == exact[0][:, 0]) >= 0.9  # ties may order differently
    result = search(f"{MODELS}:TinyCNN", index=index, backend="faiss")
    assert [h.similarity for h in result] == [h.similarity for h in search(f"{MODELS}:TinyCNN", index=index)]


def test_faiss_missing_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "faiss", None)
    load_index()._cache.pop("backend:faiss", None)
    assert main(["search", f"{MODELS}:TinyCNN", "--backend", "faiss"]) == 2
    assert "pip install faiss-cpu" in capsys.readouterr().err


# ------------------------------------------------------------------ building an index


@pytest.mark.parametrize("encoder", ["gcn", "ophist"])
def test_built_index_round_trips_and_embeds_queries_as_the_corpus(encoder, toy_dataset, tmp_path, monkeypatch):
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.index_file import write_index

    monkeypatch.setenv("NARBENCH_NO_PROGRESS", "1")
    built = build_index(IndexConfig(encoder=encoder, profile="smoke", device="cpu", progress=False),
                        dataset=toy_dataset)
    path = tmp_path / f"toy-{encoder}.nari"
    digest = write_index(built, path)
    again = read_index(path, digest)
    assert write_index(build_index(IndexConfig(encoder=encoder, profile="smoke", device="cpu", progress=False),
                                   dataset=toy_dataset), tmp_path / "again.nari") == digest  # reproducible
    assert bool(again.header["encoder"]["weights"]) == (encoder == "gcn")
    graphs = {g.name: g for g in toy_dataset.graphs}
    rows = [0, 5, len(again) - 1]
    emb = again.embed([graphs[again.names[r]] for r in rows])
    assert np.allclose(emb, again.embeddings[rows], atol=2e-3)
    result = search(again.names[0], index=again, k=5)
    assert result.hits[0].family == again.record(0)["family"]


def test_torch_outside_the_checked_versions_warns(index):
    """The shipped index records the torch versions its canonical graphs were checked with; outside them
    `narbench search` warns (graphs recorded by another torch may differ unnoticed)."""
    from narbench.search_engine.engine import torch_warning
    from narbench.data.ops import TORCH_CHECKED

    assert index.header["torch_checked"] == list(TORCH_CHECKED)
    assert torch_warning(index, "2.14.1+cu130") is None and torch_warning(index, "2.13.0+cpu") is None
    assert "torch 2.16.0 is outside the versions" in torch_warning(index, "2.16.0")
    old = type(index)({k: v for k, v in index.header.items() if k != "torch_checked"}, index.arrays)
    assert torch_warning(old, "2.16.0") is None  # an index that recorded none cannot say


def test_family_first_orders_hits_by_their_familys_best_hit():
    """`narbench.search_engine.order`: the hits of the nearest graph's families first (by cosine), then the next
    family's; a graph of several families goes with the one met first; the ranks are numbered again."""
    from narbench.search_engine.engine import Hit
    from narbench.search_engine.order import check_order, family_first, order_hits

    assert family_first(list("abcab"), lambda x: [x]) == list("aabbc")
    assert family_first([("a",), ("b",), ("b", "c"), ("c",), ("a", "c")], lambda x: x) == [
        ("a",), ("a", "c"), ("b",), ("b", "c"), ("c",)]
    sims = [0.9, 0.8, 0.7, 0.6]
    hits = [Hit(rank=i + 1, name=f"g{i}", family=f, coarse="cnn", source="s", similarity=sim, num_nodes=3,
                num_edges=2) for i, (f, sim) in enumerate(zip("xyxz", sims))]
    ordered = order_hits(hits, "family")
    assert [h.name for h in ordered] == ["g0", "g2", "g1", "g3"] and [h.rank for h in ordered] == [1, 2, 3, 4]
    assert order_hits(hits, "cosine") == hits
    with pytest.raises(ValueError, match="the orders are vote, family, cosine"):
        check_order("random")


def test_family_vote_orders_hits_by_the_votes_of_their_families():
    """`order.family_vote`: the first `VOTERS` items vote, rank r with weight r^-2 shared among its families; each
    item scores the summed votes of its families, ties by position. Where family first keeps an exact twin of one
    family first, the vote can put a graph of the family the next hits agree on before it."""
    from narbench.search_engine.order import DECAY, VOTERS, family_first, family_vote, reorder

    assert (VOTERS, DECAY) == (10, 2.0)

    def one(x):
        return [x]

    # a: 1 (rank 1); b: 1/4 + 1/9 + 1/16 (ranks 2-4): `a` keeps the lead, b's graphs follow, then c
    assert family_vote(list("abbbc"), one) == list("abbbc")
    # b: 1 + 1/9 + 1/16; a: 1/4 (rank 2 alone): the first hit's family, then the lone `a`
    assert family_vote(list("babbc"), one) == list("bbbac")
    # a first hit x (1) against y at ranks 2-10 (0.55 in all): x stays first
    assert family_vote(list("x" + "y" * 9), one)[0] == "x"
    # a first hit of family c, then d's; the graph of both (rank 7) sums c's vote and d's and goes first,
    # where family first keeps c's exact twin first
    items = [("c",), ("d",), ("d",), ("d",), ("d",), ("d",), ("d", "c"), ("d",)]
    assert family_vote(items, lambda x: x)[0] == ("d", "c")
    assert family_first(items, lambda x: x)[0] == ("c",)
    # a shared graph's vote is split evenly: listing its families in another order changes nothing
    swapped = [tuple(reversed(i)) for i in items]
    assert [sorted(i) for i in family_vote(swapped, lambda x: x)] == [sorted(i) for i in family_vote(items, lambda x: x)]
    # a: 1, c (ranks 3-10 vote): 0.39, b: 1/4; items past the voters score by the voters' families (the last b
    # joins the first), and a family no voter has scores 0: last
    tail = list("ab") + list("c" * 9) + list("zb")
    assert family_vote(tail, one) == list("a") + list("c" * 9) + list("bbz")
    assert reorder(list("ba"), one, "cosine") == list("ba") and reorder(list("babbc"), one, "vote") == list("bbbac")


def test_op_kinds_reorder_hits_before_the_vote_only_when_weighted():
    """`order.kind_overlap` is the Jaccard overlap of op kinds; `by_kinds` orders by cosine + weight x overlap, so
    of two graphs equally near by cosine the one using the query's op kinds goes first and can win the vote; weight 0
    and the cosine order leave the hits as they are."""
    from narbench.search_engine.engine import Hit
    from narbench.search_engine.order import by_kinds, kind_overlap, order_hits, weighs_kinds

    assert kind_overlap({"conv", "relu"}, {"conv": 3, "gelu": 1}) == pytest.approx(1 / 3)
    assert kind_overlap([], {}) == 1.0 and kind_overlap(["a"], ["a", "a"]) == 1.0
    assert by_kinds(list("ab"), [0.9, 0.9], [0.2, 0.8], 0.0) == list("ab")
    assert by_kinds(list("ab"), [0.9, 0.9], [0.2, 0.8], 0.3) == list("ba")
    assert by_kinds(list("ab"), [0.95, 0.5], [0.0, 1.0], 0.3) == list("ab")  # a far graph is not pulled ahead
    with pytest.raises(ValueError):
        by_kinds(list("ab"), [0.9], [0.2, 0.8], 0.3)
    # an exact twin of family x (overlap 0.5: a ReLU where the query has GELU) then two y graphs that use the
    # query's kinds, a hair less near: by cosine x wins the vote, with the kinds y does
    sims, fams, over = [0.990, 0.989, 0.988, 0.5], "xyyz", [0.5, 1.0, 1.0, 0.0]
    hits = [Hit(rank=i + 1, name=f"g{i}", family=f, coarse="cnn", source="s", similarity=s_, num_nodes=3,
                num_edges=2) for i, (f, s_) in enumerate(zip(fams, sims))]
    assert [h.family for h in order_hits(hits, "vote", overlaps=over, kinds=0.0)] == list("xyyz")
    assert [h.family for h in order_hits(hits, "vote", overlaps=over, kinds=0.3)] == list("yyxz")
    assert [h.rank for h in order_hits(hits, "vote", overlaps=over, kinds=0.3)] == [1, 2, 3, 4]
    assert order_hits(hits, "cosine", overlaps=over, kinds=0.3) == hits
    assert [h.family for h in order_hits(hits, "family", overlaps=over, kinds=0.3)] == list("xyyz")  # the vote's only
    assert weighs_kinds("vote", 0.3) and not weighs_kinds("vote", 0.0) and not weighs_kinds("family", 0.3)


def test_search_reads_the_op_kind_weight_at_search_time(index, monkeypatch):
    """`engine.run_search` orders the hits by `order.KINDS` as it is when it searches (a study sets it): at 0 the
    vote reads the hits by cosine; with a weight, the vote's hits are the `POOL` hits by cosine ordered by
    `by_kinds` then voted; the cosine order and the out-of-family judgement (on the hits by cosine) do not move."""
    from narbench.search_engine import order as orders
    from narbench.search_engine.order import POOL, by_kinds, family_vote, kind_overlap

    def pool_of(target):
        return narbench.search(target, k=POOL, index=index, order="cosine").hits

    name = next(n for n in index.names if n.startswith("timm/resnet50/"))
    monkeypatch.setattr(orders, "KINDS", 0.0)
    plain = narbench.search(name, k=20, index=index)
    assert [h.name for h in plain.hits] == [h.name for h in family_vote(pool_of(name), lambda h: h.families)[:20]]
    pool = narbench.search(name, k=POOL, index=index, order="cosine")
    monkeypatch.setattr(orders, "KINDS", 5.0)
    weighted = narbench.search(name, k=20, index=index)
    by_cosine = narbench.search(name, k=POOL, index=index, order="cosine")
    query = index.op_counts(index.row_of(name))
    over = [kind_overlap(query, index.op_counts(index.row_of(h.name))) for h in pool.hits]
    want = family_vote(by_kinds(pool.hits, [h.similarity for h in pool.hits], over, 5.0), lambda h: h.families)
    assert [h.name for h in weighted.hits] == [h.name for h in want[:20]]
    assert [h.name for h in weighted.hits] != [h.name for h in plain.hits]  # the weight moved some
    assert [h.name for h in by_cosine.hits] == [h.name for h in pool.hits]
    assert weighted.out_of_family == plain.out_of_family and weighted.no_family_fits == plain.no_family_fits


def test_search_orders_the_hits_it_asks_for(index):
    """`search(order=...)`: by vote by default (the order `family_vote` gives the first `POOL` hits by cosine, ordered
    first by cosine + `order.KINDS` x their op-kind overlap with the query),
    family first on request (the first hit as by cosine, every hit's group, the first position any of its families
    reaches, never before the previous hit's); an unknown order is refused."""
    from narbench.search_engine.order import KINDS, POOL, by_kinds, family_vote, kind_overlap

    name = next(n for n in index.names if n.startswith("timm/resnet50/"))
    by_vote = narbench.search(name, k=20, index=index)
    by_family = narbench.search(name, k=20, index=index, order="family")
    by_cosine = narbench.search(name, k=20, index=index, order="cosine")
    pool = narbench.search(name, k=POOL, index=index, order="cosine")
    assert by_vote.order == "vote" and by_family.order == "family" and by_cosine.order == "cosine"
    query = index.op_counts(index.row_of(name))
    over = [kind_overlap(query, index.op_counts(index.row_of(h.name))) for h in pool.hits]
    weighted = by_kinds(pool.hits, [h.similarity for h in pool.hits], over, KINDS)
    assert [h.name for h in by_vote.hits] == [h.name for h in family_vote(weighted, lambda h: h.families)[:20]]
    assert [h.rank for h in by_vote.hits] == list(range(1, 21))
    assert by_family.hits[0].name == by_cosine.hits[0].name
    assert all(a.similarity >= b.similarity for a, b in zip(by_cosine.hits, by_cosine.hits[1:]))
    first: dict[str, int] = {}
    for pos, h in enumerate(by_family.hits):
        for f in h.families:
            first.setdefault(f, pos)
    groups = [min(first[f] for f in h.families) for h in by_family.hits]
    assert groups == sorted(groups) and [h.rank for h in by_family.hits] == list(range(1, 21))
    assert by_family.to_json()["order"] == "family" and by_vote.to_json()["order"] == "vote"
    with pytest.raises(ValueError, match="unknown hit order"):
        narbench.search(name, index=index, order="random")
