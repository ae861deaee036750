"""A third-party encoder package, as docs/third-party-encoder.md shows it.

`EdgeOpEncoder` embeds a graph by the normalised histogram of (producer op, consumer op)
pairs over its edges plus its op histogram: training-free, deterministic, fast. The
`.dist-info` next to this folder registers it as encoder `edgeop` (what `pip install` of the
pyproject.toml here would do); tests/test_gate.py puts this folder on sys.path.
"""

from __future__ import annotations

import numpy as np
import torch

from narbench.encoder import Encoder


class EdgeOpEncoder(Encoder):
    """Histogram of op types and of (producer op, consumer op) edge pairs; no training."""

    name = "edgeop"

    def fit(self, trainer, graphs, labels):
        return None  # nothing to learn; a trainable encoder would use trainer.fit(...) here

    def embed(self, trainer, graphs):
        n = self.num_ops
        out = np.zeros((len(graphs), n + n * n), dtype=np.float32)
        for i, g in enumerate(graphs):
            out[i, :n] = np.bincount(g.ops, minlength=n) / g.num_nodes
            if g.num_edges:
                src, dst = g.ops[g.edges[0]], g.ops[g.edges[1]]
                out[i, n:] = np.bincount(src * n + dst, minlength=n * n) / g.num_edges
        return torch.from_numpy(out)
