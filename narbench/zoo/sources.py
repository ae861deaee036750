"""Candidate model specs for the `real` dataset, and how to turn one into a graph.

A `Spec` names one architecture: the zoo (`source`), the model name there, the task head, a
variant (topology-changing config overrides) and a family label. `all_specs()` enumerates every
candidate from the three zoos that ship architecture definitions offline; `extract_spec(spec)`
builds the model and extracts its graph with `narbench.zoo.extract.extract_graph`.

Zoos and heads
--------------
* timm: every name in `timm.list_models()` (architecture definitions, no weights).
* torchvision: every name in `torchvision.models.list_models()` (classification, detection,
  segmentation, video, optical flow, quantizable).
* transformers: every model type x task head in `TRANSFORMERS_HEADS` (14 auto-model mappings:
  the tasks listed in the paper: fill-mask, QA, classification, token classification,
  seq2seq/summarisation/translation, ASR, image classification/segmentation/detection, ...).

Variants (only topology-changing ones; widths never change a graph and are not enumerated)
-----------------------------------------------------------------------------------------
Each mirrors how published checkpoints of a family differ:

* depth ladder, transformer-style (`depth=N`, N in `DEPTH_LADDER`): the number of layers/blocks,
  as in the BERT miniatures (L = 2..12), base (12) and large (24) models, T5-efficient, DistilX
  (6 layers), timm's ViT depth variants. timm: the `depth` model argument; transformers: the
  config's layer count (encoder and decoder together).
* depth ladder, staged CNN/hierarchical (`stage_depth=N`, N in `STAGE_LADDER`): the number of
  blocks in the deepest stage, as in ResNet-18/34/50/101/152 (2, 6, 6, 23, 36), ConvNeXt
  atto..base (6, 9, 27), Swin T/S (6, 18); timm's `depths` / `layers` / `cfg` arguments.
* timm heads: `num_classes=0` (the pooled-feature backbone used for embeddings) and
  `features_only=True` (the multi-scale feature pyramid used by detection/segmentation).
* torchvision heads: `headless` (last Linear replaced by Identity, the usual backbone recipe),
  segmentation `aux_loss=True`, RAFT `num_flow_updates` 6/20/32 (the numbers of refinement
  iterations used in RAFT's evaluation).
* transformers attention heads: `kv_heads=mha|gqa` (multi-head vs grouped-query key/value heads,
  as in Llama-2-7B vs 70B), for configs that have a key/value head count.
* pooling: timm `global_pool` in `TIMM_POOLS` (ViT `avg` = the published "GAP" variants; CNN
  max / avg+max pooling heads).
* activation (`ACTIVATIONS`): timm `act_layer`, transformers `hidden_act` & co. (T5 v1.0 ReLU vs
  v1.1 gated GELU, GPT-2 gelu_new, LLaMA SiLU, BERT GELU, OPT ReLU).
* linear biases: transformers `bias=True|False` sets the config's bias switches
  (`attention_bias`, `mlp_bias`, `qkv_bias`, ...: Qwen2's QKV bias vs LLaMA's none).

Every option is a single axis away from the published default (no cross products).

A variant that does not apply to a model (no depth argument, no kv heads) is reported as
`not-applicable`; one that happens to equal the default is removed by the exact-hash dedup.

Family labels
-------------
timm: the defining module (`timm.models.<module>`); torchvision: the builder's module (its last
component, so `quantization.resnet` is `resnet`); transformers: the model type. Names are
lower-cased with `-` as `_`, then `FAMILY_MERGE` maps trivial duplicates (re-implementations or
renamed copies of one architecture, checked to give the same graphs) onto one label.

The tables are data in `narbench/data/`: `zoo-transformers-heads.csv` (`TRANSFORMERS_HEADS`),
`zoo-torchvision-tasks.csv` (`TV_TASKS`) and `zoo-family-merge.csv` (`FAMILY_MERGE`, a reason per row).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import importlib
import inspect
import re
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any, Iterable

from narbench.zoo.extract import RawGraph, extract_graph

SOURCES = ("timm", "torchvision", "transformers")

#: Layer counts of published models: BERT miniatures L=2..12, TinyBERT 4, DistilX 6, base 12,
#: GPT-2 12/24/36/48, LLaMA 16..80, ViT-S/B 12, L 24, H 32, g 40, G 48, 1-3 layer tiny models.
DEPTH_LADDER = (1, 2, 3, 4, 6, 8, 10, 12, 16, 24, 32, 48)
#: Blocks in the deepest stage: ResNet-18/34/50/101/152 (2, 6, 6, 23, 36), ResNet-26/38 (2, 3),
#: ConvNeXt atto..base (6, 9, 27), Swin T/S (6, 18), RegNet/ConvNeXt-style small stages (4, 8, 12).
STAGE_LADDER = (2, 3, 4, 6, 8, 9, 12, 18, 23, 27, 36)
RAFT_UPDATES = (6, 20, 32)
#: timm pooling heads (timm's `global_pool`: `avg` is the GAP variant of token-pooled ViTs).
TIMM_POOLS = ("avg", "max", "avgmax")
#: Activations (the usual alternatives in published configs: BERT/ViT GELU, GPT-2 gelu_new,
#: LLaMA SiLU, T5 v1.0 / OPT ReLU).
ACTIVATIONS = ("relu", "gelu", "silu", "gelu_new")


def _table(name: str, key: str, value: str) -> dict[str, str]:
    """A two-column table of the package data (`narbench/data/<name>`) as a dict, in file order."""
    with resources.files("narbench").joinpath("data", name).open(newline="") as f:
        return {row[key]: row[value] for row in csv.DictReader(f)}


#: transformers auto-model mapping per task head.
TRANSFORMERS_HEADS = _table("zoo-transformers-heads.csv", "head", "mapping")

#: Trivial duplicates: a family that is a renamed copy or re-packaging of another architecture
#: (`zoo-family-merge.csv`, each row with its reason).
FAMILY_MERGE = _table("zoo-family-merge.csv", "family", "into")


class NotApplicable(Exception):
    """The spec's variant does not apply to this model (e.g. no depth argument)."""


