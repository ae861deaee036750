"""The coarse label of a graph (`cnn`, `attention`, `other`), derived from its ops alone, never from its name.

One rule for raw autograd graphs (`narbench.zoo.extract`) and canonical graphs (`narbench.data.canonical`):
the `real` dataset's labels, the zoo's cross-implementation rows and a search query are labelled by it.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

#: The coarse labels, as `coarse_label` names them.
COARSE_LABELS = ("cnn", "attention", "other")

#: Softmax nodes (names differ between torch versions and kernels).
SOFTMAX_OPS = frozenset({"SoftmaxBackward0", "SafeSoftmaxBackward0", "LogSoftmaxBackward0"})
#: Batched matrix products (what `q @ k^T` and `attn @ v` become).
BMM_OPS = frozenset({"BmmBackward0", "BaddbmmBackward0"})
CONV_OPS = frozenset({"ConvolutionBackward0", "ConvolutionBackward1", "MkldnnConvolutionBackward0",
                      "ConvolutionBackwardOverrideable", "SlowConv2DBackward0", "ThnnConv2DBackward0",
                      "ConvDepthwise2DBackward0", "SlowConvDilated2DBackward0", "SlowConv3DBackward0"})
DENSE_OPS = frozenset({"AddmmBackward0", "MmBackward0", "LinearBackward0", "MvBackward0"})
#: How many hops a softmax may sit from the batched matmuls around it (Gemma-2 soft-capping
#: puts 7 ops between q k^T and the softmax).
ATTENTION_HOPS = 8


def attention_patterns(ops: Sequence[str], edges: np.ndarray, hops: int = ATTENTION_HOPS) -> int:
    """Softmax nodes with a batched matmul among their ancestors and among their descendants,
    each within `hops` edges: the `softmax(q k^T) v` pattern of (self- or cross-) attention."""
    n = len(ops)
    soft = [i for i, op in enumerate(ops) if op in SOFTMAX_OPS]
    if not soft:
        return 0
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for s, d in edges.T.tolist():
        succ[s].append(d)
        pred[d].append(s)

    def near_bmm(start: int, adj: list[list[int]]) -> bool:
        frontier, seen = [start], {start}
        for _ in range(hops):
            nxt = []
            for u in frontier:
                for v in adj[u]:
                    if v not in seen:
                        if ops[v] in BMM_OPS:
                            return True
                        seen.add(v)
                        nxt.append(v)
            frontier = nxt
        return False

    return sum(1 for i in soft if near_bmm(i, pred) and near_bmm(i, succ))


def coarse_label(ops: Sequence[str], edges: np.ndarray) -> str:
    """The coarse label of a graph, derived from its ops alone (never from its name).

    Canonical graphs (`narbench.data.canonical`): ``attention`` if an `attention` node is left,
    else the ``cnn`` rule below with `conv` and `linear` nodes. Raw autograd graphs:

    * ``attention``: at least one attention pattern (`attention_patterns`: a softmax fed by a
      batched matmul and feeding one). Hybrids (CoAtNet, MobileViT, DETR) are attention.
    * ``cnn``: otherwise, when there are at least 2 convolutions and they are at least a fifth of
      the weighted layers (convolution + dense matmul nodes): ResNets, and ConvNeXts whose blocks
      are one depthwise convolution and two pointwise Linear layers; not an MLP-Mixer or a ViT
      with a single convolutional stem.
    * ``other``: everything else (MLPs, MLP-Mixers, RNNs, state-space models, ...).
    """
    if any("#" in o for o in ops):  # design attributes (canonical 2.2) do not change the label
        ops = [o.split("#", 1)[0] for o in ops]
    counts = Counter(ops)
    if "conv" in counts or "linear" in counts or "attention" in counts or "causal_attention" in counts:
        if counts["attention"] or counts["causal_attention"]:
            return "attention"
        conv, dense = counts["conv"], counts["linear"]
        return "cnn" if conv >= 2 and 5 * conv >= conv + dense else "other"
    if attention_patterns(ops, edges) > 0:
        return "attention"
    conv = sum(counts[o] for o in CONV_OPS)
    dense = sum(counts[o] for o in DENSE_OPS)
    if conv >= 2 and 5 * conv >= conv + dense:
        return "cnn"
    return "other"
