// fleetwarden dashboard: read-only views over serve's JSON API, refreshed every few seconds.
// Every value from the API is put on the page as text (textContent), never as HTML: a label
// value or a cluster name can hold anything, and the page's CSP forbids inline scripts too.
"use strict";

const SEVERITIES = ["info", "low", "medium", "high", "critical"];
const REFRESH_MS = 5000;
const state = { findings: [], app: null };

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function show(value) {
  if (value === null || value === undefined) return "—";
  if (Array.isArray(value)) return value.join(", ") || "[]";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

function fill(table, rows, columns) {
  const body = table.tBodies[0];
  body.replaceChildren();
  if (!rows.length) {
    const tr = el("tr", null, "empty");
    const td = el("td", "none");
    td.colSpan = table.tHead.rows[0].cells.length;
    tr.append(td);
    body.append(tr);
    return;
  }
  for (const row of rows) {
    const tr = el("tr");
    for (const [value, cls] of columns(row)) tr.append(el("td", show(value), cls));
    body.append(tr);
  }
}

// Same-origin fetches carry the HttpOnly session cookie the login form set; when it has
// expired (or the token was rotated) the API answers 401 and the page goes back to the form.
async function get(path) {
  const resp = await fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin" });
  if (resp.status === 401) {
    window.location.assign("/ui/login");
    throw new Error("logged out");
  }
  if (!resp.ok) throw new Error(`${path}: HTTP ${resp.status}`);
  return resp.json();
}

async function logout() {
  await fetch("/ui/logout", { method: "POST", credentials: "same-origin" });
  window.location.assign("/ui/login");
}

function renderSummary(clusters, findings) {
  const counts = Object.fromEntries(SEVERITIES.map((s) => [s, 0]));
  for (const f of findings) counts[f.severity] = (counts[f.severity] || 0) + 1;
  const cards = [
    ["clusters", clusters.length],
    ["unhealthy", clusters.filter((c) => c.health && c.health !== "Healthy").length],
    ["findings", findings.length],
    ...SEVERITIES.slice().reverse().map((s) => [s, counts[s]]),
  ];
  const box = document.getElementById("summary");
  box.replaceChildren(
    ...cards.map(([name, n]) => {
      const card = el("div", null, "card");
      card.dataset.name = name;
      card.append(el("b", n), el("span", name));
      return card;
    }),
  );
}

function renderFindings() {
  const text = document.getElementById("filter").value.trim().toLowerCase();
  const min = SEVERITIES.indexOf(document.getElementById("severity").value);
  const rows = state.findings.filter((f) => {
    if (SEVERITIES.indexOf(f.severity) < min) return false;
    if (!text) return true;
    return [f.cluster, f.pool, f.field, f.layer].some((v) => String(v ?? "").toLowerCase().includes(text));
  });
  fill(document.getElementById("findings"), rows, (f) => [
    [f.severity, `sev-${f.severity}`],
    [f.cluster],
    [f.pool],
    [f.layer],
    [f.field],
    [f.expected],
    [f.actual],
    // who: the live finding's actor (managedFields, refined by a late cloud event), else the
    // workload's field manager, else the change event it was attributed to
    [f.actor ? f.actor.name : f.changedBy ? f.changedBy.manager : (f.cause && f.cause.actor) || null],
  ]);
}

async function renderApps(apps) {
  const select = document.getElementById("app");
  const names = apps.map((a) => a.app);
  if (select.options.length !== names.length || names.some((n, i) => select.options[i].value !== n)) {
    select.replaceChildren(...names.map((n) => { const o = el("option", n); o.value = n; return o; }));
  }
  state.app = select.value || null;
  const table = document.getElementById("versions");
  if (!state.app) { fill(table, [], () => []); return; }
  const doc = await get(`/api/fleet/versions?app=${encodeURIComponent(state.app)}`);
  fill(table, doc.rows, (r) => [
    [r.cluster],
    [`${r.kind}/${r.namespace}/${r.workload}`],
    [r.container],
    [r.image, r.drift ? "drift" : (r.divergesFromPeers ? "peer" : "")],
    [r.drift ? r.desiredImage : "="],
    [r.divergesFromPeers ? r.peerImage : "="],
  ]);
}

async function refresh() {
  const status = document.getElementById("status");
  try {
    const [clusters, findings, apps, decisions] = await Promise.all([
      get("/api/clusters"), get("/api/findings"), get("/api/fleet/apps"), get("/api/decisions"),
    ]);
    state.findings = findings;
    renderSummary(clusters, findings);
    fill(document.getElementById("clusters"), clusters, (c) => [
      [c.cluster], [c.health, `h-${c.health}`], [c.version], [c.nodes], [c.workloadObjects],
      [c.findings], [c.source],
    ]);
    renderFindings();
    await renderApps(apps.apps);
    fill(document.getElementById("decisions"), decisions.slice(0, 50), (d) => [
      [d.at], [d.status], [d.action], [d.target ? JSON.stringify(d.target) : null], [d.reasons],
    ]);
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    document.body.dataset.loaded = "true";
  } catch (err) {
    status.textContent = `error: ${err.message}`;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("filter").addEventListener("input", renderFindings);
  document.getElementById("severity").addEventListener("change", renderFindings);
  document.getElementById("app").addEventListener("change", refresh);
  document.getElementById("logout").addEventListener("click", logout);
  refresh();
  setInterval(refresh, REFRESH_MS);
});
