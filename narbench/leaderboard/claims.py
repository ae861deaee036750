"""Claims of prose checked against the leaderboard: what a README says about rankings must be true.

The README's prose says which method ranks first, which are significantly apart and what each
scores. Those sentences are written in a small fixed phrasing, with method labels exactly as the
tables print them and a setting, both in backticks, so they can be checked mechanically:

- "`gps` ranks first on `real unseen`": the highest NDCG@20 mean of that setting's Table 1 block among the rows that can rank (training-free, or trained with at least two seeds);
- "`A` is significantly above `B` on `S`" / "`A` is significantly below `B` on `S`": the means are
  so ordered and the leaderboard's test (`significance.DEFAULT_TEST`) gives p < `ALPHA`;
- "`A` and `B` are not significantly apart on `S`": that test gives p >= `ALPHA`;
- a number in parentheses right after a label, "`gps` (0.788)", in a sentence naming one setting:
  that row's NDCG@20 mean rounded to the number's digits.

`check(text, records)` returns every contradiction (empty: the prose agrees with the tables);
`findings_markdown` writes such sentences from the tables (the leaderboard's generated findings). A
sentence naming a label or setting the tables lack is a contradiction too: prose must not cite
numbers that are not there. A label is a row's label as the tables print it, or its method as the
headline names it (`headline.display_labels`: `graf-lda` for the one graf-lda row of a declared
Table 1). `unchecked(text)` lists the sentences that speak of results (a score, a rank, a count of
a whole, "best", "significantly") outside that phrasing and outside generated blocks: prose the
check cannot verify, which `audit` reports beside the contradictions. Settings are `<dataset> <split>` as in the headline (`real unseen`,
`real crossimpl/reimpl`, `nas standard`, `real standard`), Table 1, protocol `family`, the profile
the headline uses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from narbench.leaderboard.headline import (COLUMNS, METRIC, PROTOCOL, _blocks, display_labels, headline_blocks,
                                          replace_between)
from narbench.leaderboard.records import Key, Record, select_runs
from narbench.leaderboard.significance import ALPHA, Bootstrap, seed_matrix
from narbench.leaderboard.tables import Block, LeaderTable, Row
from narbench.data.store import atomic_write_bytes

_LABEL = r"`([^`]+)`"
_SETTING = r"`((?:nas|real)[^`]*)`"
_NOTE = r"(?: \([^)]*\))?"  # "`gps` (0.788) ranks first": a parenthesis may follow a label
_ONE = r"`[^`]+`" + _NOTE
_LIST = r"(" + _ONE + r"(?:(?:, and |, | and )" + _ONE + r")*)"  # "`a` (0.1), `b` and `c`"
#: kind -> (pattern, how its groups map to (subjects, objects)); lists expand to one claim per pair
PATTERNS = {
    "first": re.compile(_LABEL + _NOTE + r" ranks first on " + _SETTING),
    "above": re.compile(_LABEL + _NOTE + r" is significantly above " + _LIST + r" on " + _SETTING),
    "below": re.compile(_LABEL + _NOTE + r" is significantly below " + _LIST + r" on " + _SETTING),
    "above*": re.compile(_LIST + r" are significantly above " + _LABEL + _NOTE + r" on " + _SETTING),
    "below*": re.compile(_LIST + r" are significantly below " + _LABEL + _NOTE + r" on " + _SETTING),
    "apart": re.compile(_LABEL + _NOTE + r" and " + _LABEL + _NOTE + r" are not significantly apart on " + _SETTING),
    "apart*": re.compile(_LABEL + _NOTE + r" is not significantly apart from " + _LIST + r" on " + _SETTING),
}
_NUMBER = re.compile(_LABEL + r" \((\d\.\d+)")
_ANY_SETTING = re.compile(_SETTING)


@dataclass(frozen=True)
class Claim:
    kind: str  # first, above, below, apart, score
    labels: tuple[str, ...]
    setting: str
    sentence: str
    value: str = ""  # the number a `score` claim cites


def sentences(text: str) -> list[str]:
    """The text's sentences (Markdown line breaks joined; code blocks, tables and HTML comments left out)."""
    keep, fenced = [], False
    text = re.sub(r"<!--.*?-->", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.DOTALL)
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.lstrip().startswith("|"):
            keep.append("")
            continue
        keep.append(line)
    out = []
    for para in "\n".join(keep).split("\n\n"):
        out += [s.strip() for s in re.split(r"(?<=[.;:])\s+(?=[A-Z`(])", " ".join(para.split())) if s.strip()]
    return out


