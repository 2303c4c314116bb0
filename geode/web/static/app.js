// geode web: the little JavaScript the page needs. Every change goes through the JSON API
// (POST with the CSRF token from the page's meta tag); every read of data the server did not
// render goes through the same API. No framework, nothing from the network.
"use strict";

const CSRF = document.querySelector('meta[name="geode-csrf"]').content;

async function api(method, url, body) {
  const opts = { method, headers: { "Accept": "application/json" }, credentials: "same-origin" };
  if (method !== "GET") {
    opts.headers["Content-Type"] = "application/json";
    opts.headers["X-Geode-CSRF"] = CSRF;
    opts.body = JSON.stringify(body || {});
  }
  const r = await fetch(url, opts);
  let data = null;
  try { data = await r.json(); } catch (e) { data = { error: "the server answered " + r.status }; }
  return { status: r.status, ok: r.ok, data };
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids) if (k != null) e.append(k);
  return e;
}

// -- a time as a person says it, the ISO time on hover: humane.when's rule, for what the
// script draws (the server renders the rest)
const UNITS = [[365 * 86400, "year"], [30 * 86400, "month"], [7 * 86400, "week"], [86400, "day"], [3600, "hour"], [60, "minute"]];
function agoText(ms) {
  let secs = (Date.now() - ms) / 1000;
  const future = secs < 0;
  secs = Math.abs(secs);
  if (secs < 45) return "just now";
  const [size, unit] = UNITS.find(([s]) => secs >= s) || UNITS[UNITS.length - 1];
  const n = Math.max(1, Math.floor(secs / size));
  const said = `${n} ${unit}${n === 1 ? "" : "s"}`;
  return future ? `in ${said}` : `${said} ago`;
}
function humanTime(iso) {
  const ms = Date.parse(iso || "");
  if (!iso || Number.isNaN(ms)) return document.createTextNode(iso || "");
  return el("time", { datetime: iso, title: iso, text: agoText(ms) });
}

// -- flash messages survive the reload that follows an action ------------------------------
function flash(msg, kind) {
  sessionStorage.setItem("geode-flash", JSON.stringify({ msg, kind: kind || "ok" }));
}
function showFlash() {
  const raw = sessionStorage.getItem("geode-flash");
  if (!raw) return;
  sessionStorage.removeItem("geode-flash");
  const { msg, kind } = JSON.parse(raw);
  const box = document.getElementById("flash");
  box.textContent = msg;
  box.className = "flash " + kind;
  box.hidden = false;
}

function describe(r) {
  if (r.action === "refresh") return r.message;
  return "#" + r.id + " " + r.action + ": " + (r.ok ? r.status : "NOT DONE (" + r.status + "): " + r.message);
}

// -- one proposal: approve, reject, undo, refresh -------------------------------------------
async function decide(id, action, button) {
  if (button) button.disabled = true;
  const reasonBox = document.getElementById("reason");
  const body = action === "reject" && reasonBox ? { reason: reasonBox.value } : {};
  const { status, data } = await api("POST", `/api/proposals/${id}/${action}`, body);
  if (data && data.error) flash(`#${id} ${action}: ${data.error}`, "bad");
  else flash(describe(data), data.ok ? "ok" : "bad");
  if (action === "refresh" && data && data.new_id && document.body.dataset.page === "proposal") {
    location.href = `/proposals/${data.new_id}`;
    return;
  }
  location.reload();
  return status;
}

document.addEventListener("click", (ev) => {
  const b = ev.target.closest("button.act");
  if (b) { ev.preventDefault(); decide(b.dataset.id, b.dataset.action, b); }
});

// -- bulk by the current filter, after a preview --------------------------------------------
function bulkSetup() {
  const box = document.getElementById("bulk");
  if (!box) return;
  const filter = JSON.parse(box.dataset.filter || "{}");
  const out = document.getElementById("bulk-preview");
  box.querySelectorAll("button.bulk-go").forEach((b) => b.addEventListener("click", async () => {
    const action = b.dataset.action;
    const qs = new URLSearchParams(Object.assign({ action }, filter));
    out.hidden = false;
    out.textContent = "checking…";
    const { data } = await api("GET", "/api/bulk?" + qs.toString());
    renderPreview(out, action, filter, data);
  }));
}

