"""Build the `real` dataset from the model zoos: extract, dedup, assemble one graph file.

`build_real(out_dir, jobs=N)`:

* enumerates the candidate specs (`narbench.zoo.sources.all_specs`), optionally filtered
  (`only`) and sampled (`limit`, spread evenly over the zoos);
* extracts each spec in a worker subprocess (N workers) with a per-model wall-clock limit
  (the worker is killed and replaced on timeout) and an address-space limit (`setrlimit`);
* writes each spec's result (graph, or failure reason) to its own small file under
  `out_dir/results/`, so an interrupted build resumes where it stopped;
* dedups by exact graph hash (`ArchGraph.content_hash`), keeping the first spec in the fixed
  spec order, and writes `out_dir/real-1.0.narg` with `narbench.store.write_graphs`
  (vocabulary = sorted op names seen);
* prints and returns a summary (extracted, failed by reason, duplicates, per family/coarse).
"""

from __future__ import annotations

import fnmatch
import gc
import json
import os
import subprocess
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from narbench.store import atomic_write_bytes
from narbench.zoo.sources import SOURCES, Spec

DATASET_NAME = "real"
DATASET_VERSION = "1.0"
RESULT_SUFFIX = ".json.zst"

OK, NOT_APPLICABLE, FAILED = "ok", "not-applicable", "failed"


# ============================================================================ selection