def find_claims(text: str) -> list[Claim]:
    """Every checkable claim of `text`."""
    claims = []
    for sentence in sentences(text):
        for kind, pattern in PATTERNS.items():
            for m in pattern.finditer(sentence):
                claims += _expand(kind, m.groups(), sentence)
        settings = set(_ANY_SETTING.findall(sentence))
        if len(settings) == 1:
            (setting,) = settings
            for m in _NUMBER.finditer(sentence):
                claims.append(Claim("score", (m.group(1),), setting, sentence, m.group(2)))
    return claims


def _labels(group: str) -> list[str]:
    return re.findall(r"`([^`]+)`", group)


def _expand(kind: str, groups: tuple[str, ...], sentence: str) -> list[Claim]:
    """One claim per pair a pattern states: `above`/`below`/`apart` of (subject, object)."""
    *parts, setting = groups
    if kind == "first":
        return [Claim("first", (parts[0],), setting, sentence)]
    if kind == "apart":
        return [Claim("apart", (parts[0], parts[1]), setting, sentence)]
    if kind == "apart*":
        return [Claim("apart", (parts[0], b), setting, sentence) for b in _labels(parts[1])]
    if kind in ("above", "below"):
        return [Claim(kind, (parts[0], b), setting, sentence) for b in _labels(parts[1])]
    # "`b`, `c` are significantly above `a`": each of the list is above (below) `a`
    return [Claim(kind[:-1], (b, parts[1]), setting, sentence) for b in _labels(parts[0])]


class Evidence:
    """The Table 1 blocks of the headline's settings, and the runs behind their rows."""

    def __init__(self, records: list[Record], tables: list[LeaderTable]):
        self.profile, self.blocks = _headline_blocks(tables)
        self.runs: dict[Key, dict[int, Record]] = select_runs(records)
        self.boot = Bootstrap()

    def block(self, setting: str) -> Block | None:
        return self.blocks.get(setting)

    def row(self, setting: str, label: str) -> Row | None:
        """The row of `label` in the setting's block: by its label, else by the name the headline gives it."""
        block = self.blocks.get(setting)
        if block is None:
            return None
        names = display_labels(block.rows)
        return next((r for r in block.rows if r.label == label), None) or \
            next((r for r in block.rows if names[r.key] == label), None)

    def name(self, row: Row, setting: str) -> str:
        """What the generated sentences call `row`: the headline's name for it."""
        block = self.blocks.get(setting)
        return display_labels(block.rows).get(row.key, row.label) if block else row.label

    def p(self, a: Row, b: Row) -> float:
        """The leaderboard test's p of rows `a` and `b` on METRIC (1 when either lacks per-query scores)."""
        ma, mb = seed_matrix(self.runs.get(a.key, {}), METRIC), seed_matrix(self.runs.get(b.key, {}), METRIC)
        if ma is None or mb is None or ma.shape[1] != mb.shape[1]:
            return 1.0
        return self.boot.test(ma, mb, str(a.key), str(b.key))


def _headline_blocks(tables: list[LeaderTable]) -> tuple[str, dict[str, Block]]:
    """The headline's profile and blocks (`headline.headline_blocks`, one rule), named `<dataset> <split>`."""
    chosen = headline_blocks(tables)
    profile, blocks = chosen if chosen is not None else ("quick", _blocks(tables, "quick"))
    every = {f"{ds} {split}": b for (ds, split), b in blocks.items()}
    return profile, every


def check(text: str, records: list[Record], tables: list[LeaderTable]) -> list[str]:
    """Every claim of `text` the tables contradict, as `"<sentence>": <why>` lines."""
    ev = Evidence(records, tables)
    problems = []
    for c in find_claims(text):
        why = _verdict(c, ev)
        if why:
            problems.append(f"{c.sentence!r}: {why}")
    return problems


