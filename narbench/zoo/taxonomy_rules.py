"""The taxonomy's rows from rules: per (source, model) of the `real` dataset its family, identity and
coarse label (`build_rows`), from the hand-written tables `taxonomy-rules.csv` and `taxonomy-aliases.csv`
and the graphs themselves; `write_table` writes them as `taxonomy-real.csv`.

Per (source, model), in this order:

1. family: the first row of `taxonomy-rules.csv` with a family that matches (source, the zoo's
   label as real 1.0 recorded it, model name); else the zoo's label itself (mechanical).
   `@tower`: a transformers model type `<X>_text`, `_vision_model`, `_encoder`, ... of a model
   type `<X>` in the data is X's tower: X's family and X's identity.
2. identity: `taxonomy-aliases.csv`; else a torchvision model whose name timm also has is timm's
   model (one name in two zoos is one model); else `<source>/<model>`. Then models with
   isomorphic graphs (not depth-truncated ones) are one identity (renamed copies).
3. coarse: the first rule with a coarse; else `attention` if any of the model's graphs has an
   attention pattern (hybrids are attention; a headless variant may cut the attention off), else
   the label of most of its graphs (ties: its default graph's).
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from narbench.data.graph import ArchGraph
from narbench.datasets import taxonomy as tx

SOURCE_ORDER = {"timm": 0, "torchvision": 1, "transformers": 2}
TOWER = "@tower"
#: variants that truncate a model (1-2 layers or blocks): their graphs may coincide across designs
TRUNCATING = ("depth", "stage_depth")

Key = tuple[str, str]


@dataclass
class Rule:
    source: str
    module: str
    model: str
    family: str
    identity: str
    coarse: str
    reason: str

    def match(self, source: str, module: str, model: str) -> re.Match | None:
        if self.source and self.source != source:
            return None
        if self.module and not re.fullmatch(self.module, module):
            return None
        return re.fullmatch(self.model or ".*", model)


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a hand-written CSV table, its `#` comment lines and blank lines left out."""
    lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def read_rules(path: Path | None = None) -> list[Rule]:
    return [Rule(**{k: (v or "").strip() for k, v in r.items()})
            for r in read_csv_rows(path or tx.data_path("taxonomy-rules.csv"))]


def read_aliases(path: Path | None = None) -> dict[tuple[str, str], tuple[str, str]]:
    return {(r["source"], r["model"]): (r["identity"], r["reason"])
            for r in read_csv_rows(path or tx.data_path("taxonomy-aliases.csv"))}


def _model_label(model: str) -> str:
    return model.lower().replace("-", "_")


def _rule_model(source: str, model: str) -> str:
    """The model name a rule matches: a transformers model type as its label."""
    return _model_label(model) if source == "transformers" else model


def tower_base(pattern: str, label: str, known: set[str]) -> str | None:
    """The longest model type `base` in `known` for which `label` matches `pattern` with its first group = base."""
    head, sep, tail = pattern.partition(")")
    for i in sorted((i for i, c in enumerate(label) if c == "_"), reverse=True):
        base = label[:i]
        if base in known and re.fullmatch(re.escape(base) + tail, label):
            return base
    return None


def build_rows(graphs: list[ArchGraph], rules: list[Rule], aliases: dict[tuple[str, str], tuple[str, str]],
               classes: list[list[int]]) -> list[tx.TaxonomyRow]:
    """The taxonomy rows of the models of `graphs` (real 1.0 labels: family = the zoo's label)."""
    by_model: dict[Key, list[int]] = defaultdict(list)
    for i, g in enumerate(graphs):
        by_model[(g.source, tx.graph_model(g))].append(i)
    modules = {k: graphs[idx[0]].family for k, idx in by_model.items()}
    family, identity, reason = _families(by_model, modules, rules)
    _identities(by_model, aliases, identity, reason)
    _merge_renamed_copies(graphs, by_model, classes, identity, reason)
    coarse = _coarse_labels(graphs, by_model, modules, rules, reason)
    return [tx.TaxonomyRow(s, m, family[(s, m)], identity[(s, m)], coarse[(s, m)], reason[(s, m)])
            for s, m in sorted(by_model, key=lambda k: (SOURCE_ORDER.get(k[0], 9), k[1]))]