function renderPreview(out, action, filter, data) {
  out.replaceChildren();
  if (data.error) { out.append(el("p", { class: "error", text: data.error })); return; }
  const tally = Object.entries(data.would || {}).map(([k, v]) => `${v} would ${k}`).join(", ");
  out.append(el("p", { class: "count", text: `${action} ${data.count} proposal${data.count === 1 ? "" : "s"}` +
    (tally && action !== "reject" ? ` (of those checked: ${tally})` : "") }));
  const ul = el("ul", { class: "named" });
  for (const p of data.named) {
    ul.append(el("li", { "data-id": p.id },
      el("a", { href: `/proposals/${p.id}`, text: `#${p.id}` }), " ",
      el("span", { class: `badge st-${p.status}`, text: p.status }), " ",
      el("span", { class: "kind", text: p.kind }), " ", p.title,
      action !== "reject" ? el("span", { class: `would w-${p.would}`, text: ` → ${p.would}` }) : null));
  }
  if (data.count > data.named.length) ul.append(el("li", { class: "muted", text: `and ${data.count - data.named.length} more` }));
  out.append(ul);
  if (!data.count) { out.append(el("p", { class: "muted", text: "nothing to do" })); return; }
  let reason = null;
  if (action === "reject") { reason = el("input", { type: "text", placeholder: "reason (recorded)", id: "bulk-reason" }); out.append(reason); }
  const go = el("button", { class: "bulk-confirm", text: `Confirm: ${action} these ${data.count}` });
  const cancel = el("button", { class: "bulk-cancel", text: "Cancel" });
  cancel.addEventListener("click", () => { out.hidden = true; out.replaceChildren(); });
  go.addEventListener("click", async () => {
    go.disabled = true;
    const { status, data: r } = await api("POST", "/api/bulk", { action, filter, ids: data.ids, reason: reason ? reason.value : "" });
    if (status === 409 && r.preview) { renderPreview(out, action, filter, r.preview); out.prepend(el("p", { class: "error", text: r.error })); return; }
    if (r.error) { flash(`${action}: ${r.error}`, "bad"); }
    else { flash(`${action}: ${r.ok} done` + (r.not_done ? `, ${r.not_done} not done (see History)` : ""), r.not_done ? "bad" : "ok"); }
    location.reload();
  });
  out.append(go, " ", cancel);
}

// -- inline expansion in the queue: rationale, evidence, diff from the API ------------------
function segs(line) {
  const frag = document.createDocumentFragment();
  for (const [text, marked] of line.seg) frag.append(marked ? el("mark", { text }) : document.createTextNode(text));
  return frag;
}

function diffTable(f) {
  const t = el("table", { class: "diff unified" },
    el("colgroup", {}, el("col", { class: "c-no" }), el("col", { class: "c-no" }), el("col", {})));
  for (const h of f.hunks) {
    t.append(el("tr", { class: "hunk" }, el("td", { colspan: "3", text: h.header })));
    for (const ln of h.lines) {
      const cls = { "+": "add", "-": "del", " ": "ctx" }[ln.t];
      t.append(el("tr", { class: "ln " + cls }, el("td", { class: "no", text: ln.old || "" }),
        el("td", { class: "no", text: ln.new || "" }),
        el("td", { class: "code" }, el("span", { class: "sign", text: ln.t }), segs(ln))));
    }
  }
  return t;
}

