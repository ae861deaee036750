"""The encoder interface: graphs in, one embedding per graph out; trainable.

An encoder registers under the entry-point group `narbench.encoders`. The harness calls
`fit` once with the training graphs and then `embed` for the corpus and the queries; how an
encoder turns an `ArchGraph` into tensors (whole graph, macro graph, ...) is its own business.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from narbench.graph import ArchGraph
from narbench.profiles import ModelConfig, Profile
from narbench.splitter import Splitter
from narbench.trainer import Trainer


@dataclass(frozen=True)
class Labels:
    """Training labels: `cl` for the contrastive term (family), `ce` for the classifier head."""

    cl: np.ndarray
    ce: np.ndarray
    num_ce_classes: int


class Encoder(torch.nn.Module):
    """Base class. Subclasses implement `fit` and `embed`.

    Class attributes: `name`; `uses_splitter` (False: the encoder reads whole graphs and only
    accepts the `none` splitter); `default_splitter`; `ce_label` ("coarse" or "family": which
    label the cross-entropy head predicts, as the paper does per method).
    """

    name: ClassVar[str] = ""
    uses_splitter: ClassVar[bool] = False
    default_splitter: ClassVar[str] = "none"
    ce_label: ClassVar[str] = "coarse"

    def __init__(self, num_ops: int, num_classes: int, profile: Profile, splitter: Splitter | None = None) -> None:
        super().__init__()
        self.num_ops = num_ops
        self.num_classes = num_classes
        self.profile = profile
        self.splitter = splitter

    @property
    def model_config(self) -> ModelConfig:
        return self.profile.model

    def config(self) -> dict:
        """Everything that defines this encoder, recorded in the result file."""
        from dataclasses import asdict

        return {"model": asdict(self.profile.model), "train": asdict(self.profile.train), "ce_label": self.ce_label}

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        raise NotImplementedError

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        raise NotImplementedError


def graph_to_data(graph: ArchGraph, num_ops: int, cl: int | None = None, ce: int | None = None):
    """`graph.to_pyg` with op-index features, plus the training labels when given."""
    data = graph.to_pyg(num_ops, one_hot=False)
    if cl is not None:
        data.y_cl = torch.tensor([cl], dtype=torch.long)
    if ce is not None:
        data.y_ce = torch.tensor([ce], dtype=torch.long)
    return data
