"""narbench explorer: the leaderboard and search as a web page (`narbench explore`), served locally or exported.

- `views`: the leaderboard's table blocks as data (`load_views`), read from result folders with the
  same code as `narbench leaderboard`, and one view as CSV.
- `app`: the web app (Starlette, served by uvicorn) over those views, bound to 127.0.0.1 by default.
- `access`: who may use it (a per-launch token, the Host, the request's origin) and the security
  headers of every answer; `limits`: what one request may cost (body size and time, the search
  queue); `jobs`: the search queue, on a thread of its own so that the page never waits on a search.
- `searching`: search for the page (`narbench.search_engine`): hits of a target, and the query beside a hit;
  which targets a server may search (code and server paths only when started with --allow-code / --allow-paths).
- `compare`: why two graphs are alike, for drawing: repeated blocks folded (the motif splitter's
  segments), nodes whose neighbourhood occurs in the other graph marked, ops the other lacks marked.
- `export`: a static copy of the page, its data and charts for any web host.
- `static/`: the page (HTML, script, style; `vendor/`: cytoscape.js with its dagre layout), the same
  for the server and the export.

Needs the `explorer` extra (starlette, uvicorn).

May import: narbench.data, narbench.eval, narbench.splitters, narbench.leaderboard, narbench.search_engine.
"""

from narbench.explorer.views import FORMAT, View, load_views, view_csv, views_from_tables

__all__ = ["FORMAT", "View", "load_views", "view_csv", "views_from_tables"]
