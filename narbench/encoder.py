"""The encoder interface where plugins import it: `from narbench.encoder import Encoder`
(docs/third-party-encoder.md). It is defined in `narbench.train.encoder`; this module is a face
at the top of the package, so nothing inside narbench imports it."""

from narbench.data.graph import ArchGraph, import_torch_geometric
from narbench.train.encoder import Encoder, Labels, graph_to_data
from narbench.train.profiles import ModelConfig, Profile
from narbench.train.splitter import Splitter
from narbench.train.trainer import Trainer

__all__ = ["ArchGraph", "Encoder", "Labels", "ModelConfig", "Profile", "Splitter", "Trainer", "graph_to_data",
           "import_torch_geometric"]
