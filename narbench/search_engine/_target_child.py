"""A search target's model run in a child process (`narbench.core.child`): a memory cap, a time limit,
a process group of its own.

`narbench search` and `narbench.search` import and run a model given as code (`FILE.py:CLASS`,
`MODULE:CLASS`, a zoo name; `Target.runs_code`) this way, with the user's rights: the parent resolves
it (`narbench.search_engine.target.resolve`, nothing run), the child makes its graph (`query_of`: the
model built, traced, mapped) and sends the `Query` back as JSON; the parent embeds and ranks it.
The child may add `max_memory` bytes to its address space (default `MAX_MEMORY`; RLIMIT_AS, so a
`torch.empty` of that size counts even before it is touched); at the time limit the parent ends the
child's whole process group (SIGTERM, then SIGKILL), so a process the model started does not outlive
it; it ends the group after an answer too.

The parent never runs the model, so a time-out cannot crash it. It did when the parent ran it:
`narbench search FILE.py:InfiniteLoop --timeout 5`, a forward looping `x = x + 1`, printed its line
and then died with SIGSEGV (exit 139, 3 of 3 runs; exit 2 with `ulimit -s unlimited`). The alarm
had stopped the loop after ~40,000 ops; when the exception's traceback, holding `x`, was dropped,
torch freed the autograd graph behind it one node inside the other (each `AddBackward0` has a
Python object, and freeing it frees the next node: gdb shows THPCppFunction_dealloc -> ~Node ->
decref repeating) until the C stack overflowed. A child is killed instead, with its memory.

A saved graph, an index graph name and a model instance without a time limit are resolved in the
caller's process, as before: no process is started for them (nor for anything where the system
has no `os.fork`).
"""

from __future__ import annotations

import functools
import json
import os
import signal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from narbench.search_engine.target import Query, Target

#: bytes a model may add to the child's address space (`--max-memory`, `max_memory=`); 0 or None: no cap.
#: The 64-layer transformer of docs/search.md (2,438 ops, on meta) and GPT2Decoder (on the CPU) of
#: examples/out_of_zoo.py search within 64 MiB; a model run on the CPU needs its weights and
#: activations; the zoo's extraction workers allow 8 GiB (`narbench build-real`).
MAX_MEMORY = 4 << 30

_OOM_TEXT = ("can't allocate memory", "cannot allocate memory", "out of memory", "bad_alloc")


def runs_apart(target: Target, isolate: bool | None, timeout: float | None) -> bool:
    """Whether `narbench.search` makes the graph of resolved `target` in a child: a client's code target
    always; code (`Target.runs_code`) unless `isolate=False`; a model instance when `isolate=True`, or
    with a time limit (`timeout`) unless `isolate=False`."""
    if target.kind == "code":
        return True
    if isolate is False or not hasattr(os, "fork"):  # no fork (Windows): in this process, as before
        return False
    return target.runs_code or (target.kind == "module" and bool(isolate or timeout))


def resolve_apart(target: Target, index, *, timeout: float | None = None, max_memory: int | None = MAX_MEMORY) -> Query:
    """`query_of(target)` in a forked child under the limits (module docstring); a `TargetError` with one
    line when it fails, runs out of time or memory, or its process ends without an answer."""
    from narbench.core.child import run_forked
    from narbench.search_engine._target_run import timeout_line, warm_up
    from narbench.search_engine.target import TargetError

    label = target.label
    warm_up()  # torch and its meta kernels loaded here, before the clock: the child starts warm
    work = functools.partial(_query_in_child, target, index)  # the child's work: the parent sees only its answer
    outcome = run_forked(work, timeout=timeout, max_memory=max_memory or None)
    where = (outcome.last("stage") or b"").decode(errors="replace")
    if outcome.timed_out:
        raise TargetError(timeout_line(label, timeout, where))
    reply = outcome.last("query")
    if reply is not None:
        query = _query_from_json(json.loads(reply))
        query.info["seconds"] = outcome.seconds
        return query
    for kind in ("error", "memory"):
        text = outcome.last(kind)
        if text is not None:
            text = text.decode(errors="replace")
            raise TargetError(memory_line(label, max_memory, text) if kind == "memory" and max_memory else text)
    crash = outcome.last("exception")
    if crash is not None:  # a bug in narbench, not in the model: its traceback
        raise RuntimeError(f"resolving {label} in a child process failed:\n{crash.decode(errors='replace')}")
    raise TargetError(_no_answer(label, outcome, where, max_memory))


