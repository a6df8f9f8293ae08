// The views: incidents (first), fleet heatmap, findings, one pool, clusters, timeline,
// decisions, application versions. Each takes the data it shows and the query-string filters
// and returns an element; nothing here fetches.
import { el, table, show, badge, navLink, ago, seconds, SEVERITIES } from "./dom.js";
import { renderHeatmap, legend, rank } from "./heatmap.js";

export function actorOf(f) {
  if (f.actor) return f.actor.name;
  if (f.changedBy) return f.changedBy.manager;
  return (f.cause && f.cause.actor) || null;
}

export function summary(clusters, findings) {
  const counts = Object.fromEntries(SEVERITIES.map((s) => [s, 0]));
  for (const f of findings) counts[f.severity] = (counts[f.severity] || 0) + 1;
  const box = el("div", null, "cards");
  box.id = "summary";
  const cards = [
    ["clusters", clusters.length],
    ["unhealthy", clusters.filter((c) => c.health && c.health !== "Healthy").length],
    ["findings", findings.length],
    ...SEVERITIES.slice().reverse().map((s) => [s, counts[s]]),
  ];
  for (const [name, n] of cards) {
    const card = el("div", null, `card${SEVERITIES.includes(name) && n ? ` sev-${name}` : ""}`);
    card.dataset.name = name;
    card.append(el("b", n), el("span", name));
    box.append(card);
  }
  return box;
}

export function incidentsView(incidents) {
  const list = el("ol", null, "rows");
  list.id = "incidents";
  if (!incidents.length) list.append(el("li", "no open incidents: the fleet matches its desired state", "empty"));
  for (const i of incidents) {
    const li = el("li", null, "incident");
    const head = el("div", null, "row-head");
    head.append(
      el("b", i.rootCause),
      badge(`${i.findings.length} finding(s)`, "count"),
      el("span", i.actor ? `by ${i.actor.name} (${i.actor.kind}, via ${i.actor.via})` : "actor unknown", "who"),
      el("time", i.startedAt ? `started ${ago(i.startedAt)}` : `open ${seconds(i.ageSeconds)}`, "when"),
    );
    const where = el("div", null, "where");
    for (const p of i.pools) {
      const [cluster, pool] = p.split("/");
      where.append(navLink(p, { view: "pool", cluster, pool }, "chip"));
    }
    const why = el("details", null, "reasons");
    why.append(el("summary", "why grouped"));
    for (const r of i.reasons) why.append(el("p", r));
    li.append(head, where, why);
    list.append(li);
  }
  return list;
}

export function fleetView(grid, filter) {
  const box = el("div");
  box.append(legend(), renderHeatmap(grid, filter));
  return box;
}

export function findingsView(findings, filter) {
  const text = (filter.q || "").toLowerCase();
  const rows = findings.filter((f) => {
    if (SEVERITIES.indexOf(f.severity) < filter.sevRank) return false;
    if (filter.cluster && f.cluster !== filter.cluster) return false;
    if (!text) return true;
    return [f.cluster, f.pool, f.field, f.layer].some((v) => String(v ?? "").toLowerCase().includes(text));
  });
  return table(
    ["severity", "cluster", "pool / object", "layer", "field", "expected", "actual", "changed by"],
    rows.map((f) => [
      badge(f.severity, `sev-${f.severity}`), f.cluster,
      f.pool ? navLink(f.pool, { view: "pool", cluster: f.cluster, pool: f.pool }) : "—",
      f.layer, f.field, [f.expected, "val"], [f.actual, "val"], actorOf(f),
    ]),
    "findings",
  );
}

export function poolView(doc) {
  const box = el("div", null, "pool");
  box.id = "pool";
  const head = el("h2", null);
  head.append(el("span", `${doc.cluster} / ${doc.pool} `), badge(doc.worst, `sev-${doc.worst}`));
  box.append(head);
  if (doc.skipped && doc.skipped.length) {  // defined twice, a name not known: as scan says
    box.append(el("h3", "Not compared"));
    for (const s of doc.skipped) box.append(el("p", `${s.path}: ${s.reason}`, "note"));
  } else if (doc.desired) {
    box.append(el("h3", `Desired (${doc.desired.format || "?"}: ${doc.desired.source || "?"})`));
    box.append(table(["fact", "expected", "from"], doc.desired.facts.map((f) => [f.fact, [f.value, "val"], f.from]), "facts"));
  } else {
    box.append(el("p", "no desired state names this pool", "note"));
  }
  box.append(el("h3", "Findings by layer"));
  const layers = Object.entries(doc.layers);
  if (!layers.length) box.append(el("p", "none: the pool matches", "note"));
  for (const [layer, findings] of layers) {
    box.append(el("h4", layer));
    box.append(table(
      ["severity", "field", "expected", "actual", "nodes", "by", "started", "detected", "provenance"],
      findings.map((f) => [
        badge(f.severity, `sev-${f.severity}`), f.field, [f.expected, "val"], [f.actual, "val"],
        f.nodes.length, actorOf(f), ago(f.startedAt), ago(f.detectedAt), f.provenance,
      ]),
    ));
  }
  box.append(el("h3", `Nodes (${doc.nodes.length})`));
  box.append(table(["node", "instance type", "kubelet", "drifting fields"],
    doc.nodes.map((n) => [n.name, n.instanceType, n.kubelet, n.drifting ? [n.drifting, "drift"] : 0]), "nodes"));
  box.append(el("h3", "Timeline"));
  const tl = el("ol", null, "events");
  tl.id = "pool-events";
  if (!doc.events.length) tl.append(el("li", "no finding events since the service started", "empty"));
  for (const e of doc.events) {
    const f = e.finding;
    const li = el("li");
    li.append(el("time", e.at), badge(e.type.replace("finding.", ""), `ev-${e.type.replace("finding.", "")}`),
      el("span", `${f.field}: ${show(f.expected)} → ${show(f.actual)}${actorOf(f) ? ` by ${actorOf(f)}` : ""}`));
    tl.append(li);
  }
  box.append(tl);
  return box;
}

export function clustersView(clusters, filter) {
  const text = (filter.q || "").toLowerCase();
  const rows = clusters.filter((c) => !text || c.cluster.toLowerCase().includes(text));
  const owners = rows.some((c) => "owner" in c);
  return table(
    ["cluster", "lifecycle", "version", "nodes", "workload objects", "findings", "source", ...(owners ? ["shard owner"] : [])],
    rows.map((c) => [
      navLink(c.cluster, { view: "findings", cluster: c.cluster }), [c.health, `h-${c.health}`], c.version,
      c.nodes, c.workloadObjects, c.findings, c.notCompared ? `${c.source}: ${c.notCompared}` : c.source,
      ...(owners ? [c.owner] : []),
    ]),
    "clusters",
  );
}

export function appsView(apps, versions, selected, onPick) {
  const box = el("div");
  const label = el("label", "application ");
  const select = el("select");
  select.id = "app";
  for (const a of apps) { const o = el("option", a.app); o.value = a.app; select.append(o); }
  if (selected) select.value = selected;
  select.addEventListener("change", () => onPick(select.value));
  label.append(select);
  box.append(label);
  if (versions) {
    box.append(table(["cluster", "workload", "container", "image", "Git", "peers"], versions.rows.map((r) => [
      r.cluster, `${r.kind}/${r.namespace}/${r.workload}`, r.container,
      [r.image, r.drift ? "drift" : (r.divergesFromPeers ? "peer" : "")],
      r.drift ? r.desiredImage : "=", r.divergesFromPeers ? r.peerImage : "=",
    ]), "versions"));
  }
  return box;
}

export { rank };