async function expand(li, button) {
  const box = li.querySelector(".inline");
  if (!box.hidden) { box.hidden = true; button.textContent = "▸"; button.setAttribute("aria-expanded", "false"); return; }
  button.textContent = "▾";
  button.setAttribute("aria-expanded", "true");
  box.hidden = false;
  if (box.dataset.loaded) return;
  box.textContent = "loading…";
  const { data } = await api("GET", `/api/proposals/${li.dataset.id}`);
  box.replaceChildren();
  if (data.error) { box.append(el("p", { class: "error", text: data.error })); return; }
  box.dataset.loaded = "1";
  box.append(el("p", { class: `check check-${data.check.would}`, text: data.check.message }));
  box.append(el("p", { class: "pre rationale", text: data.rationale }));
  const ev = el("ul", { class: "evidence" });
  for (const e of data.evidence_resolved) {
    const row = e.row || {};
    const ledgerRow = !e.missing && e.type !== "finding";
    const what = e.missing ? `${e.type} ${e.id}: no longer recorded`
      : e.type === "finding" ? `finding #${e.id} ${row.kind}: ${row.message}` : `ledger #${e.id} ${row.kind} `;
    const li2 = el("li", {}, what);
    if (ledgerRow) li2.append(humanTime(row.ts), row.term ? " " : "", row.term ? el("code", { class: "term", text: row.term }) : "");
    li2.append(" ");
    if (e.address) li2.append(el("a", { href: "/note?a=" + encodeURIComponent(e.address), text: row.path + (row.line ? ":" + row.line : "") }));
    ev.append(li2);
  }
  box.append(ev);
  for (const f of data.files) {
    box.append(el("h4", { class: "dpath" }, el("span", { class: `op op-${f.op}`, text: f.op }), " ",
      f.old_path ? el("code", { text: f.old_path + " → " }) : null, el("code", { text: f.path })));
    if (f.binary) box.append(el("p", { class: "muted", text: "binary file: not shown" }));
    else box.append(diffTable(f));
  }
}

document.addEventListener("click", (ev) => {
  const b = ev.target.closest("button.expand");
  if (b) { ev.preventDefault(); expand(b.closest("li.proposal"), b); }
});

// -- the diff view switch (unified / side by side), remembered -----------------------------
function viewSetup() {
  const diffs = document.getElementById("diffs");
  if (!diffs) return;
  const set = (v) => {
    diffs.className = "diffs view-" + v;
    localStorage.setItem("geode-diff-view", v);
    document.querySelectorAll(".view-btn").forEach((b) => b.classList.toggle("on", b.dataset.view === v));
  };
  document.querySelectorAll(".view-btn").forEach((b) => b.addEventListener("click", () => set(b.dataset.view)));
  set(localStorage.getItem("geode-diff-view") || "split");
}