#: words and figures that speak of results: a score, a count of a whole ("798 of 799"), a rank, "best",
#: "significantly", a count of rows ("two cross-source ones"), a label placed above or below another
SIGNALS = re.compile(
    r"(?<![\w.])[01]?\.\d{2,}(?![\w.])"
    r"|\b\d[\d,]* of (?:its |the |their )?\d[\d,]*\b"
    r"|\bbest\b(?!-)"
    r"|\b(?:rank(?:s|ed|ing)?|leads?|leading|second|third|significant(?:ly)?|outperform\w*|beats?|wins?)\b(?!-)"
    r"|\b(?:two|three|four|five|six|seven|eight|nine|ten) (?:[\w-]+ )?(?:ones|rows|variants|methods)\b"
    r"|\b(?:above|below) [`(]", re.IGNORECASE)
#: a block `narbench leaderboard` writes (`<!-- narbench:NAME:start -->` ... `<!-- narbench:NAME:end -->`)
GENERATED = re.compile(r"<!-- narbench:([\w-]+):start -->.*?<!-- narbench:\1:end -->", re.DOTALL)


def unchecked(text: str) -> list[str]:
    """The sentences of `text` outside generated blocks that speak of results (`SIGNALS`) in words the
    check does not read: what is left of a sentence once its checkable claims are taken out."""
    out = []
    for sentence in sentences(GENERATED.sub("\n\n", text)):
        rest = sentence
        for pattern in (*PATTERNS.values(), _NUMBER):
            rest = pattern.sub(" ", rest)
        hit = SIGNALS.search(rest)
        if hit:
            out.append(f"{sentence!r}: speaks of results ({hit.group(0)!r}) in words the claims check cannot "
                       "read: say it in the checked phrasing (narbench.leaderboard.claims) or leave it to the "
                       "leaderboard")
    return out


def audit(text: str, records: list[Record], tables: list[LeaderTable]) -> list[str]:
    """`check`'s contradictions and `unchecked`'s sentences: empty when every result the text states holds
    and is stated so that it can be checked."""
    return check(text, records, tables) + unchecked(text)


def _verdict(c: Claim, ev: Evidence) -> str | None:
    block = ev.block(c.setting)
    if block is None:
        return f"no Table 1 block `{c.setting}` (protocol {PROTOCOL}, profile {ev.profile})"
    rows = [ev.row(c.setting, label) for label in c.labels]
    for label, row in zip(c.labels, rows):
        if row is None or math.isnan(row.mean[METRIC]):
            return f"no row `{label}` on `{c.setting}`"
    mean = [r.mean[METRIC] for r in rows]
    if c.kind == "score":
        digits = len(c.value.split(".")[1])
        shown = f"{mean[0]:.{digits}f}"
        return None if shown == c.value else f"`{c.labels[0]}` scores {shown} on `{c.setting}`, not {c.value}"
    if c.kind == "first":
        ranked = _ranked(block)
        best = ranked[0] if ranked else rows[0]
        return None if mean[0] >= best.mean[METRIC] else f"`{best.label}` ranks first ({best.mean[METRIC]:.3f})"
    p = ev.p(rows[0], rows[1])
    if c.kind == "apart":
        return None if p >= ALPHA else f"they are significantly apart (p = {p:.3g})"
    above = c.kind == "above"
    if (mean[0] > mean[1]) != above:
        return f"`{c.labels[0]}` ({mean[0]:.3f}) is {'below' if above else 'above'} `{c.labels[1]}` ({mean[1]:.3f})"
    return None if p < ALPHA else f"not significant (p = {p:.3g} >= {ALPHA})"


# ----------------------------------------------------------------------------- generated findings


def _versus(ev: Evidence, a: Row, b: Row, setting: str) -> str:
    """`a` against `b` in the checkable phrasing: significantly above, below, or not apart."""
    sa, sb = (f"`{ev.name(r, setting)}` ({r.mean[METRIC]:.3f})" for r in (a, b))
    if ev.p(a, b) >= ALPHA:
        return f"{sa} and {sb} are not significantly apart on `{setting}`"
    return f"{sa} is significantly {'above' if a.mean[METRIC] > b.mean[METRIC] else 'below'} {sb} on `{setting}`"


