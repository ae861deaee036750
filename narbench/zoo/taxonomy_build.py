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

The build fails if isomorphic graphs land in two families (invariant a), on the raw 1.0 graphs
the rules read and on the shipped `real` 2.x canonical graphs. The near-duplicate table describes
the shipped dataset: every family pair of the shipped real (its canonical graphs, the crossimpl queries
left out) with graphs at WL cosine >= 0.999, with its reason: the first matching row of
`taxonomy-near-duplicate-reasons.csv`, or a mechanical one when all its pairs are depth-truncated
variants. Canonical graphs elide attention masks, biases and additive positions and fold
attention, norms and GELU spellings (docs/canonical-graphs.md), so more designs share one graph
there than in 1.0's raw graphs; 1.0's table (raw graphs) is not kept: its figures are in
docs/datasets.md. A family pair without a reason makes the build fail after writing.
Labels are never chosen by looking at retrieval scores.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
from typing import Any
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


#: a pair reason: (families_a, families_b, group, reason)
PairReason = tuple[set[str], set[str], str, str]
#: the mechanical reason of a family pair whose every graph pair involves a depth-truncated variant
TRUNCATED_GROUP = "only truncated variants coincide"
TRUNCATED_REASON = ("separate designs (each its own paper); only variants truncated to 1-2 layers/blocks coincide, "
                    "where the parts that tell the designs apart are cut away")


def read_pair_reasons(path: Path | None = None) -> list[PairReason]:
    """`taxonomy-near-duplicate-reasons.csv`: (families_a, families_b, group, reason) rows, first match wins."""
    path = path or tx.data_path("taxonomy-near-duplicate-reasons.csv")
    rows = _read_csv(path)
    for r in rows:
        if None in r or not all(r.get(c) for c in ("families_a", "families_b", "group", "reason")):
            raise ValueError(f"{path}: a row needs families_a, families_b, group and reason, and no unquoted comma in "
                             f"its reason: {r}")
    return [(set(r["families_a"].split()), set(r["families_b"].split()), r["group"].strip(), r["reason"].strip())
            for r in rows]


def pair_reason(a: str, b: str, reasons: list[PairReason]) -> tuple[str, str]:
    """(group, reason) of the first row listing families a and b on its two sides; ("", "") if none does."""
    for fa, fb, group, why in reasons:
        if (a in fa and b in fb) or (b in fa and a in fb):
            return group, why
    return "", ""