@dataclass(frozen=True)
class Spec:
    """One candidate architecture. `variant` is a sorted tuple of (option, value) pairs."""

    source: str
    model: str
    task: str
    variant: tuple[tuple[str, Any], ...] = ()
    family: str = ""

    @property
    def key(self) -> str:
        var = ",".join(f"{k}={_fmt(v)}" for k, v in self.variant)
        return f"{self.source}/{self.model}/{self.task}" + (f"/{var}" if var else "")

    @property
    def slug(self) -> str:
        """A file-name-safe, unique name for the spec's result file."""
        base = re.sub(r"[^A-Za-z0-9._=-]+", "_", self.key)[:120]
        return f"{base}-{hashlib.sha1(self.key.encode()).hexdigest()[:10]}"

    def options(self) -> dict[str, Any]:
        return dict(self.variant)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "model": self.model, "task": self.task,
                "variant": [[k, v] for k, v in self.variant], "family": self.family}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Spec":
        return cls(d["source"], d["model"], d["task"], tuple((k, _tuplify(v)) for k, v in d["variant"]),
                   d.get("family", ""))


def _fmt(v: Any) -> str:
    return "-".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def _tuplify(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def family_label(raw: str) -> str:
    name = raw.lower().replace("-", "_")
    return FAMILY_MERGE.get(name, name)


# ============================================================================ enumeration


def timm_specs() -> list[Spec]:
    import timm
    from timm.models._registry import _model_to_module

    specs = []
    for name in timm.list_models():
        fam = family_label(_model_to_module.get(name, name))
        variants: list[tuple[str, tuple]] = [
            ("classification", ()),
            ("features", (("num_classes", 0),)),
            ("features-only", (("features_only", True),)),
        ]
        variants += [("classification", (("global_pool", p),)) for p in TIMM_POOLS]
        variants += [("classification", (("act_layer", a),)) for a in ACTIVATIONS if a != "gelu_new"]
        variants += [("classification", (("depth", d),)) for d in DEPTH_LADDER]
        variants += [("classification", (("stage_depth", d),)) for d in STAGE_LADDER]
        specs += [Spec("timm", name, task, var, fam) for task, var in variants]
    return specs


def _tv_module(name: str) -> str:
    from torchvision.models import get_model_builder

    return get_model_builder(name).__module__


def torchvision_specs() -> list[Spec]:
    from torchvision.models import list_models

    specs = []
    for name in list_models():
        module = _tv_module(name)
        fam = family_label(module.rsplit(".", 1)[-1])
        kind = _tv_kind(module)
        task = TV_TASKS[kind]
        specs.append(Spec("torchvision", name, task, (), fam))
        if kind in ("classification", "quantization", "video"):
            specs.append(Spec("torchvision", name, "features", (("headless", True),), fam))
        if kind == "segmentation":
            specs.append(Spec("torchvision", name, task, (("aux_loss", True),), fam))
        if kind == "optical_flow":
            specs += [Spec("torchvision", name, task, (("num_flow_updates", n),), fam) for n in RAFT_UPDATES]
    return specs


#: torchvision model kind (its builder's subpackage) -> task name.
TV_TASKS = _table("zoo-torchvision-tasks.csv", "kind", "task")


def _tv_kind(module: str) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 else "classification"


def transformers_heads() -> list[tuple[str, str, str]]:
    """(model_type, head, class name) for every model type x head the auto mappings know."""
    ma = import_zoo("transformers.models.auto.modeling_auto")

    out = []
    for head, mapping in TRANSFORMERS_HEADS.items():
        for model_type, cls_name in getattr(ma, mapping).items():
            if isinstance(cls_name, (list, tuple)):
                cls_name = cls_name[0]
            out.append((model_type, head, cls_name))
    return sorted(out)


def transformers_specs() -> list[Spec]:
    specs = []
    for model_type, head, _ in transformers_heads():
        fam = family_label(model_type)
        specs.append(Spec("transformers", model_type, head, (), fam))
        specs += [Spec("transformers", model_type, head, (("depth", d),), fam) for d in DEPTH_LADDER]
        specs += [Spec("transformers", model_type, head, (("kv_heads", k),), fam) for k in ("mha", "gqa")]
        specs += [Spec("transformers", model_type, head, (("act", a),), fam) for a in ACTIVATIONS]
        specs += [Spec("transformers", model_type, head, (("bias", b),), fam) for b in (True, False)]
    return specs


class UnknownModelError(LookupError):
    """A zoo has no model of that name (the message suggests close names)."""


class ZooImportError(ImportError):
    """A zoo is installed but fails to import: whatever it raised, as one line naming the zoo."""


def import_zoo(module: str, attr: str | None = None):
    """`module` imported (and its attribute `attr`, which may import lazily, as transformers' model
    classes do); any exception it raises (a broken install raises RuntimeError, AttributeError,
    OSError as often as ImportError) becomes a `ZooImportError` naming the zoo and the exception."""
    where = module
    try:
        mod = importlib.import_module(module)
        where = f"{module}.{attr}"
        return mod if attr is None else getattr(mod, attr)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        lines = str(exc).strip().splitlines()
        what = f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]
        zoo = module.split(".")[0]
        raise ZooImportError(f"zoo {zoo!r} fails to import{'' if where == zoo else ' ' + where} ({what}); "
                             f"reinstall it, e.g. pip install --force-reinstall {zoo}") from exc


