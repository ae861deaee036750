"""Example inputs repaired from the error a guessed input raised (`repairs`, for `narbench.search_engine._target_guesses`).

When every guess fails, the errors often say what the model wanted: torch's own layers name the size they expected
(a Linear's input width, a LayerNorm's normalised shape, a fixed table's length that a sequence must match), and
Python names how many axes a forward unpacks (`b, t, c = x.shape`) or which arguments it still requires. Each
repair changes the failed input in the one way its error names, and is tried after every planned guess has failed,
so a model some guess runs keeps that guess's graph. Only messages of torch and Python are read (in both the CPU's
and the meta device's wording), never a package's own; a repaired input that fails again may be repaired once more
(`MAX_REPAIRS` in all).

Chosen on the validation sets of outside code searched as a new user would (`wildval` 1-8, the rows no guess ran;
`benchmarks/search/inputs.py`), checked on `wildval9`, built after; the arguments that default to None (`optional`) and
ids by name (`names_an_id`) chosen on `wildval` 1-9, checked on `wildval10`; kinds by name (`_of_kind`) chosen on
`wildval` 1-10, checked on `wildval11`; a flattened image's side (`_flattened`) chosen on `wildval` 1-15 (its rows
LightCNN and AlphaZero), with no set built after it read yet.
"""

from __future__ import annotations

import math
import re

from narbench.search_engine._target_inputs import SEQ_LEN, forward_params, one_input

#: at most this many repaired inputs per device (each costs a forward pass up to where it fails)
MAX_REPAIRS = 6

_LINEAR = (re.compile(r"a and b must have same reduction dim, but got \[(\d+), (\d+)\] X \[(\d+), (\d+)\]"),
           re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)"))
_NORM = re.compile(r"Given normalized_shape=\[([\d, ]+)\], expected input with shape \[(?:\*, )?[\d, ]+\], "
                   r"but got input of size ?(?:torch\.Size\()?\[([\d, ]+)\]")
