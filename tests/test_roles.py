"""Op roles (`narbench.data.roles`, issue 59): every activation read as one op and every normalisation as one,
in `graf-lda`'s WL block (`wl_alphabet=roles`) and in a fused index's WL part (`fuse_wl_alphabet=roles`), so that
two graphs of one design that differ only in those choices read alike there, and nowhere else."""

from __future__ import annotations

import numpy as np
import pytest

from narbench.data.graph import ArchGraph
from narbench.data.roles import in_alphabet, role_table

VOCAB = ["add", "relu", "linear", "gelu", "layernorm", "silu", "rmsnorm", "sigmoid", "conv"]


def block(act: str, norm: str, name: str, family: str = "f", depth: int = 3) -> ArchGraph:
    """A chain of `depth` linear -> act -> norm -> add blocks (each add also reads the block's input)."""
    ops, edges, prev = [], [], None
    for _ in range(depth):
        base = len(ops)
        ops += [VOCAB.index(o) for o in ("linear", act, norm, "add")]
        edges += [(base, base + 1), (base + 1, base + 2), (base + 2, base + 3)]
        if prev is not None:
            edges += [(prev, base), (prev, base + 3)]
        prev = base + 3
    return ArchGraph(np.array(ops), np.array(edges).T, name, family, "c")


def test_a_role_reads_as_its_first_op_and_every_other_op_as_itself():
    table = role_table(VOCAB)
    assert {VOCAB[t] for t in table[[VOCAB.index(o) for o in ("relu", "gelu", "silu")]]} == {"relu"}
    assert {VOCAB[t] for t in table[[VOCAB.index(o) for o in ("layernorm", "rmsnorm")]]} == {"layernorm"}
    for op in ("add", "linear", "sigmoid", "conv"):  # a gate is not an activation of the role
        assert VOCAB[table[VOCAB.index(op)]] == op
    assert role_table(["a", "b"]).tolist() == [0, 1]  # a vocabulary without the roles' ops: unchanged


def test_graphs_read_in_roles_are_copies_and_ops_leaves_them_be():
    g = block("gelu", "rmsnorm", "g")
    before = g.ops.copy()
    assert in_alphabet([g], VOCAB, "ops")[0] is g
    mapped = in_alphabet([g], VOCAB, "roles")[0]
    assert mapped is not g and np.array_equal(g.ops, before)  # the graph itself is not changed
    assert np.array_equal(mapped.ops, in_alphabet([block("relu", "layernorm", "h")], VOCAB, "roles")[0].ops)
    with pytest.raises(ValueError, match="roles alphabet needs the dataset's op vocabulary"):
        in_alphabet([g], None, "roles")
    with pytest.raises(ValueError, match="must be one of ops, roles"):
        in_alphabet([g], VOCAB, "letters")


def lda_wl_block(alphabet: str, graphs: list[ArchGraph]) -> np.ndarray:
    from narbench.baselines.graf_lda import WL_DIM, GrafLdaEncoder
    from narbench.train.profiles import get_profile

    enc = GrafLdaEncoder(len(VOCAB), 2, get_profile("smoke"))
    enc.set_params({"wl_rounds": 2, "wl_alphabet": alphabet})
    enc.use_vocabulary(VOCAB)
    return enc._features(graphs, np.zeros(0, dtype=np.int64))[:, -WL_DIM:]


def test_graf_lda_reads_its_wl_block_in_roles_only_when_asked():
    a, b = block("gelu", "layernorm", "a"), block("silu", "rmsnorm", "b")  # one design, two packages' choices
    other = block("gelu", "layernorm", "c", depth=5)
    roles = lda_wl_block("roles", [a, b, other])
    assert np.array_equal(roles[0], roles[1]) and not np.array_equal(roles[0], roles[2])
    ops = lda_wl_block("ops", [a, b])
    assert not np.array_equal(ops[0], ops[1])


def test_graf_lda_names_a_bad_alphabet_and_a_missing_vocabulary():
    from narbench.baselines.graf_lda import GrafLdaEncoder
    from narbench.train.profiles import get_profile

    enc = GrafLdaEncoder(len(VOCAB), 2, get_profile("smoke"))
    with pytest.raises(ValueError, match="wl_alphabet must be one of ops, roles"):
        enc.set_params({"wl_alphabet": "letters"})
    enc.set_params({"wl_rounds": 1, "wl_alphabet": "roles"})
    with pytest.raises(ValueError, match="needs the dataset's op vocabulary"):
        enc._features([block("relu", "layernorm", "a")], np.zeros(0, dtype=np.int64))
    assert enc.config()["features"].endswith(",alphabet=roles)") and enc.variant() == "wl_rounds=1,wl_alphabet=roles"


