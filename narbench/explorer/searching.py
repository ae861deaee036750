"""Search for the page: a target's hits, and any hit beside the query (`compare`).

`Searcher` holds what searches share: the index (the shipped one unless given), the corpus graphs
the index was built from (loaded on the first side-by-side view, to draw a hit), and the graphs of
recent queries, by id, so that the page can ask for "query q beside hit h" after the search.

What a target may be (`kind_of`, decided from the text alone, no file looked at):

* `index`: a graph name of the index; always, GET or POST. Uploaded graph files (bytes a client
  sends; written to a temp file and read as data, never run) always too.
* `code`: `FILE.py:CLASS`, `MODULE:CLASS` and zoo names (`timm:NAME`) import and run code on the
  server's machine. Only with `allow_code` (`--allow-code`, refused with a non-loopback `--host`),
  only by POST (a GET, the kind a link or an image makes, is refused 403), and `FILE.py:CLASS` /
  `MODULE:CLASS` only when they name an `nn.Module` subclass defined in that file or module
  (`narbench.search_engine.target_check`, checked after the import and before anything is called).
  The model becomes a graph in a forked child process in a process group of its own
  (`_resolve_apart`); at `timeout` seconds the whole group is killed: a forward that never returns
  costs one search its answer (a 400 saying so), not the server.
* `path`: anything else names a file on the server. Only with `allow_paths` (`--allow-paths`), only by
  POST; a regular file of at most `MAX_UPLOAD` bytes; every failure is the same line, which never
  says whether the file exists nor quotes its bytes.

Errors never show the server's temp folders.
"""

from __future__ import annotations

import os
import re
import stat
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


def kind_of(target: str, index) -> str:
    """The target's kind, `index`, `code` or `path` (module docstring), from its text and the index's names."""
    from narbench.search_engine.target import ZOOS, _parse_colon
    from narbench.search_engine.target_check import code_target

    if index.row_of(target) is not None:
        return "index"
    colon = _parse_colon(target)
    if (colon and colon[0] in ZOOS) or code_target(target) is not None or target.endswith(".py"):
        return "code"
    return "path"


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

    def allowed(self, target: str, posted: bool) -> str:
        """The target's kind (`kind_of`) when this server may search it by this method, else SearchRefused(403)."""
        kind = kind_of(target, self.index())
        if kind == "index":
            return kind
        if not (self.allow_code if kind == "code" else self.allow_paths):
            raise SearchRefused((_not_index(target, self.index()) if kind == "path" else "") + _REFUSED[kind], 403)
        if not posted:
            raise SearchRefused(_BY_POST.format(what="a model given as code" if kind == "code" else "a server path"),
                                403)
        return kind

    def search(self, target: str, k: int = 10, posted: bool = False) -> dict[str, Any]:
        """The hits of `target` (`narbench.search_engine.engine.search`, as JSON) and the query's id;
        `posted`: the request was a POST (code and paths are never searched from a GET)."""
        from narbench.search_engine.engine import search
        from narbench.search_engine.target import Query

        target = target.strip()
        if not target:
            raise SearchRefused("give a target: a graph name of the index, FILE.py:CLASS, MODULE:CLASS or a zoo name")
        kind = self.allowed(target, posted)
        index = self.index()
        with self._lock:
            if kind == "code":
                query = _resolve_apart(target, index, self.timeout, self.max_memory)
            elif kind == "path":
                query = _read_path(target, index)
            else:  # built here, not by resolve_target: an index name never touches the file system
                row = index.row_of(target)
                query = Query(target, "index", row=row, ops=index.op_counts(row), coarse=index.record(row)["coarse"])
            result = search(query, k, index=index, progress=False)
        return self._keep(query, result)

    def search_upload(self, data: bytes, filename: str = "upload.narg", k: int = 10) -> dict[str, Any]:
        """The hits of a graph file sent by a client: read as data (`narbench.data.store`), never run."""
        from narbench.data.store import CorruptFileError
        from narbench.search_engine.engine import search
        from narbench.search_engine.target import TargetError, resolve_target

        if len(data) > MAX_UPLOAD:
            raise SearchRefused(f"the graph file is {len(data) >> 20} MiB; the limit is {MAX_UPLOAD >> 20} MiB", 413)
        if not data:
            raise SearchRefused("the uploaded graph file is empty")
        index = self.index()
        with tempfile.TemporaryDirectory(prefix="narbench-upload-") as tmp:
            path = os.path.join(tmp, "graph" + (os.path.splitext(filename)[1] or ".narg"))
            with open(path, "wb") as fh:
                fh.write(data)
            try:
                with self._lock:
                    query = resolve_target(path, index)
                    result = search(query, k, index=index, progress=False)
            except (TargetError, CorruptFileError) as exc:  # said with the client's file name, not the temp path
                raise SearchRefused(_without_temp(str(exc).replace(path, filename), filename)) from None
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


def _not_index(target: str, index) -> str:
    """'X is not a graph name of the index (close names: ...); ' for a target that may be a misspelt name."""
    import difflib

    near = difflib.get_close_matches(target, index.names, n=3, cutoff=0.8) if "/" in target else []
    return f"{target!r} is not a graph name of the index" + (f" (close names: {', '.join(near)})" if near else "") + "; "


def _without_temp(message: str, name: str = "the file") -> str:
    """`message`'s first line with any path under the temp folder replaced by `name`."""
    first = message.splitlines()[0] if message else "error"
    return re.sub(re.escape(tempfile.gettempdir()) + r"/[^\s:'\"]*", name, first)


def _read_path(target: str, index):
    """A graph file on the server (`FILE` or `FILE:NAME`), read only when it is a regular file of at most
    `MAX_UPLOAD` bytes. Every failure is one and the same line: it says nothing of the file."""
    from narbench.data.store import CorruptFileError
    from narbench.search_engine.target import TargetError, _parse_colon, resolve_target

    colon = _parse_colon(target)
    candidates = [target] + ([colon[0]] if colon else [])
    refused = SearchRefused(f"{target!r} is not a narbench graph file this server can read (a regular file of at "
                            f"most {MAX_UPLOAD >> 20} MiB written by narbench.data.store.write_graphs, or an index "
                            "graph name)")
    for path in candidates:
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            continue
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_UPLOAD:
            raise refused
        break
    else:
        raise refused
    try:
        return resolve_target(target, index)
    except (TargetError, CorruptFileError, OSError, ValueError):
        raise refused from None


def _resolve_apart(target: str, index, timeout: float, max_memory: int):
    """`resolve_target` for a model given as code, in a forked child under `narbench search`'s limits
    (`narbench.search_engine._target_child.resolve_apart`: its own process group, killed with every
    process it started after `timeout` s or once the answer is in; `max_memory` bytes beyond the fork).
    The child checks the target (`check_code_target`) before anything is built; a zoo name is built from
    its zoo's table instead."""
    from narbench.search_engine._target_child import resolve_apart
    from narbench.search_engine.target import TargetError
    from narbench.search_engine.target_check import check_code_target, code_target

    check = check_code_target if code_target(target) is not None else None
    try:
        return resolve_apart(target, index, timeout=timeout, max_memory=max_memory, check=check)
    except TargetError as exc:
        raise TargetError(_without_temp(str(exc))) from None


