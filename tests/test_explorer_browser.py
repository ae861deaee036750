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
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.handmade import write_result

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

    res = tmp_path / "res"
    for s in range(3):
        q = np.random.default_rng(s).uniform(0.6, 1.0, N)
        write_result(res, "gcn", "none", s, q)
        write_result(res, "gat", "none", s, q - 0.2)
        write_result(res, "wl", "none", s, q - 0.1)
    plots = tmp_path / "plots"
    lb.plot_tables(lb.build_tables(with_subsets(lb.collect([res]))), plots)
    payload = load_views([res], plot_dir=plots)
    sock = app.bind()
    server = app.make_server(app.create_app(payload, plots))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield app.url_of(sock), payload, res
    server.should_exit = True
    thread.join(timeout=20)


def _shots(tmp_path) -> Path:
    out = Path(os.environ.get("NARBENCH_SCREENSHOTS") or tmp_path / "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _labels(page) -> list[str]:
    return page.locator("[data-testid=view-table] tbody tr").evaluate_all("rows => rows.map(r => r.dataset.label)")


def test_leaderboard_loads_sorts_filters_and_downloads_what_is_shown(browser, site, tmp_path):
    url, payload, res = site
    page = browser.new_page(accept_downloads=True)
    t0 = time.perf_counter()
    page.goto(url)
    page.wait_for_selector("[data-testid=view-table] tbody tr")
    load_s = time.perf_counter() - t0
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
    print(f"first page load {load_s:.2f} s")


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
