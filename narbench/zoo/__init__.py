"""Model zoos -> computational graphs (the `real` dataset) and graph extraction for any model.

Extraction (`extract_graph`, `model_to_arch_graph`; in-place ops on views `inplace`, design attributes
`attributes`) needs only torch. Enumerating and building
the zoo dataset (`narbench.zoo.sources`, `narbench.zoo.build`) needs the optional `zoo` extra
(timm, torchvision, transformers), which is imported only when used.

May import: narbench.core, narbench.data, narbench.datasets.
"""

from narbench.data.coarse import COARSE_LABELS, coarse_label
from narbench.zoo.extract import (
    ExtractionError,
    RawGraph,
    autograd_graph,
    extract_graph,
    model_to_arch_graph,
)

__all__ = [
    "COARSE_LABELS",
    "ExtractionError",
    "RawGraph",
    "autograd_graph",
    "build_real",
    "coarse_label",
    "extract_graph",
    "model_to_arch_graph",
]


def build_real(*args, **kwargs):
    """See `narbench.zoo.build.build_real`."""
    from narbench.zoo.build import build_real as _build_real

    return _build_real(*args, **kwargs)
