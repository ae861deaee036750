"""Where the narbench project is: commands whose defaults are paths inside the repository
(`narbench check`'s reference, `narbench explore`'s leaderboard folder) resolve them against the
project root found by walking up from the working folder, so they work from any folder inside it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

#: A pyproject.toml that names this project; the walk stops at the first folder holding one.
PROJECT_NAME = "narbench"


class NotInProject(FileNotFoundError):
    """Raised when no folder from here up holds narbench's pyproject.toml."""


def _is_root(folder: Path) -> bool:
    toml = folder / "pyproject.toml"
    if not toml.is_file():
        return False
    try:
        with toml.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return (data.get("project") or {}).get("name") == PROJECT_NAME


def find_root(start: str | Path | None = None) -> Path:
    """The nearest folder from `start` (default: the working folder) up that holds narbench's
    pyproject.toml. Raises NotInProject, with a one-line message, outside a project checkout."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if _is_root(folder):
            return folder
    raise NotInProject(f"{here} is not inside a narbench checkout (no pyproject.toml naming project "
                       f"{PROJECT_NAME!r} here or above); run from the repository, or give the path explicitly")


def resolve_default(path: str | Path, default: str | Path, start: str | Path | None = None) -> Path:
    """`path` as given when the user gave one (it differs from `default`), else `default` inside the
    project root. Lets `--baseline leaderboard/reference.json` keep meaning the project's file from any
    subfolder while an explicit path is taken as it is."""
    if Path(path) != Path(default):
        return Path(path)
    return find_root(start) / default
