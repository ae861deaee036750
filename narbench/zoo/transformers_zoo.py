"""transformers models as graphs: a model type's class for a task head built from its config (shrunk on
the CPU, full size on the meta device: `narbench.zoo.transformers_config`), with eager attention, run once
on dummy inputs made from its main input name and its forward signature (`transformers_inputs`).
"""

from __future__ import annotations

import inspect
from typing import Any

from narbench.zoo.devices import num_params, try_devices
from narbench.zoo.extract import RawGraph, extract_graph
from narbench.zoo.sources import import_zoo
from narbench.zoo.spec import Spec
from narbench.zoo.tables import TRANSFORMERS_HEADS, config_keys
from narbench.zoo.transformers_config import is_int, special_ids, transformers_config

#: sub-configs searched for the input's size and channels after the top level
_INPUT_SUBCONFIGS = config_keys("transformers", "input_subconfigs")


def _transformers_class(model_type: str, head: str):
    ma = import_zoo("transformers.models.auto.modeling_auto")

    name = getattr(ma, TRANSFORMERS_HEADS[head])[model_type]
    if isinstance(name, (list, tuple)):
        name = name[0]
    return import_zoo("transformers", name)  # imports the model's module on first access


def _sub(config, *names):
    for n in names:
        sub = getattr(config, n, None)
        if sub is not None:
            return sub
    return None


def _cfg_get(config, key, default=None):
    for c in (config, _sub(config, *_INPUT_SUBCONFIGS)):
        if c is not None and getattr(c, key, None) is not None:
            return getattr(c, key)
    return default


def vocab_size(config) -> int:
    return getattr(config, "vocab_size", None) or getattr(_sub(config, "text_config") or config, "vocab_size", 1024) or 1024


def transformers_inputs(model, config, head: str, dev: str, shape: tuple[int, ...] | None = None) -> dict[str, Any]:
    """Generic dummy inputs from the model's main input name and its forward signature.

    `shape` replaces the main input's shape (token ids stay ids, pixel/audio inputs random).
    """
    import torch

    params = inspect.signature(model.forward).parameters
    main = getattr(model, "main_input_name", "input_ids")
    kw: dict[str, Any] = {}
    seq = 16

    def ids(shape):
        vocab = vocab_size(config)
        special = set(special_ids(config.to_dict()))
        pool = [i for i in range(4, min(vocab, 4096)) if i not in special] or [0]
        n = 1
        for s in shape:
            n *= s
        vals = [pool[(7 * j + 3) % len(pool)] for j in range(n)]
        return torch.tensor(vals, dtype=torch.long, device=dev).reshape(shape)

    if main == "input_ids" or (main not in params and "input_ids" in params):
        kw["input_ids"] = ids(shape or ((1, 2, seq) if head == "multiple-choice" else (1, seq)))
        eos = getattr(config, "eos_token_id", None)
        eos = eos[0] if isinstance(eos, (list, tuple)) and eos else eos
        if is_int(eos) and 0 <= eos < vocab_size(config):  # sequence heads pool at the last <eos>
            kw["input_ids"][..., -1] = eos
        if "attention_mask" in params:  # always given: no data-dependent mask checks (meta), same ops
            kw["attention_mask"] = torch.ones_like(kw["input_ids"])
    elif main == "pixel_values":
        size = _cfg_get(config, "image_size", 224)
        if isinstance(size, dict):
            size = size.get("height", 224), size.get("width", 224)
        h, w = (size, size) if isinstance(size, int) else tuple(size)[:2]
        ch = _cfg_get(config, "num_channels", 3)
        kw["pixel_values"] = torch.randn(*(shape or (1, ch, h, w)), device=dev)
    elif main == "input_values":
        kw["input_values"] = torch.randn(*(shape or (1, 16000)), device=dev)
    elif main == "input_features":
        mel = _cfg_get(config, "num_mel_bins")
        src = _cfg_get(config, "max_source_positions")
        if shape:
            kw["input_features"] = torch.randn(*shape, device=dev)
        elif mel and src:
            kw["input_features"] = torch.randn(1, mel, 2 * src, device=dev)
        else:
            feat = (_cfg_get(config, "input_feat_per_channel", 80) or 80) * (_cfg_get(config, "input_channels", 1) or 1)
            kw["input_features"] = torch.randn(1, 64, feat, device=dev)
    else:
        raise RuntimeError(f"no dummy input for main input {main!r}")
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params and head != "sequence-classification":
        kw["decoder_input_ids"] = ids((1, 8))
    elif getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        kw["decoder_input_ids"] = kw.get("input_ids", ids((1, 8)))
    if "use_cache" in params:
        kw["use_cache"] = False
    return kw


def extract_transformers(spec: Spec, input_shape: tuple[int, ...] | None = None) -> tuple[RawGraph, dict[str, Any]]:
    """The spec's transformers model as a graph, and how it ran (device, parameters, shrunk or not)."""
    import torch

    cls = _transformers_class(spec.model, spec.task)
    variant = spec.options()
    transformers_config(spec.model, variant, shrink=False)  # raises NotApplicable early

    def run(mode: str):
        dev = "cpu" if mode == "cpu-shrunk" else "meta"
        config = transformers_config(spec.model, variant, shrink=(mode == "cpu-shrunk"))
        with torch.device(dev):
            model = cls._from_config(config, attn_implementation="eager")
        kw = transformers_inputs(model, config, spec.task, dev, input_shape)
        info = {"params": num_params(model), "shrunk": mode == "cpu-shrunk"}
        try:
            return extract_graph(model, (), kw), info
        except RuntimeError as exc:  # masks checked for all-ones (.all()) cannot run on meta
            if dev != "meta" or "attention_mask" not in kw or "meta" not in str(exc):
                raise
            kw.pop("attention_mask")
            return extract_graph(model, (), kw), {**info, "no_attention_mask": True}

    graph, info = try_devices(["cpu-shrunk", "meta"], run)
    info["device"] = "cpu" if info["device"] == "cpu-shrunk" else "meta"
    return graph, info
