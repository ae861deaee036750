"""The wild set (`narbench/data/wild-1.0.csv`, `narbench.zoo.wild`) and the validation set of its kind
(`wildval-1.1.csv`): their tables' shape, checked without the packages installed, and the runner on small
models the tests build."""

from __future__ import annotations

import csv
import importlib.util
import socket
import textwrap
from pathlib import Path

import pytest

from narbench.datasets.wild import SETS, VALIDATIONS
from narbench.zoo import wild, wild_sources

DATA = Path(wild.__file__).resolve().parents[1] / "data"
ZOOS = {"timm", "torchvision", "transformers"}


def _column(path: Path, name: str) -> set[str]:
    with open(path, newline="") as fh:
        return {rec[name] for rec in csv.DictReader(fh)}


#: the sets of outside models, each table's promised least rows, packages, `none` rows and fitting rows
SHAPES = {"wild": (30, 10, 7, 20), "wildval": (90, 40, 30, 55), "wildval2": (30, 20, 10, 20),
          "wildval3": (30, 20, 10, 20), "wildval4": (30, 15, 10, 20), "wildval5": (25, 15, 10, 15),
          "wildval6": (25, 15, 8, 18), "wildval7": (30, 18, 8, 20),
          "wildval8": (30, 18, 8, 20), "wildval9": (19, 10, 7, 12),
          "wildval10": (22, 16, 8, 14), "wildval11": (24, 17, 10, 14),
          "wildval12": (28, 17, 13, 15), "wildval13": (19, 13, 9, 10),
          "wildval14": (8, 2, 3, 5), "wildval15": (18, 14, 8, 10), "wildval16": (18, 15, 6, 12),
          "wildval17": (10, 4, 4, 6),
          "wildval18": (5, 4, 2, 3), "wildval19": (40, 32, 16, 24),
          "wildval20": (37, 29, 15, 22), "wildval21": (33, 27, 17, 16),
          "wildval22": (31, 25, 12, 19), "wildval23": (24, 22, 11, 13),
          "wildval24": (19, 18, 8, 11), "wildval25": (26, 19, 9, 17),
          "wildval26": (9, 9, 4, 5), "wildval27": (32, 29, 13, 19),
          "wildval28": (19, 19, 8, 11), "wildval29": (20, 20, 9, 11),
          "wildval30": (21, 21, 10, 11),
          "wildval31": (18, 18, 8, 10),
          "wildval32": (52, 52, 22, 30),
          "wildval33": (40, 40, 17, 23),
          "wildval34": (31, 31, 12, 19),
          "wildval35": (17, 17, 9, 8),
          "wildval36": (17, 17, 8, 9),
          "wildval37": (38, 38, 19, 19)}


@pytest.fixture(scope="module", params=sorted(SHAPES))
def rows(request) -> list[wild.WildRow]:
    return wild.read_table(name=request.param)


def test_table_has_the_promised_shape(rows):
    name = rows[0].collection
    with open(wild.table_path(name), newline="") as fh:
        assert tuple(next(csv.reader(fh))) == wild.COLUMNS
    packages = {r.package for r in rows}
    least_rows, least_packages, least_none, least_fit = SHAPES[name]
    assert len(rows) >= least_rows and len(packages) >= least_packages
    assert sum(r.family == wild.NONE for r in rows) >= least_none
    assert sum(r.family != wild.NONE for r in rows) >= least_fit
    assert all(r.identity.startswith(f"{name}/") for r in rows)


@pytest.fixture(scope="module")
def wild_rows() -> list[wild.WildRow]:
    return wild.read_table()


@pytest.mark.parametrize("later", VALIDATIONS)
def test_each_validation_set_shares_no_package_with_the_sets_before_it(later):
    """Rules are chosen on the validation sets and each later one is the carry check of a choice made on those before
    it, so it is code no choice was made on: none of the wild set's packages, nor any earlier set's (the sets' table
    lists them oldest first)."""
    names = list(SETS)
    packages = {r.package.lower() for r in wild.read_table(name=later)}
    for other in names[:names.index(later)]:
        assert packages.isdisjoint({r.package.lower() for r in wild.read_table(name=other)}), other


