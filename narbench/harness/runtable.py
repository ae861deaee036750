"""The run table: what `narbench run` prints of a run (`narbench.harness.runner.render`).

The capped MAP (MAPc, AP / min(k, |R|)) is the MAP row; ranx's uncut MAP (AP / |R|) and the
paper's NDCG (ideal over all |R|) are shown below it, labelled as uncut, with one line saying why
they are small: with |R| > k relevant graphs they cannot reach 1 (docs/protocol.md, "MAP convention").
"""

from __future__ import annotations

from rich.console import Console

#: the table's rows (label, metric): the capped MAP (MAPc) among the ranking metrics, the uncut ones after
RENDERED = (("MRR", "mrr"), ("MAPc (AP / min(k,|R|))", "map_capped"), ("NDCG", "ndcg"),
            ("MAP uncut (AP / |R|, ranx)", "map"), ("NDCG uncut ideal (all |R|, paper's)", "ndcg_paper"))
#: under the table: what the uncut rows are
UNCUT_NOTE = ("uncut: divided by all |R| relevant graphs, below 1 when |R| > k (MAP at most k/|R|) whatever the "
              "ranking; compare MAPc and NDCG (docs/protocol.md)")
KS = (20, 50, 100)


def render(ev, console: Console) -> None:
    """A run's metrics (`ev`: a `runner.Evaluation`) as a table (@20/50/100), its sizes, timings and
    where its result file went."""
    from rich.markup import escape
    from rich.table import Table

    res = ev.result
    title = (f"{res.encoder} + {res.splitter} on {res.dataset['name']} · {res.split} "
             f"({res.profile}, protocol {res.protocol}, seed {res.seed})")
    table = Table(title=escape(title), min_width=len(title))  # the title on one line where it fits
    table.add_column("metric")
    for k in KS:
        table.add_column(f"@{k}", justify="right")
    scores = {**res.metrics, **res.metrics_extra}
    for label, metric in RENDERED:
        table.add_row(escape(label), *[f"{scores[f'{metric}@{k}']:.4f}" if f"{metric}@{k}" in scores else "-"
                                       for k in KS])
    console.print(table)
    console.print(f"[dim]{escape(UNCUT_NOTE)}[/dim]", highlight=False)
    console.print(f"queries {res.num_queries}, corpus {res.num_corpus}, trained on {res.num_train}; device {res.device}")
    console.print("timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in res.timings.items()))
    if ev.path:  # one line, never wrapped: the path is copied from logs
        console.print(f"result written to [bold]{escape(str(ev.path))}[/bold]", soft_wrap=True, highlight=False)
