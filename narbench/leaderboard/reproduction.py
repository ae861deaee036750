"""The Reproduction section: each of the paper's numbers beside ours, and why they differ.

For every block of Tables 1-4 that shows the paper's numbers (a `quick` or `paper` profile) on the
`standard` split (the paper has no `unseen` split), one line per paper row and cut-off k: the
paper's MRR, MAP and NDCG, and ours from the same rankings under both conventions: narbench's
(ranx's definitions, NDCG's ideal cut at k) and the authors' evaluator's (`narbench.eval.metrics`:
`PAPER_CONVENTION`), so a reader compares like with like. The known reasons the numbers differ
(`REASONS`) are said once above the blocks; docs/protocol.md cites the authors' code for each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from narbench.leaderboard.paper import PAPER, PaperRow
from narbench.leaderboard.records import ANY_PROTOCOL, Key
from narbench.leaderboard.tables import PAPER_PROFILES, LeaderTable, Row
from narbench.eval.metrics import KS

#: the split the paper's protocol corresponds to (queries held out at random within each label)
SPLIT = "standard"
#: the protocol blocks that borrow a row of the `family` block when the encoder trains on the same labels
#: under both (`paper_labels` == family, e.g. `ours`: the sweep runs it under `family` only)
PAPER_PROTOCOL, FAMILY_PROTOCOL = "paper", "family"

#: The cells of one line, in order: (header, source, metric with `{k}`). `paper` cells are the
#: published number (its MAP is the min(k, |R|) convention, `map_capped`); `ours` cells are the
#: row's mean ± std over seeds.
CELLS = (
    ("MRR paper", "paper", "mrr@{k}"),
    ("MRR ours", "ours", "mrr@{k}"),
    ("MAP paper", "paper", "map_capped@{k}"),
    ("MAPc ours", "ours", "map_capped@{k}"),
    ("MAP ours", "ours", "map@{k}"),
    ("NDCG paper", "paper", "ndcg@{k}"),
    ("NDCG ours", "ours", "ndcg@{k}"),
    ("NDCGp ours", "ours", "ndcg_paper@{k}"),
)

LEGEND = (
    "Columns: *paper*: the published number (their data, their runs). *ours*: mean ± sample std over the row's "
    "seeds, all from the same rankings. `MAPc` divides the AP sum by min(k, |R|), the convention of the authors' "
    "`evaluation/eval.py` and of the paper's MAP column; `MAP` divides it by |R| (ranx, TREC; and the authors' "
    "`evaluation/evaluator.py`). `NDCG` is ranx's (ideal DCG of min(k, |R|) relevant items); `NDCGp` is "
    "`ndcg_paper@k`, the authors' NDCG (both scripts): the ideal DCG of *all* |R| relevant items, not cut at k, "
    "so a query with |R| > k cannot reach 1. MRR is the same in all three. `–`: no value (`NDCGp`: a result file "
    "of the row predates `ndcg_paper@k`; a rerun adds it)."
)

#: the known reasons the paper's numbers and ours differ (Markdown bullets; sources in docs/protocol.md)
REASONS = (
    "**Data.** `real` is narbench's own extraction (timm, torchvision, transformers; docs/datasets.md); the "
    "paper's real set is 12,517 graphs crawled from Hugging Face and PyTorch Hub, never published. `nas` follows "
    "the paper's recipe (30,000 DARTS networks, 10 classes by edit distance) with narbench's own generator and "
    "classes. The paper's rows are numbers on other data, not runs on ours.",
    "**Protocol.** narbench: held-out queries (the split's test graphs) against the corpus (its train graphs), "
    "cosine similarity, relevance = same family, labels per `--protocol`. The authors' `evaluation/evaluator.py` "
    "(`main`, `get_k_neighbors`): every graph of the set it trained on is a query against all of them (no "
    "held-out set), faiss L2 distance, the query dropped from its own ranking but kept in its ground-truth set "
    "(`scanner/name2truth.py` lists every graph of the class), which counts it in |R|.",
    "**MAP convention.** The paper's MAP values imply dividing by min(k, |R|): compare them with `MAPc`, "
    "not with ranx's `MAP`.",
    "**The authors' evaluator.** Their two scripts normalise MAP differently: `evaluation/eval.py` "
    "(`evaluator`) divides by min(|R|, k) (`MAPc`), `evaluation/evaluator.py` (`evaluator`) by max(1, |R|) "
    "(`MAP`). Both compute NDCG with an ideal DCG over all |R| relevant items, not cut at k (`NDCGp`). With a "
    "class as the ground truth that ideal caps NDCG@20 far below the published values: a perfect ranking scores "
    "NDCG@20 = IDCG(20) / IDCG(3,000) = 0.023 for a NAS class of 3,000 (30,000 networks in 10 classes), against "
    "the published 0.95-0.97. Which evaluator (or ground truth) produced the paper's numbers is not known.",
    "**Training.** The authors' public config (`configs/darts_pretraining.yaml`, `subgraph_model.epoch: 0`) "
    "trains 0 epochs of the motif stage (stage 1; `run_pretraining.py` loops `range(args.subgraph_model_epoch)`), "
    "where the paper's Table 5 says 5; narbench's `paper` profile trains 5. `quick` rows are small models on a "
    "training subset, 5 graph-level epochs where Table 5 trains 15 (docs/profiles.md): a reference for the trend, "
    "not the paper's recipe. Whether their order at 5 epochs is their order at 15 is measured by learning curves "
    "([curves.md](curves.md), generated from the curve runs with its own verdict per setting).",
)


def paper_row_id(table: int, key: Key) -> str | None:
    """The `row` of `narbench/data/paper_tables.csv` a configuration corresponds to in `table`, if any."""
    if key.protocol == ANY_PROTOCOL:  # training-free floors: not in the paper
        return None
    if table == 1:
        return key.encoder if key.splitter == "none" else f"{key.encoder}+{key.splitter}"
    return {2: key.splitter, 3: key.objective, 4: key.init}.get(table)


@dataclass
class ReproBlock:
    """One block of the section: a table's setting, and per paper row our matching row (or None)."""

    table: int
    setting: tuple[str, str, str, str, str]
    lines: list[tuple[PaperRow, Row | None]]
    #: the matching rows' aggregate statistics (`aggregate` columns: `<metric> mean`, `<metric> std`)
    stats: dict[Key, dict]
    #: rows taken from the `family` block of the same setting (labels identical under both protocols)
    borrowed: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        ds, split, profile, device, protocol = self.setting
        return f"Table {self.table} · {ds} · split {split} · {profile} · {device} · protocol {protocol}"


