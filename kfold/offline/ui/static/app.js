// kfold ui: a read-only view of one journal. Everything comes from the JSON API of `kfold ui`
// (kfold/offline/ui/server.py) one page at a time; the view lives in the URL hash
// (#obj=ID&seq=N&machine=M&kinds=a,b&related=0&mode=sessions|timeline|effects|pending&problems=1), so
// every view can be linked and reloaded. With no object and no record picked the page opens on the
// Sessions (each with its phase, reason and message); the whole journal's timeline is a tab. What a view says (phases, durations, deltas, problems, latencies, what is
// pending) is computed by kfold/offline/explain.py when the journal is indexed; this page only lays it out.
"use strict";

const $ = (id) => document.getElementById(id);
const view = { obj: null, seq: null, machine: "", kinds: [], related: true, mode: "sessions", problems: false };
const MODES = ["sessions", "timeline", "effects", "pending"];
const defaultMode = (v) => (!v.obj && !v.seq ? "sessions" : "timeline");
const NARROW = 1280;   // below this width the object list folds away (the timeline keeps the room)
const PAGE = 50;
let summary = null;
let page = { records: [], effects: {}, objects: {} };
let loadedKey = "";
let objectsOffset = 0;
let currentObject = null;
let journalSize = 0;   // records indexed: grows while `kfold ui --follow` follows a live journal

function el(tag, attrs, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return node;
}

async function api(path) {
  const response = await fetch("/api/" + path);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

const iso = (ms) => (ms === null || ms === undefined ? "(no server time yet)" : new Date(ms).toISOString());
const show = (v) => (v === null || v === undefined ? "—" : typeof v === "string" ? v : JSON.stringify(v));

// -- the URL hash is the view ----------------------------------------------------------------
function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  view.obj = p.get("obj") ? Number(p.get("obj")) : null;
  view.seq = p.get("seq") ? Number(p.get("seq")) : null;
  view.machine = p.get("machine") || "";
  view.kinds = (p.get("kinds") || "").split(",").filter(Boolean);
  view.related = p.get("related") !== "0";
  view.mode = MODES.includes(p.get("mode")) ? p.get("mode") : defaultMode(view);
  view.problems = p.get("problems") === "1";
}

function hashFor(changes) {
  const v = { ...view, ...changes };
  const p = new URLSearchParams();
  if (v.obj) p.set("obj", v.obj);
  if (v.seq) p.set("seq", v.seq);
  if (v.machine) p.set("machine", v.machine);
  if (v.kinds.length) p.set("kinds", v.kinds.join(","));
  if (!v.related) p.set("related", "0");
  if (v.mode !== defaultMode(v)) p.set("mode", v.mode);
  if (v.problems) p.set("problems", "1");
  return "#" + p.toString();
}

function go(changes) {
  location.hash = hashFor(changes);
}

function filterKey() {
  return JSON.stringify([view.obj, view.machine, view.kinds, view.related, view.problems, journalSize]);
}

// -- start -------------------------------------------------------------------------------------
// While `kfold ui` is still indexing the journal, the API answers 503 with its progress.
async function waitForIndex() {
  for (;;) {
    const response = await fetch("/api/summary");
    const body = await response.json();
    if (response.ok) return body;
    if (response.status !== 503 || !body.indexing) throw new Error(body.error || response.statusText);
    const of = body.total ? ` of ${body.total.toLocaleString()} (${Math.floor((100 * body.done) / body.total)}%)` : "";
    $("journal").textContent = `indexing ${body.source}: ${body.done.toLocaleString()} records${of}…`;
    await new Promise((resolve) => setTimeout(resolve, 700));
  }
}

function journalLine() {
  const span = summary.first_at ? ` · ${iso(summary.first_at)} … ${iso(summary.last_at)}` : "";
  const from = summary.first_seq > 1 ? ` from #${summary.first_seq} (the snapshot at #${summary.first_seq - 1} before it)` : "";
  $("journal").textContent = `${summary.source} · ${summary.records.toLocaleString()} records${from}${span}`;
  if (summary.following) $("journal").append(el("span", { class: "live", id: "following" }, " · following: new records appear as they come"));
}

