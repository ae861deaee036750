"""Search for the page: a target's hits, and any hit beside the query (`compare`).

`Searcher` holds what searches share: the index (the shipped one unless given), the corpus graphs
the index was built from (loaded on the first side-by-side view, to draw a hit), and the graphs of
recent queries, by id, so that the page can ask for "query q beside hit h" after the search.

What a target may be (`narbench.search_engine.target_text.kind_of`, decided from the text alone, no file
looked at), and how each is searched (`narbench.search_engine.target_check.Served`):

* `index`: a graph name of the index; always, GET or POST. Uploaded graph files (bytes a client
  sends; written to a temp file and read as data, never run) always too.
* `code`: `FILE.py:CLASS`, `MODULE:CLASS` and zoo names (`timm:NAME`) import and run code on the
  server's machine. Only with `allow_code` (`--allow-code`, refused with a non-loopback `--host`),
  only by POST (a GET, the kind a link or an image makes, is refused 403), and `FILE.py:CLASS` /
  `MODULE:CLASS` only when they name an `nn.Module` subclass defined in that file or module
  (`narbench.search_engine.target_check`, checked after the import and before anything is called).
  The model becomes a graph in a forked child process in a process group of its own
  (`narbench.search_engine._target_child`); at `timeout` seconds the whole group is killed: a forward
  that never returns costs one search its answer (a 400 saying so), not the server.
* `path`: anything else names a file on the server. Only with `allow_paths` (`--allow-paths`), only by
  POST; a regular file of at most `MAX_UPLOAD` bytes; every failure is the same line, which never
  says whether the file exists nor quotes its bytes.

Errors never show the server's temp folders.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from collections import OrderedDict
from typing import Any

#: largest graph file accepted as an upload or read from a server path (bytes)
MAX_UPLOAD = 64 << 20
#: queries kept for side-by-side views
KEEP = 64
#: seconds a model given as code may take to become a graph (import, build, forward), as the CLI's default
TIMEOUT = 120.0


class SearchRefused(ValueError):
    """A search the server will not run, with its HTTP status: 403 code or paths not allowed (or by GET),
    400 no target, a bad path or an empty upload, 413 an upload over `MAX_UPLOAD`; one line."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class NotFound(KeyError):
    """An unknown query id or hit name; one line."""

    def __str__(self) -> str:
        return str(self.args[0])


_REFUSED = {
    "code": ("models given as code (FILE.py:CLASS, MODULE:CLASS, timm:NAME) are not run by this server: "
             "start it with --allow-code (on 127.0.0.1 only) to allow them; upload a saved graph file instead"),
    "path": ("files on the server are not read by this server: start it with --allow-paths (on 127.0.0.1 only) "
             "to allow them; upload the graph file instead"),
}
_BY_POST = ("{what} is searched only by POST (as the page does), never from a GET (a link or an image on "
            "another page could send one)")


