"""The taxonomy's section of the `real` datasheet (`markdown`): the labelling rule, counts, the invariants
and the listed cross-family near-duplicates, by reason group.
"""

from __future__ import annotations

from pathlib import Path

from narbench.datasets.near_duplicates import (NEAR_DUPLICATE_WL, NEAR_DUPLICATES, near_duplicate_groups,
                                               read_near_duplicate_rows)
from narbench.datasets.taxonomy import Taxonomy, load

RULE = ("A *family* is one architecture design as its paper names it (ResNet, MobileNetV2, ViT, BERT, GPT-2, "
        "LLaMA, RegNet, RepVGG): a zoo's module that holds several papers' designs is split (timm's `byobnet` into "
        "RepVGG, GERNet, MobileOne, RegNetZ, CLIP ResNets, ...), and a paper that trains, distils, quantises or "
        "scales an existing architecture and says so (RoBERTa, ELECTRA, DistilBERT, DeiT, BiT, ResNet-RS, TinyNet) "
        "joins that architecture's family. Aliases across zoos are one family. A model's *identity* is the model "
        "itself for splitting: aliases across zoos (timm `regnety_016` = torchvision `regnet_y_1_6gf`), renamed "
        "copies (isomorphic graphs) and a multimodal model's towers are one identity; every variant and task head "
        "of a model keeps its identity. The coarse label is the graph rule's (`attention` if any of the model's "
        "graphs has an attention pattern, else the label of most of its graphs) unless a row says why not.")


#: invariant 1 where graphs keep every family of their specs (real 2.3 on)
INVARIANT_1_FAMILIES = (
    "1. dedup never drops a family: a canonical graph keeps the family of every spec that gave it "
    "(`ArchGraph.families`, the first spec's first: its primary family), and isomorphic canonical graphs have one "
    "primary family and one set of families (`narbench.datasets.isomorphism.family_set_violations`; the derivation "
    "unites the families of an isomorphism class, `unite_families`); the family pairs that share a graph are "
    "listed with a reason (`merged`);")