// `kfold ui --follow`: the index grows with the journal; every view already shown picks up what is new
// (the timeline appends the new records when its end is shown, the other views reload).
async function follow() {
  const fresh = await api("summary");
  if (fresh.records === summary.records) return;
  summary = fresh;
  journalLine();
  const timelineKey = loadedKey;
  const atEnd = $("later").classList.contains("hidden");
  journalSize = summary.records;
  pendingCache = null;
  pendingShown = false;
  currentObject = null;
  await loadObjects(true);
  if (view.mode === "timeline" && timelineKey && atEnd && !view.problems && page.records.length) {
    loadedKey = filterKey();
    await extend("next");
    await showObject();
    return;
  }
  await render();
}

async function start() {
  summary = await waitForIndex();
  journalSize = summary.records;
  journalLine();
  if (summary.history) $("journal").title = summary.history;
  const d = summary.divergence;
  if (d) {
    const banner = $("divergence");
    banner.textContent = `first divergence at #${d.seq}: effect ${d.effect_id}`;
    banner.href = `#seq=${d.seq}`;
    banner.classList.remove("hidden");
  }
  for (const m of summary.machines) $("machine").append(el("option", { value: m }, m));
  for (const k of summary.object_kinds) $("object-kind").append(el("option", { value: k }, k));
  for (const k of summary.kinds) {
    $("kinds").append(el("label", { class: "check" },
      el("input", { type: "checkbox", value: k, onchange: kindsChanged }), " " + k));
  }
  $("machine").addEventListener("change", () => go({ machine: $("machine").value, seq: null }));
  $("related").addEventListener("change", () => go({ related: $("related").checked, seq: null }));
  $("goto").addEventListener("change", () => go({ seq: Number($("goto").value) || null }));
  $("search").addEventListener("input", debounce(() => loadObjects(true), 200));
  $("object-kind").addEventListener("change", () => loadObjects(true));
  $("top-only").addEventListener("change", () => loadObjects(true));
  $("bookkeeping").addEventListener("change", () => loadObjects(true));
  $("more-sessions").addEventListener("click", () => loadSessions(false));
  $("more-objects").addEventListener("click", () => loadObjects(false));
  $("problems").addEventListener("change", () => go({ problems: $("problems").checked, seq: null }));
  for (const b of document.querySelectorAll("#modes button")) {
    b.addEventListener("click", () => go(b.dataset.mode === "sessions" ? { mode: "sessions", obj: null, seq: null } : { mode: b.dataset.mode }));
  }
  $("more-effects").addEventListener("click", () => loadEffects(false));
  $("toggle-side").addEventListener("click", () => document.body.classList.toggle("side-closed"));
  $("toggle-detail").addEventListener("click", () => document.body.classList.toggle("detail-closed"));
  if (window.innerWidth < NARROW) document.body.classList.add("side-closed");
  $("earlier").addEventListener("click", () => extend("prev"));
  $("later").addEventListener("click", () => extend("next"));
  window.addEventListener("hashchange", render);
  await loadObjects(true);
  await render();
  if (summary.following) {
    let busy = false;
    setInterval(async () => {
      if (busy) return;
      busy = true;
      try { await follow(); } finally { busy = false; }
    }, 1500);
  }
}

function kindsChanged() {
  const kinds = [...document.querySelectorAll("#kinds input:checked")].map((i) => i.value);
  go({ kinds, seq: null });
}

function debounce(fn, ms) {
  let timer = null;
  return () => { clearTimeout(timer); timer = setTimeout(fn, ms); };
}

