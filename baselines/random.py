"""`random`: the random-embedding floor. No training; each graph gets a seeded Gaussian vector.

Any encoder worth reporting must score far above this.
"""

from __future__ import annotations

import numpy as np
import torch

from narbench.train.encoder import Encoder, Labels
from narbench.data.graph import ArchGraph
from narbench.train.trainer import Trainer


class RandomEncoder(Encoder):
    """Embeddings drawn from N(0, I), seeded by the trainer's seed and the graph's content."""

    name = "random"
    trainable = False

    def config(self) -> dict:
        return {**super().config(), "dim": self.model_config.hidden}

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        return None

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        dim = self.model_config.hidden
        out = np.empty((len(graphs), dim), dtype=np.float32)
        for i, g in enumerate(graphs):
            seed = int(g.content_hash()[:16], 16) ^ trainer.seed
            out[i] = np.random.default_rng(seed).standard_normal(dim)
        return torch.from_numpy(out)
