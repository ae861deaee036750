"""The explorer in a real browser: Debian's Chromium driven by Playwright against a running server.

Nothing is downloaded at run time: Playwright drives the system's browser (`chromium` on PATH, or
NARBENCH_CHROMIUM=/path). Without one the tests skip, saying why; `.ci/run` installs it so CI runs
them. Screenshots of each view go to NARBENCH_SCREENSHOTS (default: the test's temp folder).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from tests.test_explorer import write_nas_results

pytestmark = [pytest.mark.browser, pytest.mark.slow]
pytest.importorskip("starlette", reason="the explorer extra (starlette, uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")

N = 40


def _chromium() -> str | None:
    return os.environ.get("NARBENCH_CHROMIUM") or next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


@pytest.fixture(scope="module")
def browser():
    exe = _chromium()
    if exe is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium, or NARBENCH_CHROMIUM=/path/to/chrome)")
    with sync_api.sync_playwright() as pw:
        try:
            b = pw.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        except sync_api.Error as exc:  # a browser that is there but cannot start (missing libraries): say so
            pytest.skip(f"Chromium at {exe} does not start: {str(exc).splitlines()[0]}")
        yield b
        b.close()


@pytest.fixture
def site(tmp_path):
    """A running explorer over hand-made results (nas: gcn best, gat below, wl a floor) with their charts."""
    from narbench import leaderboard as lb
    from narbench.explorer import app, load_views
    from narbench.leaderboard.subsets import with_subsets

    res = write_nas_results(tmp_path / "res")
    plots = tmp_path / "plots"
    lb.plot_tables(lb.build_tables(with_subsets(lb.collect([res]))), plots)
    payload = load_views([res], plot_dir=plots)
    sock = app.bind()
    served = app.create_app(payload, plots, _searcher())
    with app.running(served, sock):
        yield app.url_of(sock, served.access.token), payload, res  # the address narbench explore prints


_SEARCHER = []


def _searcher():
    """One Searcher over the shipped index for the module (loading the index and corpus takes seconds)."""
    from narbench.explorer.searching import Searcher

    if not _SEARCHER:
        _SEARCHER.append(Searcher(allow_code=True))
    return _SEARCHER[0]


def _shots(tmp_path) -> Path:
    out = Path(os.environ.get("NARBENCH_SCREENSHOTS") or tmp_path / "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _watch(page) -> list[str]:
    """Script errors and Content-Security-Policy refusals of `page`, as they happen (the test asserts none)."""
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.on("console", lambda msg: problems.append(msg.text) if "Content Security Policy" in msg.text else None)
    return problems


def _labels(page) -> list[str]:
    return page.locator("[data-testid=view-table] tbody tr").evaluate_all("rows => rows.map(r => r.dataset.label)")


def test_leaderboard_loads_sorts_filters_and_downloads_what_is_shown(browser, site, tmp_path):
    url, payload, res = site
    page = browser.new_page(accept_downloads=True)
    problems = _watch(page)
    t0 = time.perf_counter()
    page.goto(url)
    page.wait_for_selector("[data-testid=view-table] tbody tr")
    load_s = time.perf_counter() - t0
    assert "token" not in page.url  # the first visit moved the token into a cookie
    view = payload["views"][0]
    assert sorted(_labels(page)) == sorted(r["label"] for r in view["rows"])
    assert f"{payload['results']} result files" in page.text_content("[data-testid=summary]")
    assert page.locator("[data-testid=view-plot]").get_attribute("src").endswith(".png")
    page.screenshot(path=str(_shots(tmp_path) / "explorer-leaderboard.png"), full_page=True)

    header = page.locator("th[data-key='ndcg@20']")
    header.click()  # descending first
    means = {r["label"]: r["mean"]["ndcg@20"] for r in view["rows"]}
    assert _labels(page) == sorted(means, key=lambda k: -means[k])
    assert header.get_attribute("aria-sort") == "descending"
    header.click()
    assert _labels(page) == sorted(means, key=lambda k: means[k])

    page.fill("[data-testid=method-filter]", "ga")
    assert _labels(page) == ["gat"]
    page.fill("[data-testid=method-filter]", "")
    page.select_option("[data-testid=metric-set]", "all")
    assert page.locator("[data-testid=view-table] thead th").count() == 2 + len(view["columns"])

    with page.expect_download() as info:
        page.click("[data-testid=download-csv]")
    rows = list(csv.DictReader(open(info.value.path(), newline="")))
    assert [r["method"] for r in rows] == _labels(page)
    for r in rows:  # the CSV's means are the result files' means over seeds
        enc = r["method"].split(" ")[0]
        files = sorted(res.glob(f"nas-*-{enc}-*.json"))
        assert float(r["ndcg@20_mean"]) == pytest.approx(
            np.mean([json.loads(f.read_text())["metrics"]["ndcg@20"] for f in files]), abs=1e-12)
    with page.expect_download() as info:
        page.click("[data-testid=download-json]")
    shown = json.loads(Path(info.value.path()).read_text())
    assert [r["label"] for r in shown["rows"]] == _labels(page) and shown["view"] == view["id"]
    assert problems == []
    print(f"first page load {load_s:.2f} s")


def test_the_page_without_the_token_says_how_to_open_it(browser, site):
    url, _, _ = site
    page = browser.new_page()
    got = page.goto(url.split("?")[0])  # the address without its token
    assert got.status == 401 and "?token=" in page.content()


def test_a_page_without_its_data_says_so(browser, tmp_path):
    """The static export opened as a file (no web server): the browser refuses to fetch views.json,
    and the page says what is missing instead of staying blank."""
    from narbench.explorer.export import export_static

    index = export_static({"format": 1, "results": 0, "folders": [], "views": [], "notes": {}}, tmp_path / "site")
    page = browser.new_page()
    page.goto(index.as_uri())
    box = page.locator("[data-testid=error]")
    box.wait_for(state="visible")
    assert "views.json" in box.text_content()


def test_search_shows_hits_and_a_hit_beside_the_query_with_shared_structure_marked(browser, site, tmp_path):
    url, _, _ = site
    model = Path(__file__).resolve().parents[1] / "examples" / "out_of_zoo.py"  # a shipped example, written by hand
    name = f"{model}:ResidualCNN"
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = _watch(page)  # a script error, or the page's policy refusing what cytoscape needs
    page.goto(url + "#search")
    page.fill("[data-testid=search-target]", name)
    page.select_option("[data-testid=search-k]", "10")
    page.click("[data-testid=search-button]")
    page.wait_for_selector("[data-testid=hits] tbody tr")
    hits = page.locator("[data-testid=hits] tbody tr").evaluate_all("rows => rows.map(r => r.dataset.name)")
    families = page.locator("[data-testid=hits] tbody tr td:nth-child(3)").all_text_contents()
    # a hand-written residual CNN finds residual CNNs first (ResNet's family with the `wl` index,
    # torchvision's 3-d video ResNet-18 `mc3` with the `graf-lda` one: docs/search.md)
    assert len(hits) == 10 and families[0] in {"resnet", "mc3", "r2plus1d", "r3d"}
    page.click("[data-testid=hits] tbody tr >> nth=0")
    page.wait_for_selector("[data-testid=pair-hit][data-nodes]")
    for panel in ("pair-query", "pair-hit"):
        el = page.locator(f"[data-testid={panel}]")
        assert int(el.get_attribute("data-matched")) > 0 and int(el.get_attribute("data-blocks")) >= 1
        drawn = page.evaluate(f"[window.explorerGraphs['{panel}'].nodes('.matched').length, "
                              f"window.explorerGraphs['{panel}'].nodes().length]")
        assert 0 < drawn[0] <= drawn[1] == int(el.get_attribute("data-nodes"))
    assert "overlap" in page.text_content("[data-testid=pair-why]")
    page.screenshot(path=str(_shots(tmp_path) / "explorer-search.png"), full_page=True)

    page.fill("[data-testid=search-target]", "no/such/graph")  # a bad target: said on the page, nothing breaks
    page.click("[data-testid=search-button]")
    page.wait_for_selector("#search-status.error")
    assert "no/such/graph" in page.text_content("[data-testid=search-status]")
    assert errors == []