// -- objects -----------------------------------------------------------------------------------
async function loadObjects(reset) {
  if (reset) { objectsOffset = 0; $("objects").replaceChildren(); }
  const q = new URLSearchParams({ q: $("search").value, kind: $("object-kind").value,
    top: $("top-only").checked ? "1" : "0", bookkeeping: $("bookkeeping").checked ? "1" : "0",
    offset: objectsOffset, limit: 100 });
  const res = await api("objects?" + q);
  for (const o of res.objects) $("objects").append(objectItem(o));
  objectsOffset += res.objects.length;
  $("more-objects").classList.toggle("hidden", objectsOffset >= res.total);
  $("bookkeeping-note").textContent = res.bookkeeping_hidden
    ? `${res.bookkeeping_hidden} bookkeeping row${res.bookkeeping_hidden === 1 ? "" : "s"} of the machines hidden` : "";
  $("bookkeeping-note").classList.toggle("hidden", !res.bookkeeping_hidden);
  markSelectedObject();
}

function objectItem(o) {
  const pick = () => {
    if (window.innerWidth < NARROW) document.body.classList.add("side-closed");
    go({ obj: o.id, seq: null, machine: "", kinds: [], mode: "timeline" });
  };
  return el("li", { "data-obj": o.id, onclick: pick },
    el("span", { class: "kind " + o.kind }, o.kind), el("span", { class: "state" }, o.state || ""),
    el("span", { class: "muted" }, ` · ${o.n} records` + (o.children ? ` · ${o.children} related` : "")),
    el("span", { class: "key mono" }, o.key));
}

function markSelectedObject() {
  for (const li of document.querySelectorAll("#objects li")) {
    li.classList.toggle("selected", Number(li.dataset.obj) === view.obj);
  }
}

async function showObject() {
  markSelectedObject();
  if (!view.obj) {
    currentObject = null;
    $("object").classList.add("hidden");
    $("related-box").classList.add("hidden");
    return;
  }
  const o = currentObject && currentObject.id === view.obj ? currentObject : await api("object/" + view.obj);
  if (currentObject !== o) await showSession(o);
  currentObject = o;
  $("object").classList.remove("hidden");
  $("related-box").classList.toggle("hidden", !o.children.length);
  $("object-head").replaceChildren(el("h2", {}, el("span", { class: "kind " + o.kind }, o.kind), " ",
    el("span", { class: "mono" }, o.key), " ", el("span", { class: "state" }, o.state || "")),
    el("span", { class: "muted" }, `${o.n} records, #${o.first} … #${o.last}` + (o.machine ? ` · machine ${o.machine}` : "")));
  const family = [];
  if (o.parent) family.push("part of ", objectLink(o.parent), " ");
  if (o.children.length) family.push("related: ", ...o.children.map(objectLink));
  $("object-family").replaceChildren(...family);
}

function objectLink(o) {
  return el("a", { href: hashFor({ obj: o.id, seq: null }), class: "obj-link" },
    el("span", { class: "kind " + o.kind }, o.kind), o.key.split("/").slice(1).join("/"));
}

