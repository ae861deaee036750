"""`narbench.search_engine._target_repairs`: inputs repaired from the error a guessed input raised.

The errors are torch's and Python's own, raised here on each device the search runs on (meta and CPU word them
differently), so a torch release that rewords one fails these tests instead of silently repairing nothing."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from narbench.search_engine._target_guesses import guesses  # noqa: E402
from narbench.search_engine._target_repairs import MAX_REPAIRS, MAX_SIZED, completed, shapes, sized  # noqa: E402
from narbench.search_engine._target_run import extract  # noqa: E402

DEVICES = ("meta", "cpu")


def error_of(fn) -> BaseException:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the error is the point
        return exc
    raise AssertionError("no error raised")


@pytest.mark.parametrize("device", DEVICES)
def test_a_linear_of_another_width_names_its_width(device):
    x = torch.randn(1, 16, 256, device=device)
    w = torch.randn(32, 2, device=device)
    (got,) = shapes(x, error_of(lambda: F.linear(x, w)))
    assert list(got.shape) == [1, 16, 2] and got.device == x.device and got.is_floating_point()


@pytest.mark.parametrize("device", DEVICES)
def test_a_norm_over_other_sides_names_them(device):
    x = torch.randn(1, 16, 256, device=device)
    norm = nn.LayerNorm(560, device=device)
    (got,) = shapes(x, error_of(lambda: norm(x)))
    assert list(got.shape) == [1, 16, 560]
    inner = torch.randn(1, 224, 3, device=device)  # the norm read a permuted copy, not the input: no repair
    assert shapes(torch.randn(1, 3, 224, device=device), error_of(lambda: norm(inner))) == []


@pytest.mark.parametrize("device", DEVICES)
def test_a_fixed_position_table_names_the_length(device):
    ids = torch.arange(16, device=device).reshape(1, 16)
    table = torch.randn(77, 8, device=device)
    (got,) = shapes(ids, error_of(lambda: torch.randn(1, 16, 8, device=device).add_(table)))
    assert list(got.shape) == [1, 77] and not got.is_floating_point()
    (got,) = shapes(ids, error_of(lambda: torch.randn(1, 16, 8, device=device) + table))
    assert list(got.shape) == [1, 77]


def test_unpacking_names_the_number_of_axes():
    x = torch.randn(1, 32)
    (got,) = shapes(x, error_of(lambda: [b for b, t, c in [x.shape]]))
    assert list(got.shape) == [1, 16, 32]
    image = torch.randn(1, 3, 224, 224)
    (got,) = shapes(image, error_of(lambda: [b for b, t, c in [image.shape]]))
    assert list(got.shape) == [1, 224, 224]
    ids = torch.zeros(1, 32, dtype=torch.long)  # token ids are not given more axes
    assert shapes(ids, error_of(lambda: [b for b, t, c in [ids.shape]])) == []


@pytest.mark.parametrize("device", DEVICES)
def test_a_sequence_pooled_to_nothing_is_made_longer(device):
    x = torch.randn(1, 4, 8, device=device)
    (got,) = shapes(x, error_of(lambda: F.max_pool1d(x, 16)))
    assert list(got.shape) == [1, 4, 128]


def test_an_error_that_names_nothing_repairs_nothing():
    assert shapes(torch.randn(1, 8), ValueError("expected a dict of features")) == []
    x = torch.randn(1, 8)  # a Linear deeper in, after a reshape: its width is no side of the input
    assert shapes(x, error_of(lambda: F.linear(x.reshape(2, 4).repeat(1, 3), torch.randn(4, 5)))) == []


class TwoSequences(nn.Module):
    """A seq2seq model whose second sequence has a name of its own (Kronos' `s2_ids`)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(100, 8)

    def forward(self, ids, s2_ids, lengths):
        return self.emb(ids) + self.emb(s2_ids) + lengths


def test_missing_arguments_are_filled_by_name_or_by_a_copy():
    model, ids = TwoSequences(), torch.arange(16).reshape(1, 16)
    exc = error_of(lambda: model(ids))
    got = completed(model, ids, exc, ["s2_ids", "lengths"], lambda name, x: [x.new_tensor([5])] if "len" in name else None)
    assert [list(t.shape) for t in got] == [[1, 16], [1, 16], [1]] and torch.equal(got[1], ids)
    assert completed(model, ids, ValueError("missing 1 required positional argument"), ["s2_ids"], lambda *a: None) is None


class SegmentBert(nn.Module):
    """bert4torch's `forward(*inputs)`: token ids, then segment ids."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens, self.segments = nn.Embedding(100, 8), nn.Embedding(2, 8)

    def forward(self, *inputs):
        return self.tokens(inputs[0]) + self.segments(inputs[1])


def test_a_forward_of_any_inputs_that_wants_segments_gets_zeros():
    model, ids = SegmentBert(), torch.arange(16).reshape(1, 16)
    got = completed(model, ids, error_of(lambda: model(ids)), [], lambda *a: None)
    assert len(got) == 2 and torch.equal(got[1], torch.zeros_like(ids))
    assert completed(model, torch.randn(1, 16), error_of(lambda: model(ids)), [], lambda *a: None) is None


class CoordinateNet(nn.Module):
    """SIREN: a sine layer of its own (weight and bias, no Linear) on 2-D coordinates [batch, points, 2]."""

    def __init__(self) -> None:
        super().__init__()
        self.first = SineLayer(2, 32)
        self.out = nn.Linear(32, 1)

    def forward(self, coords):
        return self.out(self.first(coords))


class SineLayer(nn.Module):
    def __init__(self, fan_in: int, fan_out: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(fan_out))
        self.weight = nn.Parameter(torch.randn(fan_out, fan_in))

    def forward(self, x):
        return torch.sin(F.linear(x, self.weight, self.bias))


class ClipText(nn.Module):
    """Stable Diffusion's CLIP text encoder: token ids plus a learned table of exactly 77 positions."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(1000, 8)
        self.pos = nn.Parameter(torch.zeros(77, 8))
        self.out = nn.Linear(8, 8)

    def forward(self, ids):
        return self.out(self.emb(ids) + self.pos)


@pytest.mark.parametrize("cls, want", [
    (CoordinateNet, "tensor [1, 16, 2]"),
    (ClipText, "token ids [1, 77]"),
    (TwoSequences, "token ids [1, 16], token ids [1, 16], token ids [1]"),
    (SegmentBert, "token ids [1, 16], token ids [1, 16]"),
])
def test_a_model_no_guess_runs_runs_on_its_repaired_input(cls, want):
    planned = [d for _, _, d in guesses(cls(), "meta")]  # no errors given: the planned guesses alone
    assert want not in planned
    raw, info = extract(cls.__name__, cls)
    assert info["input"] == want and raw.ops


class Refuses(nn.Module):
    """A forward that fails on every input with an error naming a size (so repairs are tried, and fail)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied (1x{x.shape[-1]} and {x.shape[-1] + 1}x4)")


def test_repairs_are_bounded_and_end_in_the_first_guess_error():
    errors: list = []
    tried = []
    model = Refuses()
    for args, kwargs, described in guesses(model, "meta", errors):
        tried.append(described)
        errors.append(("meta", "forward", error_of(lambda: model(*args, **kwargs)), described, 1))
    planned = [d for _, _, d in guesses(model, "meta")]
    assert tried[:len(planned)] == planned and 0 < len(tried) - len(planned) <= MAX_REPAIRS + MAX_SIZED
    assert len(set(tried)) == len(tried)  # none twice
    with pytest.raises(Exception, match="forward pass of Refuses"):
        extract("Refuses", Refuses)


def test_a_repair_larger_than_the_cap_is_not_made():
    x = torch.randn(1, 3, 224, 224)  # a width read off a flattened feature map: [1, 3, 224, 100352] is 67M values
    exc = RuntimeError("mat1 and mat2 shapes cannot be multiplied (672x224 and 100352x4096)")
    assert shapes(x, exc) == []
    (got,) = shapes(x, RuntimeError("mat1 and mat2 shapes cannot be multiplied (672x224 and 64x4096)"))
    assert list(got.shape) == [1, 3, 224, 64]


class ClassDiffusion(nn.Module):
    """A DiT's forward: the noisy latent, then a step and class labels that default to None but are needed."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.steps, self.classes = nn.Conv2d(4, 8, 3), nn.Embedding(1000, 8), nn.Embedding(10, 8)

    def forward(self, x, timestep=None, class_labels=None, note=None):
        cond = self.steps(timestep.reshape(-1)) + self.classes(class_labels)
        return self.conv(x) + cond[:, :, None, None]


class SpeakerNet(nn.Module):
    """A voice model: features, then a speaker id that an embedding reads."""

    def __init__(self) -> None:
        super().__init__()
        self.proj, self.speakers = nn.Linear(80, 8), nn.Embedding(4, 8)

    def forward(self, feats, speaker_id):
        return self.proj(feats) + self.speakers(speaker_id)[:, None]


def test_arguments_that_default_to_none_are_given_where_their_names_say_what_they_are():
    from narbench.search_engine._target_guesses import _filler
    from narbench.search_engine._target_repairs import optional

    model, x = ClassDiffusion(), torch.randn(1, 4, 8, 8)
    named = optional(model, x, error_of(lambda: model(x)), _filler)
    assert set(named) == {"timestep", "class_labels"}  # `note` says nothing: left out
    assert named["class_labels"].dtype == torch.long and list(named["class_labels"].shape) == [1]
    assert optional(model, x, ValueError("expected a latent"), _filler) is None
    raw, info = extract("ClassDiffusion", ClassDiffusion)
    assert "timestep=" in info["input"] and "class_labels=token ids [1]" in info["input"] and raw.ops


def test_an_argument_named_as_an_id_beside_features_is_one_id_per_example():
    raw, info = extract("SpeakerNet", SpeakerNet)
    assert info["input"].endswith("token ids [1]") and raw.ops


def test_a_repair_that_raises_ends_the_repairs_not_the_search(monkeypatch):
    from narbench.search_engine import _target_repairs

    def broken(*_args):
        raise RuntimeError("a repair that cannot be made")

    monkeypatch.setattr(_target_repairs, "shapes", broken)
    monkeypatch.setattr(_target_repairs, "sized", broken)
    model, errors, tried = Refuses(), [], []
    for args, kwargs, described in guesses(model, "meta", errors):
        tried.append(described)
        errors.append(("meta", "forward", error_of(lambda: model(*args, **kwargs)), described, 1))
    assert tried == [d for _, _, d in guesses(model, "meta")]  # the planned guesses, then nothing more


class TextImage(nn.Module):
    """A CLIP: token ids, then `pixel_values`, an RGB image."""

    def __init__(self) -> None:
        super().__init__()
        self.text, self.image = nn.Embedding(100, 8), nn.Conv2d(3, 8, 16, stride=16)

    def forward(self, input_ids, pixel_values):
        return self.text(input_ids).mean(1) + self.image(pixel_values).mean((2, 3))


def test_a_further_argument_is_of_the_kind_its_name_says():
    from narbench.search_engine._target_repairs import _of_kind

    ids, points = torch.zeros(2, 16, dtype=torch.long), torch.randn(2, 16, 64)
    assert list(_of_kind("pixel_values", ids).shape) == [2, 3, 224, 224]
    assert list(_of_kind("mels", ids).shape) == [2, 80, 32]
    assert list(_of_kind("audio", ids).shape) == [2, 16000]
    assert list(_of_kind("coors", points).shape) == [2, 16, 3]
    assert _of_kind("s2_ids", ids) is None and _of_kind("coors", ids[0]) is None
    raw, info = extract("TextImage", TextImage)
    assert info["input"] == "token ids [1, 16], tensor [1, 3, 224, 224]" and raw.ops


@pytest.mark.parametrize("device", DEVICES)
def test_a_flattened_image_names_its_side(device):
    """LightCNN (`wildval15`) flattens a 128-pixel feature map into a fixed Linear: from 224 pixels its width is
    (224 / 128)^2 times too large, so the side is 128; a width no whole side gives repairs nothing (a side is
    searched for it last: `sized`, rounded)."""
    x = torch.randn(1, 1, 224, 224, device=device)
    w = torch.randn(256, 8 * 8 * 128, device=device)
    feats = torch.randn(1, 14 * 14 * 128, device=device)
    (got,) = shapes(x, error_of(lambda: F.linear(feats, w)))
    assert list(got.shape) == [1, 1, 128, 128] and got.is_floating_point()
    odd = torch.randn(1, 14 * 14 * 128 + 1, device=device)
    assert shapes(x, error_of(lambda: F.linear(odd, w))) == []
    (near,) = sized(x, error_of(lambda: F.linear(odd, w)))
    assert list(near.shape) == [1, 1, 128, 128]
    sequence = torch.randn(16, 14 * 14 * 128, device=device)  # a row per position, not per example: no image
    assert shapes(x, error_of(lambda: F.linear(sequence, w))) == []


class FortyPixels(nn.Module):
    """A classifier sized for 40-pixel images (no side narbench guesses): a stride-2 conv, flattened, a Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.head = nn.Linear(4 * 20 * 20, 10)

    def forward(self, x):
        return self.head(self.conv(x).flatten(1))


def test_a_classifier_for_an_unguessed_side_runs_on_the_side_its_error_names():
    planned = [d for _, _, d in guesses(FortyPixels(), "meta")]
    assert "tensor [1, 3, 40, 40]" not in planned
    raw, info = extract("FortyPixels", FortyPixels)
    assert info["input"] == "tensor [1, 3, 40, 40]" and raw.ops


class AtariNet(nn.Module):
    """The Nature DQN (`wildval32`, `wildval33`): 84-pixel frames, three strided convs, a fixed 7 x 7 x 64 map into a
    Linear. From 224 pixels no whole scaling gives 7 (the convs cut pixels off), so `_flattened` names no side."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.Sequential(nn.Conv2d(4, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
                                   nn.Conv2d(64, 64, 3, 1), nn.ReLU())
        self.head = nn.Linear(7 * 7 * 64, 6)

    def forward(self, x):
        return self.head(self.convs(x).flatten(1))