def near_duplicate_table(graphs: list[ArchGraph], pairs: np.ndarray, reasons: list[PairReason],
                         merged: Counter | None = None) -> str:
    """family_a, family_b, pairs, graphs (distinct graphs involved), truncated_pairs (pairs where a graph is a
    depth-truncated variant), merged (source graphs dropped by the dataset's dedup as identical to a graph of the
    other family: `merged_cross_family`), group, reason: one row per family pair, most graph pairs first."""
    merged = merged or Counter()
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
    w.writerow(tx.NEAR_DUPLICATE_COLUMNS)
    for fp in merged:
        stats[fp]  # noqa: B018 - a family pair met only at dedup gets a row too
    for (a, b), (n, members, trunc) in sorted(stats.items(), key=lambda kv: (-kv[1][0], -merged[kv[0]], kv[0])):
        group, why = pair_reason(a, b, reasons)
        if not why and n and trunc == n and not merged[(a, b)]:
            group, why = TRUNCATED_GROUP, TRUNCATED_REASON
        w.writerow([a, b, n, len(members), trunc, merged[(a, b)], group, why])
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m narbench.zoo.taxonomy_build", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if the committed tables differ from a rebuild")
    ap.add_argument("--out", type=Path, default=None, help="write the tables here (default: narbench/data)")
    ap.add_argument("--cache", type=Path, default=None,
                    help="keep the isomorphism classes and WL pairs of the (unchanged) graphs here between runs")
    args = ap.parse_args(argv)

    graphs, raw_vocab = raw_graphs()
    print(f"real 1.0 (raw record): {len(graphs):,} graphs", file=sys.stderr)
    classes = _cached(args.cache, "classes-1.0", lambda: tx.isomorphic_classes(graphs))
    print(f"isomorphism classes of 2+ raw graphs: {len(classes)}", file=sys.stderr)
    rows = build_rows(graphs, read_rules(), read_aliases(), classes)
    taxonomy = tx.Taxonomy(rows)
    bad = tx.isomorphism_violations(taxonomy.relabel(graphs), classes)
    if bad:
        print("isomorphic raw graphs in two families (add a rule):\n  " + "\n  ".join(" ~ ".join(b) for b in bad),
              file=sys.stderr)
        return 1
    table = write_table(rows)

    ds = shipped_dataset()
    shipped = ds.core_graphs
    print(f"real {ds.version} (shipped, canonical): {len(shipped):,} graphs", file=sys.stderr)
    stale = label_differences(shipped, taxonomy)
    if stale:
        print(f"real {ds.version}'s labels differ from this table on {len(stale):,} graphs (e.g. {stale[0]}): the "
              "table is a new dataset version's; the near-duplicate table keeps describing the shipped labels",
              file=sys.stderr)
    canon_classes = _cached(args.cache, "classes", lambda: tx.isomorphic_classes(shipped), ds.sha256)
    bad = tx.isomorphism_violations(shipped, canon_classes)
    print(f"isomorphism classes of 2+ canonical graphs: {len(canon_classes)}; in two families: {len(bad)}",
          file=sys.stderr)
    if bad:
        print("  " + "\n  ".join(" ~ ".join(b) for b in bad), file=sys.stderr)
        return 1
    print("embedding with the wl floor ...", file=sys.stderr)
    pairs = _cached(args.cache, "pairs-exact", lambda: tx.near_duplicate_pairs(tx.wl_counts(shipped)),
                    ds.sha256)
    print(f"canonicalising the raw graphs (duplicates {ds.version}'s dedup merged across families) ...", file=sys.stderr)
    merged = _cached(args.cache, "merged", lambda: merged_cross_family(graphs, derivation_work(graphs, raw_vocab), shipped, taxonomy, True),
                     ds.sha256)
    tables = {tx.TABLE: table,
              tx.NEAR_DUPLICATES: near_duplicate_table(shipped, pairs, read_pair_reasons(), merged)}
    out = args.out or tx.data_path().parent
    if args.check:
        stale_files = [n for n, text in tables.items() if not (out / n).is_file() or (out / n).read_text() != text]
        if stale_files:
            print(f"stale: {', '.join(stale_files)}; rerun python -m narbench.zoo.taxonomy_build", file=sys.stderr)
            return 1
    else:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in tables.items():
            (out / name).write_text(text)
            print(f"wrote {out / name}", file=sys.stderr)
    report(graphs, rows, ds, pairs, merged)
    missing = [(a, b, n) for a, b, n in _unexplained(tables[tx.NEAR_DUPLICATES])]
    if missing:
        print(f"{len(missing)} family pair(s) without a reason: add rows to taxonomy-near-duplicate-reasons.csv:\n  "
              + "\n  ".join(f"{a} ~ {b} ({n} graph pairs)" for a, b, n in missing), file=sys.stderr)
        return 1
    return 0


def _unexplained(table: str) -> list[tuple[str, str, int]]:
    return [(r["family_a"], r["family_b"], int(r["pairs"])) for r in csv.DictReader(io.StringIO(table))
            if not r["reason"].strip()]


def merged_cross_family(raw: list[ArchGraph], work: list[tuple[list[str], Any]], shipped: list[ArchGraph],
                        taxonomy: tx.Taxonomy, progress: bool = False) -> Counter:
    """Graph counts per family pair of `raw` graphs whose canonical graph is identical to a `shipped` graph of
    another family: the cross-family duplicates that the shipped version's dedup merged (keeping the first
    spec's family), which no pair of shipped graphs shows. `work`: per raw graph the (raw op names, edges) the
    shipped version was derived from (`derivation_work`). Canonicalises every one (about a minute for real 1.0)."""
    from narbench.data.canonical import canonical_vocabulary
    from narbench.zoo.derive import _canonical

    versions = {w[2] for w in work if len(w) > 2}
    index = {op: i for i, op in enumerate(canonical_vocabulary(*versions))}
    family_of = {g.content_hash(): g.family for g in shipped}
    out: Counter = Counter()
    for k, (g, labelled, w) in enumerate(zip(raw, taxonomy.relabel(raw), work)):
        canon = _canonical(w)
        kept = family_of.get(canon.to_arch_graph(index, name=g.name, coarse="")
                             .content_hash())
        if kept is not None and kept != labelled.family:
            out[tx.family_pair(kept, labelled.family)] += 1
        if progress and (k + 1) % 5000 == 0:
            print(f"  canonicalised {k + 1:,} of {len(raw):,}", file=sys.stderr)
    return out


