"""`narbench.search_engine._target_inputs`: the example input follows the layer that first reads the input
(not registration order), and a forward that fails only with gradients on says why it cannot be searched."""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import narbench  # noqa: E402
from narbench.search_engine._target_inputs import _registered_first, example_inputs  # noqa: E402
from narbench.search_engine._target_run import extract  # noqa: E402
from narbench.search_engine.target import TargetError  # noqa: E402


class HeadFirstLM(nn.Module):
    """A language model that registers its output head (a Linear) before its embeddings."""

    def __init__(self, vocab: int = 50, dim: int = 16) -> None:
        super().__init__()
        self.head = nn.Linear(dim, vocab)
        self.embed, self.pos = nn.Embedding(vocab, dim), nn.Embedding(32, dim)
        self.block = nn.TransformerEncoderLayer(dim, 2, 32, batch_first=True)

    def forward(self, ids):
        x = self.embed(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        return self.head(self.block(x))


class HeadFirstCNN(nn.Module):
    """A CNN that registers its classifier before its convolution."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 10)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


class PositionsFirstCNN(HeadFirstCNN):
    """A CNN whose first layer called is an embedding of positions, not of its input."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = nn.Embedding(4, 10)

    def forward(self, x):
        bias = self.pos(torch.arange(4, device=x.device)).sum(0)  # called before the convolution
        return super().forward(x) + bias


class CallsNumpy(nn.Module):
    """Its forward goes through numpy: fine without gradients, an error with them."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.from_numpy(self.fc(x).numpy()) * 2


class ScalesItsWeightInPlace(nn.Module):
    """Changes a weight in place in its forward: fine without gradients, an error with them."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        self.fc.weight.mul_(1.0)
        return self.fc(x)


class FailsAlways(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        raise RuntimeError("boom in forward")


def test_a_model_that_registers_its_head_first_gets_token_ids_and_searches():
    model = HeadFirstLM()
    assert _registered_first(model) is model.head  # registration order alone would give a float vector
    args, kwargs, described = example_inputs(model, "meta")
    assert described == "token ids [1, 16]" and not args[0].is_floating_point() and kwargs == {}
    result = narbench.search(model, k=3)
    assert result.info["input"] == "token ids [1, 16]" and result.info["device"] == "meta"
    assert len(result) == 3 and result.unknown_ops == {}
    assert model.training  # the probe and the pass give the instance its mode back


@pytest.mark.parametrize("cls", [HeadFirstCNN, PositionsFirstCNN])
def test_a_vision_model_gets_a_float_image(cls):
    raw, info = extract(cls.__name__, cls)
    assert info == {"device": "meta", "input": "tensor [1, 3, 224, 224]"}
    assert "ConvolutionBackward0" in raw.ops


@pytest.mark.parametrize("cls, error", [(CallsNumpy, "Can't call numpy()"),
                                        (ScalesItsWeightInPlace, "in-place operation")])
def test_a_forward_that_fails_only_with_gradients_on_says_so(cls, error):
    with torch.no_grad():  # it runs without gradients: the one thing the tracer cannot do without
        cls()(torch.randn(1, 4))
    with pytest.raises(TargetError) as caught:
        extract(cls.__name__, cls)
    line = str(caught.value)
    assert "\n" not in line and error in line, line
    assert line.startswith(f"the forward pass of {cls.__name__} on tensor [1, 4] fails with gradients on ("), line
    assert "runs with them off" in line and "--inputs" in line


def test_a_forward_that_fails_either_way_keeps_its_own_error():
    with pytest.raises(TargetError, match=r"on tensor \[1, 4\] failed \(RuntimeError: boom in forward\) "
                                          r"\(\d+ other guessed inputs failed too\); if the input") as caught:
        extract("FailsAlways", FailsAlways)
    assert "gradients" not in str(caught.value)


def test_the_cli_says_it_in_one_line_with_exit_2(tmp_path, capsys):
    from narbench.cli import main

    path = tmp_path / "grad_models.py"
    path.write_text(textwrap.dedent('''
        import torch
        from torch import nn


        class CallsNumpy(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return torch.from_numpy(self.fc(x).numpy())
    '''))
    assert main(["search", f"{path}:CallsNumpy"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err and captured.out == "", captured
    assert "fails with gradients on" in lines[0] and "runs with them off" in lines[0], lines[0]