class FixedPoints(nn.Module):
    """PointNet as `wildval34`'s row builds it: per-point convs, a max pool over a fixed 256 points, a Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.Sequential(nn.Conv1d(3, 16, 1), nn.ReLU(), nn.Conv1d(16, 64, 1))
        self.pool = nn.MaxPool1d(256)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.pool(self.convs(x)).flatten(1))


@pytest.mark.parametrize("device", DEVICES)
def test_a_fixed_side_is_searched_from_the_tries_before(device):
    """No whole scaling of 224 gives the DQN's 7 x 7 map (`shapes` names nothing): the first try scales the side by
    the square root of the widths' ratio (65, a 4 x 4 map), the next reads the side off the line through both tries
    (89, in 84-91, the sides that give 7 x 7); a length is scaled as is (1,024 points -> 256); a side already tried
    is not named again."""
    model = AtariNet().to(device)
    x = torch.randn(1, 4, 224, 224, device=device)
    first = error_of(lambda: model(x))
    assert shapes(x, first) == []
    (y,) = sized(x, first)
    assert list(y.shape) == [1, 4, 65, 65]
    (z,) = sized(y, error_of(lambda: model(y)), [(x, first)])
    assert z.shape[0] == 1 and z.shape[1] == 4 and z.shape[-1] == z.shape[-2] and 84 <= z.shape[-1] <= 91
    assert model(z).shape == (1, 6)
    assert sized(x, first, [(y, first)]) == []  # the scaling names 65 again, tried already
    assert sized(x, RuntimeError("mat1 and mat2 shapes cannot be multiplied (1x0 and 3136x6)")) == []  # no width
    points = FixedPoints().to(device)
    p = torch.randn(1, 3, 1024, device=device)
    (q,) = sized(p, error_of(lambda: points(p)))
    assert list(q.shape) == [1, 3, 256] and points(q).shape == (1, 10)


@pytest.mark.parametrize("cls, runs", [(AtariNet, [f"tensor [1, 4, {s}, {s}]" for s in range(84, 92)]),
                                       (FixedPoints, ["tensor [1, 3, 256]"])])
def test_a_model_of_a_fixed_size_no_guess_runs_runs_on_the_size_searched(cls, runs):
    planned = [d for _, _, d in guesses(cls(), "meta")]
    assert not set(runs) & set(planned)  # no guess, and no repair: the size is searched after every other input
    raw, info = extract(cls.__name__, cls)
    assert info["input"] in runs and raw.ops