def select_specs(specs: Sequence[Spec], limit: int | None = None, only: str | Iterable[str] | None = None) -> list[Spec]:
    """Filter by `only` (glob patterns or substrings of spec keys) and sample `limit` specs,
    spread evenly over the sources and, within a source, evenly over the spec order."""
    out = list(specs)
    if only:
        pats = [only] if isinstance(only, str) else list(only)
        out = [s for s in out if any(fnmatch.fnmatchcase(s.key, p) if any(c in p for c in "*?[") else p in s.key
                                     for p in pats)]
    if limit is not None and limit < len(out):
        by_src: dict[str, list[Spec]] = defaultdict(list)
        for s in out:
            by_src[s.source].append(s)
        srcs = list(by_src)
        quota = {src: 0 for src in srcs}
        left = limit
        while left > 0:  # round robin, respecting each source's size
            progressed = False
            for src in srcs:
                if left and quota[src] < len(by_src[src]):
                    quota[src] += 1
                    left -= 1
                    progressed = True
            if not progressed:
                break
        chosen = set()
        for src in srcs:
            items, q = by_src[src], quota[src]
            for i in range(q):
                chosen.add(id(items[(i * len(items)) // q]))
        out = [s for s in out if id(s) in chosen]
    return out


# ============================================================================ result files


def result_path(out_dir: Path, spec: Spec) -> Path:
    return out_dir / "results" / f"{spec.slug}{RESULT_SUFFIX}"


def write_result(out_dir: Path, spec: Spec, result: dict[str, Any]) -> None:
    import zstandard

    payload = json.dumps({"key": spec.key, "spec": spec.to_json(), **result}, sort_keys=True).encode()
    atomic_write_bytes(result_path(out_dir, spec), zstandard.ZstdCompressor(level=3).compress(payload))


def read_result(out_dir: Path, spec: Spec) -> dict[str, Any] | None:
    import zstandard

    path = result_path(out_dir, spec)
    if not path.is_file():
        return None
    try:
        return json.loads(zstandard.ZstdDecompressor().decompress(path.read_bytes()))
    except Exception:  # noqa: BLE001 - a damaged result is redone
        return None


# ============================================================================ worker process


def _classify(exc: BaseException) -> str:
    msg = str(exc).lower()
    if isinstance(exc, MemoryError) or any(s in msg for s in ("can't allocate memory", "out of memory",
                                                               "bad_alloc", "cannot allocate memory")):
        return "oom"
    return "exception"


def _set_memory_limit(limit_bytes: int | None) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if not limit_bytes:
        return
    vm = 0
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                vm = int(line.split()[1]) * 1024
    except OSError:
        pass
    soft = vm + limit_bytes
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _spawn_worker(log_path: str, mem_limit_bytes: int | None, preload: list[str]):
    """Start `python -m narbench.zoo.build --worker` connected through a socket pair.

    A plain subprocess (not multiprocessing) so that the caller's `__main__` is never re-imported.
    """
    import socket
    import sys
    from multiprocessing.connection import Connection

    parent_sock, child_sock = socket.socketpair()
    env = dict(os.environ)
    env["NARBENCH_WORKER_SYS_PATH"] = json.dumps([p for p in sys.path if p])  # appended, never shadowing
    args = [sys.executable, "-m", "narbench.zoo.build", "--worker", str(child_sock.fileno()), log_path,
            str(mem_limit_bytes or 0), ",".join(preload)]
    log = open(log_path, "ab")
    try:
        proc = subprocess.Popen(args, pass_fds=(child_sock.fileno(),), env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, close_fds=True)
    finally:
        log.close()
        child_sock.close()
    return proc, Connection(parent_sock.detach())


def _worker_main(conn, log_path: str, mem_limit_bytes: int | None, preload: list[str]) -> None:
    """Extract specs sent over `conn` one at a time; reply with a result dict for each."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    import warnings

    warnings.filterwarnings("ignore")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import importlib

    import torch

    torch.set_num_threads(1)
    for mod in preload:
        try:
            importlib.import_module(mod)
        except Exception as exc:  # noqa: BLE001 - reported per spec later
            print(f"preload {mod} failed: {exc!r}", flush=True)
    from narbench.zoo.sources import NotApplicable, extract_spec

    _set_memory_limit(mem_limit_bytes)
    conn.send({"ready": True})
    done = 0
    while True:
        msg = conn.recv()
        if msg is None:
            break
        spec = Spec.from_json(msg)
        print(f"--- {spec.key}", flush=True)
        t0 = time.perf_counter()
        try:
            graph, info = extract_spec(spec)
            res = {"status": OK, "graph": graph.to_json(), "info": info}
        except NotApplicable as exc:
            res = {"status": NOT_APPLICABLE, "reason": NOT_APPLICABLE, "error": str(exc)[:300]}
        except BaseException as exc:  # noqa: BLE001 - every failure is a result
            errors = getattr(exc, "errors", None)  # AllDevicesFailed: one error per device tried
            if errors:
                reason = "oom" if any(_classify(e) == "oom" for _, e in errors) else "exception"
                res = {"status": FAILED, "reason": reason, "error": f"{type(errors[0][1]).__name__}: {str(exc)[:900]}"}
            else:
                res = {"status": FAILED, "reason": _classify(exc), "error": f"{type(exc).__name__}: {str(exc)[:500]}"}
        res["seconds"] = round(time.perf_counter() - t0, 4)
        done += 1
        if done % 50 == 0:  # a full collection costs ~0.2 s with the zoos loaded: not after every model
            gc.collect()
        conn.send(res)


@dataclass
class _Worker:
    slot: int
    proc: Any = None
    conn: Any = None
    ready: bool = False
    spec: Spec | None = None
    started: float = 0.0
    tasks: int = 0
    spawned_at: float = 0.0


# ============================================================================ the build


@dataclass
class BuildState:
    counts: Counter = field(default_factory=Counter)
    reasons: Counter = field(default_factory=Counter)
    seconds: list = field(default_factory=list)


def _preload_for(specs: Sequence[Spec]) -> list[str]:
    mods = {"timm": ["timm"], "torchvision": ["torchvision"], "transformers": ["transformers"]}
    seen = {s.source for s in specs}
    return [m for src in SOURCES if src in seen for m in mods[src]]


def build_real(
    out_dir: str | os.PathLike,
    jobs: int = 1,
    limit: int | None = None,
    only: str | Iterable[str] | None = None,
    *,
    timeout: float = 180.0,
    mem_limit_gb: float | None = 8.0,
    retry_failed: bool = False,
    sources: Sequence[str] = SOURCES,
    specs: Sequence[Spec] | None = None,
    assemble: bool = True,
    max_tasks_per_worker: int = 1000,
    quiet: bool = False,
) -> dict[str, Any]:
    """Extract (resumably), dedup and assemble the `real` dataset under `out_dir`.

    `jobs`: worker processes; `limit`: sample this many specs (spread over the zoos); `only`:
    glob patterns / substrings of spec keys ("timm/resnet*", "transformers/bert/"); `timeout`:
    seconds per model; `mem_limit_gb`: address-space limit per worker beyond its imports;
    `retry_failed`: redo specs that failed before (timeouts, crashes) instead of keeping their
    recorded failure. Returns the summary dict (also printed unless `quiet`).
    """
    from rich.console import Console

    console = Console(stderr=True, quiet=quiet)
    out = Path(out_dir)
    (out / "results").mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    if specs is None:
        from narbench.zoo.sources import all_specs

        with console.status("enumerating model specs"):
            specs = all_specs(sources)
    selected = select_specs(specs, limit, only)
    todo = []
    for s in selected:
        prev = read_result(out, s)
        if prev is None or (retry_failed and prev.get("status") == FAILED):
            todo.append(s)
    console.print(f"[bold]{len(selected)}[/] specs selected, {len(selected) - len(todo)} already done, "
                  f"{len(todo)} to extract with {jobs} worker(s)")
    if todo:
        _run_workers(out, todo, selected, jobs, timeout, mem_limit_gb, max_tasks_per_worker, console)
    summary = summarize(out, selected, assemble=assemble)
    summary["build_seconds"] = round(time.perf_counter() - t_start, 1)
    if not quiet:
        print_summary(summary, console)
    atomic_write_bytes(out / "summary.json", json.dumps(summary, indent=1, sort_keys=True).encode())
    return summary


def _run_workers(out: Path, todo: list[Spec], all_selected: Sequence[Spec], jobs: int, timeout: float,
                 mem_limit_gb: float | None, max_tasks: int, console) -> None:
    from multiprocessing.connection import wait

    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    preload = _preload_for(todo)
    mem = int(mem_limit_gb * 2**30) if mem_limit_gb else None
    startup_timeout = max(300.0, timeout)
    queue = list(reversed(todo))
    # The default (no-variant) spec of each model/head: when it fails with an exception (bad
    # dummy inputs, missing dependency), its variants are recorded as failed without running them.
    defaults: dict[tuple[str, ...], Spec] = {}
    for s in all_selected:
        if not s.variant:
            defaults.setdefault((s.source, s.model, s.task), s)
            defaults.setdefault((s.source, s.model), s)

    def default_failure(spec: Spec) -> dict[str, Any] | None:
        if not spec.variant:
            return None
        base = defaults.get((spec.source, spec.model, spec.task)) or defaults.get((spec.source, spec.model))
        res = read_result(out, base) if base is not None else None
        if res is None or res.get("status") != FAILED or res.get("reason") != "exception":
            return None
        return {"status": FAILED, "reason": "default-failed", "seconds": 0.0,
                "error": f"not run: {base.key} failed ({res.get('error', '')[:200]})"}
    workers = [_Worker(slot=i) for i in range(max(1, min(jobs, len(todo))))]
    counts: Counter = Counter()

    def spawn(w: _Worker) -> None:
        w.proc, w.conn = _spawn_worker(str(out / "logs" / f"worker-{w.slot}.log"), mem, preload)
        w.ready, w.spec, w.tasks, w.spawned_at = False, None, 0, time.monotonic()

    def stop(w: _Worker, kill: bool = False) -> None:
        if w.proc is None:
            return
        if not kill:
            try:
                w.conn.send(None)
                w.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait()
        w.conn.close()
        w.proc = None

    def record(spec: Spec, res: dict[str, Any]) -> None:
        write_result(out, spec, res)
        counts[res["status"] if res["status"] != FAILED else res["reason"]] += 1

    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[stats]}"))
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("extracting", total=len(todo), stats="")
        for w in workers:
            spawn(w)
        try:
            while queue or any(w.spec is not None for w in workers):
                now = time.monotonic()
                for w in workers:  # dispatch
                    if w.proc is None and queue:
                        spawn(w)
                    while w.ready and w.spec is None and queue:
                        spec = queue.pop()
                        skipped = default_failure(spec)
                        if skipped is not None:
                            record(spec, skipped)
                            progress.advance(task)
                            continue
                        w.spec = spec
                        w.started = time.monotonic()
                        w.conn.send(w.spec.to_json())
                        break
                conns = {w.conn: w for w in workers if w.proc is not None}
                for conn in wait(list(conns), timeout=0.25):
                    w = conns[conn]
                    try:
                        msg = conn.recv()
                    except (EOFError, OSError):
                        msg = None
                    if msg is None:  # the worker died
                        try:
                            code = w.proc.wait(timeout=5)
                        except subprocess.TimeoutExpired:
                            code = None
                        if w.spec is not None:
                            reason = "oom" if code == -9 else "crash"
                            record(w.spec, {"status": FAILED, "reason": reason, "seconds": round(now - w.started, 2),
                                            "error": f"worker exited with code {code}"})
                            progress.advance(task)
                        elif not w.ready:
                            raise RuntimeError(f"extraction worker failed to start (exit code {code}); "
                                               f"see {out / 'logs'}")
                        stop(w, kill=True)
                        continue
                    if msg.get("ready"):
                        w.ready = True
                        continue
                    spec, w.spec = w.spec, None
                    w.tasks += 1
                    record(spec, msg)
                    progress.advance(task)
                    if w.tasks >= max_tasks:
                        stop(w)
                now = time.monotonic()
                for w in workers:  # time limits
                    if w.proc is None:
                        continue
                    if w.spec is not None and now - w.started > timeout:
                        stop(w, kill=True)
                        record(w.spec, {"status": FAILED, "reason": "timeout", "seconds": round(now - w.started, 2),
                                        "error": f"no result within {timeout:g} s"})
                        w.spec = None
                        progress.advance(task)
                    elif not w.ready and now - w.spawned_at > startup_timeout:
                        stop(w, kill=True)
                        raise RuntimeError(f"extraction worker did not start within {startup_timeout:g} s")
                progress.update(task, stats=" ".join(f"{k}={v}" for k, v in sorted(counts.items())))
        finally:
            for w in workers:
                stop(w, kill=w.spec is not None)


# ============================================================================ assembly and summary


#: Graphs above this many nodes are left out of the dataset (recurrent models unrolled over the
#: dummy sequence at 48 layers reach 10^5 nodes; no graph encoder of the benchmark handles them).
MAX_NODES = 50_000


def summarize(out: Path, selected: Sequence[Spec], *, assemble: bool = True,
              max_nodes: int = MAX_NODES) -> dict[str, Any]:
    """Read the selected specs' results; dedup; write the dataset file; return the summary."""
    from narbench.zoo.extract import RawGraph

    status: Counter = Counter()
    failed: Counter = Counter()
    failed_detail: Counter = Counter()
    failed_kind: Counter = Counter()
    seconds: dict[str, list[float]] = defaultdict(list)
    devices: Counter = Counter()
    raws: list[tuple[Spec, RawGraph, dict[str, Any]]] = []
    failures = []
    for s in selected:
        res = read_result(out, s)
        if res is None:
            status["missing"] += 1
            continue
        status[res["status"]] += 1
        if res["status"] == OK and len(res["graph"]["ops"]) > max_nodes:
            status["too-large"] += 1
            continue
        if res["status"] == OK:
            raws.append((s, RawGraph.from_json(res["graph"]), res.get("info", {})))
            seconds[s.source].append(res.get("seconds", 0.0))
            devices[f"{s.source}:{res.get('info', {}).get('device', '?')}"] += 1
        elif res["status"] == FAILED:
            failed[res["reason"]] += 1
            failed_kind["variant" if s.variant else "default"] += 1
            err = res.get("error", "")
            failed_detail[f"{res['reason']}: {err.split(':')[0] if res['reason'] == 'exception' else ''}".rstrip(": ")] += 1
            failures.append((s.key, res["reason"], err.replace("\n", " ").replace("\t", " ")))
    atomic_write_bytes(out / "failures.tsv", "".join(f"{k}\t{r}\t{e}\n" for k, r, e in failures).encode())

    vocab = sorted({op for _, g, _ in raws for op in g.ops})
    index = {op: i for i, op in enumerate(vocab)}
    graphs, first_by_hash = [], {}
    cross_family: Counter = Counter()
    dup_count = 0
    for s, raw, info in raws:
        meta = {"model": s.model, "task": s.task, "variant": {k: v for k, v in s.variant},
                "device": info.get("device"), "params": info.get("params"), "shrunk": bool(info.get("shrunk", False))}
        # the coarse rule walks the graph: compute it only for graphs that are kept
        g = raw.to_arch_graph(index, name=s.key, family=s.family, coarse="", source=s.source, meta=meta)
        h = g.content_hash()
        if h in first_by_hash:
            keep = first_by_hash[h]
            keep.meta["duplicates"] = keep.meta.get("duplicates", 0) + 1
            dup_count += 1
            if keep.family != g.family:
                cross_family[f"{keep.family}|{g.family}"] += 1
            continue
        g.coarse = raw.coarse()
        first_by_hash[h] = g
        graphs.append(g)

    def pct(vals: list[float], q: float) -> float:
        vals = sorted(vals)
        return round(vals[min(len(vals) - 1, int(q * len(vals)))], 3) if vals else 0.0

    sizes = sorted(g.num_nodes for g in graphs)
    summary: dict[str, Any] = {
        "selected": len(selected),
        "status": dict(status),
        "extracted": status[OK],
        "not_applicable": status[NOT_APPLICABLE],
        "too_large": status["too-large"],
        "failed": dict(failed),
        "failed_detail": dict(failed_detail.most_common()),
        "failed_default_vs_variant": dict(failed_kind),
        "distinct": len(graphs),
        "duplicates": dup_count,
        "cross_family_duplicates": dict(cross_family.most_common()),
        "num_ops": len(vocab),
        "families": dict(Counter(g.family for g in graphs).most_common()),
        "num_families": len({g.family for g in graphs}),
        "coarse": dict(Counter(g.coarse for g in graphs).most_common()),
        "per_source": dict(Counter(g.source for g in graphs)),
        "devices": dict(devices),
        "seconds": {src: {"n": len(v), "total": round(sum(v), 1), "median": pct(v, 0.5), "p90": pct(v, 0.9),
                          "max": pct(v, 1.0)} for src, v in seconds.items()},
        "nodes": {"median": sizes[len(sizes) // 2] if sizes else 0, "p90": sizes[int(0.9 * len(sizes))] if sizes else 0,
                  "max": sizes[-1] if sizes else 0},
    }
    if assemble and graphs:
        from narbench.store import write_graphs

        header = {"name": DATASET_NAME, "version": DATASET_VERSION, "generator": "narbench.zoo.build",
                  "versions": _zoo_versions(), "num_specs": len(selected), "num_extracted": status[OK]}
        path = out / f"{DATASET_NAME}-{DATASET_VERSION}.narg"
        summary["sha256"] = write_graphs(path, graphs, vocab, header)
        summary["path"] = str(path)
    return summary


def _zoo_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("torch", "timm", "torchvision", "transformers"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def print_summary(summary: dict[str, Any], console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    t = Table(title="real dataset build", show_header=False)
    t.add_row("specs selected", str(summary["selected"]))
    t.add_row("extracted", str(summary["extracted"]))
    t.add_row("not applicable", str(summary["not_applicable"]))
    if summary.get("too_large"):
        t.add_row(f"too large (> {MAX_NODES} nodes)", str(summary["too_large"]))
    t.add_row("failed", ", ".join(f"{k}={v}" for k, v in summary["failed"].items()) or "0")
    if summary.get("failed_default_vs_variant"):
        t.add_row("failed specs", ", ".join(f"{k}={v}" for k, v in summary["failed_default_vs_variant"].items()))
    t.add_row("duplicates removed", str(summary["duplicates"]))
    t.add_row("distinct graphs", f"[bold]{summary['distinct']}[/]")
    t.add_row("op types", str(summary["num_ops"]))
    t.add_row("families", str(summary["num_families"]))
    t.add_row("coarse", ", ".join(f"{k}={v}" for k, v in summary["coarse"].items()))
    t.add_row("per source", ", ".join(f"{k}={v}" for k, v in summary["per_source"].items()))
    t.add_row("nodes", ", ".join(f"{k}={v}" for k, v in summary["nodes"].items()))
    for src, s in summary["seconds"].items():
        t.add_row(f"seconds {src}", ", ".join(f"{k}={v}" for k, v in s.items()))
    if summary.get("path"):
        t.add_row("written", f"{summary['path']} (sha256 {summary['sha256'][:16]}...)")
    console.print(t)
    if summary["failed_detail"]:
        ft = Table(title="failures by reason")
        ft.add_column("reason")
        ft.add_column("count", justify="right")
        for k, v in list(summary["failed_detail"].items())[:15]:
            ft.add_row(k, str(v))
        console.print(ft)
    fams = list(summary["families"].items())
    if fams:
        console.print("top families: " + ", ".join(f"{k}={v}" for k, v in fams[:20])
                      + (f" ... ({len(fams)} in all)" if len(fams) > 20 else ""))


if __name__ == "__main__":  # the worker entry point (see `_spawn_worker`)
    import sys
    from multiprocessing.connection import Connection

    if len(sys.argv) == 6 and sys.argv[1] == "--worker":
        sys.path += [p for p in json.loads(os.environ.get("NARBENCH_WORKER_SYS_PATH", "[]")) if p not in sys.path]
        _worker_main(Connection(int(sys.argv[2])), sys.argv[3], int(sys.argv[4]) or None,
                     [m for m in sys.argv[5].split(",") if m])
    else:
        sys.exit("usage: python -m narbench.zoo.build --worker FD LOG MEM_BYTES PRELOAD")