def shipped_dataset():
    """The newest shipped `real` dataset, the one the tables describe (`narbench.datasets.real.NEWEST`;
    `core_graphs` are its real graphs)."""
    from narbench.datasets.real import NEWEST

    return NEWEST().load()


def label_differences(graphs: list[ArchGraph], taxonomy: tx.Taxonomy) -> list[str]:
    """Names of `graphs` whose family, coarse label or identity is not `taxonomy`'s (empty: they agree)."""
    new = taxonomy.relabel(graphs)
    return [g.name for g, n in zip(graphs, new)
            if (g.family, g.coarse, g.meta.get("identity")) != (n.family, n.coarse, n.meta["identity"])]


def derivation_work(raw: list[ArchGraph], raw_vocab: list[str]) -> list[tuple[list[str], Any, str]]:
    """Per graph of `raw_graphs()` (passed in, already read), the (raw op names, edges, canonical version)
    the newest shipped `real` was derived from: 1.0's, with its re-extracted graphs (`NEWEST.patch_artifact`)."""
    from narbench.datasets.real import NEWEST
    from narbench.zoo.derive import apply_patch

    work = apply_patch(raw, raw_vocab, tx.data_path(NEWEST.patch_artifact))[0]
    return [(ops, edges, NEWEST.canonical_version) for ops, edges in work]


def raw_graphs() -> tuple[list, list[str]]:
    """The graphs the taxonomy is built from: the raw record of the extraction (`real-1.0.narg`),
    which keeps every zoo model and its zoo label (timm module, torchvision module, transformers
    model type) that the rules match; `real` 2.0 is derived from it (`narbench.zoo.derive`)."""
    from narbench.data.store import read_graphs

    graphs, vocab, _, _ = read_graphs(tx.data_path("real-1.0.narg"))
    return graphs, vocab


def _cached(folder: Path | None, name: str, compute, sha256: str | None = None):
    """`compute()`, kept as JSON in `folder` (keyed by the dataset's sha256: 1.0's pin unless given) when
    given (`narbench.zoo.taxonomy_cache`: no pickle)."""
    from narbench.datasets.real import RealDataset
    from narbench.zoo.taxonomy_cache import cached

    return cached(folder, name, (sha256 or RealDataset.previous_versions["1.0"][0])[:12], compute)


def report(raw: list[ArchGraph], rows: list[tx.TaxonomyRow], ds, pairs: np.ndarray, merged: Counter) -> None:
    """The figures of the datasheet: families, identities, near-duplicate twins, the splits of the shipped data."""
    from narbench.datasets.datasheet import near_duplicate_share

    graphs = ds.core_graphs
    fam_ids: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        fam_ids[r.family].add(r.identity)
    print(f"taxonomy: {len(rows):,} models, {len({r.identity for r in rows}):,} identities, {len(fam_ids)} families "
          f"(1.0's zoo labels: {len({g.family for g in raw})}), "
          f"{sum(1 for v in fam_ids.values() if len(v) >= 2)} with >= 2 identities")
    cross = tx.cross_family_pairs(graphs, pairs)
    print(f"real {ds.version}: {len(graphs):,} graphs, {len({g.family for g in graphs})} families; graph pairs at WL "
          f"cosine >= {tx.NEAR_DUPLICATE_WL}: {len(pairs):,}, across families {sum(cross.values()):,} over "
          f"{len(cross)} family pairs; graphs with such a twin {tx.twin_share(graphs, pairs):.1%}; raw graphs merged "
          f"into a graph of another family by the dedup: {sum(merged.values()):,} over {len(merged)} family pairs")
    for name, split in ds.splits.items():
        q = [ds.graphs[i] for i in split.test]
        by_source = Counter(g.source for g in q)
        line = (f"{name}: queries {len(q):,}, families {len({g.family for g in q})}, corpus {len(split.train):,}; "
                + ", ".join(f"{s} {c:,} ({c / max(len(q), 1):.1%})" for s, c in by_source.most_common())
                + f"; with an op-histogram near-duplicate of their family in the corpus "
                  f"{near_duplicate_share(ds, split):.1%}")
        if name == "unseen":
            line += f"; identities on both sides: {len(tx.straddling_identities(graphs, split))}"
        print(line)


if __name__ == "__main__":
    raise SystemExit(main())
