"""Architectures written by hand from their papers, to compare with the zoos' implementations.

Each class is an independent implementation of a design the `real` dataset holds (torchvision,
timm or transformers wrote theirs); `benchmarks/search/bench_pairs.py` searches each and reports where
its zoo counterpart ranks. GPT-2 and BERT are in `out_of_zoo.py`.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else None)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet50(nn.Module):
    """ResNet-50 (He et al. 2016): 7x7 stem, max pool, [3, 4, 6, 3] bottlenecks, average pool, fc."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(blocks):
                layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * 4
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.layers(self.stem(x)), 1), 1))


class ViTB16(nn.Module):
    """ViT-B/16 (Dosovitskiy et al. 2021): patch embedding, class token, learned positions, 12
    pre-norm blocks with attention written by hand, GELU MLP, classifier on the class token."""

    def __init__(self, dim: int = 768, depth: int = 12, heads: int = 12, classes: int = 1000) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 16, 16)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.zeros(1, 197, dim))
        self.heads = heads
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "n1": nn.LayerNorm(dim), "qkv": nn.Linear(dim, 3 * dim), "proj": nn.Linear(dim, dim),
            "n2": nn.LayerNorm(dim), "fc1": nn.Linear(dim, 4 * dim), "fc2": nn.Linear(4 * dim, dim)}) for _ in range(depth))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, classes)

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        b, n, d = x.shape
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["n1"](x)).chunk(3, dim=-1)
            q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
            a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), dim=-1)
            x = x + blk["proj"]((a @ v).transpose(1, 2).reshape(b, n, d))
            x = x + blk["fc2"](F.gelu(blk["fc1"](blk["n2"](x))))
        return self.head(self.norm(x)[:, 0])


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hid = cin * expand
        layers = [] if expand == 1 else [nn.Conv2d(cin, hid, 1, bias=False), nn.BatchNorm2d(hid), nn.ReLU6()]
        layers += [nn.Conv2d(hid, hid, 3, stride, 1, groups=hid, bias=False), nn.BatchNorm2d(hid), nn.ReLU6(),
                   nn.Conv2d(hid, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (Sandler et al. 2018): inverted residuals with linear bottlenecks."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
        layers, cin = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()], 32
        for t, c, n, s in cfg:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += [nn.Conv2d(cin, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x):
        return self.classifier(self.features(x).mean((2, 3)))


class ConvNeXtT(nn.Module):
    """ConvNeXt-T (Liu et al. 2022): patchify stem, [3, 3, 9, 3] blocks of depthwise 7x7 conv,
    LayerNorm, inverted-bottleneck MLP with GELU, layer scale; LayerNorm + strided conv between stages."""

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        dims, depths = (96, 192, 384, 768), (3, 3, 9, 3)
        self.stem = nn.Conv2d(3, dims[0], 4, 4)
        self.stem_norm = nn.LayerNorm(dims[0])
        self.stages = nn.ModuleList()
        self.downs = nn.ModuleList()
        for i, (d, n) in enumerate(zip(dims, depths)):
            if i:
                self.downs.append(nn.ModuleDict({"norm": nn.LayerNorm(dims[i - 1]), "conv": nn.Conv2d(dims[i - 1], d, 2, 2)}))
            self.stages.append(nn.ModuleList(nn.ModuleDict({
                "dw": nn.Conv2d(d, d, 7, padding=3, groups=d), "norm": nn.LayerNorm(d), "fc1": nn.Linear(d, 4 * d),
                "fc2": nn.Linear(4 * d, d)}) for _ in range(n)))
        self.gammas = nn.ParameterList(nn.Parameter(torch.full((d,), 1e-6)) for d, n in zip(dims, depths) for _ in range(n))
        self.norm, self.head = nn.LayerNorm(dims[-1]), nn.Linear(dims[-1], classes)

    @staticmethod
    def _ln2d(norm, x):
        return norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    def forward(self, x):
        x = self._ln2d(self.stem_norm, self.stem(x))
        g = iter(self.gammas)
        for i, stage in enumerate(self.stages):
            if i:
                x = self.downs[i - 1]["conv"](self._ln2d(self.downs[i - 1]["norm"], x))
            for blk in stage:
                y = blk["norm"](blk["dw"](x).permute(0, 2, 3, 1))
                y = blk["fc2"](F.gelu(blk["fc1"](y))) * next(g)
                x = x + y.permute(0, 3, 1, 2)
        return self.head(self.norm(x.mean((2, 3))))


class LlamaDecoder(nn.Module):
    """A LLaMA-style decoder (Touvron et al. 2023): RMSNorm by hand, rotary position embedding by
    hand, causal attention, SwiGLU MLP, untied output head."""

    def __init__(self, vocab: int = 32000, dim: int = 256, heads: int = 8, layers: int = 16, hidden: int = 688) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.heads = heads
        self.layers = nn.ModuleList(nn.ModuleDict({
            "q": nn.Linear(dim, dim, bias=False), "k": nn.Linear(dim, dim, bias=False), "v": nn.Linear(dim, dim, bias=False),
            "o": nn.Linear(dim, dim, bias=False), "gate": nn.Linear(dim, hidden, bias=False),
            "up": nn.Linear(dim, hidden, bias=False), "down": nn.Linear(hidden, dim, bias=False)}) for _ in range(layers))
        self.norm_w = nn.ParameterList(nn.Parameter(torch.ones(dim)) for _ in range(2 * layers + 1))
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    @staticmethod
    def rms(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

    @staticmethod
    def rotate(x, cos, sin):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def forward(self, tokens):
        b, n = tokens.shape
        x = self.embed(tokens)
        hd = x.shape[-1] // self.heads
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=x.device).float() / hd))
        ang = torch.outer(torch.arange(n, device=x.device).float(), inv)
        cos, sin = torch.cat((ang, ang), -1).cos(), torch.cat((ang, ang), -1).sin()
        mask = torch.full((n, n), float("-inf"), device=x.device).triu(1)
        for i, blk in enumerate(self.layers):
            h = self.rms(x, self.norm_w[2 * i])
            q, k, v = (blk[t](h).view(b, n, self.heads, hd).transpose(1, 2) for t in "qkv")
            q, k = self.rotate(q, cos, sin), self.rotate(k, cos, sin)
            a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(hd) + mask, dim=-1)
            x = x + blk["o"]((a @ v).transpose(1, 2).reshape(b, n, -1))
            h = self.rms(x, self.norm_w[2 * i + 1])
            x = x + blk["down"](F.silu(blk["gate"](h)) * blk["up"](h))
        return self.lm_head(self.rms(x, self.norm_w[-1]))
