// narbench explorer: the leaderboard's views (views.json) as sortable, filterable tables.
// Served by `narbench explore` or from a static export; reads only relative paths.
"use strict";

const METRIC_SETS = {
  headline: ["ndcg@20", "mrr@20", "map_capped@20"],
  ndcg: ["ndcg@20", "ndcg@50", "ndcg@100"],
  all: null, // the view's own twelve columns
};
const state = { payload: null, view: null, sort: { key: null, dir: -1 }, filter: "", metrics: "headline" };

function $(id) { return document.getElementById(id); }

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = false;
}

function settingLabel(v) {
  const s = v.setting;
  return `${s.dataset} · ${s.split} · ${s.profile} · ${s.device} · protocol ${s.protocol}`;
}

function columns() { return METRIC_SETS[state.metrics] || state.view.columns; }

function fmt(x) { return x === null || x === undefined ? "–" : x.toFixed(4); }

function shownRows() {
  const needle = state.filter.trim().toLowerCase();
  const rows = state.view.rows.filter(r => !needle || r.label.toLowerCase().includes(needle));
  const key = state.sort.key;
  if (key === null) return rows;
  const value = r => (key === "label" ? r.label : key === "n" ? r.n : r.mean[key]);
  return rows.slice().sort((a, b) => {
    const x = value(a), y = value(b);
    if (x === null || x === undefined) return 1; // missing values last, whichever the direction
    if (y === null || y === undefined) return -1;
    if (typeof x === "string") return state.sort.dir * x.localeCompare(y);
    return state.sort.dir * (x - y);
  });
}

function cell(tag, text, attrs) {
  const el = document.createElement(tag);
  el.textContent = text;
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  return el;
}

function render() {
  const v = state.view, cols = columns();
  $("view-title").textContent = `Table ${v.table}: ${v.title} — ${settingLabel(v)}`;
  const head = document.createElement("tr");
  for (const [key, text] of [["label", "method"], ["n", "n"], ...cols.map(m => [m, v.headers[m]])]) {
    const th = cell("th", text, { "data-key": key, scope: "col" });
    if (state.sort.key === key) th.setAttribute("aria-sort", state.sort.dir > 0 ? "ascending" : "descending");
    th.addEventListener("click", () => {
      state.sort = { key, dir: state.sort.key === key ? -state.sort.dir : (key === "label" ? 1 : -1) };
      render();
    });
    head.appendChild(th);
  }
  $("view-table").tHead.replaceChildren(head);
  const body = [];
  for (const r of shownRows()) {
    const tr = document.createElement("tr");
    tr.dataset.label = r.label;
    tr.append(cell("td", r.label), cell("td", r.n === 1 ? "1*" : String(r.n)));
    for (const m of cols) {
      const mean = r.mean[m], std = r.std[m];
      let text = fmt(mean);
      if (mean !== null && std !== null) text += `±${fmt(std)}`;
      if (mean !== null && r.marks[m]) text += r.marks[m];
      const td = cell("td", text, { "data-metric": m });
      if (r.bold.includes(m)) td.classList.add("best");
      if (r.ci[m] && r.ci[m][0] !== null) td.appendChild(cell("small", `[${r.ci[m][0].toFixed(3)}, ${r.ci[m][1].toFixed(3)}]`));
      tr.appendChild(td);
    }
    body.push(tr);
  }
  $("view-table").tBodies[0].replaceChildren(...body);
  const foot = v.paper.map(p => {
    const tr = document.createElement("tr");
    tr.append(cell("td", `paper (their data): ${p.label}`), cell("td", ""));
    for (const m of cols) tr.appendChild(cell("td", p.values[m] === undefined || p.values[m] === null ? "—" : p.values[m].toFixed(3)));
    return tr;
  });
  $("view-table").tFoot.replaceChildren(...foot);
  $("view-notes").replaceChildren(...v.notes.map(n => cell("li", n)));
  const img = $("view-plot");
  img.hidden = !v.plot;
  if (v.plot) { img.src = `plots/${encodeURIComponent(v.plot)}`; img.alt = `bar chart of ${settingLabel(v)}`; }
  if (location.hash !== `#view=${v.id}`) history.replaceState(null, "", `#view=${v.id}`);
}

function fillViews(table) {
  const select = $("view-select");
  const views = state.payload.views.filter(v => String(v.table) === String(table));
  select.replaceChildren(...views.map(v => cell("option", settingLabel(v), { value: v.id })));
  return views;
}

function selectView(id) {
  const v = state.payload.views.find(x => x.id === id);
  if (!v) return false;
  state.view = v;
  $("table-select").value = String(v.table);
  fillViews(v.table);
  $("view-select").value = v.id;
  render();
  return true;
}

