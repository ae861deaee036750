"""The module paths of narbench 0.1, kept for one release as aliases of the modules' new homes.

`MOVED` maps each old path to the module's home since the house was laid out in subpackages
(docs/development.md). Importing an old path warns (a DeprecationWarning that points at the
importing line) and gives the moved module itself: `narbench.trainer.Trainer is
narbench.train.trainer.Trainer`, monkeypatching the old path patches the module, and a pickle
that names the old path still loads. No file stands at an old path, so git follows each move.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED = {
    "narbench.registry": "narbench.core.registry",
    "narbench.jit": "narbench.core.jit",
    "narbench.graph": "narbench.data.graph",
    "narbench.ops": "narbench.data.ops",
    "narbench.canonical": "narbench.data.canonical",
    "narbench.store": "narbench.data.store",
    "narbench.dataset": "narbench.data.dataset",
    "narbench.splitter": "narbench.train.splitter",
    "narbench.trainer": "narbench.train.trainer",
    "narbench.losses": "narbench.train.losses",
    "narbench.profiles": "narbench.train.profiles",
    "narbench.protocol": "narbench.train.protocol",
    "narbench.checkpoint": "narbench.train.checkpoint",
    "narbench.allocator": "narbench.train.allocator",
    "narbench.distributed": "narbench.train.distributed",
    "narbench.progress": "narbench.train.progress",
    "narbench.health": "narbench.train.health",
    "narbench.parts": "narbench.train.parts",
    "narbench.partcache": "narbench.train.partcache",
    "narbench.retrieval": "narbench.eval.retrieval",
    "narbench.metrics": "narbench.eval.metrics",
    "narbench.result": "narbench.eval.result",
    "narbench.validation": "narbench.eval.validation",
    "narbench.taxonomy": "narbench.datasets.taxonomy",
    "narbench.datasheet": "narbench.datasets.datasheet",
    "narbench.confighash": "narbench.harness.confighash",
    "narbench.runs": "narbench.harness.runs",
    "narbench.preflight": "narbench.harness.preflight",
    "narbench.runner": "narbench.harness.runner",
    "narbench.launchers": "narbench.harness.launchers",
    "narbench.sweep": "narbench.harness.sweep",
    "narbench.gate": "narbench.harness.gate",
    "narbench.engine": "narbench.search_engine.engine",
    "narbench.index": "narbench.search_engine.index",
    "narbench.target": "narbench.search_engine.target",
    "narbench.backends": "narbench.search_engine.backends",
}


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of `MOVED` (consulted after the real files) and loads the new module."""

    def find_spec(self, fullname, path=None, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec):
        return None  # a placeholder: exec_module puts the moved module in its place

    def exec_module(self, module) -> None:
        old, new = module.__name__, MOVED[module.__name__]
        warnings.warn(f"`{old}` moved to `{new}`: import it from there (the old path goes in the next release)",
                      DeprecationWarning, stacklevel=2)
        sys.modules[old] = importlib.import_module(new)


def install() -> None:
    """Put the finder on `sys.meta_path` once (`import narbench` does)."""
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.append(MovedModules())
