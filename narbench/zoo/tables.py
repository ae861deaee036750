"""The zoo build's facts, read from its tables in `narbench/data/` (the CSV files are the source of truth).

* `zoo-transformers-heads.csv`: transformers task head -> its auto-model mapping (`TRANSFORMERS_HEADS`);
* `zoo-torchvision-tasks.csv`: torchvision builder subpackage -> task name (`TV_TASKS`);
* `zoo-family-merge.csv`: trivial duplicate family -> the family it is (`FAMILY_MERGE`, a reason per row);
* `zoo-variants.csv`: the values of each variant axis, with where they come from (`VARIANTS`);
* `zoo-config-keys.csv`: the names of the config keys and model arguments a variant or the shrinking
  of a transformers config reads or sets, per zoo and role (`config_keys`).

Each table keeps its rows' order: the first matching key wins where the code looks keys up in turn.
"""

from __future__ import annotations

import csv
from functools import lru_cache
from importlib import resources
from typing import Any


def read_rows(name: str) -> list[dict[str, str]]:
    """The rows of the package data table `narbench/data/<name>`, in file order."""
    with resources.files("narbench").joinpath("data", name).open(newline="") as f:
        return list(csv.DictReader(f))


def _table(name: str, key: str, value: str) -> dict[str, str]:
    """A two-column table of the package data as a dict, in file order."""
    return {row[key]: row[value] for row in read_rows(name)}


def _value(text: str) -> Any:
    """A variant value as its type: integers as int, `true`/`false` as bool, else the string."""
    if text.isdigit():
        return int(text)
    return {"true": True, "false": False}.get(text, text)


#: transformers auto-model mapping per task head.
TRANSFORMERS_HEADS = _table("zoo-transformers-heads.csv", "head", "mapping")

#: torchvision model kind (its builder's subpackage) -> task name.
TV_TASKS = _table("zoo-torchvision-tasks.csv", "kind", "task")

#: Trivial duplicates: a family that is a renamed copy or re-packaging of another architecture
#: (`zoo-family-merge.csv`, each row with its reason).
FAMILY_MERGE = _table("zoo-family-merge.csv", "family", "into")

#: variant axis -> its values, in order (`zoo-variants.csv`, each row with where the values come from).
VARIANTS: dict[str, tuple[Any, ...]] = {r["axis"]: tuple(_value(v) for v in r["values"].split())
                                        for r in read_rows("zoo-variants.csv")}
DEPTH_LADDER = VARIANTS["depth"]
STAGE_LADDER = VARIANTS["stage_depth"]
RAFT_UPDATES = VARIANTS["num_flow_updates"]
TIMM_POOLS = VARIANTS["global_pool"]
ACTIVATIONS = VARIANTS["act"]
KV_HEADS = VARIANTS["kv_heads"]
BIASES = VARIANTS["bias"]


@lru_cache(maxsize=None)
def config_keys(zoo: str, role: str) -> tuple[str, ...]:
    """The key names of `role` for `zoo` (`zoo-config-keys.csv`), in the table's order."""
    for r in read_rows("zoo-config-keys.csv"):
        if (r["zoo"], r["role"]) == (zoo, role):
            return tuple(r["keys"].split())
    raise KeyError(f"zoo-config-keys.csv has no row for {zoo} {role}")
