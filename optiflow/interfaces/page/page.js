// optiflow's page: the jobs, and for the selected one what it is doing and what it found.
// Everything comes from this server's /api (no other origin, no library): the job, its prompt
// (the original side of each diff), its trials and step timeline, its event stream, and for a
// measure job the history of its prompt and tag. Charts are inline SVG drawn here, diffs are
// computed here.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";
const EVENT_TYPES = ["run_status_changed", "progress_changed", "trial_added_or_updated",
                     "best_candidate_changed", "iteration_recorded", "run_finished"];
// The API token (OPTIFLOW_API_TOKEN), asked once and kept for this tab only (sessionStorage). It
// travels in the Authorization header, also for the event stream, which is read with fetch: an
// EventSource cannot send headers, and a token in the URL would land in access logs and history.
const TOKEN_KEY = "optiflow-token";
const FINISHED = ["completed", "failed", "cancelled"];

let S = fresh(null);      // the selected job's state
let source = null;        // its event stream
let jobsCache = [];

function fresh(id) {
  return {
    id, job: null, prompt: null, trials: null, report: null, result: null, status: null,
    iterations: new Map(), best: null, counts: null, live: null, samples: [],
    events: 0, history: null, openDiffs: new Set(), openTrials: new Set(), trialsTimer: null, trialsBusy: false,
  };
}

// -- small helpers ----------------------------------------------------------------------------
class Refused extends Error {
  constructor(status, error) {
    super(`${status} error[${error.code}]: ${error.field ? error.field + ": " : ""}${error.message}`);
    this.status = status;
    this.code = error.code;
  }
}

function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

function s(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c) node.append(c);
  return node;
}

const pct = (v, digits = 1) => (typeof v === "number" ? `${(v * 100).toFixed(digits)}%` : "-");
const signedPct = (v) => (typeof v === "number" ? `${v >= 0 ? "+" : "−"}${Math.abs(v * 100).toFixed(1)}%` : "-");
const num = (v, digits = 3) => (typeof v === "number" ? String(Math.round(v * 10 ** digits) / 10 ** digits) : "-");
const int = (v) => (typeof v === "number" ? Math.round(v).toLocaleString("en-US") : "-");
const ms = (v) => (typeof v === "number" ? (v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${Math.round(v)} ms`) : "-");
// A score as the CLI prints it (fmt_score): at least two decimals, at most four; tiny ones in 3 digits.
const score = (v) => {
  if (typeof v !== "number") return "-";
  if (v !== 0 && Math.abs(v) < 0.01) return v.toPrecision(3);
  let t = v.toFixed(4).replace(/0+$/, "");
  const d = (t.split(".")[1] || "").length;
  return d < 2 ? (d === 0 ? t.replace(/\.$/, "") + ".00" : t + "0") : t;
};
const money = (v) => (typeof v === "number" ? `$${v < 0.01 ? v.toFixed(5) : v.toFixed(4)}` : "-");

function duration(seconds) {
  if (typeof seconds !== "number" || !isFinite(seconds)) return "-";
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  const m = Math.floor(seconds / 60), r = Math.round(seconds % 60);
  return m < 60 ? `${m} min ${r} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

function ago(iso) {
  const t = Date.parse(iso);
  if (!isFinite(t)) return "";
  const d = (Date.now() - t) / 1000;
  if (d < 60) return "just now";
  if (d < 3600) return `${Math.floor(d / 60)} min ago`;
  if (d < 86400) return `${Math.floor(d / 3600)} h ago`;
  const days = Math.floor(d / 86400);
  return `${days} day${days === 1 ? "" : "s"} ago`;
}

// When a job ran, absolute and relative: "21:43:05 · 3 min ago" today, "Nov 26, 21:43 · 2 days
// ago" before. Jobs of one name (a nightly measure) differ by little else than this.
function when(iso) {
  const t = Date.parse(iso);
  if (!isFinite(t)) return "";
  const at = new Date(t), now = new Date();
  const clock = { hour: "2-digit", minute: "2-digit", hourCycle: "h23" };
  const abs = at.toDateString() === now.toDateString()
    ? at.toLocaleTimeString(undefined, { ...clock, second: "2-digit" })
    : at.toLocaleString(undefined, { month: "short", day: "numeric",
        ...(at.getFullYear() === now.getFullYear() ? {} : { year: "numeric" }), ...clock });
  return `${abs} · ${ago(iso)}`;
}

function headers(extra) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { ...extra, Authorization: `Bearer ${token}` } : { ...extra };
}

// A refusal is shown in the banner; 401 also asks for the token.
function notice(err) {
  $("notice").textContent = err ? String(err.message || err) : "";
  $("notice").hidden = !err;
  if (err && err.status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    $("auth").hidden = false;
    $("token").focus();
  }
}

async function refused(response) {
  let error = { code: "http_error", field: null, message: response.statusText };
  try { error = (await response.json()).error || error; } catch (_) { /* not JSON */ }
  return new Refused(response.status, error);
}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.headers) });
  if (!response.ok) {
    const err = await refused(response);
    if ([401, 403, 413, 503].includes(response.status)) notice(err);
    throw err;
  }
  return response.json();
}

const enc = encodeURIComponent;
const toggle = (set, key) => (set.has(key) ? set.delete(key) : set.add(key));

// -- the jobs list ----------------------------------------------------------------------------
async function refreshJobs() {
  try {
    const { jobs } = await api("/api/jobs?limit=50");
    jobsCache = jobs;
    $("jobs").replaceChildren(...jobs.map(jobItem));
    $("jobs-empty").hidden = jobs.length > 0;
    jobsToggle();
    const running = jobs.filter((j) => j.status === "running").length;
    $("summary").textContent = `${jobs.length} recent job${jobs.length === 1 ? "" : "s"}` +
      (running ? `, ${running} running` : "");
    if (!$("notice").hidden && $("auth").hidden) notice(null);
  } catch (err) {
    $("summary").textContent = err.status === 401 ? "" : String(err.message || err);
  }
}

// A completed measure job whose pass rate fell under its floor (exit 3), or that shows a drop
// since its drift reference (exit 4), is not shown as a green "completed": it says "below floor"
// or "drift shown", in red, in the list and in the job's badge.
const BELOW = "below floor", DRIFTED = "drift shown";
function shownStatus(status, bad, badge) {
  return status === "completed" && bad ? badge || BELOW : status;
}
const pillClass = (status) => (status === BELOW || status === DRIFTED ? "failed below-floor" : status);

function jobItem(job) {
  const o = job.outcome;
  const status = shownStatus(job.status, o && o.bad, o && o.badge);
  return h("li", { class: job.id === S.id ? "sel" : "", "data-id": job.id, "data-status": status,
                   onclick: () => select(job.id) },
    h("span", { class: "name", text: job.name || job.id }),
    h("span", { class: `pill ${pillClass(status)}`, text: status }),
    o ? h("span", { class: `result${o.bad ? " failed" : ""}`, text: o.text })
      : job.error ? h("span", { class: `result ${job.status === "failed" ? "failed" : "mute"}`, text: job.error }) : null,
    h("span", { class: "meta", title: new Date(job.created_at).toLocaleString(),
                text: `${job.kind} · ${job.id.slice(0, 8)} · ${when(job.created_at)}` }));
}

// On a narrow screen (one column) the list, once a job is picked, shows that job alone and a
// button for the others: the job's page starts on the first screen, and the list opens in the
// page (no inner scroll box) with the picked job scrolled into view.
const narrow = () => matchMedia("(max-width: 900px)").matches;

function jobsToggle() {
  const box = $("jobs-box"), open = box.classList.contains("open");
  box.classList.toggle("picked", !!S.id);
  const others = jobsCache.filter((j) => j.id !== S.id).length;
  $("jobs-toggle").hidden = !S.id || others === 0;
  $("jobs-toggle").textContent = open ? "hide the other jobs" : `all ${jobsCache.length} jobs`;
  $("jobs-toggle").setAttribute("aria-expanded", String(open));
}

$("jobs-toggle").onclick = () => {
  $("jobs-box").classList.toggle("open");
  jobsToggle();
  if ($("jobs-box").classList.contains("open")) {
    const sel = document.querySelector("#jobs li.sel");
    if (sel) sel.scrollIntoView({ block: "center" });
  }
};