// -- the neighbourhood graph (Cytoscape.js, vendored) ----------------------------------------
// Every label's box (node names and edge relations), in the graph's own coordinates.
function labelBoxes(cy) {
  const only = { includeNodes: false, includeEdges: false, includeLabels: true, includeMainLabels: true,
    includeSourceLabels: false, includeTargetLabels: false, includeOverlays: false, includeUnderlays: false };
  return cy.elements().filter((e) => e.data("label")).map((e) => ({ id: e.id(), bb: e.boundingBox(only) }))
    .filter((x) => x.bb.w > 0 && x.bb.h > 0);
}
function labelOverlaps(cy) {
  const b = labelBoxes(cy), out = [];
  for (let i = 0; i < b.length; i++) for (let j = i + 1; j < b.length; j++) {
    const p = b[i].bb, q = b[j].bb;
    if (p.x1 < q.x2 && q.x1 < p.x2 && p.y1 < q.y2 && q.y1 < p.y2) out.push([b[i].id, b[j].id]);
  }
  return out;
}
// The layout places nodes, not labels: where two labels meet, spread the nodes apart from
// their centre (labels keep their size, so they part) and the parallel edges further apart,
// until none meet (a bounded number of rounds); then fit the view. Returns the overlaps left.
function spreadLabels(cy) {
  let step = 40;
  for (let round = 0; round < 20 && labelOverlaps(cy).length; round++) {
    const bb = cy.nodes().boundingBox({ includeLabels: false });
    const cx = (bb.x1 + bb.x2) / 2, cy0 = (bb.y1 + bb.y2) / 2;
    cy.nodes().positions((n) => ({ x: cx + (n.position("x") - cx) * 1.3, y: cy0 + (n.position("y") - cy0) * 1.3 }));
    step *= 1.3;
    cy.edges().style("control-point-step-size", step);
  }
  cy.fit(undefined, 30);
  return labelOverlaps(cy).length;
}
async function graphSetup() {
  const box = document.getElementById("graph");
  if (!box) return;
  const depthSel = document.getElementById("graph-depth");
  const draw = async () => {
    const addr = box.dataset.address;
    const { data } = await api("GET", `/api/context/${encodeURIComponent(addr)}?depth=${depthSel.value}`);
    const info = document.getElementById("graph-info");
    const list = document.getElementById("graph-list");
    list.replaceChildren();
    if (data.error) { info.textContent = data.error; return; }
    info.textContent = `build_context: ${data.total} within ${data.depth} hop${data.depth === 1 ? "" : "s"}, top ${data.related.length}` + (data.capped ? " (path cap hit)" : "");
    for (const r of data.related) {
      list.append(el("li", {}, el("span", { class: "rel", text: (r.direction === "out" ? "→ " : "← ") + r.relation }), " ",
        el("a", { href: "/note?a=" + encodeURIComponent(r.address), text: r.title }),
        el("span", { class: "muted small", text: ` score ${r.score}, ${r.hops} hop${r.hops === 1 ? "" : "s"}` })));
    }
    if (typeof cytoscape !== "function") { info.textContent += " (the graph library did not load)"; return; }
    const cy = cytoscape({
      container: box,
      elements: data.graph.nodes.concat(data.graph.edges),
      layout: { name: "preset" },
      style: [
        { selector: "node", style: { "label": "data(label)", "font-size": 11, "text-valign": "bottom", "text-margin-y": 4,
          "background-color": "#5b7db1", "width": 18, "height": 18, "color": "#223", "text-wrap": "ellipsis", "text-max-width": 160 } },
        { selector: "node[?anchor]", style: { "background-color": "#d9822b", "width": 28, "height": 28, "font-weight": "bold" } },
        // an edge's label follows its line, on a pale ground so a crossing line does not cut it
        { selector: "edge", style: { "width": 1.5, "line-color": "#9aa8bd", "target-arrow-color": "#9aa8bd",
          "target-arrow-shape": "triangle", "curve-style": "bezier", "label": "data(label)", "font-size": 9, "color": "#667",
          "text-rotation": "autorotate", "text-background-color": "#ffffff", "text-background-opacity": 0.85,
          "text-background-padding": 1, "control-point-step-size": 40 } },
        { selector: "edge[!typed]", style: { "line-style": "dashed" } },
      ],
    });
    window.geodeGraph = cy;  // the browser tests read the drawn labels' boxes from it
    await new Promise((resolve) => {
      const lay = cy.layout({ name: cy.nodes().length > 2 ? "cose" : "grid", animate: false, randomize: false, padding: 30 });
      lay.one("layoutstop", resolve);
      lay.run();
    });
    box.dataset.labelOverlaps = String(spreadLabels(cy));
    cy.on("tap", "node", (e) => { const href = e.target.data("href"); if (href && !e.target.data("anchor")) location.href = href; });
    box.dataset.nodes = String(cy.nodes().length);
    box.dataset.edges = String(cy.edges().length);
    box.dataset.ready = "1";
  };
  depthSel.addEventListener("change", () => { box.dataset.ready = ""; draw(); });
  draw();
}

// -- health: charts drawn from the same reports as `geode stats --json` / `geode study --json` ----
// Each chart's box carries what it draws (data-chart, the labels and each series' numbers) so a
// test, or a person with the inspector, can hold the picture to the terminal's figures.
const COLORS = { deliveries: "#3b5ea8", blocked: "#b3261e", marked: "#a86400", withheld: "#8a93a6", never: "#d5d9e2" };

function fmt(v, pct) {
  if (v === null || v === undefined) return "n/a";
  if (pct) return (100 * v).toFixed(1) + "%";
  return typeof v === "number" ? v.toLocaleString("en") : String(v);
}

function numsTable(table, rows) {
  table.replaceChildren(...rows.map(([k, v]) => el("tr", null, el("th", { text: k }), el("td", { text: v }))));
}

