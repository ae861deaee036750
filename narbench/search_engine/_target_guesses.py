"""Further example inputs for a search target whose first guess does not run (`guesses`, for
`narbench.search_engine._target_run`).

The first guess is the `real` build's (`_target_inputs.example_inputs`, from the layer that first reads
the input). Code from elsewhere often wants something near it: a sequence block's Linear a [1, 16, F]
sequence, not a [1, F] vector; a speaker model's Conv2d(1, ...) a [1, T, 80] spectrogram it unsqueezes
itself; a Focus or space-to-depth stem's Conv2d(12, ...) a 3-channel image; an hourglass a side that 64
divides; a CIFAR network a 32-pixel image; a 3-D medical encoder a cube; NeMo's Conformer a [1, 128, T]
spectrogram; a Keras 3 model (on torch) the channels-last shape it declares, or, declaring none (a subclassed
model), channels-last images after every other guess; a model whose first layer
with weights is a pooler a token sequence. So when the first guess's forward fails, narbench tries these
in order, and the first that runs is the input (the search says which). A guess never replaces one that
runs: a model whose first guess runs gets the same graph as before. Each guess carries the further
arguments the forward requires where their names say what they are (`_completions`).

Chosen on the validation sets of outside code, searched as a new user would, without their rows' stated
inputs (`benchmarks/search/inputs.py`): the first guesses on `wildval` 1-4 (checked on `wildval5`), masks and
diffusion steps on `wildval` 1-5 (checked on `wildval7`), small images, cubes, wide spectrograms and `trg` on
`wildval` 1-7 (checked on `wildval8`); the wild test set was read once after the first guesses and once after
the two later changes; a Keras 3 embedding's table chosen on `wildval10` (checked on `wildval11`); a Keras model's
channels-last images chosen on `wildval` 9, 10 and 14 (keras-climate's SatMAE); a 28-pixel digit, a 16-frame
224-pixel clip, an initial state given as None and a class label beside a step chosen on `wildval` 19-30 (two
CapsNets; two I3Ds and an S3D; two GRU language models; two DiTs), checked on `wildval31`. When all
fail, inputs repaired from their errors (`narbench.search_engine._target_repairs`), and last, for a forward of several
required arguments, each made as the layer that first reads it (`narbench.search_engine._target_readers`); after
those, a fixed side searched for a Linear that refused every flattened feature map (`_fixed_sizes`: Atari's
84-pixel frames, PointNet's points).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from narbench.search_engine._target_inputs import (SEQ_LEN, TargetError, _first_layer, describe, example_inputs,
                                                   one_input, required_args, to_device)

#: at most this many guesses after the first (each costs a forward pass up to where it fails)
MAX_GUESSES = 14
#: image sides tried after 224: U-Nets and hourglasses (a multiple of 64), CIFAR-style networks (a classifier sized
#: for 32 or 64 pixels), Inception 299, SAM-like encoders 512; 256 before the small sides, so a model that took it
#: before they were added keeps its graph
SIDES = (256, 32, 64, 299, 512)
#: the sides of a volume a 3-D network takes (medical images: a cube whose side 32 divides, or a fixed 128)
CUBES = (64, 128)
#: a clip at full resolution, tried last for a 3-D network: I3D and S3D pool 16 frames of 224 pixels to 2 x 7 x 7 and
#: then average over a fixed 2 x 7 x 7 window, so any smaller clip fails (session 83)
CLIP = (16, 224, 224)
#: the side of a one-channel image tried after the other sides: MNIST's 28 pixels, which capsule networks and other
#: small hand-written CNNs size their layers for (session 83)
DIGIT = 28
#: a waveform's length in samples (one second at 16 kHz), a 1-D signal's length otherwise, a spectrogram's mel bins
#: (80, or 128 as Whisper v3, AST and NeMo's larger models take)
WAVE, LENGTH, MELS, MELS_WIDE = 16000, 1024, 80, 128


def _spec(kind: str, shape: tuple[int, ...], high: int = 0) -> tuple[str, tuple[int, ...], int]:
    return kind, tuple(int(s) for s in shape), high


def is_keras(model) -> bool:
    """Whether `model` is a Keras 3 model (on torch: a `torch.nn.Module` whose class derives from Keras's)."""
    return any(c.__module__.split(".")[0] == "keras" for c in type(model).__mro__)


def keras_afresh(model):
    """For a Keras 3 model instance not yet built (it makes its weights at its first call, for that call's input): a
    function making a new one of its configuration (`get_config` / `from_config`, Keras's own, which runs no code the
    class does not), so each guessed input is tried on a model built for it, as a class target's is; None where the
    model is built, or its configuration does not make one (a `Lambda` layer's code, a config it does not write).
    Seen on `wildval16`: kerex's TSMixer, built for the first guess, refused every later one."""
    if getattr(model, "built", None) is not False or not is_keras(model):
        return None
    try:
        config = model.get_config()
        type(model).from_config(config)
    except Exception:  # noqa: BLE001 - any failure: the instance is tried as it is, as before
        return None
    return lambda: type(model).from_config(config)


def _keras_shape(model) -> tuple[int, ...] | None:
    """The input shape a Keras 3 model declares (`model.input_shape`, its None sides as 1 (batch) and 224)."""
    declared = getattr(model, "input_shape", None)
    if not is_keras(model):
        return None
    if not isinstance(declared, tuple) or not declared or isinstance(declared[0], (tuple, list)):
        return None
    return (1, *(224 if s is None else int(s) for s in declared[1:]))


def _table_rows(module) -> int | None:
    """The rows of an embedding table: an `nn.Embedding`'s, or those of the 2-D weight of a module of its own
    whose class says it embeds (transformer-lens's `Embed` holds `W_E`; a Keras 3 `Embedding` on torch keeps its
    variables in a `ParameterDict` of its own, `torch_params`); None for any other module."""
    import torch.nn as nn

    if isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
        return module.num_embeddings
    if module is not None and "embed" in type(module).__name__.lower():
        keras = getattr(module, "torch_params", None)
        own = [*module.parameters(recurse=False), *(keras.values() if isinstance(keras, nn.ParameterDict) else ())]
        table = next((p for p in own if p.dim() == 2), None)
        return int(table.shape[0]) if table is not None else None
    return None


def _by_layer(first, depth: int = 0) -> list[tuple[str, tuple[int, ...], int]]:
    """Guesses from the layer that first reads the input (a layer of no known kind: from its first
    sub-layer that is one, or from a 1-D weight of its own, a norm's)."""
    import torch.nn as nn

    rows = _table_rows(first)
    if rows is not None:
        return [_spec("ids", (1, SEQ_LEN), rows), _spec("ids", (SEQ_LEN,), rows), _spec("ids", (1, 64), rows)]
    if isinstance(first, (nn.Conv2d, nn.ConvTranspose2d, nn.BatchNorm2d)):
        c = first.in_channels if hasattr(first, "in_channels") else first.num_features
        out = [_spec("float", (1, c, s, s)) for s in SIDES] + [_spec("float", (1, 224, 224, c))]
        if c == 1:  # a digit after the other sides (before the channels-last image); first, a spectrogram the
            # model unsqueezes itself: any size, or 80 / 128 mel bins, frames last or first
            out.insert(len(SIDES), _spec("float", (1, 1, DIGIT, DIGIT)))
            out[:0] = [_spec("float", (1, 224, 224)), _spec("float", (1, 200, MELS)), _spec("float", (1, MELS, 200)),
                       _spec("float", (1, 200, MELS_WIDE)), _spec("float", (1, MELS_WIDE, 200))]
        if c != 3:
            out += [_spec("float", (1, 3, s, s)) for s in (224, *SIDES)]
        return out
    if isinstance(first, (nn.Conv1d, nn.ConvTranspose1d)):
        c = first.in_channels
        out = [_spec("float", (1, LENGTH, c))]
        if c == 1:
            out = [_spec("float", (1, WAVE)), _spec("float", (1, LENGTH)), _spec("float", (1, 1, WAVE)), *out]
        elif c % 4 == 0:
            out.append(_spec("float", (1, c // 4, 4 * LENGTH)))
        return out
    if isinstance(first, (nn.Conv3d, nn.ConvTranspose3d)):
        c = first.in_channels  # a clip, or an image a U-Net's 3-D convolutions (frame kernel 1) run on
        return ([_spec("float", (1, c, 8, 64, 64))] + [_spec("float", (1, c, s, s, s)) for s in CUBES]
                + [_spec("float", (1, c, s, s)) for s in (224, *SIDES)] + [_spec("float", (1, c, *CLIP))])
    width = None
    if isinstance(first, nn.Linear):
        width = first.in_features
    elif isinstance(first, nn.LayerNorm) and len(first.normalized_shape) == 1:
        width = first.normalized_shape[0]
    elif first is not None:
        own = [p for p in first.parameters(recurse=False) if p.dim() == 1]
        if own:
            width = own[0].shape[0]
        elif depth < 3:
            inner = next((m for m in first.modules() if m is not first and next(m.parameters(False), None) is not None),
                         None)
            return _by_layer(inner, depth + 1) if inner is not None else []
    if width is None:
        return []
    return [_spec("float", (1, SEQ_LEN, width)), _spec("float", (1, width)), _spec("float", (SEQ_LEN, width))]


def _keras_sides(model, declared: tuple[int, ...]) -> list[tuple[str, tuple[int, ...], int]]:
    """A Keras image model declaring channels-last images of any side, `(None, None, None, C)`: the same images at the
    other sides, right after the declared one (whose sides are read as 224), and at 128 last: such a model may still
    hold a table of fixed size (tfclip's ViT towers in `wildval17`, a position table for 128 or 64 pixels), and the
    generic guesses reach its side, if at all, after `MAX_GUESSES`."""
    sides = getattr(model, "input_shape", None)
    if len(declared) != 4 or not isinstance(sides, tuple) or any(s is not None for s in sides[1:3]):
        return []
    return [_spec("float", (1, s, s, declared[-1])) for s in (*SIDES, 128)]


def _fallbacks(model) -> list[tuple[str, tuple[int, ...], int]]:
    """What any model may take: token ids (of its first embedding table's size), a waveform, an RGB image (224
    and `SIDES`), token ids of 0 and 1 (which any table holds), and last, for a Keras 3 model, RGB images channels
    last (Keras's default layout; after every guess it had before, so a model one of those ran keeps its graph)."""
    rows = next((n for n in map(_table_rows, model.modules()) if n is not None), None)
    out = [_spec("ids", (1, SEQ_LEN), rows)] if rows is not None else []
    images = [_spec("float", (1, 3, s, s)) for s in (224, *SIDES)]
    # a subclassed Keras model declares no input shape (`_keras_shape`) and has no weights to read a layout from
    last = [_spec("float", (1, s, s, 3)) for s in (224, *SIDES)] if is_keras(model) else []
    return out + [_spec("float", (1, WAVE)), _spec("float", (1, 1, WAVE)), *images, _spec("ids", (1, SEQ_LEN), 2), *last]


def _make(spec, device: str) -> tuple[tuple, dict, str]:
    kind, shape, high = spec
    return one_input(shape, device, high if kind == "ids" else None)


#: names of a forward's further required arguments that repeat its first (a seq2seq model's target sequence)
SECOND_SEQUENCE = ("_", "tgt", "trg", "target", "targets", "dec_input", "decoder_input", "decoder_input_ids")


def _missing(model, given: int) -> list[str]:
    """The names of `model.forward`'s required positional arguments after the first `given`."""
    return required_args(model)[given:]


#: the most completions tried for one input (a mask's few shapes)
MAX_COMPLETIONS = 3
#: names of a diffusion model's step (`timestep`, `diffusion_step`) and of its noise level, beside its input
STEPS = ("t", "time", "timestep", "timesteps", "diffusion_step", "diffusion_steps")
#: names of a recurrent model's initial state, given as None (torch's recurrent layers then start from zeros: the
#: same graph as the zeros `init_hidden()` makes); of a class-conditional model's labels, given as class 0 (session 83)
HIDDEN = ("hidden", "hx", "h0", "h_0", "hidden_state", "init_hidden")
LABELS = ("y", "label", "labels", "class_labels", "class_label")
NOISE = ("noise_level", "noise_scale", "sigma")


def _masks(x) -> list:
    """Masks that may go with input `x` (a forward's `masks`, `x_mask`, `src_mask`): all true (nothing masked), of
    one time axis [1, 1, T] for T its second side (a [1, T, F] sequence's, ESPnet's `masks`) or its last (a
    channels-first [1, C, T] feature map's, VITS' `x_mask`), or of `x`'s own shape (a padding mask per value). Boolean,
    which multiplies as 1 and selects as true."""
    import torch

    sides = [x.shape[1]] if x.dim() > 1 else [x.shape[0]]
    if x.dim() > 2 and x.shape[-1] != x.shape[1]:
        sides.append(x.shape[-1])
    out = [torch.ones(1, 1, t, dtype=torch.bool, device=x.device) for t in sides]
    return out + [torch.ones_like(x, dtype=torch.bool)]


def _filler(name: str, x) -> list | None:
    """What a further required argument called `name` may be, beside input `x` (`_completions`); None when its name
    does not say."""
    import torch

    low = name.lower()
    ids = not x.is_floating_point()
    if "len" in low:
        return [torch.tensor([min(x.shape[1:]) if x.dim() > 1 else x.shape[0]], device=x.device)]
    if low in SECOND_SEQUENCE and ids:
        return [x.clone()]
    if "pos" in low and ids and x.dim() == 2:  # segment_pos, position_ids
        return [torch.arange(x.shape[1], device=x.device).expand_as(x).clone()]
    if ("type" in low or "segment" in low) and ids:  # token_type_ids
        return [torch.zeros_like(x)]
    if "mask" in low:
        return _masks(x)
    if low in STEPS:
        return [torch.tensor([10], device=x.device)]
    if low in HIDDEN:
        return [None]
    if low in LABELS:
        return [torch.zeros(x.shape[0] if x.dim() > 1 else 1, dtype=torch.long, device=x.device)]
    if low in NOISE:
        return [torch.tensor([0.5], device=x.device)]
    return None


def _completions(model, args: tuple, kwargs: dict, described: str) -> list[tuple[tuple, dict, str]]:
    """One input completed by the further arguments its forward requires, where their names say what they are:
    a length (`x_lengths`, `ilens`, `src_len`: the input's shortest side, a valid length for any of its axes), a
    second sequence (`SECOND_SEQUENCE`: token ids as the first), positions (`segment_pos`, `position_ids`: 0, 1, ...)
    or token types (`type_ids`, `segment_ids`: zeros) beside token ids, a mask (`_masks`: a few shapes, so up to
    `MAX_COMPLETIONS` completions), a diffusion step or noise level (`STEPS`, `NOISE`: one value). Speech and
    text-to-speech code passes lengths or masks beside its features, seq2seq code a target beside its source,
    language models positions or token types beside their ids, diffusion models a step beside the noisy input. Any
    other argument: the input as it is, left to the user."""
    import itertools

    import torch

    missing = _missing(model, len(args))
    if not missing or kwargs or len(args) != 1 or not isinstance(args[0], torch.Tensor):
        return [(args, kwargs, described)]
    x = args[0]
    fillers = [_filler(name, x) for name in missing]
    if any(f is None for f in fillers):
        return [(args, kwargs, described)]
    return [((x, *extra), {}, describe((x, *extra), {}))
            for extra in itertools.islice(itertools.product(*fillers), MAX_COMPLETIONS)]


def guesses(model, device: str, errors: list | None = None) -> Iterator[tuple[tuple, dict, str]]:
    """(args, kwargs, description) of the example inputs to try in order: the `real` build's first
    (`example_inputs`; skipped when it cannot tell, or when making it raises), then up to `MAX_GUESSES` others, none
    twice; each completed by the further arguments its forward requires, where their names say what they are
    (`_completions`: a mask may give a few). Then, when all failed, inputs repaired from their errors (`_repaired`;
    `errors`: the caller's record of failures, (device, step, exception, description, round) each), and last, for a
    forward of several required arguments, each argument as the layer that reads it makes it (`_by_readers`); both
    only where `errors` is given."""
    seen: set[str] = set()
    made: dict[str, tuple] = {}
    try:
        firsts = _completions(model, *example_inputs(model, device))
    except Exception:  # noqa: BLE001 - TargetError, or user code (a config it cannot dress) raising anything: go on
        firsts = []
    for args, kwargs, described in firsts:
        seen.add(described)
        made[described] = args
        yield args, kwargs, described
    specs: list[tuple[str, tuple[int, ...], int]] = []
    keras = _keras_shape(model)
    if keras is not None:
        specs += [_spec("float", keras), *_keras_sides(model, keras)]
    try:
        first: Any = _first_layer(model, device, None)
    except Exception:  # noqa: BLE001 - user code may raise anything while probed; fall back to the generic guesses
        first = None
    specs += _by_layer(first) + _fallbacks(model)
    tried = 0
    for args, kwargs, described in (c for spec in specs for c in _completions(model, *_make(spec, device))):
        if described in seen:
            continue
        seen.add(described)
        tried += 1
        if tried > MAX_GUESSES:
            break
        made[described] = args
        yield args, kwargs, described
    if errors is None:
        return
    try:
        yield from _repaired(model, device, errors, made, seen)
    except Exception:  # noqa: BLE001 - a repair that cannot be made (user code probed) ends the repairs, not the search
        pass
    try:
        readers = _by_readers(model, device)
    except Exception:  # noqa: BLE001 - user code probed may raise anything: no such inputs
        readers = []
    for args in readers:
        described = describe(args, {})
        if described not in seen:
            seen.add(described)
            yield args, {}, described
    try:
        yield from _fixed_sizes(model, device, errors, made, seen)
    except Exception:  # noqa: BLE001 - user code probed may raise anything: no such inputs
        pass


def _failures(errors: list, device: str, made: dict[str, tuple]):
    """(arguments, error) of each input tried on `device` whose forward failed, in the order they failed, those
    recorded while this is read included (a new try's error is read in its turn); only inputs made here, whose first
    argument is a tensor."""
    import torch

    i = 0
    while i < len(errors):
        dev, step, exc, described, _ = errors[i]
        i += 1
        args = made.get(described) if dev == device and step == "forward" else None
        if args and isinstance(args[0], torch.Tensor):
            yield args, exc


def _offered(options, budget: int, made: dict[str, tuple], seen: set[str], tried: list[int]):
    """The `options` ((arguments, keywords, description)) not tried before, recorded as tried, while `tried[0]` (a
    count shared across calls) is under `budget`."""
    for new_args, kwargs, text in options:
        if tried[0] >= budget:
            return
        if text in seen:
            continue
        seen.add(text)
        made[text] = new_args
        tried[0] += 1
        yield new_args, kwargs, text


def _fixed_sizes(model, device: str, errors: list, made: dict[str, tuple], seen: set[str]):
    """Last, inputs of a fixed size searched from the errors of every input tried on `device` whose Linear refused
    its flattened feature map (`_target_repairs.sized`), each new try's error read in its turn; at most
    `MAX_SIZED`."""
    from narbench.search_engine._target_repairs import MAX_SIZED, sized

    tried, earlier = [0], []  # earlier: (first input, error) of the inputs read so far
    for args, exc in _failures(errors, device, made):
        if tried[0] >= MAX_SIZED:
            return
        x = args[0]
        for new in sized(x, exc, earlier):
            yield from _offered(_completions(model, (new, *args[1:]), {}, describe((new, *args[1:]), {})),
                                MAX_SIZED, made, seen, tried)
        earlier.append((x, exc))


def _repaired(model, device: str, errors: list, made: dict[str, tuple], seen: set[str]):
    """Inputs repaired from the errors of the inputs tried on `device` (`_target_repairs`), in the order they failed,
    a repaired input's own error read in its turn; at most `MAX_REPAIRS`, none twice."""
    from narbench.search_engine._target_repairs import MAX_REPAIRS, completed, optional, shapes

    tried = [0]
    for args, exc in _failures(errors, device, made):
        if tried[0] >= MAX_REPAIRS:
            return
        x = args[0]
        fills = completed(model, x, exc, _missing(model, 1), _filler) if len(args) == 1 else None
        options = [(fills, {}, describe(fills, {}))] if fills else []
        named = optional(model, x, exc, _filler) if len(args) == 1 else None
        options += [((x,), named, describe((x,), named))] if named else []
        for new in shapes(x, exc):
            options += _completions(model, (new, *args[1:]), {}, describe((new, *args[1:]), {}))
        yield from _offered(options, MAX_REPAIRS, made, seen, tried)


def _by_readers(model, device: str) -> list[tuple]:
    """`_target_readers.by_readers`, reading layers and names as the guesses here do."""
    from narbench.search_engine._target_readers import by_readers

    return by_readers(model, device, filler=_filler, by_layer=_by_layer, table_rows=_table_rows)


def to_try(model, device: str, shape, inputs, errors: list | None = None) -> Iterator[tuple[tuple, dict, str]]:
    """The example inputs `_target_run` tries on `device`, in order: the caller's inputs or shape alone, else the
    `real` build's guess, then the others when it does not run, then inputs repaired from the failures recorded in
    `errors` (`guesses`)."""
    if inputs is not None:
        return iter([(*to_device(inputs, device), describe(*inputs))])
    if shape is not None:
        return iter([example_inputs(model, device, shape)])
    return guesses(model, device, errors)
