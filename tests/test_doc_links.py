"""Every relative link of the committed Markdown (README, docs, the leaderboard's pages, benchmark
records) names a file or folder that exists: a renamed datasheet or plot must not leave a dead link."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def links(text: str) -> list[str]:
    """The targets of `[text](target)` and `![alt](target)`, parentheses inside a target balanced
    (the leaderboard's plot names hold some), without a `#fragment` or a `"title"`."""
    out, start = [], 0
    while (i := text.find("](", start)) != -1:
        depth, j = 1, i + 2
        while j < len(text) and depth and text[j] != "\n":
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        start = j
        if depth:
            continue
        target = text[i + 2:j - 1].strip()
        if " \"" in target:
            target = target.split(" \"", 1)[0]
        out.append(target.split("#", 1)[0])
    return out


def relative(target: str) -> bool:
    return bool(target) and "://" not in target and not target.startswith(("mailto:", "<"))


def markdown_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True)
    names = listed.stdout.split() if listed.returncode == 0 else []
    return [ROOT / n for n in names] or sorted(ROOT.glob("*.md")) + sorted((ROOT / "docs").glob("*.md"))


def test_the_link_reader_balances_parentheses():
    text = "see [a](docs/a.md#x), ![p](plots/t-real 2.2 (115e)-x.png) and [w](https://e.org) [t](b.md \"T\")"
    assert links(text) == ["docs/a.md", "plots/t-real 2.2 (115e)-x.png", "https://e.org", "b.md"]


def test_every_relative_link_exists():
    dead = []
    for md in markdown_files():
        for target in links(md.read_text(encoding="utf-8")):
            if relative(target) and not (md.parent / target).exists():
                dead.append(f"{md.relative_to(ROOT)}: {target}")
    assert dead == []


def test_every_benchmark_script_is_listed_in_the_benchmarks_readme():
    """benchmarks/README.md names every script (and grid) under benchmarks/, records of past runs aside."""
    readme = (ROOT / "benchmarks" / "README.md").read_text()
    scripts = [p for p in (ROOT / "benchmarks").rglob("*") if p.suffix in (".py", ".sh", ".toml")
               and p.name != "__init__.py" and "results" not in p.relative_to(ROOT / "benchmarks").parts
               and "__pycache__" not in p.parts]
    assert scripts, "no benchmark script found"
    assert [str(p.relative_to(ROOT)) for p in scripts if p.name not in readme] == []