// -- model limits -----------------------------------------------------------------------------
async function refreshLimits() {
  try {
    const limits = await api("/api/limits");
    $("limits-box").hidden = !limits.configured;
    if (!limits.configured) return;
    $("limits-where").textContent = limits.shared ? "shared by the fleet (Redis)" : "in this process";
    $("limits").replaceChildren(...limits.routes.map((r) => {
      const rate = [r.effective_rpm != null ? `${num(r.effective_rpm, 0)} rpm` : null,
                    r.effective_tpm != null ? `${int(r.effective_tpm)} tpm` : null].filter(Boolean).join(", ");
      const state = r.paused_s > 0 ? `paused ${duration(r.paused_s)}` :
        r.factor < 1 ? `slowed to ${pct(r.factor, 0)}` : r.backlog_s > 0 ? `backlog ${duration(r.backlog_s)}` : "ok";
      return h("tr", {}, h("td", { title: r.model, text: r.name }), h("td", { text: rate || "-" }),
        h("td", { class: "num", text: r.concurrency ? `${r.in_flight}/${r.concurrency}` : String(r.in_flight) }),
        h("td", { class: state === "ok" ? "completed" : "failed", text: state }));
    }));
    labelled($("limits"));
  } catch (_) {
    $("limits-box").hidden = true;
  }
}

// -- selecting a job --------------------------------------------------------------------------
async function select(id) {
  if (source) source.close();
  S = fresh(id);
  history.replaceState(null, "", "/jobs/" + enc(id));
  for (const row of $("jobs").children) row.classList.toggle("sel", row.dataset.id === id);
  const picking = $("jobs-box").classList.contains("open");
  $("jobs-box").classList.remove("open");
  jobsToggle();
  if (picking && narrow()) scrollTo(0, 0);  // picked in the opened list: the job's page from its top
  $("detail").hidden = false;
  $("hint").hidden = true;
  $("events").replaceChildren();
  $("report").textContent = "";
  $("message").textContent = "";
  render();
  source = follow(id, onStreamMessage);
  await loadJob();
  if (S.id !== id || !S.job) return;
  if (S.job.kind !== "measure") loadPrompt();
  loadTrials();
}

async function loadJob() {
  const id = S.id;
  try {
    const job = await api(`/api/jobs/${enc(id)}`);
    if (id !== S.id) return;
    S.job = job;
    S.status = job.status;
    S.result = job.result;
    S.report = job.result ? job.result.report : null;
    if (job.progress && !S.live) S.live = job.progress;
    if (S.report && S.report.kind === "measure") loadHistory();
    render();
  } catch (err) {
    if (id === S.id) $("message").textContent = String(err.message || err);
  }
}

async function loadPrompt() {
  const id = S.id;
  try {
    const prompt = await api(`/api/jobs/${enc(id)}/prompt`);
    if (id === S.id) { S.prompt = prompt; render(); }
  } catch (err) {
    if (id === S.id) $("message").textContent = String(err.message || err);
  }
}

function scheduleTrials() {
  if (S.trialsTimer) return;
  S.trialsTimer = setTimeout(() => { S.trialsTimer = null; loadTrials(); }, 200);
}

async function loadTrials() {
  const id = S.id;
  if (S.trialsBusy) { scheduleTrials(); return; }
  S.trialsBusy = true;
  try {
    const trials = await api(`/api/jobs/${enc(id)}/trials`);
    if (id === S.id) { S.trials = trials; render(); }
  } catch (err) {
    if (id === S.id) $("message").textContent = String(err.message || err);
  } finally {
    S.trialsBusy = false;
  }
}

async function loadHistory() {
  const id = S.id, r = S.report;
  try {
    const q = `ns=${enc(r.prompt_ns)}&key=${enc(r.prompt_key)}&tag=${enc(r.tag)}`;
    const history = await api(`/api/measures?${q}`);
    if (id === S.id) { S.history = history; render(); }
  } catch (err) {
    if (id === S.id) $("message").textContent = String(err.message || err);
  }
}

// -- the event stream -------------------------------------------------------------------------
// Server-Sent Events over fetch: parse "id:", "event:" and "data:" lines; resume from the last id
// after a dropped connection (Last-Event-ID), stop on run_finished or 204, like an EventSource.
function follow(id, onMessage) {
  const controller = new AbortController();
  let last = null, finished = false;
  async function run() {
    while (!finished && !controller.signal.aborted) {
      try {
        const extra = last === null ? {} : { "Last-Event-ID": last };
        const response = await fetch(`/api/jobs/${enc(id)}/events`,
                                     { headers: headers(extra), signal: controller.signal });
        if (response.status === 204) return;
        if (!response.ok) {
          const err = await refused(response);
          $("message").textContent = String(err.message);
          if (response.status !== 503) { notice(err); return; }
        } else {
          await readStream(response.body, (message) => {
            if (message.id !== undefined) last = message.id;
            if (message.event === "run_finished") finished = true;
            onMessage(message.event, message.data);
          });
        }
      } catch (err) {
        if (controller.signal.aborted) return;
      }
      if (!finished) await new Promise((r) => setTimeout(r, 3000));
    }
  }
  run();
  return { close: () => controller.abort() };
}

async function readStream(body, onMessage) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "", message = {};
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end).replace(/\r$/, "");
      buffer = buffer.slice(end + 1);
      if (line === "") {
        if (message.data !== undefined) onMessage({ event: "message", ...message });
        message = {};
      } else if (!line.startsWith(":")) {
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        message[field] = field === "data" && message.data !== undefined ? `${message.data}\n${text}` : text;
      }
    }
  }
}

function onStreamMessage(type, data) {
  if (type === "live_progress") {
    const p = JSON.parse(data);
    if (!S.live || S.live.step !== p.step) S.samples = [];
    S.live = p;
    S.samples.push([performance.now(), p.done]);
    if (S.samples.length > 120) S.samples.shift();
    renderProgress();
    renderSteps();
    return;
  }
  if (type === "unavailable") {
    $("message").textContent = JSON.parse(data).error.message;
    return;
  }
  if (!EVENT_TYPES.includes(type) && type !== "optimize_started") return;
  const event = JSON.parse(data);
  const p = event.payload || {};
  S.events += 1;
  const events = $("events");
  events.append(h("li", { text: `${event.type}: ${describe(event)}` }));
  if (events.children.length > 500) events.firstChild.remove();
  $("events-count").textContent = `(${S.events})`;
  switch (type) {
    case "run_status_changed":
      S.status = p.status;
      if (p.error) S.error = p.error;
      break;
    case "progress_changed":
      S.counts = p;
      scheduleTrials();
      break;
    case "trial_added_or_updated":
      scheduleTrials();
      break;
    case "iteration_recorded":
      S.iterations.set(p.iteration, { number: p.iteration, score: p.score, new_best: p.new_best });
      break;
    case "best_candidate_changed":
      S.best = { id: p.candidate_id, score: p.score };
      break;
    case "run_finished":
      S.status = p.status;
      if (p.error) S.error = p.error;
      S.live = null;
      loadJob();
      loadTrials();
      break;
    default:
  }
  render();
}

function describe(event) {
  const p = event.payload || {};
  if (typeof p.line === "string") return p.line;
  if (event.type === "run_status_changed" || event.type === "run_finished") {
    return p.status + (p.error ? `: ${p.error}` : "");
  }
  if (event.type === "progress_changed") {
    return `${p.evaluations_done}/${p.evaluations_total} evaluations; ${p.completed} completed, ` +
           `${p.failed} failed, ${p.rejected} rejected, ${p.running} running`;
  }
  if (event.type === "trial_added_or_updated") {
    return `${p.name || p.candidate_id}: score ${score(p.objective_score)} (${p.status})`;
  }
  if (event.type === "best_candidate_changed") return `new best ${p.candidate_id} (${score(p.score)})`;
  return JSON.stringify(p).slice(0, 160);
}

// A table body's cells carry their column's name: on a phone a row reads as "label value" lines.
// A compact table (the trials) reads as a line or two per row on a phone: its header cells name a
// short label (data-short) for the cells that need one ("score 0.50").
function labelled(tbody) {
  const heads = [...tbody.closest("table").querySelectorAll("thead th")];
  for (const tr of tbody.children) {
    [...tr.children].forEach((td, k) => {
      td.dataset.label = heads[k] ? heads[k].textContent : "";
      if (heads[k] && heads[k].dataset.short !== undefined) td.dataset.short = heads[k].dataset.short;
    });
  }
}

// -- rendering --------------------------------------------------------------------------------
let frame = 0;
function render() {
  if (frame) return;
  frame = requestAnimationFrame(() => {
    frame = 0;
    renderHead();
    renderProgress();
    renderSections();
    renderGate();
    renderChart();
    renderBest();
    renderMeasure();
    renderHistory();
    renderSteps();
    renderCost();
    renderTrials();
    renderLineage();
    renderRejections();
    $("report").textContent = S.result ? JSON.stringify(S.result, null, 2) : "(when the job has finished)";
  });
}

function kind() {
  return (S.job && S.job.kind) || (S.report && S.report.kind) || null;
}

