// The JSON API and the live stream. Same-origin requests carry the HttpOnly session cookie;
// a 401 (session expired, token rotated) sends the page back to the login form.
export async function get(path) {
  const resp = await fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin" });
  if (resp.status === 401) {
    window.location.assign("/ui/login");
    throw new Error("logged out");
  }
  if (!resp.ok) throw new Error(`${path}: HTTP ${resp.status}`);
  return resp.json();
}

// Approving needs the admin token, sent as a bearer header: another site's page can neither
// read it nor make the browser add it (a cross-site request with it needs CORS, refused here).
export async function postAdmin(path, token) {
  const resp = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { Authorization: `Bearer ${token}`, Accept: "application/json" },
  });
  let body = null;
  try { body = await resp.json(); } catch { body = null; }
  return { status: resp.status, body };
}

export async function logout() {
  await fetch("/ui/logout", { method: "POST", credentials: "same-origin" });
  window.location.assign("/ui/login");
}

// Server-sent events: EventSource reconnects by itself and sends Last-Event-ID.
export function follow(onMessage, onState) {
  const source = new EventSource("/api/stream");
  for (const kind of ["finding", "event", "audit", "reload", "dropped"]) {
    source.addEventListener(kind, (ev) => onMessage(kind, JSON.parse(ev.data)));
  }
  let opened = 0;
  source.onopen = () => { opened = Date.now(); onState("open"); };
  source.onerror = () => {
    if (source.readyState !== EventSource.CLOSED) {
      // behind a proxy that passes whole answers on, each answer ends and EventSource
      // reconnects at once: still live
      onState(Date.now() - opened < 30000 ? "open" : "reconnecting");
      return;
    }
    // refused (401: the session ended, the login form follows) or the server is away:
    // ask once, then follow again
    onState("closed");
    get("/api/clusters").then(
      () => setTimeout(() => follow(onMessage, onState), 2000),
      () => setTimeout(() => follow(onMessage, onState), 5000),
    );
  };
  return source;
}
