"""A static export of the explorer's leaderboard: the page, its data and charts, servable from any web host.

The page reads `views.json` and `plots/<name>` by relative paths, so the folder written here works
from a plain file server (GitHub Pages, `python -m http.server`) with nothing running behind it;
CSV and JSON downloads are made in the browser from what is shown. Search needs the server
(`narbench explore`): the exported page says so on its search tab.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from narbench.explorer.app import STATIC, ExplorerError

#: what an export writes at its top level (anything else in the folder is left alone)
WRITES = ("index.html", "views.json", "static", "plots")


def export_static(payload: dict[str, Any], out_dir: str | Path, plot_dir: str | Path | None = None) -> Path:
    """Write the page, `views.json` and the charts the views name into `out_dir`; returns its index.html.

    Raises ExplorerError when `out_dir` is a file. Files of an earlier export are replaced;
    other files in the folder are kept."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ExplorerError(f"static export: {out} is a file, not a folder")
    try:
        return _write(payload, out, plot_dir)
    except OSError as exc:  # a read-only folder, a full disk: one line naming the folder
        raise ExplorerError(f"static export: cannot write into {out} ({exc.strerror or type(exc).__name__}); "
                            "choose a folder you can write") from None


def _write(payload: dict[str, Any], out: Path, plot_dir: str | Path | None) -> Path:
    from narbench.data.store import atomic_write_bytes

    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(STATIC, out / "static", dirs_exist_ok=True, ignore=shutil.ignore_patterns("index.html", "__pycache__"))
    names = sorted({v["plot"] for v in payload["views"] if v.get("plot")}) if plot_dir is not None else []
    if names:
        (out / "plots").mkdir(exist_ok=True)
        for name in names:
            shutil.copyfile(Path(plot_dir) / name, out / "plots" / name)
    else:  # a view names a chart only when it was copied: keep the payload consistent with the folder
        payload = {**payload, "views": [{**v, "plot": None} for v in payload["views"]]}
    atomic_write_bytes(out / "views.json", json.dumps(payload, separators=(",", ":"), allow_nan=False).encode())
    atomic_write_bytes(out / "index.html", (STATIC / "index.html").read_bytes())
    return out / "index.html"
