"""Small hand-written modules for the search tests (imported as a file and as a module)."""

import torch
from torch import nn


class TinyCNN(nn.Module):
    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width)
        self.c2, self.b2 = nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width)
        self.fc = nn.Linear(width, 10)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = torch.relu(self.b2(self.c2(y)) + y)
        return self.fc(y.mean((2, 3)))


class TinyTagger(nn.Module):
    """Embedding + GRU + linear head + log-softmax (LogSoftmax is not in the real vocabulary)."""

    def __init__(self, vocab: int = 100, dim: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, 5)

    def forward(self, tokens):
        return self.head(self.rnn(self.embed(tokens))[0]).log_softmax(-1)


class TinyMLP(nn.Module):
    def __init__(self, width: int) -> None:  # needs --kwargs
        super().__init__()
        self.net = nn.Sequential(nn.Linear(7, width), nn.ReLU(), nn.Linear(width, 3))

    def forward(self, x):
        return self.net(x)


class Broken(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        raise ValueError("bad config")


class BadForward(TinyCNN):
    def forward(self, x):
        raise RuntimeError("boom in forward")


def make_mlp():
    return TinyMLP(width=4)


class DataDependent(TinyCNN):
    """Reads a value in forward (`.item()`): impossible on meta, so it runs on the CPU."""

    def forward(self, x):
        return super().forward(x) * (2.0 if x.sum().item() > 0 else 1.0)


class TwoInputs(nn.Module):
    """An image and a feature vector: `forward(x, extra)` (no single example input fits)."""

    def __init__(self) -> None:
        super().__init__()
        self.cnn, self.side = TinyCNN(), nn.Linear(4, 10)

    def forward(self, x, extra):
        return self.cnn(x) + torch.tanh(self.side(extra))


class DictInput(TwoInputs):
    """One dict of tensors: `forward(batch)`."""

    def forward(self, batch):
        return super().forward(batch["image"], batch["features"])


class KeywordInput(TwoInputs):
    """A keyword-only input: `forward(x, *, extra)`."""

    def forward(self, x, *, extra):
        return super().forward(x, extra)


def two_inputs():
    return torch.randn(1, 3, 32, 32), torch.randn(1, 4)


def dict_input():
    return ({"image": torch.randn(1, 3, 32, 32), "features": torch.randn(1, 4)},)


def keyword_input():
    return (torch.randn(1, 3, 32, 32),), {"extra": torch.randn(1, 4)}


def failing_inputs():
    raise OSError("no such data file")


class _Cube(torch.autograd.Function):
    """A custom autograd function that stays opaque: its forward runs without gradients (as reversible layers'
    do), so extraction cannot trace through it (`narbench.zoo.functions`) and its node name (`_CubeBackward`) is
    in no op table."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        with torch.no_grad():
            return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad


class CustomOpMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(_Cube.apply(self.fc1(x)))
