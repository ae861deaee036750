"""The candidate model specs of the `real` dataset: which models of which zoo, in which variants.

`all_specs()` enumerates every candidate (a `narbench.zoo.spec.Spec`) from the three zoos that
ship architecture definitions offline; `default_spec` is one model's default variant;
`narbench.zoo.specgraph.extract_spec(spec)` builds a spec's model and extracts its graph.

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
Each mirrors how published checkpoints of a family differ (the values, with where they come from,
are `narbench/data/zoo-variants.csv`):

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
Family labels: `narbench.zoo.spec.family_label`.
"""

from __future__ import annotations

import importlib
from typing import Iterable

from narbench.zoo.spec import SOURCES, Spec, family_label
from narbench.zoo.tables import (ACTIVATIONS, BIASES, DEPTH_LADDER, KV_HEADS, RAFT_UPDATES, STAGE_LADDER, TIMM_POOLS,
                                 TRANSFORMERS_HEADS, TV_TASKS)


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
        kind = torchvision_kind(module)
        task = TV_TASKS[kind]
        specs.append(Spec("torchvision", name, task, (), fam))
        if kind in ("classification", "quantization", "video"):
            specs.append(Spec("torchvision", name, "features", (("headless", True),), fam))
        if kind == "segmentation":
            specs.append(Spec("torchvision", name, task, (("aux_loss", True),), fam))
        if kind == "optical_flow":
            specs += [Spec("torchvision", name, task, (("num_flow_updates", n),), fam) for n in RAFT_UPDATES]
    return specs


def torchvision_kind(module: str) -> str:
    """The kind of a torchvision model (its builder's subpackage: detection, video, ...) from the builder's module."""
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
        specs += [Spec("transformers", model_type, head, (("kv_heads", k),), fam) for k in KV_HEADS]
        specs += [Spec("transformers", model_type, head, (("act", a),), fam) for a in ACTIVATIONS]
        specs += [Spec("transformers", model_type, head, (("bias", b),), fam) for b in BIASES]
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
        return Spec("torchvision", model, task or TV_TASKS[torchvision_kind(module)], (),
                    family_label(module.rsplit(".", 1)[-1]))
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