// -- a Session's summary: phases with durations, generation, pod, last problem -------------------
async function showSession(o) {
  const box = $("session-summary");
  if (o.kind !== "Session") { box.classList.add("hidden"); box.replaceChildren(); return; }
  const [s, pending] = await Promise.all([api("session/" + o.id), pendingAtEnd()]);
  const mine = (x) => x.session === o.id;
  const waiting = [pending.effects.filter(mine).length, pending.timers.filter(mine).length];
  const strip = el("ol", { id: "phase-strip" }, s.phases.map((p) => el("li", {
      class: `phase p-${p.phase}` + (p.open ? " open" : ""), "data-phase": p.phase,
      title: `${p.phase} from #${p.seq} (${iso(p.at)})` + (p.took ? `, ${p.open ? "so far" : "for"} ${p.took}` : "") },
    el("a", { href: hashFor({ seq: p.seq }) }, el("b", {}, p.phase),
      el("span", { class: "took" }, p.took ? p.took + (p.open ? " so far" : "") : "—")))));
  const ready = s.reason ? el("div", { id: "session-ready", class: s.failure ? "bad" : "" },
    el("b", {}, s.reason), s.message ? ": " + s.message : "",
    s.ready ? [" ", el("a", { href: hashFor({ seq: s.ready.seq }), class: "muted" }, `(Ready ${s.ready.status}, written by #${s.ready.seq})`)] : "")
    : el("div", { id: "session-ready", class: "muted" }, "no status written yet");
  const facts = el("div", { id: "session-facts" },
    el("span", {}, "generation ", el("b", { id: "session-generation" }, String(s.generation))),
    el("span", {}, "pod ", el("b", { class: "mono", id: "session-pod" }, s.pod || "none"), s.pod_phase ? ` (${s.pod_phase})` : ""),
    el("span", { id: "session-problem", class: s.problem ? "bad" : "muted" }, s.problem
      ? ["last problem ", el("a", { href: hashFor({ seq: s.problem.seq }) }, "#" + s.problem.seq), ": " + s.problem.text]
      : "no problem"),
    el("a", { id: "session-pending", href: hashFor({ mode: "pending" }) },
      `pending at the end: ${waiting[0]} effect${waiting[0] === 1 ? "" : "s"}, ${waiting[1]} deadline${waiting[1] === 1 ? "" : "s"}`));
  // width grows with the log of the duration: a phase of minutes stays readable next to one of ms
  s.phases.forEach((p, i) => { strip.children[i].style.flexGrow = String(1 + Math.log10(1 + (p.ms || 0) / 100)); });
  box.replaceChildren(strip, ready, facts);
  box.classList.remove("hidden");
}

// -- the views: timeline, effects -> outcomes, pending now ---------------------------------------
function showMode() {
  for (const b of document.querySelectorAll("#modes button")) b.classList.toggle("on", b.dataset.mode === view.mode);
  $("sessions-pane").classList.toggle("hidden", view.mode !== "sessions");
  $("timeline-pane").classList.toggle("hidden", view.mode !== "timeline");
  $("effects-pane").classList.toggle("hidden", view.mode !== "effects");
  $("pending-pane").classList.toggle("hidden", view.mode !== "pending");
  $("record-filters").classList.toggle("hidden", view.mode !== "timeline");
}

let effectsOffset = 0;
let effectsKey = "";
async function loadEffects(reset) {
  if (reset) { effectsOffset = 0; $("effects").tBodies[0].replaceChildren(); }
  const q = new URLSearchParams({ offset: effectsOffset, limit: 100 });
  if (view.obj) q.set("obj", view.obj);
  if (view.obj && view.related) q.set("related", "1");
  if (view.problems) q.set("problems", "1");
  const res = await api("effects?" + q);
  for (const e of res.effects) $("effects").tBodies[0].append(effectRow(e, res.objects[e.obj]));
  effectsOffset += res.effects.length;
  $("more-effects").classList.toggle("hidden", effectsOffset >= res.total);
  $("effects-empty").classList.toggle("hidden", res.total > 0);
}

// -- the landing list: every Session with its phase, reason and message, and its last problem ----------
let sessionsOffset = 0;
let sessionsKey = "";
async function loadSessions(reset) {
  const body = $("sessions").tBodies[0];
  if (reset) { sessionsOffset = 0; body.replaceChildren(); }
  const q = new URLSearchParams({ offset: sessionsOffset, limit: 100 });
  if (view.problems) q.set("problems", "1");
  const res = await api("sessions?" + q);
  for (const s of res.sessions) body.append(sessionRow(s));
  sessionsOffset += res.sessions.length;
  $("more-sessions").classList.toggle("hidden", sessionsOffset >= res.total);
  $("sessions-empty").classList.toggle("hidden", res.total > 0);
  $("sessions-empty").textContent = view.problems ? "no Session has a problem" : "no Session in this journal";
  const counts = Object.entries(res.phases).map(([p, n]) => el("span", { class: `phase p-${p}` }, `${n} ${p}`));
  const all = Object.values(res.phases).reduce((a, b) => a + b, 0);
  $("sessions-counts").replaceChildren(el("b", {}, `${all} Session${all === 1 ? "" : "s"}`), ": ", ...counts,
    res.with_problem ? el("span", { class: "bad" }, `${res.with_problem} with a problem`) : el("span", { class: "muted" }, "none with a problem"));
}

