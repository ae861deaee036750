"""Example inputs for a forward of several required arguments whose names do not say what they are (`by_readers`,
for `narbench.search_engine._target_guesses`).

A Decision Transformer's `forward(timesteps, states, actions, returns_to_go)`, a GNN's `forward(h, x, edge_index)`, an
actor's `forward(x, hx, cx)`: the guesses made for the first argument (`_target_guesses`) say nothing of the others, and
their names (`states`, `c`, `X`) say nothing either. What does say is the layer that first reads each: an embedding
table takes ids, a Linear a last side of its width, a convolution its channels, a recurrent cell its state. So every
argument is given a placeholder, the model runs until a layer is handed a tensor computed from one whose reader is not
known yet (a `TorchFunctionMode` follows what is computed from each argument, as `_target_inputs._first_consumer`
follows one input), that argument is made as that layer reads it, and the model runs again, once per argument. Two
frames are tried: a sequence (ids [1, 16], features [1, 16, F]) and a vector per example (ids [1], features [1, F]).
An argument no layer reads before the forward fails keeps its placeholder; the arguments a name says (`_filler`:
masks, lengths, steps, states as None) are filled by it.

Tried only after every other guess and repair failed, so a model some earlier input ran keeps its graph. Chosen on the
rows of `wildval` 19-31 (GitHub code) no guess ran, searched as a new user would (`benchmarks/search/inputs.py`).
"""

from __future__ import annotations

import functools
from typing import Any

from narbench.search_engine._target_inputs import SEQ_LEN, _Found, _is_layer, required_args, run_until

#: the frames tried: (name, the placeholder's shape, whether features carry a sequence axis)
FRAMES = (("sequence", (1, SEQ_LEN, SEQ_LEN), True), ("vector", (1, SEQ_LEN), False))
#: a 1-D signal's length and an image's side for an argument a convolution reads
LENGTH, SIDE = 64, 224
#: at most this many placeholders reshaped from the errors of one frame's runs
MAX_REPAIRS = 4


class _FoundArg(_Found):
    """The first layer handed a tensor computed from a tracked argument: the layer, the argument's index, and the
    position in the layer's call where it came (0: the layer's input; 1 on: a recurrent layer's state)."""

    def __init__(self, module, index: int, position: int) -> None:
        super().__init__(module)
        self.index, self.position = index, position


@functools.cache
def _sources_class():
    """`Sources`, a `TorchFunctionMode` that labels every tensor computed from the tracked arguments with their
    indices (a class made on first use: torch is imported lazily)."""
    from torch.overrides import TorchFunctionMode

    from narbench.zoo.extract import iter_tensors

    class Sources(TorchFunctionMode):
        def __init__(self, tracked: dict[int, Any]) -> None:
            super().__init__()
            self.labels: dict[int, tuple[Any, frozenset]] = {id(t): (t, frozenset([i])) for i, t in tracked.items()}

        def of(self, value) -> frozenset:
            out: frozenset = frozenset()
            for t in iter_tensors(value):
                held = self.labels.get(id(t))
                if held is not None:
                    out |= held[1]
            return out

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            labels = self.of((args, kwargs))
            if labels:
                self.labels.update((id(t), (t, labels)) for t in iter_tensors(out))
            return out

    return Sources


def _holds_layers(module) -> bool:
    """Whether `module` holds layers with weights of their own beneath it (a block with a weight of its own, DiT's
    first layer holding its patch, step and label embeddings): its readers are those layers, not it. A recurrent
    layer or an embedding is read as itself."""
    import torch.nn as nn

    if isinstance(module, (nn.RNNBase, nn.RNNCellBase, nn.Embedding, nn.EmbeddingBag, nn.TransformerEncoderLayer)):
        return False
    return any(next(m.parameters(recurse=False), None) is not None for m in module.modules() if m is not module)


