"""`narbench.search_engine._target_guesses`: the inputs tried when the `real` build's guess does not run."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from narbench.search_engine._target_guesses import MAX_GUESSES, guesses  # noqa: E402
from narbench.search_engine._target_inputs import TargetError, example_inputs  # noqa: E402
from narbench.search_engine._target_run import extract  # noqa: E402
from tests.search_models import TinyCNN  # noqa: E402


class SequenceBlock(nn.Module):
    """A Mamba-like block: its first layer is a Linear, its forward wants [batch, length, width]."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 16)
        self.out = nn.Linear(16, 8)

    def forward(self, x):
        b, n, d = x.shape
        return self.out(torch.relu(self.proj(x))).reshape(b, n, d)


class SpectrogramCNN(nn.Module):
    """A speaker model: Conv2d(1, ...) first, fed a [batch, time, mels] spectrogram it unsqueezes itself."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)

    def forward(self, x):
        if x.dim() != 3:
            raise ValueError(f"expected [batch, time, mels], got {list(x.shape)}")
        return self.conv(x.unsqueeze(1)).mean((2, 3))


class FocusStem(nn.Module):
    """YOLOX's Focus: an RGB image sliced into 4 and concatenated, so the first Conv2d reads 12 channels."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(12, 4, 3)

    def forward(self, x):
        if x.shape[1] != 3:
            raise ValueError("an RGB image")
        x = torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], dim=1)
        return self.conv(x)


@pytest.mark.parametrize("cls, want, op", [
    (SequenceBlock, "tensor [1, 16, 8]", "AddmmBackward0"),
    (SpectrogramCNN, "tensor [1, 224, 224]", "ConvolutionBackward0"),
    (FocusStem, "tensor [1, 3, 224, 224]", "ConvolutionBackward0"),
])
def test_a_model_the_first_guess_does_not_fit_runs_on_a_later_one(cls, want, op):
    first = next(guesses(cls(), "meta"))[2]
    assert first != want  # the real build's guess is not it ...
    raw, info = extract(cls.__name__, cls)
    assert info["input"] == want and op in "".join(raw.ops)  # ... a later guess runs, and the graph has the model


class CifarNet(nn.Module):
    """A CIFAR network (Kuang Liu's pytorch-cifar): its classifier is sized for what a 32-pixel image leaves."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(torch.nn.functional.avg_pool2d(self.conv(x), 32).flatten(1))


class VolumeNet(nn.Module):
    """A 3-D medical encoder with a learned position table for a 64-voxel cube."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.pos = nn.Conv3d(1, 4, 3, padding=1), nn.Parameter(torch.zeros(1, 4, 64 ** 3))

    def forward(self, x):
        return self.conv(x).flatten(2) + self.pos


class MelsFirst(nn.Module):
    """NeMo's Conformer front end: a [1, 128, T] spectrogram, mel bins first, subsampled by a Conv2d(1, ...)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.out = nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.Linear(4 * 64, 8)

    def forward(self, x):
        h = self.conv(x.transpose(1, 2).unsqueeze(1))
        return self.out(h.permute(0, 2, 1, 3).flatten(2))


def test_a_model_the_first_guess_fits_keeps_it():
    raw, info = extract("TinyCNN", TinyCNN)
    assert info["input"] == example_inputs(TinyCNN(), "meta")[2] == "tensor [1, 3, 224, 224]"


def test_guesses_are_distinct_and_capped():
    seen = [d for _, _, d in guesses(SequenceBlock(), "meta")]
    assert len(seen) == len(set(seen)) and 1 < len(seen) <= MAX_GUESSES + 1


def test_a_first_guess_that_cannot_be_made_leaves_the_later_ones(monkeypatch):
    import narbench.search_engine._target_guesses as guessing

    def broken(model, device, shape=None):
        raise AttributeError("'Config' object has no attribute 'vocab_size'")  # user code, not a TargetError

    monkeypatch.setattr(guessing, "example_inputs", broken)
    raw, info = extract("SequenceBlock", SequenceBlock)
    assert info["input"] == "tensor [1, 16, 8]" and "AddmmBackward0" in "".join(raw.ops)


def test_a_given_shape_is_the_only_input_tried():
    with pytest.raises(TargetError, match=r"on tensor \[1, 8\] failed \(ValueError: not enough values to unpack"):
        extract("SequenceBlock", SequenceBlock, shape=(1, 8))


class OwnEmbed(nn.Module):
    """transformer-lens's `Embed`: a table of its own (`W_E`), indexed, not an `nn.Embedding`."""

    def __init__(self) -> None:
        super().__init__()
        self.W_E = nn.Parameter(torch.randn(50, 8))

    def forward(self, ids):
        return self.W_E[ids]


class OwnEmbedLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = OwnEmbed()
        self.unembed = nn.Linear(8, 50)

    def forward(self, ids):
        return self.unembed(self.embed(ids))


def test_a_table_of_its_own_gets_token_ids_within_its_rows():
    with pytest.raises(TargetError, match="cannot tell what input"):
        example_inputs(OwnEmbedLM(), "meta")  # the real build's guess cannot tell ...
    raw, info = extract("OwnEmbedLM", OwnEmbedLM)
    assert info["input"] == "token ids [1, 16]" and "IndexBackward0" in raw.ops  # ... the table's rows can


class WithLengths(nn.Module):
    """A text-to-speech text encoder: token ids and their lengths, as VITS's `TextEncoder.forward(x, x_lengths)`."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(40, 8)
        self.proj = nn.Linear(8, 8)

    def forward(self, x, x_lengths):
        mask = torch.arange(x.shape[1], device=x.device)[None] < x_lengths[:, None]
        return self.proj(self.embed(x)) * mask[..., None]


class SourceTarget(nn.Module):
    """A seq2seq model: `forward(source, target)`."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(40, 8)
        self.out = nn.Linear(8, 40)

    def forward(self, source, target):
        return self.out(self.embed(source).mean(1, keepdim=True) + self.embed(target))


