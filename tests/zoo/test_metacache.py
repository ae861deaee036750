"""`narbench.zoo.metacache`: the meta shape cache records the graph the plain meta pass records."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from narbench.zoo.extract import extract_graph  # noqa: E402
from narbench.zoo.metacache import MetaShapeCache  # noqa: E402


class Blocks(nn.Module):
    """Repeated blocks with views, an in-place op, a split and widths that change between blocks."""

    def __init__(self, widths=(8, 8, 16, 16, 8)):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))
        self.norms = nn.ModuleList(nn.LayerNorm(b) for b in widths[1:])

    def forward(self, x):
        for lin, norm in zip(self.layers, self.norms):
            h = norm(lin(x)).relu_()
            a, b = h.view(h.shape[0], 2, -1).unbind(1)
            x = torch.cat([b, a], -1).softmax(-1) * h
        return x.sum()


def _meta(model_cls, *shape):
    with torch.device("meta"):
        model = model_cls()
    return model.eval(), torch.zeros(*shape, device="meta")


def test_cached_pass_records_the_same_graph_and_shapes():
    model, x = _meta(Blocks, 3, 8)
    plain = extract_graph(model, (x,), shape_cache=False)
    cache = MetaShapeCache()
    with cache, torch.enable_grad():
        out = model.layers[0](x)
        again = model.layers[0](x)
        wider = model.layers[1](out)
    assert cache.misses >= 1 and cache.hits >= 1  # the second identical call was answered
    assert again.shape == out.shape == (3, 8) and wider.shape == (3, 16)  # shapes follow the inputs
    assert again.grad_fn is not None and type(again.grad_fn) is type(out.grad_fn)
    cached = extract_graph(model, (x,), shape_cache=True)
    assert cached.signature() == plain.signature()
    assert cached.ops == plain.ops and cached.num_edges == plain.num_edges


def test_mutating_and_aliasing_ops_run_their_own_kernels():
    x = torch.zeros(4, 6, device="meta")
    cache = MetaShapeCache()
    with cache:
        for _ in range(3):
            v = x.view(2, 12)
            x.add_(1)
    assert cache.hits == 0 and cache.misses == 0  # view and add_ are never cached
    assert v.shape == (2, 12) and v._base is x  # still a real view


def test_cpu_passes_are_never_answered_from_the_cache():
    cache = MetaShapeCache()
    with cache:
        a = torch.ones(3) + 1
        b = torch.ones(3) + 1
    assert a.device.type == b.device.type == "cpu" and torch.equal(b, torch.full((3,), 2.0))
    assert cache.hits == 0


def test_the_cache_answers_only_inside_its_context_and_thread():
    import threading

    w = torch.zeros(4, 4, device="meta")
    outside = []
    cache = MetaShapeCache()
    with cache:
        assert cache.active  # this torch's Python meta kernels are wrapped
        torch.mm(w, w)
        first = (cache.hits, cache.misses)  # mm's kernel, and any wrapped kernel it calls
        thread = threading.Thread(target=lambda: outside.append(torch.mm(w, w).shape))
        thread.start()
        thread.join()
        assert (cache.hits, cache.misses) == first == (0, first[1]) and first[1] >= 1  # the other thread: torch's own
        torch.mm(w, w)
        assert cache.hits >= 1 and cache.misses == first[1]
        counts = (cache.hits, cache.misses)
    assert outside == [(4, 4)]
    assert torch.mm(w, w[:, :2]).shape == (4, 2)  # after the context: torch's kernel, new shapes
    assert (cache.hits, cache.misses) == counts


def test_a_kernel_error_is_raised_and_nothing_is_cached():
    a, b = torch.zeros(2, 3, device="meta"), torch.zeros(4, 5, device="meta")
    cache = MetaShapeCache()
    with cache:
        for _ in range(2):
            with pytest.raises(RuntimeError):
                torch.mm(a, b)
    assert cache.hits == 0 and cache.misses == 2


def test_nested_contexts_restore_the_outer_one():
    x = torch.zeros(3, 3, device="meta")
    outer, inner = MetaShapeCache(), MetaShapeCache()
    with outer:
        torch.mm(x, x)
        with inner:
            torch.mm(x, x)
        assert outer.hits == 0 and inner.hits == 0 and inner.misses == outer.misses >= 1
        torch.mm(x, x)
    assert outer.hits >= 1 and inner.hits == 0


def test_a_torch_without_the_private_meta_table_runs_uncached(monkeypatch):
    import narbench.zoo.metacache as metacache

    def moved():
        raise ImportError("torch._meta_registrations moved")

    monkeypatch.setattr(metacache, "_wrapped", None)
    monkeypatch.setattr(metacache, "_library", None)
    monkeypatch.setattr(metacache, "_python_meta_kernels", moved)
    assert metacache.install() == 0
    model, x = _meta(Blocks, 3, 8)
    with MetaShapeCache() as cache, torch.enable_grad():
        model(x)
        model(x)
    assert not cache.active and cache.hits == cache.misses == 0
    assert extract_graph(model, (x,)).signature() == extract_graph(model, (x,), shape_cache=False).signature()
