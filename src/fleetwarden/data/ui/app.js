// fleetwarden dashboard: one page, views chosen by the query string (?view=fleet&sev=high...:
// a URL can be shared, the back button works). Data comes from the JSON API once per view,
// then the page follows /api/stream (server-sent events) and reloads what a message touches:
// no polling. Every value is put on the page as text; the CSP forbids inline script and style.
import { el, SEVERITIES } from "./dom.js";
import { get, logout, follow } from "./api.js";
import * as views from "./views.js";
import { renderTimeline } from "./charts.js";
import { renderDecisions } from "./decisions.js";

const VIEWS = ["incidents", "fleet", "findings", "decisions", "timeline", "clusters", "apps"];
const ctx = { adminToken: "", unfolded: new Set(), reload: () => schedule(0) };
let timer = null;
let generation = 0;
let last = null; // the view and data drawn last (filters redraw from it)

function params() {
  const q = new URLSearchParams(window.location.search);
  const view = q.get("view") === "pool" || VIEWS.includes(q.get("view")) ? q.get("view") : "incidents";
  const sev = SEVERITIES.includes(q.get("sev")) ? q.get("sev") : "info";
  return {
    view, sev, sevRank: SEVERITIES.indexOf(sev),
    q: q.get("q") || "", cluster: q.get("cluster") || "", pool: q.get("pool") || "",
    app: q.get("app") || "", minutes: /^\d+$/.test(q.get("minutes") || "") ? q.get("minutes") : "60",
  };
}

function setParams(changes, push) {
  const q = new URLSearchParams(window.location.search);
  for (const [k, v] of Object.entries(changes)) {
    if (v === "" || v === null || v === undefined || (k === "sev" && v === "info")) q.delete(k);
    else q.set(k, v);
  }
  const url = `${window.location.pathname}?${q}`;
  if (push) window.history.pushState(null, "", url);
  else window.history.replaceState(null, "", url);
  const p = params();
  // a filter of the view shown: drawn again at once from what was loaded; else load
  if (last && last.view === p.view && Object.keys(changes).every((k) => k === "q" || k === "sev")) {
    render(p, last.data);
  } else {
    schedule(0);
  }
}

async function load(p) {
  const base = [get("/api/clusters"), get("/api/findings")];
  const pick = {
    incidents: () => get("/api/incidents"),
    fleet: () => get("/api/fleet/grid"),
    findings: () => null,
    pool: () => get(`/api/pools/${encodeURIComponent(p.cluster)}/${encodeURIComponent(p.pool)}`),
    decisions: () => get(`/api/decisions?limit=100${p.cluster ? `&cluster=${encodeURIComponent(p.cluster)}` : ""}`),
    timeline: () => get(`/api/timeline?minutes=${encodeURIComponent(p.minutes)}`),
    clusters: () => null,
    apps: async () => {
      const apps = (await get("/api/fleet/apps")).apps;
      const app = p.app || (apps[0] && apps[0].app);
      return { apps, app, versions: app ? await get(`/api/fleet/versions?app=${encodeURIComponent(app)}`) : null };
    },
  }[p.view];
  const [clusters, findings, data] = await Promise.all([...base, pick()]);
  return { clusters, findings, data };
}

function render(p, { clusters, findings, data }) {
  const main = document.getElementById("view");
  const body = {
    incidents: () => views.incidentsView(data),
    fleet: () => views.fleetView(data, p),
    findings: () => views.findingsView(findings, p),
    pool: () => views.poolView(data),
    decisions: () => renderDecisions(data, ctx),
    timeline: () => renderTimeline(data, p.minutes),
    clusters: () => views.clustersView(clusters, p),
    apps: () => views.appsView(data.apps, data.versions, data.app, (app) => setParams({ app }, true)),
  }[p.view]();
  const title = el("h2", p.view === "pool" ? "Pool" : p.view[0].toUpperCase() + p.view.slice(1));
  title.id = "view-title";
  const focused = document.activeElement && main.contains(document.activeElement) ? document.activeElement.id : "";
  main.replaceChildren(views.summary(clusters, findings), title, body);
  if (focused) document.getElementById(focused)?.focus(); // e.g. typing the admin token
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("on", a.dataset.view === p.view);
  document.getElementById("filter").value = p.q;
  document.getElementById("severity").value = p.sev;
  document.body.dataset.view = p.view;
}

async function refresh() {
  const mine = ++generation;
  const status = document.getElementById("status");
  const p = params();
  try {
    const data = await load(p);
    if (mine !== generation) return; // a newer view or message superseded this load
    render(p, data);
    last = { view: p.view, data };
    if (document.body.dataset.loaded !== "true") {
      requestAnimationFrame(() => { performance.mark("fw-painted"); document.body.dataset.painted = "true"; });
    }
    document.body.dataset.loaded = "true";
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    status.textContent = `error: ${err.message}`;
  }
}

function schedule(delay) {
  clearTimeout(timer);
  timer = setTimeout(refresh, delay);
}

function onMessage(kind, data) {
  const live = document.getElementById("live");
  live.dataset.last = kind;
  if (kind === "dropped" || kind === "reload") { schedule(0); return; }
  document.body.dataset.lastFinding = kind === "finding" ? data.id : document.body.dataset.lastFinding || "";
  schedule(120); // a burst of messages: one reload
}

function onState(state) {
  const live = document.getElementById("live");
  live.textContent = state === "open" ? "● live" : `○ ${state}`;
  live.className = `live-${state}`;
  document.body.dataset.live = state;
}

document.addEventListener("DOMContentLoaded", () => {
  const nav = document.querySelector("nav");
  for (const v of VIEWS) {
    const a = el("a", v);
    a.href = `?view=${v}`;
    a.dataset.nav = "1";
    a.dataset.view = v;
    nav.append(a);
  }
  document.addEventListener("click", (ev) => {
    const a = ev.target.closest("a[data-nav]");
    if (!a || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
    ev.preventDefault();
    const q = new URLSearchParams(a.search);
    const keep = params();
    const next = Object.fromEntries(q);
    // moving to another view keeps the severity filter; the text filter belongs to a view
    setParams({ view: "", q: "", cluster: "", pool: "", app: "", minutes: "", sev: keep.sev, ...next }, true);
  });
  document.getElementById("filter").addEventListener("input", (ev) => setParams({ q: ev.target.value }, false));
  document.getElementById("severity").addEventListener("change", (ev) => setParams({ sev: ev.target.value }, true));
  document.getElementById("logout").addEventListener("click", logout);
  window.addEventListener("popstate", () => { last = null; schedule(0); });
  follow(onMessage, onState);
  refresh();
});
