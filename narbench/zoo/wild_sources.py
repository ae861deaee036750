"""Where an outside set's GitHub code comes from: `narbench/data/<set>-<version>-sources.txt`.

A set's rows may come from public GitHub repositories rather than pip packages (`wildval19` on). The code is
never committed here; each line of the sources file pins one repository, `FOLDER OWNER/NAME COMMIT`, and the
rows of that repository import `FOLDER.module` (their `package` column is `FOLDER`, their `version` the commit).
`materialise` checks each repository out at its commit under `DIR/FOLDER`, so `PYTHONPATH=DIR` builds the rows
as a pip `--target` folder does for package rows (`python -m narbench.cli.wild_sources --set S --into DIR`).
Reading the shipped graphs needs none of it.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Callable

#: how a sources line's repository is cloned (a local mirror may be given instead: `{owner}`, `{name}`)
ORIGIN = "https://github.com/{repo}.git"
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*/[A-Za-z0-9._-]+$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
#: what a checkout holds: the Python code and the license, not the weights or data some repositories carry
CHECKOUT = ("*.py", "/LICENSE*", "/COPYING*")


@dataclass(frozen=True)
class Source:
    """One repository of a set, pinned: rows import `folder.<module>` from it at `commit`."""

    folder: str
    repo: str
    commit: str

    @property
    def provenance_prefix(self) -> str:
        """How a row's provenance from this repository starts."""
        return f"github {self.repo}@{self.commit}; "


def folder_name(repo: str) -> str:
    """The import folder of `owner/name`: `gh_owner_name`, lower-cased, other characters as `_`."""
    return "gh_" + re.sub(r"[^a-z0-9_]", "_", repo.lower().replace("/", "_"))


def read_sources(path: Path | str) -> list[Source]:
    """The sources file's repositories; ValueError naming the file and line of a bad or repeated entry."""
    out: list[Source] = []
    seen: set[str] = set()
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        where = f"{Path(path).name}:{number}"
        if len(parts) != 3:
            raise ValueError(f"{where}: a line is `FOLDER OWNER/NAME COMMIT`, got {line.strip()!r}")
        folder, repo, commit = parts
        if not _REPO.match(repo):
            raise ValueError(f"{where}: {repo!r} is not OWNER/NAME")
        if not _COMMIT.match(commit):
            raise ValueError(f"{where}: {commit!r} is not a 40-digit commit")
        if folder != folder_name(repo):
            raise ValueError(f"{where}: the folder of {repo} is {folder_name(repo)!r}, not {folder!r}")
        if folder in seen:
            raise ValueError(f"{where}: {repo} is listed twice")
        seen.add(folder)
        out.append(Source(folder, repo, commit))
    return out


def sources_of(name: str, version: str) -> list[Source]:
    """The shipped sources of set `name` at `version`; [] for a set of pip packages only."""
    path = resources.files("narbench.data") / f"{name}-{version}-sources.txt"
    return read_sources(Path(str(path))) if path.is_file() else []


def _git(*args: str, run: Callable = subprocess.run) -> str:
    try:
        done = run(["git", *args], capture_output=True, text=True)
    except OSError as exc:  # no git on this machine
        raise RuntimeError(f"git {args[0]}: cannot run git ({exc}); install git") from None
    if done.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {(done.stderr or done.stdout).strip()[:300]}")
    return done.stdout.strip()


def checkout_commit(folder: Path) -> str | None:
    """The commit a git checkout at `folder` has out (None if it is no checkout's top)."""
    if not (folder / ".git").exists():
        return None
    try:
        return _git("-C", str(folder), "rev-parse", "HEAD")
    except RuntimeError:  # `_git`'s every failure, no git on the machine included
        return None


def materialise(sources: list[Source], into: Path, origin: str = ORIGIN,
                progress: Callable[[str], None] | None = None) -> list[Path]:
    """Each repository at its commit under `into/FOLDER`, its Python files and license only (`CHECKOUT`), cloned from
    `origin`; one already there at the commit is kept, one at another commit is refused, not overwritten."""
    into.mkdir(parents=True, exist_ok=True)
    done = []
    for s in sources:
        target = into / s.folder
        if target.exists():
            head = checkout_commit(target) or "not a checkout"
            if head != s.commit:
                raise RuntimeError(f"{target} holds {head}, not {s.repo}@{s.commit}: remove it or pick another folder")
        else:
            owner, name = s.repo.split("/")
            _git("clone", "--quiet", "--no-checkout", origin.format(repo=s.repo, owner=owner, name=name), str(target))
            _git("-C", str(target), "sparse-checkout", "set", "--no-cone", *CHECKOUT)
            _git("-C", str(target), "-c", "advice.detachedHead=false", "checkout", "--quiet", s.commit)
        if progress:
            progress(f"{s.repo}@{s.commit[:12]} -> {target}")
        done.append(target)
    return done