function sessionRow(s) {
  const open = (seq) => hashFor({ obj: s.id, seq, mode: "timeline", machine: "", kinds: [] });
  const itsFailure = s.failure && s.problem && s.problem.seq === s.failure.seq && s.failure.reason === s.reason;
  const problem = s.problem
    ? [el("a", { href: open(s.problem.seq) }, "#" + s.problem.seq),
       itsFailure ? el("span", { class: "muted" }, ` failed ${s.failure.reason} here`) : " " + s.problem.text]
    : el("span", { class: "muted" }, "none");
  const [where, name] = [s.key.slice(0, s.key.lastIndexOf("/")), s.key.slice(s.key.lastIndexOf("/") + 1)];
  return el("tr", { class: "session" + (s.failure ? " failed" : "") + (s.problem ? " problem" : ""), "data-obj": s.id },
    el("td", { class: "key" }, el("a", { href: open(null), title: s.key }, el("b", { class: "mono" }, name)),
      el("div", { class: "muted mono" }, where)),
    el("td", {}, el("span", { class: `phase p-${s.phase}` }, s.phase || "Pending"), s.gone ? el("span", { class: "muted" }, " deleted") : ""),
    el("td", { class: "reason" }, s.reason || "—"),
    el("td", { class: "msg" }, s.message || ""),
    el("td", { class: "problem-cell" }, problem),
    el("td", { class: "num" }, String(s.n)));
}

function effectRow(e, o) {
  const ok = e.result === "ok" || !!e.expected;
  const outcome = e.outcome
    ? [el("a", { href: hashFor({ mode: "timeline", seq: e.outcome }) }, "#" + e.outcome), " ",
       el("b", { class: ok ? "ok" : "bad" }, e.result), e.code ? ` ${e.code}` : "",
       e.reason ? ` ${e.reason}` : "", e.message ? el("div", { class: "message" }, e.message) : "",
       e.expected ? el("div", { class: "expected-line" }, e.expected) : ""]
    : el("b", { class: "bad" }, e.issued ? "no outcome (in doubt)" : "never issued");
  return el("tr", { class: "eff" + (ok ? "" : " problem") + (e.expected ? " expected" : ""), "data-effect": e.id },
    el("td", {}, o && view.obj !== o.id
      ? el("a", { href: hashFor({ obj: o.id, seq: null }), title: o.key }, el("span", { class: "kind " + o.kind }, o.kind)) : "",
      el("span", { class: "id" }, e.id), " ", el("span", { class: "mono" }, e.line)),
    el("td", {}, el("a", { href: hashFor({ mode: "timeline", seq: e.cause }) }, "#" + e.cause)),
    el("td", {}, e.issued ? el("a", { href: hashFor({ mode: "timeline", seq: e.issued }) }, "#" + e.issued) : "—"),
    el("td", {}, outcome),
    el("td", { class: "num" }, e.latency_ms === null ? "—" : `${e.latency_ms} ms`),
    el("td", { class: "num" + (e.retries ? " bad" : "") }, String(e.retries)));
}

let pendingCache = null;
const pendingAtEnd = async () => (pendingCache = pendingCache || await api("pending"));

