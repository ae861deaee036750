"""The example input of a search target model (`narbench.search_engine.target`): chosen as the `real` build does,
from the layer that first reads the input (found by running the model up to it, `_first_layer`), shaped as
the caller says (`shapes`), or given by the caller (`normalise_inputs`).

`TargetError`, the error of every step from a target to its graph, is defined here, under the modules
of those steps (`_target_run`, `_target_model`, `target_check`, `target`), so that they import one
another in one direction only."""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import numpy as np

#: Sequence length of the token ids given to a language model (the `real` build's choice).
SEQ_LEN = 16


class TargetError(ValueError):
    """A search target that cannot be turned into a graph (message: problem; fix)."""


#: Layers that take a model's input whatever they hold (a module of any other kind: when it has weights of its own).
_INPUT_LAYERS = ("Embedding", "EmbeddingBag", "RNNBase", "TransformerEncoderLayer")


class _Found(BaseException):
    """Raised by the probe's hook at the first layer given the input (a BaseException: a forward's
    `except Exception:` does not swallow it)."""

    def __init__(self, module) -> None:
        super().__init__()
        self.module = module


def _is_layer(mod, model) -> bool:
    """Whether `mod` is a layer that may read the model's input: one of `_INPUT_LAYERS`, or a module
    (not the model itself) with weights of its own."""
    import torch.nn as nn

    if isinstance(mod, tuple(getattr(nn, k) for k in _INPUT_LAYERS)):
        return True
    return mod is not model and next(mod.parameters(recurse=False), None) is not None


def _registered_first(model):
    """The first layer in registration order (`model.modules()`): the guess when the probe finds none."""
    return next((mod for mod in model.modules() if _is_layer(mod, model)), None)


def _first_layer(model, device: str, shape) -> Any:
    """The layer that first reads the model's input, found by running it (`_first_consumer`) on the
    input its first registered layer asks for (token ids where that one cannot tell); the first
    registered layer where the probe finds none (a forward that fails first, a module that takes no hooks).
    Registration order alone is wrong for a model that registers its output head before its embedding."""
    registered = _registered_first(model)
    if registered is model:  # the model is one layer (an nn.LSTM, an nn.Embedding)
        return registered
    try:
        args, kwargs, _ = _input_of(model, registered, device, shape)
    except TargetError:
        import torch

        args, kwargs = (torch.arange(SEQ_LEN, device=device).reshape(1, SEQ_LEN),), {}
    found = _first_consumer(model, args, kwargs)
    return registered if found is None else found


def _first_consumer(model, args: tuple, kwargs: dict[str, Any]):
    """The first layer (`_is_layer`) called with a tensor computed from the input, or None.

    The model runs once on (args, kwargs), in eval mode and without gradients, and is stopped before
    that layer's forward (a forward pre-hook on every submodule); a `TorchFunctionMode` follows which
    tensors are computed from the input, so a layer called first on something else (position ids
    made from `torch.arange`) is passed over. A forward that fails (or exits) before such a layer,
    or a module that takes no hooks, gives None. What the forward did before the stop (a counter it
    increments) is not undone."""
    from narbench.zoo.extract import iter_tensors

    derived = _derived_class()(iter_tensors((args, kwargs)))

    def hook(module, a, kw):
        if _is_layer(module, model) and derived.reads((a, kw)):
            raise _Found(module)

    stopped = run_until(model, hook, derived, args, kwargs)  # a failure: None, the real pass reports it
    return stopped.module if isinstance(stopped, _Found) else None


def run_until(model, hook, mode, args: tuple, kwargs: dict[str, Any]) -> BaseException | None:
    """`model(*args, **kwargs)` run in eval mode, without gradients, under the `TorchFunctionMode` `mode`, `hook` a
    forward pre-hook (with kwargs) on every submodule: the `_Found` a hook raised, or the exception the forward
    raised (user code may raise anything, or exit), or None when it ran to the end. The hooks are removed after."""
    import torch

    handles = []
    try:
        for mod in model.modules():
            if mod is not model:
                handles.append(mod.register_forward_pre_hook(hook, with_kwargs=True))
        with eval_mode(list(model.modules())), torch.no_grad(), mode:
            model(*args, **kwargs)
    except (_Found, Exception, SystemExit) as stopped:  # noqa: BLE001 - see above
        return stopped
    finally:
        for handle in handles:
            handle.remove()
    return None