function shownData() {
  const v = state.view, cols = columns();
  return {
    view: v.id, setting: v.setting, columns: cols,
    rows: shownRows().map(r => ({
      label: r.label, n: r.n,
      mean: Object.fromEntries(cols.map(m => [m, r.mean[m]])),
      std: Object.fromEntries(cols.map(m => [m, r.std[m]])),
    })),
  };
}

function csvField(x) {
  const s = x === null || x === undefined ? "" : String(x);
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

function download(kind) {
  const data = shownData();
  let text;
  if (kind === "json") {
    text = JSON.stringify(data, null, 1);
  } else {
    const header = ["method", "n", ...data.columns.flatMap(m => [`${m}_mean`, `${m}_std`])];
    const lines = [header, ...data.rows.map(r => [r.label, r.n, ...data.columns.flatMap(m => [r.mean[m], r.std[m]])])];
    text = lines.map(line => line.map(csvField).join(",")).join("\n") + "\n";
  }
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([text], { type: kind === "json" ? "application/json" : "text/csv" }));
  a.download = `${data.view}.${kind}`;
  document.body.appendChild(a);
  a.click();
  a.remove();
}

// ------------------------------------------------------------------ tabs

function showTab(name) {
  $("leaderboard").hidden = name !== "leaderboard";
  $("search").hidden = name !== "search";
  $("tab-leaderboard").classList.toggle("active", name === "leaderboard");
  $("tab-search").classList.toggle("active", name === "search");
}

// ------------------------------------------------------------------ search

const graphs = {}; // the two cytoscape instances of the side-by-side view (tests read them)
window.explorerGraphs = graphs;
let lastQuery = null;

function searchStatus(text, isError) {
  const el = $("search-status");
  el.textContent = text;
  el.classList.toggle("error", !!isError);
}

async function askJson(url, options) {
  let response;
  try {
    response = await fetch(url, options);
  } catch (err) {
    throw new Error(`the explorer's server did not answer (${err})`);
  }
  let body = null;
  try { body = await response.json(); } catch (err) { /* not JSON: said below */ }
  if (!response.ok) throw new Error(body && body.error ? body.error : `HTTP ${response.status}`);
  return body;
}

async function runSearch(event) {
  event.preventDefault();
  const k = $("search-k").value, file = $("search-file").files[0], target = $("search-target").value.trim();
  if (!file && !target) { searchStatus("give a model or graph name, or choose a saved graph file", true); return; }
  searchStatus(file ? `searching with ${file.name}…` : `searching for ${target}… (a model given as code is extracted first: seconds)`);
  $("pair").hidden = true;
  $("search-verdict").hidden = true;
  try {
    const result = file
      ? await askJson(`api/search?k=${k}&filename=${encodeURIComponent(file.name)}`, { method: "POST", body: file })
      : await askJson(`api/search?k=${k}&q=${encodeURIComponent(target)}`, { method: "POST" }); // POST: code may run
    showHits(result);
  } catch (err) {
    $("hits").hidden = true;
    searchStatus(err.message, true);
  }
}

function showHits(result) {
  lastQuery = result;
  const rows = result.hits.map(h => {
    const tr = document.createElement("tr");
    tr.dataset.name = h.name;
    tr.append(cell("td", String(h.rank)), cell("td", h.name), cell("td", (h.families || [h.family]).join(", ")),
              cell("td", h.similarity.toFixed(4) + (h.weak ? " (weak)" : ""), h.weak ? { class: "weak" } : {}),
              cell("td", String(h.num_nodes)));
    tr.addEventListener("click", () => showPair(h.name, tr));
    return tr;
  });
  $("hits").tBodies[0].replaceChildren(...rows);
  $("hits").hidden = !rows.length;
  // the out-of-family score (narbench.search_engine.outside) and the warnings, as `narbench search` prints them
  const notes = [...(result.no_family_fits ? [`no family in the index fits: out-of-family score ` +
                   `${result.out_of_family.toFixed(2)} (the hits below are the nearest designs, not its kind)`] : []),
                 ...result.warnings.map(w => `warning: ${w}`)];
  $("search-verdict").textContent = notes.join("\n");
  $("search-verdict").hidden = !notes.length;
  const dup = result.duplicate_of.length ? ` It is identical to ${result.duplicate_of.join(", ")}.` : "";
  searchStatus(`${result.query}: ${result.num_nodes} nodes, ${result.hits.length} hits in ${result.index}.` +
               ` ${result.why ? "Top hit: " + result.why + "." : ""}${dup} Click a hit to see it beside the query.`);
}

const GRAPH_STYLE = [
  { selector: "node", style: { label: "data(label)", "font-size": 9, "text-valign": "center", "text-halign": "center",
    shape: "round-rectangle", width: ele => Math.max(24, 5.4 * ele.data("label").length + 8), height: 16, padding: "4px", "background-color": "#e3e6ea",
    "border-width": 1, "border-color": "#9aa0a6" } },
  { selector: "node.matched", style: { "background-color": "#9bd69b" } },
  { selector: "node.differs", style: { "border-width": 3, "border-color": "#d62728" } },
  { selector: "node.block", style: { "font-weight": "bold", height: 26, "background-opacity": 0.9 } },
  { selector: "edge", style: { width: 1, "line-color": "#9aa0a6", "target-arrow-color": "#9aa0a6",
    "target-arrow-shape": "triangle", "arrow-scale": 0.6, "curve-style": "bezier" } },
];