function drawChart(id, config) {
  const canvas = document.getElementById(id);
  const box = canvas.closest(".chartbox");
  const shown = { labels: config.data.labels, datasets: config.data.datasets.map((d) => ({ label: d.label, data: d.data })) };
  box.dataset.chart = JSON.stringify(shown);
  if (!window.Chart) { box.append(el("p", { class: "error", text: "the chart library did not load" })); return; }
  config.options = Object.assign({ responsive: true, maintainAspectRatio: false, animation: false }, config.options || {});
  new window.Chart(canvas, config);
  box.dataset.ready = "1";
}

function drawStats(d) {
  const w = d.window;
  document.getElementById("stats-window").textContent = w.start === null
    ? "No ledger events yet: the charts fill as the hooks deliver crystals."
    : `${fmt(d.examined_events)} ledger events over ${fmt(w.days)} days, ${new Date(w.start * 1000).toISOString().slice(0, 10)} to ${new Date(w.end * 1000).toISOString().slice(0, 10)} (deliveries asked for by hand left out).`;
  const days = d.daily || [];
  drawChart("chart-daily", {
    type: "bar",
    data: {
      labels: days.map((x) => x.day),
      datasets: [
        { type: "bar", label: "deliveries", data: days.map((x) => x.deliveries), backgroundColor: COLORS.deliveries, yAxisID: "y" },
        { type: "line", label: "blocked lookups", data: days.map((x) => x.blocked), borderColor: COLORS.blocked, backgroundColor: COLORS.blocked, yAxisID: "y1" },
        { type: "line", label: "marked lookups", data: days.map((x) => x.marked), borderColor: COLORS.marked, backgroundColor: COLORS.marked, yAxisID: "y1" },
      ],
    },
    options: { scales: {
      y: { beginAtZero: true, title: { display: true, text: "deliveries" }, ticks: { precision: 0 } },
      y1: { beginAtZero: true, position: "right", title: { display: true, text: "lookups" }, grid: { drawOnChartArea: false }, ticks: { precision: 0 } },
    } },
  });
  const rows = [["deliveries", fmt(d.deliveries)], ["per day", fmt(d.deliveries_per_day)],
    ["blocked lookups", fmt(d.blocked_lookups)], ["marked lookups", fmt(d.marked_lookups)],
    ["truncated deliveries", fmt(d.truncated_deliveries)], ["follow-ups (full note read after a cut)", fmt(d.followed_up)]];
  (d.halves || []).forEach((h, i) => {
    rows.push([`lookups per 1,000, ${i ? "second" : "first"} half`, fmt(h.lookups_per_1000)]);
    rows.push([`blocked share, ${i ? "second" : "first"} half`, fmt(h.blocked_share, true)]);
  });
  if (d.unserved_calls) rows.push(["hook calls the index could not serve", fmt(d.unserved_calls)]);
  if (d.spool_pending) rows.push(["events still in the spool (not counted)", fmt(d.spool_pending)]);
  numsTable(document.getElementById("nums-daily"), rows);

  const top = d.top10 || [];
  drawChart("chart-busiest", {
    type: "bar",
    data: { labels: top.map((x) => x.crystal_id), datasets: [{ label: "deliveries", data: top.map((x) => x.deliveries), backgroundColor: COLORS.deliveries }] },
    options: { indexAxis: "y", plugins: { legend: { display: false } }, scales: { x: { beginAtZero: true, ticks: { precision: 0 } } } },
  });
  numsTable(document.getElementById("nums-busiest"), [["busiest ten's share", fmt(d.top10_share, true)],
    ["median fires per delivered crystal", fmt(d.median_fires)], ["crystals delivered (registered or not)", fmt(d.delivered_at_least_once)]]);

  const reached = d.delivered_registered === null ? d.delivered_at_least_once : d.delivered_registered;
  drawChart("chart-reach", {
    type: "doughnut",
    data: { labels: ["delivered at least once", "never fired"], datasets: [{ label: "crystals", data: [reached, d.never_fired], backgroundColor: [COLORS.deliveries, COLORS.never] }] },
    options: { plugins: { legend: { position: "right" } } },
  });
  const box = document.getElementById("nums-reach");
  const t = el("table", { class: "nums" });
  numsTable(t, [["registered", fmt(d.registered)], ["delivered at least once", fmt(reached)], ["never fired", fmt(d.never_fired)], ["oversize", fmt(d.oversize)]]);
  box.replaceChildren(t);
  const never = d.never_fired_ids || [];
  if (never.length) {
    const ul = el("ul", { class: "never small", id: "never-fired" });
    never.slice(0, 40).forEach((id) => ul.append(el("li", null, el("a", { href: "/note?a=" + encodeURIComponent(id), text: id }))));
    box.append(el("p", { class: "small muted", text: "never fired:" }), ul);
    if (never.length > 40) box.append(el("p", { class: "small muted", text: `and ${never.length - 40} more (geode stats --json lists them all)` }));
  }
}

