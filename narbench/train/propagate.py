"""GCN and GIN message passing as CSR products, with the values of PyG's gather-scatter.

PyG's `GCNConv` normalises the batch's edges in every layer (`gcn_norm`), gathers a message per
edge ([E + N, hidden]: `x[src] * weight`), and scatter-adds the messages into their targets;
backward gathers, multiplies and scatter-adds again. On a `real` batch that is most of an epoch's
time outside the matrix products (benchmarks/speed/breakdown.py). Here the normalised adjacency
is built once per forward pass for all layers, in CSR both ways (rows = targets for the forward
product, rows = sources for the gradient), each row's entries in edge order (self-loops last, where
`gcn_norm` appends them), and propagation is one CSR product each way: on the CPU a compiled loop
(`_propagate_kernels.csr_matmul`) that rounds each product and adds them from zero in that order,
which is what the sequential scatter-add does, so outputs and gradients are bit-identical to
PyG's layers (tests/test_propagate.py); on CUDA `torch.sparse` CSR products (cuSPARSE; GPU
scatter-adds use atomics and were never bit-reproducible). GIN's sum is the same product with unit
weights and no self-loops.

`GNNStack` uses it when every layer is a plain `GCNConv` (or every one a `GINConv`) with PyG's
defaults and no hooks, and never inside `torch.compile` (which traces PyG's own layers);
`narbench.train.fastpath.eager()` switches it off (tests, comparisons).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from narbench.train import fastpath


def _csr(rows: torch.Tensor, cols: torch.Tensor, vals: torch.Tensor, n: int):
    order = torch.sort(rows, stable=True).indices  # stable: a row's entries stay in edge order
    counts = torch.zeros(n, dtype=torch.long, device=rows.device)
    counts.index_add_(0, rows, torch.ones_like(rows))  # not bincount: on CUDA that reads its size back
    rowptr = torch.zeros(n + 1, dtype=torch.long, device=rows.device)
    torch.cumsum(counts, 0, out=rowptr[1:])
    return rowptr, cols[order].contiguous(), vals[order].contiguous()


#: False: the CPU too runs the `torch.sparse` products CUDA runs (tests cover that branch on the CPU)
_CPU_KERNEL = True


def _product(rowptr: torch.Tensor, col: torch.Tensor, val: torch.Tensor, x: torch.Tensor,
             bias: torch.Tensor | None = None) -> torch.Tensor:
    """The CSR matrix (rowptr, col, val) of size [rows, x rows] times x, plus `bias` on every row
    (after the sum, as the layer adds it), in the promoted type."""
    dtype = torch.promote_types(x.dtype, val.dtype)
    x, val = x.to(dtype).contiguous(), val.to(dtype)
    rows = rowptr.numel() - 1
    if _CPU_KERNEL and x.device.type == "cpu" and dtype in (torch.float32, torch.float64) and \
            (bias is None or bias.dtype == dtype):
        from narbench.train._propagate_kernels import csr_matmul, csr_matmul_bias

        out = torch.empty(rows, x.shape[1], dtype=dtype)
        if bias is None:
            csr_matmul(rowptr.numpy(), col.numpy(), val.numpy(), x.detach().numpy(), out.numpy())
        else:
            csr_matmul_bias(rowptr.numpy(), col.numpy(), val.numpy(), x.detach().numpy(),
                            bias.detach().contiguous().numpy(), out.numpy())
        return out
    with torch.autocast(x.device.type, enabled=False), warnings.catch_warnings():  # the promoted type, as PyG's
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        matrix = torch.sparse_csr_tensor(rowptr, col, val, (rows, x.shape[0]), check_invariants=False)
        out = matrix @ x
        return out if bias is None else out + bias.to(dtype)


class _Propagate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, adj: "Adjacency", bias: torch.Tensor | None) -> torch.Tensor:
        ctx.adj = adj
        return _product(adj.rowptr, adj.col, adj.val, x, bias)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        adj = ctx.adj
        grad_x = _product(adj.t_rowptr, adj.t_col, adj.t_val, grad) if ctx.needs_input_grad[0] else None
        # the bias' gradient as autograd sums a broadcast add's: over the rows
        grad_bias = grad.sum(0, keepdim=True).view(-1) if ctx.needs_input_grad[2] else None
        return grad_x, None, grad_bias


@dataclass(frozen=True)
class Adjacency:
    """One batch's propagation matrix in CSR, rows = targets (`rowptr`, `col`, `val`) and
    rows = sources (`t_*`, for the gradient)."""

    rowptr: torch.Tensor
    col: torch.Tensor
    val: torch.Tensor
    t_rowptr: torch.Tensor
    t_col: torch.Tensor
    t_val: torch.Tensor

    @classmethod
    def of_edges(cls, src: torch.Tensor, dst: torch.Tensor, val: torch.Tensor, num_nodes: int) -> "Adjacency":
        """Entry (dst[e], src[e]) = val[e] for every edge e (repeated edges add up)."""
        return cls(*_csr(dst, src, val, num_nodes), *_csr(src, dst, val, num_nodes))

    def matmul(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """A @ x (+ bias on every row), differentiable in x and the bias."""
        return _Propagate.apply(x, self, bias)


def _plain(conv: torch.nn.Module) -> bool:
    """No hooks on the layer (a hook may expect PyG's forward to run)."""
    hooks = ("_forward_hooks", "_forward_pre_hooks", "_propagate_forward_hooks",
             "_propagate_forward_pre_hooks", "_message_forward_hooks", "_message_forward_pre_hooks")
    return not any(getattr(conv, name, None) for name in hooks) and getattr(conv, "decomposed_layers", 1) == 1 \
        and not getattr(conv, "explain", False) and getattr(conv, "flow", "source_to_target") == "source_to_target" \
        and getattr(conv, "aggr", None) in ("add", "sum")


def kind_of(convs: Sequence[torch.nn.Module]) -> str | None:
    """"gcn" or "gin" when every layer can propagate by CSR products (see the module doc), else None."""
    if not fastpath.enabled() or not convs or torch.compiler.is_compiling():
        return None
    from torch_geometric.nn import GCNConv, GINConv

    if all(type(c) is GCNConv and _plain(c) and c.normalize and not c.cached for c in convs):
        first = convs[0]
        if all((c.improved, c.add_self_loops) == (first.improved, first.add_self_loops) for c in convs):
            return "gcn"
    if all(type(c) is GINConv and _plain(c) for c in convs):
        return "gin"
    return None


def adjacency(kind: str, conv: torch.nn.Module, edge_index: torch.Tensor, x: torch.Tensor) -> Adjacency:
    """The batch's propagation matrix for layers of `kind`, as `conv` (the first layer) builds it."""
    num_nodes = x.size(0)
    if kind == "gcn":
        from torch_geometric.nn.conv.gcn_conv import gcn_norm

        index, weight = gcn_norm(edge_index, None, num_nodes, conv.improved, conv.add_self_loops, conv.flow, x.dtype)
        return Adjacency.of_edges(index[0], index[1], weight, num_nodes)
    ones = torch.ones(edge_index.size(1), dtype=x.dtype, device=x.device)
    return Adjacency.of_edges(edge_index[0], edge_index[1], ones, num_nodes)


def layer(kind: str, conv: torch.nn.Module, x: torch.Tensor, adj: Adjacency) -> torch.Tensor:
    """`conv(x, edge_index)` computed with `adj`: GCNConv's and GINConv's forward, step for step."""
    if kind == "gcn":
        return adj.matmul(conv.lin(x), conv.bias)
    out = adj.matmul(x) + (1 + conv.eps) * x
    return conv.nn(out)