def memory_line(label: str, cap: int, detail: str) -> str:
    """The one line of a model stopped by the memory cap: the cap, what failed, the flag that allows more."""
    from narbench.core.child import format_size

    more = 2 * cap
    flag = f"{more >> 30}G" if more % (1 << 30) == 0 else f"{-(-more >> 20)}M"
    return (f"{label} needs more memory than the cap of {format_size(cap)} ({detail}); allow it more with "
            f"--max-memory SIZE, e.g. --max-memory {flag} (Python: max_memory=), or --max-memory 0 for no cap")


def _no_answer(label: str, outcome, where: str, max_memory: int | None) -> str:
    from narbench.core.child import format_size

    status = outcome.status
    how = (f"was killed by {signal.Signals(-status).name}" if status is not None and status < 0
           else f"exited with status {status}")
    if outcome.overflow:
        how = "sent more than 256 MiB back"
    cap = (f", or it reached the memory cap of {format_size(max_memory)} (--max-memory SIZE allows more)"
           if max_memory else "")
    return (f"{label}: the process that ran it {how} without an answer{f' (in {where})' if where else ''}; "
            f"a crash in native code or an os._exit() in the model{cap}")


def _query_in_child(target: Target, index, send) -> None:
    """In the child: the `Query` of `target` as JSON (`query`), or one line (`error`, or `memory` when an
    allocation failed); the stage it is in as it goes (`stage`)."""
    import torch

    from narbench.search_engine._target_failure import one_line
    from narbench.search_engine._target_run import _STAGE, on_stage
    from narbench.search_engine.target import TargetError, query_of

    # One intra-op thread, as torch's DataLoader workers do: the fork copied none of the parent's
    # OpenMP threads, and a parallel region here would wait for them forever (a CPU pass of a model,
    # after the parent had embedded a query with several threads, hung in its constructor's fill).
    torch.set_num_threads(1)
    on_stage(lambda text: send("stage", text.encode()))
    try:
        query = query_of(target, index)
    except (TargetError, MemoryError) as exc:
        oom = _out_of_memory(exc)
        if oom is not None:
            detail = f"{'in ' + _STAGE[0] + ': ' if _STAGE[0] else ''}{one_line(oom)}"
            send("memory", detail.encode(errors="replace"))
        else:
            send("error", " ".join(str(exc).split()).encode(errors="replace"))
        return
    send("query", json.dumps(_query_to_json(query), default=_plain).encode())


def _out_of_memory(exc: BaseException | None) -> BaseException | None:
    """The allocation failure in `exc`'s chain of causes (a MemoryError, torch's "can't allocate memory"), if any."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError)
                                            and any(t in str(exc).lower() for t in _OOM_TEXT)):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _plain(value: Any) -> Any:
    """JSON for what `json` does not know in a query's info (numpy numbers and arrays, paths): numbers or text."""
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else str(value)


def _query_to_json(query) -> dict[str, Any]:
    g = query.graph
    graph = None if g is None else {"ops": g.ops.tolist(), "edges": g.edges.tolist(), "name": g.name,
                                    "family": g.family, "coarse": g.coarse, "source": g.source, "meta": g.meta}
    return {"label": query.label, "kind": query.kind, "graph": graph, "row": query.row, "ops": query.ops,
            "unknown_ops": query.unknown_ops, "coarse": query.coarse, "info": query.info}


def _query_from_json(data: dict[str, Any]) -> Query:
    import numpy as np

    from narbench.data.graph import ArchGraph
    from narbench.search_engine.target import Query

    g = data["graph"]
    graph = None if g is None else ArchGraph(ops=np.asarray(g["ops"], dtype=np.int64),
                                             edges=np.asarray(g["edges"], dtype=np.int64).reshape(2, -1),
                                             name=g["name"], family=g["family"], coarse=g["coarse"],
                                             source=g["source"], meta=g["meta"])
    return Query(label=data["label"], kind=data["kind"], graph=graph, row=data["row"], ops=data["ops"],
                 unknown_ops=data["unknown_ops"], coarse=data["coarse"], info=data["info"])