function renderHead() {
  const job = S.job;
  const raw = S.status || (job && job.status) || "…";
  const m = S.report && S.report.kind === "measure" ? S.report : null;
  const below = !!(m && typeof m.fail_below === "number" && m.wilson.lower < m.fail_below);
  const drifted = !!(m && m.drift && m.drift.evidence && m.drift.evidence.first_shown);
  const status = shownStatus(raw, below || drifted, below ? BELOW : drifted ? DRIFTED : null);
  $("title").textContent = job ? (job.name || job.id) : `job ${S.id || ""}`;
  $("status").textContent = status === BELOW ? `${BELOW} (exit 3)` : status === DRIFTED ? `${DRIFTED} (exit 4)` : status;
  $("status").className = `pill ${pillClass(status)}`;
  $("status").dataset.status = raw;
  $("cancel").hidden = !(raw === "queued" || raw === "running");
  const bits = job ? [job.kind, `id ${job.id}`, `created ${new Date(job.created_at).toLocaleString()} (${ago(job.created_at)})`] : [];
  if (S.prompt) bits.push(`prompt ${S.prompt.ns}/${S.prompt.key} @ ${S.prompt.tag}`, `model ${S.prompt.model}`);
  $("subtitle").textContent = bits.join(" · ");
  // an optimize job leads with the selection's own estimate (never a single-run score)
  const o = S.report && S.report.kind === "optimize" ? S.report : null;
  const lead = o ? (o.gain_summary || o.headline || "") : "";
  $("headline").textContent = lead ? `gain: ${lead}` : "";
  $("headline").hidden = !lead;
  const error = (S.result && S.result.error) || S.error || (job && job.error);
  $("job-error").textContent = error ? `${raw === "cancelled" ? "cancelled" : "error"}: ${error}` : "";
  $("job-error").hidden = !error;
}

function rate() {
  const xs = S.samples;
  if (xs.length < 2) return null;
  const [t0, d0] = xs[0], [t1, d1] = xs[xs.length - 1];
  const span = (t1 - t0) / 1000;
  if (span < 1.5 || d1 <= d0) return null;  // too early to tell: no figure rather than a wild one
  return (d1 - d0) / span;
}

function runningStep() {
  const steps = (S.trials && S.trials.steps) || [];
  return steps.find((st) => st.state === "running") || null;
}

function renderProgress() {
  const live = FINISHED.includes(S.status) ? null : S.live;
  const c = S.counts;
  let done = 0, total = 0, label = "";
  if (live && live.total) {
    done = Math.min(live.done, live.total);
    total = live.total;
    const step = runningStep();
    const name = step && step.index === live.step ? step.name : `step ${live.step}`;
    const r = rate();
    const eta = r ? (total - done) / r : null;
    label = `${name}: ${int(done)}/${int(total)} evaluations` +
      (r ? ` · ${r >= 10 ? Math.round(r) : r.toFixed(1)}/s · about ${duration(eta)} left` : "");
  } else if (c) {
    done = c.evaluations_done; total = c.evaluations_total;
    label = `${int(done)}/${int(total)} evaluations` + (FINISHED.includes(S.status) ? "" : " (at the last step boundary)");
  } else if (S.status === "queued") {
    label = "queued: waiting for a worker";
  }
  $("bar").style.width = total ? `${(100 * done) / total}%` : "0";
  $("bar-track").dataset.done = String(done);
  $("bar-track").dataset.total = String(total);
  $("count").textContent = label;
  $("counts").textContent = c ? `trials: ${c.completed} completed, ${c.failed} failed, ${c.running} running, ` +
    `${c.rejected} rejected` + (S.best ? ` · best ${S.best.id} (raw score ${score(S.best.score)})` : "") : "";
}

// -- compress: a bar per section --------------------------------------------------------------
function sectionRows() {
  const rows = new Map();
  if (!S.prompt) return rows;
  for (const sec of S.prompt.sections) {
    rows.set(sec.path, { path: sec.path, body: sec.body, tokens: sec.tokens, frozen: sec.frozen, proposal: null });
  }
  const isCandidate = (name) => /^candidate/.test(name || "");
  const t = S.trials;
  if (t) {
    for (const r of t.running) {
      if (!isCandidate(r.name)) continue;
      for (const ch of r.changes) {
        const row = rows.get(ch.path);
        if (row) row.proposal = { body: ch.body, tokens: ch.tokens, state: "pending", note: "being evaluated" };
      }
    }
    for (const tr of t.trials) {
      if (!isCandidate(tr.name) || tr.changes.length !== 1) continue;
      const ch = tr.changes[0], row = rows.get(ch.path);
      if (!row) continue;
      // the gate's reading so far: a verdict once decided, else the round and its estimate
      const live = tr.extra || {};
      const state = live.verdict === "accept" ? "accepted" : live.verdict === "reject" ? "rejected" : "pending";
      row.proposal = { body: ch.body, tokens: ch.tokens, state, score: tr.score, live };
    }
  }
  const report = S.report && S.report.kind === "compress" ? S.report : null;
  if (report) {
    for (const m of report.modifications) {
      const row = rows.get(m.section_path.join("/"));
      if (!row) continue;
      const body = m.proposed_body;
      row.proposal = { ...(row.proposal || {}), body, state: "accepted", mod: m,
                       tokens: m.proposed_tokens ?? row.tokens - m.token_reduction };
    }
    for (const r of report.rejected) {
      const row = rows.get(r.section_path.join("/"));
      if (!row) continue;
      const prev = row.proposal || {};
      row.proposal = { ...prev, body: r.proposed_body ?? prev.body, state: "rejected", rej: r,
                       tokens: r.proposed_tokens ?? prev.tokens ?? row.tokens - r.token_reduction };
    }
    for (const e of report.proposal_errors || []) {
      const row = rows.get((e.path || []).join("/"));
      if (row) row.error = e.refused && e.proposed_body != null
        ? `${e.error} (${e.attempts} attempt(s), not evaluated) — last proposal: ${e.proposed_body}` : e.error;
    }
    for (const u of report.untried || []) {
      const row = rows.get((u.path || []).join("/"));
      if (row) row.untried = u.reason;
    }
  }
  return rows;
}

function gateLine(g) {
  if (!g) return null;
  const errors = g.candidate_errors || g.baseline_errors
    ? ` · errors: ${g.baseline_errors} baseline, ${g.candidate_errors} candidate` : "";
  // the pass rates are over the samples the candidate was run on: say how many of all
  const n = typeof g.evaluated_samples === "number" ? g.evaluated_samples : null;
  const over = n === null ? "" : n < g.samples ? ` on ${n} of ${g.samples} samples` : ` on all ${g.samples} samples`;
  if (g.gate === "strict") {
    const ids = g.regressed.slice(0, 6).join(", ") + (g.regressed.length > 6 ? ", …" : "");
    const count = g.regressed.length;
    if (g.stopped_early) {
      // fail-fast ended the candidate's runs: its pass rate over those few samples says nothing
      const after = n !== null && n < g.samples ? ` after ${n} of ${g.samples} samples` : "";
      return `strict: stopped early by fail-fast${after}: at least ${count} regression${count === 1 ? "" : "s"}` +
        `${ids ? ` (${ids})` : ""}${errors}`;
    }
    return `strict: ${count} sample${count === 1 ? "" : "s"} regressed${ids ? ` (${ids})` : ""}` +
      `; pass rate ${pct(g.baseline_pass_rate)} → ${pct(g.candidate_pass_rate)}${over}${errors}`;
  }
  return `${g.gate}: baseline ${pct(g.baseline_pass_rate)} → ${pct(g.candidate_pass_rate)}${over}, ` +
    `${g.pairs} run(s) each: estimated drop ${signedPct(g.drop)} [${signedPct(g.drop_low)}, ${signedPct(g.drop_high)}]` +
    ` vs margin ${pct(g.margin, 0)} (alpha ${g.alpha}) · ${int(g.candidate_runs)} candidate evaluations${errors}`;
}

// One scale for every row's interval: from the lowest bound (or -margin) to the highest (or twice
// the margin), so intervals compare by eye across rows.
function intervalScale(gates) {
  const gs = gates.filter((g) => g && g.gate !== "strict");
  if (!gs.length) return null;
  const lo = Math.max(-1, Math.min(...gs.map((g) => Math.min(-g.margin, g.drop_low))) - 0.02);
  const hi = Math.min(1, Math.max(...gs.map((g) => Math.max(2 * g.margin, g.drop_high))) + 0.02);
  return { lo, hi };
}

