// DOM helpers: every value from the API goes on the page as text (textContent), never HTML.
export const SEVERITIES = ["info", "low", "medium", "high", "critical"];

export function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

export function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

export function show(value) {
  if (value === null || value === undefined) return "—";
  if (Array.isArray(value)) return value.map(show).join(", ") || "[]";
  if (typeof value === "object") return Object.entries(value).map(([k, v]) => `${k}=${show(v)}`).join(" ");
  return String(value);
}

export function badge(text, cls) {
  return el("span", text, `badge ${cls || ""}`.trim());
}

// A link that moves within the page (the router intercepts clicks on a[data-nav]).
export function navLink(text, params, cls) {
  const a = el("a", text, cls);
  a.href = `?${new URLSearchParams(params)}`;
  a.dataset.nav = "1";
  return a;
}

export function table(headers, rows, id) {
  const t = el("table");
  if (id) t.id = id;
  const head = el("tr");
  for (const h of headers) head.append(el("th", h));
  t.createTHead().append(head);
  const body = t.createTBody();
  if (!rows.length) {
    const tr = el("tr", null, "empty");
    const td = el("td", "none");
    td.colSpan = headers.length;
    tr.append(td);
    body.append(tr);
  }
  for (const cells of rows) {
    const tr = el("tr");
    for (const c of cells) {
      if (c instanceof Node) { const td = el("td"); td.append(c); tr.append(td); }
      else if (Array.isArray(c)) tr.append(el("td", show(c[0]), c[1]));
      else tr.append(el("td", show(c)));
    }
    body.append(tr);
  }
  return t;
}

export function ago(iso, now = Date.now()) {
  if (!iso) return "—";
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 90) return `${s}s ago`;
  if (s < 5400) return `${Math.round(s / 60)}m ago`;
  if (s < 172800) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

export function seconds(value) {
  if (value === null || value === undefined) return "—";
  if (value < 90) return `${value.toFixed(1)} s`;
  if (value < 5400) return `${(value / 60).toFixed(1)} min`;
  return `${(value / 3600).toFixed(1)} h`;
}
