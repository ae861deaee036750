"""Hand-written models that are in no model zoo, for `narbench search` (docs/search.md).

    narbench search examples/out_of_zoo.py:UNet
    narbench search examples/out_of_zoo.py:LSTMTagger
    narbench search examples/out_of_zoo.py:ResidualCNN
    narbench search examples/out_of_zoo.py:TransformerEncoder
    narbench search examples/out_of_zoo.py:GPT2Decoder
    narbench search examples/out_of_zoo.py:BertEncoder

GPT2Decoder and BertEncoder are written from their papers' descriptions, not from any zoo's code:
attention by hand, GPT-2's tanh-GELU by its formula, BERT's GELU by erf.
"""

import math

import torch
from torch import nn


def conv_block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """A small U-Net (Ronneberger et al., 2015): 3 down / 3 up levels with skip concatenations."""

    def __init__(self, in_channels: int = 3, classes: int = 2, width: int = 16) -> None:
        super().__init__()
        w = [width, 2 * width, 4 * width, 8 * width]
        self.down = nn.ModuleList([conv_block(in_channels, w[0]), conv_block(w[0], w[1]), conv_block(w[1], w[2])])
        self.bottom = conv_block(w[2], w[3])
        self.up = nn.ModuleList([nn.ConvTranspose2d(w[i + 1], w[i], 2, stride=2) for i in (2, 1, 0)])
        self.dec = nn.ModuleList([conv_block(2 * w[i], w[i]) for i in (2, 1, 0)])
        self.head = nn.Conv2d(w[0], classes, 1)

    def forward(self, x):
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = nn.functional.max_pool2d(x, 2)
        x = self.bottom(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips)):
            x = dec(torch.cat([up(x), skip], dim=1))
        return self.head(x)


class LSTMTagger(nn.Module):
    """A part-of-speech tagger: word embeddings, a 2-layer bidirectional LSTM, a linear tag head."""

    def __init__(self, vocab: int = 5000, dim: int = 64, hidden: int = 128, tags: int = 17) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * hidden, tags)

    def forward(self, tokens):
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out).log_softmax(-1)


class ResidualBlock(nn.Module):
    def __init__(self, channels: int, stride: int = 1) -> None:
        super().__init__()
        cin = channels // stride
        self.conv1 = nn.Conv2d(cin, channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.short = nn.Sequential() if stride == 1 else nn.Sequential(
            nn.Conv2d(cin, channels, 1, stride=stride, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.short(x))


class ResidualCNN(nn.Module):
    """A custom CIFAR-style residual CNN: 3 stages of 3 basic blocks, 32x32 inputs."""

    def __init__(self, classes: int = 10, width: int = 16) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        blocks = []
        for stage in range(3):
            c = width * 2**stage
            blocks += [ResidualBlock(c, stride=1 if stage == 0 else 2), ResidualBlock(c), ResidualBlock(c)]
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(4 * width, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(x.mean((2, 3)))


class TransformerEncoder(nn.Module):
    """A custom pre-norm transformer encoder for text classification, written out by hand."""

    def __init__(self, vocab: int = 8000, dim: int = 128, heads: int = 4, layers: int = 4, classes: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, 512, dim))
        self.heads = heads
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "ln1": nn.LayerNorm(dim), "qkv": nn.Linear(dim, 3 * dim), "proj": nn.Linear(dim, dim),
            "ln2": nn.LayerNorm(dim), "fc1": nn.Linear(dim, 4 * dim), "fc2": nn.Linear(4 * dim, dim)})
            for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[:, : tokens.shape[1]]
        b, n, d = x.shape
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            att = (q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5).softmax(-1)
            x = x + blk["proj"]((att @ v).transpose(1, 2).reshape(b, n, d))
            x = x + blk["fc2"](nn.functional.gelu(blk["fc1"](blk["ln2"](x))))
        return self.head(self.norm(x)[:, 0])


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    b, n, d = x.shape
    return x.view(b, n, heads, d // heads).transpose(1, 2)


class GPT2Decoder(nn.Module):
    """A GPT-2-style decoder-only language model: pre-norm blocks, causal self-attention written
    out by hand, tanh-approximate GELU by its formula, tied input/output embeddings."""

    def __init__(self, vocab: int = 8000, dim: int = 256, heads: int = 8, layers: int = 12, ctx: int = 1024) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(ctx, dim)
        self.heads = heads
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "ln1": nn.LayerNorm(dim), "attn": nn.Linear(dim, 3 * dim), "proj": nn.Linear(dim, dim),
            "ln2": nn.LayerNorm(dim), "fc": nn.Linear(dim, 4 * dim), "out": nn.Linear(4 * dim, dim)})
            for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)), persistent=False)

    @staticmethod
    def gelu(x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    def forward(self, tokens):
        n = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(n, device=tokens.device))
        for blk in self.blocks:
            q, k, v = blk["attn"](blk["ln1"](x)).split(x.shape[-1], dim=2)
            q, k, v = (_heads(t, self.heads) for t in (q, k, v))
            w = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
            w = w.masked_fill(~self.mask[:n, :n], float("-inf")).softmax(-1)
            y = (w @ v).transpose(1, 2).reshape(x.shape)
            x = x + blk["proj"](y)
            x = x + blk["out"](self.gelu(blk["fc"](blk["ln2"](x))))
        return self.ln_f(x) @ self.wte.weight.T


class BertEncoder(nn.Module):
    """A BERT-style encoder: word + position + segment embeddings, post-norm blocks, attention
    by hand, erf GELU, a tanh pooler over the first token and a classifier."""

    def __init__(self, vocab: int = 8000, dim: int = 256, heads: int = 8, layers: int = 12, classes: int = 2) -> None:
        super().__init__()
        self.words, self.positions, self.segments = nn.Embedding(vocab, dim), nn.Embedding(512, dim), nn.Embedding(2, dim)
        self.ln_emb = nn.LayerNorm(dim)
        self.heads = heads
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "q": nn.Linear(dim, dim), "k": nn.Linear(dim, dim), "v": nn.Linear(dim, dim), "o": nn.Linear(dim, dim),
            "ln1": nn.LayerNorm(dim), "fc": nn.Linear(dim, 4 * dim), "out": nn.Linear(4 * dim, dim),
            "ln2": nn.LayerNorm(dim)}) for _ in range(layers))
        self.pool, self.classifier = nn.Linear(dim, dim), nn.Linear(dim, classes)

    def forward(self, tokens):
        n = tokens.shape[1]
        pos = torch.arange(n, device=tokens.device)
        x = self.ln_emb(self.words(tokens) + self.positions(pos) + self.segments(torch.zeros_like(tokens)))
        for blk in self.blocks:
            q, k, v = (_heads(blk[name](x), self.heads) for name in "qkv")
            w = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(-1)
            y = (w @ v).transpose(1, 2).reshape(x.shape)
            x = blk["ln1"](x + blk["o"](y))
            h = blk["fc"](x)
            x = blk["ln2"](x + blk["out"](h * 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0)))))
        return self.classifier(torch.tanh(self.pool(x[:, 0])))
