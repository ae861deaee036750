"""The explorer attacked as issue 57 describes, against a real server (uvicorn on a free loopback port).

Each attack asserts its refusal: the status, one line, and that nothing ran (the planted modules
write a marker file when their model, function or class is called; a control search shows the
marker is written when the call is allowed). The server runs in a thread of this process, so its
memory is this process's.
"""

from __future__ import annotations

import os
import select
import socket
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the explorer extra (starlette, uvicorn) is not installed")
httpx = pytest.importorskip("httpx")
psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.slow

TOKEN = "security-test-token-0123456789"
EMPTY = {"format": 1, "results": 0, "folders": [], "views": [], "notes": {}}
SECURITY_HEADERS = {"x-content-type-options": "nosniff", "x-frame-options": "DENY", "referrer-policy": "no-referrer"}


@dataclass
class Server:
    url: str
    port: int
    folder: Path  # the planted modules
    index_name: str  # a graph of the index: a search that runs no code

    def marker(self, name: str) -> Path:
        return self.folder / f"{name}.ran"

    def client(self, **kw) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kw)


PLANTED = '''
import os
import time
import torch

MARKER = {folder!r}


def _ran(name):
    open(os.path.join(MARKER, name + ".ran"), "w").close()


class Planted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        _ran("Planted")
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)


class Hang(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        while True:
            time.sleep(0.05)


def gadget():
    _ran("gadget")
    return Planted()


class Unrelated:
    def __init__(self):
        _ran("Unrelated")


Imported = torch.nn.Linear  # an nn.Module, but not defined here
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from narbench.explorer import app
    from narbench.explorer.access import Access
    from narbench.explorer.limits import Limits
    from narbench.explorer.searching import Searcher

    folder = tmp_path_factory.mktemp("planted")
    (folder / "planted.py").write_text(textwrap.dedent(PLANTED.format(folder=str(folder))))
    (folder / "planted_module.py").write_text(textwrap.dedent(PLANTED.format(folder=str(folder))))
    searcher = Searcher(allow_code=True, timeout=3)
    limits = Limits(body_seconds=1.5, queue=2, start_within=60, retry_after=7)
    sock = app.bind()
    served = app.create_app(EMPTY, None, searcher, access=Access.local(TOKEN), limits=limits)
    import sys

    sys.path.insert(0, str(folder))  # MODULE:CLASS targets find planted_module
    try:
        with app.running(served, sock):
            yield Server(app.url_of(sock), sock.getsockname()[1], folder, searcher.index().names[0])
    finally:
        sys.path.remove(str(folder))


def _one_line_error(got: httpx.Response) -> str:
    text = got.json()["error"]
    assert "\n" not in text and "Traceback" not in got.text
    return text


def test_every_route_asks_for_the_token(server):
    with server.client() as c:
        for path in ("/", "/views.json", "/static/explorer.js", "/api/search?q=x", "/api/pair?query=q1&hit=x"):
            assert c.get(path).status_code == 401, path
        assert c.post("/api/search", params={"q": "planted.py:Planted"}).status_code == 401
        assert c.get("/views.json", headers={"X-Narbench-Token": TOKEN + "x"}).status_code == 401
        assert c.get("/views.json", headers={"X-Narbench-Token": TOKEN}).status_code == 200


def test_a_get_with_a_code_target_is_refused_and_runs_nothing(server):
    target = f"{server.folder / 'planted.py'}:Planted"
    with server.client(headers={"X-Narbench-Token": TOKEN}) as c:
        got = c.get("/api/search", params={"q": target})
        assert got.status_code == 403 and "only by POST" in _one_line_error(got)
        got = c.get("/api/search", params={"q": "planted_module:Planted"})
        assert got.status_code == 403
    assert not server.marker("Planted").exists()


def test_cross_site_requests_and_a_forged_host_are_403_and_run_nothing(server):
    target = f"{server.folder / 'planted.py'}:Planted"
    token = {"X-Narbench-Token": TOKEN}
    attacks = [{"Origin": "http://attacker.example"},
               {"Sec-Fetch-Site": "cross-site"},
               {"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"},  # another port of localhost
               {"Host": f"attacker.example:{server.port}"},  # DNS rebinding: the page's own name
               {"Origin": "null"}]
    with server.client() as c:
        for headers in attacks:
            got = c.post("/api/search", params={"q": target}, headers={**token, **headers})
            assert got.status_code == 403, headers
            _one_line_error(got)
            assert c.get("/views.json", headers={**token, **headers}).status_code == 403, headers
        same = c.get("/views.json", headers={**token, "Origin": server.url.rstrip("/"), "Sec-Fetch-Site": "same-origin"})
        assert same.status_code == 200  # the page's own requests pass
    assert not server.marker("Planted").exists()


def test_only_nn_module_classes_defined_in_the_named_file_or_module_are_called(server):
    """`http.server:test`, functions, plain classes and imported modules are refused before any call;
    the control search of a model class defined there runs it (the marker appears)."""
    planted = server.folder / "planted.py"
    with server.client(headers={"X-Narbench-Token": TOKEN}) as c:
        got = c.post("/api/search", params={"q": "http.server:test"})
        assert got.status_code == 400 and "not an nn.Module subclass" in _one_line_error(got)
        for target, words in ((f"{planted}:gadget", "not an nn.Module subclass"),
                              ("planted_module:gadget", "not an nn.Module subclass"),
                              (f"{planted}:Unrelated", "not an nn.Module subclass"),
                              (f"{planted}:Imported", "not in"),
                              ("planted_module:Imported", "not in")):
            got = c.post("/api/search", params={"q": target})
            assert got.status_code == 400 and words in _one_line_error(got), (target, got.text)
        for name in ("gadget", "Unrelated", "Planted"):
            assert not server.marker(name).exists(), name
        control = c.post("/api/search", params={"q": f"{planted}:Planted", "k": 2})
        assert control.status_code == 200, control.text
    assert server.marker("Planted").exists()  # allowed: built, in the child
    server.marker("Planted").unlink()


def _raw_request(server, head: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    s.sendall((head.replace("\n", "\r\n") + "\r\n").encode())
    return s


def _read_status(s: socket.socket) -> tuple[int, bytes]:
    """The status and what came of the answer until the server closed the connection."""
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except OSError:  # reset after the answer (the client had sent bytes the server never read)
        pass
    return int(data.split(b" ", 2)[1]), data


class _PeakRss:
    """The largest RSS of this process (the server's) seen every 10 ms until `stop`."""

    def __init__(self) -> None:
        self.rss, self._done = psutil.Process().memory_info().rss, threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        proc = psutil.Process()
        while not self._done.wait(0.01):
            self.rss = max(self.rss, proc.memory_info().rss)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
        self.rss = max(self.rss, psutil.Process().memory_info().rss)


def test_a_chunked_512_mib_upload_is_stopped_at_the_limit_with_413(server):
    """No Content-Length: the server counts while reading, answers 413 at 64 MiB and closes; the client
    (a generator of 1 MiB chunks) stops when the answer comes. Memory grows far less than the body."""
    from narbench.explorer.limits import Limits

    cap, total = Limits().max_upload, 512 << 20
    rss0 = psutil.Process().memory_info().rss
    peak = _PeakRss()
    s = _raw_request(server, f"POST /api/search?filename=big.narg HTTP/1.1\nHost: 127.0.0.1:{server.port}\n"
                             f"X-Narbench-Token: {TOKEN}\nTransfer-Encoding: chunked\n")
    chunk = b"%x\r\n" % (1 << 20) + b"\0" * (1 << 20) + b"\r\n"
    sent = 0
    try:
        for piece in (chunk for _ in range(total >> 20)):  # streamed: the client holds one chunk
            if select.select([s], [], [], 0)[0]:  # the server has answered: stop sending
                break
            s.sendall(piece)
            sent += 1 << 20
    except (BrokenPipeError, ConnectionResetError):  # it closed the connection after answering
        pass
    try:
        status, reply = _read_status(s)
    finally:
        s.close()
        peak.stop()
    assert status == 413 and b"connection: close" in reply.lower()
    assert sent < 2 * cap  # the rest was never read
    assert peak.rss - rss0 < 256 << 20, f"RSS grew {(peak.rss - rss0) >> 20} MiB"
    declared = _raw_request(server, f"POST /api/search HTTP/1.1\nHost: 127.0.0.1:{server.port}\n"
                                    f"X-Narbench-Token: {TOKEN}\nContent-Length: {total}\n")
    try:
        assert _read_status(declared)[0] == 413  # said before a byte of the body is read
    finally:
        declared.close()


def test_a_slow_body_times_out(server):
    s = _raw_request(server, f"POST /api/search?filename=slow.narg HTTP/1.1\nHost: 127.0.0.1:{server.port}\n"
                             f"X-Narbench-Token: {TOKEN}\nContent-Length: 100000\n")
    t0 = time.monotonic()
    try:
        s.sendall(b"NARBENCH")  # then nothing more
        status, reply = _read_status(s)
    finally:
        s.close()
    assert status == 408 and b"did not arrive within 1.5 s" in reply
    assert time.monotonic() - t0 < 10


def test_an_upload_error_shows_no_temp_path_and_no_pid(server):
    with server.client(headers={"X-Narbench-Token": TOKEN}) as c:
        got = c.post("/api/search", params={"filename": "mine.narg"}, content=b"NARBENCH-GRAPHS not really")
    assert got.status_code == 400 and "mine.narg" in _one_line_error(got)
    assert tempfile.gettempdir() not in got.text and "narbench-upload" not in got.text
    assert str(os.getpid()) not in got.text


def test_a_hanging_search_never_delays_the_page_and_a_full_queue_is_503(server):
    """A model whose forward never returns holds the search thread (until its 3 s limit); meanwhile the
    page answers at once, one more search waits in the queue (2 places) and the next is told 503 with
    Retry-After. Once the hang is killed, the waiting search is answered."""
    answers: dict[str, httpx.Response] = {}

    def post(name: str, q: str) -> None:
        with server.client(headers={"X-Narbench-Token": TOKEN}) as c:
            answers[name] = c.post("/api/search", params={"q": q, "k": 2})

    hang = threading.Thread(target=post, args=("hang", f"{server.folder / 'planted.py'}:Hang"))
    hang.start()
    time.sleep(0.5)
    waiting = threading.Thread(target=post, args=("waiting", server.index_name))
    waiting.start()
    time.sleep(0.5)
    with server.client(headers={"X-Narbench-Token": TOKEN}) as c:
        full = c.post("/api/search", params={"q": server.index_name})
        assert full.status_code == 503 and full.headers["retry-after"] == "7"
        assert "waiting or running" in _one_line_error(full)
        slowest = 0.0
        while hang.is_alive():
            t0 = time.monotonic()
            assert c.get("/").status_code == 200 and c.get("/views.json").status_code == 200
            slowest = max(slowest, time.monotonic() - t0)
            time.sleep(0.2)
    hang.join()
    waiting.join(timeout=30)
    assert slowest < 1.0, f"GET / and /views.json took {slowest:.2f} s while a search hung"
    assert answers["hang"].status_code == 400 and "did not finish within 3 s" in answers["hang"].json()["error"]
    assert answers["waiting"].status_code == 200 and len(answers["waiting"].json()["hits"]) == 2


def test_every_answer_carries_the_security_headers(server):
    with server.client() as c:
        answers = [c.get("/views.json"),  # 401
                   c.get("/views.json", headers={"Host": "attacker.example"}),  # 403
                   c.get("/", params={"token": TOKEN}),  # 303 with the cookie
                   c.get("/views.json"),  # 200: the cookie
                   c.get("/nothing")]  # 404
    assert [a.status_code for a in answers] == [401, 403, 303, 200, 404]
    for got in answers:
        for name, value in SECURITY_HEADERS.items():
            assert got.headers[name] == value, (got.status_code, name)
        csp = got.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    cookie = answers[2].headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and answers[2].headers["location"] == "/"


def test_server_paths_are_off_and_when_on_say_nothing_of_a_file(server, tmp_path):
    """Off: 403 whatever the path. On (--allow-paths): a secret file, a missing one and a folder get
    the same line, which quotes none of the file's bytes."""
    from narbench.explorer import app
    from narbench.explorer.access import Access
    from narbench.explorer.searching import Searcher

    secret = tmp_path / "secret.txt"
    secret.write_text("root:*:secret-bytes\n")
    with server.client(headers={"X-Narbench-Token": TOKEN}) as c:
        for q in (str(secret), str(tmp_path / "missing.narg")):
            got = c.post("/api/search", params={"q": q})
            assert got.status_code == 403 and "--allow-paths" in _one_line_error(got)
    searcher = Searcher(allow_paths=True)
    sock = app.bind()
    with app.running(app.create_app(EMPTY, None, searcher, access=Access.local(TOKEN)), sock):
        with httpx.Client(base_url=app.url_of(sock), timeout=30, headers={"X-Narbench-Token": TOKEN}) as c:
            by_get = c.get("/api/search", params={"q": str(secret)})
            assert by_get.status_code == 403 and "only by POST" in by_get.json()["error"]
            lines = []
            for q in (secret, tmp_path / "missing.narg", tmp_path):
                got = c.post("/api/search", params={"q": str(q)})
                assert got.status_code == 400
                lines.append(_one_line_error(got).replace(str(q), "PATH"))
    assert lines[0] == lines[1] == lines[2] and "secret-bytes" not in "".join(lines) and "root:" not in lines[0]


def test_200_parallel_requests_are_each_answered_200_or_503_with_retry_after_within_5_s(server):
    """Page, data, static files and searches at once: every answer is 200, or 503 with Retry-After
    (a search the queue has no place for), within 5 s; none hangs."""
    import asyncio

    paths = ["/", "/views.json", "/static/explorer.js", "/static/vendor/cytoscape.min.js"]

    async def one(c: httpx.AsyncClient, i: int) -> tuple[str, int, float, str | None]:
        t0 = time.monotonic()
        if i % 4 == 3:
            got = await c.post("/api/search", params={"q": server.index_name, "k": 2})
        else:
            got = await c.get(paths[i % len(paths)])
        return got.request.url.path, got.status_code, time.monotonic() - t0, got.headers.get("retry-after")

    async def burst():
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=server.url, timeout=5, limits=limits,
                                     headers={"X-Narbench-Token": TOKEN}) as c:
            return await asyncio.gather(*(one(c, i) for i in range(200)))

    with server.client(headers={"X-Narbench-Token": TOKEN}) as c:  # warm: the first search loads torch's parts
        assert c.post("/api/search", params={"q": server.index_name, "k": 2}).status_code == 200
    answers = asyncio.run(burst())
    assert len(answers) == 200
    for path, status, seconds, retry in answers:
        assert status == 200 or (status == 503 and retry == "7"), (path, status)
        assert seconds < 5, (path, seconds)
    assert all(status == 200 for path, status, _, _ in answers if not path.startswith("/api/"))
    assert any(status == 200 for path, status, _, _ in answers if path.startswith("/api/"))
