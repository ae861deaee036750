"""Run profiles: how much data and which recipe a run uses.

- `smoke`: a subset and a tiny model, under a minute on a 2-core CPU (tests, CI, the gate).
- `quick`: the default; trains on a stratified subset of the corpus with a reduced model and
  evaluates on the *full* fixed split, in about ten minutes on a 2-core CPU.
- `paper`: the paper's recipe (Table 5) on the full data; meant for a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a GNN encoder (Table 5: 3 layers, embedding 512, dropout 0.1)."""

    hidden: int = 512
    layers: int = 3
    dropout: float = 0.1


@dataclass(frozen=True)
class TrainConfig:
    """One training stage's recipe. `objective` picks the loss terms (Table 3 ablation)."""

    epochs: int = 15
    batch_size: int = 512
    lr: float = 1e-3
    weight_decay: float = 0.0
    temperature: float = 0.1
    objective: str = "ce+cl"

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {self.objective!r}; known: {', '.join(OBJECTIVES)}")


OBJECTIVES = ("ce", "cl", "ce+cl")


@dataclass(frozen=True)
class Profile:
    """Data budget plus recipes. `max_*` of None means all graphs of that side of the split.

    `max_train` limits the graphs trained on (a stratified subset of the corpus);
    `max_corpus` / `max_queries` limit what is evaluated (smoke only).
    """

    name: str
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    #: stage 1 of `ours`: Table 5's epochs and batch size, lr 1e-3 instead of Table 5's 1e-2 (at 1e-2
    #: the motif embeddings collapse; docs/encoders.md; `--encoder-param stage1_lr=0.01` restores it)
    motif_train: TrainConfig = field(default_factory=lambda: TrainConfig(epochs=5, batch_size=256, lr=1e-3))
    max_train: int | None = None
    max_corpus: int | None = None
    max_queries: int | None = None
    eval_batch_size: int = 128  # bit-identical to 1024; on `real` half the peak memory, no slower (issue 27)


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke",
        model=ModelConfig(hidden=32, layers=2, dropout=0.1),
        train=TrainConfig(epochs=2, batch_size=64, lr=3e-3),
        motif_train=TrainConfig(epochs=1, batch_size=64, lr=1e-3),
        max_train=400,
        max_corpus=1000,
        max_queries=200,
        eval_batch_size=256,
    ),
    "quick": Profile(
        name="quick",
        model=ModelConfig(hidden=128, layers=3, dropout=0.1),
        train=TrainConfig(epochs=5, batch_size=128, lr=1e-3),
        motif_train=TrainConfig(epochs=6, batch_size=256, lr=1e-3),
        max_train=6000,
    ),
    "paper": Profile(name="paper"),
}


def get_profile(name: str, **overrides) -> Profile:
    """A profile by name; `overrides` replace fields of its train config (e.g. objective)."""
    if name not in PROFILES:
        raise KeyError(f"unknown profile {name!r}; known profiles: {', '.join(PROFILES)}")
    profile = PROFILES[name]
    if overrides:
        profile = replace(profile, train=replace(profile.train, **overrides))
    return profile
