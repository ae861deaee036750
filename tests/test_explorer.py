"""narbench explore: the leaderboard's views as data, the web app over them, the static export, the CLI."""

from __future__ import annotations

import csv
import io
import json
import time

import numpy as np
import pytest

from narbench.cli import main
from narbench.explorer import load_views, view_csv
from tests.handmade import write_result

pytest.importorskip("starlette", reason="the explorer extra (starlette, uvicorn) is not installed")
pytest.importorskip("httpx", reason="starlette's test client needs httpx")

N = 40


def write_nas_results(out):
    """nas, 3 seeds: gcn best, gat below it, wl a floor (the browser tests use them too)."""
    for s in range(3):
        q = np.random.default_rng(s).uniform(0.6, 1.0, N)
        write_result(out, "gcn", "none", s, q)
        write_result(out, "gat", "none", s, q - 0.2)
        write_result(out, "wl", "none", s, q - 0.1)
    return out


@pytest.fixture
def results(tmp_path):
    """`write_nas_results`, and one gcn seed on real (a second table block)."""
    out = write_nas_results(tmp_path / "res")
    write_result(out, "gcn", "none", 0, np.full(N, 0.5), dataset="real")
    return out


def _file_means(folder, dataset, encoder, metric):
    values = [json.loads(p.read_text())["metrics"][metric] for p in sorted(folder.glob(f"{dataset}-*-{encoder}-*.json"))]
    return float(np.mean(values)), len(values)


#: the token the test clients send (starlette's test client names its host `testserver`)
TOKEN = "test-token-0123456789abcdef"


def _access():
    from narbench.explorer.access import Access

    return Access.local(TOKEN, allow_hosts=["testserver"])


def _client(payload, plot_dir=None):
    from starlette.testclient import TestClient

    from narbench.explorer.app import create_app

    return TestClient(create_app(payload, plot_dir, access=_access()), headers={"X-Narbench-Token": TOKEN})


def test_views_hold_the_result_files_means_and_the_tables_marks(results):
    payload = load_views([results])
    nas = next(v for v in payload["views"] if v["table"] == 1 and v["setting"]["dataset"] == "nas")
    rows = {r["label"]: r for r in nas["rows"]}
    assert set(rows) == {"gcn", "gat", "wl (floor)"}
    for label, enc in (("gcn", "gcn"), ("gat", "gat"), ("wl (floor)", "wl")):
        mean, n = _file_means(results, "nas", enc, "ndcg@20")
        assert rows[label]["n"] == n == 3 and rows[label]["mean"]["ndcg@20"] == pytest.approx(mean, abs=1e-12)
    assert "ndcg@20" in rows["gcn"]["bold"] and rows["gat"]["marks"]["ndcg@20"] == "†"  # gcn best, gat far below
    assert nas["setting"] == {"dataset": "nas", "split": "standard", "profile": "quick", "device": "cpu", "protocol": "family"}
    assert any(v["setting"]["dataset"] == "real" for v in payload["views"])
    assert len({v["id"] for v in payload["views"]}) == len(payload["views"])
    json.dumps(payload, allow_nan=False)  # no NaN reaches the page (a 1-seed row has no std)


def test_a_view_as_csv_has_one_line_per_row_with_the_means(results):
    payload = load_views([results])
    nas = next(v for v in payload["views"] if v["table"] == 1 and v["setting"]["dataset"] == "nas")
    lines = list(csv.DictReader(io.StringIO(view_csv(nas))))
    assert [ln["method"] for ln in lines] == [r["label"] for r in nas["rows"]]
    gat = next(ln for ln in lines if ln["method"] == "gat")
    assert float(gat["mrr@20_mean"]) == pytest.approx(_file_means(results, "nas", "gat", "mrr@20")[0], abs=1e-12)
    real = next(v for v in payload["views"] if v["setting"]["dataset"] == "real")
    assert list(csv.DictReader(io.StringIO(view_csv(real))))[0]["ndcg@20_std"] == ""  # one seed: no std