@functools.cache
def _derived_class():
    """`Derived`, a `TorchFunctionMode` (a class made on first use: torch is imported lazily)."""
    from torch.overrides import TorchFunctionMode

    from narbench.zoo.extract import iter_tensors

    class Derived(TorchFunctionMode):
        """Follows the tensors computed from some tensors: every output of a torch function or tensor
        method one of whose arguments is one of them (held, so their ids stay theirs)."""

        def __init__(self, tensors) -> None:
            super().__init__()
            self.tensors = {id(t): t for t in tensors}

        def reads(self, value) -> bool:
            return any(id(t) in self.tensors for t in iter_tensors(value))

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if self.reads((args, kwargs)):
                self.tensors.update((id(t), t) for t in iter_tensors(out))
            return out

    return Derived


@contextlib.contextmanager
def eval_mode(modules):
    """Every module in eval mode for the block; each gets its own mode back after."""
    training = [m for m in modules if m.training]
    for m in training:
        m.training = False
    try:
        yield
    finally:
        for m in training:
            m.training = True


def normalise_inputs(value: Any) -> tuple[tuple, dict[str, Any]]:
    """(args, kwargs) of example inputs as a caller gives them: the model is called `model(*args,
    **kwargs)`. A dict is keyword inputs; a pair `(tuple_or_list, dict)` is (args, kwargs); any
    other tuple or list is positional inputs; anything else (a tensor) is the one positional input.
    """
    if isinstance(value, dict):
        return (), dict(value)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], (tuple, list)) \
            and isinstance(value[1], dict):
        return tuple(value[0]), dict(value[1])
    if isinstance(value, (tuple, list)):
        return tuple(value), {}
    return (value,), {}