def default_spec(source: str, model: str, task: str | None = None) -> Spec:
    """The spec of a zoo model's default variant, as the `real` build enumerates it.

    timm and torchvision: the classification (torchvision: the builder's) task; transformers:
    `model` is a model type and `task` a head of `TRANSFORMERS_HEADS` (default `base`).
    `UnknownModelError` if the zoo has no such model or head; `ZooImportError` (an `ImportError`)
    if the zoo is missing or fails to import.
    """
    import difflib

    def unknown(kind: str, known: list[str]) -> UnknownModelError:
        near = difflib.get_close_matches(model, known, n=3)
        return UnknownModelError(f"{source} has no {kind} {model!r}" + (f" (did you mean {', '.join(near)}?)" if near else ""))

    if source == "timm":
        timm = import_zoo("timm")
        _model_to_module = import_zoo("timm.models._registry", "_model_to_module")

        if model not in timm.list_models():
            raise unknown("model", timm.list_models())
        return Spec("timm", model, task or "classification", (), family_label(_model_to_module.get(model, model)))
    if source == "torchvision":
        list_models = import_zoo("torchvision.models", "list_models")

        if model not in list_models():
            raise unknown("model", list_models())
        module = _tv_module(model)
        return Spec("torchvision", model, task or TV_TASKS[_tv_kind(module)], (), family_label(module.rsplit(".", 1)[-1]))
    if source == "transformers":
        heads = {(m, h) for m, h, _ in transformers_heads()}
        if not any(m == model for m, _ in heads):
            raise unknown("model type", sorted({m for m, _ in heads}))
        if (model, task or "base") not in heads:
            known = sorted(h for m, h in heads if m == model)
            raise UnknownModelError(f"transformers model type {model!r} has no head {task or 'base'!r}; "
                                    f"its heads: {', '.join(known)}")
        return Spec("transformers", model, task or "base", (), family_label(model))
    raise ValueError(f"unknown source {source!r}; known: {', '.join(SOURCES)}")


