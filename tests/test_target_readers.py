"""`narbench.search_engine._target_readers`: a forward's unnamed further arguments made as the layers that read them."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from narbench.search_engine._target_inputs import describe  # noqa: E402
from narbench.search_engine._target_guesses import _by_readers as by_readers  # noqa: E402
from narbench.search_engine._target_run import extract  # noqa: E402


class DecisionTransformer(nn.Module):
    """`forward(timesteps, states, actions, returns)`: an embedding reads the steps, a Linear each of the others, and
    the states' shape is unpacked before any layer reads them (as min-decision-transformer does)."""

    def __init__(self) -> None:
        super().__init__()
        self.step, self.state = nn.Embedding(100, 8), nn.Linear(17, 8)
        self.action, self.ret = nn.Linear(6, 8), nn.Linear(1, 8)

    def forward(self, timesteps, states, actions, returns):
        b, t, _ = states.shape
        h = self.step(timesteps)
        return (self.state(states) + h + self.action(actions) + self.ret(returns)).reshape(b, t, 8)


class Actor(nn.Module):
    """An actor-critic's `forward(x, hx, cx)`: an LSTM cell reads the features and its two states."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.cell = nn.Linear(12, 20), nn.LSTMCell(20, 9)

    def forward(self, x, hx, cx):
        return self.cell(torch.relu(self.fc(x)), (hx, cx))[0]


class Stem(nn.Module):
    """A block with a weight of its own holding the layers that read each argument (DiT's first layer)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(8))
        self.image, self.label = nn.Conv2d(4, 8, 3), nn.Embedding(5, 8)

    def forward(self, x, cond):
        b, c, h, w = x.shape
        return (self.image(x) * self.scale[:, None, None] + self.label(cond)[..., None, None]).mean((2, 3))


class Denoiser(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = Stem()

    def forward(self, x, cond):
        return self.stem(x, cond)


def test_each_argument_is_made_as_the_layer_that_first_reads_it():
    made = by_readers(DecisionTransformer(), "cpu")
    assert describe(made[0], {}) == "token ids [1, 16], tensor [1, 16, 17], tensor [1, 16, 6], tensor [1, 16, 1]"
    assert int(made[0][0].max()) < 100


def test_a_recurrent_cell_makes_its_input_and_its_states():
    made = by_readers(Actor(), "cpu")
    assert describe(made[0], {}) == "tensor [1, 16, 12], tensor [1, 9], tensor [1, 9]"
    assert describe(made[1], {}) == "tensor [1, 12], tensor [1, 9], tensor [1, 9]"


def test_the_layers_a_block_holds_read_its_arguments_and_an_unpacked_shape_is_repaired():
    made = by_readers(Denoiser(), "cpu")
    assert [describe(a, {}) for a in made] == ["tensor [1, 4, 224, 224], token ids [1, 16]",
                                              "tensor [1, 4, 224, 224], token ids [1]"]


@pytest.mark.parametrize("cls, want, op", [
    (DecisionTransformer, "token ids [1, 16], tensor [1, 16, 17], tensor [1, 16, 6], tensor [1, 16, 1]",
     "EmbeddingBackward0"),
    (Actor, "tensor [1, 12], tensor [1, 9], tensor [1, 9]", "AddmmBackward0"),
    (Denoiser, "tensor [1, 4, 224, 224], token ids [1, 16]", "ConvolutionBackward0"),
])
def test_a_forward_of_unnamed_arguments_is_searched_with_no_inputs_given(cls, want, op):
    raw, info = extract(cls.__name__, cls)
    assert info["input"] == want and op in "".join(raw.ops)


def test_a_forward_of_one_argument_gets_none():
    assert by_readers(nn.Linear(3, 4), "cpu") == []


class StepAsFloat(nn.Module):
    """A denoiser whose step must be a float while gradients are on (mindiffusion's U-Net, given the step as ids, fails
    with gradients on and runs with them off)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.step = nn.Conv2d(3, 8, 3), nn.Linear(1, 8)

    def forward(self, x, t):
        if torch.is_grad_enabled() and not t.is_floating_point():
            raise RuntimeError("Autograd not support dtype: Long")
        return self.conv(x).mean((2, 3)) + self.step(t.float().reshape(-1, 1))


def test_a_first_input_that_fails_only_with_gradients_on_does_not_end_the_guesses():
    raw, info = extract("StepAsFloat", StepAsFloat)
    assert info["input"] == "tensor [1, 3, 224, 224], tensor [1, 16, 1]" and "ConvolutionBackward0" in raw.ops
