"""A candidate architecture of the `real` dataset (`Spec`) and its family label.

A `Spec` names one architecture: the zoo (`source`), the model name there, the task head, a
variant (topology-changing config overrides, `narbench.zoo.sources`) and a family label.

Family labels: timm: the defining module (`timm.models.<module>`); torchvision: the builder's
module (its last component, so `quantization.resnet` is `resnet`); transformers: the model type.
Names are lower-cased with `-` as `_`, then `FAMILY_MERGE` (`zoo-family-merge.csv`) maps trivial
duplicates (re-implementations or renamed copies of one architecture, checked to give the same
graphs) onto one label.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from narbench.zoo.tables import FAMILY_MERGE

SOURCES = ("timm", "torchvision", "transformers")


class NotApplicable(Exception):
    """The spec's variant does not apply to this model (e.g. no depth argument)."""


@dataclass(frozen=True)
class Spec:
    """One candidate architecture. `variant` is a sorted tuple of (option, value) pairs."""

    source: str
    model: str
    task: str
    variant: tuple[tuple[str, Any], ...] = ()
    family: str = ""

    @property
    def key(self) -> str:
        var = ",".join(f"{k}={_fmt(v)}" for k, v in self.variant)
        return f"{self.source}/{self.model}/{self.task}" + (f"/{var}" if var else "")

    @property
    def slug(self) -> str:
        """A file-name-safe, unique name for the spec's result file."""
        base = re.sub(r"[^A-Za-z0-9._=-]+", "_", self.key)[:120]
        return f"{base}-{hashlib.sha1(self.key.encode()).hexdigest()[:10]}"

    def options(self) -> dict[str, Any]:
        return dict(self.variant)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "model": self.model, "task": self.task,
                "variant": [[k, v] for k, v in self.variant], "family": self.family}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Spec":
        return cls(d["source"], d["model"], d["task"], tuple((k, _tuplify(v)) for k, v in d["variant"]),
                   d.get("family", ""))


def _fmt(v: Any) -> str:
    return "-".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def _tuplify(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def family_label(raw: str) -> str:
    name = raw.lower().replace("-", "_")
    return FAMILY_MERGE.get(name, name)