def test_a_fusion_in_roles_is_recorded_and_an_old_record_reads_as_ops():
    from narbench.search_engine.fusion import Fusion, split_params

    fusion = split_params("graf-lda", {"fuse_wl": 0.2, "fuse_wl_alphabet": "roles"})[1]
    assert fusion.wl_alphabet == "roles" and Fusion.from_record(fusion.record()) == fusion
    assert "on op roles" in fusion.describe()
    plain = Fusion(0.2)
    assert "wl_alphabet" not in plain.record() and Fusion.from_record(plain.record()).wl_alphabet == "ops"
    with pytest.raises(ValueError, match="fuse_wl_alphabet must be one of ops, roles"):
        split_params("graf-lda", {"fuse_wl": 0.2, "fuse_wl_alphabet": "nodes"})


def test_a_fused_index_in_roles_embeds_a_query_as_its_corpus_and_reads_activations_alike(tmp_path):
    """Built, written, read back: its header says roles, a corpus graph embeds as its row, and two graphs that
    differ only in their activation and norm have the same WL part (and different WL parts in `ops`)."""
    from narbench.data.dataset import GraphDataset, stratified_split
    from narbench.search_engine.index_build import IndexConfig, build_index
    from narbench.search_engine.index_file import read_index, write_index
    from narbench.train.trainer import Trainer

    graphs = [block(act, norm, f"{fam}-{act}-{d}", fam, depth=d + (4 if fam == "deep" else 0))
              for fam in ("shallow", "deep") for d in (1, 2, 3) for act, norm in (("relu", "layernorm"),
                                                                                    ("gelu", "rmsnorm"))]
    split = stratified_split([g.family for g in graphs], test_size=0.25, seed=0)
    ds = GraphDataset("toy", "0", VOCAB, graphs, "0" * 64, split)
    params = {"holdout": "family", "wl_rounds": 2, "wl_alphabet": "roles", "fuse_wl": 0.5, "fuse_dims": 1,
              "fuse_wl_dim": 16, "fuse_wl_alphabet": "roles"}
    path = tmp_path / "roles.nari"
    write_index(build_index(IndexConfig(encoder="graf-lda", profile="smoke", params=params, progress=False),
                            dataset=ds), path)
    index = read_index(path)
    assert index.header["fusion"]["wl_alphabet"] == "roles"
    assert index.header["encoder"]["params"]["wl_alphabet"] == "roles"
    core = ds.core_graphs
    rows = [index.row_of(g.name) for g in core]
    assert np.abs(index.embed(core) - index.embeddings[rows]).max() < 2e-3
    pair = [block("relu", "layernorm", "x"), block("silu", "rmsnorm", "y")]
    wl = index.encoder().parts(Trainer("cpu", 0, progress=False), pair)[1]
    assert np.array_equal(wl[0], wl[1])
    from narbench.search_engine.fusion import Fusion, FusedEncoder

    plain = FusedEncoder(index.encoder().primary, Fusion(0.5, 1, 16), VOCAB, index.encoder().wl.profile)
    wl_ops = plain.parts(Trainer("cpu", 0, progress=False), pair)[1]
    assert not np.array_equal(wl_ops[0], wl_ops[1])


def test_a_result_run_with_the_old_alphabet_keeps_its_configuration_hash():
    from narbench.harness.confighash import config_hash

    fields = {"encoder": "graf-lda", "encoder_params": {"holdout": "family"}, "splitter": "none",
              "splitter_params": {}, "dataset": "real", "dataset_version": "2.3", "split": "standard",
              "protocol": "family", "profile": "quick", "objective": "ce", "init": "scratch", "seed": 0, "top_k": 100,
              "encoder_code": None, "splitter_code": None}
    same = {**fields, "encoder_params": {"holdout": "family", "wl_alphabet": "ops"}}
    other = {**fields, "encoder_params": {"holdout": "family", "wl_alphabet": "roles"}}
    assert config_hash(same) == config_hash(fields) != config_hash(other)
