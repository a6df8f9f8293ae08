// The drift timeline: findings opened (up) and cleared (down) per time slice, as an SVG built
// with DOM calls (no markup strings), and MTTD/MTTR per pool as a table.
import { el, svg, table, seconds, navLink } from "./dom.js";

const WINDOWS = [["15 min", "15"], ["1 h", "60"], ["6 h", "360"], ["24 h", "1440"], ["7 d", "10080"]];

export function renderTimeline(doc, minutes) {
  const box = el("section", null, "timeline");
  box.id = "timeline";
  const pick = el("p", "window: ", "windows");
  for (const [label, value] of WINDOWS) {
    pick.append(navLink(label, { view: "timeline", minutes: value }, value === minutes ? "chip on" : "chip"));
  }
  box.append(pick);
  const w = 720, h = 180, mid = h / 2, n = doc.opened.length;
  const peak = Math.max(1, ...doc.opened, ...doc.cleared);
  const bw = w / n;
  const chart = svg("svg", { viewBox: `0 0 ${w} ${h + 20}`, role: "img", class: "chart" });
  const title = svg("title");
  title.textContent = `findings opened and cleared, ${doc.from} to ${doc.to}`;
  chart.append(title, svg("line", { x1: 0, x2: w, y1: mid, y2: mid, class: "axis" }));
  for (let i = 0; i < n; i += 1) {
    const up = (doc.opened[i] / peak) * (mid - 4);
    const down = (doc.cleared[i] / peak) * (mid - 4);
    if (up) chart.append(bar(i * bw + 1, mid - up, bw - 2, up, "opened", doc.opened[i]));
    if (down) chart.append(bar(i * bw + 1, mid, bw - 2, down, "cleared", doc.cleared[i]));
  }
  const from = svg("text", { x: 0, y: h + 16, class: "tick" });
  from.textContent = new Date(doc.from).toLocaleTimeString();
  const to = svg("text", { x: w, y: h + 16, class: "tick end" });
  to.textContent = new Date(doc.to).toLocaleTimeString();
  chart.append(from, to);
  const sum = (xs) => xs.reduce((a, b) => a + b, 0);
  box.append(
    el("p", `${sum(doc.opened)} opened, ${sum(doc.cleared)} cleared (slices of ${seconds(doc.bucketSeconds)})`),
    chart,
    el("h3", "Time to detect and to restore, per pool"),
    table(["pool", "opened", "MTTD", "MTTR"],
      doc.pools.map((p) => [p.pool, p.opened, seconds(p.mttdSeconds), seconds(p.mttrSeconds)]), "mttx"),
  );
  return box;
}

function bar(x, y, width, height, cls, count) {
  const r = svg("rect", { x, y, width: Math.max(1, width), height, class: cls });
  const t = svg("title");
  t.textContent = `${count} ${cls}`;
  r.append(t);
  return r;
}
