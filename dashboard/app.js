// leasehold dashboard: reads /v1/events (Server-Sent Events) and draws it.
// No dependencies and no external requests.
"use strict";

const HISTORY = 120; // points kept per chart (one per 500 ms: one minute)
const series = { allowed: [], denied: [], decisions: [], writes: [] };
const $ = (id) => document.getElementById(id);
const fmt = (n) => {
  if (!isFinite(n)) return "–";
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return n >= 100 ? Math.round(n).toString() : (Math.round(n * 10) / 10).toString();
};
const duration = (s) => (s < 60 ? `${Math.floor(s)} s` : s < 3600 ? `${Math.floor(s / 60)} min` : `${(s / 3600).toFixed(1)} h`);

function push(name, v) {
  const s = series[name];
  s.push(v);
  if (s.length > HISTORY) s.shift();
}

function draw(canvas, lines, stacked) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth, h = canvas.clientHeight || 180;
  if (canvas.width !== w * dpr) { canvas.width = w * dpr; canvas.height = h * dpr; }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const totals = series[lines[0].name].map((_, i) => (stacked ? lines.reduce((a, l) => a + (series[l.name][i] || 0), 0) : Math.max(...lines.map((l) => series[l.name][i] || 0))));
  const max = Math.max(1, ...totals) * 1.15;
  ctx.strokeStyle = "#243040"; ctx.fillStyle = "#8896a6"; ctx.font = "11px system-ui"; ctx.lineWidth = 1;
  for (let g = 0; g <= 3; g++) {
    const y = h - 18 - (g / 3) * (h - 28);
    ctx.beginPath(); ctx.moveTo(36, y); ctx.lineTo(w, y); ctx.stroke();
    ctx.fillText(fmt((max * g) / 3), 2, y + 4);
  }
  const x = (i) => 36 + (i / (HISTORY - 1)) * (w - 40);
  const y = (v) => h - 18 - (v / max) * (h - 28);
  let base = new Array(HISTORY).fill(0);
  for (const l of lines) {
    const s = series[l.name];
    const off = HISTORY - s.length;
    if (stacked && s.every((v) => v === 0)) continue; // an empty band draws no line over the others
    ctx.beginPath();
    s.forEach((v, i) => { const top = (stacked ? base[i + off] : 0) + v; const px = x(i + off), py = y(top); i ? ctx.lineTo(px, py) : ctx.moveTo(px, py); });
    ctx.strokeStyle = l.color; ctx.lineWidth = 2; ctx.stroke();
    if (stacked && s.length) {
      for (let i = s.length - 1; i >= 0; i--) ctx.lineTo(x(i + off), y(base[i + off]));
      ctx.closePath(); ctx.globalAlpha = 0.18; ctx.fillStyle = l.color; ctx.fill(); ctx.globalAlpha = 1;
      s.forEach((v, i) => { base[i + off] += v; });
    }
  }
}

function render(s) {
  const t = s.totals;
  const decisions = t.allowed_local + t.allowed_store + t.denied_local + t.denied_store + t.degraded + t.unavailable;
  const local = t.allowed_local + t.denied_local;
  $("rate").textContent = fmt(s.allowedPerS + s.deniedPerS);
  $("allowed-rate").textContent = fmt(s.allowedPerS);
  $("denied-rate").textContent = fmt(s.deniedPerS);
  $("decisions-total").textContent = decisions.toLocaleString();
  $("local-total").textContent = local.toLocaleString();
  $("local-share").textContent = decisions ? `${((100 * local) / decisions).toFixed(1)}%` : "–";
  const saving = s.storeCallsPerDecision > 0 ? s.directCallsPerDecision / s.storeCallsPerDecision : NaN;
  $("saving").textContent = isFinite(saving) ? `${fmt(saving)}× fewer` : "–";
  $("cpd").textContent = s.storeCallsPerDecision.toFixed(4);
  $("wpd").textContent = s.writesPerDecision.toFixed(4);
  $("direct-cpd").textContent = s.directCallsPerDecision.toFixed(2);
  $("direct-wpd").textContent = s.directWritesPerDecision.toFixed(2);
  $("held").textContent = fmt(s.unitsHeld);
  $("leases").textContent = fmt(t.leases);
  $("refunded").textContent = fmt(t.units_refunded);
  $("breaker").textContent = s.breaker.replace("_", "-");
  $("breaker").className = "value " + (s.breaker === "closed" ? "ok" : "bad");
  $("writes-rate").textContent = fmt(s.writesPerS);
  $("conflicts-rate").textContent = fmt(s.conflictsPerS);
  $("degraded").textContent = fmt(t.degraded + t.unavailable);
  $("l1").textContent = fmt(s.l1Keys);
  $("uptime").textContent = duration(s.uptimeS);

  push("allowed", s.allowedPerS); push("denied", s.deniedPerS);
  push("decisions", s.allowedPerS + s.deniedPerS); push("writes", s.writesPerS);
  draw($("chart-decisions"), [{ name: "allowed", color: "#3ecf8e" }, { name: "denied", color: "#f0616d" }], true);
  draw($("chart-writes"), [{ name: "decisions", color: "#6aa9ff" }, { name: "writes", color: "#f5b942" }], false);

  const hot = $("hot");
  if (s.hotKeys.length) {
    const top = s.hotKeys[0].decisions || 1;
    hot.replaceChildren(...s.hotKeys.map((k) => {
      const tr = document.createElement("tr");
      const name = document.createElement("td"); name.textContent = k.key; name.title = k.key;
      const n = document.createElement("td"); n.className = "num"; n.textContent = k.decisions.toLocaleString();
      const barCell = document.createElement("td"); const bar = document.createElement("div"); bar.className = "bar";
      bar.style.width = `${Math.max(4, (100 * k.decisions) / top)}px`; barCell.append(bar);
      tr.append(name, n, barCell); return tr;
    }));
  }
  const recent = $("recent");
  for (const r of s.recent) {
    const li = document.createElement("li");
    li.textContent = `${r.allowed ? "✓" : "✗"} ${r.limit}/${r.key} · ${r.served}`;
    li.className = r.allowed ? "ok" : "bad";
    recent.prepend(li);
  }
  while (recent.children.length > 40) recent.lastChild.remove();
}

