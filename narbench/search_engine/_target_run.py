"""Running a search target's model once and tracing it (`extract`, for `narbench.search_engine._target_model`):
on which device, in which order, under which limits.

Every model runs on the meta device first: it costs no memory, and `narbench.zoo.metacache`
makes its repeated blocks cheap (a 224 x 224 ViT-B in ~12 ms on one core where the CPU needs
~0.6 s; `benchmarks/speed/bench_search.py`). A model narbench builds (a file, an import) is built
there, and prepared for the pass by the tracer (`narbench.zoo.extract.extract_graph`); an instance the
caller passes keeps its weights, mode and flags and runs on meta with empty meta copies swapped in for
the pass (`_untouched`, `_meta_weights`). If meta fails (a forward that reads
a value, `.item()`), the model runs on the CPU (an instance: on its own device). On each device, when no input is
given, the `real` build's guess runs first and further guesses after it until one runs (`_target_guesses.to_try`); a
Keras 3 model built from code (or an instance whose configuration makes one, `keras_afresh`), which makes its weights
at its first call, is built afresh for each input tried (`built_at_first_call`). The graph is
autograd's record of the pass, so a forward that fails only with gradients on (`narbench.zoo.extract.
GradientsNeededError`) is tried on the further guesses too (a diffusion step given as ids that one op refuses with
gradients on, session 84), and refused in one line saying so when none runs.

User code may also hang or quit. `narbench search` and `narbench.search` run a model given as
code in a child process whose time limit the parent keeps (`narbench.search_engine._target_child`);
in the caller's own process `time_limit` stops a target that runs longer than its limit (SIGALRM
in the main thread), and a `sys.exit()` in it is a `TargetError` naming the stage. `stage` records
what the target is doing now, for the time-out line (a child sends it to its parent,
`on_stage`). torch's first meta pass imports `torch._dynamo`, which creates an empty
`torchinductor_<user>` folder in the system temp dir; `_no_temp_litter` keeps it out of there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import warnings
from typing import Any, Callable

from narbench.search_engine._target_failure import last_failure, needs_gradients, one_line
from narbench.search_engine._target_guesses import is_keras, keras_afresh, to_try
from narbench.search_engine._target_inputs import TargetError, eval_mode

_STAGE = [""]  # what the target is doing now, for the time-out line
_ON_STAGE: list[Callable[[str], None]] = []  # called with each new stage (a child process sends it to its parent)


class _Timeout(BaseException):
    """The alarm of `time_limit` (a BaseException: a forward's `except Exception:` does not swallow it)."""


def exited(what: str, exc: SystemExit) -> TargetError:
    """The error of user code that called `sys.exit()` (it would otherwise end search silently)."""
    code = "" if exc.code is None else repr(exc.code)
    return TargetError(f"{what} called sys.exit({code}); a model must raise an exception instead of exiting")


@contextlib.contextmanager
def _no_exit(what: str):
    """A `sys.exit()` of user code in the block is a `TargetError` naming `what` was doing it: it would
    otherwise end search with the model's status and no word."""
    try:
        yield
    except SystemExit as exc:
        raise exited(what, exc) from None


def stage(text: str) -> None:
    """Record what the target is doing now (named by the time-out line)."""
    _STAGE[0] = text
    for hook in _ON_STAGE:
        hook(text)


def on_stage(hook: Callable[[str], None]) -> None:
    """Call `hook(text)` at every `stage` from now on (in a child process: the one hook that sends it home)."""
    _ON_STAGE[:] = [hook]


def timeout_line(label: str, seconds: float, where: str | None = None) -> str:
    """The one line of a target stopped at its time limit; `where`: the stage it was in (default: this process's)."""
    where = _STAGE[0] if where is None else where
    return (f"{label} did not finish within {seconds:g} s{f' (stopped in {where})' if where else ''}; fix it if it "
            "never returns, or allow it more time with --timeout SECONDS (Python: timeout=)")


@contextlib.contextmanager
def time_limit(seconds: float | None, label: str):
    """Run the block for at most `seconds` (None or 0: no limit); past it, `TargetError` naming
    `label`, the limit and the stage it was stopped in.

    An alarm (SIGALRM) interrupts Python code and blocking calls; it needs the main thread of a
    POSIX process (elsewhere the limit is not enforced, with a warning). Code stuck in native code is
    not stopped, and torch's autograd graph of a forward interrupted after many ops may be deep
    enough to overflow the C stack when it is freed: a child process is the safe way
    (`narbench.search_engine._target_child`)."""
    if not seconds:
        yield
        return
    stage("")
    alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not alarm:
        warnings.warn(f"search: the time limit of {seconds:g} s is not enforced here (it needs the main "
                      "thread of a POSIX process)", RuntimeWarning, stacklevel=4)
    try:
        with _alarm(seconds) if alarm else contextlib.nullcontext():
            yield
    except _Timeout:
        raise TargetError(timeout_line(label, seconds)) from None
    finally:
        stage("")


@contextlib.contextmanager
def _alarm(seconds: float):
    """SIGALRM after `seconds` raises `_Timeout` in the main thread. An outer interval timer (e.g.
    pytest-timeout's) that fires first is left alone; a later one is re-armed with what it had left."""
    start = time.monotonic()
    outer, interval = signal.getitimer(signal.ITIMER_REAL)
    if outer and outer <= seconds:
        yield
        return
    armed = [True]

    def ring(signum, frame):
        if armed[0]:
            armed[0] = False
            raise _Timeout

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        armed[0] = False  # an alarm already on its way is ignored
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 1e-3), interval)