class NeedsAMask(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(40, 8)

    def forward(self, x, attention_bias):
        return self.embed(x) + attention_bias


class SourceTrg(SourceTarget):
    """A tutorial seq2seq model: `forward(src, trg)`."""

    def forward(self, src, trg):
        return super().forward(src, trg)


@pytest.mark.parametrize("cls, want", [(WithLengths, "token ids [1, 16], token ids [1]"),
                                       (SourceTarget, "token ids [1, 16], token ids [1, 16]"),
                                       (SourceTrg, "token ids [1, 16], token ids [1, 16]")])
def test_a_forward_that_requires_lengths_or_a_target_gets_them(cls, want):
    raw, info = extract(cls.__name__, cls)
    assert info["input"] == want and "EmbeddingBackward0" in raw.ops


class NeedsOptions(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(40, 8)

    def forward(self, x, options):
        return self.embed(x) * options["scale"]


def test_an_argument_no_layer_reads_is_shaped_as_the_error_says():
    # session 84 (`_target_readers`): it was left to the user; the sum's error names the width
    assert extract("NeedsAMask", NeedsAMask)[1]["input"] == "token ids [1, 16], tensor [1, 16, 8]"


@pytest.mark.filterwarnings("ignore:Using a non-tuple sequence")
def test_an_argument_no_tensor_can_be_is_left_to_the_user():
    with pytest.raises(TargetError, match="missing 1 required positional argument: 'options'"):
        extract("NeedsOptions", NeedsOptions)


class MaskedFrames(nn.Module):
    """ESPnet's Conformer encoder: `forward(xs_pad, masks)`, frames [1, T, F] and a boolean [1, 1, T] mask."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(80, 8)

    def forward(self, xs, masks):
        batch, frames, _ = xs.shape  # frames, not one vector
        return self.proj(xs).masked_fill(~masks.transpose(1, 2), 0.0).reshape(batch, frames, -1)


class MaskedChannels(nn.Module):
    """VITS' encoders: `forward(x, x_mask)`, a channels-first [1, C, T] map multiplied by a [1, 1, T] mask."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(192, 8, 3, padding=1)

    def forward(self, x, x_mask):
        return self.conv(x * x_mask) * x_mask


class DenoisesAStep(nn.Module):
    """A diffusion model: `forward(sample, timestep)`, the step embedded and added to every pixel."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.step = nn.Conv2d(3, 8, 3, padding=1), nn.Linear(1, 8)

    def forward(self, sample, timestep):
        return self.conv(sample) + self.step(timestep.float()[:, None])[..., None, None]


@pytest.mark.parametrize("cls, want, op", [
    (CifarNet, "tensor [1, 3, 32, 32]", "AddmmBackward0"),  # a small image, a volume, a wide spectrogram
    (VolumeNet, "tensor [1, 1, 64, 64, 64]", "ConvolutionBackward0"),
    (MelsFirst, "tensor [1, 128, 200]", "ConvolutionBackward0"),
    (MaskedFrames, "tensor [1, 16, 80], mask [1, 1, 16]", "MaskedFillBackward0"),  # a mask or a step beside it
    (MaskedChannels, "tensor [1, 192, 1024], mask [1, 1, 1024]", "ConvolutionBackward0"),
    (DenoisesAStep, "tensor [1, 3, 224, 224], token ids [1]", "AddmmBackward0"),
])
def test_images_volumes_spectrograms_masks_and_steps_are_guessed(cls, want, op):
    raw, info = extract(cls.__name__, cls)
    assert info["input"] == want and op in raw.ops


def test_a_mask_gives_a_few_completions_and_no_more():
    from narbench.search_engine._target_guesses import MAX_COMPLETIONS, _completions

    x = torch.zeros(1, 16, 80)
    got = [d for _, _, d in _completions(MaskedFrames(), (x,), {}, "tensor [1, 16, 80]")]
    assert got == ["tensor [1, 16, 80], mask [1, 1, 16]", "tensor [1, 16, 80], mask [1, 1, 80]",
                   "tensor [1, 16, 80], mask [1, 16, 80]"] and len(got) <= MAX_COMPLETIONS


class WithPositionsAndTypes(nn.Module):
    """Griffin's `forward(tokens, segment_pos)` and FNet's `forward(input_ids, type_ids)` in one."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.pos, self.types = nn.Embedding(40, 8), nn.Embedding(16, 8), nn.Embedding(2, 8)

    def forward(self, tokens, segment_pos, type_ids):
        return self.embed(tokens) + self.pos(segment_pos) + self.types(type_ids)


def test_positions_and_token_types_are_made_for_token_ids():
    raw, info = extract("WithPositionsAndTypes", WithPositionsAndTypes)
    assert info["input"] == "token ids [1, 16], token ids [1, 16], token ids [1, 16]"
    assert raw.ops.count("EmbeddingBackward0") == 3


class ReadsAValueFirst(nn.Module):
    """Runs on its first guess (an image) only where values exist (`.item()`, so on the CPU, not on meta), and on a
    waveform anywhere: the first guess on the CPU must win over a later guess on meta."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(16000, 4)

    def forward(self, x):
        if x.dim() == 4:
            return self.conv(x) * float(x.abs().max().item() > -1)
        return self.fc(x)


def test_the_first_guess_on_the_cpu_wins_over_a_later_guess_on_meta():
    raw, info = extract("ReadsAValueFirst", ReadsAValueFirst)
    assert info == {"device": "cpu", "input": "tensor [1, 3, 224, 224]"} and "ConvolutionBackward0" in raw.ops


def test_a_keras_style_embedding_that_keeps_its_table_in_a_parameter_dict_is_a_table():
    """Keras 3 on torch keeps a layer's variables in a `ParameterDict` of its own (`torch_params`), not as the
    layer's own parameters: its table's rows still size the token-id guess."""
    from narbench.search_engine._target_guesses import _table_rows

    class KerasEmbedding(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.torch_params = nn.ParameterDict({"embeddings": nn.Parameter(torch.zeros(321, 8))})

    class Other(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.torch_params = nn.ParameterDict({"kernel": nn.Parameter(torch.zeros(321, 8))})

    assert _table_rows(KerasEmbedding()) == 321 and _table_rows(Other()) is None


def _keras_like(name: str, forward):
    """A model class that builds its weights at its first call, as a subclassed Keras 3 model on torch does: the
    first call makes a weight as wide as that call's input's last side (held by the model itself, as Keras keeps its
    variables, so no layer shows a width), even when the call then fails, and sets `built`; a later call of another
    width fails against it. Its class's module says Keras, which is how narbench tells."""

    def __init__(self) -> None:
        nn.Module.__init__(self)
        self.built = False

    def call(self, x):
        if not self.built:
            self.scale = nn.Parameter(torch.ones(x.shape[-1], device=x.device))
            self.built = True
        return forward(self, x)

    return type(name, (nn.Module,), {"__init__": __init__, "forward": call, "__module__": "keras.src.models.fake"})


def _set_model(self, x):
    if x.dim() != 3 or not x.is_floating_point():
        raise ValueError(f"expected a float set [batch, points, features], got {list(x.shape)}")
    return (x * self.scale).sum(-1).mean(1)


def _image_model(self, x):
    if x.dim() != 4 or x.shape[-1] != 3:
        raise ValueError(f"expected a channels-last RGB image, got {list(x.shape)}")
    return (x * self.scale).mean((1, 2))


def test_a_model_built_at_its_first_call_runs_each_guess_on_a_model_constructed_afresh():
    """bayesflow's set transformer (Keras 3, `wildval14`) ran on no guess: the first call (the probe's token ids)
    built it for them, so the right input failed after. Built from code, each input is tried on a new model (an
    instance the caller passes cannot be constructed again: its inputs are tried on it as before)."""
    from narbench.search_engine._target_run import built_at_first_call

    SetModel = _keras_like("SetModel", _set_model)
    assert built_at_first_call(SetModel()) and not built_at_first_call(TinyCNN())
    raw, info = extract("SetModel", SetModel)
    assert info["input"] == "tensor [1, 1, 16000]" and "MulBackward0" in raw.ops  # the first 3-D float guess
    _, kept = extract("SetModel", None, instance=SetModel())  # the probe built it: only an input repaired to fit
    assert kept["input"] == "tensor [1, 1, 16]"


def test_a_keras_model_is_also_guessed_channels_last_images_after_every_other_guess():
    """keras-climate's SatMAE (`wildval9`, subclassed, no declared input shape) takes [1, H, W, 3], Keras's default
    layout; a plain torch module gets no such guess."""
    from narbench.search_engine._target_guesses import _fallbacks

    ImageModel = _keras_like("ImageModel", _image_model)
    raw, info = extract("ImageModel", ImageModel)
    assert info["input"] == "tensor [1, 224, 224, 3]"
    plain = [shape for _, shape, _ in _fallbacks(TinyCNN())]
    keras = [shape for _, shape, _ in _fallbacks(ImageModel())]
    assert keras[: len(plain)] == plain and (1, 224, 224, 3) in keras and (1, 224, 224, 3) not in plain


def _changes_after_its_first_call(self, x):
    if x.dim() != 3 or not x.is_floating_point():
        raise ValueError(f"expected a float set [batch, points, features], got {list(x.shape)}")
    self.calls = getattr(self, "calls", 0) + 1
    y = (x * self.scale).sum(-1)
    return y.mean(1) if self.calls > 1 else y[:, 0]  # the building call takes another path


def test_a_model_built_at_its_first_call_is_read_at_its_second_call_as_it_runs_in_use():
    """keras-bio's HyenaDNA (`wildval10`) runs 16 nodes fewer at its first call, which builds it, than at any later
    one: the graph of a model constructed afresh for an input is read from its second call on that input."""
    Changing = _keras_like("Changing", _changes_after_its_first_call)
    raw, info = extract("Changing", Changing)
    assert info["input"] == "tensor [1, 1, 16000]"
    assert any(op.startswith("MeanBackward") for op in raw.ops)
    assert not any(op.startswith("SelectBackward") for op in raw.ops)


def _configurable(cls, fails: bool = False):
    """`cls` (a `_keras_like` class) with Keras's configuration round trip, `get_config` and `from_config`
    (`fails`: from_config raises, as for a `Lambda` layer's code under Keras's safe mode)."""

    def from_config(kls, config):
        if fails:
            raise ValueError("deserializing a Python lambda is unsafe")
        return kls()

    return type(cls.__name__, (cls,), {"get_config": lambda self: {"name": "m"}, "from_config": classmethod(from_config),
                                       "__module__": cls.__module__})


def test_an_instance_not_yet_built_whose_configuration_makes_one_runs_each_guess_on_a_new_one():
    """kerex's TSMixer (`wildval16`), searched as an instance with no input, was built by the first guess and refused
    every later one. A Keras instance not yet built whose configuration makes a new one (`get_config` /
    `from_config`) is tried as its class is, each guess on a new model, and the caller's instance stays unbuilt; one
    whose configuration does not (a lambda under Keras's safe mode) is tried as before."""
    from narbench.search_engine._target_guesses import keras_afresh

    SetModel = _configurable(_keras_like("SetModel", _set_model))
    mine = SetModel()
    raw, info = extract("SetModel", None, instance=mine)
    assert info["input"] == "tensor [1, 1, 16000]" and "MulBackward0" in raw.ops  # as its class: the first 3-D guess
    assert mine.built is False and keras_afresh(mine) is not None
    Unsafe = _configurable(_keras_like("SetModel", _set_model), fails=True)
    assert keras_afresh(Unsafe()) is None and keras_afresh(TinyCNN()) is None
    _, kept = extract("SetModel", None, instance=Unsafe())  # the probe built it: only an input repaired to fit
    assert kept["input"] == "tensor [1, 1, 16]"
    built = SetModel()
    built(torch.zeros(1, 2, 3))
    assert keras_afresh(built) is None  # built already: its weights are the caller's


def _fixed_width_model(self, x):
    if x.dim() != 3 or x.shape[-1] != 5 or not x.is_floating_point():
        raise ValueError("bad input")
    return (x * self.scale).sum()


def test_an_instance_not_yet_built_that_no_input_runs_is_told_how_to_search_it():
    """An instance cannot be constructed again: when no input runs, the line says to build it first or to point
    search at its class; a torch model failing the same way gets no such advice."""
    from narbench.search_engine._target_inputs import TargetError

    Fixed = _keras_like("Fixed", _fixed_width_model)
    with pytest.raises(TargetError, match=r"Keras 3 model not yet built.*FILE\.py:CLASS"):
        extract("Fixed", None, instance=Fixed())
    built = Fixed()
    built(torch.zeros(1, 4, 5))
    raw, info = extract("Fixed", None, instance=built, shape=(1, 4, 5))
    assert info["input"] == "tensor [1, 4, 5]"

    class Plain(nn.Module):
        def forward(self, x):
            raise ValueError("bad input")

    with pytest.raises(TargetError) as plain:
        extract("Plain", None, instance=Plain())
    assert "Keras" not in str(plain.value)


def _declared(name: str, side: int, declared):
    """A built Keras-like model (its class's module says Keras) declaring `declared` as its input shape, that runs only
    on channels-last RGB images of `side` pixels (a position table of fixed size, as tfclip's ViT towers hold)."""

    def __init__(self) -> None:
        nn.Module.__init__(self)
        self.built, self.input_shape = True, declared
        self.scale = nn.Parameter(torch.ones(3))

    def forward(self, x):
        if tuple(x.shape) != (1, side, side, 3):
            raise ValueError(f"expected [1, {side}, {side}, 3], got {list(x.shape)}")
        return (x * self.scale).mean((1, 2))

    return type(name, (nn.Module,), {"__init__": __init__, "forward": forward, "__module__": "keras.src.models.fake"})


def test_a_keras_model_declaring_images_of_any_side_is_tried_at_each_side_right_after_its_declared_one():
    """tfclip's CLIP and SigLIP image towers (`wildval17`, functional, declaring `(None, None, None, 3)`) hold position
    tables for 128 and 64 pixels: the generic guesses stopped at `MAX_GUESSES` before 64, and 128 was no side tried."""
    from narbench.search_engine._target_guesses import _keras_sides

    for side in (64, 128):
        Model = _declared(f"Tower{side}", side, (None, None, None, 3))
        _, info = extract(Model.__name__, None, instance=Model())
        assert info["input"] == f"tensor [1, {side}, {side}, 3]"
    fixed = _declared("Fixed", 64, (None, 64, 64, 3))()
    assert _keras_sides(fixed, (1, 64, 64, 3)) == [] and _keras_sides(TinyCNN(), (1, 224, 224, 3)) == []


class DigitCaps(nn.Module):
    """A capsule-style network sized for MNIST: its primary capsules are a fixed grid a 28-pixel digit leaves."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.caps = nn.Conv2d(1, 4, 9), nn.Parameter(torch.zeros(1, 4 * 20 * 20))

    def forward(self, x):
        return self.conv(x).flatten(1) + self.caps


class FullClip(nn.Module):
    """I3D's and S3D's head: 16 frames of 224 pixels pooled by 8 and 32, then a fixed 2 x 7 x 7 average."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv3d(3, 4, 3, padding=1)

    def forward(self, x):
        h = torch.nn.functional.avg_pool3d(self.conv(x), (8, 32, 32))
        return torch.nn.functional.avg_pool3d(h, (2, 7, 7)).flatten(1)


class WordLM(nn.Module):
    """PyTorch's word language model: `forward(input, hidden)`, the state `init_hidden()` would make (zeros)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.rnn, self.out = nn.Embedding(50, 8), nn.GRU(8, 8, batch_first=True), nn.Linear(8, 50)

    def forward(self, input, hidden):
        out, hidden = self.rnn(self.emb(input), hidden)
        return self.out(out), hidden


class ClassConditional(nn.Module):
    """A DiT-style denoiser: `forward(x, t, y)`, a step and a class label beside the noisy image."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.step, self.label = nn.Conv2d(3, 8, 3, padding=1), nn.Linear(1, 8), nn.Embedding(10, 8)

    def forward(self, x, t, y):
        return self.conv(x) + (self.step(t.float()[:, None]) + self.label(y))[..., None, None]


@pytest.mark.parametrize("cls, want, op", [
    (DigitCaps, "tensor [1, 1, 28, 28]", "ConvolutionBackward0"),  # session 83: a digit, a full clip,
    (FullClip, "tensor [1, 3, 16, 224, 224]", "ConvolutionBackward0"),
    (WordLM, "token ids [1, 16], NoneType", "EmbeddingBackward0"),  # an initial state, a class label
    (ClassConditional, "tensor [1, 3, 224, 224], token ids [1], token ids [1]", "EmbeddingBackward0"),
])
def test_digits_full_clips_initial_states_and_class_labels_are_guessed(cls, want, op):
    raw, info = extract(cls.__name__, cls)
    assert info["input"] == want and op in "".join(raw.ops)