let pendingShown = false;
async function loadPending() {
  if (pendingShown) return;
  const p = await pendingAtEnd();
  const link = (x) => (x.obj ? el("a", { href: hashFor({ obj: x.obj, mode: "timeline", seq: null }) }, x.key) : x.key);
  $("pending-effects").tBodies[0].replaceChildren(...p.effects.map((e) => el("tr", { class: "pend", "data-effect": e.id },
    el("td", {}, el("span", { class: "id" }, e.id), " ", el("span", { class: "mono" }, e.line)),
    el("td", {}, e.issued ? "issued, no outcome" : "emitted, never issued", e.attempt ? ` (attempt ${e.attempt + 1})` : "",
      e.not_before ? `, retry not before ${iso(e.not_before)}` : ""),
    el("td", { class: "mono" }, link(e)))));
  $("pending-timers").tBodies[0].replaceChildren(...p.timers.map((t) => el("tr", { class: "timer-row", "data-timer": t.id },
    el("td", {}, `${t.machine} ${t.name}`), el("td", { class: "mono" }, link(t)),
    el("td", { class: "mono" }, iso(t.due) + (t.cluster && t.cluster !== p.home ? ` (${t.cluster}'s clock)` : "")),
    el("td", {}, t.in_text))));
  const nothing = (cols, what) => el("tr", {}, el("td", { colspan: cols, class: "muted" }, what));
  if (!p.effects.length) $("pending-effects").tBodies[0].append(nothing(3, "none: every effect issued has its outcome"));
  if (!p.timers.length) $("pending-timers").tBodies[0].append(nothing(4, "none armed"));
  const none = !p.effects.length && !p.timers.length;
  $("pending-note").textContent = (none ? "Nothing is pending: every effect has its outcome and no deadline is armed. " : "")
    + `As of the journal's last record (${iso(p.last_at)}).` + (p.more ? ` ${p.more} more not listed.` : "");
  pendingShown = true;
}

// -- the timeline ------------------------------------------------------------------------------
function recordsQuery(from, dir) {
  const q = new URLSearchParams({ dir, limit: PAGE });
  if (view.obj) q.set("obj", view.obj);
  if (view.obj && view.related) q.set("related", "1");
  if (view.machine) q.set("machine", view.machine);
  if (view.kinds.length) q.set("kinds", view.kinds.join(","));
  if (view.problems) q.set("problems", "1");
  if (from) q.set("from", from);
  return "records?" + q;
}

async function render() {
  readHash();
  syncControls();
  showMode();
  await showObject();
  const key = filterKey();
  if (view.mode !== "timeline") {
    if (view.mode === "sessions" && sessionsKey !== key) { sessionsKey = key; await loadSessions(true); }
    if (view.mode === "effects" && effectsKey !== key) { effectsKey = key; await loadEffects(true); }
    if (view.mode === "pending") await loadPending();
    return showDiagram(null);
  }
  const seen = page.records.some((r) => r.seq === view.seq);
  if (key !== loadedKey || (view.seq && !seen)) {
    const res = await api(recordsQuery(view.seq, view.seq ? "around" : "next"));
    loadedKey = key;
    page = { records: [], effects: {}, objects: {} };
    $("timeline").replaceChildren();
    merge(res, "next", true);
  }
  select(view.seq);
}

async function extend(dir) {
  const recs = page.records;
  if (!recs.length) return;
  const from = dir === "prev" ? recs[0].seq : recs[recs.length - 1].seq + 1;
  merge(await api(recordsQuery(from, dir)), dir, false);
}

function merge(res, dir, fresh) {
  Object.assign(page.effects, res.effects);
  Object.assign(page.objects, res.objects);
  const cards = [];
  for (const r of res.records) cards.push(recordCard(r));
  if (dir === "prev") { page.records = [...res.records, ...page.records]; $("timeline").prepend(...cards); }
  else { page.records = [...page.records, ...res.records]; $("timeline").append(...cards); }
  if (fresh || dir === "prev") $("earlier").classList.toggle("hidden", !res.more_before);
  if (fresh || dir === "next") $("later").classList.toggle("hidden", !res.more_after);
  $("empty").classList.toggle("hidden", page.records.length > 0);
}

