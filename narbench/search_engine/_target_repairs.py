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
LightCNN and AlphaZero), with no set built after it read yet; a fixed side searched where no whole scaling gives it
(`_sized`) chosen on the five rows of `wildval` 19-34 whose Linear refused every guessed side (SAC-AE's and two
Atari networks' 84-pixel frames, TS-TCC's 128-step series, PointNet's 256 points), its carry rule in docs/search.md.
"""

from __future__ import annotations

import math
import re

from narbench.search_engine._target_inputs import SEQ_LEN, forward_params, one_input

#: at most this many repaired inputs per device (each costs a forward pass up to where it fails)
MAX_REPAIRS = 6
#: at most this many inputs of a searched fixed size per device (`sized`), after every other input
MAX_SIZED = 4

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


def _linear_widths(text: str) -> tuple[int, int, int] | None:
    """(rows, width given, width wanted) of a Linear that refused its input, as its error `text` says; else None."""
    for pattern in _LINEAR:
        m = pattern.search(text)
        if m:
            rows, b, c, _ = map(int, m.groups())
            return rows, b, c
    return None


def _spatial(x) -> int:
    """How many last axes of `x` a fixed size is searched over: 2 for a square image [B, C, S, S], 1 for a
    channels-first sequence [B, C, L] (float); 0 for any other input."""
    if not x.is_floating_point():
        return 0
    return 2 if x.dim() == 4 and x.shape[-1] == x.shape[-2] else 1 if x.dim() == 3 else 0


def _sized(x, rows: int, got: int, want: int, earlier) -> list[int] | None:
    """The side of a square image (or the length of a channels-first sequence) whose flattened feature map gives a
    Linear the `want` inputs it was built for, where no whole scaling does (`_flattened`): the map's width to the
    power 1/d (d: 2 for the square, 1 for the length) grows about linearly with the side, less what the convolutions
    and pools cut off, so the side is read off the line through the two tries nearest the target, `x`'s and those in
    `earlier` ((input, error) pairs of inputs tried before, of `x`'s other sides, refused by a Linear of `want`
    inputs); with one try, through the origin. A DQN's 84-pixel Atari frames from 224 pixels: 65, then 88 or 89, by
    which tries are nearest (84 to 91 give its 7 x 7 map); PointNet's 256 points from 1,024: 256. None when it names
    a side already tried."""
    d = _spatial(x)
    if not d or rows != x.shape[0] or got == want or got < 1:
        return None
    points = {x.shape[-1]: got ** (1 / d)}
    for y, exc in earlier:
        seen = _linear_widths(" ".join(str(exc).split()))
        if (seen and seen[2] == want and seen[0] == y.shape[0] and _spatial(y) == d and y.dim() == x.dim()
                and y.shape[:-d] == x.shape[:-d]):
            points.setdefault(y.shape[-1], seen[1] ** (1 / d))
    target = want ** (1 / d)
    near = sorted(points, key=lambda s: (abs(points[s] - target), s != x.shape[-1]))[:2]
    if len(near) == 2 and points[near[0]] != points[near[1]]:
        (s1, r1), (s2, r2) = [(s, points[s]) for s in near]
        side = round(s1 + (target - r1) * (s2 - s1) / (r2 - r1))
    else:
        side = round(x.shape[-1] * target / points[x.shape[-1]])
    return None if side < 1 or side in points else [*x.shape[:-d], *[side] * d]


def _new_shape(x, text: str) -> list[int] | None:
    """The shape the error `text` says a forward given `x` wanted, or None when it names none."""
    widths = _linear_widths(text)  # a Linear of C inputs given a last side of B: B -> C (or a flattened map's side)
    if widths:
        rows, b, c = widths
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


def _made(x, shape) -> list:
    """[a tensor of `shape` like `x`], or [] when there is no shape or it holds more than `MAX_ELEMENTS` values."""
    if shape is None or any(s < 1 for s in shape) or math.prod(shape) > MAX_ELEMENTS:
        return []
    return [_like(x, shape)]


def shapes(x, exc: BaseException) -> list:
    """New first inputs for a forward that failed on `x` with `exc`, from what the error names (possibly none; none
    of more than `MAX_ELEMENTS` values)."""
    return _made(x, _new_shape(x, " ".join(str(exc).split())))


def sized(x, exc: BaseException, earlier=()) -> list:
    """A new first input for a forward whose Linear refused the flattened feature map of `x` (`exc`), at the side
    searched from this try and the `earlier` ones ((input, error) pairs; `_sized`); [] when the error is no such
    refusal or names no new side. Tried after every other input (`MAX_SIZED`), so no model another input runs
    changes input."""
    widths = _linear_widths(" ".join(str(exc).split()))
    return _made(x, _sized(x, *widths, earlier)) if widths else []


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
