"""A run's record: the `RunResult` made from what one run (`narbench.harness.runner.run`) resolved,
selected, trained and measured (its name, configuration, metrics and environment), and the metrics
of its named query subsets beside them.

Kept apart from the runner so that `run` reads as the path through the pipeline, and what a result
file records is in one place.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np

from narbench.core import registry
from narbench.data.dataset import GraphDataset
from narbench.eval.metrics import METRICS
from narbench.eval.result import RunResult, environment
from narbench.train.encoder import Encoder
from narbench.train.protocol import Protocol
from narbench.train.resume import Snapshots
from narbench.train.splitter import Splitter
from narbench.train.trainer import Trainer


@dataclass(frozen=True)
class Setup:
    """What a run's options resolve to before anything loads: encoder class, splitter, profile, protocol."""

    encoder_cls: type[Encoder]
    splitter: Splitter
    splitter_name: str
    profile: Any
    protocol: Protocol


@dataclass
class Sides:
    """The graphs a run trains on, searches (corpus) and asks with (queries), as dataset indices, and the
    learning curve's hold-out (None without `--curve`)."""

    train: np.ndarray
    corpus: np.ndarray
    queries: np.ndarray
    held_out: Any = None


@dataclass(frozen=True)
class Record:
    """What a run records besides its metrics: its labels, the weights it started from, its snapshots, its commit."""

    labels: dict | None
    init: dict | None
    snapshots: Snapshots | None
    commit: str | None


def make_result(options: dict[str, Any], setup: Setup, dataset: GraphDataset, sides: Sides, encoder: Encoder,
                trainer: Trainer, record: Record, means: dict, timings: dict[str, float]) -> RunResult:
    """The run's `RunResult` (without its subsets and hash): its name, configuration, metrics and environment.

    `options` are the run's options that say what it computes (`RunConfig` less `NOT_CONFIGURATION`).
    """
    now = datetime.now(timezone.utc)
    encoder_name, split, profile_name, seed = options["encoder"], options["split"], options["profile"], options["seed"]
    splitter_name, protocol = setup.splitter_name, setup.protocol
    variant = encoder.variant() if encoder.PARAMS else ""
    method = encoder_name + (f"+{variant.replace('=', '.').replace(',', '+')}" if variant else "")
    run_id = (f"{dataset.name}-{split}-{method}-{splitter_name}-{profile_name}-{protocol.name}-s{seed}-"
              f"{now:%Y%m%dT%H%M%S%fZ}")
    config = {
        "run": {**options, "dataset": dataset.name},
        "profile": asdict(setup.profile),
        "labels": record.labels,
        "encoder": encoder.config(),
        "splitter": {"name": splitter_name, "params": setup.splitter.params()},
        "training_history": [{k: v for k, v in asdict(h).items() if k != "evals"} for h in trainer.histories],
        "encoder_stats": dict(getattr(encoder, "stats", {})),
        "init": record.init,
        # what the arithmetic ran in: bfloat16 autocast on CUDA, float32 elsewhere (recorded, not hashed: it
        # follows the device kind, which the leaderboard's rows already keep apart; narbench.harness.confighash)
        "precision": "bfloat16-autocast" if trainer.amp and trainer.device.type == "cuda" else "float32",
        "memory": peak_memory(trainer.device),
    }
    if sides.held_out is not None:  # the curve: the last stage's per-epoch validation and test metrics
        config["learning_curve"] = {**sides.held_out.record(), "stage": trainer.histories[-1].stage,
                                    "epochs": trainer.histories[-1].evals}
    if record.snapshots is not None and record.snapshots.resumed:  # stages that went on from a killed run's snapshot
        config["resumed"] = record.snapshots.resumed
    if options["compile"]:  # why it ran eager after all (torch.compile failed), None when it compiled
        config["compile_failure"] = trainer.compile_failure
    return RunResult(
        run_id=run_id,
        encoder=encoder_name,
        splitter=splitter_name,
        dataset=dataset.describe(split),
        split=split,
        protocol=protocol.name,
        profile=profile_name,
        seed=seed,
        config=config,
        metrics={m: means[m] for m in METRICS},
        metrics_extra={m: v for m, v in means.items() if m not in METRICS},
        timings={k: round(v, 4) for k, v in timings.items()},
        device=str(trainer.device) + (f" ({_device_name(trainer.device)})" if trainer.device.type == "cuda" else ""),
        num_queries=int(len(sides.queries)),
        num_corpus=int(len(sides.corpus)),
        num_train=int(len(sides.train)),
        environment={**environment(), "entry_points": {"encoder": registry.origin("encoder", encoder_name),
                                                       "splitter": registry.origin("splitter", splitter_name)}},
        git_commit=record.commit,
        created=now.isoformat(),
    )


def subset_positions(split, query_idx: np.ndarray) -> dict[str, np.ndarray]:
    """The split's query subsets as positions into the queries this run scored (a profile may take fewer)."""
    where = {int(q): i for i, q in enumerate(np.asarray(query_idx).tolist())}
    return {name: np.array([where[q] for q in split.test[np.asarray(pos, dtype=np.int64)].tolist() if q in where],
                           dtype=np.int64) for name, pos in split.subsets.items()}


def subset_metrics(subsets: dict[str, np.ndarray], per_query: dict[str, np.ndarray]) -> dict[str, dict]:
    """Per named query subset (positions in query order): its size, positions and the mean of every metric over it."""
    out = {}
    for name, positions in subsets.items():
        pos = np.asarray(positions, dtype=np.int64)
        out[name] = {"queries": int(len(pos)), "positions": pos.tolist(),
                     "metrics": {m: (float(np.asarray(v)[pos].mean()) if len(pos) else float("nan"))
                                 for m, v in sorted(per_query.items())}}
    return out


def reset_peak_memory(device) -> None:
    """Start counting the device's peak memory here (CUDA; the host's peak RSS cannot be reset)."""
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory(device) -> dict[str, float]:
    """The run's peak memory in GiB, provenance for sizing parallel runs (`benchmarks/gpu/paper_sweep.sh`):
    the process's peak resident set (`host_rss`, since the process started) and, on CUDA, the peak of
    tensors allocated and of memory reserved by torch's caching allocator since `reset_peak_memory`
    (`cuda_allocated`, `cuda_reserved`; the CUDA context's few hundred MiB are in neither)."""
    import sys

    import torch

    out: dict[str, float] = {}
    try:
        import resource

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
        out["host_rss"] = round(rss / (2**30 if sys.platform == "darwin" else 2**20), 3)
    except (ImportError, OSError):  # no `resource` on Windows
        pass
    if torch.device(device).type == "cuda":
        out["cuda_allocated"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 3)
        out["cuda_reserved"] = round(torch.cuda.max_memory_reserved(device) / 2**30, 3)
    return out


def _device_name(device) -> str:
    import torch

    return torch.cuda.get_device_name(device)
