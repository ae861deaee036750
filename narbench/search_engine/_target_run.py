"""Running a search target's model once (`narbench.search_engine.target`): on which device, in which order.

Every model runs on the meta device first: it costs no memory, and `narbench.zoo.metacache`
makes its repeated blocks cheap (a 224 x 224 ViT-B in ~12 ms on one core where the CPU needs
~0.6 s; `benchmarks/bench_search.py`). A model narbench builds (a file, an import) is built
there; an instance the caller passes keeps its weights where they are and runs on meta with
empty meta copies swapped in for the pass (`_meta_weights`). If meta fails (a forward that reads
a value, `.item()`), the model runs on the CPU (an instance: on its own device).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

from narbench.search_engine._target_inputs import TargetError, describe, example_inputs, to_device


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _construct(label: str, build: Callable[[], Any], dev: str):
    import torch

    from narbench.zoo.extract import prepare_model

    with torch.device(dev):
        model = build()
    if not isinstance(model, torch.nn.Module):
        raise TargetError(f"{label} returned a {type(model).__name__}, not a torch.nn.Module; "
                          "point at a class or function that returns one")
    return prepare_model(model)


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
    import torch

    errors: list[tuple[str, str, BaseException]] = []
    described = None
    for dev in _devices(instance):
        stage = "construct"
        threads = torch.get_num_threads()
        try:
            model = instance if instance is not None else _construct(label, build, dev)
            stage = "input"
            if inputs is None:
                args, kwargs, described = example_inputs(model, dev, shape)
            else:
                (args, kwargs), described = to_device(inputs, dev), describe(*inputs)
            stage = "forward"
            if dev == "cpu":  # one small forward pass: intra-op threads only add overhead
                torch.set_num_threads(1)
            raw = _run(model, instance is not None, dev, args, kwargs)
            return raw, {"device": dev, "input": described}
        except TargetError:
            raise
        except Exception as exc:  # noqa: BLE001 - user code may raise anything; try the other device, then report
            errors.append((dev, stage, exc))
        finally:
            torch.set_num_threads(threads)
    dev, stage, exc = errors[-1]
    if stage == "construct":
        raise TargetError(f"building {label} failed ({one_line(exc)}); fix the constructor or pass its "
                          "arguments with --kwargs '{\"name\": value}'") from exc
    if stage == "input":
        raise TargetError(f"cannot make an example input for {label} ({one_line(exc)}); "
                          "give its shape with --input-shape") from exc
    shown = f" on {described}" if described else ""
    if inputs is not None:
        raise TargetError(f"the forward pass of {label}{shown} failed ({one_line(exc)}); check the example "
                          "inputs given (--inputs)") from exc
    raise TargetError(f"the forward pass of {label}{shown} failed ({one_line(exc)}); if the input does not "
                      "fit, give the shape the model expects with --input-shape, e.g. --input-shape 1,3,32,32, "
                      "or several inputs with --input-shape repeated or --inputs FILE.py:FUNC") from exc


def _run(model, is_instance: bool, dev: str, args, kwargs):
    from narbench.zoo.extract import extract_graph

    if not is_instance:  # built by `_construct`, already prepared
        return extract_graph(model, args, kwargs, prepare=False)
    modules = list(model.modules())
    if dev == "meta" != _own_device(model):  # the caller's weights stay where they are
        with _eval(modules), _meta_weights(modules):
            return extract_graph(model, args, kwargs, prepare=False)
    with _eval(modules), _grad_params(model):
        return extract_graph(model, args, kwargs, prepare=False)


@contextlib.contextmanager
def _eval(modules):
    """Every module in eval mode for the pass; each gets its own mode back after."""
    training = [m for m in modules if m.training]
    for m in training:
        m.training = False
    try:
        yield
    finally:
        for m in training:
            m.training = True


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