def test_the_app_serves_the_page_its_data_and_one_view_as_csv(results):
    payload = load_views([results])
    client = _client(payload)
    page = client.get("/")
    assert page.status_code == 200 and "static/explorer.js" in page.text and "text/html" in page.headers["content-type"]
    assert client.get("/views.json").json() == {**payload, "search": False}  # no searcher: the page offers none
    assert client.get("/static/explorer.js").status_code == 200
    vid = payload["views"][0]["id"]
    got = client.get(f"/views/{vid}.csv")
    assert got.status_code == 200 and got.text == view_csv(payload["views"][0])
    assert got.headers["content-disposition"] == f'attachment; filename="{vid}.csv"'
    for path in ("/", "/views.json", f"/views/{vid}.csv", "/static/explorer.js", "/nothing"):
        got = client.get(path)
        assert got.headers["x-content-type-options"] == "nosniff" and got.headers["x-frame-options"] == "DENY", path
        assert "default-src 'none'" in got.headers["content-security-policy"], path


def test_every_route_asks_for_the_token_and_the_first_visit_turns_it_into_a_cookie(results):
    from starlette.testclient import TestClient

    from narbench.explorer.app import create_app

    bare = TestClient(create_app(load_views([results]), access=_access()), follow_redirects=False)
    for path in ("/", "/views.json", "/static/explorer.js", "/api/search?q=x", "/nothing"):
        got = bare.get(path)
        assert got.status_code == 401 and "?token=" in got.json()["error"], path
    assert bare.get("/views.json", headers={"X-Narbench-Token": TOKEN[:-1] + "x"}).status_code == 401
    first = bare.get("/", params={"token": TOKEN})
    assert first.status_code == 303 and first.headers["location"] == "/"  # the token leaves the address
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert bare.get("/views.json").status_code == 200  # the cookie now carries it
    assert bare.get("/views.json", headers={"Authorization": f"token {TOKEN}"}).status_code == 200


def test_the_csp_allows_the_one_style_element_cytoscape_adds():
    """The policy's style hash is that of the <style> the vendored cytoscape inserts (a new cytoscape
    with another text would be blocked: this fails first)."""
    import base64
    import hashlib
    import re

    from narbench.explorer.access import CSP
    from narbench.explorer.app import STATIC

    js = (STATIC / "vendor" / "cytoscape.min.js").read_text()
    name = re.search(r'"(_+cytoscape_container)"', js).group(1)
    assert '" { position: relative; }"' in js  # the text it builds: "." + name + " { position: relative; }"
    digest = base64.b64encode(hashlib.sha256(f".{name} {{ position: relative; }}".encode()).digest()).decode()
    assert f"'sha256-{digest}'" in CSP


def test_unknown_paths_and_files_outside_the_charts_are_404_with_a_message(results, tmp_path):
    plots = tmp_path / "plots"
    plots.mkdir()
    (tmp_path / "secret.txt").write_text("not for the page")
    payload = load_views([results], plot_dir=plots)  # no chart drawn: no view names one
    assert all(v["plot"] is None for v in payload["views"])
    client = _client(payload, plots)
    for path in ("/views/nope.csv", "/plots/secret.txt", "/plots/..%2Fsecret.txt", "/static/../secret.txt", "/nothing"):
        got = client.get(path)
        assert got.status_code == 404, path
        assert "not for the page" not in got.text
    assert "no view 'nope'" in client.get("/views/nope.csv").json()["error"]


def test_a_chart_is_served_only_when_it_shows_the_views_rows(results, tmp_path):
    """The leaderboard's bar chart of a block is shown when its stamped digest says it was drawn from
    these rows; after another result joins the block, the old chart (other rows) is left out."""
    from narbench import leaderboard as lb
    from narbench.leaderboard.subsets import with_subsets

    plots = tmp_path / "plots"
    lb.plot_tables(lb.build_tables(with_subsets(lb.collect([results]))), plots)
    payload = load_views([results], plot_dir=plots)
    view = next(v for v in payload["views"] if v["setting"]["dataset"] == "nas")
    assert view["plot"] and (plots / view["plot"]).is_file()
    got = _client(payload, plots).get(f"/plots/{view['plot']}")
    assert got.status_code == 200 and got.content == (plots / view["plot"]).read_bytes()
    write_result(results, "gin", "none", 0, np.full(N, 0.3))  # a row the chart does not show
    again = next(v for v in load_views([results], plot_dir=plots)["views"] if v["setting"]["dataset"] == "nas")
    assert again["id"] == view["id"] and again["plot"] is None


