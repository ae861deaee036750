"""The explorer's web application: a small ASGI app (Starlette) over a views payload, served by uvicorn.

Starlette because the app is a handful of routes (a page, its data, CSV, charts, static files)
with no templates or sessions: a full framework would add nothing, and Gradio would replace the
page with its own widgets and fetch its front end's assets at start. The page itself is static
(`static/`): it reads `views.json`, so the same files work as a static export (`export.py`).

Routes: `/` the page, `/views.json` the payload (`views.load_views`), `/views/<id>.csv` one view
as CSV, `/plots/<name>` a bar chart a view names (no other file under the plots folder is
reachable), `/static/*` the page's script, style and vendored libraries; `/api/search?q=TARGET&k=N`
(GET: index graph names; POST: any target the server allows, `searching.Searcher.search`), a graph
file as the body of a POST without `q` (`?filename=`), `/api/pair?query=ID&hit=NAME`. Every route sits
behind `access.guard` (token, Host, origin; security headers). Searches run on their own thread
(`jobs.SearchQueue`), so the page never waits on one. Errors: a JSON message with 400 (a bad target
or file), 401 (no token), 403 (code or paths not allowed, by GET, or another site), 404, 408 (a body too
slow), 413 (an upload over the limit) or 503 (search off, or the queue full: with Retry-After).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

from narbench.explorer.access import Access, guard
from narbench.explorer.limits import DEFAULT, Limits
from narbench.explorer.views import view_csv

STATIC = Path(__file__).parent / "static"


class ExplorerError(RuntimeError):
    """The explorer cannot start or export (an address in use, a file where a folder should be): one line."""

#: the address the server binds to unless told otherwise: this machine only
DEFAULT_HOST = "127.0.0.1"


def create_app(payload: dict[str, Any], plot_dir: str | Path | None = None, searcher=None, *,
               access: Access | None = None, limits: Limits = DEFAULT):
    """The app serving `payload` (from `load_views`), the charts it names in `plot_dir`, and search through
    `searcher` (`narbench.explorer.searching.Searcher`; None: the search routes say it is off), behind
    `access` (default: loopback names and a new random token, `app.access.token`)."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from narbench.explorer.jobs import SearchQueue

    views = {v["id"]: v for v in payload["views"]}
    plots = {v["plot"] for v in payload["views"] if v.get("plot")} if plot_dir is not None else set()
    payload = {**payload, "search": searcher is not None}  # the page offers search only when it can run
    body = json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()  # encoded once: every load reuses it
    page = (STATIC / "index.html").read_bytes()  # from memory: the page never waits for a thread
    jobs = SearchQueue(limits)

    async def index(request: Request) -> Response:
        return Response(page, media_type="text/html")

    async def views_json(request: Request) -> Response:
        return Response(body, media_type="application/json")

    async def one_csv(request: Request) -> Response:
        vid = request.path_params["id"]
        if vid not in views:
            raise HTTPException(404, f"no view {vid!r} (views.json lists them)")
        return Response(view_csv(views[vid]), media_type="text/csv",
                        headers={"content-disposition": f'attachment; filename="{vid}.csv"'})

    async def plot(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in plots:
            raise HTTPException(404, f"no chart {name!r}")
        return FileResponse(Path(plot_dir) / name, media_type="image/png")

    async def search_get(request: Request) -> Response:
        return await _searching(searcher, jobs, "search", request.query_params.get("q", ""), _k(request))

    async def search_post(request: Request) -> Response:
        from narbench.explorer.limits import BodyRefused, read_body

        k = _k(request)
        if "q" in request.query_params:  # a target, by POST: code and paths may be allowed
            return await _searching(searcher, jobs, "search", request.query_params["q"], k, True)
        if searcher is None:
            raise HTTPException(503, "search is off in this explorer (started without an index)")
        try:
            declared = int(request.headers["content-length"]) if "content-length" in request.headers else None
            data = await read_body(request.receive, limits, declared)
        except ValueError:
            raise HTTPException(400, "Content-Length must be a whole number of bytes") from None
        except BodyRefused as exc:  # the rest of the body is never read: the connection closes
            raise HTTPException(exc.status, str(exc), headers={"connection": "close"}) from None
        name = Path(request.query_params.get("filename", "upload.narg")).name or "upload.narg"
        return await _searching(searcher, jobs, "search_upload", data, name, k)

    async def pair(request: Request) -> Response:
        q, hit = request.query_params.get("query", ""), request.query_params.get("hit", "")
        return await _searching(searcher, jobs, "pair", q, hit)

    async def error(request: Request, exc: HTTPException) -> Response:
        return JSONResponse({"error": exc.detail, "status": exc.status_code}, status_code=exc.status_code,
                            headers=exc.headers)

    async def crash(request: Request, exc: Exception) -> Response:  # no traceback, path or PID to the client
        return JSONResponse({"error": "internal error in the explorer (the server's log says more)", "status": 500},
                            status_code=500)

    routes = [Route("/", index), Route("/views.json", views_json), Route("/views/{id}.csv", one_csv),
              Route("/plots/{name}", plot), Route("/api/search", search_get, methods=["GET"]),
              Route("/api/search", search_post, methods=["POST"]), Route("/api/pair", pair),
              Mount("/static", StaticFiles(directory=STATIC), name="static")]
    inner = Starlette(routes=routes, exception_handlers={HTTPException: error, Exception: crash})
    return guard(inner, access or Access.local())


def _k(request) -> int:
    from starlette.exceptions import HTTPException

    try:
        k = int(request.query_params.get("k", "10"))
    except ValueError:
        raise HTTPException(400, "k must be a whole number of hits (1-100)") from None
    if not 1 <= k <= 100:
        raise HTTPException(400, "k must be between 1 and 100")
    return k


async def _searching(searcher, jobs, method: str, *args):
    """`searcher.<method>(*args)` on the search queue, as JSON; its refusals and errors as HTTP errors."""
    from starlette.exceptions import HTTPException
    from starlette.responses import JSONResponse

    from narbench.data.store import CorruptFileError
    from narbench.eval.retrieval import EmbeddingError
    from narbench.explorer.jobs import Busy
    from narbench.explorer.searching import NotFound, SearchRefused, _without_temp
    from narbench.search_engine.target import TargetError

    if searcher is None:
        raise HTTPException(503, "search is off in this explorer (started without an index)")
    try:
        return JSONResponse(await jobs.run(getattr(searcher, method), *args))
    except Busy as exc:
        raise HTTPException(503, str(exc), headers={"retry-after": str(exc.retry_after)}) from None
    except SearchRefused as exc:
        raise HTTPException(exc.status, str(exc)) from None
    except NotFound as exc:
        raise HTTPException(404, str(exc)) from None
    except (TargetError, CorruptFileError, EmbeddingError) as exc:
        raise HTTPException(400, _without_temp(str(exc)) if str(exc) else type(exc).__name__) from None


def bind(host: str = DEFAULT_HOST, port: int = 0) -> socket.socket:
    """A listening socket on (host, port); port 0 lets the system choose a free one. ExplorerError names the problem."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ExplorerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    return sock


def is_loopback(sock: socket.socket) -> bool:
    """Whether `sock` listens on this machine alone (127.0.0.0/8, ::1)."""
    import ipaddress

    return ipaddress.ip_address(sock.getsockname()[0]).is_loopback


def url_of(sock: socket.socket, token: str | None = None) -> str:
    """The page's address on `sock` (`?token=` appended when given: the address to open)."""
    host, port = sock.getsockname()[:2]
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}/" + (f"?token={token}" if token else "")


def make_server(app):
    """A uvicorn server for `app` (its access log off: the page makes few requests); `.run(sockets=[sock])`."""
    import uvicorn

    return uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))


def serve(app, sock: socket.socket) -> None:
    """Serve `app` on `sock` until interrupted."""
    make_server(app).run(sockets=[sock])


@contextlib.contextmanager
def running(app, sock: socket.socket, *, timeout: float = 20.0):
    """Serve `app` on `sock` in a daemon thread for the `with` block (tests, benchmarks): entered once
    uvicorn has started, stopped and joined on exit. ExplorerError when it has not started in `timeout` s."""
    server = make_server(app)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise ExplorerError(f"the explorer did not start on {url_of(sock)} within {timeout:.0f} s")
            time.sleep(0.02)
        yield server
    finally:
        server.should_exit = True
        thread.join(timeout=timeout)