def all_specs(sources: Iterable[str] = SOURCES) -> list[Spec]:
    """Every candidate spec, in a fixed order (timm, torchvision, transformers; then by key)."""
    makers = {"timm": timm_specs, "torchvision": torchvision_specs, "transformers": transformers_specs}
    out: list[Spec] = []
    for src in sources:
        out += sorted(makers[src](), key=lambda s: s.key)
    return out


# ============================================================================ extraction


def extract_spec(spec: Spec, *, input_shape: tuple[int, ...] | None = None) -> tuple[RawGraph, dict[str, Any]]:
    """Build the spec's model, run one forward pass, return (graph, info about how it was run).

    `input_shape` replaces the shape of the example input the zoo's rule picks (the main input
    of a transformers model; token ids stay token ids); None keeps the build's choice.
    """
    import torch

    torch.manual_seed(0)
    if spec.source == "timm":
        return _extract_timm(spec, input_shape)
    if spec.source == "torchvision":
        return _extract_torchvision(spec, input_shape)
    if spec.source == "transformers":
        return _extract_transformers(spec, input_shape)
    if spec.source == "python":  # "module:function" returning (model, example_inputs)
        mod, fn = spec.model.split(":")
        model, inputs = getattr(importlib.import_module(mod), fn)(**spec.options())
        return extract_graph(model, inputs), {"device": "cpu"}
    raise ValueError(f"unknown source {spec.source!r}")