def warm_up() -> None:
    """Import what every meta pass needs before a target's clock starts: torch, and `torch._dynamo`
    with sympy, which torch's Python meta kernels import on first use (~2-3 s once per process on
    a 2-core CPU; even a `Linear` goes through them); and wrap those kernels (`narbench.zoo.metacache`)."""
    if "torch._dynamo" not in sys.modules:
        import importlib

        with _no_temp_litter():
            importlib.import_module("torch._dynamo")
    from narbench.zoo.metacache import install

    install()  # once per process, ~20 ms: a forked child finds torch's meta kernels wrapped already


@contextlib.contextmanager
def _no_temp_litter():
    """Keep the folder `torch._dynamo` makes on import (`torchinductor_<user>` in the system temp dir,
    left there empty) inside the narbench cache, and remove it again if it stays empty.

    Only while the dynamo import can still happen and `TORCHINDUCTOR_CACHE_DIR` is unset; the
    variable (which torch sets on import) is unset again afterwards, so the caller's own
    `torch.compile` uses torch's default folder as before."""
    if "torch._dynamo" in sys.modules or os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        yield
        return
    from narbench.core.cache import cache_dir

    folder = cache_dir() / "torchinductor"
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # a cache that cannot be written: torch's default, as before
        yield
        return
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    try:
        yield
    finally:
        if os.path.abspath(os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")) == os.path.abspath(folder):
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        with contextlib.suppress(OSError):
            folder.rmdir()  # only if empty


def _construct(label: str, build: Callable[[], Any], dev: str):
    """The model `build()` returns, built on `dev` (prepared for the pass by the tracer, after its input is made)."""
    import torch

    with torch.device(dev):
        model = build()
    if not isinstance(model, torch.nn.Module):
        raise TargetError(f"{label} returned a {type(model).__name__}, not a torch.nn.Module; "
                          "point at a class or function that returns one")
    return model


def built_at_first_call(model) -> bool:
    """Whether `model` makes its weights at its first call: a Keras 3 model (on torch) not yet built. That call builds
    every layer it reaches for its input, even a call that then fails, and a later call of another shape fails against
    those weights (the probes of `_target_guesses` make the first call); so `_on_device` tries each input on a model
    constructed afresh, built for it by one call (`_built`), and reads its second call, as it runs in use. Seen on
    `wildval` 9, 10 and 14; read at its first call, keras-bio's HyenaDNA (`wildval10`) loses 16 of its 195 nodes."""
    return getattr(model, "built", None) is False and is_keras(model)


def _built(model, args, kwargs) -> None:
    """`model` called once on the input, in eval mode and without gradients, as the probes call it."""
    import torch

    with eval_mode(list(model.modules())), torch.no_grad():
        model(*args, **kwargs)


def _own_device(model) -> str:
    """The device of a module's weights (its first parameter; torch's default device without any)."""
    import torch

    return str(next(model.parameters(), torch.empty(0)).device)


def _devices(instance) -> list[str]:
    """The devices tried, in order (module docstring)."""
    if instance is None:
        return ["meta", "cpu"]
    own = _own_device(instance)
    return ["meta"] if own == "meta" else ["meta", own]


def extract(label: str, build: Callable[[], Any] | None, instance=None, shape=None,
            inputs: tuple[tuple, dict] | None = None) -> tuple[Any, dict[str, Any]]:
    """The raw graph of `instance` (or of the model `build()` returns) and {device, input}.

    `inputs`: the (args, kwargs) to call the model with (moved to each device tried), instead of
    the example input `example_inputs` makes (of `shape`, if given)."""
    with _no_temp_litter():
        return _extract(label, build, instance, shape, inputs)


def _extract(label, build, instance, shape, inputs):
    """Two rounds over the devices: the first input (the caller's, or the `real` build's guess) on each device, then,
    only when it ran nowhere and no input was given, the further guesses on each. So a model the first guess runs on
    anywhere (on the CPU after meta fails) gets that graph, never a later guess's."""
    errors: list[tuple[str, str, BaseException, str | None, int]] = []
    fallback = None
    afresh = keras_afresh(instance) if instance is not None and inputs is None and shape is None else None
    if afresh is not None:  # a Keras instance not yet built: each guess on a new one of its configuration
        build, instance = afresh, None
    devices = _devices(instance)
    unbuilt = instance is not None and built_at_first_call(instance)  # before a probe's call builds it
    for round_ in (0, 1):
        if round_ and (inputs is not None or shape is not None):
            break  # a first input that fails only with gradients on: another guess may not (a step given as ids)
        for dev in devices:
            got = _on_device(label, build, instance, dev, errors, round_, shape, inputs)
            if got is None:
                continue
            raw, described = got
            if dev == "meta" and raw.meta.get("unread_masks") and dev != devices[-1]:
                # design attributes asked for (a 2.2 index) and a square buffer, perhaps a causal mask, has no
                # values on meta: run where it has them, keeping this graph if that fails
                fallback = (raw, {"device": dev, "input": described})
                continue
            return raw, {"device": dev, "input": described}
        if fallback is not None:
            return fallback
    error = last_failure(label, errors, inputs)
    if unbuilt and inputs is None and shape is None and not needs_gradients(errors):
        raise TargetError(f"{error}; {label} is a Keras 3 model not yet built, which makes its weights at its first "
                          "call for that call's input, so inputs tried after a first one that did not fit fail: call "
                          "it once on its input before searching it, or point search at its class (FILE.py:CLASS), "
                          "which tries each input on a new one") from error.__cause__
    raise error


def _on_device(label, build, instance, dev: str, errors: list, round_: int, shape, inputs):
    """(raw graph, its input's description) of the first input of round `round_` (0: the first of `to_try`'s; 1: the
    others) whose forward runs on `dev`, or None, each failure appended to `errors` as (device, step, exception,
    input, round)."""
    import itertools

    import torch

    step, described = "construct", None
    threads = torch.get_num_threads()
    try:
        if instance is None:
            stage(f"its constructor, on {dev}")
            with _no_exit(f"constructing {label}"):
                model = _construct(label, build, dev)
        else:
            model = instance
        afresh = instance is None and built_at_first_call(model)  # asked before a probe's call builds it
        step = "input"
        stage(f"its forward pass, on {dev}")  # the example input runs the forward up to its first layer
        with _no_exit(f"making the example input of {label}"):
            feeds = itertools.islice(to_try(model, dev, shape, inputs, errors),
                                     *((0, 1) if round_ == 0 else (1, None)))
            feed = next(feeds, None)
        if dev == "cpu":  # one small forward pass: intra-op threads only add overhead
            torch.set_num_threads(1)
        while feed is not None:
            (args, kwargs, described), step = feed, "forward"
            try:
                with _no_exit(f"{label}.forward"):
                    ran = model
                    if afresh:  # a new model, built for this input by one call; its second call is read
                        ran = _construct(label, build, dev)
                        _built(ran, args, kwargs)
                    return _run(label, ran, instance is not None, dev, args, kwargs), described
            except TargetError:
                raise
            except Exception as exc:  # noqa: BLE001 - user code may raise anything (or run only with gradients off,
                # `GradientsNeededError`, which `last_failure` names first if no guess runs); try the next guess
                errors.append((dev, step, exc, described, round_))
                step = "input"
                with _no_exit(f"making the example input of {label}"):
                    feed = next(feeds, None)
        return None
    except TargetError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code may raise anything; try the other device, then report
        errors.append((dev, step, exc, described, round_))
        return None
    finally:
        torch.set_num_threads(threads)


def _run(label: str, model, is_instance: bool, dev: str, args, kwargs):
    """One forward pass traced (`narbench.zoo.extract.extract_graph`): a model built here is prepared for it
    (eval mode, every weight recording); the caller's own is left as it was (`_untouched`)."""
    from narbench.zoo.extract import extract_graph

    with _checked_output(label, model), _untouched(model, is_instance, dev):
        return extract_graph(model, args, kwargs, prepare=not is_instance)


@contextlib.contextmanager
def _untouched(model, is_instance: bool, dev: str):
    """An instance the caller passed, in eval mode for the pass with every weight recording, its own mode,
    flags and weights back after: on meta, empty meta copies of its weights (`_meta_weights`) stand in."""
    if not is_instance:
        yield
        return
    modules = list(model.modules())
    # every weight records first, then (on meta) the tables' copies: a forward that reads its weights through
    # references of its own (Keras 3's variables on torch) runs on the originals, and a frozen one (a
    # BatchNormalization's moving statistics) left out of autograd's record would drop out of the graph
    meta = _meta_weights(modules) if dev == "meta" != _own_device(model) else contextlib.nullcontext()
    with eval_mode(modules), _grad_params(model), meta:
        yield


@contextlib.contextmanager
def _checked_output(label: str, model):
    """A forward that returns no tensor (None: a forgotten `return`) is a `TargetError` saying so,
    not the autograd error the empty output would give."""
    from narbench.zoo.extract import iter_tensors

    def check(module, args, output):
        if output is None:
            raise TargetError(f"{label}.forward returned None; it must return a tensor (or tensors)")
        if next(iter_tensors(output), None) is None:
            raise TargetError(f"{label}.forward returned no tensor (got {type(output).__name__}); "
                              "it must return a tensor (or tensors)")

    try:
        handle = model.register_forward_hook(check)
    except Exception:  # noqa: BLE001 - a module that takes no hooks (TorchScript) is run unchecked
        handle = None
    try:
        yield
    finally:
        if handle is not None:
            handle.remove()


@contextlib.contextmanager
def _meta_weights(modules):
    """Every parameter and buffer swapped for an empty meta tensor of its shape for the pass.

    What `torch.func.functional_call` does with a dict of meta tensors, in one pass over the
    modules' own tables (a third of its cost on a 64-layer transformer): a tensor shared by two
    modules (tied weights) gets one meta copy; floating point parameters require grad, so the
    graph shows every layer, frozen or not. Each module gets its own tensors back, whatever the
    forward pass raised."""
    import torch

    copies: dict[int, Any] = {}
    swapped: list[tuple[dict, str, Any]] = []

    def meta(v, param: bool):
        c = copies.get(id(v))
        if c is None:
            c = copies[id(v)] = torch.empty_like(v, device="meta")
            if param and v.is_floating_point():
                c.requires_grad_(True)
        return c

    try:
        for m in modules:
            for table, param in ((m._parameters, True), (m._buffers, False)):
                for name, v in table.items():
                    if v is not None:
                        swapped.append((table, name, v))
                        table[name] = meta(v, param)
        yield
    finally:
        for table, name, v in reversed(swapped):
            table[name] = v


@contextlib.contextmanager
def _grad_params(model):
    frozen = [p for p in model.parameters() if p.is_floating_point() and not p.requires_grad]
    for p in frozen:
        p.requires_grad_(True)
    try:
        yield
    finally:
        for p in frozen:
            p.requires_grad_(False)
