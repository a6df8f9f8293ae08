// Healing decisions as rows a person reads: a status badge, what would be done to what (a
// one-line target summary, not raw JSON), the reasons folded, and for a request waiting for
// approval the approve and deny buttons (they need the admin token, kept in this page's
// memory only).
import { el, badge, show, ago } from "./dom.js";
import { postAdmin } from "./api.js";

export function targetSummary(t, action) {
  if (!t) return action === "alert" ? "tell a human: no automatic fix for this drift" : "—";
  if (t.application) return `sync Argo CD application ${t.application}`;
  if (t.kind && t.name) {
    return `reconcile Flux ${t.kind} ${t.namespace ? `${t.namespace}/` : ""}${t.name}${t.cluster ? ` in ${t.cluster}` : ""}`;
  }
  if (Array.isArray(t.nodes)) {
    const what = [
      ...Object.entries(t.labels || {}).map(([k, v]) => (v === null ? `no label ${k}` : `label ${k}=${v}`)),
      ...(t.taints || []).map((x) => `taint ${x.key}=${x.value ?? ""}:${x.effect}`),
    ];
    return `restore ${what.join(", ") || "node state"} on ${t.nodes.length} node(s) of ${t.cluster}/${t.pool}`;
  }
  return show(t);
}

export function renderDecisions(decisions, ctx) {
  const box = el("section", null, "decisions");
  const admin = el("label", "admin token ");
  const input = el("input");
  input.type = "password";
  input.id = "admin-token";
  input.autocomplete = "off";
  input.value = ctx.adminToken || "";
  input.addEventListener("input", () => { ctx.adminToken = input.value; });
  admin.append(input);
  const note = el("p", ctx.note || null, "note"); // kept across redraws
  note.id = "decision-note";
  note.setAttribute("role", "status");
  box.append(admin, note);
  const list = el("ol", null, "rows");
  list.id = "decisions";
  if (!decisions.length) list.append(el("li", "no decisions", "empty"));
  for (const d of decisions) {
    const li = el("li", null, "decision");
    li.dataset.id = d.id;
    li.dataset.status = d.status;
    const head = el("div", null, "row-head");
    head.append(
      badge(d.status, `st-${d.status}`),
      el("b", d.action),
      el("span", `${d.cluster}${d.pool ? `/${d.pool}` : ""}`, "where"),
      el("span", targetSummary(d.target, d.action), "target"),
      el("time", ago(d.at), "when"),
    );
    head.lastChild.dateTime = d.at || "";
    head.lastChild.title = d.at || "";
    li.append(head);
    const reasons = el("details", null, "reasons");
    reasons.open = ctx.unfolded.has(d.id); // a redraw keeps what the reader unfolded
    reasons.addEventListener("toggle", () => {
      if (reasons.open) ctx.unfolded.add(d.id);
      else ctx.unfolded.delete(d.id);
    });
    reasons.append(el("summary", `${(d.reasons || []).length} reason(s): ${(d.reasons || []).slice(-1)[0] || ""}`));
    const ul = el("ul");
    for (const r of d.reasons || []) ul.append(el("li", r));
    reasons.append(ul);
    li.append(reasons);
    if (d.status === "pending-approval") {
      for (const verb of ["approve", "deny"]) {
        const btn = el("button", verb, verb);
        btn.type = "button";
        btn.addEventListener("click", () => answer(verb, d, ctx, note, btn));
        li.append(btn);
      }
    }
    list.append(li);
  }
  box.append(list);
  return box;
}

async function answer(verb, d, ctx, note, btn) {
  // the answer may come after a redraw: it goes to the note on the page, not the one clicked
  const say = (text) => {
    ctx.note = text;
    (document.getElementById("decision-note") || note).textContent = text;
  };
  if (!ctx.adminToken) { say(`${verb === "approve" ? "approving" : "denying"} needs the admin token (field above)`); return; }
  btn.disabled = true;
  const { status, body } = await postAdmin(`/api/decisions/${encodeURIComponent(d.id)}/${verb}`, ctx.adminToken);
  const done = verb === "approve" ? "approved" : "denied";
  say(status === 200
    ? `${done} ${d.id}: ${body.status}`
    : `not ${done} (${status}): ${body && body.error ? body.error : "no answer"}`);
  btn.disabled = status === 200;
  ctx.reload();
}
