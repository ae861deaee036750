"""Figures: one bar chart per table block, t-SNE maps of saved query embeddings; both reproducible.

Every figure is drawn on a bare Agg canvas (no pyplot, no backend switch) with matplotlib's
default style and its bundled DejaVu Sans, whatever the user's matplotlibrc says, and saved
with no metadata but one PNG text chunk, `narbench-inputs`: a digest of what the figure shows
(the plotted numbers, or the embedding files and t-SNE settings) and of `PLOT_VERSION`. A
figure whose file already carries that digest is not redrawn. So regenerating on the same
machine is byte-identical, and on another machine (another matplotlib, FreeType, BLAS or CPU,
which change pixels, and t-SNE's optimisation in its last bits) a figure changes only when
what it shows changed. t-SNE runs with a seeded random initialisation (no PCA, which goes
through BLAS) on one thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from narbench.leaderboard.records import DEFAULT_OBJECTIVE, SCRATCH, Record, select_runs
from narbench.leaderboard.tables import LeaderTable, row_labels
from narbench.data.store import atomic_write_bytes

#: how a file is written: `atomic_write_bytes`, or the leaderboard's staging (`publish`)
Writer = Callable[[Path, bytes], None]

#: bump when the drawing code changes what a figure looks like: every figure is then redrawn
PLOT_VERSION = 1
DIGEST_KEY = "narbench-inputs"
TSNE_MAX_POINTS = 1500
TSNE_FAMILIES = 10  # coloured families of a t-SNE map; the others are grey
TSNE_PANELS = {("gcn", "none"): 0, ("gat", "none"): 1, ("ours", "motif"): 2}  # the paper's Figure 5
#: tab10 without its grey (the colour of the families not coloured), and black
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#000000")
_GREY = "#cccccc"
_STYLE = {"font.family": "DejaVu Sans", "svg.hashsalt": "narbench", "path.simplify": True}


def _file_part(setting) -> str:
    """A setting as part of a file name: its fields joined by `-`, a subset's `/` as `~` (`crossimpl~reimpl`)."""
    return "-".join(setting).replace("/", "~")


def bar_chart_name(table: int, setting) -> str:
    """The file name of a table block's bar chart (`plot_tables` draws it under this name)."""
    return f"table{table}-{_file_part(setting)}.png"


def bar_chart_digest(table: int, block) -> str:
    """The digest a block's bar chart carries (`drawn_from`): equal only when the chart shows these rows."""
    data = [[r.label, r.n, [[r.mean[f"ndcg@{k}"], r.std[f"ndcg@{k}"]] for k in (20, 50, 100)]] for r in chart_order(block.rows)]
    return _digest("bars", [f"Table {table} · {block.title}", data])


@contextlib.contextmanager
def _style():
    import matplotlib

    with matplotlib.rc_context():
        matplotlib.rcdefaults()  # ignore the user's matplotlibrc (restored on exit)
        matplotlib.rcParams.update(_STYLE)
        yield


def _digest(kind: str, payload) -> str:
    text = json.dumps({"plot_version": PLOT_VERSION, "kind": kind, "payload": payload}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def drawn_from(path: Path) -> str | None:
    """The `narbench-inputs` digest stamped into a PNG, or None (no file, not ours, unreadable)."""
    if not path.is_file():
        return None
    try:
        from PIL import Image

        with Image.open(path) as im:
            return im.info.get(DIGEST_KEY)
    except Exception:  # a damaged or foreign file is simply redrawn
        return None


def _save(fig, path: Path, digest: str, write: Writer = atomic_write_bytes) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None, DIGEST_KEY: digest}, bbox_inches="tight")
    write(path, buf.getvalue())


def plot_tables(tables: list[LeaderTable], out_dir: str | Path, *, redraw: bool = False,
                progress: Callable[[str], None] | None = None, write: Writer = atomic_write_bytes) -> list[Path]:
    """One bar chart per table block (`table<N>-<setting>.png`): NDCG@20/50/100 of its rows, best first.

    The rows and labels are the table's; error bars are the std over seeds; a single-seed row is
    hatched (no error bar). `redraw` ignores the digests and draws every chart; `write` writes each file.
    """
    from matplotlib.figure import Figure

    out = []
    for t in tables:
        for b in t.blocks:
            if not b.rows:
                continue
            rows = chart_order(b.rows)
            title = f"Table {t.number} · {b.title}"
            path = Path(out_dir) / bar_chart_name(t.number, b.setting)
            out.append(path)
            digest = bar_chart_digest(t.number, b)
            if not redraw and drawn_from(path) == digest:
                continue
            if progress:
                progress(f"drawing {path.name}")
            with _style():
                fig = Figure(figsize=(max(6.0, 0.9 * len(rows) + 2), 4.4))
                ax = fig.subplots()
                x = np.arange(len(rows))
                width = 0.27
                single = [r.n == 1 for r in rows]
                for i, k in enumerate((20, 50, 100)):
                    means = np.array([r.mean[f"ndcg@{k}"] for r in rows], dtype=float)
                    stds = np.array([r.std[f"ndcg@{k}"] for r in rows], dtype=float)  # NaN (one seed): no bar
                    bars = ax.bar(x + (i - 1) * width, means, width, yerr=stds, capsize=2, label=f"NDCG@{k}")
                    for bar, one in zip(bars, single):
                        if one:
                            bar.set_hatch("///")
                ax.set_xticks(x)
                ax.set_xticklabels([r.label for r in rows], rotation=30, ha="right", fontsize=8)
                ax.set_ylim(0, 1.12)
                ax.set_ylabel("NDCG (mean ± std over seeds)")
                ax.set_title(title + ("\nhatched: a single seed (no std)" if any(single) else ""), fontsize=9)
                ax.legend(fontsize=8, loc="upper center", ncol=3, frameon=False)
                ax.grid(axis="y", alpha=0.3)
                _save(fig, path, digest, write)
    return out