def _reader(model, args: list, tracked: set[int]) -> _FoundArg | BaseException | None:
    """The first layer (`_is_layer`) handed a tensor computed from one of the `tracked` arguments of `model(*args)`;
    the exception where the forward fails first; None where it ends first (or takes no hooks). Eval mode, no
    gradients; stopped before that layer runs (`_target_inputs.run_until`)."""
    mode = _sources_class()({i: args[i] for i in tracked})

    def hook(module, a, kw):
        if not _is_layer(module, model) or _holds_layers(module):
            return
        for position, value in enumerate([*a, *kw.values()]):
            hit = sorted(mode.of(value))
            if hit:
                raise _FoundArg(module, hit[0], position)

    return run_until(model, hook, mode, tuple(args), {})


def _read_as(found: _FoundArg, sequence: bool, device: str, by_layer, table_rows):
    """The argument `found`'s layer reads, in a frame (`FRAMES`); None for a layer of no kind known here
    (`by_layer`, `table_rows`: `_target_guesses`' readings of a layer's input and of a table's rows)."""
    import torch
    import torch.nn as nn

    layer, lead = found.module, ((1, SEQ_LEN) if sequence else (1,))
    rows = table_rows(layer)
    if rows is not None:
        return (torch.arange(SEQ_LEN if sequence else 1, device=device) % max(rows, 1)).reshape(lead)
    if isinstance(layer, nn.RNNCellBase):
        return torch.randn(1, layer.input_size if found.position == 0 else layer.hidden_size, device=device)
    if isinstance(layer, nn.RNNBase):
        if found.position == 0:
            shape = (1, SEQ_LEN, layer.input_size) if layer.batch_first else (SEQ_LEN, 1, layer.input_size)
        else:
            shape = (layer.num_layers * (2 if layer.bidirectional else 1), 1, layer.hidden_size)
        return torch.randn(*shape, device=device)
    if isinstance(layer, (nn.Conv1d, nn.ConvTranspose1d)):
        return torch.randn(1, layer.in_channels, LENGTH, device=device)
    if isinstance(layer, (nn.Conv2d, nn.ConvTranspose2d)):
        return torch.randn(1, layer.in_channels, SIDE, SIDE, device=device)
    if isinstance(layer, (nn.Conv3d, nn.ConvTranspose3d)):
        return torch.randn(1, layer.in_channels, SEQ_LEN, 112, 112, device=device)
    specs = [s for s in by_layer(layer) if s[0] == "float" and len(s[1]) == (3 if sequence else 2)]
    if not specs:
        return None
    width = specs[0][1][-1]
    return torch.randn(*lead, width, device=device)


def by_readers(model, device: str, *, filler, by_layer, table_rows) -> list[tuple]:
    """Positional inputs for `model.forward` when it requires two or more arguments: per frame (`FRAMES`), each
    argument made as the layer that first reads it reads it, found one argument per run; those no layer read whose
    names say what they are (`filler`, beside the first) filled by name. One input per frame (the caller skips one
    it has tried); [] for a forward of fewer required arguments. `filler`, `by_layer`, `table_rows`: `_target_guesses`' (which calls
    this), passed in so that this module does not import it back."""
    import torch

    from narbench.search_engine._target_repairs import shapes

    names = required_args(model)
    if len(names) < 2:
        return []
    out = []
    for _, shape, sequence in FRAMES:
        args: list = [torch.randn(*shape, device=device) for _ in names]
        open_ = set(range(len(names)))
        repairs = 0
        for _ in range(len(names) + MAX_REPAIRS):
            found = _reader(model, args, open_)
            if not isinstance(found, _FoundArg):  # the forward failed first (or ended): an argument reshaped as the
                # error says (`_target_repairs.shapes`: `b, t, c = x.shape` given [1, 16], a Linear's width), the open
                # ones first
                if not isinstance(found, Exception) or repairs >= MAX_REPAIRS:
                    break
                order = sorted(open_) + sorted(set(range(len(names))) - open_)
                fixed = next(((i, new[0]) for i in order for new in [shapes(args[i], found)] if new), None)
                if fixed is None:
                    break
                repairs += 1
                args[fixed[0]] = fixed[1]
                continue
            made = _read_as(found, sequence, device, by_layer, table_rows)
            open_.discard(found.index)
            if made is not None:
                args[found.index] = made
            if not open_:
                break
        for i in sorted(open_ - {0}):  # not read before the forward failed: by name, beside the first
            options = filler(names[i], args[0])
            if options:
                args[i] = options[0]
        out.append(tuple(args))
    return out