_BROADCAST = re.compile(r"Attempting to broadcast a dimension of length (\d+) at (-\d+)!.*broadcastable to \[([\d, ]+)\]")
_SIZES = re.compile(r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton")
_FEWER = re.compile(r"not enough values to unpack \(expected (\d+), got (\d+)\)")
_MORE = re.compile(r"too many values to unpack \(expected (\d+)\)")
_MISSING = re.compile(r"missing \d+ required positional argument")
_NONE = re.compile(r"'NoneType' object|not NoneType")
_SHORT = re.compile(r"Invalid computed output size|Output size is too small|Kernel size can't be greater than actual input")
#: how much longer an input too short for the model's pooling is made (a 1,024-step guess: 16,384, as genomic CNNs take)
LONGER = 16
#: the most values a repaired input holds (a size read off an error may be a flattened feature map's: 64 MB of floats)
MAX_ELEMENTS = 1 << 24


def _ints(text: str) -> list[int]:
    return [int(s) for s in text.replace(" ", "").split(",") if s]


def _like(x, shape):
    """A tensor of `shape` of `x`'s kind (`one_input`): random floats, or token ids 0, 1, ... below `x`'s largest id
    + 1; of `x`'s dtype."""
    rows = None if x.is_floating_point() else int(x.max()) + 1 if x.numel() and x.device.type != "meta" else 2
    (made,), _, _ = one_input(shape, x.device, rows)
    return made.to(x.dtype)


def _resized(x, old: int, new: int) -> list[int] | None:
    """`x`'s shape with its axis of size `old` (the last such axis; never the batch axis of a tensor of more than
    one axis) set to `new`; None when no axis has that size."""
    axes = [i for i, s in enumerate(x.shape) if s == old and (i > 0 or x.dim() == 1)]
    if not axes or old == new:
        return None
    shape = list(x.shape)
    shape[axes[-1]] = new
    return shape


def _flattened(x, rows: int, got: int, want: int) -> list[int] | None:
    """A square image whose feature map a Linear reads flattened, one row per example: its width grows with the
    side squared, so side s becomes s * sqrt(want / got) where that is a whole number (LightCNN's 128-pixel faces,
    `wildval15`: 25,088 -> 8,192 from 224 pixels; an AlphaZero 9 x 9 board, `wildval11`); None otherwise."""
    if x.dim() != 4 or rows != x.shape[0] or x.shape[-1] != x.shape[-2] or not x.is_floating_point():
        return None
    area, left = divmod(x.shape[-1] ** 2 * want, got)
    side = math.isqrt(area)
    return [*x.shape[:-2], side, side] if not left and side * side == area and side != x.shape[-1] else None


def _new_shape(x, text: str) -> list[int] | None:
    """The shape the error `text` says a forward given `x` wanted, or None when it names none."""
    for pattern in _LINEAR:  # a Linear of C inputs given a last side of B: B -> C (or a flattened image's side)
        m = pattern.search(text)
        if m:
            rows, b, c, _ = map(int, m.groups())
            return _resized(x, b, c) or _flattened(x, rows, b, c)
    m = _NORM.search(text)  # a norm over the last sides N given the input itself: the last sides -> N
    if m:
        want, got = _ints(m.group(1)), _ints(m.group(2))
        return [*x.shape[:x.dim() - len(want)], *want] if got == list(x.shape) and len(want) < x.dim() else None
    m = _BROADCAST.search(text)  # a fixed table of L rows added to a sequence of X: X -> L
    if m:
        length, at, target = int(m.group(1)), int(m.group(2)), _ints(m.group(3))
        return _resized(x, target[at], length) if -len(target) <= at < 0 else None
    m = _SIZES.search(text)
    if m:
        a, b = map(int, m.groups())
        return _resized(x, a, b) or _resized(x, b, a)
    if not x.is_floating_point():
        return None
    if _SHORT.search(text):  # pooled to nothing: the longest side (not the batch's) 16 times longer
        axis = max(range(1, x.dim()), key=lambda i: x.shape[i], default=None)
        return None if axis is None else [s * LONGER if i == axis else s for i, s in enumerate(x.shape)]
    m = _FEWER.search(text)  # `b, t, c = x.shape` given [1, F]: [1, 16, F]
    if m:
        want, got = map(int, m.groups())
        return [x.shape[0], *([SEQ_LEN] * (want - got)), *x.shape[1:]] if got == x.dim() and want > got else None
    m = _MORE.search(text)  # `b, t, c = x.shape` given [1, C, H, W]: the batch axis and the last sides
    if m:
        want = int(m.group(1))
        return [x.shape[0], *x.shape[x.dim() - want + 1:]] if 1 < want < x.dim() else None
    return None


def shapes(x, exc: BaseException) -> list:
    """New first inputs for a forward that failed on `x` with `exc`, from what the error names (possibly none; none
    of more than `MAX_ELEMENTS` values)."""
    shape = _new_shape(x, " ".join(str(exc).split()))
    if shape is None or any(s < 1 for s in shape) or math.prod(shape) > MAX_ELEMENTS:
        return []
    return [_like(x, shape)]


def _takes_any(model) -> bool:
    """Whether `model.forward` takes any number of positional arguments (`forward(self, *inputs)`)."""
    return any(p.kind is p.VAR_POSITIONAL for p in forward_params(model))


def completed(model, x, exc: BaseException, missing: list[str], filler) -> tuple | None:
    """The arguments for a forward that failed on `x` alone for want of more: one that said it misses required
    positional arguments (`missing`, by name) gets each as its name says (`_named`: `filler`'s names, kinds, ids), any
    other a copy of `x` (a second sequence under a name of its own: `s2_ids`, `target_sequence`); a
    `forward(*inputs)` that indexed past its one input, given token ids, gets zeros beside them (segment ids: BERT
    code takes `[token_ids, segment_ids]`). None for any other error."""
    if isinstance(exc, IndexError) and "tuple index out of range" in str(exc):
        if not x.is_floating_point() and _takes_any(model):
            import torch

            return x, torch.zeros_like(x)
        return None
    if not isinstance(exc, TypeError) or not _MISSING.search(str(exc)) or not missing:
        return None
    return (x, *(_extra(name, x, filler) for name in missing))


def names_an_id(name: str) -> bool:
    """Whether an argument's name says it holds ids (`judge_id`, `speaker_ids`, `class_labels`)."""
    low = name.lower()
    return low in ("id", "ids") or low.endswith(("_id", "_ids", "_idx")) or "label" in low


def _of_kind(name: str, x):
    """A further argument whose name says its kind, beside `x` (batch as `x`'s): an RGB image (`pixel_values`,
    `images`), a spectrogram of 80 mel bins (`mels`, `spectrogram`), a waveform (`audio`, `wav`), 3-D coordinates
    of `x`'s points (`coors`, `xyz`, beside [batch, points, features]); None when the name says none of these."""
    import torch

    low, batch = name.lower(), (x.shape[0] if x.dim() else 1)
    if any(k in low for k in ("pixel", "image", "img")):
        return torch.randn(batch, 3, 224, 224, device=x.device)
    if "mel" in low or "spec" in low:
        return torch.randn(batch, 80, 32, device=x.device)
    if "audio" in low or "wav" in low:
        return torch.randn(batch, 16000, device=x.device)
    if low in ("coors", "coords", "coordinates", "xyz") and x.dim() == 3:
        return torch.randn(*x.shape[:2], 3, device=x.device)
    return None


def _named(name: str, x, filler):
    """A further argument called `name` beside `x` where its name says what it is: `filler`'s first option, else one
    of the kind the name says (`_of_kind`), else one id per example (0) when the name says it holds ids and `x` is not
    ids itself; None when the name says nothing."""
    import torch

    options = filler(name, x)
    if options:
        return options[0]
    kind = _of_kind(name, x)
    if kind is not None:
        return kind
    if names_an_id(name) and x.is_floating_point():
        return torch.zeros(x.shape[0] if x.dim() else 1, dtype=torch.long, device=x.device)
    return None


def _extra(name: str, x, filler):
    """A further argument called `name` beside `x`: what its name says (`_named`), else a copy of `x`."""
    value = _named(name, x, filler)
    return x.clone() if value is None else value


def optional(model, x, exc: BaseException, filler) -> dict | None:
    """Keyword arguments for a forward that failed on `x` alone on a None (`'NoneType' object has no attribute`,
    `must be Tensor, not NoneType`): its parameters that default to None and whose names say what they are
    (`_named`: a DiT's `timestep` and `class_labels`). None for any other error or when no such parameter is named."""
    if not _NONE.search(str(exc)):
        return None
    values = {p.name: _named(p.name, x, filler) for p in forward_params(model)[1:]
              if p.default is None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    named = {name: value for name, value in values.items() if value is not None}
    return named or None
