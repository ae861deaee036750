"""Build `narbench/data/taxonomy-real.csv` and `taxonomy-near-duplicates.csv` from rules and data.

    python -m narbench.cli.taxonomy_build            # rewrite both tables, print the report
    python -m narbench.cli.taxonomy_build --check    # fail if the committed tables differ

The taxonomy's rows come from the raw record of the extraction (real 1.0) and the rules
(`narbench.zoo.taxonomy_rules`: family, identity, coarse label per (source, model)).

The build fails if isomorphic graphs land in two families (invariant a), on the raw 1.0 graphs
the rules read and on the shipped `real` 2.x canonical graphs. The near-duplicate table describes
the shipped dataset: every family pair of the shipped real (its canonical graphs, the crossimpl queries
left out) with graphs at WL cosine >= 0.999, with its reason (`narbench.zoo.near_duplicate_table`).
Canonical graphs elide attention masks, biases and additive positions and fold
attention, norms and GELU spellings (docs/canonical-graphs.md), so more designs share one graph
there than in 1.0's raw graphs; 1.0's table (raw graphs) is not kept: its figures are in
docs/datasets.md. A family pair without a reason makes the build fail after writing.
Labels are never chosen by looking at retrieval scores.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from narbench.data.graph import ArchGraph
from narbench.datasets import taxonomy as tx
from narbench.datasets.families import has_families
from narbench.datasets.isomorphism import family_set_violations, isomorphic_classes, isomorphism_violations
from narbench.datasets.near_duplicates import (NEAR_DUPLICATE_WL, NEAR_DUPLICATES, cross_family_pairs,
                                               near_duplicate_pairs, twin_share, wl_counts)
from narbench.zoo.near_duplicate_table import merged_cross_family, near_duplicate_table, read_pair_reasons, unexplained
from narbench.zoo.taxonomy_rules import build_rows, read_aliases, read_rules, write_table


def build_tables(check: bool = False, out: Path | None = None, cache: Path | None = None) -> int:
    """Rebuild both tables and write them to `out` (default: narbench/data), or with `check` compare them with
    the files there; print the report. 0 when the tables are built (or fresh) and every invariant holds, else 1
    (the reason on stderr). `cache`: a folder keeping the slow intermediate results between runs."""
    graphs, raw_vocab = raw_graphs()
    print(f"real 1.0 (raw record): {len(graphs):,} graphs", file=sys.stderr)
    classes = _cached(cache, "classes-1.0", lambda: isomorphic_classes(graphs))
    print(f"isomorphism classes of 2+ raw graphs: {len(classes)}", file=sys.stderr)
    rows = build_rows(graphs, read_rules(), read_aliases(), classes)
    taxonomy = tx.Taxonomy(rows)
    bad = isomorphism_violations(taxonomy.relabel(graphs), classes)
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
    canon_classes = _cached(cache, "classes", lambda: isomorphic_classes(shipped), ds.sha256)
    bad = isomorphism_violations(shipped, canon_classes)
    if has_families(shipped):  # real 2.3 on: an isomorphism class has one set of families too
        bad += family_set_violations(shipped, canon_classes)
    print(f"isomorphism classes of 2+ canonical graphs: {len(canon_classes)}; in two families: {len(bad)}",
          file=sys.stderr)
    if bad:
        print("  " + "\n  ".join(" ~ ".join(b) for b in bad), file=sys.stderr)
        return 1
    print("embedding with the wl floor ...", file=sys.stderr)
    pairs = _cached(cache, "pairs-exact", lambda: near_duplicate_pairs(wl_counts(shipped)), ds.sha256)
    print(f"canonicalising the raw graphs (duplicates {ds.version}'s dedup merged across families) ...", file=sys.stderr)
    merged = _cached(cache, "merged", lambda: merged_cross_family(graphs, derivation_work(graphs, raw_vocab), shipped,
                                                                  taxonomy, True), ds.sha256)
    tables = {tx.TABLE: table,
              NEAR_DUPLICATES: near_duplicate_table(shipped, pairs, read_pair_reasons(), merged)}
    out = out or tx.data_path().parent
    if check:
        stale_files = [n for n, text in tables.items() if not (out / n).is_file() or (out / n).read_text() != text]
        if stale_files:
            print(f"stale: {', '.join(stale_files)}; rerun python -m narbench.cli.taxonomy_build", file=sys.stderr)
            return 1
    else:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in tables.items():
            (out / name).write_text(text)
            print(f"wrote {out / name}", file=sys.stderr)
    report(graphs, rows, ds, pairs, merged)
    missing = [(a, b, n) for a, b, n in unexplained(tables[NEAR_DUPLICATES])]
    if missing:
        print(f"{len(missing)} family pair(s) without a reason: add rows to taxonomy-near-duplicate-reasons.csv:\n  "
              + "\n  ".join(f"{a} ~ {b} ({n} graph pairs)" for a, b, n in missing), file=sys.stderr)
        return 1
    return 0


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
    cross = cross_family_pairs(graphs, pairs)
    print(f"real {ds.version}: {len(graphs):,} graphs, {len({g.family for g in graphs})} families; graph pairs at WL "
          f"cosine >= {NEAR_DUPLICATE_WL}: {len(pairs):,}, across families {sum(cross.values()):,} over "
          f"{len(cross)} family pairs; graphs with such a twin {twin_share(graphs, pairs):.1%}; raw graphs merged "
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