function recordCard(r) {
  const d = r.detail;
  const classes = ["rec", "k-" + r.kind];
  if (d.divergence) classes.push("divergent");
  if (r.error) classes.push("failed");
  if (r.problem) classes.push("problem");
  if (r.expected) classes.push("expected");
  const clock = r.clock && r.clock !== summary.home ? `${r.clock}'s server clock` : "server clock";
  const card = el("li", { id: "rec-" + r.seq, class: classes.join(" "), "data-seq": r.seq,
      onclick: (ev) => { if (!ev.target.closest("a")) { history.replaceState(null, "", hashFor({ seq: r.seq })); readHash(); select(r.seq); } } },
    el("div", { class: "head" }, el("span", { class: "seq" }, "#" + r.seq),
      el("span", { class: "at mono", title: clock }, iso(r.at)),
      el("span", { class: "delta", title: `since the previous record on ${clock}` }, r.delta || ""),
      el("span", { class: "rk" }, r.kind), el("span", { class: "line mono" }, r.line)));
  if (r.problem && !r.error && !d.divergence) card.append(el("div", { class: "sub problem-line" }, "problem: " + r.problem));
  if (r.expected) card.append(el("div", { class: "sub expected-line" }, r.expected));
  if (r.answers) card.append(answersLine(r));
  if (r.fired !== null) {
    card.append(el("div", { class: "sub deadline" }, r.fired ? "deadline fired: the timer still stood"
      : "stale deadline: its timer was cancelled or moved since (decides nothing)"));
  }
  if (r.error) card.append(el("div", { class: "sub error" }, "not folded: " + r.error));
  for (const c of d.changes || []) card.append(changeBlock(c));
  for (const e of d.effects || []) card.append(effectLine(e));
  for (const t of d.timers || []) {
    card.append(el("div", { class: "sub timer" }, `timer ${t.m} ${t.name} on ${t.key}: `,
      t.due === null ? "cancelled" : "due " + iso(t.due)));
  }
  if (d.divergence) card.append(divergenceBox(d.divergence));
  return card;
}

function answersLine(r) {
  const e = page.effects[r.answers];
  if (!e) return el("div", { class: "sub answers" }, `concerns effect ${r.answers} (not emitted by this code: see the divergence)`);
  const verb = r.kind === "outcome" ? "answers" : "journals";
  return el("div", { class: "sub answers" }, `${verb} effect `, el("span", { class: "mono" }, `${e.id} ${e.line}`),
    " emitted by ", el("a", { href: hashFor({ seq: e.cause }), class: "cause-link" }, "#" + e.cause));
}

function changeBlock(c) {
  const o = page.objects[c.obj];
  const what = c.new ? `${c.from} → ${c.to} (new)` : c.gone ? `${c.from} → removed` : `${c.from} → ${c.to}`;
  const block = el("div", { class: "sub change" }, el("div", { class: "title" }, `${c.m} `,
    el("a", { href: hashFor({ obj: c.obj, seq: null }) }, o ? o.key : c.key), `: ${what}`));
  if (c.diff.length) block.append(diffTable(c.diff));
  return block;
}

function diffTable(rows) {
  const shown = rows.slice(0, 60);
  const table = el("table", { class: "diff" }, shown.map(([path, old, now]) => el("tr", {},
    el("td", { class: "path mono" }, path), el("td", { class: "old mono" }, show(old)),
    el("td", { class: "new mono" }, show(now)))));
  if (rows.length > shown.length) table.append(el("tr", {}, el("td", { colspan: 3, class: "muted" }, `${rows.length - shown.length} more fields`)));
  return table;
}

function effectLine(e) {
  const info = page.effects[e.id];
  const line = el("div", { class: "sub effect" }, "effect ", el("span", { class: "id" }, e.id), " ",
    el("span", { class: "mono" }, e.line), " ");
  if (e.type === "log") return line;
  if (info && info.outcome) {
    const look = info.result === "ok" ? "ok" : info.expected ? "expected" : "bad";
    line.append(el("a", { href: hashFor({ seq: info.outcome }), class: "outcome-link " + look,
      "data-effect": e.id }, `→ outcome #${info.outcome} ${info.result}`));
    if (info.attempts > 1) line.append(el("span", { class: "muted" }, ` after ${info.attempts} attempts`));
  } else if (info && info.issued) {
    line.append(el("a", { href: hashFor({ seq: info.issued }), class: "outcome-link none" }, `issued #${info.issued}, no outcome journaled`));
  } else {
    line.append(el("span", { class: "outcome-link none" }, "never issued"));
  }
  return line;
}

