"""narbench: benchmark harness and search engine for Neural Architecture Retrieval.

The path through the package: dataset -> split -> splitter -> encoder -> trainer ->
embeddings -> retrieval -> metrics -> result. `narbench.run(RunConfig(...))` does all of it.
`narbench.search(target)` finds the real architectures most similar to a model (imported on
first use).
"""

from narbench.dataset import GraphDataset, load_dataset
from narbench.graph import ArchGraph, GraphError
from narbench.runner import RunConfig, run

__version__ = "0.1.0"
__all__ = ["ArchGraph", "GraphDataset", "GraphError", "RunConfig", "load_dataset", "run", "search"]


def __getattr__(name: str):
    if name == "search":  # lazy: the search engine is not needed to run the benchmark
        from narbench.engine import search

        return search
    raise AttributeError(f"module 'narbench' has no attribute {name!r}")
