"""A split's graphs packed once into flat tensors on the training device; a batch is an index into them.

PyG's `DataLoader` builds every batch in Python, graph by graph (`Batch.from_data_list`), on the
host, and the batch is then copied to the device. Here `pack` concatenates each attribute of all
the items once (PyG's own `collate`, unincremented), moves it to the device, and `take(idx)`
builds the batch of items `idx` with a few tensor operations on the device: the positions of the
chosen items' slices (`repeat_interleave` of their starts), one `index_select` per attribute,
the increments (edge indices shifted by the nodes before them) and the `batch` / `ptr` vectors.
No Python runs per graph; sizes come from host copies of the per-item sizes, so nothing is read
back from the device.

The result is the `torch_geometric.data.Batch` that `Batch.from_data_list` gives for the same
items, tensor for tensor (tests/test_packed.py), with `_slice_dict` and `_inc_dict`, so
`to_data_list()` works on it. Items are PyG `Data` (any attributes: tensors, numbers, other
objects, with the item class's own `__cat_dim__` / `__inc__`), or tuples of them (a batch is then
a list with one `Batch` per position, as PyG's collater gives); anything else (tensors, dicts,
`HeteroData`, `Data` with sparse tensors or tensor increments: `_packable`) is batched by PyG's
collater from the chosen items and moved to the device, the same batches as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


def _excl_cumsum(sizes: np.ndarray) -> np.ndarray:
    out = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out


@dataclass
class _Column:
    """One attribute of every item: flat values (tensors on the device; other objects as a list),
    the concatenation dim, per-item sizes and starts (host and device) and per-item increments."""

    key: str
    value: Any
    dim: int
    sizes: np.ndarray
    starts: np.ndarray
    sizes_dev: torch.Tensor | None = None
    starts_dev: torch.Tensor | None = None
    inc: np.ndarray | None = None  # per-item increments; None: all zero
    inc_dev: torch.Tensor | None = None


class PackedGraphs:
    """PyG `Data` items packed on `device`; `take(idx)` is the `Batch` of items `idx`."""

    def __init__(self, items: Sequence, device: torch.device | str = "cpu") -> None:
        from torch_geometric.data import Batch
        from torch_geometric.data.collate import collate

        self.device = torch.device(device)
        self.base_cls = type(items[0])
        self.count = len(items)
        flat, slices, _ = collate(Batch, list(items), increment=False, add_batch=False)
        first = items[0]
        self.columns: list[_Column] = []
        self.num_nodes: np.ndarray | None = None  # per item, when the items carry `num_nodes`
        self.explicit_num_nodes = "num_nodes" in first.keys()
        for key in first.keys():
            if key == "ptr":
                continue
            if key == "num_nodes":
                continue
            self.columns.append(self._column(key, flat[key], slices[key], items))
        store = first.stores[0]
        if store.can_infer_num_nodes:  # PyG adds `batch` and `ptr` only then
            self.num_nodes = np.fromiter((d.num_nodes or 0 for d in items), dtype=np.int64, count=len(items))
            self.num_nodes_dev = torch.from_numpy(self.num_nodes).to(self.device)

    def _column(self, key: str, value: Any, slices: torch.Tensor, items: Sequence) -> _Column:
        sizes = np.diff(slices.numpy()).astype(np.int64)
        col = _Column(key, value, 0, sizes, _excl_cumsum(sizes)[:-1])
        if not isinstance(value, torch.Tensor):
            return col  # a list of objects: taken by index
        elem = items[0][key]
        dim = items[0].__cat_dim__(key, elem) if isinstance(elem, torch.Tensor) else 0
        stacked = dim is None or (isinstance(elem, torch.Tensor) and elem.dim() == 0)
        col.dim = 0 if stacked else dim % value.dim()
        incs = [d.__inc__(key, d[key]) for d in items]
        inc = np.asarray([int(i) for i in incs], dtype=np.int64)
        col.value = value.to(self.device)
        col.sizes_dev = torch.from_numpy(sizes).to(self.device)
        col.starts_dev = torch.from_numpy(col.starts).to(self.device)
        if inc.any():
            col.inc, col.inc_dev = inc, torch.from_numpy(inc).to(self.device)
        return col

    def __len__(self) -> int:
        return self.count

    def take(self, idx: np.ndarray, idx_dev: torch.Tensor | None = None):
        """The `Batch` of items `idx` (host int64 array; `idx_dev`: the same on the device, if at hand)."""
        from torch_geometric.data import Batch

        idx = np.asarray(idx, dtype=np.int64)
        if idx_dev is None:
            idx_dev = torch.from_numpy(idx).to(self.device)
        out = Batch(_base_cls=self.base_cls)
        slice_dict, inc_dict = {}, {}
        for col in self.columns:
            sizes = col.sizes[idx]
            slice_dict[col.key] = torch.from_numpy(_excl_cumsum(sizes))
            if not isinstance(col.value, torch.Tensor):
                out[col.key] = [col.value[i] for i in idx.tolist()]
                inc_dict[col.key] = None
                continue
            out[col.key], inc_dict[col.key] = self._take_column(col, idx, idx_dev, int(sizes.sum()))
        if self.explicit_num_nodes:
            store = out.stores[0]
            store._num_nodes = self.num_nodes[idx].tolist()
            store.num_nodes = int(self.num_nodes[idx].sum())
        if self.num_nodes is not None:
            nodes = self.num_nodes_dev[idx_dev]
            total = int(self.num_nodes[idx].sum())
            out.batch = torch.repeat_interleave(torch.arange(len(idx), device=self.device), nodes, output_size=total)
            ptr = torch.zeros(len(idx) + 1, dtype=torch.long, device=self.device)
            torch.cumsum(nodes, 0, out=ptr[1:])
            out.ptr = ptr
        out._num_graphs = len(idx)
        out._slice_dict = slice_dict
        out._inc_dict = inc_dict
        return out

    def _take_column(self, col: _Column, idx: np.ndarray, idx_dev: torch.Tensor, total: int):
        """(the chosen items' values, concatenated and incremented as `collate` does; their cumulative increments)."""
        sizes_dev = col.sizes_dev[idx_dev]
        before = torch.cumsum(sizes_dev, 0) - sizes_dev  # where each chosen item starts in the batch
        pos = torch.repeat_interleave(col.starts_dev[idx_dev] - before, sizes_dev, output_size=total)
        pos += torch.arange(total, device=self.device)
        value = col.value.index_select(col.dim, pos)
        cum = np.zeros(len(idx), dtype=np.int64)
        if col.inc is not None:
            cum = _excl_cumsum(col.inc[idx])[:-1]
            if len(idx) and cum[-1] != 0:  # collate adds only then
                inc = torch.cumsum(col.inc_dev[idx_dev], 0) - col.inc_dev[idx_dev]
                inc = torch.repeat_interleave(inc, sizes_dev, output_size=total)
                if not value.is_floating_point():
                    inc = inc.to(value.dtype)
                shape = [1] * value.dim()
                shape[col.dim] = total
                value = value + inc.view(shape)
        return value, torch.from_numpy(cum)


class _Collated:
    """Items PyG's collater batches (not `Data`): `take(idx)` collates the chosen ones, then moves them."""

    def __init__(self, items: Sequence, device: torch.device) -> None:
        from torch_geometric.loader.dataloader import Collater

        self.items, self.device = list(items), device
        self.collate = Collater(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def take(self, idx: np.ndarray, idx_dev: torch.Tensor | None = None):
        batch = self.collate([self.items[i] for i in np.asarray(idx).tolist()])
        return _to(batch, self.device)


class _Tuples:
    """Tuples of `Data` (e.g. (motif, context) pairs): one `PackedGraphs` per position."""

    def __init__(self, items: Sequence, device: torch.device) -> None:
        width = len(items[0])
        self.parts = [pack([item[j] for item in items], device) for j in range(width)]

    def __len__(self) -> int:
        return len(self.parts[0])

    def take(self, idx: np.ndarray, idx_dev: torch.Tensor | None = None) -> list:
        return [part.take(idx, idx_dev) for part in self.parts]


def _to(batch, device: torch.device):
    if isinstance(batch, (list, tuple)):
        return [_to(b, device) for b in batch]
    return batch.to(device) if hasattr(batch, "to") else batch


def pack(items: Sequence, device: torch.device | str = "cpu"):
    """`items` packed for batching on `device`: `PackedGraphs` for PyG `Data`, one per position for
    tuples of them, PyG's collater for anything else. Each has `take(idx, idx_dev=None)` and `len`."""
    from torch_geometric.data import Data

    from narbench.data.graph import import_torch_geometric

    import_torch_geometric()
    device = torch.device(device)
    if not len(items):
        raise ValueError("nothing to pack: no items")
    first = items[0]
    if _packable(first) and all(type(d) is type(first) for d in items):
        return PackedGraphs(items, device)
    if isinstance(first, (tuple, list)) and first and all(_packable(x) for x in first) \
            and all(isinstance(it, (tuple, list)) and len(it) == len(first) for it in items):
        return _Tuples(items, device)
    return _Collated(items, device)


def _packable(item) -> bool:
    """A PyG `Data` whose attributes `PackedGraphs` batches as `collate` does: dense tensors with a
    scalar increment, numbers, and objects collate lists (no sparse or nested tensors, dicts, lists
    of tensors)."""
    from collections.abc import Mapping

    from torch_geometric.data import Data

    if not isinstance(item, Data):
        return False
    for key, value in item.items():
        if isinstance(value, torch.Tensor):
            if value.layout != torch.strided or getattr(value, "is_nested", False):
                return False
            inc = item.__inc__(key, value)
            if isinstance(inc, torch.Tensor) and inc.numel() > 1:
                return False
        elif isinstance(value, Mapping) or (isinstance(value, (list, tuple)) and value
                                             and isinstance(value[0], torch.Tensor)):
            return False
    return True
