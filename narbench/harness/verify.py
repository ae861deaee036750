"""Re-running deterministic floors: a result of a training-free encoder is checked by running it again.

A training-free encoder (`Encoder.trainable = False`: the op histograms, WL, graf, graphstats,
random, best-floor) computes the same embeddings for the same graphs and seed on every host (the
gate holds them to a band of 0), and retrieval is exact (`narbench.eval.retrieval`). So its result
file can be re-made here: the same configuration (`config.run` of the file) through the runner, on
the CPU, on the data the file names (loaded only when this machine has that content). Its per-query
scores must equal the sidecar's to its 6 decimals and its means the file's bit for bit; anything else
is refused (`InvalidResultError`): the file is not what that encoder gives, or it was written by a
narbench whose encoder or metrics differ (the file's `git_commit` says which).

A trained encoder's result cannot be checked without training it again (minutes to hours, and then
only to float noise), so it stays "unverified"; so does a floor whose data is not here.

`narbench leaderboard --verify` uses `FloorVerifier` (`narbench.leaderboard.collect(verify=...)`).
It costs what the runs themselves cost (`timings.total` in each file); configurations that several
files share are run once.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from narbench.eval.result import RunResult
from narbench.eval.validation import InvalidResultError, KnownDataset, load_content

#: the sidecar keeps 6 decimals: a re-run's per-query scores are compared after the same rounding
DECIMALS = 6
#: `config.run` fields the re-run sets itself: where it writes, how it reports, what it starts from
_FORCED = {"out": None, "progress": False, "device": "cpu", "resume": False, "save_embeddings": False,
           "save_weights": False, "init_from": None, "compile": False, "jobs": None}


def deterministic_floor(encoder: str) -> bool:
    """True for a registered encoder that trains nothing (`trainable = False`); False for any other name."""
    from narbench.core import registry

    try:
        return not getattr(registry.load("encoder", encoder), "trainable", True)
    except registry.RegistryError:
        return False


def rerun_config(result: RunResult):
    """The `RunConfig` that re-makes `result`: its recorded options, written nowhere, on the CPU."""
    from narbench.harness.runner import RunConfig

    run = (result.config or {}).get("run") or {}
    names = {f.name for f in dataclasses.fields(RunConfig)}
    options = {k: v for k, v in run.items() if k in names}
    options.update(_FORCED, encoder=result.encoder, splitter=result.splitter, split=result.split,
                   protocol=result.protocol, profile=result.profile, seed=result.seed)
    return RunConfig(**options)


class FloorVerifier:
    """`verify(path, result, per_query, datasets)` for `narbench.leaderboard.collect`: True when the file was
    re-made exactly, False when it cannot be (a trained encoder, data not here), `InvalidResultError` when
    the re-run differs. `progress` gets a line per re-run."""

    def __init__(self, progress: Callable[[str], None] | None = None) -> None:
        self.say = progress or (lambda _text: None)
        self._datasets: dict[tuple, Any] = {}
        self._runs: dict[str, tuple[dict[str, float], dict[str, np.ndarray]]] = {}
        self.rerun = self.skipped = 0

    def __call__(self, path: Path, result: RunResult, per_query: dict[str, np.ndarray],
                 datasets: Iterable[KnownDataset]) -> bool:
        if not deterministic_floor(result.encoder):
            self.skipped += 1
            return False
        dataset = self._dataset(result, datasets)
        if dataset is None:
            self.skipped += 1
            return False
        means, scores = self._run(result, dataset, path)
        problem = difference(result, per_query, means, scores)
        if problem:
            raise InvalidResultError(path, f"re-running training-free encoder {result.encoder!r} ({result.profile}, "
                                           f"seed {result.seed}, {result.split}) gives {problem}: the file is not what "
                                           f"it computes here (it says narbench commit {result.git_commit or '?'})")
        return True

    def _dataset(self, result: RunResult, datasets: Iterable[KnownDataset]):
        key = tuple(result.dataset.get(k) for k in ("name", "version", "sha256"))
        if key not in self._datasets:
            matching = [d for d in datasets if d.name == key[0] and d.version == str(key[1])]
            self._datasets[key] = load_content(result, matching)
        return self._datasets[key]

    def _run(self, result: RunResult, dataset, path: Path):
        from rich.console import Console

        from narbench.harness.runner import run

        cfg = rerun_config(result)
        key = json.dumps([result.dataset.get("sha256"), dataclasses.asdict(cfg)], sort_keys=True, default=str)
        if key not in self._runs:
            t = time.perf_counter()
            ev = run(cfg, dataset=dataset, console=Console(stderr=True, quiet=True))
            self._runs[key] = ({**ev.result.metrics, **ev.result.metrics_extra}, ev.per_query)
            self.rerun += 1
            self.say(f"re-ran {path.name} ({time.perf_counter() - t:.1f} s)")
        return self._runs[key]


def difference(result: RunResult, per_query: dict[str, np.ndarray], means: dict[str, float],
               scores: dict[str, np.ndarray]) -> str | None:
    """The first way a re-run (`means`, `scores`) differs from the file (`result`, its sidecar `per_query`),
    in a few words; None when it is the same."""
    recorded = {**result.metrics, **result.metrics_extra}
    for metric, values in per_query.items():
        again = scores.get(metric)
        if again is None:
            continue
        if len(again) != len(values):
            return f"{len(again)} queries, the file {len(values)}"
        rounded = np.array([round(float(v), DECIMALS) for v in again])  # as `RunResult.write` rounds them
        differ = np.flatnonzero(rounded != values)
        if len(differ):
            q = int(differ[0])
            return f"{metric} {rounded[q]:.6f} for query {q}, the file {values[q]:.6f}"
        if metric in recorded and float(np.mean(again)) != float(recorded[metric]):
            return f"mean {metric} {float(np.mean(again))!r}, the file {recorded[metric]!r}"
    return None
