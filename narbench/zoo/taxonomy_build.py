"""Build `narbench/data/taxonomy-real.csv` and `taxonomy-near-duplicates.csv` from rules and data.

    python -m narbench.zoo.taxonomy_build            # rewrite both tables, print the report
    python -m narbench.zoo.taxonomy_build --check    # fail if the committed tables differ

Per (source, model) of the `real` dataset, in this order:

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

The build fails if isomorphic graphs land in two families (invariant a). The near-duplicate table
lists every family pair with graphs at WL cosine >= 0.999 after relabelling, with its reason:
`taxonomy-near-duplicate-reasons.csv`, or a mechanical one when all its pairs are depth-truncated variants.
Labels are never chosen by looking at retrieval scores.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from narbench.datasets import taxonomy as tx
from narbench.data.graph import ArchGraph

SOURCE_ORDER = {"timm": 0, "torchvision": 1, "transformers": 2}
TOWER = "@tower"
#: variants that truncate a model (1-2 layers or blocks): their graphs may coincide across designs
TRUNCATING = ("depth", "stage_depth")


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


def _read_csv(path: Path) -> list[dict[str, str]]:
    lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def read_rules(path: Path | None = None) -> list[Rule]:
    return [Rule(**{k: (v or "").strip() for k, v in r.items()}) for r in _read_csv(path or tx.data_path("taxonomy-rules.csv"))]


def read_aliases(path: Path | None = None) -> dict[tuple[str, str], tuple[str, str]]:
    return {(r["source"], r["model"]): (r["identity"], r["reason"])
            for r in _read_csv(path or tx.data_path("taxonomy-aliases.csv"))}


def _model_label(model: str) -> str:
    return model.lower().replace("-", "_")


def _tower_base(pattern: str, label: str, known: set[str]) -> str | None:
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
    by_model: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, g in enumerate(graphs):
        by_model[(g.source, tx.graph_model(g))].append(i)
    modules = {k: graphs[idx[0]].family for k, idx in by_model.items()}
    tf_types = {_model_label(m) for s, m in by_model if s == "transformers"}
    tf_by_label = {_model_label(m): m for s, m in by_model if s == "transformers"}
    timm_names = {m for s, m in by_model if s == "timm"}

    family, identity, reason, coarse = {}, {}, {}, {}
    for key in sorted(by_model):
        source, model = key
        module = modules[key]
        fam, ident, why = module, "", ""
        for rule in rules:
            if not rule.family:
                continue
            m = rule.match(source, module, _model_label(model) if source == "transformers" else model)
            if m is None:
                continue
            if rule.family == TOWER:
                base = _tower_base(rule.model, _model_label(model), tf_types)
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

    for key in by_model:
        source, model = key
        if key in aliases:
            identity[key], why = aliases[key]
            reason[key] = "; ".join(x for x in (reason[key], f"identity: {why}") if x)
        elif not identity[key]:
            identity[key] = f"timm/{model}" if source == "torchvision" and model in timm_names else f"{source}/{model}"

    # renamed copies: isomorphic graphs (neither a truncation) make their models one identity
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
    groups: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
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

    coarse_rules = [r for r in rules if r.coarse]
    for key, idx in by_model.items():
        source, model = key
        label = None
        for rule in coarse_rules:
            if rule.match(source, modules[key], _model_label(model) if source == "transformers" else model):
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
    return [tx.TaxonomyRow(s, m, family[(s, m)], identity[(s, m)], coarse[(s, m)], reason[(s, m)])
            for s, m in sorted(by_model, key=lambda k: (SOURCE_ORDER.get(k[0], 9), k[1]))]


def write_table(rows: list[tx.TaxonomyRow]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(tx.COLUMNS)
    for r in rows:
        w.writerow([r.source, r.model, r.family, r.identity, r.coarse, r.reason])
    return out.getvalue()


def read_pair_reasons(path: Path | None = None) -> list[tuple[set[str], set[str], str]]:
    """`taxonomy-near-duplicate-reasons.csv`: (families_a, families_b, reason) rows, first match wins."""
    return [(set(r["families_a"].split()), set(r["families_b"].split()), r["reason"].strip())
            for r in _read_csv(path or tx.data_path("taxonomy-near-duplicate-reasons.csv"))]


def pair_reason(a: str, b: str, reasons: list[tuple[set[str], set[str], str]]) -> str:
    for fa, fb, why in reasons:
        if (a in fa and b in fb) or (b in fa and a in fb):
            return why
    return ""


def near_duplicate_table(graphs: list[ArchGraph], pairs: np.ndarray,
                         reasons: list[tuple[set[str], set[str], str]]) -> str:
    """family_a, family_b, pairs, graphs (distinct graphs involved), truncated (pairs where a graph is a
    depth-truncated variant), reason."""
    stats: dict[tuple[str, str], list] = defaultdict(lambda: [0, set(), 0])
    for i, j in pairs.tolist():
        gi, gj = graphs[i], graphs[j]
        if gi.family == gj.family:
            continue
        s = stats[tx.family_pair(gi.family, gj.family)]
        s[0] += 1
        s[1].update((i, j))
        vi, vj = gi.meta.get("variant") or {}, gj.meta.get("variant") or {}
        if any(int(v.get(k, 99)) <= 2 for v in (vi, vj) for k in TRUNCATING):
            s[2] += 1
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["family_a", "family_b", "pairs", "graphs", "truncated_pairs", "reason"])
    for (a, b), (n, members, trunc) in sorted(stats.items(), key=lambda kv: (-kv[1][0], kv[0])):
        why = pair_reason(a, b, reasons)
        if not why and trunc == n:
            why = ("separate designs (each its own paper); only variants truncated to 1-2 layers/blocks coincide, "
                   "where the parts that tell the designs apart are cut away")
        w.writerow([a, b, n, len(members), trunc, why])
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m narbench.zoo.taxonomy_build", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if the committed tables differ from a rebuild")
    ap.add_argument("--out", type=Path, default=None, help="write the tables here (default: narbench/data)")
    ap.add_argument("--cache", type=Path, default=None,
                    help="keep the isomorphism classes and WL pairs of the (unchanged) graphs here between runs")
    args = ap.parse_args(argv)

    from narbench.datasets.real import RealDataset

    provider = RealDataset()
    graphs, vocab = raw_graphs()
    print(f"real 1.0 (raw record): {len(graphs):,} graphs", file=sys.stderr)
    classes = _cached(args.cache, "classes", lambda: tx.isomorphic_classes(graphs))
    print(f"isomorphism classes of 2+ graphs: {len(classes)}", file=sys.stderr)
    rows = build_rows(graphs, read_rules(), read_aliases(), classes)
    taxonomy = tx.Taxonomy(rows)
    new = taxonomy.relabel(graphs)
    bad = tx.isomorphism_violations(new, classes)
    if bad:
        print("isomorphic graphs in two families (add a rule):\n  " + "\n  ".join(" ~ ".join(b) for b in bad),
              file=sys.stderr)
        return 1
    print("embedding with the wl floor ...", file=sys.stderr)
    pairs = _cached(args.cache, "pairs", lambda: tx.near_duplicate_pairs(tx.wl_unit_embeddings(graphs)))
    tables = {tx.TABLE: write_table(rows), tx.NEAR_DUPLICATES: near_duplicate_table(new, pairs, read_pair_reasons())}
    out = args.out or tx.data_path().parent
    if args.check:
        stale = [n for n, text in tables.items() if not (out / n).is_file() or (out / n).read_text() != text]
        if stale:
            print(f"stale: {', '.join(stale)}; rerun python -m narbench.zoo.taxonomy_build", file=sys.stderr)
            return 1
    else:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in tables.items():
            (out / name).write_text(text)
            print(f"wrote {out / name}", file=sys.stderr)
    report(graphs, new, pairs, provider, vocab)
    return 0


def raw_graphs() -> tuple[list, list[str]]:
    """The graphs the taxonomy is built from: the raw record of the extraction (`real-1.0.narg`),
    which keeps every zoo model and its zoo label (timm module, torchvision module, transformers
    model type) that the rules match; `real` 2.0 is derived from it (`narbench.zoo.derive`)."""
    from narbench.data.store import read_graphs

    graphs, vocab, _, _ = read_graphs(tx.data_path("real-1.0.narg"))
    return graphs, vocab


def _cached(folder: Path | None, name: str, compute):
    """`compute()`, kept as a pickle in `folder` (keyed by the pinned dataset version) when given."""
    import pickle

    from narbench.datasets.real import RealDataset

    if folder is None:
        return compute()
    path = folder / f"taxonomy-{name}-{RealDataset.previous_versions['1.0'][0][:12]}.pkl"
    if path.is_file():
        return pickle.loads(path.read_bytes())
    value = compute()
    folder.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(value))
    return value


def report(old: list[ArchGraph], new: list[ArchGraph], pairs: np.ndarray, provider, vocab: list[str]) -> None:
    """The figures of the datasheet: families, identities, near-duplicate twins, unseen by identity."""
    from narbench.data.dataset import GraphDataset
    from narbench.datasets.datasheet import near_duplicate_share

    fam_ids: dict[str, set[str]] = defaultdict(set)
    for g in new:
        fam_ids[g.family].add(g.meta["identity"])
    print(f"families: {len({g.family for g in old})} (1.0) -> {len(fam_ids)}")
    print(f"families with >= 2 identities: {sum(1 for v in fam_ids.values() if len(v) >= 2)}")
    print(f"identities: {len({g.meta['identity'] for g in new})}; models: {len({(g.source, tx.graph_model(g)) for g in new})}")
    print(f"graphs with a cross-family WL>={tx.NEAR_DUPLICATE_WL} twin: {tx.twin_share(old, pairs):.1%} "
          f"({len(tx.cross_family_pairs(old, pairs))} family pairs) -> {tx.twin_share(new, pairs):.1%} "
          f"({len(tx.cross_family_pairs(new, pairs))} family pairs)")
    print(f"coarse changed on {sum(a.coarse != b.coarse for a, b in zip(old, new))} graphs")
    for label, graphs, split in (
            ("1.0 unseen (model_group)", old, provider.splits(old)["unseen"]),
            ("unseen by identity", new, tx.identity_split(new, test_size=provider.test_size, seed=provider.split_seed))):
        q = [graphs[i] for i in split.test]
        by_source = Counter(g.source for g in q)
        ds = GraphDataset(name="real", version=provider.version, graphs=graphs, vocab=vocab, split=split, sha256="")
        share = near_duplicate_share(ds, split)
        print(f"{label}: queries {len(q):,}, families {len({g.family for g in q})}, corpus {len(split.train):,}; "
              + ", ".join(f"{s} {by_source[s]:,} ({by_source[s] / max(len(q), 1):.1%})" for s in SOURCE_ORDER)
              + f"; queries with an op-histogram near-duplicate of their family in the corpus {share:.1%}")
        if graphs is new:
            print(f"  identities on both sides: {len(tx.straddling_identities(new, split))}")


if __name__ == "__main__":
    raise SystemExit(main())