function drawStudy(d) {
  const keys = [["units", "units"], ["units followed by a lookup", "units_with_lookup"], ["blocked lookups", "blocked"], ["marked lookups", "marked"]];
  const a = d.arms.delivered, w = d.arms.withheld, e = d.arms.exempt || null;
  drawChart("chart-arms", {
    type: "bar",
    data: { labels: keys.map((k) => k[0]), datasets: [
      { label: "delivered", data: keys.map((k) => a[k[1]]), backgroundColor: COLORS.deliveries },
      { label: "withheld", data: keys.map((k) => w[k[1]]), backgroundColor: COLORS.withheld },
    ] },
    options: { scales: { y: { beginAtZero: true, ticks: { precision: 0 } } } },
  });
  const t = document.getElementById("nums-arms");
  const head = el("tr", null, el("th"), el("th", { text: "delivered" }), el("th", { text: "withheld" }), e && e.units ? el("th", { text: "exempt" }) : null);
  const rows = keys.concat([["lookups after the unit", "lookups"], ["lookups per unit", "lookups_per_unit"]]).map(([label, k]) => el("tr", null,
    el("th", { text: label }), el("td", { text: fmt(a[k]) }), el("td", { text: fmt(w[k]) }), e && e.units ? el("td", { text: fmt(e[k]) }) : null));
  t.replaceChildren(head, ...rows);
  const p = d.plan, inf = p.in_force;
  document.getElementById("study-plan").textContent =
    `${fmt(d.sessions)} sessions; the plan withholds ${(100 * inf.rate).toFixed(1)}% of units and stops at ${inf.stop_units} units` +
    (inf.stop_date ? ` or after ${inf.stop_date}` : "") + (p.stopped ? `; stopped: ${p.stop_reason}` : "") + ".";
}

function healthSetup() {
  const draw = { stats: drawStats, study: drawStudy };
  document.querySelectorAll("section[data-src]").forEach(async (sec) => {
    const { data } = await api("GET", sec.dataset.src);
    const pre = document.getElementById(sec.id + "-text");
    pre.textContent = data.error ? data.error : data.text;
    if (data.error) sec.append(el("p", { class: "error", text: data.error }));
    else draw[sec.id](data);
    sec.dataset.ready = "1";
  });
  const b = document.getElementById("run-doctor");
  if (!b) return;
  b.addEventListener("click", async () => {
    const out = document.getElementById("doctor");
    b.disabled = true;
    out.textContent = "running every check…";
    const { data } = await api("POST", "/api/doctor", { skip_model: true });
    out.replaceChildren();
    if (data.error) { out.append(el("p", { class: "error", text: data.error })); b.disabled = false; return; }
    const t = el("table", { class: "list doctor" });
    for (const c of data.checks) {
      t.append(el("tr", { class: c.ok ? "ok" : "fail" }, el("td", { text: c.ok ? "ok" : "FAIL" }),
        el("td", { text: c.name }), el("td", { text: c.message })));
    }
    out.append(t, el("p", { class: data.ok ? "ok" : "error",
      text: data.ok ? "all parts can do their job on this store" : `${data.checks.filter((c) => !c.ok).length} check(s) failed` }));
    out.dataset.ready = "1";
    b.disabled = false;
  });
}

document.addEventListener("DOMContentLoaded", () => {
  showFlash();
  bulkSetup();
  viewSetup();
  graphSetup();
  healthSetup();
  document.body.dataset.ready = "1";
});