// The gate's interval against its margin: accepted when the whole interval is left of the margin.
// Its colour is the row's state, as the legend says (accepted, rejected, being evaluated).
function intervalSvg(g, state, scale) {
  if (!g || g.gate === "strict" || !scale) return null;
  const { lo, hi } = scale;
  const W = 300, Y = 19, x = (v) => 6 + ((Math.max(lo, Math.min(hi, v)) - lo) / (hi - lo)) * (W - 12);
  const cls = state === "accepted" || state === "rejected" ? state : "pending";
  return s("svg", { class: "interval", viewBox: `0 0 ${W} 28`, role: "img", "data-lo": lo, "data-hi": hi,
                    "data-state": cls,
                    "aria-label": `drop ${signedPct(g.drop)}, interval up to ${signedPct(g.drop_high)}, margin ${pct(g.margin, 0)}` },
    s("line", { class: "axis", x1: 6, x2: W - 6, y1: Y, y2: Y }),
    s("line", { class: "zero", x1: x(0), x2: x(0), y1: Y - 6, y2: Y + 6 }),
    s("line", { class: "margin", x1: x(g.margin), x2: x(g.margin), y1: 13, y2: 27 }),
    s("line", { class: `ci ${cls}`, x1: x(g.drop_low), x2: x(g.drop_high), y1: Y, y2: Y }),
    s("circle", { class: `est ${cls}`, cx: x(g.drop), cy: Y, r: 3.5 }),
    s("text", { x: x(g.margin), y: 9, "text-anchor": "middle", text: `margin ${pct(g.margin, 0)}` }));
}

function verdict(row) {
  const p = row.proposal;
  if (row.frozen) return [h("span", { class: "mute", text: "frozen: never edited" })];
  if (row.error) return [h("b", { class: "rejected", text: "proposal failed" }), ` ${row.error}`];
  if (!p) {
    if (row.untried) return [h("span", { class: "mute", text: row.untried })];
    if (FINISHED.includes(S.status)) {
      const min = S.prompt && S.prompt.settings ? S.prompt.settings.min_section_tokens : null;
      return [h("span", { class: "mute", text: min && row.tokens < min
        ? `not proposed: under min_section_tokens (${min})` : "no shorter body was proposed" })];
    }
    return [h("span", { class: "mute", text: "waiting for a proposal" })];
  }
  const saved = row.tokens - p.tokens;
  const tokens = `${int(row.tokens)} → ${int(p.tokens)} tokens (${saved >= 0 ? "−" : "+"}${int(Math.abs(saved))})`;
  if (p.state === "accepted") {
    return [h("b", { class: "accepted", text: "accepted" }), ` ${tokens}`];
  }
  if (p.state === "rejected") {
    const r = p.rej;
    const where = r.stage === "greedy" ? "by greedy selection (with the other accepted edits)" : "at the candidate step";
    const n = r.regression_count, plural = n === 1 ? "" : "s";
    const count = r.gate && r.gate.gate !== "strict" ? "" : r.regression_count_is_lower_bound
      ? `: at least ${n} regression${plural} (fail-fast skipped its other evaluations once one was found)`
      : `: ${n} regression${plural}`;
    return [h("b", { class: "rejected", text: "rejected" }), ` ${where}${count}; ${tokens}`];
  }
  const live = p.live || {};
  const round = live.round ? ` (round ${live.round})` : "";
  if (p.state === "accepted" || p.state === "rejected") {  // decided by the gate; the report is final
    return [h("b", { class: p.state, text: p.state }), ` at the candidate step${round}; ${tokens}`];
  }
  if (p.score === undefined) return [h("b", { class: "pending", text: "being evaluated" }), ` ${tokens}`];
  const reading = typeof live.drop === "number" ? `, estimated drop ${signedPct(live.drop)}` +
    (typeof live.drop_high === "number" && live.drop_high < 1 ? ` (bound ${signedPct(live.drop_high)})` : "") : "";
  const part = typeof live.evaluated_samples === "number" && typeof live.samples === "number" &&
    live.evaluated_samples < live.samples ? ` on ${live.evaluated_samples} of ${live.samples} samples` : "";
  return [h("b", { class: "pending", text: "undecided" }),
    ` after round ${live.round || 1}: pass rate ${pct(p.score)}${part}${baselineNote()}${reading}; more runs coming; ${tokens}`];
}

function baselineNote() {
  const base = S.trials && S.trials.trials.find((t) => t.name === "baseline");
  return base && typeof base.score === "number" ? ` (baseline ${pct(base.score)})` : "";
}

function renderSections() {
  const show = kind() === "compress";
  $("sections-box").hidden = !show;
  if (!show) return;
  const rows = [...sectionRows().values()];
  const scale = Math.max(1, ...rows.map((r) => r.tokens));
  const report = S.report && S.report.kind === "compress" ? S.report : null;
  const whole = rows.reduce((a, r) => a + r.tokens, 0);
  const share = report && whole ? ` (${pct(report.total_token_reduction / whole)} of the prompt's ${int(whole)})` : "";
  $("sections-note").textContent = report
    ? `· ${int(report.total_token_reduction)} tokens saved${share} by ${report.modifications.length} accepted edit(s), ` +
      `${report.rejected.length} rejected · baseline pass rate ${pct(report.baseline_pass_rate)}`
    : S.prompt ? `· ${rows.length} sections, ${int(whole)} tokens` : "";
  const gateOf = (p) => p && (p.mod ? p.mod.gate : p.rej ? p.rej.gate : null);
  const ciScale = intervalScale(rows.map((row) => gateOf(row.proposal)));
  const items = rows.map((row) => {
    const p = row.proposal;
    const state = row.frozen ? "frozen" : p ? p.state : "orig";
    const bar = h("div", { class: "sbar", title: `${row.tokens} tokens` + (p ? ` → ${p.tokens}` : "") },
      h("div", { class: "orig" }), p ? h("div", { class: `prop ${p.state}` }) : null);
    bar.children[0].style.width = `${(100 * row.tokens) / scale}%`;
    if (p) bar.children[1].style.width = `${(100 * Math.max(0, p.tokens)) / scale}%`;
    const li = h("li", { class: "section", "data-path": row.path, "data-state": state },
      h("span", { class: `path ${state}`, text: row.path }), bar,
      h("span", { class: `tokens small ${state}`, text: p ? `${int(row.tokens)} → ${int(p.tokens)}` : int(row.tokens) }),
      h("span", { class: "verdict small" }, ...verdict(row)));
    const g = gateOf(p);
    const why = [];
    // fail-fast's lower bound is said once, by the gate's line
    const repeats = (reason) => !!(g && g.stopped_early && /^at least \d+ regression/.test(reason));
    if (p && p.rej && p.rej.reason) { if (!repeats(p.rej.reason)) why.push(p.rej.reason); }
    else if (p && !p.mod && p.live && p.live.reason && !repeats(p.live.reason)) why.push(p.live.reason);
    if (g) why.push(gateLine(g));
    const f = p && (p.mod ? p.mod.faithfulness : p.rej ? p.rej.faithfulness : null);
    if (f) why.push(`faithfulness: support ${pct(f.support, 0)} (threshold ${pct(f.threshold, 0)}), coverage ${pct(f.coverage, 0)}`);
    if (f && f.judge) why.push(`judge ${f.judge.model}: ${f.judge.same ? "same instructions" : "differs"} (${f.judge.reason})`);
    if (why.length) li.append(h("span", { class: "why small", text: why.join(" · ") }));
    const actions = h("span", { class: "actions small" });
    if (g) { const svg = intervalSvg(g, p.state, ciScale); if (svg) actions.append(svg); }
    if (p && p.body != null) {
      const open = S.openDiffs.has(row.path);
      actions.append(h("button", { class: "diff-toggle", "data-path": row.path, text: open ? "hide diff" : "show diff",
        onclick: () => { if (open) S.openDiffs.delete(row.path); else S.openDiffs.add(row.path); renderSections(); } }));
    }
    if (actions.childNodes.length) li.append(actions);
    if (p && p.body != null && S.openDiffs.has(row.path)) li.append(diffView(row.body, p.body));
    if (f && f.sentences) li.append(sentenceMap(f, p.mod ? seenLoss(g) : ""));
    return li;
  });
  $("sections").replaceChildren(...items);
}

// -- the sentence map of a proposal (issue 31) ----------------------------------------------------
// Which original sentences the proposal dropped (a rule among them marked, and listed as not
// verified by the dataset when the job allowed it), and where each proposal sentence comes from.
// What the gate saw an accepted edit lose (core/compress/output.py's seen_loss, the same words):
// a dropped rule is then not "not verified".
function seenLoss(g) {
  if (!g) return "";
  const r = g.regressed || [];
  if (r.length) return `${r.length} sample(s) it passed every time (${r.slice(0, 3).join(", ")}${r.length > 3 ? ` and ${r.length - 3} more` : ""})`;
  if (g.drop_low > 0) return `a drop of ${signedPct(g.drop)} (bounds ${signedPct(g.drop_low)} to ${signedPct(g.drop_high)}) within the margin`;
  return "";
}
function sentenceMap(f, loss) {
  const m = f.sentences;
  const dropped = m.original.map((o, i) => [o, i]).filter(([o]) => o.status === "dropped");
  const merged = m.original.filter((o) => o.status === "merged").length;
  const head = `sentence map: ${m.original_count} original sentence(s): ${dropped.length} dropped, ${merged} merged; ` +
    `${m.proposal_count} in the proposal (lowest support ${pct(m.min_support, 0)})`;
  const items = dropped.map(([o, i]) => h("li", { class: "dropped" + (o.rule ? " rule" : "") },
    h("span", { class: "sid", text: `o${i + 1}` }), h("s", { text: o.text }),
    o.rule ? h("span", { class: "rule", text: ` rule: ${o.rule}` }) : null));
  const from = m.proposal.map((p, j) => h("li", { class: "from" },
    h("span", { class: "sid", text: `p${j + 1} ← ${p.sources.map((i) => `o${i + 1}`).join(", ") || "no source"}` }),
    h("span", { text: ` ${p.text}` })));
  const seen = loss ? `dropped, and the gate saw the edit lose ${loss}` : "not verified by the dataset";
  const unverified = (f.dropped_rules || []).map((r) => h("li", { class: "unverified", text: `${seen}: ${r}` }));
  return h("details", { class: "sentence-map small" }, h("summary", { text: head }),
    h("ul", {}, ...items, ...unverified, ...from));
}