def test_static_export_writes_the_page_and_the_same_data(results, tmp_path, capsys):
    out = tmp_path / "site"
    assert main(["explore", "--no-committed", "--results", str(results), "--static", str(out),
                 "--leaderboard", str(tmp_path / "no-leaderboard")]) == 0
    from narbench.explorer.app import STATIC

    assert (out / "index.html").read_text() == (STATIC / "index.html").read_text()
    assert (out / "static" / "explorer.js").is_file() and (out / "static" / "explorer.css").is_file()
    assert json.loads((out / "views.json").read_text()) == load_views([results])
    assert "static explorer written to" in capsys.readouterr().out


def test_bad_input_is_one_line_and_exit_2(results, tmp_path, capsys):
    assert main(["explore", "--no-committed", "--results", str(tmp_path / "missing"), "--static", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "x-quick-s0.json").write_text("{ not json")
    assert main(["explore", "--no-committed", "--results", str(broken), "--static", str(tmp_path / "o")]) == 2
    assert "x-quick-s0.json" in capsys.readouterr().err
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert main(["explore", "--no-committed", "--results", str(results), "--static", str(a_file)]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert main(["explore", "--no-committed", "--static", str(tmp_path / "o")]) == 2
    assert "nothing to show" in capsys.readouterr().err


def test_the_server_binds_to_this_machine_by_default_and_a_taken_port_is_one_line(results, monkeypatch, capsys):
    from narbench.explorer import app

    seen = {}
    monkeypatch.setattr(app, "serve", lambda _app, sock: seen.update(addr=sock.getsockname()) or sock.close())
    make = app.create_app
    monkeypatch.setattr(app, "create_app", lambda *a, **kw: seen.update(searcher=a[2], access=kw["access"]) or make(*a, **kw))
    monkeypatch.delenv("NARBENCH_EXPLORER_TOKEN", raising=False)
    assert main(["explore", "--no-committed", "--results", str(results)]) == 0
    assert seen["addr"][0] == "127.0.0.1" and seen["addr"][1] > 0
    token = seen["access"].token
    assert len(token) >= 32 and f"http://127.0.0.1:{seen['addr'][1]}/?token={token}" in capsys.readouterr().out
    assert not seen["searcher"].allow_code and not seen["searcher"].allow_paths  # off unless asked for
    assert main(["explore", "--no-committed", "--results", str(results), "--allow-code", "--allow-paths"]) == 0
    assert seen["searcher"].allow_code and seen["searcher"].allow_paths and seen["access"].token != token
    monkeypatch.setenv("NARBENCH_EXPLORER_TOKEN", "from-the-environment-42")
    assert main(["explore", "--no-committed", "--results", str(results)]) == 0
    assert seen["access"].token == "from-the-environment-42"
    assert main(["explore", "--no-committed", "--results", str(results), "--token", "from-the-command-line"]) == 0
    assert seen["access"].token == "from-the-command-line"
    capsys.readouterr()
    assert main(["explore", "--no-committed", "--results", str(results), "--token", "short"]) == 2
    assert "at least 16" in capsys.readouterr().err
    assert main(["explore", "--no-committed", "--results", str(results), "--host", "0.0.0.0",
                 "--allow-host", "box.example"]) == 0
    assert seen["addr"][0] == "0.0.0.0" and not seen["searcher"].allow_code  # exposed: never
    assert "box.example" in seen["access"].hosts and "0.0.0.0" not in seen["access"].hosts
    capsys.readouterr()
    for flag in ("--allow-code", "--allow-paths"):  # refused at start, before any result is read
        assert main(["explore", "--no-committed", "--results", str(results), "--host", "0.0.0.0", flag]) == 2
        err = capsys.readouterr().err
        assert flag in err and "refused" in err and len(err.strip().splitlines()) == 1
    assert main(["explore", "--no-committed", "--results", str(results), "--no-search"]) == 0
    assert seen["searcher"] is None
    taken = app.bind()
    try:
        assert main(["explore", "--no-committed", "--results", str(results), "--port", str(taken.getsockname()[1])]) == 2
        assert "cannot listen on 127.0.0.1" in capsys.readouterr().err
    finally:
        taken.close()


def test_a_real_server_answers_on_its_socket(results):
    import httpx

    from narbench.explorer import app

    payload = load_views([results])
    sock = app.bind()
    served = app.create_app(payload)
    with app.running(served, sock) as server:
        assert server.started
        with httpx.Client(timeout=10) as client:
            assert client.get(app.url_of(sock) + "views.json").status_code == 401  # no token
            assert client.get(app.url_of(sock, served.access.token)).status_code == 303
            got = client.get(app.url_of(sock) + "views.json")  # the first visit's cookie
        assert got.status_code == 200 and got.json()["views"] == payload["views"]
        assert app.is_loopback(sock)


def test_ports_read_only_exports_and_folders_outside_the_project_are_one_line(results, tmp_path, monkeypatch, capsys):
    import os

    for port in ("-1", "70000"):
        assert main(["explore", "--no-committed", "--results", str(results), "--port", port]) == 2
        err = capsys.readouterr().err
        assert f"--port {port}" in err and len(err.strip().splitlines()) == 1
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        targets = [a_file / "site"] + ([locked / "site"] if not os.access(locked, os.W_OK) else [])  # root writes anyway
        for target in targets:
            assert main(["explore", "--no-committed", "--results", str(results), "--static", str(target)]) == 2
            err = capsys.readouterr().err
            errors = [ln for ln in err.splitlines() if ln.startswith("error:")]  # the rest: progress lines
            assert len(errors) == 1 and f"cannot write into {target}" in errors[0] and "Traceback" not in err
    finally:
        locked.chmod(0o700)


def test_explore_finds_the_project_leaderboard_from_a_subfolder_and_says_when_outside(results, tmp_path,
                                                                                      monkeypatch, capsys):
    from narbench.core.project import find_root

    root = find_root()
    seen = {}
    monkeypatch.setattr("narbench.explorer.views.load_views", lambda dirs, **kw: seen.update(dirs=dirs) or load_views([results]))
    monkeypatch.chdir(root / "narbench" / "explorer")
    assert main(["explore", "--results", str(results), "--static", str(tmp_path / "site")]) == 0
    assert seen["dirs"][0] == root / "leaderboard" / "results"
    monkeypatch.chdir(tmp_path)
    assert main(["explore", "--static", str(tmp_path / "site2")]) == 2
    err = capsys.readouterr().err
    assert "not inside a narbench checkout" in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------ search and side by side


@pytest.fixture(scope="module")
def searcher():
    from narbench.explorer.searching import Searcher

    return Searcher(allow_code=True)


@pytest.fixture(scope="module")
def resnet(searcher):
    """A resnet graph of the shipped index (its name) and the graph itself."""
    graphs, _ = searcher.corpus()
    name = next(n for n in searcher.index().names if n.startswith("timm/resnet50/classification"))
    return name, graphs[name]


def _search_client(searcher):
    """A client of an explorer with no result views and `searcher` (None: search off)."""
    from starlette.testclient import TestClient

    from narbench.explorer.app import create_app

    return TestClient(create_app({"format": 1, "results": 0, "folders": [], "views": [], "notes": {}}, None, searcher,
                                 access=_access()), headers={"X-Narbench-Token": TOKEN})


def test_compare_folds_repeated_blocks_and_marks_shared_and_missing_structure():
    from narbench.data.graph import ArchGraph
    from narbench.explorer.compare import compare

    def chain(blocks, head):  # input, `blocks` residual blocks (conv, relu, conv, add), then `head` ops
        ops, edges, prev = [0], [], 0
        for _ in range(blocks):
            i = len(ops)
            ops += [1, 2, 1, 3]
            edges += [(prev, i), (i, i + 1), (i + 1, i + 2), (i + 2, i + 3), (prev, i + 3)]
            prev = i + 3
        for op in head:
            ops.append(op)
            edges.append((prev, len(ops) - 1))
            prev = len(ops) - 1
        return ops, edges

    ops_a, e_a = chain(6, [4, 5])
    ops_b, e_b = chain(2, [4, 5])
    a = ArchGraph(np.array(ops_a), np.array(e_a).T, "a", "fa", "c")
    b = ArchGraph(np.array(ops_b), np.array(e_b).T, "b", "fb", "c")
    vocab_a = ["input", "conv", "relu", "add", "linear", "output"]
    vocab_b = ["input", "conv", "relu", "add", "softmax", "output"]  # another id table: compared by name
    out = compare(a, vocab_a, b, vocab_b)
    qa, hb = out["query"], out["hit"]
    blocks = [n for n in qa["nodes"] if n["block"]]
    assert qa["blocks"] == len(blocks) >= 1 and max(n["block"] for n in blocks) >= 3  # the six blocks, folded
    assert sum(n["ops"] for n in qa["nodes"]) == a.num_nodes  # folding hides no op
    ids = {n["id"] for n in qa["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids and e["source"] != e["target"] for e in qa["edges"])
    label = {n["label"]: n for n in qa["nodes"] if not n["block"]}
    assert label["linear"]["differs"] and not label["input"]["differs"]  # b has no linear
    assert any(n["label"] == "softmax" and n["differs"] for n in hb["nodes"])
    assert label["input"]["matched"]  # the stem is wired alike in both
    assert 0 < qa["matched"] < 1 and "overlap" in out["why"]
    unfolded = compare(a, vocab_a, b, vocab_b, fold=False)["query"]
    assert unfolded["blocks"] == 0 and len(unfolded["nodes"]) == a.num_nodes


def test_compare_in_roles_marks_a_relu_network_and_its_gelu_twin_as_wired_alike():
    """For an index that reads activations and norms by role, the pair view reads them so too: a ReLU/BatchNorm
    chain beside its GELU/LayerNorm twin is matched everywhere and differs nowhere; read by op, the activations
    and norms differ. The nodes keep their own names either way."""
    from narbench.data.graph import ArchGraph
    from narbench.explorer.compare import compare

    ops, edges = [0], []
    for _ in range(3):
        i = len(ops)
        ops += [1, 2, 3, 4]  # conv, act, norm, add
        edges += [(i - 1, i), (i, i + 1), (i + 1, i + 2), (i + 2, i + 3), (i - 1, i + 3)]
    graph = ArchGraph(np.array(ops), np.array(edges).T, "g", "f", "cnn")
    relu, gelu = ["input", "conv", "relu", "batchnorm", "add"], ["input", "conv", "gelu", "layernorm", "add"]
    by_op, by_role = compare(graph, relu, graph, gelu, fold=False), compare(graph, relu, graph, gelu, fold=False,
                                                                            roles=True)
    assert by_role["query"]["matched"] == 1.0 and by_role["query"]["differs"] == 0
    assert by_op["query"]["matched"] < 0.5 and by_op["query"]["differs"] == 6  # 3 relu + 3 batchnorm
    assert {n["label"] for n in by_role["hit"]["nodes"]} >= {"gelu", "layernorm"}
    assert "(activations and norms by role)" in by_role["why"] and "by role" not in by_op["why"]


def test_search_by_index_name_then_the_hit_beside_the_query(searcher, resnet):
    name, graph = resnet
    client = _search_client(searcher)
    got = client.get("/api/search", params={"q": name, "k": 5})
    assert got.status_code == 200, got.text
    result = got.json()
    assert result["query"] == name and len(result["hits"]) == 5 and result["query_id"]
    assert name not in [h["name"] for h in result["hits"]]  # the graph itself is left out
    hit = result["hits"][0]["name"]
    pair = client.get("/api/pair", params={"query": result["query_id"], "hit": hit}).json()
    assert pair["query"]["name"] == name and pair["hit"]["name"] == hit
    assert pair["query"]["num_nodes"] == graph.num_nodes
    for side in ("query", "hit"):
        g = pair[side]
        assert g["blocks"] >= 1 and len(g["nodes"]) < g["num_nodes"]  # a resnet's repeated blocks are folded
        assert sum(n["matched"] for n in g["nodes"]) > 0
    assert "overlap" in pair["why"]


def test_search_a_model_file_and_an_uploaded_graph(searcher, resnet, tmp_path):
    from narbench.data.store import write_graphs

    client = _search_client(searcher)
    got = client.post("/api/search", params={"q": "examples/out_of_zoo.py:ResidualCNN", "k": 3})  # code: by POST
    assert got.status_code == 200, got.text
    # a residual CNN: its first hit is a residual CNN (which family of them is the index encoder's call:
    # ResNet's with `wl`, torchvision's 3-d video ResNet-18 `mc3` with `graf-lda`; docs/search.md)
    assert got.json()["kind"] == "file" and got.json()["hits"][0]["coarse"] == "cnn"
    assert got.json()["hits"][0]["family"] in {"resnet", "mc3", "r2plus1d", "r3d"}
    name, graph = resnet
    _, vocab = searcher.corpus()
    path = tmp_path / "mine.narg"
    write_graphs(path, [graph], vocab, {"note": "test"})
    up = client.post("/api/search", params={"k": 3, "filename": "mine.narg"}, content=path.read_bytes())
    assert up.status_code == 200, up.text
    assert up.json()["query"] == "mine.narg" and name in up.json()["duplicate_of"]  # the same graph as the index's
    pair = client.get("/api/pair", params={"query": up.json()["query_id"], "hit": name}).json()
    assert pair["query"]["matched"] == 1.0 and pair["query"]["differs"] == 0  # identical graphs match everywhere


def test_bad_searches_are_one_line_with_their_status(searcher, resnet):
    from narbench.explorer.searching import Searcher

    client = _search_client(searcher)
    cases = [(client.get("/api/search", params={"q": "no/such/graph"}), 403, "'no/such/graph' is not a graph name"),
             (client.get("/api/search", params={"q": ""}), 400, "give a target"),
             (client.get("/api/search", params={"q": resnet[0], "k": "many"}), 400, "k must"),
             (client.get("/api/search", params={"q": resnet[0], "k": 0}), 400, "between 1 and 100"),
             (client.post("/api/search", content=b"not a graph file"), 400, "graph file"),
             (client.post("/api/search", content=b""), 400, "empty"),
             (client.get("/api/pair", params={"query": "q999", "hit": resnet[0]}), 404, "no query"),
             (_search_client(None).get("/api/search", params={"q": resnet[0]}), 503, "search is off")]
    for got, status, words in cases:
        assert got.status_code == status, (got.status_code, got.text)
        assert words in got.json()["error"] and "Traceback" not in got.text
    exposed = _search_client(Searcher(searcher.index()))  # code and paths off: the default
    for target in ("examples/out_of_zoo.py:ResidualCNN", "torch.nn:Linear", "timm:resnet18"):
        refused = exposed.post("/api/search", params={"q": target})
        assert refused.status_code == 403 and "--allow-code" in refused.json()["error"], target
    refused = exposed.post("/api/search", params={"q": "leaderboard/plots/x.narg"})
    assert refused.status_code == 403 and "--allow-paths" in refused.json()["error"]
    assert exposed.get("/api/search", params={"q": resnet[0], "k": 2}).status_code == 200  # names stay allowed
    by_get = client.get("/api/search", params={"q": "examples/out_of_zoo.py:ResidualCNN"})  # code on, but a GET
    assert by_get.status_code == 403 and "only by POST" in by_get.json()["error"]


def test_a_model_that_never_returns_costs_one_search_not_the_server(searcher, resnet, tmp_path):
    """A model given as code becomes a graph in a forked child, killed at the time limit: the search
    answers 400 saying so, and the next search is answered as usual."""
    from narbench.explorer.searching import Searcher

    model = tmp_path / "hang.py"
    model.write_text("import time\nimport torch\n\n\nclass Hang(torch.nn.Module):\n"
                     "    def __init__(self):\n        super().__init__()\n        self.fc = torch.nn.Linear(8, 8)\n\n"
                     "    def forward(self, x):\n        while True:\n            time.sleep(0.05)\n")
    client = _search_client(Searcher(searcher.index(), allow_code=True, timeout=3))
    t0 = time.monotonic()
    got = client.post("/api/search", params={"q": f"{model}:Hang"})
    assert got.status_code == 400 and "did not finish within 3 s" in got.json()["error"]
    assert time.monotonic() - t0 < 60
    again = client.get("/api/search", params={"q": resnet[0], "k": 2})
    assert again.status_code == 200 and len(again.json()["hits"]) == 2
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('this module does not import')\n")
    got = client.post("/api/search", params={"q": f"{broken}:Net"})
    assert got.status_code == 400 and "does not import" in got.json()["error"]
