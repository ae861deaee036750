"""narbench: benchmark harness and search engine for Neural Architecture Retrieval.

The path through the package: dataset -> split -> splitter -> encoder -> trainer ->
embeddings -> retrieval -> metrics -> result. `narbench.run(RunConfig(...))` does all of it.
`narbench.search(target)` finds the real architectures most similar to a model.

The names below are imported on first use (PEP 562), so that `import narbench.cli` and
`narbench --version` do not pay for torch.
"""

__version__ = "0.1.0"

__all__ = ["ArchGraph", "GraphDataset", "GraphError", "RunConfig", "load_dataset", "run", "search"]

_LAZY = {
    "ArchGraph": "narbench.data.graph", "GraphError": "narbench.data.graph",
    "GraphDataset": "narbench.data.dataset", "load_dataset": "narbench.data.dataset",
    "RunConfig": "narbench.harness.runner", "run": "narbench.harness.runner",
    "search": "narbench.search_engine.engine",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'narbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