// -- a word diff --------------------------------------------------------------------------------
// Tokens keep every character (whitespace runs, runs of letters and digits, and each other
// character alone), so a diff reads back as both texts and "parcels" -> "parcels," is one added
// comma, not a word replaced. An LCS over the tokens (lines when the texts are long) gives equal,
// removed and added runs; removed and added tokens with only whitespace between them make one
// change, shown as the removed run, then the added run, apart: "Questions" then "When", never
// "QuestionsWhen". A change of punctuation or spacing only is marked lighter and not counted.
const TOKEN = /\s+|[\p{L}\p{N}_]+|[^\s\p{L}\p{N}_]/gu;
const WORDISH = /[\p{L}\p{N}]/u;

function tokens(text, lines) {
  return lines ? text.split(/(?<=\n)/) : text.match(TOKEN) || [];
}

function diffOps(a, b) {
  let x = tokens(a, false), y = tokens(b, false);
  if (x.length * y.length > 4e6) { x = tokens(a, true); y = tokens(b, true); }
  if (x.length * y.length > 4e6) return [["-", a], ["+", b]];
  // trim the common head and tail, then an LCS table over what is left
  let head = 0;
  while (head < x.length && head < y.length && x[head] === y[head]) head++;
  let tail = 0;
  while (tail < x.length - head && tail < y.length - head && x[x.length - 1 - tail] === y[y.length - 1 - tail]) tail++;
  const xs = x.slice(head, x.length - tail), ys = y.slice(head, y.length - tail);
  const n = xs.length, m = ys.length, w = m + 1;
  const L = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      L[i * w + j] = xs[i] === ys[j] ? L[(i + 1) * w + j + 1] + 1 : Math.max(L[(i + 1) * w + j], L[i * w + j + 1]);
    }
  }
  const ops = [];
  const push = (op, text) => {
    const lastOp = ops[ops.length - 1];
    if (lastOp && lastOp[0] === op) lastOp[1] += text; else ops.push([op, text]);
  };
  if (head) push("=", x.slice(0, head).join(""));
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (xs[i] === ys[j]) { push("=", xs[i]); i++; j++; }
    else if (L[(i + 1) * w + j] >= L[i * w + j + 1]) { push("-", xs[i]); i++; }
    else { push("+", ys[j]); j++; }
  }
  while (i < n) push("-", xs[i++]);
  while (j < m) push("+", ys[j++]);
  if (tail) push("=", x.slice(x.length - tail).join(""));
  return ops;
}

// The ops as a reader takes them: equal text ({same}) and changes ({del, ins}). Whitespace that is
// equal between two changes joins the change on both sides, so a rewritten phrase is one struck
// run and one new run instead of word / word / word alternating.
function diffChanges(ops) {
  const out = [];
  let del = "", ins = "";
  const flush = () => { if (del || ins) out.push({ del, ins }); del = ""; ins = ""; };
  ops.forEach(([op, text], k) => {
    if (op === "-") del += text;
    else if (op === "+") ins += text;
    else if ((del || ins) && k + 1 < ops.length && !/\S/.test(text)) { del += text; ins += text; }
    else { flush(); out.push({ same: text }); }
  });
  flush();
  return out;
}

function diffView(original, proposed) {
  const changes = diffChanges(diffOps(original, proposed));
  const words = (t) => (t.match(/[\p{L}\p{N}_]+/gu) || []).length;
  let removed = 0, added = 0, minor = 0;
  const nodes = [];
  for (const c of changes) {
    if (c.same !== undefined) { nodes.push(document.createTextNode(c.same)); continue; }
    const small = !WORDISH.test(c.del) && !WORDISH.test(c.ins);
    if (small) minor++; else { removed += words(c.del); added += words(c.ins); }
    // spacing only (a line break become a space): the new spacing, unmarked; the old one is kept
    // in the text (the diff still reads back as the original) but not shown
    const cls = small ? (/\S/.test(c.del + c.ins) ? "minor" : "minor space") : null;
    if (c.del) nodes.push(h("del", { class: cls, title: small ? "punctuation or spacing removed" : "removed", text: c.del }));
    if (c.ins) nodes.push(h("ins", { class: cls, title: small ? "punctuation or spacing added" : "added", text: c.ins }));
  }
  const stats = `original → proposed: ${removed} word(s) removed, ${added} added` +
    (minor ? `; ${minor} punctuation or spacing change(s), not counted` : "");
  return h("div", { class: "diff", "data-removed": removed, "data-added": added, "data-minor": minor },
    h("span", { class: "stats small", text: stats }), h("pre", {}, ...nodes));
}

// -- the gate: what the baseline said, and the combination's decision --------------------------
function renderGate() {
  const r = S.report && S.report.kind === "compress" ? S.report : null;
  const show = !!(r && (r.gate || r.assessment || r.combined || r.ablation || r.sensitivity_unchecked));
  $("gate-box").hidden = !show;
  if (!show) return;
  const rows = [];
  const a = r.assessment;
  if (r.gate) rows.push(["gate", r.gate + (a ? ` — ${a.reason}` : "")]);
  if (a) {
    rows.push(["baseline", `${int(a.runs)} evaluations, pass rate ${pct(a.pass_rate)}, ${int(a.errors)} error(s) ` +
      `(${pct(a.error_rate)}), ${a.flaky} flaky sample(s) of ${a.sample_ids.length}`]);
    if (a.detectable_drop != null) rows.push(["detectable drop", `${pct(a.detectable_drop)} at this run budget`]);
    if (a.failure) rows.push(["no evidence", a.failure]);
  }
  if (r.ablation) {
    const ab = r.ablation;
    rows.push(["ablation", `${ab.sections.length} mutable section(s) emptied (-${int(ab.tokens)} tokens): ` +
      (ab.noticed ? "noticed (rejected)" : "NOT noticed (non-inferior)") + (ab.stats ? ` — ${gateLine(ab.stats)}` : "")]);
  }
  if (r.sensitivity_unchecked) rows.push(["sensitivity", "unchecked (require_sensitivity: false): no decision is known to be protected"]);
  if (r.combined) rows.push(["combined", gateLine(r.combined)]);
  $("gate").replaceChildren(...rows.flatMap(([k, v]) => [h("dt", { text: k }), h("dd", { text: v })]));
}

// -- steps and model calls --------------------------------------------------------------------
function renderSteps() {
  const steps = (S.trials && S.trials.steps) || [];
  $("steps-box").hidden = steps.length === 0;
  if (!steps.length) return;
  const live = S.live && !FINISHED.includes(S.status) ? S.live : null;
  $("steps").replaceChildren(...steps.map((st) => {
    let evals, time, speed;
    if (st.state === "running") {
      const mine = live && live.step === st.index;
      evals = mine ? `${int(live.done)}/${int(live.total)}` : `0/${int(st.evaluations)}`;
      const started = Date.parse(st.started_at);
      time = isFinite(started) ? `${duration(Math.max(0, (Date.now() - started) / 1000))} so far` : "-";
      const r = mine ? rate() : null;
      speed = r ? `${r >= 10 ? Math.round(r) : r.toFixed(1)}/s` : "-";
    } else {
      evals = int(st.evaluations);
      time = duration(st.seconds);
      const r = st.seconds ? st.evaluations / st.seconds : null;
      speed = r ? `${r >= 10 ? Math.round(r) : r.toFixed(1)}/s` : "-";
    }
    return h("tr", { "data-state": st.state },
      h("td", { class: "num wide-only", text: st.index }),
      h("td", { text: st.name + (st.candidates > 1 && /^candidates/.test(st.name)
        ? ` · ${st.candidates} ${kind() === "compress" ? "edits" : "candidates"}` : "") }),
      h("td", { class: `wide-only ${st.state === "running" ? "running" : "completed"}`, text: st.state }),
      h("td", { text: evals }), h("td", { class: "num", text: time }), h("td", { class: "num", text: speed }));
  }));
}