def _num_params(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


#: Above this many parameters a model is never run at full width on the CPU.
CPU_PARAM_LIMIT = 400_000_000


class AllDevicesFailed(Exception):
    """Every device/mode tried for a spec failed; `errors` holds (mode, exception) pairs."""

    def __init__(self, errors: list[tuple[str, BaseException]]):
        self.errors = errors
        super().__init__("; ".join(f"[{m}] {type(e).__name__}: {str(e)[:300]}" for m, e in errors))

    @property
    def first(self) -> BaseException:
        return self.errors[0][1]


def _try_devices(devices: list[str], run) -> tuple[RawGraph, dict[str, Any]]:
    """Run `run(device)` on each device/mode in turn; `AllDevicesFailed` if none works."""
    errors: list[tuple[str, BaseException]] = []
    for dev in devices:
        try:
            graph, info = run(dev)
            info = {"device": dev, **info}
            if errors:
                info["fallback_from"] = [f"[{m}] {type(e).__name__}: {str(e)[:200]}" for m, e in errors]
            return graph, info
        except NotApplicable:
            raise
        except Exception as exc:  # noqa: BLE001 - the next device may work
            errors.append((dev, exc))
    raise AllDevicesFailed(errors)


# ---------------------------------------------------------------- timm

_DEPTH_KEYS = ("depth", "num_layers", "n_layers")
_STAGE_KEYS = ("depths", "layers", "stage_depths", "block_repeats", "num_blocks")


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
    for ck in ("cfg", "model_cfg"):
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


def _extract_timm(spec: Spec, input_shape: tuple[int, ...] | None = None) -> tuple[RawGraph, dict[str, Any]]:
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
            n = _num_params(build("meta"))
            if n > CPU_PARAM_LIMIT:
                raise RuntimeError(f"{n / 1e6:.0f}M parameters: too large to run on the CPU")
        model = build(dev)
        cfg = getattr(model, "pretrained_cfg", None) or {}
        size = tuple(input_shape[1:]) if input_shape else tuple(cfg.get("input_size", (3, 224, 224)))
        x = torch.randn(*(input_shape or (1, *size)), device=dev)
        return extract_graph(model, x), {"params": _num_params(model), "input_size": list(size)}

    return _try_devices(["meta", "cpu"], run)


# ---------------------------------------------------------------- torchvision


def _extract_torchvision(spec: Spec, input_shape: tuple[int, ...] | None = None) -> tuple[RawGraph, dict[str, Any]]:
    import torch
    from torchvision.models import get_model_builder

    builder = get_model_builder(spec.model)
    kind = _tv_kind(builder.__module__)
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
        return extract_graph(model, inputs(dev), call_kwargs), {"params": _num_params(model)}

    devices = ["meta", "cpu"] if kind == "video" else ["cpu", "meta"]
    return _try_devices(devices, run)


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


# ---------------------------------------------------------------- transformers

_HIDDEN_KEYS = ("hidden_size", "d_model", "n_embd", "hidden_dim", "embed_dim", "dim", "model_dim", "d_embed",
                "embedding_size", "word_embed_proj_dim", "projection_dim")
_FFN_KEYS = ("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner", "d_ff",
             "ffn_hidden_size", "moe_intermediate_size", "shared_expert_intermediate_size", "decoder_intermediate_size")
_HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
              "decoder_attention_heads", "decoder_num_attention_heads")
_KV_KEYS = ("num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num", "kv_heads")
_HEAD_DIM_KEYS = ("head_dim", "attention_head_dim", "d_kv")
_LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
               "num_decoder_layers", "num_encoder_layers", "decoder_num_hidden_layers")
#: Integers under these key fragments are never widths, even when equal to the hidden size.
_NOT_WIDTH = ("position", "vocab", "layer", "token", "image", "patch", "length", "max_", "window", "bins",
              "rate", "sampling", "size_", "num_labels", "seq", "ctx", "frames", "buckets", "_id", "index",
              "chunk", "stride", "kernel", "steps", "epoch", "label")
_ACT_KEYS = ("hidden_act", "activation_function", "hidden_activation", "activation", "act_fn", "hidden_act_fn",
             "dense_act_fn")
_BIAS_KEYS = ("attention_bias", "mlp_bias", "qkv_bias", "use_bias", "bias", "use_qkv_bias", "add_bias_linear",
              "add_qkv_bias", "attn_bias", "use_attention_bias", "linear_bias")
_SUBCONFIG_KEYS_SKIP = ("id2label", "label2id", "rope_scaling", "rope_parameters", "quantization_config",
                        "task_specific_params")


def _special_ids(d: dict[str, Any]) -> list[int]:
    out = []
    for k, v in d.items():
        if k.endswith(("token_id", "token_index", "token_ids")):
            vals = v if isinstance(v, (list, tuple)) else [v]
            out += [x for x in vals if isinstance(x, int) and not isinstance(x, bool)]
        elif isinstance(v, dict) and k not in _SUBCONFIG_KEYS_SKIP:
            out += _special_ids(v)
    return out


