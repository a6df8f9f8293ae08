// The fleet heatmap: one row per cluster, one cell per pool, coloured by the worst severity
// of its findings ("ok": none; "notCompared": none, and the pool was not compared -- defined
// twice, a name not known; no cell: the cluster has no such pool). Built once per data
// change into a fragment (one layout); a click on a cell opens the pool (a normal link).
import { el, navLink } from "./dom.js";

export function renderHeatmap(grid, filter) {
  const box = el("div", null, "heatmap");
  box.id = "heatmap";
  box.style.gridTemplateColumns = `minmax(10em, 16em) repeat(${grid.pools.length}, minmax(1.4em, 3em))`;
  const frag = document.createDocumentFragment();
  frag.append(el("div", "cluster \\ pool", "hm-corner"));
  for (const pool of grid.pools) frag.append(el("div", pool, "hm-pool"));
  const text = (filter.q || "").toLowerCase();
  const min = filter.sevRank;
  let shown = 0;
  // the clusters in trouble first (worst severity, then name): what an SRE looks for
  const rows = grid.rows.slice().sort((a, b) => rank(b.worst) - rank(a.worst) || (a.cluster < b.cluster ? -1 : 1));
  for (const row of rows) {
    if (text && !row.cluster.toLowerCase().includes(text)) continue;
    if (min > 0 && rank(row.worst) < min) continue;
    shown += 1;
    frag.append(navLink(row.cluster, { view: "clusters", q: row.cluster }, `hm-cluster sev-${row.worst}`));
    row.cells.forEach((cell, i) => {
      if (cell === null) { frag.append(el("span", null, "cell none")); return; }
      const [worst, count] = cell;
      const pool = grid.pools[i];
      const a = navLink(count ? String(count) : "", { view: "pool", cluster: row.cluster, pool }, `cell sev-${worst}`);
      a.title = `${row.cluster} / ${pool}: ${worst}${count ? ` (${count} findings)` : ""}`;
      a.dataset.cluster = row.cluster;
      a.dataset.pool = pool;
      frag.append(a);
    });
  }
  box.append(frag);
  box.dataset.rows = String(shown);
  return box;
}

const RANK = { ok: -1, info: 0, low: 1, medium: 2, high: 3, critical: 4 };
export function rank(sev) { return RANK[sev] ?? -1; }

export function legend() {
  const box = el("div", null, "legend");
  for (const s of ["notCompared", "ok", "info", "low", "medium", "high", "critical"]) {
    box.append(el("span", s === "notCompared" ? "not compared" : s, `cell sev-${s}`));
  }
  return box;
}
