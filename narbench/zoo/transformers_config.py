"""transformers configs for extraction: a model type's default config with a variant applied (its layer
count, key/value heads, activation or linear biases) and, to run on the CPU, shrunk to small widths with
every topology-defining count kept.

The config keys each step reads or sets are data (`zoo-config-keys.csv`, role per row): a config names
its hidden size `hidden_size`, `d_model`, `n_embd`, ...; the first key of a role that the config sets
is the one read. Sub-configs (a multimodal model's text or vision config) are recursed into.
"""

from __future__ import annotations

from typing import Any

from narbench.zoo.spec import NotApplicable
from narbench.zoo.tables import config_keys

#: key names per role (`zoo-config-keys.csv`); integers under a `not_width` fragment are never widths, even when
#: equal to the hidden size
_KEYS = {role: config_keys("transformers", role) for role in (
    "hidden", "ffn", "heads", "kv_heads", "head_dim", "layers", "not_width", "act", "bias", "special_id_suffixes",
    "no_special_ids", "depth_subconfigs", "pretrained_switches")}


def special_ids(d: dict[str, Any]) -> list[int]:
    """The special token ids (`..._token_id`, ...) anywhere in a config's dict."""
    out = []
    for k, v in d.items():
        if k.endswith(_KEYS["special_id_suffixes"]):
            vals = v if isinstance(v, (list, tuple)) else [v]
            out += [x for x in vals if isinstance(x, int) and not isinstance(x, bool)]
        elif isinstance(v, dict) and k not in _KEYS["no_special_ids"]:
            out += special_ids(v)
    return out


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_config(v: Any) -> bool:
    return hasattr(v, "to_dict") and hasattr(v, "model_type") and not isinstance(v, type)


def _attrs(cfg) -> dict[str, Any]:
    """A config's own attributes (names as stored, values as objects; sub-configs as configs)."""
    return {k: getattr(cfg, k) for k in cfg.to_dict() if hasattr(cfg, k)}


def shrink_config(config, special_max: int | None = None):
    """A copy of `config` with small widths and every topology-defining count kept: layer counts
    and types, experts, top-k, grouped/multi-query KV structure. Recurses into sub-configs.

    hidden sizes -> 64 (and every other width equal to the old hidden size), FFN sizes -> 128,
    heads -> 4, head_dim -> 16, KV heads -> 4 / 2 / 1 (MHA / GQA / MQA kept), vocabularies ->
    max(1024, largest special token id + 1). Lists of widths are left alone.
    """
    import copy

    config = copy.deepcopy(config)
    if special_max is None:
        ids = special_ids(config.to_dict())
        special_max = max(ids) if ids else 0
    _shrink_in_place(config, special_max)
    return config


def _shrink_in_place(cfg, special_max: int) -> None:
    attrs = _attrs(cfg)
    old_hidden = next((attrs[k] for k in _KEYS["hidden"] if is_int(attrs.get(k))), None)
    old_heads = next((attrs[k] for k in _KEYS["heads"] if is_int(attrs.get(k))), None)
    for k, v in attrs.items():
        if _is_config(v):
            _shrink_in_place(v, special_max)
            continue
        if not is_int(v):
            continue
        new = v
        if k in _KEYS["hidden"]:
            new = 64
        elif k in _KEYS["ffn"]:
            new = 128
        elif k in _KEYS["heads"]:
            new = 4
        elif k in _KEYS["head_dim"]:
            new = 16
        elif k in _KEYS["kv_heads"]:
            new = 4 if v == old_heads else (1 if v == 1 else 2)
        elif k.startswith("vocab_size"):
            new = max(1024, special_max + 1)
        elif old_hidden is not None and v == old_hidden and v > 1 and not any(t in k for t in _KEYS["not_width"]):
            new = 64
        if new != v:
            try:
                setattr(cfg, k, new)
            except Exception:  # noqa: BLE001 - read-only / validated attribute: keep it
                pass


def _resize_layer_lists(cfg, old: int, new: int) -> None:
    """Per-layer lists (layer types, ...) follow a depth change, repeating their pattern."""
    for k, v in _attrs(cfg).items():
        if isinstance(v, (list, tuple)) and len(v) == old and old > 1 and k not in _KEYS["layers"]:
            setattr(cfg, k, type(v)(v[i % old] for i in range(new)))


def _depth_target(cfg) -> tuple[Any, list[str]] | None:
    """The (sub)config holding the layer counts: the top level, else the text/decoder config."""
    attrs = _attrs(cfg)
    keys = [k for k in _KEYS["layers"] if is_int(attrs.get(k))]
    if keys:
        return cfg, keys
    for sub in _KEYS["depth_subconfigs"]:
        if _is_config(attrs.get(sub)):
            found = _depth_target(attrs[sub])
            if found:
                return found
    return None


def apply_transformers_variant(cfg, option: str, value: Any) -> None:
    """Apply one variant option to a config, in place (`NotApplicable` if it has no such count)."""
    if option == "depth":
        found = _depth_target(cfg)
        if not found:
            raise NotApplicable("no layer count in the config")
        target, keys = found
        for k in keys:
            old = getattr(target, k)
            setattr(target, k, value)
            _resize_layer_lists(target, old, value)
        return
    if option == "kv_heads":
        target = cfg
        if not any(is_int(_attrs(cfg).get(k)) for k in _KEYS["kv_heads"]):
            target = getattr(cfg, "text_config", None)
        attrs = _attrs(target) if _is_config(target) else {}
        kv_keys = [k for k in _KEYS["kv_heads"] if is_int(attrs.get(k))]
        heads = next((attrs[k] for k in _KEYS["heads"] if is_int(attrs.get(k))), None)
        if not kv_keys or heads is None:
            raise NotApplicable("no key/value head count in the config")
        kv = heads if value == "mha" else max([q for q in range(1, heads // 2 + 1) if heads % q == 0] or [1])
        for k in kv_keys:
            setattr(target, k, kv)
        return
    if option == "act":
        done = False
        for target in (cfg, getattr(cfg, "text_config", None)):
            if not _is_config(target):
                continue
            attrs = _attrs(target)
            for k in _KEYS["act"]:
                if isinstance(attrs.get(k), str):
                    setattr(target, k, value)
                    done = True
            ffp = attrs.get("feed_forward_proj")  # T5 family: "relu" / "gated-gelu" / ...
            if isinstance(ffp, str):
                gated = ffp.startswith("gated-")
                setattr(target, "feed_forward_proj", ("gated-" if gated else "") + value)
                done = True
            if done:
                return
        raise NotApplicable("no activation in the config")
    if option == "bias":
        for target in (cfg, getattr(cfg, "text_config", None)):
            if not _is_config(target):
                continue
            keys = [k for k, v in _attrs(target).items() if k in _KEYS["bias"] and isinstance(v, bool)]
            if keys:
                for k in keys:
                    setattr(target, k, bool(value))
                return
        raise NotApplicable("no linear-bias switch in the config")
    raise ValueError(f"unknown transformers variant {option!r}")


def transformers_config(model_type: str, variant: dict[str, Any], *, shrink: bool):
    """The model type's default config with the variant applied (and shrunk), no pretrained backbone."""
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type)
    for option, value in variant.items():
        apply_transformers_variant(config, option, value)
    _no_pretrained(config)
    return shrink_config(config) if shrink else config


def _no_pretrained(cfg) -> None:
    for k, v in _attrs(cfg).items():
        if k in _KEYS["pretrained_switches"] and v:
            setattr(cfg, k, False)
        elif _is_config(v):
            _no_pretrained(v)