function divergenceBox(d) {
  return el("div", { class: "divergence-box" }, el("b", {}, `DIVERGENCE: effect ${d.effect_id}`),
    d.cause ? [" caused by ", el("a", { href: hashFor({ seq: d.cause }) }, "#" + d.cause)] : " (no record of this code emits it)",
    el("div", { class: "muted" }, "journaled (old) vs recomputed by this code (new):"),
    d.diff.length ? diffTable(d.diff) : el("pre", {}, d.text));
}

function syncControls() {
  $("machine").value = view.machine;
  $("related").checked = view.related;
  $("problems").checked = view.problems;
  for (const input of document.querySelectorAll("#kinds input")) input.checked = view.kinds.includes(input.value);
  $("goto").value = view.seq || "";
}

// -- the selected record: raw record and the diagram ---------------------------------------------
async function select(seq) {
  for (const card of document.querySelectorAll(".rec.selected")) card.classList.remove("selected");
  const card = seq ? $("rec-" + seq) : null;
  if (card) {
    card.classList.add("selected");
    card.scrollIntoView({ block: "center" });
  }
  await showDiagram(seq);
  if (!seq) { $("raw").textContent = ""; $("raw-title").classList.add("hidden"); return; }
  const raw = await api("record/" + seq);
  $("raw-title").textContent = `record #${seq} as journaled`;
  $("raw-title").classList.remove("hidden");
  $("raw").textContent = JSON.stringify(raw, null, 2);
}

// A machine's diagram, laid out by Graphviz on the server from its transition table (or the one
// line the server says when it cannot draw it, e.g. without Graphviz).
async function diagram(url) {
  const response = await fetch(url);
  const text = await response.text();
  if (!response.ok) return el("p", { class: "error" }, JSON.parse(text).error);
  const holder = el("div", { class: "svg" });
  holder.innerHTML = text;
  return holder;
}

let diagramTurn = 0;
async function showDiagram(seq) {
  const turn = ++diagramTurn;   // a later selection wins over a drawing still being fetched
  const o = currentObject;
  if (!o || !o.machine) {
    if ($("diagram").dataset.view === "all") return;
    const parts = [el("p", { class: "muted" }, "The machines' state diagrams, drawn from their transition tables. "
      + "Select a Session, Pod or Repo to see its state highlighted.")];
    for (const m of summary.machines) {
      parts.push(await diagram(`/api/diagram/${m}.svg`));
    }
    if (turn !== diagramTurn) return;
    $("diagram").replaceChildren(...parts);
    $("diagram").dataset.view = "all";
    $("diagram").dataset.url = "";
    return;
  }
  $("diagram").dataset.view = "object";
  let state = (o.state || "").replace(/ \(removed\)$/, "");
  let when = "its last state in this journal";
  const upTo = page.records.filter((r) => !seq || r.seq <= seq);
  for (const r of upTo) {
    for (const c of r.detail.changes || []) {
      if (c.obj === o.id && seq) { state = c.gone ? c.from : c.to; when = `its state after #${r.seq}`; }
    }
  }
  const url = `/api/diagram/${o.machine}.svg?state=${encodeURIComponent(state)}`;
  if ($("diagram").dataset.url === url && $("diagram").querySelector("svg")) return;
  const holder = await diagram(url);
  if (turn !== diagramTurn) return;
  $("diagram").dataset.url = url;
  $("diagram").replaceChildren(el("h3", {}, `${o.machine} machine — `, el("span", { class: "state", id: "diagram-state" }, state),
    el("span", { class: "muted" }, ` (${when})`)), holder);
}

start().catch((err) => {
  document.body.prepend(el("p", { class: "error", id: "load-error" }, "kfold ui: " + err.message));
});
