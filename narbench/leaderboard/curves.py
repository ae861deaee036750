"""Learning curves: per encoder and setting, validation and test NDCG@20 at every epoch, over seeds.

Reads the result files of `narbench run --curve` runs (`config.learning_curve`, written by
`narbench.harness.curve`) and writes `curves.md` (a table per dataset and split: each encoder's
mean NDCG@20 at the profile's epoch budget and at the last epoch, the epoch where its mean
validation NDCG@20 peaks, and whether the encoders' order at the budget is their order at the last
epoch, on validation and on test) and one figure per setting (`plots/curves-<dataset>-<split>.png`,
validation and test panels, mean over seeds with the seeds' range shaded). A summary table at the
top says, per setting, whether the registered encoders' order at the budget holds at the last epoch,
and whether a change is beyond seed noise (a paired t-test over seeds, Holm-adjusted over every
reversal tested on that side: `family`); a variant (parameters, another splitter) is compared with
its base on validation instead of entering that order.

    python -m narbench.cli.curves leaderboard/curves --out leaderboard

Only validation may choose (an epoch budget, a variant); the test columns are reported beside it.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from narbench.data.store import atomic_write_bytes
from narbench.eval.olddefaults import encoder_variant
from narbench.eval.result import RunResult
from narbench.leaderboard.records import DEFAULT_OBJECTIVE, SCRATCH, Key
from narbench.leaderboard.tables import row_label
from narbench.train.profiles import PROFILES

METRIC = "ndcg@20"
SIDES = ("validation", "test")


@dataclass
class Curve:
    """One encoder's curves in one setting: per seed, the metric per epoch on each side."""

    dataset: str
    split: str
    profile: str
    method: str
    seeds: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    budget: int = 0  # the profile's graph-level epochs (what the leaderboard's rows train)
    #: the method this curve is a variant of (the encoder with its default splitter and no parameters,
    #: same hold-out); '' for an encoder as registered. Variants are chosen against their base; the
    #: ranking verdict is about the registered encoders only.
    base: str = ""
    #: the device each seed ran on (`RunResult.device`: cpu, or cuda with the card's name) -> its seeds
    devices: dict[str, set[int]] = field(default_factory=dict)

    def matrix(self, side: str) -> np.ndarray:
        """[seeds, epochs] of `side`, cut to the epochs every seed has."""
        rows = [self.seeds[s][side] for s in sorted(self.seeds)]
        n = min(len(r) for r in rows)
        return np.array([r[:n] for r in rows], dtype=float)

    def mean(self, side: str) -> np.ndarray:
        return self.matrix(side).mean(axis=0)


def method_label(result: RunResult) -> str:
    """The leaderboard's row label of the run's encoder, splitter and encoder parameters
    (`tables.row_label`; the curve's own epochs and hold-out are what every curve shares)."""
    variant = encoder_variant(result)
    return row_label(Key("", "", "", "", str(result.protocol), result.encoder, result.splitter or "none",
                         DEFAULT_OBJECTIVE, SCRATCH, variant))


def base_label(result: RunResult) -> str:
    """The label of the registered configuration `result` varies ('' when it is one): the same encoder
    with its default splitter and no parameters. An encoder that is not installed has no base."""
    from narbench.core import registry

    variant = encoder_variant(result)
    try:
        default = registry.load("encoder", result.encoder).default_splitter
    except Exception:  # noqa: BLE001 - an uninstalled plugin's curves are still shown, as registered
        return ""
    if not variant and (result.splitter or "none") == default:
        return ""
    return row_label(Key("", "", "", "", str(result.protocol), result.encoder, default, DEFAULT_OBJECTIVE, SCRATCH, ""))


