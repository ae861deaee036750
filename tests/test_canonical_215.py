"""Canonical 2.15: a scan written by hand reads as one written with tensor ops (`buffer-writes`, `product-sums`,
`narbench.data.canonical_scans`). Real torch modules, extracted as a search extracts them: a small selective scan
whose outputs are written into a buffer or stacked, and read out by a product summed or by a matmul."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from narbench.data.canonical import UPGRADES, VERSIONS, at_least, canonical_vocabulary, reaches, upgrade  # noqa: E402
from narbench.data.canonical_rules import rules, rules_sha256  # noqa: E402
from narbench.zoo.extract import extract_graph  # noqa: E402

B, T, D, N = 1, 6, 8, 4


class Scan(nn.Module):
    """h_t = a_t * h_{t-1} + b_t x_t, y_t = <h_t, c_t>: outputs `written` into a buffer (`y[:, t] = ...`) or
    `stacked`; the readout a `summed` product (`(h * c).sum(-1)`) or a `matmul` (`h @ c`)."""

    def __init__(self, outputs: str, readout: str) -> None:
        super().__init__()
        self.outputs, self.readout = outputs, readout
        self.inp, self.a, self.b, self.c = (nn.Linear(D, D), nn.Linear(D, D * N), nn.Linear(D, D * N),
                                            nn.Linear(D, N))
        self.out = nn.Linear(D, D)

    def forward(self, x):
        u = self.inp(x)
        a = torch.sigmoid(self.a(x)).view(B, T, D, N)
        bx = (self.b(x).view(B, T, D, N)) * u.unsqueeze(-1)
        c = self.c(x)
        h = torch.zeros(B, D, N)
        ys = torch.zeros(B, T, D) if self.outputs == "written" else []
        for t in range(T):
            h = a[:, t] * h + bx[:, t]
            y = (h * c[:, t].unsqueeze(1)).sum(-1) if self.readout == "summed" else (h @ c[:, t].unsqueeze(-1)).squeeze(-1)
            if self.outputs == "written":
                ys[:, t] = y
            else:
                ys.append(y)
        ys = ys if self.outputs == "written" else torch.stack(ys, dim=1)
        return self.out(ys)


class OneWrite(nn.Module):
    """A single index write (a cache slot) and a product read twice: neither is a scan's spelling."""

    def __init__(self) -> None:
        super().__init__()
        self.p, self.q = nn.Linear(D, D), nn.Linear(D, D)

    def forward(self, x):
        buf = torch.relu(self.q(x))  # a buffer that holds data: the write is recorded (into zeros it is a copy)
        buf[:, 0] = self.p(x)[:, 0]
        prod = self.p(x) * self.q(x)
        return self.q(buf) + prod.sum(-1, keepdim=True) + prod


def graph(model, version: str = "2.15"):
    torch.manual_seed(0)
    return extract_graph(model, torch.randn(B, T, D), attributes=True, functions=True).canonical(version)


def same(a, b) -> bool:
    return a.ops == b.ops and np.array_equal(a.edges, b.edges)


def test_a_scan_written_into_a_buffer_with_a_summed_readout_is_the_stacked_matmul_one():
    reference = graph(Scan("stacked", "matmul"))
    assert same(graph(Scan("written", "summed")), reference)
    assert same(graph(Scan("written", "matmul")), reference) and same(graph(Scan("stacked", "summed")), reference)
    old = graph(Scan("written", "summed"), "2.14")
    assert not same(old, graph(Scan("stacked", "matmul"), "2.14"))  # the rules change something
    assert old.ops.count("scatter") >= T - 1 and "scatter" not in graph(Scan("written", "summed")).ops


def test_a_single_write_and_a_product_read_twice_stay():
    g = graph(OneWrite())
    assert same(g, graph(OneWrite(), "2.14"))
    assert "scatter" in g.ops and "mul" in g.ops and "sum" in g.ops


def test_215_is_214_with_its_pass_applied_and_the_pass_is_idempotent():
    for outputs in ("written", "stacked"):
        for readout in ("summed", "matmul"):
            old, new = graph(Scan(outputs, readout), "2.14"), graph(Scan(outputs, readout))
            up = upgrade(old.ops, old.edges, "2.15")
            assert same(up, new)
            assert same(upgrade(up.ops, up.edges, "2.15"), new)


def test_215_is_a_pass_after_214_and_shares_its_vocabulary():
    assert VERSIONS.index("2.15") == VERSIONS.index("2.14") + 1 and at_least("2.15", "2.14")
    assert canonical_vocabulary("2.15") == canonical_vocabulary("2.14")
    assert reaches("2.14", "2.15") and reaches("2.3", "2.15") and not reaches("2.8", "2.15")
    run, may = UPGRADES["2.15"]
    assert may(["linear", "scatter", "scatter"], np.array([[0, 1], [1, 2]])) is True
    assert may(["linear", "mul", "sum"], np.array([[0, 1], [1, 2]])) is True
    assert may(["linear", "scatter", "sum"], np.array([[0, 1], [1, 2]])) is False
    assert rules_sha256("2.15") != rules_sha256("2.14")
    assert {r.rule for r in rules() if r.version == "2.15"} == {"buffer-writes", "product-sums"}
