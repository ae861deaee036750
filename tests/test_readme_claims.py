"""The README's claims agree with the committed results: its headline table and findings are what
`narbench leaderboard` writes from them, and every checkable sentence ("ranks first", "significantly
above", a score after its method) of the README and docs/search.md holds in the tables it cites."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/search.md")

pytestmark = pytest.mark.slow  # reads every committed result and bootstraps every block (about a minute)


@pytest.fixture(scope="module")
def evidence():
    from narbench import leaderboard as lb
    from narbench.leaderboard.subsets import with_subsets

    records = with_subsets(lb.collect([ROOT / "leaderboard" / "results"]))
    return records, lb.build_tables(records)


@pytest.mark.parametrize("doc", DOCS)
def test_every_claim_holds(evidence, doc):
    from narbench.leaderboard.claims import check, find_claims

    text = (ROOT / doc).read_text()
    records, tables = evidence
    if doc == "README.md":
        assert len(find_claims(text)) >= 6  # the findings are there to be checked
    assert check(text, records, tables) == []


def test_readme_headline_and_findings_are_current(evidence):
    from narbench.leaderboard.claims import FINDINGS_END, FINDINGS_START, findings_markdown
    from narbench.leaderboard.headline import END, START, headline_markdown, read_ceiling

    text = (ROOT / "README.md").read_text()
    records, tables = evidence
    headline = text.split(START)[1].split(END)[0].strip()
    assert headline == headline_markdown(tables, read_ceiling(ROOT / "leaderboard" / "ceiling.csv")).strip(), \
        "README's headline is stale: run `narbench leaderboard`"
    findings = text.split(FINDINGS_START)[1].split(FINDINGS_END)[0].strip()
    assert findings == findings_markdown(records, tables).strip(), "README's findings are stale: run `narbench leaderboard`"