class Searcher:
    def __init__(self, index=None, *, allow_code: bool = False, allow_paths: bool = False,
                 timeout: float = TIMEOUT, max_memory: int | None = None) -> None:
        from narbench.search_engine._target_child import MAX_MEMORY

        self._index = index
        self.max_memory = MAX_MEMORY if max_memory is None else max_memory  # 0: no cap (`--max-memory 0`)
        self.allow_code = allow_code
        self.allow_paths = allow_paths
        self.timeout = timeout
        self._corpus: tuple[dict[str, Any], list[str]] | None = None
        self._queries: OrderedDict[str, tuple[Any, list[str], str]] = OrderedDict()
        self._lock = threading.Lock()  # one search at a time: extraction patches torch globally
        self._next = 0

    def index(self):
        if self._index is None:
            from narbench.search_engine.index_file import load_index

            self._index = load_index()
        return self._index

    def corpus(self) -> tuple[dict[str, Any], list[str]]:
        """{name: graph} and the vocabulary of the dataset the index was built on."""
        if self._corpus is None:
            from narbench.data.dataset import load_dataset

            ds = load_dataset(self.index().header["dataset"]["name"])
            self._corpus = ({g.name: g for g in ds.graphs}, list(ds.vocab))
        return self._corpus

    def search(self, target: str, k: int = 10, posted: bool = False) -> dict[str, Any]:
        """The hits of `target` (`narbench.search_engine.engine.run_search`, as JSON) and the query's id;
        `posted`: the request was a POST (code and paths are never searched from a GET). What this server
        does not search is `SearchRefused` (403) before anything is read or run (`_refusal`)."""
        from narbench.search_engine.target import TargetError
        from narbench.search_engine.target_check import Served, TargetRefused

        target = target.strip()
        if not target:
            raise SearchRefused("give a target: a graph name of the index, FILE.py:CLASS, MODULE:CLASS or a zoo name")
        served = Served(code=self.allow_code and posted, paths=self.allow_paths and posted, max_file=MAX_UPLOAD)
        try:
            return self._search(target, k, served=served, timeout=self.timeout, max_memory=self.max_memory)
        except TargetRefused as exc:
            raise SearchRefused(*self._refusal(exc, posted)) from None
        except TargetError as exc:  # a model given as code: its line, without the server's temp folders
            raise TargetError(_without_temp(str(exc))) from None

    def _refusal(self, exc, posted: bool) -> tuple[str, int]:
        """What this server says of a target it does not search (`TargetRefused`), and the HTTP status."""
        if exc.unreadable:  # one and the same line, whatever the reason: it says nothing of the file
            return (f"{exc.target!r} is not a narbench graph file this server can read (a regular file of at most "
                    f"{MAX_UPLOAD >> 20} MiB written by narbench.data.store.write_graphs, or an index graph name)", 400)
        if not (self.allow_code if exc.kind == "code" else self.allow_paths):
            return (_not_index(exc.target, self.index()) if exc.kind == "path" else "") + _REFUSED[exc.kind], 403
        return _BY_POST.format(what="a model given as code" if exc.kind == "code" else "a server path"), 403

    def search_upload(self, data: bytes, filename: str = "upload.narg", k: int = 10) -> dict[str, Any]:
        """The hits of a graph file sent by a client: read as data (`narbench.data.store`), never run."""
        from narbench.data.store import CorruptFileError
        from narbench.search_engine.target import TargetError

        if len(data) > MAX_UPLOAD:
            raise SearchRefused(f"the graph file is {len(data) >> 20} MiB; the limit is {MAX_UPLOAD >> 20} MiB", 413)
        if not data:
            raise SearchRefused("the uploaded graph file is empty")
        with tempfile.TemporaryDirectory(prefix="narbench-upload-") as tmp:
            path = os.path.join(tmp, "graph" + (os.path.splitext(filename)[1] or ".narg"))
            with open(path, "wb") as fh:
                fh.write(data)
            try:
                return self._search(path, k, label=filename)
            except (TargetError, CorruptFileError) as exc:  # said with the client's file name, not the temp path
                raise SearchRefused(_without_temp(str(exc).replace(path, filename), filename)) from None

    def _search(self, target: str, k: int, label: str | None = None, **options: Any) -> dict[str, Any]:
        """One search under the lock (`narbench.search_engine.engine.run_search`), as JSON with the id its query
        is kept by for side-by-side views (`pair`; the last `KEEP`); `label`: the name the query goes by."""
        from narbench.search_engine.engine import run_search

        index = self.index()
        with self._lock:
            query, result = run_search(target, k, index=index, progress=False, **options)
        result.query = label or result.query
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
        out = compare(graph, qvocab, graphs[hit], vocab, roles=self.index().reads_roles)
        out["query"]["name"] = label
        return out


def _not_index(target: str, index) -> str:
    """'X is not a graph name of the index (close names: ...); ' for a target that may be a misspelt name."""
    from narbench.search_engine.target import close_names

    near = close_names(target, index) if "/" in target else []
    return f"{target!r} is not a graph name of the index" + (f" (close names: {', '.join(near)})" if near else "") + "; "


def _without_temp(message: str, name: str = "the file") -> str:
    """`message`'s first line with any path under the temp folder replaced by `name`."""
    first = message.splitlines()[0] if message else "error"
    return re.sub(re.escape(tempfile.gettempdir()) + r"/[^\s:'\"]*", name, first)