def test_the_sets_table_names_every_set_once_and_refuses_a_set_given_twice(tmp_path):
    from narbench.datasets import wild as sets

    assert sets.VALIDATIONS[0] == sets.VALIDATION and sets.SETS[sets.NAME].role == "test"
    assert all(sets.SETS[n].role == "validation" for n in sets.VALIDATIONS)
    table = (DATA / sets.TABLE).read_text().splitlines()
    row = next(line for line in table if line.startswith("wildval,1.1,validation,"))
    bad = tmp_path / "sets.csv"
    bad.write_text("\n".join([table[0], row, row.replace(",1.1,validation,", ",1.2,validation,", 1)]) + "\n")
    with pytest.raises(ValueError, match=r"sets.csv:3: set 'wildval' has two versions or roles"):
        sets._read_sets(bad)
    bad.write_text("\n".join([table[0], row, row]) + "\n")
    with pytest.raises(ValueError, match=r"sets.csv:3: set 'wildval' has two files under canonical 2.3"):
        sets._read_sets(bad)


def test_families_exist_in_the_corpus_taxonomy(rows):
    corpus = _column(DATA / "taxonomy-real.csv", "family")
    for r in rows:
        assert r.family == wild.NONE or set(r.families) <= corpus, (r.identity, r.family)
        assert wild.NONE not in r.families and len(set(r.families)) == len(r.families), r.identity


def test_no_package_is_a_zoo_or_a_crossimpl_package(rows):
    excluded = ZOOS | _column(DATA / "crossimpl-2.2.csv", "package") | _column(DATA / "crossimpl.csv", "package")
    assert {r.package for r in rows}.isdisjoint(excluded)
    assert all(not r.zoo_model for r in rows)