def load_curves(folder: str | Path) -> list[Curve]:
    """Every curve run under `folder` (recursively), grouped by setting and method; others are skipped.

    Runs on several versions of one dataset (`real` 2.1 and 2.2) are never grouped together: the
    dataset is then labelled with its version (`real 2.2`)."""
    curves: dict[tuple, Curve] = {}
    runs = []
    for path in sorted(Path(folder).rglob("*.json")):
        if path.name.endswith(".queries.json") or ".sweep" in path.parts:
            continue
        try:
            result = RunResult.read(path)
        except (ValueError, OSError):
            continue
        lc = (result.config or {}).get("learning_curve")
        if lc:
            runs.append((result, lc))
    versions: dict[str, set[str]] = defaultdict(set)
    for result, _ in runs:
        versions[str((result.dataset or {}).get("name", "?"))].add(str((result.dataset or {}).get("version", "?")))
    for result, lc in runs:
        dataset = str((result.dataset or {}).get("name", "?"))
        if len(versions[dataset]) > 1:
            dataset += f" {(result.dataset or {}).get('version', '?')}"
        holdout = f" (holdout {lc['holdout']})" if lc.get("holdout") else ""
        key = (dataset, str(result.split), result.profile, method_label(result) + holdout)
        base = base_label(result)
        curve = curves.setdefault(key, Curve(*key, base=base + holdout if base else ""))
        profile = PROFILES.get(result.profile)
        curve.budget = profile.train.epochs if profile else 0
        curve.seeds[int(result.seed)] = {side: [float(e[side][METRIC]) for e in lc["epochs"]] for side in SIDES}
        curve.devices.setdefault(str(result.device or "?"), set()).add(int(result.seed))
    return [curves[k] for k in sorted(curves)]


def _order(curves: list[Curve], side: str, epoch: int) -> list[str]:
    """Methods by mean `side` NDCG@20 at `epoch` (1-based), best first."""
    return [c.method for c in sorted(curves, key=lambda c: (-c.mean(side)[epoch - 1], c.method))]


def _paired(a: Curve, b: Curve, side: str, epoch: int) -> tuple[float, float | None]:
    """(mean of a - b over their common seeds, two-sided p of a paired t-test over those seeds, None
    below 2 seeds or with no spread) at `epoch` (1-based): a seed's curves share its validation split."""
    from scipy.stats import ttest_rel

    common = sorted(set(a.seeds) & set(b.seeds))
    x = np.array([a.seeds[s][side][epoch - 1] for s in common])
    y = np.array([b.seeds[s][side][epoch - 1] for s in common])
    diff = float((x - y).mean()) if common else float("nan")
    if len(common) < 2 or not np.ptp(x - y) > 0:
        return diff, None
    return diff, float(ttest_rel(x, y).pvalue)


def _fmt_p(p: float | None) -> str:
    """A p-value as the page prints it: two decimals, `p < 0.01` below them, `p n/a` untested."""
    return "p n/a" if p is None else "p < 0.01" if p < 0.005 else f"p {p:.2f}"