def to_device(value: Any, device: str) -> Any:
    """`value` with every tensor in it (nested in tuples, lists, dicts) moved to `device`."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(v, device) for v in value)
    return value


def describe(args: tuple, kwargs: dict[str, Any]) -> str:
    """A short description of example inputs: `tensor [1, 3, 32, 32], mask=mask [1, 16]` (a boolean tensor is a
    mask)."""
    import torch

    def one(v: Any) -> str:
        if isinstance(v, torch.Tensor):
            kind = ("mask" if v.dtype == torch.bool else "tensor" if v.is_floating_point() or v.is_complex()
                    else "token ids")
            return f"{kind} {list(v.shape)}"
        if isinstance(v, (tuple, list)):
            return "(" + ", ".join(one(x) for x in v) + ")"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {one(x)}" for k, x in v.items()) + "}"
        return type(v).__name__
    return ", ".join([one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()])


def example_inputs(model, device: str, shape=None) -> tuple[tuple, dict, str]:
    """(args, kwargs, description) of the example input for `model`, chosen as the `real` build does.

    A transformers model gets the build's dummy inputs for its main input, a timm model its
    `pretrained_cfg["input_size"]`; any other module is read from the layer that first reads its input
    (`_first_layer`: found by running the model up to it; the first registered layer where that fails):
    an embedding gets token ids [1, 16], a 2-d (3-d) convolution an image [1, C, 224, 224]
    (a clip [1, C, 16, 112, 112]), a recurrent or transformer layer a sequence [1, 16, F], a
    linear layer a vector [1, F]. `shape` overrides the shape (token ids stay integer ids); a
    list of shapes gives one positional input per shape: the first as above, the others random
    float tensors.
    """
    import torch

    if shape is not None and len(shape) and not isinstance(shape[0], int):  # several shapes
        first, *rest = [tuple(int(s) for s in sh) for sh in shape]
        args, kwargs, described = example_inputs(model, device, first)
        if rest and kwargs:
            raise TargetError(f"{type(model).__name__} takes keyword inputs ({', '.join(kwargs)}): give them with "
                              "--inputs FILE.py:FUNC (Python: inputs=), not several --input-shape")
        extra = tuple(torch.randn(*sh, device=device) for sh in rest)
        return (*args, *extra), kwargs, ", ".join([described] + [f"tensor {list(sh)}" for sh in rest])
    return _one_input(model, device, shape)


def _one_input(model, device: str, shape: tuple[int, ...] | None) -> tuple[tuple, dict, str]:
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "model_type") and hasattr(model, "main_input_name"):
        from narbench.zoo.transformers_zoo import transformers_inputs

        kw = transformers_inputs(model, config, "base", device, shape)
        main = next(iter(kw.values()))
        return (), kw, f"{next(iter(kw))} {list(main.shape)}"
    return _input_of(model, _first_layer(model, device, shape), device, shape)


def _input_of(model, first, device: str, shape: tuple[int, ...] | None) -> tuple[tuple, dict, str]:
    """The example input of `model` whose input `first` reads (`example_inputs`)."""
    import torch
    import torch.nn as nn

    ids = isinstance(first, (nn.Embedding, nn.EmbeddingBag))
    if shape is None:
        cfg = getattr(model, "pretrained_cfg", None)
        if isinstance(cfg, dict) and cfg.get("input_size"):
            shape = (1, *cfg["input_size"])
        elif ids:
            shape = (1, SEQ_LEN)
        elif isinstance(first, (nn.Conv2d, nn.ConvTranspose2d, nn.BatchNorm2d)):
            shape = (1, first.in_channels if hasattr(first, "in_channels") else first.num_features, 224, 224)
        elif isinstance(first, (nn.Conv3d, nn.ConvTranspose3d)):
            shape = (1, first.in_channels, 16, 112, 112)
        elif isinstance(first, (nn.Conv1d, nn.ConvTranspose1d)):
            shape = (1, first.in_channels, 1024)
        elif isinstance(first, nn.RNNBase):
            shape = (1, SEQ_LEN, first.input_size) if first.batch_first else (SEQ_LEN, 1, first.input_size)
        elif isinstance(first, nn.TransformerEncoderLayer):
            d = first.linear1.in_features
            shape = (1, SEQ_LEN, d) if first.self_attn.batch_first else (SEQ_LEN, 1, d)
        elif isinstance(first, nn.LayerNorm):
            shape = (1, SEQ_LEN, *first.normalized_shape)
        elif isinstance(first, nn.Linear):
            shape = (1, first.in_features)
        elif isinstance(first, nn.BatchNorm1d):
            shape = (1, first.num_features)
        else:
            raise TargetError(f"cannot tell what input {type(model).__name__} takes (first layer: "
                              f"{type(first).__name__ if first is not None else 'none with weights'}); "
                              "give its shape with --input-shape, e.g. --input-shape 1,3,224,224")
    return one_input(shape, device, first.num_embeddings if ids else None)


def forward_params(model) -> list:
    """The parameters of `model.forward`'s signature (`inspect.Parameter`s, `self` not among them); none when it has
    no signature to read (a TorchScript or C-level forward)."""
    import inspect

    try:
        return list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return []


def required_args(model) -> list[str]:
    """The names of `model.forward`'s required positional arguments (`forward_params`), in order."""
    return [p.name for p in forward_params(model)
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def one_input(shape, device: str, rows: int | None = None) -> tuple[tuple, dict, str]:
    """(args, kwargs, description) of one example input of `shape`: token ids 0, 1, ... modulo `rows` (an
    embedding table's) when `rows` is given, else a random float tensor."""
    import torch

    shape = tuple(int(s) for s in shape)
    if rows is not None:
        x = (torch.arange(int(np.prod(shape)), device=device) % max(rows, 1)).reshape(shape)
        return (x,), {}, f"token ids {list(shape)}"
    return (torch.randn(*shape, device=device),), {}, f"tensor {list(shape)}"
