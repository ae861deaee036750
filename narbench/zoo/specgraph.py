"""A spec's graph: build the spec's model in its zoo (`narbench.zoo.timm_zoo`, `torchvision_zoo`,
`transformers_zoo`) and extract its graph with `narbench.zoo.extract.extract_graph`.

The `python` source names a function `module:function` that returns (model, example inputs): the
tests' and any caller's own models, built and extracted the same way.
"""

from __future__ import annotations

import importlib
from typing import Any

from narbench.zoo.extract import RawGraph, extract_graph
from narbench.zoo.spec import Spec
from narbench.zoo.timm_zoo import extract_timm
from narbench.zoo.torchvision_zoo import extract_torchvision
from narbench.zoo.transformers_zoo import extract_transformers


def extract_spec(spec: Spec, *, input_shape: tuple[int, ...] | None = None) -> tuple[RawGraph, dict[str, Any]]:
    """Build the spec's model, run one forward pass, return (graph, info about how it was run).

    `input_shape` replaces the shape of the example input the zoo's rule picks (the main input
    of a transformers model; token ids stay token ids); None keeps the build's choice.
    """
    import torch

    torch.manual_seed(0)
    if spec.source == "timm":
        return extract_timm(spec, input_shape)
    if spec.source == "torchvision":
        return extract_torchvision(spec, input_shape)
    if spec.source == "transformers":
        return extract_transformers(spec, input_shape)
    if spec.source == "python":  # "module:function" returning (model, example_inputs)
        mod, fn = spec.model.split(":")
        model, inputs = getattr(importlib.import_module(mod), fn)(**spec.options())
        return extract_graph(model, inputs), {"device": "cpu"}
    raise ValueError(f"unknown source {spec.source!r}")
