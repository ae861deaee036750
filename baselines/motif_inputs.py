"""A motif's inputs to `ours` (`narbench.baselines.ours`), one motif at a time.

`induced` and `neighbourhood` are the one-part references of what `narbench.train.parts`
extracts for all parts of a graph at once (the tests compare the two); `augment` is the
GraphCL-style view `ours-ft` takes as a motif's positive (`stage1_positive=augmented`);
`data_key` is a motif's exact key, the bytes `narbench.train.parts.subgraph_keys` gives.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

from narbench.data.graph import ArchGraph, import_torch_geometric


def induced(graph: ArchGraph, nodes: np.ndarray):
    """The subgraph of `graph` induced by sorted `nodes`, as a PyG Data with op-id features.

    One part at a time (O(E) per call): the reference for `narbench.train.parts.induced_subgraphs`,
    which the encoder uses to extract every part of a graph at once.
    """
    import_torch_geometric()
    from torch_geometric.data import Data

    src, dst = graph.edges
    keep = np.isin(src, nodes) & np.isin(dst, nodes)
    local = np.searchsorted(nodes, graph.edges[:, keep])
    return Data(x=torch.as_tensor(graph.ops[nodes]), edge_index=torch.as_tensor(local), num_nodes=len(nodes))


def neighbourhood(graph: ArchGraph, nodes: np.ndarray, hops: int) -> np.ndarray:
    """`nodes` plus every node within `hops` edges of them (either direction), sorted.

    The reference for `narbench.train.parts.neighbourhoods` (all parts at once)."""
    src, dst = graph.edges
    current = np.asarray(nodes)
    for _ in range(hops):
        touch = np.isin(src, current) | np.isin(dst, current)
        current = np.union1d(current, np.concatenate([src[touch], dst[touch]]))
    return current


def augment(data, rng: np.random.Generator, drop_node: float, drop_edge: float):
    """A view of a motif (PyG Data, op-id features) with each node dropped with `drop_node` (while at
    least two stay; a motif of one or two nodes keeps them) and each remaining edge with `drop_edge`."""
    from torch_geometric.data import Data

    n = int(data.num_nodes)
    keep = rng.random(n) >= drop_node if n >= 3 else np.ones(n, dtype=bool)
    if keep.sum() < 2:
        keep[:] = True
    remap = np.full(n, -1, dtype=np.int64)
    idx = np.nonzero(keep)[0]
    remap[idx] = np.arange(idx.size)
    e = data.edge_index.numpy()
    m = keep[e[0]] & keep[e[1]] & (rng.random(e.shape[1]) >= drop_edge) if e.size else np.zeros(0, dtype=bool)
    return Data(x=data.x[torch.as_tensor(idx)], edge_index=torch.as_tensor(remap[e[:, m]].reshape(2, -1)),
                num_nodes=int(idx.size))


def data_key(data) -> bytes:
    """Exact signature of a subgraph Data: equal keys mean equal ops and local edges.

    The same bytes as `narbench.train.parts.subgraph_keys` gives for the same subgraph."""
    h = hashlib.blake2b(digest_size=16)
    h.update(data.x.numpy().astype("<i8").tobytes())
    h.update(data.edge_index.numpy().astype("<i8").tobytes())
    return h.digest()

