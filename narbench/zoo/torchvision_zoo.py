"""torchvision models as graphs: a spec's builder called without weights, with its variant (`headless`:
the last Linear replaced by Identity; segmentation `aux_loss`; RAFT `num_flow_updates`), run once on an
input of its kind (a 224 x 224 image, 299 x 299 for Inception; a list of one 320 x 320 image for detection;
a 16-frame clip for video; two 128 x 128 images for optical flow). Video models run on the meta device
first, the others on the CPU first.
"""

from __future__ import annotations

import inspect
from typing import Any

from narbench.zoo.devices import num_params, try_devices
from narbench.zoo.extract import RawGraph, extract_graph
from narbench.zoo.sources import torchvision_kind
from narbench.zoo.spec import NotApplicable, Spec


def extract_torchvision(spec: Spec, input_shape: tuple[int, ...] | None = None) -> tuple[RawGraph, dict[str, Any]]:
    """The spec's torchvision model as a graph, and how it ran (device, parameters)."""
    import torch
    from torchvision.models import get_model_builder

    builder = get_model_builder(spec.model)
    kind = torchvision_kind(builder.__module__)
    opts = spec.options()
    headless = opts.pop("headless", False)
    updates = opts.pop("num_flow_updates", None)
    kwargs: dict[str, Any] = {"weights": None, **opts}
    params = inspect.signature(builder).parameters
    if "weights_backbone" in params:
        kwargs["weights_backbone"] = None
    if kind == "quantization":
        kwargs["quantize"] = False

    def inputs(dev: str):
        if input_shape:
            x = torch.randn(*input_shape, device=dev)
            return ([x[0]],) if kind == "detection" else (x, x.clone()) if kind == "optical_flow" else (x,)
        if kind == "detection":
            return ([torch.randn(3, 320, 320, device=dev)],)
        if kind == "video":
            size = (16, 224, 224) if spec.model.startswith(("mvit", "s3d", "swin3d")) else (16, 112, 112)
            return (torch.randn(1, 3, *size, device=dev),)
        if kind == "optical_flow":
            return (torch.randn(1, 3, 128, 128, device=dev), torch.randn(1, 3, 128, 128, device=dev))
        side = 299 if "inception" in spec.model else 224
        return (torch.randn(1, 3, side, side, device=dev),)

    def run(dev: str):
        with torch.device(dev):
            model = builder(**kwargs)
        if headless:
            _replace_last_linear(model)
        call_kwargs = {"num_flow_updates": updates} if updates else {}
        return extract_graph(model, inputs(dev), call_kwargs), {"params": num_params(model)}

    devices = ["meta", "cpu"] if kind == "video" else ["cpu", "meta"]
    return try_devices(devices, run)


def _replace_last_linear(model) -> None:
    import torch

    last = None
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear):
            last = name
    if last is None:
        raise NotApplicable("no Linear layer to remove")
    parent_name, _, child = last.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, torch.nn.Identity())