def test_every_row_is_pinned_and_says_where_its_code_comes_from(rows):
    pins = {}
    name = rows[0].collection
    version = wild.outside_set(name).version
    sources = {s.folder: s for s in wild_sources.sources_of(name, version)}
    for line in (DATA / f"{name}-{version}-requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.strip().partition("==")
            assert sep and version, f"unpinned requirement {line!r}"
            pins[name.lower()] = version
    for r in rows:
        if r.package in sources:  # a GitHub repository at a pinned commit (narbench.zoo.wild_sources)
            assert r.version == sources[r.package].commit, r.identity
            assert r.provenance.startswith(sources[r.package].provenance_prefix), r.identity
        else:  # pip's names are case-insensitive (DALL-E is dall-e)
            assert pins.get(r.package.lower()) == r.version, (r.identity, r.version)
            assert r.provenance.lower().startswith(f"pip package {r.package}=={r.version}; upstream ".lower()), r.identity
        assert len(r.reason.split()) >= 8, r.identity
        assert r.inputs, r.identity


def test_read_table_names_the_bad_line(tmp_path):
    good = ["p", "m", "mod:fn", "", "tensor:1x4", "none", "", "a reason", "1.0", "pip package p==1.0; upstream x"]

    def table(*recs):
        path = tmp_path / "t.csv"
        with open(path, "w", newline="") as fh:
            csv.writer(fh).writerows([wild.COLUMNS, *recs])
        return path

    assert len(wild.read_table(table(good))) == 1
    for bad, message in ((good[:4] + ["tensor:1xa"] + good[5:], "shape"),
                         (good[:3] + ["[1]"] + good[4:], "JSON object"),
                         (good[:7] + [""] + good[8:], "reason"),
                         (good[:2] + ["fn"] + good[3:], "builder")):
        with pytest.raises(ValueError, match=rf"t\.csv:3: .*{message}"):
            wild.read_table(table(good, bad))
    with pytest.raises(ValueError, match="t.csv:3: p m is listed twice"):
        wild.read_table(table(good, good))
    with open(tmp_path / "cols.csv", "w") as fh:
        fh.write("package,model\n")
    with pytest.raises(ValueError, match="columns"):
        wild.read_table(tmp_path / "cols.csv")


def test_parse_inputs():
    specs = wild.parse_inputs("image:1x3x8x8; tokens:1x5:100 ;mask=tensor:1x5")
    assert specs == (wild.InputSpec("image", (1, 3, 8, 8)), wild.InputSpec("tokens", (1, 5), 100),
                     wild.InputSpec("tensor", (1, 5), None, "mask"))
    for bad in ("pixels:1x3", "image:", "image:1x0", "tokens:1x5", "image:1x3:7", "1x=tensor:1", "image:axb"):
        with pytest.raises(ValueError, match="input"):
            wild.parse_inputs(bad)


def test_make_inputs_gives_ids_in_range_and_keywords():
    torch = pytest.importorskip("torch")
    args, kwargs = wild.make_inputs(wild.parse_inputs("tokens:2x64:7;tensor:1x3;state=video:1x2x3x4x4"))
    ids, x = args
    assert ids.dtype == torch.int64 and 0 <= int(ids.min()) and int(ids.max()) < 7 and ids.shape == (2, 64)
    assert x.is_floating_point() and list(kwargs) == ["state"] and kwargs["state"].shape == (1, 2, 3, 4, 4)
    again, _ = wild.make_inputs(wild.parse_inputs("tokens:2x64:7;tensor:1x3;state=video:1x2x3x4x4"))
    assert torch.equal(again[1], x) and not torch.equal(wild.make_inputs(wild.parse_inputs("tensor:1x3"), seed=1)[0][0], x)


@pytest.fixture()
def fake_package(tmp_path, monkeypatch):
    (tmp_path / "narbench_fake_wild.py").write_text(textwrap.dedent(
        """
        import torch

        class Config:
            def __init__(self, width, sizes):
                self.width, self.sizes = width, sizes

        class Net(torch.nn.Module):
            def __init__(self, config, act):
                super().__init__()
                self.config, self.act = config, act
                self.lin = torch.nn.Linear(4, config.width)

            def forward(self, x, *, scale):
                return self.act(self.lin(x)) * scale

        class ZooLayer(torch.nn.Linear):
            pass

        ZooLayer.__module__ = "timm.layers.fake"

        def zoo_net():
            return torch.nn.Sequential(ZooLayer(4, 2))

        def frozen():
            return torch.nn.Identity()

        import dataclasses

        @dataclasses.dataclass
        class Out:
            logits: torch.Tensor
            state: object = None

        class DataclassNet(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 2)

            def forward(self, x):
                return Out(self.lin(x))

        class TokenNet(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb, self.out = torch.nn.Embedding(11, 4), torch.nn.Linear(4, 3)

            def forward(self, ids):
                return self.out(torch.relu(self.emb(ids)))
        """))
    monkeypatch.syspath_prepend(str(tmp_path))


def _row(builder, kwargs, input_):
    return wild.WildRow("fake", "m", builder, kwargs, input_, "none", "", "r", "1", "p")


def test_construct_builds_nested_objects(fake_package):
    pytest.importorskip("torch")
    from narbench.zoo.crossimpl import resolve

    kwargs = {"config": {wild.BUILDER_KEY: "narbench_fake_wild:Config", "width": 3, "sizes": [1, [2, 3]]},
              "act": {wild.BUILDER_KEY: "torch.nn:ReLU"}}
    net = wild.construct({wild.BUILDER_KEY: "narbench_fake_wild:Net", **kwargs}, resolve)
    assert net.config.width == 3 and net.config.sizes == (1, (2, 3)) and type(net.act).__name__ == "ReLU"


def test_run_row_reports_ok_and_failures(fake_package):
    pytest.importorskip("torch")
    kwargs = {"config": {wild.BUILDER_KEY: "narbench_fake_wild:Config", "width": 3, "sizes": []},
              "act": {wild.BUILDER_KEY: "torch.nn:Tanh"}}
    ok = wild.run_row(_row("narbench_fake_wild:Net", kwargs, "tensor:2x4;scale=tensor:1"))
    assert ok.ok and ok.params == 15 and ok.outputs == "[2, 3]" and not ok.error
    missing = wild.run_row(_row("narbench_fake_wild:Net", kwargs, "tensor:2x4"))
    assert not missing.ok and "scale" in missing.error and "\n" not in missing.error
    frozen = wild.run_row(_row("narbench_fake_wild:frozen", {}, "tensor:1x4"))
    assert not frozen.ok and "depends on a parameter" in frozen.error
    boxed = wild.run_row(_row("narbench_fake_wild:DataclassNet", {}, "tensor:1x4"))  # a forward returning a dataclass
    assert boxed.ok and boxed.outputs == "([1, 2], NoneType)"
    zoo = wild.run_row(_row("narbench_fake_wild:zoo_net", {}, "tensor:1x4"))
    assert not zoo.ok and "built from modules of timm" in zoo.error


def test_no_network_refuses_connections_and_restores():
    before = socket.create_connection
    with wild.no_network():
        with pytest.raises(OSError, match="offline"):
            socket.create_connection(("127.0.0.1", 9))
        with pytest.raises(OSError, match="offline"):
            socket.socket().connect(("127.0.0.1", 9))
    assert socket.create_connection is before


def _missing(rows) -> list[str]:
    """The packages of `rows` that cannot be imported here (one imported already counts as there: spandrel
    leaves itself in sys.modules with no __spec__, on which find_spec raises)."""
    import sys

    tops = {r.package: r.builder.split(":")[0].split(".")[0] for r in rows}
    return [p for p, top in tops.items() if top not in sys.modules and importlib.util.find_spec(top) is None]


@pytest.mark.slow
def test_every_row_builds_and_runs_where_the_packages_are_installed(rows):
    """Minutes on two cores; needs `pip install --target DIR -r narbench/data/wild-1.0-requirements.txt --no-deps`
    and PYTHONPATH=DIR (docs/wild.md)."""
    missing = _missing(rows)
    if missing:
        pytest.skip(f"wild packages not installed: {', '.join(sorted(set(missing)))}")
    failed = [f"{r.identity}: {r.error}" for r in wild.run_all(rows) if not r.ok]
    assert not failed, failed


# ----------------------------------------------------------------------------- the extracted graphs


@pytest.mark.parametrize("canonical", ["2.2", "2.3"])
def test_shipped_graphs_are_one_per_row_under_each_canonical_version(wild_rows, canonical):
    import hashlib

    from narbench.data.canonical import canonical_vocabulary
    from narbench.datasets import wild as shipped

    ws = shipped.read_graphs(canonical=canonical)  # raises if the content does not match the pin
    assert ws.sha256 == shipped.SHIPPED[canonical].sha256 and (canonical != "2.2" or ws.sha256 == shipped.EXPECTED_SHA256)
    assert [g.name for g in ws.graphs] == [r.identity for r in wild_rows]
    assert ws.families == [r.families for r in wild_rows]
    assert [(g.family, g.source, g.meta["package"], g.meta["version"], g.meta["expected_family"])
            for g in ws.graphs] == [(r.family, r.package, r.package, r.version, r.family) for r in wild_rows]
    assert ws.vocab == list(canonical_vocabulary(canonical)) and ws.header["ops"]["version"] == canonical
    assert (ws.header["name"], ws.header["version"]) == (shipped.NAME, shipped.SHIPPED[canonical].version)
    assert shipped.SHIPPED[canonical].version.startswith(shipped.VERSION)  # the same frozen rows
    assert ws.header["versions"] == {"torch": ws.header["versions"]["torch"], **{r.package: r.version for r in wild_rows}}
    # extracted from the frozen table as it is, and never compared with the corpus (a test set)
    assert ws.header["table_sha256"] == hashlib.sha256(wild.table_path().read_bytes()).hexdigest()
    assert "corpus" not in ws.header and not any("corpus_twins" in g.meta for g in ws.graphs)
    assert all(g.num_nodes > 0 for g in ws.graphs)


@pytest.mark.parametrize("name", VALIDATIONS)
def test_the_validation_sets_ship_one_graph_per_row_under_their_canonical_rules(name):
    import hashlib

    from narbench.data.canonical import canonical_vocabulary
    from narbench.datasets import wild as shipped

    rows = wild.read_table(name=name)
    chosen = shipped.outside_set(name)
    first = chosen.canonical  # 2.3; 2.10 for wildval12, 2.11 for wildval13-24, 2.16 from wildval25 (rules on raw names)
    assert first in ("2.3", "2.10", "2.11", "2.16") and chosen.role == "validation"
    # every set up to wildval12 ships its rows re-extracted under 2.11 too (session 71), and every set up to wildval24
    # under 2.16 (session 81); its first file unchanged
    assert list(chosen.files)[0] == first and "2.16" in chosen.files and (first == "2.16" or "2.11" in chosen.files)
    for canonical, file in chosen.files.items():
        ws = shipped.read_graphs(canonical=canonical, name=name)  # raises if the content does not match the pin
        assert file.sha256 == ws.sha256 and ws.header["version"] == file.version
        assert file.version == (chosen.version if canonical == first else f"{chosen.version}-canonical-{canonical}")
        assert [g.name for g in ws.graphs] == [r.identity for r in rows] and ws.families == [r.families for r in rows]
        assert ws.vocab == list(canonical_vocabulary(canonical)) and ws.header["name"] == name
        assert ws.header["ops"]["version"] == canonical
        assert ws.header["table_sha256"] == hashlib.sha256(wild.table_path(name).read_bytes()).hexdigest()
        assert ws.header["versions"] == {"torch": ws.header["versions"]["torch"], **{r.package: r.version for r in rows}}


def test_shipped_graphs_read_without_the_packages(rows):
    name = rows[0].collection
    import subprocess
    import sys

    tops = sorted({r.builder.split(":")[0].split(".")[0] for r in rows})
    code = ("import sys\n"
            f"TOPS = {tops!r}\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in TOPS:\n"
            "            raise ImportError(f'{name} is blocked')\n"
            "sys.meta_path.insert(0, Block())\n"
            "from narbench.datasets import wild\n"
            f"ws = wild.read_graphs(name={name!r})\n"
            "print(len(ws.graphs), sorted(m for m in sys.modules if m.split('.')[0] in TOPS))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(len(rows)), "[]"]


def test_a_local_build_reads_unpinned_and_a_damaged_one_is_named(tmp_path):
    from narbench.data.store import CorruptFileError
    from narbench.datasets import wild as shipped

    with pytest.raises(ValueError, match="no wild graphs under canonical '9.9'; there are: 2.2, 2.3"):
        shipped.read_graphs(canonical="9.9")
    with pytest.raises(FileNotFoundError, match="python -m narbench.cli.wild"):
        shipped.read_graphs(tmp_path / "missing.narg")
    damaged = tmp_path / "wild-1.0.narg"
    damaged.write_bytes(shipped.shipped_path().read_bytes()[:-20])
    with pytest.raises(CorruptFileError, match="wild 1.0: .*rebuild it"):
        shipped.read_graphs(damaged)


def test_extraction_writes_named_graphs_with_their_expected_families(fake_package, tmp_path):
    pytest.importorskip("torch")
    from narbench.data.canonical import canonical_vocabulary
    from narbench.datasets import wild as shipped
    from narbench.zoo import wild_graphs

    net = {"config": {wild.BUILDER_KEY: "narbench_fake_wild:Config", "width": 3, "sizes": [1, 2]},
           "act": {wild.BUILDER_KEY: "torch.nn:GELU"}}
    rows = [wild.WildRow("fake", "net", "narbench_fake_wild:Net", net, "tensor:2x4;scale=tensor:1", "resnet|vit",
                         "", "r", "1.2", "p"),
            wild.WildRow("fake", "tokens", "narbench_fake_wild:TokenNet", {}, "tokens:1x5:11", "none", "", "r", "1.2", "p")]
    summary = wild_graphs.build(tmp_path, rows)
    ws = shipped.read_graphs(summary["path"])
    assert summary["path"].endswith("wild-1.0.narg") and ws.sha256 == summary["sha256"]
    assert [g.name for g in ws.graphs] == ["wild/fake/net", "wild/fake/tokens"]
    assert ws.families == [("resnet", "vit"), ()] and ws.vocab == list(canonical_vocabulary("2.2"))
    g = ws.graphs[0]
    assert (g.meta["version"], g.meta["expected_family"], g.meta["params"]) == ("1.2", "resnet|vit", 15)
    assert ws.header["max_other_share"] is None and "corpus" not in ws.header
    assert [r["name"] for r in summary["rows"]] == [g.name for g in ws.graphs]
    assert all(r["nodes"] == g.num_nodes and r["seconds"] >= 0 for r, g in zip(summary["rows"], ws.graphs))
    assert wild_graphs.build(tmp_path / "again", rows)["sha256"] == summary["sha256"]  # deterministic
    later = wild_graphs.build(tmp_path / "2.3", rows, canonical="2.3")  # the same rows under canonical 2.3
    ws23 = shipped.read_graphs(later["path"])
    assert later["path"].endswith("wild-1.0-canonical-2.3.narg") and ws23.vocab == list(canonical_vocabulary("2.3"))
    assert [g.name for g in ws23.graphs] == [g.name for g in ws.graphs] and ws23.families == ws.families


def test_extraction_keeps_a_graph_of_unknown_ops_and_names_a_failing_row(fake_package, tmp_path):
    pytest.importorskip("torch")
    from narbench.zoo import wild_graphs

    opaque = wild.WildRow("fake", "opaque", "tests.datasets.test_crossimpl:custom_fn_cnn", {"blocks": 6},
                          "image:1x3x4x4", "none", "", "r", "1", "p")
    (record,) = wild_graphs.build(tmp_path, [opaque])["rows"]  # crossimpl would refuse it: never dropped here
    assert record["other_share"] > 0.4 and record["unknown_ops"] == {"UnmappedSwishBackward": 6}
    assert "tiny" in wild_graphs.notes(record) and "UnmappedSwishBackward x6" in wild_graphs.notes(record)
    assert "mostly unknown" in wild_graphs.notes({**record, "other_share": 0.6})
    assert "| `wild/fake/opaque` | 14 |" in wild_graphs.report([record])
    zoo = wild.WildRow("fake", "zoo", "narbench_fake_wild:zoo_net", {}, "tensor:1x4", "none", "", "r", "1", "p")
    with pytest.raises(RuntimeError, match="wild/fake/zoo .*built from modules of timm"):
        wild_graphs.build(tmp_path / "zoo", [zoo])


def test_extraction_command_needs_its_folder():
    from narbench.cli import wild as cli

    with pytest.raises(SystemExit) as exc:
        cli.main([])
    assert exc.value.code == 2


@pytest.mark.slow
@pytest.mark.parametrize("name,canonical", [("wild", "2.2"), ("wild", "2.3"), ("wildval", "2.3"), ("wildval2", "2.3"),
                                           ("wildval3", "2.3"), ("wildval4", "2.3"), ("wildval5", "2.3"),
                                           ("wildval6", "2.3"), ("wildval7", "2.3"), ("wildval8", "2.3"),
                                           ("wildval9", "2.3"), ("wildval10", "2.3"),
                                           ("wildval11", "2.3"), ("wildval12", "2.10"),
                                           ("wildval13", "2.11"), ("wildval14", "2.11"),
                                           ("wildval15", "2.11"),
                                           ("wildval16", "2.11"),
                                           ("wildval17", "2.11"),
                                           ("wildval18", "2.11"), ("wildval19", "2.11"), ("wildval20", "2.11"), ("wildval21", "2.11"),
                                           ("wildval22", "2.11"), ("wildval23", "2.11"), ("wildval24", "2.11"),
                                           ("wildval25", "2.16"), ("wildval26", "2.16"), ("wildval27", "2.16"), ("wildval28", "2.16"), ("wildval29", "2.16"), ("wildval30", "2.16"),
                                           ("wildval31", "2.16"), ("wildval32", "2.16"), ("wildval33", "2.16"), ("wildval34", "2.16"), ("wildval35", "2.16"), ("wildval36", "2.16"),
                                           ("wildval37", "2.16"),
                                           ("wild", "2.16"),
                                           *((f"wildval{n}", "2.16") for n in ["", *range(2, 25)]),
                                           *((f"wildval{n}", "2.11") for n in ["", *range(2, 13)])])
def test_extraction_remakes_the_shipped_file_where_the_packages_are_installed(tmp_path, name, canonical):
    """A minute on two cores; needs the packages (PYTHONPATH=DIR, docs/wild.md, docs/wildval.md). Under the torch
    the file was built with, the same bytes; under another, the same graphs by name and size. Built as the command
    builds it, in a process of its own: a package whose default argument is a module made at import (pointnet's STN)
    runs on meta only when first imported by the build, so rows run earlier in this process would move it to the CPU."""
    import subprocess
    import sys

    rows = wild.read_table(name=name)
    missing = _missing(rows)
    if missing:
        pytest.skip(f"wild packages not installed: {', '.join(sorted(set(missing)))}")
    import torch

    from narbench.data.store import read_graphs
    from narbench.datasets import wild as shipped

    done = subprocess.run([sys.executable, "-m", "narbench.cli.wild", "--set", name, "--canonical-version", canonical,
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-2000:]
    graphs, _, _, digest = read_graphs(next(tmp_path.glob("*.narg")))
    ws = shipped.read_graphs(canonical=canonical, name=name)
    if torch.__version__.split("+")[0] == ws.header["versions"]["torch"]:
        assert digest == ws.sha256
    assert [(g.name, g.num_nodes) for g in graphs] == [(g.name, g.num_nodes) for g in ws.graphs]


def test_real_23_reads_the_validation_set_as_its_outside_models_and_earlier_rules_have_none():
    """`Real23Dataset.dataset` sets `GraphDataset.outside` to `outside_models(2.3)`, which the index build chooses the
    out-of-family score on (`narbench.search_engine.outside_fit`)."""
    from narbench.datasets.real import outside_models
    from narbench.datasets import wild as shipped

    graphs, vocab, families = outside_models("2.3")
    rows = wild.read_table(name=shipped.VALIDATION)
    assert [g.name for g in graphs] == [r.identity for r in rows] and families == [r.families for r in rows]
    assert vocab == list(shipped.read_graphs(name=shipped.VALIDATION).vocab)
    assert outside_models("2.2") == ([], [], [])


def test_an_index_reads_each_sets_newest_file_its_rules_allow():
    """`readable`: a set's files newest first, none after the index's rules, none in another vocabulary; an index of
    2.11 reads `wildval`'s 2.11 file, one of 2.3 its 2.3 file, and `outside_models(..., upto=)` (the refit's sets)
    reads the same file a search of the set reads."""
    from narbench.data.canonical import VERSIONS, at_least, canonical_vocabulary
    from narbench.datasets import wild as shipped
    from narbench.datasets.real import outside_models

    files = list(shipped.outside_set(shipped.VALIDATION).files)
    assert shipped.readable(shipped.VALIDATION) == sorted(files, key=VERSIONS.index, reverse=True)
    assert shipped.readable(shipped.VALIDATION, "2.11")[:2] == ["2.11", "2.3"]
    assert shipped.readable(shipped.VALIDATION, "2.10") == ["2.3"] and shipped.readable(shipped.VALIDATION, "2.2") == []
    assert shipped.readable("wild", "2.16", canonical_vocabulary("2.2")) == ["2.2"]
    newest = shipped.readable(shipped.VALIDATION, VERSIONS[-1])[0]
    assert at_least(newest, "2.11")
    read = shipped.read_newest(shipped.VALIDATION, VERSIONS[-1], canonical_vocabulary(VERSIONS[-1]))
    assert read.header["ops"]["version"] == newest and read.sha256 == shipped.shipped_file(newest, shipped.VALIDATION).sha256
    with pytest.raises(ValueError, match="wildval ships no file an index of canonical 2.2 reads"):
        shipped.read_newest(shipped.VALIDATION, "2.2", canonical_vocabulary("2.2"))
    graphs, vocab, families = outside_models("2.3", ("wildval", "wildval2"), upto=VERSIONS[-1])
    want = [shipped.read_graphs(canonical=shipped.readable(n, VERSIONS[-1])[0], name=n) for n in ("wildval", "wildval2")]
    assert [g.name for g in graphs] == [g.name for w in want for g in w.graphs]
    assert [g.num_nodes for g in graphs] == [g.num_nodes for w in want for g in w.graphs]
    assert families == [f for w in want for f in w.families] and vocab == list(want[0].vocab)
    assert outside_models("2.3", ("wildval",), upto="2.2") == ([], [], [])
    # a set first extracted after the dataset's rules (wildval25: 2.16 only) is read by an index of its rules, and
    # left out, the others still read, by an index of older ones (the refit's sets, `outside_fit.REFIT_SETS`)
    late = outside_models("2.3", ("wildval", "wildval25"), upto="2.16")[0]
    assert [g.name.split("/")[0] for g in late][-1] == "wildval25" and len(late) > len(want[0].graphs)
    early = outside_models("2.3", ("wildval", "wildval25"), upto="2.15")[0]
    assert {g.name.split("/")[0] for g in early} == {"wildval"}
    assert outside_models("2.3", ("wildval25",)) == ([], [], [])  # no 2.3 file, no index rules: as before
    old = outside_models("2.3", ("wildval",))[0]
    assert [g.num_nodes for g in old] == [g.num_nodes for g in shipped.read_graphs(name=shipped.VALIDATION).graphs]


def test_a_github_repository_is_no_earlier_sets_package_or_its_upstream():
    """A set's GitHub repositories are code no choice was made on: none is a repository an earlier set's (or a
    crossimpl) row names as its code's upstream (`github.com/OWNER/NAME` in its provenance)."""
    import re

    def links(text: str) -> set[str]:
        return {m.lower() for m in re.findall(r"github\.com/([\w.-]+/[\w-]+)", text)}

    named = links((DATA / "crossimpl-2.2.csv").read_text()) | links((DATA / "crossimpl.csv").read_text())
    for name in SETS:
        version = wild.outside_set(name).version
        repos = {s.repo.lower() for s in wild_sources.sources_of(name, version)}
        assert repos.isdisjoint(named), (name, sorted(repos & named))
        named |= repos | {m for r in wild.read_table(name=name) for m in links(r.provenance)}
