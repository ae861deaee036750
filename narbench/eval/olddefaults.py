"""Encoder parameters added with a default that changed what the encoder computes, and where it did.

A result file written before such a parameter records no value for it, yet on the datasets listed it
ran the old behaviour. Its configuration hash (`narbench.harness.confighash`) and its leaderboard row
(`narbench.leaderboard.records`) read it as that old value, so old and new runs are never the same run
nor averaged in one row; elsewhere the old and new code computed the same numbers, and the file keeps
its hash (the new default hashes as absent: `confighash.ADDED_PARAMS`).

- `gps`, `norm_stats` (issue 59's 2.3 leaderboard): a layer recomputed in the backward pass (above
  `GPSStack.CHECKPOINT_ELEMENTS`) updated its batch norms' running statistics a second time (`twice`);
  now once. On `real` 3-5 of about 600 quick-profile batches and nearly every paper-profile batch
  recompute; on `nas` none (0 of 1,055 quick and 795 paper batches: its graphs are small).
"""

from __future__ import annotations

from typing import Any

#: (encoder, parameter, dataset name) -> the value a result file without the parameter ran
CHANGED_DEFAULTS: dict[tuple[str, str, str], Any] = {("gps", "norm_stats", "real"): "twice"}


def implied_params(encoder: str, dataset: str | None, params: dict[str, Any] | None) -> dict[str, Any]:
    """The parameters a result file of `encoder` on `dataset` ran without recording (`params`: what it
    recorded): {parameter: old value} for each `CHANGED_DEFAULTS` entry it lacks."""
    params = params or {}
    return {p: old for (enc, p, ds), old in CHANGED_DEFAULTS.items()
            if enc == encoder and ds == dataset and p not in params}


def encoder_variant(result) -> str:
    """A result file's encoder variant, as its leaderboard row names it: the non-default parameters it
    recorded (`config.encoder.variant`), then the old value of each parameter it ran without recording."""
    encoder = (result.config or {}).get("encoder") or {}
    implied = implied_params(str(result.encoder), (result.dataset or {}).get("name"), encoder.get("params"))
    return ",".join(filter(None, [str(encoder.get("variant") or ""), *(f"{k}={v}" for k, v in implied.items())]))