def chart_order(rows: list) -> list:
    """The rows of a block as its chart shows them: best mean NDCG@20 first (ties by label)."""
    return sorted(rows, key=lambda r: (-(-math.inf if math.isnan(r.mean["ndcg@20"]) else r.mean["ndcg@20"]), r.label))


def tsne_panels(records: list[Record]) -> dict[tuple[str, ...], list[tuple[str, int, Path]]]:
    """Per setting, the saved embeddings to map: (label, seed, file) of gcn, gat and ours+motif.

    Each is its configuration's lowest seed with an `.embeddings.npz` (default objective, from scratch).
    """
    panels: dict[tuple[str, ...], list[tuple[int, str, int, Path]]] = {}
    selected = select_runs(records)
    labels = row_labels(selected)  # the tables' labels
    for key, by_seed in selected.items():
        order = TSNE_PANELS.get((key.encoder, key.splitter))
        if order is None or key.objective != DEFAULT_OBJECTIVE or key.init != SCRATCH:
            continue
        seed = next((s for s in sorted(by_seed) if by_seed[s].embeddings.is_file()), None)
        if seed is not None:
            panels.setdefault(key.setting, []).append((order, labels[key], seed, by_seed[seed].embeddings))
    return {setting: [item[1:] for item in sorted(items)] for setting, items in sorted(panels.items())}


def plot_tsne(records: list[Record], out_dir: str | Path, *, max_points: int = TSNE_MAX_POINTS, redraw: bool = False,
              progress: Callable[[str], None] | None = None, write: Writer = atomic_write_bytes) -> list[Path]:
    """t-SNE maps of saved query embeddings (`tsne-<setting>.png`), coloured by family.

    One figure per setting with a panel for each of gcn, gat and ours+motif that saved
    embeddings (`tsne_panels`). Relevance is the family, so points are coloured by family: the
    `TSNE_FAMILIES` largest among the mapped queries, the rest grey; the figure says which
    labels and which seed. At most `max_points` queries (a seeded subsample). `write` writes each file.
    """
    out = []
    panels = tsne_panels(records)
    for i, (setting, items) in enumerate(panels.items(), 1):
        path = Path(out_dir) / f"tsne-{_file_part(setting)}.png"
        out.append(path)
        inputs = [[label, seed, hashlib.sha256(npz.read_bytes()).hexdigest()] for label, seed, npz in items]
        digest = _digest("tsne", [list(setting), inputs, max_points, TSNE_FAMILIES])
        if not redraw and drawn_from(path) == digest:
            if progress:
                progress(f"t-SNE map {i}/{len(panels)} ({path.name}): unchanged, kept")
            continue
        if progress:
            progress(f"t-SNE map {i}/{len(panels)} ({path.name}): computing (the slowest step)")
        _draw_tsne(setting, items, path, digest, max_points, write)
    return out


def _load_panel(npz: Path, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    from narbench.core import safeio

    safeio.check_zip(npz, "embeddings", stored_only=False)  # a zip bomb is refused before numpy inflates it
    with np.load(npz, allow_pickle=False) as z:
        emb, family = z["embeddings"].astype(np.float32), z["family"].astype(str)
    if len(emb) > max_points:
        idx = np.sort(np.random.default_rng(0).choice(len(emb), max_points, replace=False))
        emb, family = emb[idx], family[idx]
    return emb, family


def _tsne(emb: np.ndarray) -> np.ndarray:
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    perplexity = float(min(30.0, max(2.0, (len(emb) - 1) / 3)))
    with threadpool_limits(limits=1):  # summation order, hence the result, must not depend on the cores
        return TSNE(n_components=2, perplexity=perplexity, init="random", random_state=0, n_jobs=1).fit_transform(emb)


def _draw_tsne(setting, items, path: Path, digest: str, max_points: int, write: Writer = atomic_write_bytes) -> None:
    from matplotlib.figure import Figure

    loaded = [(label, seed, *_load_panel(npz, max_points)) for label, seed, npz in items]
    counts: dict[str, int] = {}
    for *_, family in loaded:
        for f, c in zip(*np.unique(family, return_counts=True)):
            counts[str(f)] = counts.get(str(f), 0) + int(c)
    top = sorted(counts, key=lambda f: (-counts[f], f))[:TSNE_FAMILIES]
    with _style():
        fig = Figure(figsize=(4.2 * len(loaded) + 1.5, 4.6))
        axes = fig.subplots(1, len(loaded), squeeze=False)[0]
        for ax, (label, seed, emb, family) in zip(axes, loaded):
            xy = _tsne(emb)
            rest = ~np.isin(family, top)
            ax.scatter(xy[rest, 0], xy[rest, 1], s=3, color=_GREY, linewidths=0,
                       label=f"other ({len(counts) - len(top)} families)" if len(counts) > len(top) else None)
            for j, fam in enumerate(top):
                sel = family == fam
                ax.scatter(xy[sel, 0], xy[sel, 1], s=4, color=_COLOURS[j], label=fam, alpha=0.85, linewidths=0)
            ax.set_title(f"{label}, seed {seed}", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[-1].legend(fontsize=7, markerscale=3, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
        fig.suptitle(f"t-SNE of query embeddings · {' · '.join(setting)}\ncoloured by family (the relevance label): "
                     f"the {len(top)} largest of the {len(counts)} families of these queries, the rest grey", fontsize=9)
        fig.subplots_adjust(top=0.82)
        _save(fig, path, digest, write)