function drawGraph(container, side) {
  if (graphs[container]) graphs[container].destroy();
  const elements = [
    ...side.nodes.map(n => ({ data: { id: n.id, label: n.label }, classes: [n.matched ? "matched" : "", n.differs ? "differs" : "", n.block ? "block" : ""].filter(Boolean).join(" ") })),
    ...side.edges.map((e, i) => ({ data: { id: `e${i}`, source: e.source, target: e.target } })),
  ];
  const el = $(container);
  graphs[container] = cytoscape({ container: el, elements, style: GRAPH_STYLE,
    layout: { name: "dagre", rankDir: "TB", nodeSep: 12, rankSep: 18, animate: false } });
  el.dataset.nodes = String(side.nodes.length);
  el.dataset.matched = String(side.nodes.filter(n => n.matched).length);
  el.dataset.differs = String(side.nodes.filter(n => n.differs).length);
  el.dataset.blocks = String(side.blocks);
}

async function showPair(name, row) {
  if (!lastQuery || !lastQuery.query_id) { searchStatus("this search kept no graph to compare: search again", true); return; }
  for (const tr of $("hits").tBodies[0].rows) tr.classList.toggle("chosen", tr === row);
  searchStatus(`drawing ${lastQuery.query} beside ${name}…`);
  try {
    const pair = await askJson(`api/pair?query=${encodeURIComponent(lastQuery.query_id)}&hit=${encodeURIComponent(name)}`);
    $("pair").hidden = false;
    $("pair-title").textContent = `${pair.query.name} beside ${pair.hit.name}`;
    $("pair-why").textContent = pair.why;
    for (const [side, key] of [["query", "pair-query"], ["hit", "pair-hit"]]) {
      const g = pair[side];
      $(`${key}-title`).textContent = `${g.name}${g.family ? ` (${g.family})` : ""}: ${g.num_nodes} ops, ${Math.round(100 * g.matched)}% matched` +
        (g.blocks ? `, ${g.blocks} repeated block${g.blocks > 1 ? "s" : ""} folded` : "");
      drawGraph(key, g);
    }
    searchStatus(`${pair.query.name} beside ${pair.hit.name}`);
  } catch (err) {
    searchStatus(err.message, true);
  }
}

// ------------------------------------------------------------------ start

async function main() {
  const initial = location.hash;
  let response;
  try {
    response = await fetch("views.json");
  } catch (err) {
    showError(`could not load the leaderboard data (views.json): ${err}`);
    return;
  }
  if (response.status === 401) {
    showError("this explorer asks for its token: open the address narbench explore printed (it ends with ?token=...)");
    return;
  }
  if (!response.ok) {
    showError(`could not load the leaderboard data (views.json): HTTP ${response.status}`);
    return;
  }
  state.payload = await response.json();
  $("tab-leaderboard").addEventListener("click", e => { e.preventDefault(); showTab("leaderboard"); if (state.view) render(); });
  $("tab-search").addEventListener("click", e => { e.preventDefault(); showTab("search"); history.replaceState(null, "", "#search"); });
  $("search-form").addEventListener("submit", runSearch);
  const canSearch = !!state.payload.search;
  $("search-off").hidden = canSearch;
  $("search-form").hidden = !canSearch;
  if (!state.payload.views.length) {
    showError("no table to show: the result folders hold no result of a shown profile");
    showTab(initial === "#search" ? "search" : "leaderboard");
    return;
  }
  $("summary").textContent = `${state.payload.results} result files, ${state.payload.views.length} tables`;
  const tables = [...new Map(state.payload.views.map(v => [v.table, v.title])).entries()];
  $("table-select").replaceChildren(...tables.map(([n, title]) => cell("option", `Table ${n}: ${title}`, { value: String(n) })));
  $("table-select").addEventListener("change", e => selectView(fillViews(e.target.value)[0].id));
  $("view-select").addEventListener("change", e => selectView(e.target.value));
  $("method-filter").addEventListener("input", e => { state.filter = e.target.value; render(); });
  $("metric-set").addEventListener("change", e => { state.metrics = e.target.value; render(); });
  $("download-csv").addEventListener("click", () => download("csv"));
  $("download-json").addEventListener("click", () => download("json"));
  const wanted = decodeURIComponent(initial.replace(/^#view=/, ""));
  if (!selectView(wanted)) selectView(state.payload.views[0].id);
  if (initial === "#search") { showTab("search"); history.replaceState(null, "", "#search"); } else showTab("leaderboard");
}

main();