function renderLimits(rows) {
  $("limits").replaceChildren(...rows.map((r) => {
    const tr = document.createElement("tr");
    const { algorithm, ...params } = r.spec;
    const cells = [r.name, `${algorithm} ${Object.entries(params).map(([k, v]) => `${k}=${v}`).join(" ")}`, r.mode, r.fail, r.lease_max, `${r.lease_ttl_ms} ms`];
    cells.forEach((c, i) => { const td = document.createElement("td"); td.textContent = c; if (i >= 4) td.className = "num"; tr.append(td); });
    return tr;
  }));
}

// Signing in: the key goes once, in a header, to POST /v1/session, which
// answers with an HttpOnly session cookie; the key is never kept by the page
// nor put in a URL. Without API keys on the daemon, no sign-in is needed.
let source = null;
const SIGNED_IN = "leasehold-signed-in"; // a flag for the sign-out button, never the key

function setStatus(text, cls) {
  const status = $("status");
  status.textContent = text;
  status.className = `pill ${cls}`;
}

async function start() {
  if (source) { source.close(); source = null; }
  let r;
  try {
    r = await fetch("/v1/limits", { headers: { accept: "application/json" } });
  } catch {
    setStatus("unreachable", "down");
    setTimeout(start, 3000);
    return;
  }
  if (r.status === 401) {
    showSignIn("");
    return;
  }
  if (!r.ok) {
    const body = await r.json().catch(() => ({}));
    setStatus("refused", "down");
    $("notice").textContent = body.error || `HTTP ${r.status}`;
    $("notice").hidden = false;
    return;
  }
  $("signin").hidden = true;
  $("notice").hidden = true;
  $("signout").hidden = !sessionStorage.getItem(SIGNED_IN);
  renderLimits(await r.json());
  connect();
}

function showSignIn(message) {
  setStatus("signed out", "down");
  sessionStorage.removeItem(SIGNED_IN);
  $("signout").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message;
  $("key").focus();
}

$("signin").addEventListener("submit", async (e) => {
  e.preventDefault();
  const input = $("key");
  const key = input.value.trim();
  input.value = "";
  let r;
  try {
    r = await fetch("/v1/session", { method: "POST", headers: { authorization: `Bearer ${key}` } });
  } catch {
    showSignIn("could not send that key (is it plain ASCII?)");
    return;
  }
  if (!r.ok) {
    const body = await r.json().catch(() => ({}));
    showSignIn(body.error || `HTTP ${r.status}`);
    return;
  }
  sessionStorage.setItem(SIGNED_IN, "1");
  start();
});

$("signout").addEventListener("click", async () => {
  await fetch("/v1/session", { method: "DELETE" });
  sessionStorage.removeItem(SIGNED_IN);
  start();
});

function connect() {
  const es = new EventSource("/v1/events");
  source = es;
  es.addEventListener("open", () => setStatus("live", "live"));
  es.addEventListener("error", () => {
    if (es.readyState === EventSource.CLOSED) {
      // Refused rather than dropped (e.g. the session expired): ask again.
      setTimeout(start, 1000);
    } else {
      setStatus("reconnecting…", "down");
    }
  });
  es.addEventListener("limits", (e) => renderLimits(JSON.parse(e.data)));
  es.addEventListener("stats", (e) => render(JSON.parse(e.data)));
}

start();
