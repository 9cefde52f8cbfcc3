// The dsh Team panel: one ES module, no build step, nothing fetched but this panel's own API.
// The document it renders is `dsh team show --json` plus live status, DAG layers and a timeline
// (see docs/web-panel.md, "The panel's JSON API"). Every request carries the per-run token.

const TOKEN = new URL(import.meta.url).searchParams.get("token") || "";
const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const NODE_W = 230, NODE_H = 74, GAP_X = 70, GAP_Y = 18, PAD = 12;

const panel = {
  doc: null,          // the document shown
  live: null,         // the newest live document (kept current while looking at the past)
  at: null,           // null: following the log; a number: time travel to that seq
  selected: null,     // selected task id
  seen: null,         // revision of the selected task when the page last showed it to the user
  stream: null,
  received: [],       // SSE ids in arrival order (tests check: no duplicates, resumes from the last)
  lastId: null,
  opens: 0,
};
window.dshPanel = panel;

function el(tag, attrs = {}, ...children) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.setAttribute("class", value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== null && value !== undefined) node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child.nodeType ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(path, body) {
  const init = { headers: { "X-Dsh-Token": TOKEN }, cache: "no-store" };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (failure) {  // no answer at all: the network, not the Team
    const error = new Error(failure.message || "network failure");
    error.code = "NETWORK";
    error.transport = true;
    throw error;
  }
  let data = null;
  try { data = await response.json(); } catch { data = null; }
  if (!response.ok || data === null) {
    const error = new Error(data?.error?.message || `HTTP ${response.status}`);
    error.code = data?.error?.code || `HTTP_${response.status}`;
    error.transport = response.status >= 500 || data === null;
    throw error;
  }
  return data;
}

