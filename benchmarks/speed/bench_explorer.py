"""The explorer's page load and search, warm: the committed leaderboard and the shipped index served by
`narbench explore`'s app.

    python -m benchmarks.speed.bench_explorer [--results DIR ...] [--repeat 5]

Prints the server's start (reading, validating and testing the results: once per start), the
time for the page's four requests (page, script, style, views.json) over HTTP, and, when a
Chromium is found, the time from navigation to the first table drawn in a headless browser; then
searches over HTTP (an index graph's name, a model file of examples/, each warm: its second call)
and the side-by-side view of the first hit. Targets (issue 41): first page load <= 1 s and a search
<= 2 s, warm, on a 2-core machine.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", action="append", default=None, metavar="DIR")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from narbench.explorer import app, load_views
    from narbench.explorer.searching import Searcher

    t0 = time.perf_counter()
    payload = load_views(args.results or ["leaderboard/results"], plot_dir="leaderboard/plots")
    start = time.perf_counter() - t0
    sock = app.bind()
    served = app.create_app(payload, "leaderboard/plots", Searcher(allow_code=True))  # the code target below
    with app.running(served, sock):
        measure(app.url_of(sock), payload, start, args.repeat, served.access.token)


def measure(url: str, payload: dict, start: float, repeat: int, token: str) -> None:
    """Print the figures of the module docstring for the explorer served at `url` (API calls carry `token`)."""
    import httpx

    auth = {"X-Narbench-Token": token}
    print(f"server start (read, validate, test {payload['results']} result files, {len(payload['views'])} views): {start:.1f} s")
    with httpx.Client(headers=auth) as client:
        client.get(url + "views.json")  # warm
        http = []
        for _ in range(repeat):
            t = time.perf_counter()
            for path in ("", "static/explorer.js", "static/explorer.css", "views.json"):
                client.get(url + path).raise_for_status()
            http.append(time.perf_counter() - t)
    print(f"page's requests over HTTP: median {statistics.median(http) * 1000:.0f} ms of {repeat}")
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        print("browser: no chromium on PATH, not measured")
    else:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(f"{url}?token={token}")  # the first visit turns the token into a cookie
            page.wait_for_selector("[data-testid=view-table] tbody tr")  # warm: the browser's first start
            shown = []
            for _ in range(repeat):
                t = time.perf_counter()
                page.goto(url + "?reload")
                page.wait_for_selector("[data-testid=view-table] tbody tr")
                shown.append(time.perf_counter() - t)
            browser.close()
        print(f"browser, navigation to first table drawn: median {statistics.median(shown) * 1000:.0f} ms of {repeat} "
              f"(target <= 1000 ms)")
    with httpx.Client(timeout=300, headers=auth) as client:
        for target in ("timm/resnet50/classification/global_pool=max", "examples/out_of_zoo.py:ResidualCNN"):
            client.post(url + "api/search", params={"q": target}).raise_for_status()  # cold: index, torch, encoder
            times = []
            for _ in range(repeat):
                t = time.perf_counter()
                got = client.post(url + "api/search", params={"q": target})  # code targets: POST only
                got.raise_for_status()
                times.append(time.perf_counter() - t)
            result = got.json()
            print(f"search {target}: median {statistics.median(times) * 1000:.0f} ms of {repeat} (target <= 2000 ms)")
            hit = result["hits"][0]["name"]
            client.get(url + "api/pair", params={"query": result["query_id"], "hit": hit}).raise_for_status()  # corpus
            t = time.perf_counter()
            pair = client.get(url + "api/pair", params={"query": result["query_id"], "hit": hit}).json()
            print(f"  beside {hit}: {(time.perf_counter() - t) * 1000:.0f} ms "
                  f"({len(pair['query']['nodes'])} + {len(pair['hit']['nodes'])} nodes drawn)")


if __name__ == "__main__":
    main()
