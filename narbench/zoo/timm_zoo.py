"""timm models as graphs: a spec's model built with its variant (the depth of its deepest stage, its layer
count, its pooling or activation), run once on the input size of its pretrained config.

A depth variant is set where timm builds the model (`build_model_with_cfg`, patched for the duration
of one build): in the model's final keyword arguments, or in the config dataclass it is given
(`zoo-config-keys.csv` names the arguments); a model without one is `NotApplicable`. Models are
run on the meta device first, on the CPU when that fails (never above `CPU_PARAM_LIMIT` parameters).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from narbench.zoo.devices import CPU_PARAM_LIMIT, num_params, try_devices
from narbench.zoo.extract import RawGraph, extract_graph
from narbench.zoo.spec import NotApplicable, Spec
from narbench.zoo.tables import config_keys

_DEPTH_KEYS = config_keys("timm", "depth")
_STAGE_KEYS = config_keys("timm", "stage_depths")
_CONFIG_KWARGS = config_keys("timm", "config_kwargs")


def _set_deepest(seq: Any, value: int) -> Any:
    if not (isinstance(seq, (list, tuple)) and seq and all(isinstance(x, int) for x in seq)):
        return None
    i = max(range(len(seq)), key=lambda j: (seq[j], -j))
    out = list(seq)
    out[i] = value
    return type(seq)(out) if isinstance(seq, tuple) else out


def _apply_depth_kwargs(kw: dict[str, Any], option: str, value: int) -> bool:
    """Set a timm model's depth argument in its final kwargs (or its config dataclass)."""
    if option == "depth":
        for k in _DEPTH_KEYS:
            if isinstance(kw.get(k), int) and not isinstance(kw.get(k), bool):
                kw[k] = value
                return True
    else:
        for k in _STAGE_KEYS:
            new = _set_deepest(kw.get(k), value)
            if new is not None:
                kw[k] = new
                return True
    for ck in _CONFIG_KWARGS:
        cfg = kw.get(ck)
        if cfg is not None and dataclasses.is_dataclass(cfg):
            new_cfg = _apply_depth_dataclass(cfg, option, value)
            if new_cfg is not None:
                kw[ck] = new_cfg
                return True
    return False


def _apply_depth_dataclass(cfg: Any, option: str, value: int) -> Any:
    names = {f.name for f in dataclasses.fields(cfg)}
    if option == "depth":
        for k in _DEPTH_KEYS:
            if k in names and isinstance(getattr(cfg, k), int):
                return dataclasses.replace(cfg, **{k: value})
        return None
    for k in _STAGE_KEYS:
        if k in names:
            new = _set_deepest(getattr(cfg, k), value)
            if new is not None:
                return dataclasses.replace(cfg, **{k: new})
    blocks = getattr(cfg, "blocks", None)  # byobnet: tuple of block cfgs with a depth `d`
    if isinstance(blocks, (list, tuple)) and blocks and all(dataclasses.is_dataclass(b) and hasattr(b, "d") for b in blocks):
        flat = list(blocks)
        depths = [b.d for b in flat]
        if all(isinstance(d, int) for d in depths):
            i = max(range(len(depths)), key=lambda j: (depths[j], -j))
            flat[i] = dataclasses.replace(flat[i], d=value)
            return dataclasses.replace(cfg, blocks=type(blocks)(flat))
    return None


class _TimmDepthHook:
    """Patch `build_model_with_cfg` in every timm module to override the depth argument."""

    def __init__(self, option: str | None, value: int | None):
        self.option, self.value, self.saved = option, value, []

    def __enter__(self):
        if self.option is None:
            return self
        import timm.models._builder as builder

        orig = builder.build_model_with_cfg
        option, value = self.option, self.value

        def patched(*args, **kw):
            if not _apply_depth_kwargs(kw, option, value):
                raise NotApplicable(f"no {option} argument in the model's kwargs")
            return orig(*args, **kw)

        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("timm.") and getattr(mod, "build_model_with_cfg", None) is orig:
                self.saved.append((mod, orig))
                mod.build_model_with_cfg = patched
        return self

    def __exit__(self, *exc):
        for mod, orig in self.saved:
            mod.build_model_with_cfg = orig
        return False


def extract_timm(spec: Spec, input_shape: tuple[int, ...] | None = None) -> tuple[RawGraph, dict[str, Any]]:
    """The spec's timm model as a graph, and how it ran (device, parameters, input size)."""
    import timm
    import torch

    opts = spec.options()
    depth_opt = next(((k, opts.pop(k)) for k in ("depth", "stage_depth") if k in opts), (None, None))
    if isinstance(opts.get("act_layer"), str):  # a class: some models call act_layer() directly
        from timm.layers import get_act_layer

        opts["act_layer"] = get_act_layer(opts["act_layer"])

    def build(dev: str):
        try:
            with _TimmDepthHook(*depth_opt), torch.device(dev):
                return timm.create_model(spec.model, pretrained=False, **opts)
        except TypeError as exc:
            if opts and "unexpected keyword argument" in str(exc):
                raise NotApplicable(f"the model takes no {', '.join(opts)} argument") from exc
            raise

    def run(dev: str):
        if dev == "cpu":
            n = num_params(build("meta"))
            if n > CPU_PARAM_LIMIT:
                raise RuntimeError(f"{n / 1e6:.0f}M parameters: too large to run on the CPU")
        model = build(dev)
        cfg = getattr(model, "pretrained_cfg", None) or {}
        size = tuple(input_shape[1:]) if input_shape else tuple(cfg.get("input_size", (3, 224, 224)))
        x = torch.randn(*(input_shape or (1, *size)), device=dev)
        return extract_graph(model, x), {"params": num_params(model), "input_size": list(size)}

    return try_devices(["meta", "cpu"], run)