def _families(by_model: dict[Key, list[int]], modules: dict[Key, str],
              rules: list[Rule]) -> tuple[dict[Key, str], dict[Key, str], dict[Key, str]]:
    """(family, identity, reason) per model by the first rule with a family that matches (towers: their base
    model's family and identity); a model no rule matches keeps its zoo label and gets no identity yet."""
    tf_types = {_model_label(m) for s, m in by_model if s == "transformers"}
    tf_by_label = {_model_label(m): m for s, m in by_model if s == "transformers"}
    family, identity, reason = {}, {}, {}
    for key in sorted(by_model):
        source, model = key
        module = modules[key]
        fam, ident, why = module, "", ""
        for rule in rules:
            if not rule.family:
                continue
            m = rule.match(source, module, _rule_model(source, model))
            if m is None:
                continue
            if rule.family == TOWER:
                base = tower_base(rule.model, _model_label(model), tf_types)
                if base is None:
                    continue
                fam = None  # resolved below from the base model's row
                ident = f"transformers/{tf_by_label[base]}"
                why = f"a tower/part of the model type {tf_by_label[base]}: its family and one model with it"
            else:
                fam = m.expand(rule.family)
                ident = m.expand(rule.identity) if rule.identity else ""
                why = rule.reason
            break
        family[key], identity[key], reason[key] = fam, ident, why
    for key, fam in family.items():  # towers take their base model's family
        if fam is None:
            family[key] = family[("transformers", identity[key].split("/", 1)[1])]
    return family, identity, reason


def _identities(by_model: dict[Key, list[int]], aliases: dict[tuple[str, str], tuple[str, str]],
                identity: dict[Key, str], reason: dict[Key, str]) -> None:
    """Identities of the models no rule gave one (in place): an alias's, else timm's model of the same name, else
    the model itself."""
    timm_names = {m for s, m in by_model if s == "timm"}
    for key in by_model:
        source, model = key
        if key in aliases:
            identity[key], why = aliases[key]
            reason[key] = "; ".join(x for x in (reason[key], f"identity: {why}") if x)
        elif not identity[key]:
            identity[key] = f"timm/{model}" if source == "torchvision" and model in timm_names else f"{source}/{model}"


def _merge_renamed_copies(graphs: list[ArchGraph], by_model: dict[Key, list[int]], classes: list[list[int]],
                          identity: dict[Key, str], reason: dict[Key, str]) -> None:
    """Renamed copies (in place): isomorphic graphs (neither a truncation) make their models one identity,
    the first by source order."""
    parent = {k: k for k in by_model}

    def find(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    def truncated(g: ArchGraph) -> bool:
        return any(k in (g.meta.get("variant") or {}) for k in TRUNCATING)

    for members in classes:
        keys = sorted({(graphs[i].source, tx.graph_model(graphs[i])) for i in members if not truncated(graphs[i])})
        for k in keys[1:]:
            a, b = find(keys[0]), find(k)
            if a != b:
                parent[b] = a
    groups: dict[Key, list[Key]] = defaultdict(list)
    for k in by_model:
        groups[find(k)].append(k)
    for members in groups.values():
        if len(members) < 2:
            continue
        ids = sorted({identity[k] for k in members}, key=lambda s: (SOURCE_ORDER.get(s.split("/")[0], 9), s))
        for k in members:
            if identity[k] != ids[0]:
                others = ", ".join(f"{s}/{m}" for s, m in sorted(members) if (s, m) != k)
                reason[k] = "; ".join(x for x in (reason[k], f"identity: isomorphic graphs with {others}") if x)
                identity[k] = ids[0]


def _coarse_labels(graphs: list[ArchGraph], by_model: dict[Key, list[int]], modules: dict[Key, str],
                   rules: list[Rule], reason: dict[Key, str]) -> dict[Key, str]:
    """The coarse label per model: the first rule with a coarse label (its reason added), else `attention` if any
    graph has an attention pattern, else most of its graphs' label (ties: its default graph's)."""
    coarse_rules = [r for r in rules if r.coarse]
    coarse = {}
    for key, idx in by_model.items():
        source, model = key
        label = None
        for rule in coarse_rules:
            if rule.match(source, modules[key], _rule_model(source, model)):
                label = rule.coarse
                reason[key] = "; ".join(x for x in (reason[key], f"coarse: {rule.reason}") if x)
                break
        if label is None:
            counts = Counter(graphs[i].coarse for i in idx)
            if counts["attention"]:
                label = "attention"
            else:
                top = counts.most_common()
                default = [graphs[i].coarse for i in idx if not graphs[i].meta.get("variant")]
                if len(top) > 1 and top[0][1] == top[1][1] and default:
                    label = default[0]
                else:
                    label = top[0][0]
        coarse[key] = label
    return coarse


def write_table(rows: list[tx.TaxonomyRow]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(tx.COLUMNS)
    for r in rows:
        w.writerow([r.source, r.model, r.family, r.identity, r.coarse, r.reason])
    return out.getvalue()