def _is_int(v: Any) -> bool:
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
        ids = _special_ids(config.to_dict())
        special_max = max(ids) if ids else 0
    _shrink_in_place(config, special_max)
    return config


def _shrink_in_place(cfg, special_max: int) -> None:
    attrs = _attrs(cfg)
    old_hidden = next((attrs[k] for k in _HIDDEN_KEYS if _is_int(attrs.get(k))), None)
    old_heads = next((attrs[k] for k in _HEAD_KEYS if _is_int(attrs.get(k))), None)
    for k, v in attrs.items():
        if _is_config(v):
            _shrink_in_place(v, special_max)
            continue
        if not _is_int(v):
            continue
        new = v
        if k in _HIDDEN_KEYS:
            new = 64
        elif k in _FFN_KEYS:
            new = 128
        elif k in _HEAD_KEYS:
            new = 4
        elif k in _HEAD_DIM_KEYS:
            new = 16
        elif k in _KV_KEYS:
            new = 4 if v == old_heads else (1 if v == 1 else 2)
        elif k.startswith("vocab_size"):
            new = max(1024, special_max + 1)
        elif old_hidden is not None and v == old_hidden and v > 1 and not any(t in k for t in _NOT_WIDTH):
            new = 64
        if new != v:
            try:
                setattr(cfg, k, new)
            except Exception:  # noqa: BLE001 - read-only / validated attribute: keep it
                pass


def _resize_layer_lists(cfg, old: int, new: int) -> None:
    """Per-layer lists (layer types, ...) follow a depth change, repeating their pattern."""
    for k, v in _attrs(cfg).items():
        if isinstance(v, (list, tuple)) and len(v) == old and old > 1 and k not in _LAYER_KEYS:
            setattr(cfg, k, type(v)(v[i % old] for i in range(new)))


def _depth_target(cfg) -> tuple[Any, list[str]] | None:
    """The (sub)config holding the layer counts: the top level, else the text/decoder config."""
    attrs = _attrs(cfg)
    keys = [k for k in _LAYER_KEYS if _is_int(attrs.get(k))]
    if keys:
        return cfg, keys
    for sub in ("text_config", "decoder", "language_config", "llm_config", "encoder"):
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
        if not any(_is_int(_attrs(cfg).get(k)) for k in _KV_KEYS):
            target = getattr(cfg, "text_config", None)
        attrs = _attrs(target) if _is_config(target) else {}
        kv_keys = [k for k in _KV_KEYS if _is_int(attrs.get(k))]
        heads = next((attrs[k] for k in _HEAD_KEYS if _is_int(attrs.get(k))), None)
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
            for k in _ACT_KEYS:
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
            keys = [k for k, v in _attrs(target).items() if k in _BIAS_KEYS and isinstance(v, bool)]
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
        if k in ("use_pretrained_backbone", "use_timm_backbone_pretrained") and v:
            setattr(cfg, k, False)
        elif _is_config(v):
            _no_pretrained(v)


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
    for c in (config, _sub(config, "vision_config", "backbone_config", "encoder_config", "audio_config")):
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
        special = set(_special_ids(config.to_dict()))
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
        if _is_int(eos) and 0 <= eos < vocab_size(config):  # sequence heads pool at the last <eos>
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


def _extract_transformers(spec: Spec, input_shape: tuple[int, ...] | None = None) -> tuple[RawGraph, dict[str, Any]]:
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
        info = {"params": _num_params(model), "shrunk": mode == "cpu-shrunk"}
        try:
            return extract_graph(model, (), kw), info
        except RuntimeError as exc:  # masks checked for all-ones (.all()) cannot run on meta
            if dev != "meta" or "attention_mask" not in kw or "meta" not in str(exc):
                raise
            kw.pop("attention_mask")
            return extract_graph(model, (), kw), {**info, "no_attention_mask": True}

    graph, info = _try_devices(["cpu-shrunk", "meta"], run)
    info["device"] = "cpu" if info["device"] == "cpu-shrunk" else "meta"
    return graph, info