def _paper_claim(ev: Evidence, rows: list[Row], setting: str) -> str:
    """The paper's claim (its method, `ours+motif`, above GCN) on this setting, and what the improved
    variant `ours-ft` changes: against GCN and against `ours`. '' when the rows are missing."""
    def pick(encoder: str, splitter: str) -> Row | None:
        return next((r for r in rows if r.key.encoder == encoder and r.key.splitter == splitter), None)

    ours, ft, gcn = pick("ours", "motif"), pick("ours-ft", "motif"), pick("gcn", "none")
    text = ""
    if ours and gcn:
        text += f" The paper's claim, its method above GCN: {_versus(ev, ours, gcn, setting)}."
    if ft and (gcn or ours):
        said = [_versus(ev, ft, other, setting) for other in (gcn, ours) if other]
        text += " With F_s fine-tuned in stage 2: " + "; ".join(said) + "."
    return text


def _join(rows: list[Row], name: Callable[[Row], str], scores: bool = True) -> str:
    """`a` (0.1), `b` (0.2) and `c` (0.3)."""
    items = [f"`{name(r)}`" + (f" ({r.mean[METRIC]:.3f})" if scores else "") for r in rows]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _ranked(block) -> list[Row]:
    """The rows of a block that can rank, best NDCG@20 first: a training-free row, or a trained one with
    at least two seeds (a single seed's variance is unknown). The findings and the check of "ranks
    first" read the same list, so a folder of single-seed runs cannot make them disagree."""
    rows = [r for r in block.rows if not math.isnan(r.mean[METRIC]) and (r.n > 1 or r.key.protocol == "any")]
    return sorted(rows, key=lambda r: -r.mean[METRIC])


def findings_markdown(records: list[Record], tables: list[LeaderTable]) -> str:
    """What separates the methods, per headline setting, in the checkable phrasing (every sentence
    is verified by `check` before it is returned)."""
    ev = Evidence(records, tables)
    lines = []
    for ds, split in COLUMNS:
        setting = f"{ds} {split}"
        block = ev.block(setting)
        rows = _ranked(block) if block else []
        if not rows:
            continue
        best = rows[0]

        def name(r: Row, setting: str = setting) -> str:
            return ev.name(r, setting)

        tied = [r for r in rows[1:] if ev.p(best, r) >= ALPHA]
        text = f"`{name(best)}` ({best.mean[METRIC]:.3f}) ranks first on `{setting}`"
        if tied:
            text += (f"; `{name(best)}` is not significantly apart from " + _join(tied, name) + f" on `{setting}`")
        text += "."
        floors = [r for r in rows if r.key.protocol == "any" and r.key.encoder != "random"]
        trained = [r for r in rows if r.key.protocol != "any"]
        if floors and trained:
            top = floors[0]
            above = [r for r in trained if r.mean[METRIC] > top.mean[METRIC] and ev.p(r, top) < ALPHA]
            below = [r for r in trained if r.mean[METRIC] < top.mean[METRIC] and ev.p(r, top) < ALPHA]
            level = [r for r in trained if r not in above and r not in below]
            said = []
            if above:
                said.append(_join(above, name, scores=False) + (" are" if len(above) > 1 else " is")
                            + f" significantly above `{name(top)}` on `{setting}`")
            if below:
                said.append(_join(below, name, scores=False) + (" are" if len(below) > 1 else " is")
                            + f" significantly below `{name(top)}` on `{setting}`")
            if level:
                said.append(f"`{name(top)}` is not significantly apart from " + _join(level, name, scores=False)
                            + f" on `{setting}`")
            text += (f" The best training-free row is `{name(top)}` ({top.mean[METRIC]:.3f}) on `{setting}`: "
                     + "; ".join(said) + ".")
        text += _paper_claim(ev, rows, setting)
        lines.append(f"- {text}")
    body = "\n".join(lines)
    problems = check(body, records, tables)
    if problems:  # the generator and the checker disagree: a bug, never published
        raise AssertionError("generated findings fail their own check: " + "; ".join(problems))
    return body


FINDINGS_START, FINDINGS_END = "<!-- narbench:findings:start -->", "<!-- narbench:findings:end -->"


def update_findings(path, records: list[Record], tables: list[LeaderTable], *, text: str | None = None,
                    write: Callable[[Path, bytes], None] = atomic_write_bytes) -> bool | None:
    """Rewrite the findings between the findings markers of `path` (None: the file has none; True: changed).

    `text` is the file's text (default: read from it), `write` how it is written (default atomically).
    """
    text = Path(path).read_text() if text is None else text
    if text.count(FINDINGS_START) != 1 or text.count(FINDINGS_END) != 1:
        return None
    return replace_between(path, text, FINDINGS_START, FINDINGS_END, findings_markdown(records, tables), write)
