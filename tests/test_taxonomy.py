"""The architecture taxonomy (narbench/data/taxonomy-real.csv) and its invariants."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from collections import Counter

from narbench.datasets import exact_cosine, taxonomy_sheet
from narbench.datasets import isomorphism as iso
from narbench.datasets import near_duplicates as nd
from narbench.datasets import taxonomy as tx
from narbench.data.dataset import Split
from narbench.data.graph import ArchGraph


def _graph(ops, edges, name="g", family="f", coarse="cnn", source="timm", **meta) -> ArchGraph:
    return ArchGraph(np.asarray(ops), np.asarray(edges, dtype=np.int64).reshape(2, -1), name, family, coarse, source,
                     meta=dict(meta))


def _diamond(perm: list[int] | None = None, **kw) -> ArchGraph:
    """0 -> {1, 2} -> 3 -> 4 with ops [0, 1, 2, 3, 1]; `perm` renumbers the nodes (an isomorphic copy)."""
    ops = np.array([0, 1, 2, 3, 1])
    edges = np.array([[0, 0, 1, 2, 3], [1, 2, 3, 3, 4]])
    if perm is not None:
        p = np.asarray(perm)
        new_ops = np.empty_like(ops)
        new_ops[p] = ops
        ops, edges = new_ops, p[edges]
    return _graph(ops, edges, **kw)


# ----------------------------------------------------------------------------- the table


def test_packaged_table_loads_and_looks_up():
    table = tx.load()
    assert len(table) > 1000
    row = tx.lookup("torchvision", "regnet_y_1_6gf")
    assert row.family == "regnet" and row.identity == "timm/regnety_016" and row.reason
    assert tx.lookup("timm", "regnety_016").identity == "timm/regnety_016"
    assert tx.lookup("timm", "mobilenetv2_035").family == tx.lookup("torchvision", "quantized_mobilenet_v2").family
    assert tx.lookup("timm", "repvgg_a0").family == "repvgg"
    assert {r.coarse for r in table.rows} <= set(tx.COARSE_LABELS)


def test_unknown_model_and_source_say_what_is_known():
    with pytest.raises(tx.UnknownModelError, match="did you mean.*regnety_016"):
        tx.lookup("timm", "regnety_0166")
    with pytest.raises(tx.UnknownModelError, match="no source 'keras'.*timm"):
        tx.lookup("keras", "resnet50")


@pytest.mark.parametrize("text, problem", [
    ("source,model,family,identity,coarse,reason\ntimm,a,f,timm/a,cnn,\ntimm,a,g,timm/a,cnn,\n", "second row"),
    ("source,model,family,identity,coarse,reason\ntimm,a,f,timm/a,transformer,\n", "coarse 'transformer'"),
    ("source,model,family,coarse\ntimm,a,f,cnn\n", "missing column"),
    ("source,model,family,identity,coarse,reason\ntimm,a,,timm/a,cnn,\n", "must be set"),
])
def test_malformed_tables_are_rejected(tmp_path, text, problem):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=problem):
        tx.read_rows(path)


def test_relabel_sets_family_coarse_identity_and_checks_first():
    table = tx.Taxonomy([tx.TaxonomyRow("timm", "a", "fa", "timm/a", "attention"),
                         tx.TaxonomyRow("torchvision", "b", "fa", "timm/a", "attention", "alias")])
    graphs = [_diamond(name="timm/a/classification", family="old", source="timm", model="a"),
              _diamond(name="torchvision/b/classification", family="old2", source="torchvision", model="b")]
    new = table.relabel(graphs)
    assert [(g.family, g.coarse, g.meta["identity"]) for g in new] == [("fa", "attention", "timm/a")] * 2
    assert graphs[0].family == "old" and "identity" not in graphs[0].meta  # the input is not changed
    with pytest.raises(tx.UnknownModelError, match="'c'"):
        table.relabel(graphs + [_diamond(name="timm/c/x", source="timm", model="c")])


# ----------------------------------------------------------------------------- invariant (a)


def test_canonical_hash_is_invariant_to_numbering_and_tells_graphs_apart():
    a, b = _diamond(), _diamond(perm=[4, 2, 3, 1, 0])
    assert a.content_hash() != b.content_hash()
    assert iso.canonical_hash(a) == iso.canonical_hash(b)
    other = _graph([0, 1, 2, 3, 2], [[0, 0, 1, 2, 3], [1, 2, 3, 3, 4]])
    assert iso.canonical_hash(other) != iso.canonical_hash(a)


def test_isomorphic_graphs_in_two_families_are_a_violation():
    graphs = [_diamond(family="x"), _diamond(perm=[4, 2, 3, 1, 0], family="y"),
              _graph([0, 1, 2], [[0, 1], [1, 2]], family="z")]
    classes = iso.isomorphic_classes(graphs)
    assert classes == [[0, 1]]
    assert iso.isomorphism_violations(graphs, classes) == [("x", "y")]
    graphs[1].family = "x"
    assert iso.isomorphism_violations(graphs) == []


# ----------------------------------------------------------------------------- invariant (b)


def test_cross_family_near_duplicates_must_be_listed_with_a_reason():
    counts = np.array([[1000, 0, 0], [1000, 1, 0], [0, 1000, 0], [0, 1000, 1], [0, 0, 1]])
    pairs = nd.near_duplicate_pairs(counts, chunk=2)
    assert pairs.tolist() == [[0, 1], [2, 3]]
    graphs = [_diamond(family=f) for f in ("a", "b", "c", "c", "d")]
    assert nd.cross_family_pairs(graphs, pairs) == {("a", "b"): 1}
    assert nd.twin_share(graphs, pairs) == pytest.approx(2 / 5)
    assert nd.unlisted_near_duplicates(graphs, pairs, {}) == {("a", "b"): 1}
    assert nd.unlisted_near_duplicates(graphs, pairs, {("a", "b"): " "}) == {("a", "b"): 1}
    assert nd.unlisted_near_duplicates(graphs, pairs, {("a", "b"): "same block"}) == {}
    graphs[1].family = "a"  # merged
    assert nd.unlisted_near_duplicates(graphs, pairs, {}) == {}


def test_the_near_duplicate_cosine_is_decided_exactly_at_the_threshold():
    """Cosine exactly 0.999, and 5e-13 below and above it: float32 noise (which differs between CPU kernel sets)
    cannot tell them apart, the exact rule must (999^2 + 43^2 + 11^2 + 5^2 + 2^2 = 1000^2; 44710^2 + 126^2 + 5^2
    = 1999 * 10^6 + 1)."""
    a = [1, 0, 0, 0, 0]
    at, below, above = [999, 43, 11, 5, 2], [999000, 44710, 126, 5, 0], [999000, 44710, 125, 15, 7]
    assert exact_cosine.cosine_at_least(np.array([a]), np.array([at, below, above]), 0.999).tolist() == [[True, False, True]]
    assert nd.near_duplicate_pairs(np.array([a, below, above, [0] * 5]), chunk=2).tolist() == [[0, 2], [1, 2]]
    assert nd.near_duplicate_pairs(np.array([a, below, above]), threshold=0.998999).tolist() == [[0, 1], [0, 2], [1, 2]]
    with pytest.raises(ValueError, match="integer counts"):
        nd.near_duplicate_pairs(np.array([[0.5, 1.0], [1.0, 0.5]]))


# ----------------------------------------------------------------------------- invariant (c)


def _split_graphs() -> list[ArchGraph]:
    """3 families x 4 identities x 3 graphs; identity i0 of each family has a torchvision alias."""
    out = []
    for f in range(3):
        for i in range(4):
            for v in range(3):
                src = "torchvision" if (i == 0 and v == 2) else "timm"
                out.append(_graph([0] * (2 + v + 3 * i + 12 * f), [np.arange(1 + v + 3 * i + 12 * f),
                                                                    np.arange(1, 2 + v + 3 * i + 12 * f)],
                                  name=f"{src}/m{f}{i}{v}/x", family=f"fam{f}", source=src,
                                  identity=f"timm/m{f}{i}", model=f"m{f}{i}{v}"))
    return out


def test_identity_split_keeps_identities_whole():
    graphs = _split_graphs()
    split = tx.identity_split(graphs, test_size=0.3, seed=1)
    assert len(split.test) and tx.straddling_identities(graphs, split) == []
    ids = tx.identities(graphs)
    for i in split.test:  # the torchvision alias travels with its identity
        assert all(j in split.test for j in range(len(graphs)) if ids[j] == ids[i])
    # grouping by model name instead would split an identity: the check notices
    by_model = Split(train=np.arange(1, len(graphs)), test=np.array([0]), seed=0, test_size=0.1)
    assert tx.straddling_identities(graphs, by_model) == ["timm/m00"]


def test_identities_need_relabelled_graphs():
    with pytest.raises(KeyError, match="relabel"):
        tx.identities([_diamond(name="bare")])


# ----------------------------------------------------------------------------- the build's rules


def test_build_rows_applies_rules_aliases_isomorphism_and_coarse(tmp_path):
    from narbench.zoo import taxonomy_rules as tr

    rules_csv = tmp_path / "rules.csv"
    rules_csv.write_text("source,module,model,family,identity,coarse,reason\n"
                         "# a comment line\n"
                         "timm,efficientnet,mobilenetv2_.*,mobilenetv2,,,MobileNetV2 paper\n"
                         "transformers,,(.+?)_(text|text_model|vision_model),@tower,@tower,,\n"
                         "transformers,,mamba2,,,other,an SSM\n")
    aliases_csv = tmp_path / "aliases.csv"
    aliases_csv.write_text("source,model,identity,reason\ntorchvision,mnv2,timm/mobilenetv2_100,same model\n")

    def g(source, model, module, coarse="cnn", ops=(0, 1, 2), perm=None, **variant):
        gr = _diamond(perm=perm) if ops == "diamond" else _graph(list(ops), [list(range(len(ops) - 1)),
                                                                            list(range(1, len(ops)))])
        gr.name, gr.family, gr.coarse, gr.source = f"{source}/{model}/x", module, coarse, source
        gr.meta = {"model": model, "variant": variant}
        return gr

    graphs = [g("timm", "mobilenetv2_100", "efficientnet"), g("timm", "efficientnet_b0", "efficientnet", ops=(0, 1)),
              g("torchvision", "mnv2", "mobilenetv2", ops=(1, 1)),
              g("timm", "copy_a", "resnet", ops="diamond"), g("timm", "copy_b", "resnet", ops="diamond", perm=[4, 2, 3, 1, 0]),
              g("transformers", "clip", "clip", "attention", ops=(2,)), g("transformers", "clip_text_model", "clip_text_model", "other", ops=(3,)),
              g("transformers", "mamba2", "mamba2", "cnn", ops=(1, 2)),
              g("transformers", "hybrid", "hybrid", "other", ops=(2, 2)), g("transformers", "hybrid", "hybrid", "attention", ops=(3, 3))]
    classes = iso.isomorphic_classes(graphs)
    rows = {(r.source, r.model): r for r in tr.build_rows(graphs, tr.read_rules(rules_csv), tr.read_aliases(aliases_csv), classes)}
    assert rows[("timm", "mobilenetv2_100")].family == "mobilenetv2"
    assert rows[("timm", "mobilenetv2_100")].reason == "MobileNetV2 paper"
    assert rows[("timm", "efficientnet_b0")].family == "efficientnet" and not rows[("timm", "efficientnet_b0")].reason
    assert rows[("torchvision", "mnv2")].identity == "timm/mobilenetv2_100"
    assert rows[("timm", "copy_b")].identity == "timm/copy_a" and "isomorphic" in rows[("timm", "copy_b")].reason
    tower = rows[("transformers", "clip_text_model")]
    assert (tower.family, tower.identity) == ("clip", "transformers/clip")
    assert rows[("transformers", "mamba2")].coarse == "other" and "an SSM" in rows[("transformers", "mamba2")].reason
    assert rows[("transformers", "hybrid")].coarse == "attention"  # any attention graph makes the model attention


# ----------------------------------------------------------------------------- the near-duplicate table


def _reasons_csv(tmp_path, text: str):
    from narbench.zoo import near_duplicate_table as ndt

    path = tmp_path / "reasons.csv"
    path.write_text("families_a,families_b,group,reason\n# a comment\n" + text)
    return ndt.read_pair_reasons(path)


def test_pair_reason_takes_the_first_row_listing_both_families(tmp_path):
    from narbench.zoo import near_duplicate_table as ndt

    reasons = _reasons_csv(tmp_path, "a,b,specific,a and b share one block\n"
                                     "a b c,a b c,general,one block for all three\n")
    assert ndt.pair_reason("b", "a", reasons) == ("specific", "a and b share one block")
    assert ndt.pair_reason("a", "c", reasons) == ("general", "one block for all three")
    assert ndt.pair_reason("a", "z", reasons) == ("", "")
    with pytest.raises(ValueError, match="unquoted comma"):
        _reasons_csv(tmp_path, "a,b,group,a reason, with a comma\n")
    assert _reasons_csv(tmp_path, 'a,b,group,"a reason, quoted"\n')[0][3] == "a reason, quoted"


def test_near_duplicate_table_counts_pairs_and_gives_reasons(tmp_path):
    from narbench.zoo import near_duplicate_table as ndt

    reasons = _reasons_csv(tmp_path, "a,b,shared block,a and b share one block\n")
    graphs = [_diamond(family="a"), _diamond(family="b"), _diamond(family="b"),
              _diamond(family="c", variant={"depth": 1}), _diamond(family="d"), _diamond(family="e")]
    pairs = np.array([[0, 1], [0, 2], [1, 2], [3, 4], [4, 5]])
    text = ndt.near_duplicate_table(graphs, pairs, reasons, merged=Counter({("a", "b"): 4, ("a", "z"): 2}))
    rows = {(r["family_a"], r["family_b"]): r for r in csv.DictReader(text.splitlines())}
    # most graph pairs first; (b, b) is one family; (a, z) met only at the dedup
    assert list(rows) == [("a", "b"), ("c", "d"), ("d", "e"), ("a", "z")]
    assert (rows[("a", "b")]["merged"], rows[("a", "z")]["merged"], rows[("a", "z")]["pairs"]) == ("4", "2", "0")
    ab = rows[("a", "b")]
    assert (ab["pairs"], ab["graphs"], ab["group"]) == ("2", "3", "shared block")
    assert rows[("c", "d")]["group"] == ndt.TRUNCATED_GROUP and rows[("c", "d")]["truncated_pairs"] == "1"
    assert rows[("d", "e")]["reason"] == "" and ndt.unexplained(text) == [("d", "e", 1), ("a", "z", 0)]
    path = tmp_path / "dups.csv"
    path.write_text(text)
    assert nd.read_near_duplicates(path)[("a", "b")] == "a and b share one block"
    groups = nd.near_duplicate_groups(nd.read_near_duplicate_rows(path))
    assert [(g, nf, ng, nm) for g, nf, ng, nm, _ in groups] == [("shared block", 1, 2, 4), ("(no reason)", 2, 1, 2),
                                                                 (ndt.TRUNCATED_GROUP, 1, 1, 0)]
    assert groups[0][4] == [("a and b share one block", 1, 2, 4)]
    md = taxonomy_sheet.markdown(near_duplicates=path, top=1, straddling=0)
    assert "| shared block | 1 | 2 | 4 |\n" in md and "| shared block | 1 | 2 | 4 | a and b share one block |" in md
    assert "| (no reason) | 2 | 1 | 2 | (none) |" in md
    assert "| a | b | 2 | 3 | 0 | 4 | shared block |" in md and "the other 3 pairs" in md and "measured: 0" in md


def test_a_near_duplicate_table_without_its_columns_is_rejected(tmp_path):
    path = tmp_path / "dups.csv"
    path.write_text("family_a,family_b,pairs,graphs,truncated_pairs,merged,reason\na,b,1,2,0,0,why\n")
    with pytest.raises(ValueError, match="missing column.*group"):
        nd.read_near_duplicate_rows(path)


# ----------------------------------------------------------------------------- the shipped data


@pytest.fixture(scope="module")
def shipped():
    from narbench.datasets.real import RealDataset
    from narbench.zoo.taxonomy_build import raw_graphs

    return RealDataset(), raw_graphs()[0]  # the raw record the taxonomy is built from (real 1.0)


@pytest.fixture(scope="module")
def shipped_2_x():
    """The newest shipped `real` (2.3), the one the taxonomy tables describe: its real graphs are
    `core_graphs` (crossimpl queries, where it has them, follow them)."""
    from narbench.datasets.real import NEWEST

    ds = NEWEST().load()
    assert ds.version == "2.3" and len(ds.core_graphs) == len(ds.graphs) - ds.query_only > 16000
    return ds


@pytest.mark.slow
def test_every_shipped_model_has_a_row_and_invariants_hold(shipped):
    """The table as built from the raw 1.0 record (the zoo labels its rules read)."""
    provider, graphs = shipped
    new = tx.relabel(graphs)  # raises on a missing row
    assert len({(g.source, tx.graph_model(g)) for g in graphs}) == len(tx.load())
    classes = iso.isomorphic_classes(graphs)
    assert classes, "real 1.0 holds isomorphic pairs (timm vs torchvision RegNets)"
    assert iso.isomorphism_violations(new, classes) == []
    # the committed table is what the build makes from the committed rules (regenerable, reviewed as data)
    from narbench.zoo import taxonomy_rules as tr

    rebuilt = tr.build_rows(graphs, tr.read_rules(), tr.read_aliases(), classes)
    assert tr.write_table(rebuilt) == tx.data_path().read_text()
    relabelled, split = provider.identity_unseen(graphs)
    assert len(split.test) > 1000 and tx.straddling_identities(relabelled, split) == []
    # real 1.0's committed unseen split is unchanged (1,836 queries, docs/datasets.md) and differs from this one
    assert len(provider.splits(graphs)["unseen"].test) == 1836 != len(split.test)


@pytest.mark.slow
def test_shipped_canonical_graphs_keep_the_invariants(shipped_2_x):
    """Invariants (a) and (c) on the canonical graphs the newest `real` ships, labelled by the committed table."""
    import hashlib

    from narbench.zoo import taxonomy_build as tb

    ds = shipped_2_x
    graphs = ds.core_graphs
    assert ds.meta["taxonomy_sha256"] == hashlib.sha256(tx.data_path().read_bytes()).hexdigest()
    assert tb.label_differences(graphs, tx.load()) == []
    classes = iso.isomorphic_classes(graphs)
    assert classes, "2.1 holds isomorphic canonical graphs (renamed copies of one family)"
    assert iso.isomorphism_violations(graphs, classes) == []
    unseen = ds.splits["unseen"]
    assert len(unseen.test) > 1000 and tx.straddling_identities(graphs, unseen) == []
    from narbench.datasets.datasheet import _taxonomy_section
    from narbench.datasets.families import straddling

    section = _taxonomy_section(ds)  # the datasheet measures (c) too, counting every identity of a shared graph (2.3)
    assert "(`narbench.datasets.families.straddling`; measured: 0)" in section
    assert tx.straddling_identities(graphs, unseen) == [] and straddling(graphs, unseen) == []


@pytest.mark.slow
def test_every_shipped_cross_family_near_duplicate_is_listed(shipped_2_x):
    """Invariant (b) on the newest real: the committed near-duplicate table is what the build measures (WL pairs of the
    shipped graphs, source graphs merged by the dedup across families), every row has a reason."""
    from narbench.zoo import near_duplicate_table as ndt
    from narbench.zoo import taxonomy_build as tb

    graphs = shipped_2_x.core_graphs
    raw, raw_vocab = tb.raw_graphs()
    merged = ndt.merged_cross_family(raw, tb.derivation_work(raw, raw_vocab), graphs, tx.load())
    assert len(merged) > 50  # identical canonical graphs of two families (e.g. Qwen2 = LLaMA once biases are elided)
    pairs = nd.near_duplicate_pairs(nd.wl_counts(graphs))
    assert nd.unlisted_near_duplicates(graphs, pairs, nd.read_near_duplicates()) == {}
    rows = nd.read_near_duplicate_rows()
    listed = {nd.family_pair(r["family_a"], r["family_b"]): int(r["pairs"]) for r in rows}
    assert {fp: n for fp, n in listed.items() if n} == dict(nd.cross_family_pairs(graphs, pairs))
    assert {nd.family_pair(r["family_a"], r["family_b"]): int(r["merged"]) for r in rows if int(r["merged"])} == merged
    assert all(r["group"].strip() and r["reason"].strip() for r in rows)
    rebuilt = ndt.near_duplicate_table(graphs, pairs, ndt.read_pair_reasons(), merged)
    assert rebuilt == tx.data_path(nd.NEAR_DUPLICATES).read_text()


def test_tower_rule_takes_the_longest_model_type_that_exists():
    from narbench.zoo.taxonomy_rules import tower_base

    pattern = r"(.+?)_(text|encoder|audio_encoder)"
    known = {"qwen2", "qwen2_audio", "gemma3"}
    assert tower_base(pattern, "qwen2_audio_encoder", known) == "qwen2_audio"
    assert tower_base(pattern, "gemma3_text", known) == "gemma3"
    assert tower_base(pattern, "qwen2_audio", known) is None  # a model of its own, not a tower of qwen2
    assert tower_base(pattern, "llama4_text", known) is None  # no llama4 model type in the data
