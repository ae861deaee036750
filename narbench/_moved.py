"""The module paths of narbench 0.1, kept for one release as aliases of the modules' new homes.

Each old module (`narbench/trainer.py`, ...) only calls `alias`: importing it warns (a
DeprecationWarning that points at the importing line) and puts the moved module in its place in
`sys.modules`. So `narbench.trainer.Trainer is narbench.train.trainer.Trainer`, monkeypatching
the old path patches the module itself, and a pickle that names the old path still loads.
"""

from __future__ import annotations

import importlib
import sys
import warnings


def alias(old: str, new: str) -> None:
    """Make the module `old` (being imported) the module `new`, with a DeprecationWarning."""
    warnings.warn(f"`{old}` moved to `{new}`: import it from there (the old path goes in the next release)",
                  DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
