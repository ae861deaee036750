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

from narbench.data.graph import ArchGraph, import_torch_geometric  # noqa: F401 (re-exported)
from narbench.train.profiles import ModelConfig, Profile
from narbench.train.splitter import Splitter
from narbench.train.trainer import Trainer


@dataclass(frozen=True)
class Labels:
    """Training labels: `cl` for the contrastive term (family), `ce` for the classifier head."""

    cl: np.ndarray
    ce: np.ndarray
    num_ce_classes: int


class Encoder(torch.nn.Module):
    """Base class. Subclasses implement `fit` and `embed`.

    Class attributes: `name`; `uses_splitter` (False: the encoder reads whole graphs and only
    accepts the `none` splitter); `default_splitter`; `trainable` (False for training-free
    encoders such as the floors: they see no labels, so their results hold under every
    protocol); `device_bound` (False for an encoder that computes on the host's CPU with NumPy
    whatever `--device` says, such as `graf-lda`: the leaderboard shows its rows beside the encoders
    trained on any device); `paper_labels` ((contrastive label, classifier label) under the `paper`
    protocol, see `narbench.train.protocol`; the default is the paper's baselines' coarse labels).
    """

    name: ClassVar[str] = ""
    uses_splitter: ClassVar[bool] = False
    default_splitter: ClassVar[str] = "none"
    trainable: ClassVar[bool] = True
    device_bound: ClassVar[bool] = True
    paper_labels: ClassVar[tuple[str, str]] = ("coarse", "coarse")
    #: the encoder's parameters and their defaults (attributes from `__init__` on; `set_params`, `narbench
    #: run --encoder-param` change them): ablations and recipe switches that are not part of the profile
    PARAMS: ClassVar[dict[str, object]] = {}
    #: parameters added after a file recording this encoder's config shipped (the pinned search index): at their
    #: default they are left out of `config()["params"]`, so that file rebuilds byte for byte (its sha256 holds)
    QUIET_DEFAULTS: ClassVar[frozenset[str]] = frozenset()
    #: buffers holding what `fit` computed from the training graphs other than trained weights (an idf,
    #: a standardisation, a feature vocabulary, a choice): registered as None by `__init__` (not fitted),
    #: set by `fit`, and resized to the saved shapes when a state dict loads, so that saved weights and
    #: search indexes carry them like weights (an index of an encoder without them could not embed a query)
    FITTED: ClassVar[tuple[str, ...]] = ()

    def __init__(self, num_ops: int, num_classes: int, profile: Profile, splitter: Splitter | None = None) -> None:
        super().__init__()
        self.num_ops = num_ops
        self.num_classes = num_classes
        self.profile = profile
        self.splitter = splitter
        self.vocab: tuple[str, ...] | None = None  # the dataset's op names (`use_vocabulary`)
        for key, value in self.PARAMS.items():  # each parameter at its default until `set_params`
            setattr(self, key, value)
        for name in self.FITTED:
            self.register_buffer(name, None)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name in self.FITTED:  # a fitted buffer takes the saved shape and dtype (they depend on the training graphs)
            if prefix + name in state_dict:
                setattr(self, name, torch.empty_like(state_dict[prefix + name]))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def fitted(self, name: str) -> np.ndarray | None:
        """The fitted buffer `name` as a NumPy array on the host (None before `fit`)."""
        value = getattr(self, name)
        return None if value is None else value.detach().cpu().numpy()

    def use_vocabulary(self, vocab: "list[str] | tuple[str, ...]") -> None:
        """The dataset's op vocabulary (op id -> name), given by the runner before `fit`. Encoders
        read op ids only; one whose training treats ops by name (`invariant`'s rewrites) uses it."""
        self.vocab = tuple(vocab)

    def set_params(self, params: dict[str, object]) -> None:
        """Set encoder parameters (names from `PARAMS`); an unknown name or a value of another
        type raises ValueError naming it. Call before `fit` (or loading weights)."""
        for key, value in params.items():
            if key not in self.PARAMS:
                known = ", ".join(self.PARAMS) or "none"
                raise ValueError(f"encoder {self.name!r} has no parameter {key!r} (its parameters: {known})")
            default = self.PARAMS[key]
            if default is not None and isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if default is not None and value is not None and type(value) is not type(default):
                raise ValueError(f"encoder {self.name!r} parameter {key!r} takes a {type(default).__name__}, "
                                 f"got {value!r}")
            setattr(self, key, value)
        self.params_changed()

    def params_changed(self) -> None:
        """Hook: rebuild what depends on a parameter (called by `set_params`)."""

    def weights_changed(self) -> None:
        """Hook: the weights changed since the last `embed` (a learning curve embeds after every
        epoch); an encoder that caches embeddings computed by a trained part drops them here."""

    def params(self) -> dict[str, object]:
        """Every parameter's current value."""
        return {k: getattr(self, k) for k in self.PARAMS}

    def variant(self) -> str:
        """The parameters that differ from their defaults, `k=v` joined by commas ('' for none):
        the leaderboard's row variant (an ablation is a row of its own)."""
        return ",".join(f"{k}={v}" for k, v in self.params().items() if v != self.PARAMS[k])

    @property
    def model_config(self) -> ModelConfig:
        return self.profile.model

    def config(self) -> dict:
        """Everything that defines this encoder, recorded in the result file."""
        from dataclasses import asdict

        params = {k: v for k, v in self.params().items() if not (k in self.QUIET_DEFAULTS and v == self.PARAMS[k])}
        extra = {"params": params, "variant": self.variant()} if self.PARAMS else {}
        if not self.trainable:
            return {"trainable": False, **extra}
        return {"model": asdict(self.profile.model), "train": asdict(self.profile.train), "trainable": True, **extra}

    def fit(self, trainer: Trainer, graphs: list[ArchGraph], labels: Labels) -> None:
        """Train on the training graphs (a subset of the corpus; never the queries).

        Args:
            trainer: the device, seed, progress bars and the generic training loops.
            graphs: the training graphs.
            labels: `labels.cl[i]` / `labels.ce[i]` are the contrastive and classifier label ids
                of `graphs[i]`, as the run's protocol assigns them (`labels.num_ce_classes` classes).
        Returns:
            None; the encoder's weights are trained in place. Training-free encoders return at once.
        """
        raise NotImplementedError

    def embed(self, trainer: Trainer, graphs: list[ArchGraph]) -> torch.Tensor:
        """Embed graphs for retrieval.

        Args:
            trainer: the device and batched-inference helpers.
            graphs: the graphs to embed (corpus or queries).
        Returns:
            A float tensor [len(graphs), D] (any device), row i for `graphs[i]`. Retrieval ranks
            corpus graphs by the cosine similarity of these vectors (eq. 1).
        """
        raise NotImplementedError


def graph_to_data(graph: ArchGraph, num_ops: int, cl: int | None = None, ce: int | None = None):
    """`graph.to_pyg` with op-index features, plus the training labels when given."""
    data = graph.to_pyg(num_ops, one_hot=False)
    if cl is not None:
        data.y_cl = torch.tensor([cl], dtype=torch.long)
    if ce is not None:
        data.y_ce = torch.tensor([ce], dtype=torch.long)
    return data