UNTESTED = "untested (fewer than 2 seeds with a spread)"
BEYOND, WITHIN = "beyond seed noise", "within seed noise"


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment of `pvalues` (same order): an adjusted p below alpha keeps the
    chance of any false flag in the family below alpha (Holm 1979; statsmodels' `holm`)."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    out, running = [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        out[i] = running
    return out


#: Holm-adjusted p of each tested reversal of one side: {(dataset, split, profile): {(a, b): p}}
Family = dict[tuple[str, str, str], dict[tuple[str, str], float]]


def _reversals(group: list[Curve], side: str, budget: int, last: int, alpha: float,
               adjusted: dict[tuple[str, str], float] | None = None):
    """(a, b, d_budget, p_budget, d_last, p_last, p_adjusted, judgement) per pair whose order of means at
    `budget` (a above b) is reversed at `last`; judgement: UNTESTED, BEYOND (p < alpha at `last`, or its
    Holm-adjusted p when `adjusted` has one) or WITHIN."""
    rank = {m: i for i, m in enumerate(_order(group, side, budget))}
    by = {c.method: c for c in group}
    out = []
    for a, b in itertools.combinations(sorted(by, key=rank.get), 2):  # a above b at the budget
        d_last, p_last = _paired(by[a], by[b], side, last)
        if not d_last < 0:
            continue
        d_budget, p_budget = _paired(by[a], by[b], side, budget)
        p_adj = None if adjusted is None or p_last is None else adjusted.get((a, b), p_last)
        p_judged = p_last if p_adj is None else p_adj
        judgement = UNTESTED if p_last is None else BEYOND if p_judged < alpha else WITHIN
        out.append((a, b, d_budget, p_budget, d_last, p_last, p_adj, judgement))
    return out


def judged(curves: list[Curve]) -> dict[tuple[str, str, str], tuple[list[Curve], int, int]]:
    """The settings whose ranking the rule judges: setting -> (its encoders as registered, the budget,
    the last epoch), where at least two registered encoders have curves beyond the budget."""
    out = {}
    for setting, group in settings(curves).items():
        registered = [c for c in group if not c.base]
        last, budget = _epochs(group)
        if len(registered) > 1 and last != budget:
            out[setting] = (registered, budget, last)
    return out


def family(curves: list[Curve], side: str, alpha: float = 0.05) -> Family:
    """The rule's family on `side`: every reversal with a p-value, over every setting the summary judges
    (the registered encoders, at least two, curves beyond the budget), Holm-adjusted together."""
    tests = [(setting, r[0], r[1], r[5]) for setting, (registered, budget, last) in judged(curves).items()
             for r in _reversals(registered, side, budget, last, alpha) if r[5] is not None]
    out: Family = defaultdict(dict)
    for (setting, a, b, _), p in zip(tests, holm([t[3] for t in tests])):
        out[setting][(a, b)] = p
    return dict(out)


def swaps(group: list[Curve], side: str, budget: int, last: int, alpha: float = 0.05,
          adjusted: dict[tuple[str, str], float] | None = None, tested: int = 0) -> list[str]:
    """One phrase per pair whose order of means at `budget` is reversed at `last`: the differences
    and paired p at both epochs, the Holm-adjusted p over the `tested` reversals of the family when
    `adjusted` is given, and whether the reversal is beyond seed noise (untested below 2 seeds)."""
    def adj(p_adj):
        plural = "s" * (tested != 1)
        return "" if p_adj is None else f"; Holm-adjusted over the {tested} reversal{plural} tested, {_fmt_p(p_adj)}"

    return [f"{a} over {b} at {budget} ({d_budget:+.3f}, {_fmt_p(p_budget)}) reverses at {last} "
            f"({d_last:+.3f}, {_fmt_p(p_last)}{adj(p_adj)}): {judgement}"
            for a, b, d_budget, p_budget, d_last, p_last, p_adj, judgement
            in _reversals(group, side, budget, last, alpha, adjusted)]


def verdict(group: list[Curve], side: str, budget: int, last: int, alpha: float = 0.05,
            adjusted: dict[tuple[str, str], float] | None = None) -> str:
    """Whether the order of `group` at `budget` is its order at `last` on `side`: `holds`, `changes
    within seed noise` (every reversed pair's difference at `last` has p >= alpha, Holm-adjusted when
    `adjusted` is given), `changes beyond seed noise`, or `changes, untested` (a reversed pair with
    fewer than 2 seeds)."""
    if _order(group, side, budget) == _order(group, side, last):
        return "holds"
    judgements = {r[-1] for r in _reversals(group, side, budget, last, alpha, adjusted)}
    if BEYOND in judgements:
        return "changes beyond seed noise"
    if UNTESTED in judgements:
        return "changes, untested"
    return "changes within seed noise"


def variant_lines(group: list[Curve], budget: int, last: int) -> list[str]:
    """Each variant against its base on validation (what chooses) at `budget` and `last`, paired over seeds."""
    by = {c.method: c for c in group}
    lines = []
    for c in sorted(group, key=lambda c: c.method):
        if not c.base or c.base not in by:
            continue
        parts = []
        for epoch in dict.fromkeys((budget, last)):
            d, p = _paired(c, by[c.base], "validation", epoch)
            parts.append(f"{d:+.3f} at {epoch} ({_fmt_p(p)})")
        lines.append(f"- {c.method} against {c.base}, validation: {', '.join(parts)}; "
                     f"seeds in common: {len(set(c.seeds) & set(by[c.base].seeds))}.")
    return lines


def _epochs(group: list[Curve]) -> tuple[int, int]:
    """(last epoch every curve of `group` has, the profile's budget cut to it)."""
    last = min(c.matrix("test").shape[1] for c in group)
    return last, min(max(c.budget for c in group), last)


def settings(curves: list[Curve]) -> dict[tuple[str, str, str], list[Curve]]:
    out: dict[tuple[str, str, str], list[Curve]] = defaultdict(list)
    for c in curves:
        out[(c.dataset, c.split, c.profile)].append(c)
    return dict(out)


def markdown(curves: list[Curve], plots: dict[tuple[str, str, str], str] | None = None) -> str:
    """The curves page: one table per setting and the ranking verdicts."""
    lines = ["# Learning curves", "",
             "Generated by `python -m narbench.cli.curves` from `narbench run --curve` results "
             "(`leaderboard/curves.toml`): each run trains on its training graphs less a validation split "
             "(10%, stratified by family) and records NDCG@20 after every graph-level epoch, on the held-out "
             "graphs querying the rest (validation) and on the split's queries (test). Mean ± sample std "
             "over seeds; n is the number of seeds. Only validation may choose a budget or a variant.", ""]
    judge = judged(curves)
    families = {side: family(curves, side) for side in SIDES}
    tested = {side: sum(len(v) for v in families[side].values()) for side in SIDES}
    watched = sum(len(r) * (len(r) - 1) // 2 for r, _, _ in judge.values())  # pairs of registered encoders
    summary = []
    for (dataset, split, profile), (registered, budget, last) in judge.items():
        cells = [verdict(registered, side, budget, last, adjusted=families[side].get((dataset, split, profile), {}))
                 for side in SIDES]
        summary.append(f"| {dataset} / {split} | {budget} -> {last} | {len(registered)} | "
                       f"{min(len(c.seeds) for c in registered)} | {cells[0]} | {cells[1]} |")
    if summary:
        lines += ["## Does the ranking at the profile's budget hold at the last epoch?", "",
                  "The encoders as registered (variants are compared with their base below each table). "
                  "A reversal is beyond seed noise when the paired t-test over seeds at the last epoch gives "
                  "p < 0.05 after Holm's adjustment over every reversal tested on that side in this table "
                  f"(validation: {tested['validation']}, test: {tested['test']}): with {watched} pairs of "
                  "encoders under watch on each side, an unadjusted p < 0.05 somewhere is to be expected by "
                  "chance. Each reversal below its setting's table gives both p-values.", "",
                  "| setting | epochs | encoders | seeds (fewest) | validation | test |",
                  "|---|---|---:|---:|---|---|", *summary, ""]
    for (dataset, split, profile), group in settings(curves).items():
        last, budget = _epochs(group)
        lines += [f"## {dataset} / {split} ({profile}, epochs 1-{last})", ""]
        if plots and (dataset, split, profile) in plots:
            lines += [f"![learning curves, {dataset} {split}]({plots[(dataset, split, profile)]})", ""]
        if last == budget:  # curves of the budget itself: one column per side, no order to compare
            lines += [f"| encoder | n | val @{budget} | best val epoch | test @{budget} |", "|---|---:|---:|---:|---:|"]
        else:
            lines += [f"| encoder | n | val @{budget} | val @{last} | best val epoch | test @{budget} | test @{last} |",
                      "|---|---:|---:|---:|---:|---:|---:|"]
        for c in sorted(group, key=lambda c: -c.mean("validation")[last - 1]):
            val, test = c.matrix("validation")[:, :last], c.matrix("test")[:, :last]

            def cell(m: np.ndarray, e: int) -> str:
                col = m[:, e - 1]
                return f"{col.mean():.3f} ± {col.std(ddof=1):.3f}" if len(col) > 1 else f"{col.mean():.3f}"

            best = int(np.argmax(val.mean(axis=0))) + 1
            if last == budget:
                lines.append(f"| {c.method} | {len(c.seeds)} | {cell(val, budget)} | {best} | {cell(test, budget)} |")
            else:
                lines.append(f"| {c.method} | {len(c.seeds)} | {cell(val, budget)} | {cell(val, last)} | "
                             f"{best} | {cell(test, budget)} | {cell(test, last)} |")
        lines.append("")
        if (dataset, split, profile) in judge:
            registered = judge[(dataset, split, profile)][0]
            if len(registered) < len(group):
                lines.append("The encoders as registered:")
            for side in SIDES:
                at_budget, at_last = _order(registered, side, budget), _order(registered, side, last)
                holds = "holds" if at_budget == at_last else "changes"
                lines.append(f"- {side}: the order at epoch {budget} ({' > '.join(at_budget)}) {holds} at epoch "
                             f"{last}" + ("" if at_budget == at_last else f" ({' > '.join(at_last)})") + ".")
                if at_budget != at_last:
                    adjusted = families[side].get((dataset, split, profile), {})
                    lines += [f"  - {phrase}." for phrase
                              in swaps(registered, side, budget, last, adjusted=adjusted, tested=tested[side])]
            lines.append("")
        usual = Counter(d for c in group for d, seeds in c.devices.items() for _ in seeds).most_common(1)
        others = [c for c in sorted(group, key=lambda c: c.method) if usual and set(c.devices) != {usual[0][0]}]
        if others:  # a setting's curves from several kinds of machine: say which ran where
            lines += [f"Devices: every curve on {usual[0][0]} but " + "; ".join(
                _where(c) for c in others) + ".", ""]
        variants = variant_lines(group, budget, last)
        if variants:
            lines += ["Variants against their base (validation chooses):", *variants, ""]
    return "\n".join(lines).rstrip() + "\n"


def _where(curve: Curve) -> str:
    """Where a curve's seeds ran: 'gps on cuda (H100)', or per device when its seeds ran on several."""
    if len(curve.devices) == 1:
        return f"{curve.method} on {next(iter(curve.devices))}"
    return f"{curve.method}: " + ", ".join(
        f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, sorted(seeds)))} on {device}"
        for device, seeds in sorted(curve.devices.items(), key=lambda kv: min(kv[1])))


