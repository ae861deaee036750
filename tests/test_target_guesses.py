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


def test_a_model_the_first_guess_fits_keeps_it():
    raw, info = extract("TinyCNN", TinyCNN)
    assert info["input"] == example_inputs(TinyCNN(), "meta")[2] == "tensor [1, 3, 224, 224]"


def test_guesses_are_distinct_and_capped():
    seen = [d for _, _, d in guesses(SequenceBlock(), "meta")]
    assert len(seen) == len(set(seen)) and 1 < len(seen) <= MAX_GUESSES + 1


def test_a_given_shape_is_the_only_input_tried():
    with pytest.raises(TargetError, match=r"on tensor \[1, 8\] failed \(ValueError: not enough values to unpack"):
        extract("SequenceBlock", SequenceBlock, shape=(1, 8))
