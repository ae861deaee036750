"""Search for the page: a target's hits, and any hit beside the query (`compare`).

`Searcher` holds what searches share: the index (the shipped one unless given), the corpus graphs
the index was built from (loaded on the first side-by-side view, to draw a hit), and the graphs of
recent queries, by id, so that the page can ask for "query q beside hit h" after the search.

What a target may be depends on who can reach the server. Index graph names and uploaded graph
files (bytes a client sends; written to a temp file and read as data, never run) always.
`FILE.py:CLASS`, `MODULE:CLASS` and zoo names import and run code on the server's machine, as the
CLI does: only while the server listens on this machine alone (`allow_code`), never when
`--host` exposes it. Such a model becomes a graph in a forked child process (`_resolve_apart`),
killed after `timeout` seconds: a forward that never returns costs one search its answer (a 400
saying so), not the server. Searches run one at a time.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections import OrderedDict
from typing import Any

#: largest graph file accepted as an upload (bytes)
MAX_UPLOAD = 64 << 20
#: queries kept for side-by-side views
KEEP = 64
#: seconds a model given as code may take to become a graph (import, build, forward), as the CLI's default
TIMEOUT = 120.0


class SearchRefused(ValueError):
    """A search the server will not run, with its HTTP status: 403 code targets on an exposed server,
    400 no target or an empty upload, 413 an upload over `MAX_UPLOAD`; one line."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class NotFound(KeyError):
    """An unknown query id or hit name; one line."""

    def __str__(self) -> str:
        return str(self.args[0])


class Searcher:
    def __init__(self, index=None, *, allow_code: bool = True, timeout: float = TIMEOUT) -> None:
        self._index = index
        self.allow_code = allow_code
        self.timeout = timeout
        self._corpus: tuple[dict[str, Any], list[str]] | None = None
        self._queries: OrderedDict[str, tuple[Any, list[str], str]] = OrderedDict()
        self._lock = threading.Lock()  # one search at a time: extraction patches torch globally
        self._next = 0

    def index(self):
        if self._index is None:
            from narbench.search_engine.index import load_index

            self._index = load_index()
        return self._index

    def corpus(self) -> tuple[dict[str, Any], list[str]]:
        """{name: graph} and the vocabulary of the dataset the index was built on."""
        if self._corpus is None:
            from narbench.data.dataset import load_dataset

            ds = load_dataset(self.index().header["dataset"]["name"])
            self._corpus = ({g.name: g for g in ds.graphs}, list(ds.vocab))
        return self._corpus

    def search(self, target: str, k: int = 10) -> dict[str, Any]:
        """The hits of `target` (`narbench.search_engine.engine.search`, as JSON) and the query's id."""
        from narbench.search_engine.engine import search
        from narbench.search_engine.target import resolve_target

        target = target.strip()
        index = self.index()
        if not target:
            raise SearchRefused("give a target: a graph name of the index, FILE.py:CLASS, MODULE:CLASS or a zoo name")
        if not self.allow_code and index.row_of(target) is None:
            raise SearchRefused(f"{target!r} is not a graph of the index; models given as code (FILE.py:CLASS, "
                                "MODULE:CLASS, timm:NAME) run on the server, which it allows only while it listens "
                                "on this machine alone (without --host); upload a saved graph file instead", 403)
        head = target.rsplit(":", 1)[0]  # FILE.py:CLASS, or a graph file's FILE:NAME
        graph_file = (os.path.isfile(target) or os.path.isfile(head)) and not head.endswith(".py")
        code = index.row_of(target) is None and not graph_file  # imports and runs a model
        with self._lock:
            query = _resolve_apart(target, index, self.timeout) if code else resolve_target(target, index)
            result = search(query, k, index=index, progress=False)
        return self._keep(query, result)

    def search_upload(self, data: bytes, filename: str = "upload.narg", k: int = 10) -> dict[str, Any]:
        """The hits of a graph file sent by a client: read as data (`narbench.data.store`), never run."""
        from narbench.search_engine.engine import search
        from narbench.search_engine.target import resolve_target

        if len(data) > MAX_UPLOAD:
            raise SearchRefused(f"the graph file is {len(data) >> 20} MiB; the limit is {MAX_UPLOAD >> 20} MiB", 413)
        if not data:
            raise SearchRefused("the uploaded graph file is empty")
        index = self.index()
        with tempfile.TemporaryDirectory(prefix="narbench-upload-") as tmp:
            path = os.path.join(tmp, "graph" + (os.path.splitext(filename)[1] or ".narg"))
            with open(path, "wb") as fh:
                fh.write(data)
            with self._lock:
                query = resolve_target(path, index)
                result = search(query, k, index=index, progress=False)
        result.query = filename
        return self._keep(query, result)

    def _keep(self, query, result) -> dict[str, Any]:
        index = self.index()
        if query.graph is not None:
            graph, vocab = query.graph, list(index.vocab)
        else:
            graphs, vocab = self.corpus()
            graph = graphs.get(index.names[query.row])
        self._next += 1
        qid = f"q{self._next}"
        if graph is not None:
            self._queries[qid] = (graph, vocab, result.query)
            while len(self._queries) > KEEP:
                self._queries.popitem(last=False)
        return {"query_id": qid if graph is not None else None, **result.to_json()}

    def pair(self, query_id: str, hit: str) -> dict[str, Any]:
        """The query of `query_id` beside the corpus graph `hit` (`compare`)."""
        from narbench.explorer.compare import compare

        if query_id not in self._queries:
            raise NotFound(f"no query {query_id!r} (only the last {KEEP} searches are kept: search again)")
        graphs, vocab = self.corpus()
        if hit not in graphs:
            raise NotFound(f"no graph {hit!r} in the index's dataset")
        graph, qvocab, label = self._queries[query_id]
        out = compare(graph, qvocab, graphs[hit], vocab)
        out["query"]["name"] = label
        return out


def _resolve_apart(target: str, index, timeout: float):
    """`resolve_target` for a model given as code, in a forked child that is killed after `timeout` s.

    The parent imports what extraction needs first (`warm_up`), so the child, a copy-on-write fork,
    starts warm; the child sends back the resolved `Query` or its error's type and message."""
    import multiprocessing

    from narbench.search_engine._target_run import warm_up
    from narbench.search_engine.target import TargetError, resolve_target

    warm_up()
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            send.send(("ok", resolve_target(target, index)))
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent as one line
            send.send(("error", type(exc).__name__, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
        finally:
            os._exit(0)

    proc = ctx.Process(target=child, daemon=True)
    proc.start()
    send.close()  # the child's copy stays open: its death reads as end of file here
    try:
        if not receive.poll(timeout):
            raise TargetError(f"{target}: no graph after {timeout:.0f} s (importing, building or running the model "
                              "did not finish; a forward that never returns?); stopped")
        try:
            reply = receive.recv()
        except EOFError:
            raise TargetError(f"{target}: the extraction ended without an answer (exit code {proc.exitcode})") from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        receive.close()
    if reply[0] == "ok":
        return reply[1]
    raise TargetError(f"{reply[2]}" if reply[1] == "TargetError" else f"{target}: {reply[1]}: {reply[2]}")