function budgetText(b) {
  const caps = [];
  if (b.max_cost_usd !== null && b.max_cost_usd !== undefined) caps.push(`$${b.spent_usd.toPrecision(4)} of $${b.max_cost_usd}`);
  if (b.max_tokens !== null && b.max_tokens !== undefined) caps.push(`${int(b.spent_tokens)} of ${int(b.max_tokens)} tokens`);
  let text = `spent ${caps.join(" and ")}`;
  if (b.exhausted) {
    text += ` · ran out at step ${b.step}: overspend $${b.overspend_usd.toPrecision(3)} by ${int(b.over_calls)} call(s) in flight, ` +
      `${int(b.skipped_calls)} call(s) skipped`;
  }
  return text;
}

function renderCost() {
  const stats = S.report && S.report.stats;
  const steps = (S.trials && S.trials.steps) || [];
  const show = !!stats || steps.some((st) => st.state === "done");
  $("cost-box").hidden = !show;
  if (!show) return;
  let rows;
  if (stats) {
    const saved = stats.cache_hits + stats.fail_fast_skipped;
    rows = [
      ["evaluations", int(stats.evaluations)],
      ["model calls", `${int(stats.model_calls)} for evaluations, ${int(stats.proposal_calls)} for proposals`],
      ["saved by the cache", int(stats.cache_hits)],
      ["saved by fail-fast", int(stats.fail_fast_skipped)],
      ["saved in all", stats.evaluations ? `${int(saved)} (${pct(saved / stats.evaluations)} of the evaluations)` : "0"],
      ["errors", int(stats.errors)],
      ["steps", int(stats.steps)],
    ];
    const b = S.report.budget;
    if (b) rows.push(["budget", budgetText(b)]);
  } else {
    const done = steps.filter((st) => st.state === "done").reduce((a, st) => a + st.evaluations, 0);
    const failed = trialList().filter((t) => t.status === "failed").length;
    rows = [
      ["evaluations so far", int(done)],
      ["saved by the cache and fail-fast", "counted when the job finishes"],
      ["failed trials", int(failed)],
    ];
  }
  $("cost").replaceChildren(...rows.flatMap(([k, v]) => [h("dt", { text: k }),
    h("dd", { class: (/errors|failed/.test(k) && v !== "0") || (k === "budget" && /ran out/.test(v)) ? "failed" : "", text: v })]));
}

// -- optimize: best so far, trials, lineage, rejections ------------------------------------------
function iterationPoints() {
  const r = S.report && S.report.kind === "optimize" ? S.report : null;
  if (r) {
    return r.iterations.map((it) => ({ number: it.number, score: it.score, best: it.best_so_far, new_best: it.new_best,
                                       failed: it.status !== "success" }));
  }
  const points = [...S.iterations.values()].sort((a, b) => a.number - b.number);
  let best = null;
  return points.map((p) => {
    if (p.new_best || best === null) best = p.score;
    return { number: p.number, score: p.score, best, new_best: p.new_best, failed: p.score === null };
  });
}

function chartWidth(box) {
  return Math.max(280, Math.min(900, Math.round(box.clientWidth || 640)));
}

// A "nice" axis: ticks every 1, 2, 2.5 or 5 × 10^k, about ``count`` of them, covering lo..hi.
function niceTicks(lo, hi, count = 5) {
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((st) => st >= raw) || 10 * mag;
  const a = Math.floor(lo / step + 1e-9) * step, b = Math.ceil(hi / step - 1e-9) * step;
  const ticks = [];
  for (let v = a; v <= b + step / 2; v += step) ticks.push(Math.round(v / step) * step);
  return { lo: a, hi: b, ticks, step };
}

function renderChart() {
  const show = kind() === "optimize";
  $("chart-box").hidden = !show;
  if (!show) return;
  const points = iterationPoints();
  const box = $("chart");
  box.dataset.points = String(points.length);
  if (!points.length) {
    box.replaceChildren(h("p", { class: "mute", text: "the first iteration (the baseline) is being evaluated" }));
    $("chart-note").textContent = "";
    return;
  }
  const r = S.report && S.report.kind === "optimize" ? S.report : null;
  $("chart-note").textContent = `· by iteration (x), ${r ? `${r.objective}, ${r.scorer_description}` : "live"}; ` +
    "dots: each iteration's best, green: a new best";
  const values = points.flatMap((p) => [p.score, p.best]).filter((v) => typeof v === "number");
  let lo = Math.min(...values), hi = Math.max(...values);
  if (lo >= 0 && hi <= 1) { lo = 0; hi = 1; } else { const pad = (hi - lo) * 0.1 || 0.5; lo -= pad; hi += pad; }
  // drawn at the box's own width, so its labels keep their size on a phone
  const W = chartWidth(box), H = 220, L = 44, R = 12, T = 12, B = 30;
  const last = Math.max(1, points[points.length - 1].number);
  const X = (n) => L + (n / last) * (W - L - R);
  const Y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "best score so far by iteration" });
  for (let k = 0; k <= 4; k++) {
    const v = lo + ((hi - lo) * k) / 4;
    svg.append(s("line", { class: "tick", x1: L, x2: W - R, y1: Y(v), y2: Y(v) }),
               s("text", { x: L - 6, y: Y(v) + 4, "text-anchor": "end", text: score(v) }));
  }
  const step = Math.max(1, Math.ceil(last / Math.max(2, Math.floor((W - L - R) / 40))));
  for (let n = 0; n <= last; n += step) svg.append(s("text", { x: X(n), y: H - 10, "text-anchor": "middle", text: n }));
  let d = "";
  points.forEach((p, k) => {
    if (typeof p.best !== "number") return;
    d += k === 0 || !d ? `M${X(p.number)},${Y(p.best)}` : `H${X(p.number)}V${Y(p.best)}`;
  });
  svg.append(s("path", { class: "best", d }));
  for (const p of points) {
    if (typeof p.score !== "number") continue;
    svg.append(s("circle", { class: `point${p.new_best ? " new" : ""}`, cx: X(p.number), cy: Y(p.score), r: 4 },
      s("title", { text: `iteration ${p.number}: score ${score(p.score)}${p.new_best ? " (new best)" : ""}` })));
  }
  box.replaceChildren(svg);
}

function trialList() {
  return S.trials ? S.trials.trials : [];
}

function bestId() {
  const r = S.report && S.report.kind === "optimize" ? S.report : null;
  return r ? r.best_candidate_id : S.best ? S.best.id : null;
}

function renderTrials() {
  const show = kind() === "optimize";
  $("trials-box").hidden = !show;
  if (!show) return;
  const best = bestId();
  $("trials").replaceChildren(...trialList().map((t) => {
    const sm = t.summary || {};
    return h("tr", { class: t.candidate_id === best ? "best" : "", "data-candidate": t.candidate_id },
      h("td", { text: t.candidate_id + (t.candidate_id === best ? " ★" : "") }),
      h("td", { class: "num wide-only", text: t.step_index }),
      h("td", { class: t.status, text: t.status }),
      h("td", { class: "num", text: score(t.score) }),
      h("td", { class: "num", text: money(sm.total_cost) }),
      h("td", { class: "num", text: ms(sm.avg_latency_ms) }),
      h("td", { class: t.parents.length ? "" : "none", text: t.parents.join(", ") || "-" }),
      h("td", { class: `wrap why${S.openTrials.has(t.candidate_id) ? " open" : ""}${t.error || t.rationale ? "" : " none"}`,
                text: t.error ? `error: ${t.error}` : t.rationale || "-",
                onclick: () => { toggle(S.openTrials, t.candidate_id); renderTrials(); } }));
  }));
  labelled($("trials"));
}