def build_reproduction(tables: list[LeaderTable], df) -> list[ReproBlock]:
    """The section's blocks, from the built tables (`build_tables`) and their `aggregate` frame.

    Every block of a paper profile on the `standard` split with at least one row that matches a
    paper row; the paper's rows in the paper's order. A `paper`-protocol block without a row for a
    paper row takes the `family` block's row when its encoder trains on the family under both
    protocols (`paper_labels`, docs/protocol.md), and says so.
    """
    from narbench.leaderboard.records import KEYS

    stats = {Key(*(r[k] for k in KEYS)): r for r in df.to_dict(orient="records")} if len(df) else {}
    out = []
    for t in tables:
        settings = {b.setting: b for b in t.blocks if b.setting is not None}
        for b in t.blocks:
            if b.setting is None or b.setting[1] != SPLIT or b.setting[2] not in PAPER_PROFILES:
                continue
            ours = {paper_row_id(t.number, r.key): r for r in b.rows}
            family = settings.get((*b.setting[:4], FAMILY_PROTOCOL)) if b.setting[4] == PAPER_PROTOCOL else None
            borrowed = []
            for r in family.rows if family else []:
                rid = paper_row_id(t.number, r.key)
                if rid is not None and rid not in ours and _same_labels_under_both(r.key.encoder):
                    ours[rid] = r
                    borrowed.append(r.label)
            lines = [(p, ours.get(p.row)) for p in PAPER.get(t.number, {}).get(b.dataset, [])]
            if any(row is not None for _, row in lines):
                used = {row.label for _, row in lines if row is not None}
                out.append(ReproBlock(t.number, b.setting, lines,
                                      {row.key: stats[row.key] for _, row in lines if row is not None},
                                      [label for label in borrowed if label in used]))
    return out


