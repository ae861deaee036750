"""Figures: NDCG bar charts per setting and t-SNE maps of saved query embeddings."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from narbench.leaderboard.records import ANY_PROTOCOL, DEFAULT_OBJECTIVE, KEYS, SCRATCH, Key, Record, select_runs
from narbench.leaderboard.tables import _by_setting, _method_label


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "narbench", "path.simplify": True})
    return plt


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None}, bbox_inches="tight")


def plot_ndcg(df, out_dir: str | Path) -> list[Path]:
    """One bar chart per setting: NDCG@20/50/100 per row, std error bars."""
    plt = _plt()
    out = []
    stats = {Key(*(r[k] for k in KEYS)): r for r in df.to_dict(orient="records")}
    for setting, rows in sorted(_by_setting(stats, lambda k: (_row_label(k), None)).items()):
        rows = sorted(rows, key=lambda r: r.key)
        labels = [r.label for r in rows]
        x = np.arange(len(labels))
        fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(labels) + 2), 4.2))
        width = 0.27
        for i, k in enumerate((20, 50, 100)):
            means = np.array([stats[r.key][f"ndcg@{k} mean"] for r in rows], dtype=float)
            stds = np.array([stats[r.key][f"ndcg@{k} std"] for r in rows], dtype=float)  # NaN (one seed): no bar
            ax.bar(x + (i - 1) * width, means, width, yerr=stds, capsize=2, label=f"NDCG@{k}")
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylim(0, 1.12)
        ax.set_ylabel("NDCG (mean ± std over seeds)")
        ax.set_title(" · ".join(setting))
        ax.legend(fontsize=8, loc="upper center", ncol=3, frameon=False)
        ax.grid(axis="y", alpha=0.3)
        path = Path(out_dir) / f"ndcg-{'-'.join(setting)}.png"
        _save(fig, path)
        plt.close(fig)
        out.append(path)
    return out


def _row_label(key: Key) -> str:
    label = _method_label(key)
    if key.protocol != ANY_PROTOCOL and key.objective != DEFAULT_OBJECTIVE:
        label += f" ({key.objective})"
    if key.init != SCRATCH:
        label += f" [{key.init}]"
    return label


TSNE_MAX_POINTS = 1500


def plot_tsne(records: list[Record], out_dir: str | Path, *, max_points: int = TSNE_MAX_POINTS) -> list[Path]:
    """t-SNE maps of saved query embeddings, coloured by coarse label (the class on nas).

    One figure per dataset / profile / device kind with a panel for each of gcn, gat and
    ours+motif (default objective, from scratch) that has an `.embeddings.npz`; the lowest seed.
    """
    from sklearn.manifold import TSNE

    plt = _plt()
    wanted = {("gcn", "none"): "gcn", ("gat", "none"): "gat", ("ours", "motif"): "ours+motif"}
    panels: dict[tuple[str, ...], list[tuple[str, Path]]] = {}
    for key, by_seed in select_runs(records).items():
        name = wanted.get((key.encoder, key.splitter))
        if name is None or key.objective != DEFAULT_OBJECTIVE or key.init != SCRATCH:
            continue
        for seed in sorted(by_seed):
            if by_seed[seed].embeddings.is_file():
                panels.setdefault(key.setting, []).append((name, by_seed[seed].embeddings))
                break
    out = []
    order = {"gcn": 0, "gat": 1, "ours+motif": 2}
    for setting, items in sorted(panels.items()):
        items.sort(key=lambda it: order[it[0]])
        fig, axes = plt.subplots(1, len(items), figsize=(4.2 * len(items), 4.2), squeeze=False)
        for ax, (name, path) in zip(axes[0], items):
            with np.load(path) as z:
                emb, coarse = z["embeddings"].astype(np.float32), z["coarse"].astype(str)
            if len(emb) > max_points:
                idx = np.sort(np.random.default_rng(0).choice(len(emb), max_points, replace=False))
                emb, coarse = emb[idx], coarse[idx]
            perplexity = float(min(30.0, max(2.0, (len(emb) - 1) / 3)))
            xy = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=0).fit_transform(emb)
            cmap = plt.get_cmap("tab10" if len(set(coarse)) <= 10 else "tab20")
            for i, lab in enumerate(sorted(set(coarse))):
                sel = coarse == lab
                ax.scatter(xy[sel, 0], xy[sel, 1], s=4, color=cmap(i % cmap.N), label=lab, alpha=0.8, linewidths=0)
            ax.set_title(name)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[0][-1].legend(fontsize=7, markerscale=3, loc="center left", bbox_to_anchor=(1.0, 0.5))
        fig.suptitle(f"t-SNE of query embeddings: {' · '.join(setting)}")
        path = Path(out_dir) / f"tsne-{'-'.join(setting)}.png"
        _save(fig, path)
        plt.close(fig)
        out.append(path)
    return out