// The best candidate's prompt: each section it changed, diffed against the baseline's (what
// `optiflow apply` writes), and the model params it sets.
function renderBest() {
  const show = kind() === "optimize";
  $("best-box").hidden = !show;
  if (!show) return;
  const id = bestId();
  const r = S.report && S.report.kind === "optimize" ? S.report : null;
  const trial = trialList().find((t) => t.candidate_id === id);
  const base = new Map(((S.prompt && S.prompt.sections) || []).map((sec) => [sec.path, sec.body]));
  let changes = trial ? trial.changes.map((c) => ({ path: c.path, body: c.body })) : [];
  if (!changes.length && r && r.best_candidate_id !== r.baseline_candidate_id) {
    changes = (r.best_overrides || []).map((o) => ({ path: o.path.join("/"), body: o.body }));
  }
  const params = trial ? Object.entries(trial.model_params || {}) : [];
  const box = $("best");
  const baseline = r ? r.baseline_candidate_id : null;
  if (!id || (id === baseline && !changes.length)) {
    $("best-note").textContent = "";
    box.replaceChildren(h("p", { class: "mute", text: id ? "the baseline is still the best: nothing to apply"
      : "no best candidate yet" }));
    return;
  }
  // a best the held-out test split did not confirm: the job did not improve, nothing is applied
  const unconfirmed = !!r && id !== baseline && ((r.test && r.test.confirmed === false)
    || String(r.gain_summary || "").startsWith("not confirmed on held-out data"));
  $("best-note").textContent = `· ${id}${trial ? `, raw score ${score(trial.score)} (as evaluated)` : ""}; against the baseline`
    + (unconfirmed ? " · not confirmed on held-out data: nothing is applied" : "");
  const items = changes.map((c) => h("div", { class: "best-section", "data-path": c.path },
    h("b", { text: c.path }),
    base.has(c.path) ? diffView(base.get(c.path), c.body) : h("pre", { text: c.body })));
  if (params.length) {
    items.push(h("p", { class: "small" }, h("b", { text: "model params: " }),
      params.map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ")));
  }
  box.replaceChildren(...(items.length ? items : [h("p", { class: "mute", text: "no change against the baseline" })]));
}

function renderLineage() {
  const show = kind() === "optimize";
  $("lineage-box").hidden = !show;
  if (!show) return;
  const byId = new Map(trialList().map((t) => [t.candidate_id, t]));
  const chain = [];
  let id = bestId();
  const seen = new Set();
  while (id && !seen.has(id)) {
    seen.add(id);
    const t = byId.get(id);
    chain.push({ id, t });
    id = t && t.parents.length ? t.parents[0] : null;
  }
  $("lineage").replaceChildren(...(chain.length ? chain.map(({ id: cid, t }, k) => h("li", {},
    h("b", { text: cid }), t ? ` · raw score ${score(t.score)}` : "",
    k === chain.length - 1 ? " · the baseline" : "",
    t && t.rationale && t.rationale !== "baseline" ? h("span", { class: "mute", text: ` · ${t.rationale}` }) : null))
    : [h("li", { class: "mute", text: "no best candidate yet" })]));
  const r = S.report && S.report.kind === "optimize" ? S.report : null;
  const reason = r ? r.termination_reason : null;
  $("termination").replaceChildren(...(reason ? [h("b", { text: "stopped: " }),
    `${reason.cause}${reason.optimizer_reason ? ` (${reason.optimizer_reason})` : ""} — ${reason.message}`,
    r.test ? ` · test split raw scores: baseline ${score(r.test.baseline.score)}, best ${score(r.test.best.score)}` : "",
    r.gain_summary ? ` · ${r.gain_summary}` : ""]
    : S.status && !FINISHED.includes(S.status) ? [h("span", { class: "mute", text: "running: no termination yet" })] : []));
}

function renderRejections() {
  const list = (S.trials && S.trials.rejections) || [];
  const show = kind() === "optimize" && list.length > 0;
  $("rejections-box").hidden = !show;
  if (!show) return;
  $("rejections").replaceChildren(...list.map((r) => h("tr", {},
    h("td", { class: "num", text: r.iteration ?? "-" }), h("td", {}, h("code", { text: r.reason_code })),
    h("td", { class: "wrap why", text: r.message, onclick: (e) => e.currentTarget.classList.toggle("open") }),
    h("td", { class: r.parents.length ? "" : "none", text: r.parents.join(", ") || "-" }))));
  labelled($("rejections"));
}

// -- measure: the pass rate, its interval, latencies; the history of its prompt and tag ----------
function renderMeasure() {
  const r = S.report && S.report.kind === "measure" ? S.report : null;
  $("measure-box").hidden = !r;
  if (!r) return;
  const ci = h("div", { class: "ci", title: `95% Wilson interval ${pct(r.wilson.lower)} – ${pct(r.wilson.upper)}` },
    h("div"), h("i"));
  ci.children[0].style.left = `${100 * r.wilson.lower}%`;
  ci.children[0].style.width = `${100 * (r.wilson.upper - r.wilson.lower)}%`;
  ci.children[1].style.left = `${100 * r.pass_rate}%`;
  const floor = typeof r.fail_below === "number"
    ? h("p", { class: r.wilson.lower < r.fail_below ? "failed" : "completed",
               text: `floor ${pct(r.fail_below)}: lower bound ${pct(r.wilson.lower)} is ${r.wilson.lower < r.fail_below ? "under it (exit 3)" : "above it"}` })
    : null;
  const lat = (p) => `p50 ${ms(p.p50)} · p95 ${ms(p.p95)} · p99 ${ms(p.p99)}`;
  $("measure").replaceChildren(
    h("div", { class: "pass" }, h("div", { class: "mute small", text: "pass rate" }),
      h("div", { class: "big", text: pct(r.pass_rate) }), ci,
      h("div", { class: "small", text: `95% interval ${pct(r.wilson.lower)} – ${pct(r.wilson.upper)} (Wilson)` }), floor,
      driftNote(r.drift)),
    h("dl", { class: "facts small" },
      h("dt", { text: "measured" }), h("dd", { text: `${r.prompt_ns}/${r.prompt_key} @ ${r.tag} with ${r.model}` }),
      h("dt", { text: "evaluations" }), h("dd", { text: `${int(r.evaluations)} (${r.samples} samples × ${r.runs} runs), ${int(r.passed)} passed` }),
      h("dt", { text: "errors" }), h("dd", { class: r.errors ? "failed" : "", text: int(r.errors) }),
      h("dt", { text: "consistent" }), h("dd", { text: `${r.consistently_passed} sample(s) passed every run` }),
      h("dt", { text: "latency" }), h("dd", { text: lat(r.latency_ms) }),
      h("dt", { text: "first token" }), h("dd", { text: lat(r.ttft_ms) }),
      h("dt", { text: "tokens" }), h("dd", { text: `${int(r.total_tokens)} (${int(r.mean_tokens)} per evaluation)` }),
      h("dt", { text: "cost" }), h("dd", { text: `${money(r.total_cost)} (${money(r.mean_cost)} per evaluation)` })));
}

// The measure's comparison with its drift reference, in the words of `optiflow report`.
function driftNote(d) {
  if (!d) return null;
  const shown = d.evidence && d.evidence.first_shown;
  const lines = [driftHeadline(d)];
  if (d.evidence) {
    const e = d.evidence;
    lines.push(`night ${e.night}: evidence of a drop ${evidence(e.log_drop)}, needs ${evidence(Math.log(1 / e.alpha))}` +
      ` (most over the last ${e.window} night(s))`);
    if (shown && e.flips && e.flips.length)
      lines.push(`flipped most: ${e.flips.map((f) => `${f.sample_id} ${pct(f.before, 0)} → ${pct(f.window, 0)}`).join(", ")}`);
  }
  return h("div", { id: "drift-note", class: `small ${shown ? "failed" : d.status === "compared" ? "completed" : "mute"}`,
                    "data-status": d.status, "data-shown": shown ? String(shown) : "" },
    ...lines.map((t) => h("div", { text: t })));
}

function driftHeadline(d) {
  const c = d.change, e = d.evidence;
  if (d.status === "off") return `drift: not checked (${d.reason})`;
  if (d.status === "reference") return `drift: this measure is the reference from now on (${d.reason})`;
  const iv = `${signedPct(c.estimate)} [${signedPct(c.low)}, ${signedPct(c.high)}]`;
  if (e.first_shown) return `drift: ${iv} against the reference: a drop shown on night ${e.first_shown}`;
  return `no drift shown (drop < ${pct(Math.max(0, -c.low))} with 95% confidence): tonight ${iv} against the reference` +
    (e.shown === "gain" ? "; a gain shown (reported, not an error)" : "");
}

// An e-value from its log: 0.31, 54, 5.4e+4 (they outgrow floats).
function evidence(logv) {
  if (typeof logv !== "number") return "-";
  if (logv < Math.log(1e6)) { const v = Math.exp(logv); return v < 100 ? v.toPrecision(2) : String(Math.round(v)); }
  const ex = logv / Math.LN10;
  return ex < 300 ? Math.exp(logv).toExponential(1) : `1e+${Math.round(ex)}`;
}

// Each night's change against the drift reference with its 95% interval, the reference measures
// and the night a drop was shown: a second chart under the pass-rate history.
function renderDrift(points, X, W) {
  const nights = points.map((p, k) => ({ p, k })).filter(({ p }) => p.drift && p.drift.status === "compared" &&
    typeof p.drift.estimate === "number");
  if (!nights.length) return null;
  const H = 150, T = 18, B = 18, L = 44, R = 12;
  let lo = Math.min(0, ...nights.map(({ p }) => p.drift.low)), hi = Math.max(0, ...nights.map(({ p }) => p.drift.high));
  const axis = niceTicks(Math.max(-1, lo - 0.01), Math.min(1, hi + 0.01), 4);
  lo = axis.lo; hi = axis.hi;
  const Y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
  const shown = nights.filter(({ p }) => p.drift.drop_shown);
  const svg = s("svg", { class: "drift", viewBox: `0 0 ${W} ${H}`, role: "img",
                         "aria-label": "change against the drift reference by measurement",
                         "data-nights": nights.length, "data-shown": shown.length ? String(shown[0].p.drift.first_shown) : "" });
  for (const v of axis.ticks) {
    if (v < lo - 1e-9 || v > hi + 1e-9) continue;
    svg.append(s("line", { class: "tick", x1: L, x2: W - R, y1: Y(v), y2: Y(v) }),
               s("text", { class: "ytick", x: L - 6, y: Y(v) + 4, "text-anchor": "end", text: signedPct(v).replace(".0%", "%") }));
  }
  svg.append(s("line", { class: "zero", x1: L, x2: W - R, y1: Y(0), y2: Y(0) }),
             s("text", { x: L + 6, y: T - 6, text: "tonight against the reference, 95% interval" }));
  const first = shown.find(({ p }) => p.drift.night === p.drift.first_shown) || shown[0];
  if (first) {
    const x = X(first.k);
    const right = x > W / 2;  // the label on the side with room
    svg.append(s("line", { class: "drift-shown", x1: x, x2: x, y1: T, y2: H - B }),
               s("text", { class: "drift-label", x: right ? x - 4 : x + 4, y: H - 4, "text-anchor": right ? "end" : "start",
                           text: `drift shown (night ${first.p.drift.first_shown})` }));
  }
  for (const { p, k } of nights) {
    const d = p.drift, x = X(k), bad = d.drop_shown;
    svg.append(s("line", { class: `interval${bad ? " shown" : ""}`, x1: x, x2: x, y1: Y(d.high), y2: Y(d.low) }),
      s("circle", { class: `night${bad ? " shown" : ""}`, cx: x, cy: Y(d.estimate), r: 3.5 },
        s("title", { text: `night ${d.night}: ${signedPct(d.estimate)} [${signedPct(d.low)}, ${signedPct(d.high)}]` +
                           `${bad ? ` · drift shown on night ${d.first_shown}` : ""}` })));
  }
  return svg;
}

function renderHistory() {
  const r = S.report && S.report.kind === "measure" ? S.report : null;
  const points = (r && S.history && S.history.points) || [];
  $("history-box").hidden = !r;
  if (!r) return;
  const box = $("history");
  box.dataset.points = String(points.length);
  $("history-note").textContent = `· ${r.prompt_ns}/${r.prompt_key} @ ${r.tag}, ${points.length} measurement(s)`;
  if (points.length < 2) {
    box.replaceChildren(h("p", { class: "mute", text: "one measurement so far: a nightly `optiflow cron` run adds one each night" }));
    return;
  }
  const W = chartWidth(box), H = 200, L = 44, R = 12, T = 22, B = 30;
  const n = points.length;
  const lows = points.map((p) => p.lower ?? p.pass_rate), highs = points.map((p) => p.upper ?? p.pass_rate);
  let lo = Math.max(0, Math.min(...lows) - 0.02), hi = Math.min(1, Math.max(...highs) + 0.02);
  if (typeof r.fail_below === "number") { lo = Math.min(lo, r.fail_below - 0.02); hi = Math.max(hi, r.fail_below + 0.02); }
  if (hi - lo < 0.1) { lo = Math.max(0, lo - 0.05); hi = Math.min(1, hi + 0.05); }
  const axis = niceTicks(Math.max(0, lo), Math.min(1, hi), 5);
  lo = Math.max(0, axis.lo); hi = Math.min(1, axis.hi);
  const X = (k) => L + (k / (n - 1)) * (W - L - R);
  const Y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "pass rate by measurement",
                         "data-ticks": axis.ticks.filter((v) => v >= lo - 1e-9 && v <= hi + 1e-9).map((v) => pct(v, 0)).join(" ") });
  for (const v of axis.ticks) {
    if (v < lo - 1e-9 || v > hi + 1e-9) continue;
    svg.append(s("line", { class: "tick", x1: L, x2: W - R, y1: Y(v), y2: Y(v) }),
               s("text", { class: "ytick", x: L - 6, y: Y(v) + 4, "text-anchor": "end", text: pct(v, axis.step < 0.01 ? 1 : 0) }));
  }
  // the prompt changed between two runs (an apply in between): a mark where it did
  const changes = [];
  points.forEach((p, k) => {
    const prev = points[k - 1];
    if (!prev || !p.prompt_hash || !prev.prompt_hash || p.prompt_hash === prev.prompt_hash) return;
    changes.push({ k, before: prev.mean_tokens, after: p.mean_tokens, at: p.measured_at });
    const x = (X(k - 1) + X(k)) / 2;
    svg.append(s("line", { class: "change", x1: x, x2: x, y1: T - 4, y2: H - B },
      s("title", { text: "the prompt changed between these runs" })),
      s("text", { class: "change-label", x, y: T - 8, "text-anchor": "middle", text: "prompt changed" }));
  });
  const band = highs.map((v, k) => `${X(k)},${Y(v)}`).concat(lows.map((v, k) => `${X(k)},${Y(v)}`).reverse());
  svg.append(s("polygon", { class: "band", points: band.join(" ") }));
  svg.append(s("polyline", { class: "line", points: points.map((p, k) => `${X(k)},${Y(p.pass_rate)}`).join(" ") }));
  if (typeof r.fail_below === "number") {
    svg.append(s("line", { class: "floor", x1: L, x2: W - R, y1: Y(r.fail_below), y2: Y(r.fail_below) }),
               s("text", { x: L + 6, y: Y(r.fail_below) + 13, text: `floor ${pct(r.fail_below, 0)}: the lower bound must stay above` }));
  }
  points.forEach((p, k) => {
    const mine = p.job_id === S.id;
    svg.append(s("circle", { class: `point${mine ? " new" : ""}`, cx: X(k), cy: Y(p.pass_rate), r: mine ? 5 : 3.5 },
      s("title", { text: `${new Date(p.measured_at).toLocaleString()}: ${pct(p.pass_rate)} [${pct(p.lower)}, ${pct(p.upper)}]` })));
  });
  // the drift references: a diamond where one was measured
  const refs = points.map((p, k) => ({ p, k })).filter(({ p }) => p.drift && p.drift.status === "reference");
  for (const { p, k } of refs) {
    const x = X(k), y = Y(p.pass_rate);
    svg.append(s("rect", { class: "reference", x: x - 6, y: y - 6, width: 12, height: 12, transform: `rotate(45 ${x} ${y})` },
      s("title", { text: `drift reference: ${p.drift.headline}` })),
      s("text", { class: "reference-label", x, y: y - 10, "text-anchor": k === 0 ? "start" : "middle", text: "reference" }));
  }
  box.dataset.references = String(refs.length);
  const first = new Date(points[0].measured_at), lastAt = new Date(points[n - 1].measured_at);
  const day = first.toDateString() === lastAt.toDateString();
  const label = (d) => (day ? d.toLocaleTimeString() : d.toLocaleDateString());
  svg.append(s("text", { x: L, y: H - 10, text: label(first) }),
             s("text", { x: W - R, y: H - 10, "text-anchor": "end", text: label(lastAt) }));
  const notes = changes.map((c) => h("li", { text: `the prompt changed before the run of ${new Date(c.at).toLocaleString()}` +
    (typeof c.before === "number" && typeof c.after === "number"
      ? `: ${int(c.before)} → ${int(c.after)} tokens per evaluation` : "") }));
  box.dataset.changes = String(changes.length);
  const drift = renderDrift(points, X, W);
  box.dataset.drift = drift ? drift.dataset.shown || "none" : "";
  box.replaceChildren(svg, ...(drift ? [drift] : []), ...(notes.length ? [h("ul", { class: "changes small" }, ...notes)] : []));
}

// -- controls ---------------------------------------------------------------------------------
$("cancel").onclick = async () => {
  $("cancel").disabled = true;
  try {
    const job = await api(`/api/jobs/${enc(S.id)}/cancel`, { method: "POST" });
    $("message").textContent = job.status === "cancelled" ? "" : "cancel requested: the job ends at its current step";
  } catch (err) {
    $("message").textContent = String(err.message || err);
  } finally {
    $("cancel").disabled = false;
  }
};

addEventListener("resize", () => render());  // the charts are drawn at their box's width

$("auth").onsubmit = (e) => {
  e.preventDefault();
  const token = $("token").value.trim();
  if (!token) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  $("token").value = "";
  $("auth").hidden = true;
  notice(null);
  refreshJobs();
  refreshLimits();
  if (S.id) select(S.id);
};

const preselected = location.pathname.startsWith("/jobs/") ? location.pathname.slice(6) : "";
refreshJobs().then(() => { if (preselected) select(decodeURIComponent(preselected)); });
refreshLimits();
setInterval(refreshJobs, 3000);
setInterval(refreshLimits, 5000);
setInterval(() => { if (S.id && !FINISHED.includes(S.status)) renderSteps(); }, 1000);