def markdown(taxonomy: Taxonomy | None = None, near_duplicates: Path | None = None, top: int = 25,
             straddling: int | None = None, families: bool = False) -> str:
    """The taxonomy's section of the `real` datasheet: the rule, counts, invariants, the listed near-duplicates.

    `straddling`: the number of identities measured on both sides of the shipped `unseen` (shown when given).
    `families`: the data's graphs keep every family of their specs (real 2.3 on): invariants 1 and 3 as they
    read there."""
    taxonomy = taxonomy or load()
    rows = taxonomy.rows
    fam_ids: dict[str, set[str]] = {}
    for r in rows:
        fam_ids.setdefault(r.family, set()).add(r.identity)
    dups = read_near_duplicate_rows(near_duplicates)
    groups = near_duplicate_groups(dups)
    lines = ["## Taxonomy (`narbench/data/taxonomy-real.csv`)", "",
             "The labels of `real` 2.0 (real 1.0's graphs keep the family and coarse label they were published with: "
             "the zoo's module / model type).", "", RULE, "",
             "Built by `python -m narbench.cli.taxonomy_build` from mechanical rules and two hand-written tables "
             "(`taxonomy-rules.csv`: the judgments, each with its reason; `taxonomy-aliases.csv`: one model under "
             "several names); `narbench.datasets.taxonomy.relabel` applies it to graphs.", "",
             "| | |", "|---|---|",
             f"| models (source, model) | {len(rows):,} |",
             f"| identities | {len({r.identity for r in rows}):,} |",
             f"| families | {len(fam_ids):,} |",
             f"| families with >= 2 identities (can be `unseen` queries) | {sum(len(v) >= 2 for v in fam_ids.values()):,} |",
             f"| rows with a judgment (reason given) | {sum(bool(r.reason) for r in rows):,} |",
             f"| cross-family family pairs with graphs at WL cosine >= {NEAR_DUPLICATE_WL} "
             "(each listed with its reason) "
             f"| {sum(int(d['pairs']) > 0 for d in dups):,} ({sum(int(d['pairs']) for d in dups):,} graph pairs) |",
             f"| family pairs whose graphs the dedup merged (identical canonical graphs; each listed with its reason) "
             f"| {sum(int(d['merged']) > 0 for d in dups):,} ({sum(int(d['merged']) for d in dups):,} source graphs) |",
             "", "### Invariants", "",
             "Checked on the shipped `real` 2.0 graphs (canonical graphs; the `crossimpl` queries left out) by "
             "`python -m narbench.cli.taxonomy_build` (which fails when one breaks) and by the slow tests of "
             "`tests/test_taxonomy.py`:", "",
             INVARIANT_1_FAMILIES if families else
             "1. isomorphic canonical graphs are never in two families "
             "(`narbench.datasets.isomorphism.isomorphism_violations`: "
             "Weisfeiler-Lehman colours, then a canonical numbering, per bucket of a cheap invariant); the dataset "
             "keeps one graph per canonical graph, so the source graphs (real 1.0) whose canonical graph equals a "
             "shipped graph of another family are counted too (`merged`: the dedup kept the first spec's family) "
             "and their family pairs listed with a reason;",
             f"2. every cross-family pair of graphs at WL cosine >= {NEAR_DUPLICATE_WL} (the shipped `wl` floor's "
             f"embedding) is merged or its family pair is listed with its reason in `{NEAR_DUPLICATES}`; "
             "the committed table is what the build measures (`unlisted_near_duplicates`); no family was merged "
             "for 2.0 after its labels were published;",
             ("3. no model identity (aliases across zoos and renamed copies merged) has graphs on both sides of "
              "`unseen`, counting every identity of a shared graph (`narbench.datasets.families.straddling`"
              if families else
              "3. no model identity (aliases across zoos and renamed copies merged) has graphs on both sides of "
              "`unseen` (`straddling_identities`") + (f"; measured: {straddling}" if straddling is not None else "")
             + ").", "",
             "Canonical graphs elide attention masks, biases and additive position embeddings and fold attention, "
             "norms and GELU spellings (docs/canonical-graphs.md), so designs that share a block share a graph: a "
             "pre-LN decoder block and a pre-LN encoder block differ only in the causal mask, which a graph cannot "
             "show. The reasons (`taxonomy-near-duplicate-reasons.csv`) are written from the papers and the designs, "
             "never from retrieval scores. By reason group:", "",
             f"| group | family pairs listed | graph pairs at WL >= {NEAR_DUPLICATE_WL} | source graphs merged |",
             "|---|---:|---:|---:|"]
    lines += [f"| {g} | {nf:,} | {ng:,} | {nm:,} |" for g, nf, ng, nm, _ in groups]
    lines += ["", "The reasons, by group:", "", "| group | family pairs listed | graph pairs | merged | reason |",
              "|---|---:|---:|---:|---|"]
    lines += [f"| {g} | {nf:,} | {ng:,} | {nm:,} | {why or '(none)'} |"
              for g, _, _, _, reasons in groups for why, nf, ng, nm in reasons]
    lines += ["", f"Cross-family near-duplicates (`{NEAR_DUPLICATES}`; pairs of graphs at cosine >= "
              f"{NEAR_DUPLICATE_WL}; `graphs`: distinct graphs involved; `truncated`: pairs with a variant cut to "
              f"1-2 layers; `merged`: source graphs the dedup merged into a graph of the other family), the {top} "
              f"largest:", "",
              "| family a | family b | graph pairs | graphs | truncated | merged | group |",
              "|---|---|---:|---:|---:|---:|---|"]
    fmt = lambda d: (f"| {d['family_a']} | {d['family_b']} | {int(d['pairs']):,} | {int(d['graphs']):,} | "
                     f"{int(d['truncated_pairs']):,} | {int(d['merged']):,} | {d['group']} |")
    lines += [fmt(d) for d in dups[:top]]
    if len(dups) > top:
        lines += ["", f"<details><summary>the other {len(dups) - top} pairs</summary>", "",
                  "| family a | family b | graph pairs | graphs | truncated | merged | group |",
                  "|---|---|---:|---:|---:|---:|---|"]
        lines += [fmt(d) for d in dups[top:]] + ["", "</details>"]
    return "\n".join(lines) + "\n"