def _same_labels_under_both(encoder: str) -> bool:
    """Whether a registered encoder trains on the family under the `paper` protocol too."""
    from narbench.core import registry
    from narbench.train.protocol import PROTOCOLS

    try:
        cls = registry.load("encoder", encoder)
    except registry.RegistryError:
        return False
    return PROTOCOLS[PAPER_PROTOCOL].labels(cls) == PROTOCOLS[FAMILY_PROTOCOL].labels(cls)


def _ours(stats: dict, metric: str) -> str:
    mean, std = stats.get(f"{metric} mean", math.nan), stats.get(f"{metric} std", math.nan)
    if mean is None or math.isnan(mean):
        return "–"
    return f"{mean:.3f}" if std is None or math.isnan(std) else f"{mean:.3f}±{std:.3f}"


def reproduction_markdown(blocks: list[ReproBlock]) -> str:
    """The section as Markdown: the reasons, the legend, one table per block (one line per paper row and k)."""
    lines = ["## Reproduction", "",
             "Each of the paper's numbers (Tables 1-4) beside ours on the `standard` split, under narbench's "
             "conventions and under the authors' evaluator's, computed from the same rankings. Known reasons "
             "they differ:", ""]
    lines += [f"- {r}" for r in REASONS] + ["", LEGEND, ""]
    if not blocks:
        lines += ["No `quick` or `paper` results on the `standard` split match a row of the paper's tables yet.", ""]
    missing = {b.title: _missing_paper_ndcg(b) for b in blocks}
    if blocks and all(len(missing[b.title]) == sum(row is not None for _, row in b.lines) for b in blocks):
        lines += [f"No row below has `NDCGp` yet: {_MISSING}", ""]
        missing = {}
    for b in blocks:
        lines += [f"### {b.title}", ""]
        lines.append("| paper row | ours | n | k | " + " | ".join(h for h, _, _ in CELLS) + " |")
        lines.append("|---|---|---:|---:|" + "---:|" * len(CELLS))
        for paper, row in b.lines:
            st = b.stats.get(row.key, {}) if row is not None else {}
            for k in KS:
                cells = [f"*{paper.scores[m.format(k=k)]:.3f}*" if src == "paper" else
                         (_ours(st, m.format(k=k)) if row is not None else "–") for _, src, m in CELLS]
                label = (row.label, row.n_text.replace("*", "\\*")) if row is not None else ("(no result)", "")
                lines.append(f"| {paper.name} | {label[0]} | {label[1]} | {k} | " + " | ".join(cells) + " |")
        lines.append("")
        if b.borrowed:
            lines += [f"- {', '.join(b.borrowed)}: the `{FAMILY_PROTOCOL}` run (this encoder trains on the family "
                      f"under both protocols, so it is also its `{PAPER_PROTOCOL}` run; docs/protocol.md).", ""]
        if missing.get(b.title):
            lines += [f"- `NDCGp` missing for {', '.join(missing[b.title])}: {_MISSING}", ""]
    return "\n".join(lines)


_MISSING = ("their result files (all seeds or some) were written before `ndcg_paper@k` existed, and result files "
            "keep per-query scores, not rankings, so it cannot be recomputed from them; a rerun adds it.")


def _missing_paper_ndcg(block: ReproBlock) -> list[str]:
    """The labels of the block's rows without `ndcg_paper@k` (some seed's result file predates it)."""
    return [row.label for _, row in block.lines if row is not None
            and any(math.isnan(block.stats[row.key].get(f"ndcg_paper@{k} mean", math.nan)) for k in KS)]