function age(ms) {
  if (ms === null || ms === undefined) return "?";
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

function nameOf(doc, id) {
  const member = doc.members.find((m) => m.id === id);
  return member ? member.name : id;
}

// ------------------------------------------------------------------ rendering

function render() {
  const doc = panel.doc;
  if (!doc) return;
  document.body.classList.toggle("read-only", !!doc.read_only || !doc.live);
  document.body.classList.toggle("past", panel.at !== null);
  $("team-id").textContent = doc.team_id;
  $("source").textContent = panel.at !== null ? `history · seq ${doc.at}` : doc.live ? "live run" : doc.following ? "live from the store · read-only" : "stored run · read-only";
  renderFailure(doc);
  renderMode(doc);
  renderTravel(doc);
  renderRoster(doc);
  renderBoard(doc);
  renderDetail(doc);
  renderMail(doc);
  renderQuiescence(doc);
  renderWrites(doc);
  renderCosts(doc);
  renderControls(doc);
  renderWorktrees(doc);
  renderPermissions(doc);
  renderTimeline(doc);
}

function spent(spend) {
  return spend && spend.calls ? (spend.input_tokens + spend.output_tokens).toLocaleString() : "—";
}

function renderCosts(doc) {
  const costs = doc.costs;
  const shown = !!costs && (costs.team.calls > 0 || costs.reached.length > 0 || !!costs.failure);
  $("costs-card").hidden = !shown;
  if (!shown) return;
  $("costs-total").textContent = `${spent(costs.team)} tokens in ${costs.team.calls} model calls`;
  $("costs-members").tBodies[0].replaceChildren(...costs.members.map((m) => el("tr", { "data-cost-member": m.name },
    el("td", {}, m.name), el("td", { class: "mono" }, String(m.total.calls)), el("td", { class: "mono" }, spent(m.total)),
    el("td", { class: "mono" }, spent(m.on_tasks)), el("td", { class: "mono" }, spent(m.own)))));
  $("costs-tasks").tBodies[0].replaceChildren(...costs.tasks.map((t) => el("tr", { "data-cost-task": t.task_id },
    el("td", { class: "mono" }, t.task_id), el("td", {}, t.subject || "(deleted)"),
    el("td", { class: "mono" }, String(t.spend.calls)), el("td", { class: "mono" }, spent(t.spend)))));
  $("costs-reached").replaceChildren(...costs.reached.map((r) => el("li", { class: "error" },
    `${r.name || "the Team"} reached its ${r.kind} limit: ${r.used} of ${r.value} (seq ${r.seq})`)),
    ...(costs.failure ? [el("li", { class: "error" }, `cost ledger failed: ${costs.failure}`)] : []));
}

function renderQuiescence(doc) {
  const quiet = doc.quiescence;
  $("quiet-card").hidden = !quiet;
  if (!quiet) return;
  $("quiet-when").textContent = `seq ${quiet.seq} · ${quiet.current ? "nothing changed since" : "the Team changed since"}`;
  const rows = [
    ...quiet.in_progress.map((t) => `in progress: ${t.id} (owner ${t.owner_name || t.owner_id})`),
    ...quiet.ready.map((id) => `ready, unclaimed: ${id}`),
    ...quiet.failed.map((name) => `failed member: ${name}`),
  ];
  $("quiet-stalled").replaceChildren(...(rows.length ? rows : ["nothing stalled"]).map((text) => el("li", { "data-stalled": "" }, text)));
}

function renderControls(doc) {
  const controls = doc.controls;
  $("controls-card").hidden = !controls;
  if (!controls) return;
  const steerable = doc.live && !doc.read_only && panel.at === null;
  $("plans").tBodies[0].replaceChildren(...controls.plans.map((p) => el("tr", { "data-plan": p.member, "data-status": p.status },
    el("td", {}, p.member), el("td", { class: "plan-text" }, p.plan || "—"),
    el("td", {}, `${p.status}${p.rounds > 1 ? ` (round ${p.rounds})` : ""}`), el("td", {}, p.feedback || "—"),
    el("td", {}, ...(steerable && p.status === "submitted" ? [
      el("button", { type: "button", class: "small", "data-decide": "approve", onclick: () => decidePlan(p.member, "approve") }, "Approve"),
      el("button", { type: "button", class: "small", "data-decide": "reject", onclick: () => decidePlan(p.member, "reject") }, "Reject"),
    ] : [])))));
  $("checks").tBodies[0].replaceChildren(...controls.runs.map((r) => el("tr", { "data-run": r.run_id, "data-outcome": r.outcome },
    el("td", { class: "mono" }, `${r.task_id}@${r.revision}`), el("td", {}, r.member),
    el("td", { class: "mono" }, r.checks.join("; ")),
    el("td", { class: r.outcome === "failed" ? "error" : "" }, r.outcome + (r.rerun ? " (re-run after a restart)" : "")),
    el("td", { class: "mono tail" }, r.failed_check ? `${r.failed_check} ${r.ended}${(r.tail || "").trim() ? ": " + r.tail.trim().split("\n").pop() : " (no output)"}` : ""))));
  $("controls-failure").hidden = !controls.failure;
  $("controls-failure").textContent = controls.failure ? `controls fold failed: ${controls.failure}` : "";
}

function renderWorktrees(doc) {
  const section = doc.worktrees;
  $("worktrees-card").hidden = !section;
  if (!section) return;
  const known = (value, text) => (value === null || value === undefined ? "—" : text);
  $("worktrees").tBodies[0].replaceChildren(...section.worktrees.map((w) => el("tr", { "data-worktree": w.member },
    el("td", {}, w.member), el("td", { class: "mono" }, w.branch),
    el("td", { "data-ahead": known(w.ahead, String(w.ahead)) }, known(w.ahead, `${w.ahead} commit(s)`)),
    el("td", {}, known(w.exists, w.exists ? (w.dirty ? "yes, uncommitted changes" : "yes") : "removed")))));
  $("merges").tBodies[0].replaceChildren(...section.merges.map((m) => el("tr", { "data-merge": m.task_id, "data-phase": m.phase },
    el("td", { class: "mono" }, m.task_id), el("td", {}, m.member),
    el("td", { class: "mono" }, `${m.fast_forward ? "fast-forward" : "merge commit"} ${m.old.slice(0, 10)}..${m.new.slice(0, 10)}`),
    el("td", {}, m.phase))));
}

function renderPermissions(doc) {
  const permissions = doc.permissions;
  $("permissions-card").hidden = !permissions;
  if (!permissions) return;
  const steerable = doc.live && !doc.read_only && panel.at === null;
  $("asks").tBodies[0].replaceChildren(...permissions.asks.map((a) => el("tr", { "data-ask": a.ask_id, "data-status": a.status },
    el("td", { class: "mono" }, a.ask_id), el("td", {}, a.member),
    el("td", { class: "mono" }, `${a.tool} ${a.arguments}`), el("td", { class: "mono" }, a.rule),
    el("td", {}, a.status === "open" ? `open${a.route === "lead" ? " (asked of the Lead)" : ""}`
      : `${a.status}${a.always ? " always" : ""} by ${a.by}${a.reason ? `: ${a.reason}` : ""}`),
    el("td", {}, ...(steerable && a.status === "open" ? [
      el("button", { type: "button", class: "small", "data-answer": "allow", onclick: () => answerAsk(a.ask_id, "allow") }, "Allow"),
      el("button", { type: "button", class: "small", "data-answer": "always", onclick: () => answerAsk(a.ask_id, "always") }, "Always"),
      el("button", { type: "button", class: "small", "data-answer": "deny", onclick: () => answerAsk(a.ask_id, "deny") }, "Deny"),
    ] : [])))));
  $("permissions-failure").hidden = !permissions.failure;
  $("permissions-failure").textContent = permissions.failure ? `permissions fold failed: ${permissions.failure}` : "";
}

async function answerAsk(askId, answer) {
  const box = $("ask-result");
  try {
    const result = await api(`/api/permissions/${encodeURIComponent(askId)}`, { answer, reason: $("ask-reason").value });
    if (result.ok) { show(box, "ok", `${askId}: ${result.value.decision}${result.value.always ? " always" : ""} by you`); $("ask-reason").value = ""; }
    else show(box, "rejected", `Rejected (${result.error.reason || result.error.code}): ${result.error.message}`);
  } catch (error) {
    // Not retried: the answer may have been recorded. The table shows the truth.
    show(box, "transport", `Transport failure (${error.code}): check the ask's status before answering again.`);
  }
}

async function decidePlan(member, plan) {
  const box = $("plan-result");
  try {
    const result = await api(`/api/plans/${encodeURIComponent(member)}`, { plan, feedback: $("plan-feedback").value });
    if (result.ok) { show(box, "ok", `plan of ${member}: ${plan === "approve" ? "approved" : "rejected"}; ${member} is told`); $("plan-feedback").value = ""; }
    else show(box, "rejected", `Rejected (${result.error.reason || result.error.code}): ${result.error.message}`);
  } catch (error) {
    // Not retried: the decision may have been recorded. The table shows the truth.
    show(box, "transport", `Transport failure (${error.code}): check the plan's status before deciding again.`);
  }
}

function renderWrites(doc) {
  const writes = doc.writes || [];
  $("writes-card").hidden = writes.length === 0;
  $("writes").tBodies[0].replaceChildren(...writes.map((w) => el("tr", {},
    el("td", {}, w.member), el("td", { class: "mono" }, w.path), el("td", { class: "mono" }, w.tool),
    el("td", {}, w.tasks.join(", ") || "—"),
    el("td", { class: w.in_scope === false ? "no" : "" }, w.in_scope === null ? "no verdict" : w.in_scope ? "yes" : "NO"),
    el("td", { class: "error" }, w.warnings.join("; ")))));
}

function renderFailure(doc) {
  const box = $("failure");
  box.hidden = !doc.failure;
  if (doc.failure) {
    const where = doc.failure.source === "log" ? "The Lead log is damaged" : "The Team stream failed";
    box.textContent = `${where} at seq ${doc.failure.seq}: ${doc.failure.message}. Showing the last valid state.`;
  }
}

function renderMode(doc) {
  const box = $("mode");
  box.checked = doc.enabled !== false;
  box.indeterminate = doc.enabled === null;
  const steerable = doc.live && !doc.read_only && panel.at === null;
  box.disabled = !steerable;
  $("mode-box").classList.toggle("disabled", !steerable);
}

function renderTravel(doc) {
  const slider = $("at");
  const end = (panel.live || doc).log_length;
  slider.max = String(end);
  slider.value = String(panel.at ?? doc.at);
  $("at-label").textContent = `seq ${doc.at} of ${end}`;
  $("live").hidden = panel.at === null;
  document.querySelector(".travel").classList.toggle("past", panel.at !== null);
}

function renderRoster(doc) {
  const body = $("roster").tBodies[0];
  body.replaceChildren(...doc.members.map((m) => el("tr", { "data-member": m.name },
    el("td", {}, el("strong", {}, m.name), m.role === "lead" ? el("span", { class: "role" }, "(Lead)") : null,
      m.description ? el("div", { class: "role" }, m.description) : null,
      m.error ? el("div", { class: "error" }, m.error) : null,
      messageBox(doc, m)),
    el("td", {}, el("span", { class: `status st-${m.status.replace(" ", "-")}` }, m.status)),
    el("td", { class: "mono" }, String(m.pending_mail)),
    el("td", { class: "mono unread" }, String(m.unread_mail ?? 0)),
    el("td", {}, m.context || "—"),
    el("td", {}, m.provider || "—"),
    el("td", { class: "mono", title: m.usage && m.usage.calls ?
      `${m.usage.input_tokens} in / ${m.usage.output_tokens} out over ${m.usage.calls} calls${m.usage.model ? " · " + m.usage.model : ""}` : "" }, tokens(m)),
  )));
  const select = $("as");
  const keep = select.value;
  select.replaceChildren(...doc.members.map((m) => el("option", { value: m.name }, m.name)));
  if (doc.members.some((m) => m.name === keep)) select.value = keep;
}

// One message box per member: the text survives a re-render (the roster is rebuilt on every change).
const drafts = {};

function messageBox(doc, member) {
  const input = el("input", { class: "send-text", "data-send-text": member.name, placeholder: `message ${member.name}` });
  input.value = drafts[member.name] || "";
  input.addEventListener("input", () => { drafts[member.name] = input.value; });
  input.addEventListener("keydown", (event) => { if (event.key === "Enter") send(member.name); });
  const button = el("button", { type: "button", class: "small", "data-send": member.name }, "Send");
  button.addEventListener("click", () => send(member.name));
  const steerable = doc.live && !doc.read_only && panel.at === null;
  input.disabled = button.disabled = !steerable;
  return el("div", { class: "send-box steer", title: "sent as the user; delivered exactly once (a sleeping member is woken to read it)" }, input, button);
}

async function send(name) {
  const box = $("send-result");
  const text = (drafts[name] || "").trim();
  if (!text) { show(box, "rejected", `Write a message for ${name} first.`); return; }
  try {
    const result = await api("/api/messages", { target: name, text });
    if (result.ok) {
      drafts[name] = "";
      const input = document.querySelector(`[data-send-text="${CSS.escape(name)}"]`);
      if (input) input.value = "";
      const how = result.value.status === "accepted" ? `${name} holds it` : "queued, delivered when it can be";
      show(box, result.unconfirmed ? "unconfirmed" : "ok", result.unconfirmed ?
        `Message ${result.value.message_id} is queued but not confirmed durable: do not resend it.` :
        `Sent to ${name} as the user (${result.value.message_id}): ${how}.`);
    } else {
      show(box, "rejected", `Not sent (${result.error.reason || result.error.code}): ${result.error.message}`);
    }
  } catch (error) {
    // Never retried: it may be queued already; the pending mail and the timeline show the truth.
    show(box, "transport", `Transport failure (${error.code}): the message may or may not be queued; check the pending mail before sending it again.`);
  }
}

function tokens(member) {
  const used = member.usage;
  if (!used || !used.calls) return "—";
  const total = used.input_tokens + used.output_tokens;
  return total.toLocaleString();
}

function renderBoard(doc) {
  const svg = $("dag");
  $("no-tasks").hidden = doc.tasks.length > 0;
  const tasks = Object.fromEntries(doc.tasks.map((t) => [t.id, t]));
  const place = {};
  const rows = Math.max(1, ...doc.layers.map((layer) => layer.length));
  doc.layers.forEach((layer, column) => layer.forEach((id, row) => {
    place[id] = { x: PAD + column * (NODE_W + GAP_X), y: PAD + row * (NODE_H + GAP_Y) };
  }));
  const width = PAD * 2 + Math.max(1, doc.layers.length) * (NODE_W + GAP_X) - GAP_X;
  const height = PAD * 2 + rows * (NODE_H + GAP_Y) - GAP_Y;
  svg.setAttribute("width", width);
  svg.setAttribute("height", doc.tasks.length ? height : 0);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const defs = el("svg:defs", {}, el("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5",
    markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" }, el("svg:path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#98a2b3" })));
  const edges = [];
  for (const task of doc.tasks) {
    for (const blocker of task.blocked_by) {
      if (!place[blocker]) continue;
      const a = place[blocker], b = place[task.id];
      const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x - 2, y2 = b.y + NODE_H / 2;
      const mid = (x1 + x2) / 2;
      edges.push(el("svg:path", { class: "edge", d: `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}` }));
    }
  }
  const nodes = doc.tasks.map((task) => {
    const p = place[task.id];
    const owner = task.owner_name || (task.owner_id ? task.owner_id : null);
    const state = task.status.replace("_", " ") + (task.status === "pending" ? (task.ready ? " · ready" : " · blocked") : "");
    const subject = task.subject.length > 30 ? task.subject.slice(0, 29) + "…" : task.subject;
    const group = el("svg:g", { class: `node ${task.status}${panel.selected === task.id ? " selected" : ""}`,
      "data-task": task.id, "data-status": task.status, "data-revision": task.revision,
      transform: `translate(${p.x},${p.y})`, onclick: () => select(task.id) },
      el("svg:rect", { width: NODE_W, height: NODE_H }),
      el("svg:text", { class: "id", x: 10, y: 18 }, `${task.id}  ·  rev ${task.revision}`),
      el("svg:text", { class: "subject", x: 10, y: 37 }, subject),
      el("svg:text", { class: "meta", x: 10, y: 55 }, state + (owner ? ` · ${owner}` : "")),
      task.write_scope_warnings.length ? el("svg:text", { class: "warn", x: 10, y: 69 }, `\u26A0 ${task.write_scope_warnings.length} write-scope overlap`) : null,
      el("svg:title", {}, `${task.subject}\n${task.description}`));
    return group;
  });
  svg.replaceChildren(defs, ...edges, ...nodes);
}

function select(id) {
  panel.selected = id;
  const task = panel.doc.tasks.find((t) => t.id === id);
  panel.seen = task ? task.revision : null;
  $("result").hidden = true;
  render();
}

function renderDetail(doc) {
  const task = doc.tasks.find((t) => t.id === panel.selected);
  $("actions").hidden = !task;
  $("actions").classList.add("steer");
  if (!task) return;
  $("detail-title").replaceChildren("Task ", el("code", { class: "title-id" }, task.id));
  $("seen-rev").textContent = `acting on rev ${panel.seen}`;
  const dl = el("dl", {},
    el("dt", {}, "subject"), el("dd", {}, task.subject),
    el("dt", {}, "status"), el("dd", { id: "detail-status" }, `${task.status} (rev ${task.revision})`),
    el("dt", {}, "owner"), el("dd", {}, task.owner_name || "—"),
    el("dt", {}, "ready"), el("dd", {}, task.ready ? "yes" : "no"),
    el("dt", {}, "blocked by"), el("dd", {}, task.blocked_by.join(", ") || "—"),
    el("dt", {}, "writes"), el("dd", { class: "mono" }, task.write_scopes.join(", ") || "—"),
    task.write_scope_warnings.length ? el("dt", {}, "warnings") : null,
    task.write_scope_warnings.length ? el("dd", { class: "error" }, task.write_scope_warnings.join("; ")) : null,
    el("dt", {}, "description"), el("dd", {}, task.description));
  $("detail").replaceChildren(dl);
  $("detail").classList.remove("empty");
}

function renderMail(doc) {
  const now = updating(doc) && panel.at === null ? Date.now() : doc.as_of;
  $("no-mail").hidden = doc.pending_mail.length > 0;
  $("mail").hidden = doc.pending_mail.length === 0;
  $("mail").tBodies[0].replaceChildren(...doc.pending_mail.map((m) => el("tr", {},
    el("td", {}, m.sender_name), el("td", {}, m.target_name || m.target_id),
    el("td", { class: "mono age" }, age(m.queued_at === null ? null : now - m.queued_at)),
    el("td", {}, m.text.length > 120 ? m.text.slice(0, 119) + "…" : m.text))));
}

function renderTimeline(doc) {
  const items = doc.timeline.slice().reverse().map((entry) => el("li", { "data-seq": entry.seq, title: entry.call_id ? `tool call ${entry.call_id}` : "" },
    el("span", { class: "mono" }, `seq ${entry.seq}`),
    el("span", { class: "who" }, entry.member || "—"),
    el("span", {}, entry.summary),
    el("span", { class: "tool mono" }, entry.tool ? entry.tool : ""),
    messageStatus(doc, entry)));
  $("timeline").replaceChildren(...items);
}

// A send is marked with its message's current status (queued, delivered or read).
function messageStatus(doc, entry) {
  const status = entry.type === "team/message/queued" && doc.message_status ? doc.message_status[entry.message_id] : null;
  return status ? el("span", { class: `msg-status msg-${status}`, "data-message-status": status }, status) : null;
}

// ------------------------------------------------------------------ live stream

// A live run, or a Team followed from a shared store while another process runs it: both get updates.
function updating(doc) { return doc.live || doc.following; }

function apply(kind, data) {
  const current = panel.live;
  if (kind === "snapshot" || !current) {
    panel.live = data;
  } else if (kind === "team") {
    const timeline = current.timeline.concat(data.timeline);
    const message_status = { ...current.message_status, ...data.message_status };
    panel.live = { ...data, timeline, message_status, read_only: current.read_only };
  } else if (kind === "mail") {
    const members = current.members.map((m) => ({ ...m, pending_mail: data.pending_counts[m.id] ?? m.pending_mail,
      unread_mail: data.unread_counts[m.id] ?? m.unread_mail }));
    const message_status = { ...current.message_status, ...data.message_status };
    panel.live = { ...current, ...data, members, message_status, timeline: current.timeline.concat(data.timeline) };
    delete panel.live.pending_counts;
    delete panel.live.unread_counts;
  } else if (kind === "status") {
    panel.live = { ...current, members: current.members.map((m) => ({ ...m, status: data.statuses[m.id] ?? m.status })) };
  }
  if (panel.at === null) { panel.doc = panel.live; render(); }
}

function connect() {
  if (panel.stream) panel.stream.close();
  const url = `/api/events?token=${encodeURIComponent(TOKEN)}` + (panel.lastId !== null ? `&last_event_id=${panel.lastId}` : "");
  const stream = new EventSource(url);
  panel.stream = stream;
  stream.onopen = () => { panel.opens += 1; $("conn").textContent = "live"; $("conn").className = "conn up"; };
  stream.onerror = () => { $("conn").textContent = "reconnecting…"; $("conn").className = "conn down"; };
  for (const kind of ["snapshot", "team", "mail", "status"]) {
    stream.addEventListener(kind, (event) => {
      panel.received.push(`${kind}:${event.lastEventId}`);
      panel.lastId = Number(event.lastEventId);
      apply(kind, JSON.parse(event.data));
    });
  }
}

// ------------------------------------------------------------------ steering

function show(box, kind, text) {
  box.hidden = false;
  box.className = `result ${kind}`;
  box.textContent = text;
}

function outcome(box, result, what) {
  if (result.ok && result.unconfirmed) {
    show(box, "unconfirmed", `${what}: appended but not confirmed durable (${result.unconfirmed.message}). Re-read the board before retrying.`);
  } else if (result.ok) {
    const v = result.value;
    show(box, "ok", v && v.id ? `${v.id} is now ${v.status} (rev ${v.revision})` : `${what}: done`);
  } else if (result.error.code === "team-task-conflict") {
    const c = result.current;
    panel.seen = c ? c.revision : panel.seen;
    show(box, "conflict", `Conflict: ${what} was based on a revision that is no longer current. ` +
      (c ? `${c.id} is now rev ${c.revision}: ${c.status}${c.owner_name ? ", owner " + c.owner_name : ""}.` : ""));
  } else {
    show(box, "rejected", `Rejected (${result.error.reason || result.error.code}): ${result.error.message}`);
  }
}

async function act(action) {
  const box = $("result");
  const body = { action, expected_revision: panel.seen, as: $("as").value };
  if (action === "edit") body.subject = $("edit-subject").value;
  const what = `${action} ${panel.selected}`;
  for (let attempt = 0; ; attempt++) {
    try {
      outcome(box, await api(`/api/tasks/${encodeURIComponent(panel.selected)}`, body), what);
      return;
    } catch (error) {
      if (!error.transport || attempt >= 2) { show(box, error.transport ? "transport" : "rejected", `${what} failed: ${error.code}: ${error.message}`); return; }
      // A compare-and-set is safe to retry: it applies once, or comes back as a conflict.
      show(box, "transport", `Transport failure (${error.message}); retrying…`);
      await new Promise((resolve) => setTimeout(resolve, 800 * (attempt + 1)));
    }
  }
}

async function create(event) {
  event.preventDefault();
  const list = (text) => text.split(",").map((s) => s.trim()).filter(Boolean);
  const body = { subject: $("c-subject").value, description: $("c-description").value, as: $("as").value || "lead" };
  if (list($("c-blocked").value).length) body.blocked_by = list($("c-blocked").value);
  if (list($("c-scopes").value).length) body.write_scopes = list($("c-scopes").value);
  const box = $("create-result");
  try {
    outcome(box, await api("/api/tasks", body), "create");
  } catch (error) {
    // Never retried: the task may exist already. The board shows the truth.
    show(box, "transport", `Transport failure (${error.code}): the task may or may not have been created; check the board before creating it again.`);
  }
}

async function toggleMode() {
  const wanted = $("mode").checked;
  try {
    const result = await api("/api/mode", { enabled: wanted });
    if (!result.ok) { showNotice(`Team mode not changed (${result.error.reason || result.error.code}): ${result.error.message}`); render(); }
    else showNotice(`Team mode ${wanted ? "on" : "off"}: in force at each agent's next step.`);
  } catch (error) {
    showNotice(`Transport failure while switching Team mode (${error.message}); the switch below shows the recorded mode.`);
    render();
  }
}

function showNotice(text) {
  $("notice").hidden = false;
  $("notice").textContent = text;
}

// ------------------------------------------------------------------ time travel

async function travel(seq) {
  const end = (panel.live || panel.doc).log_length;
  if (seq >= end && panel.live && updating(panel.live)) { backToNow(); return; }
  panel.at = seq;
  try {
    panel.doc = await api(`/api/team?at=${seq}`);
    render();
  } catch (error) {
    showNotice(`Cannot show seq ${seq}: ${error.code}: ${error.message}`);
  }
}

function backToNow() {
  panel.at = null;
  const url = new URL(location.href);
  url.searchParams.delete("at");
  history.replaceState(null, "", url);
  panel.doc = panel.live;
  render();
}

async function start() {
  $("actions").addEventListener("click", (event) => { const action = event.target.dataset?.action; if (action) act(action); });
  $("create").addEventListener("submit", create);
  $("mode").addEventListener("change", toggleMode);
  $("at").addEventListener("change", () => travel(Number($("at").value)));
  $("live").addEventListener("click", backToNow);
  $("create-card").classList.add("steer");
  setInterval(() => { if (panel.doc) renderMail(panel.doc); }, 1000);
  const at = new URL(location.href).searchParams.get("at");
  try {
    panel.live = await api("/api/team");
  } catch (error) {
    showNotice(`${error.code}: ${error.message}`);
  }
  if (panel.live) { panel.doc = panel.live; panel.lastId = panel.live.at; }  // the stream resumes after it
  if (at !== null && at !== "") await travel(Number(at)); else render();
  if (!panel.live || updating(panel.live)) connect(); else { $("conn").textContent = "stored"; $("conn").className = "conn"; }
}

start();