def plot(group: list[Curve], title: str) -> bytes:
    """Validation and test panels: mean NDCG@20 per epoch, the seeds' range shaded (PNG bytes)."""
    import io

    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    for ax, side in zip(fig.subplots(1, 2), SIDES):
        for c in sorted(group, key=lambda c: c.method):
            m = c.matrix(side)
            x = np.arange(1, m.shape[1] + 1)
            line, = ax.plot(x, m.mean(axis=0), marker=".", label=f"{c.method} (n={m.shape[0]})")
            if m.shape[0] > 1:
                ax.fill_between(x, m.min(axis=0), m.max(axis=0), color=line.get_color(), alpha=0.15)
        if group and group[0].budget:
            ax.axvline(group[0].budget, color="grey", linestyle=":", linewidth=1)
        ax.set_title(f"{title}: {side}")
        ax.set_xlabel("epoch")
        ax.set_ylabel("NDCG@20")
        ax.grid(alpha=0.3)
    fig.axes[1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return buf.getvalue()


def write_curves(folder: str | Path, out: str | Path) -> Path:
    """Write `<out>/curves.md` and `<out>/plots/curves-*.png` from the curve runs under `folder`."""
    curves = load_curves(folder)
    if not curves:
        raise FileNotFoundError(f"no learning-curve result (narbench run --curve) under {folder}")
    out = Path(out)
    plots = {}
    for (dataset, split, profile), group in settings(curves).items():
        name = f"plots/curves-{dataset.replace(' ', '-')}-{split}-{profile}.png"
        atomic_write_bytes(out / name, plot(group, f"{dataset} {split}"))
        plots[(dataset, split, profile)] = name
    page = out / "curves.md"
    atomic_write_bytes(page, markdown(curves, plots).encode())
    return page

