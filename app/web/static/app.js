// OpenManus web UI: one ES module, no framework, no build step.
// The page renders the session's event log (SSE); every view is derived from those events.

const $ = (sel) => document.querySelector(sel);
const el = (tag, props = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key in node) node[key] = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
};

const state = {
  sid: null, source: null, live: false, running: false, question: null, since: 0,
  bubbles: new Map(), calls: new Map(), filesTimer: null, openDirs: new Set([""]),
  usage: new Map(), dirty: new Set(), renderTimer: null, written: "",
};

async function api(path, options = {}) {
  const init = { ...options, headers: { ...(options.headers || {}) } };
  if (options.json !== undefined) {
    init.method = init.method || "POST";
    init.body = JSON.stringify(options.json);
    init.headers["content-type"] = "application/json";
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { error: text }; }
  if (!response.ok) throw new Error((data && data.error) || `HTTP ${response.status}`);
  return data;
}

function showError(message) {
  addMessage("error", message);
}

// ---- sessions ---------------------------------------------------------------------------------

async function loadSessions() {
  const { sessions } = await api("/api/sessions");
  const list = $("#sessions");
  list.replaceChildren(...sessions.map((s) => {
    const item = el("li", { dataset: { id: s.id, state: s.state, mode: s.mode } },
      el("span", { class: "title", textContent: s.title || "(no task yet)" }),
      el("span", { class: "meta", textContent: `${s.mode} · ${s.state}` }));
    if (s.id === state.sid) item.classList.add("current");
    item.addEventListener("click", () => openSession(s.id).catch((e) => showError(e.message)));
    return item;
  }));
}

async function newSession(prompt) {
  const body = { mode: $("#mode").value };
  if (prompt) body.prompt = prompt;
  const info = await api("/api/sessions", { json: body });
  await openSession(info.id, info);
  return info;
}

async function openSession(sid, info) {
  if (!info || !info.live) info = await api(`/api/sessions/${encodeURIComponent(sid)}/open`, { json: {} });
  if (state.source) state.source.close();
  Object.assign(state, { sid, running: info.running, question: null, since: Number(info.created) || 0, written: "" });
  state.bubbles.clear(); state.calls.clear(); state.usage.clear(); state.dirty.clear(); state.openDirs = new Set([""]);
  for (const sel of ["#chat", "#activity", "#terminal", "#plan", "#files", "#preview", "#written", "#browser-action"]) $(sel).replaceChildren();
  $("#plan-panel").hidden = true; $("#browser-panel").hidden = true; $("#question").hidden = true;
  $("#written-panel").hidden = true; $("#screenshot").hidden = true; $("#browser-url").textContent = "";
  history.replaceState(null, "", `#${encodeURIComponent(sid)}`);
  $("#usage").textContent = "";
  $("#model").textContent = info.profile ? `${info.profile}: ${info.model}` : "";
  setStatus(info.state, info.running);
  $("#continue").hidden = !info.incomplete;
  connect(sid);
  loadFiles();
  loadSessions();
}

function connect(sid) {
  const source = new EventSource(`/api/sessions/${encodeURIComponent(sid)}/events`);
  state.source = source;
  source.onopen = () => { $("#connection").dataset.state = "on"; };
  source.onerror = () => { $("#connection").dataset.state = "off"; };
  source.onmessage = (message) => {
    if (state.sid !== sid) return;
    let entry;
    try { entry = JSON.parse(message.data); } catch { return; }
    entry._received = performance.now();
    handle(entry);
    window.dispatchEvent(new CustomEvent("openmanus:event", { detail: entry }));
  };
}

function setStatus(text, running) {
  state.running = !!running;
  const status = $("#status");
  status.textContent = running ? "running" : text || "idle";
  status.dataset.state = running ? "running" : text || "idle";
  $("#stop").disabled = !running;
  $("#send").disabled = false;
}

// ---- the chat ---------------------------------------------------------------------------------

function addMessage(kind, text, who, rich) {
  const node = el("div", { class: `msg ${kind}` });
  if (who) node.append(el("span", { class: "who", textContent: who }));
  const body = el("div", { class: rich ? "text md" : "text" });
  if (rich) body.append(markdown(text)); else body.textContent = text;
  node.append(body);
  $("#chat").append(node);
  node.scrollIntoView({ block: "end" });
  return node;
}

// A message is keyed by the agent run it belongs to (``run``: every entry carries it, history
// included), the agent and the step: steps restart with each task and each plan step, runs
// do not, so no later message can take an earlier one's place.
const messageKey = (entry) => `${entry.run ?? 0}:${entry.source}:${entry.step ?? 0}`;

function bubble(entry) {
  const key = messageKey(entry);
  let node = state.bubbles.get(key);
  if (!node) {
    node = addMessage("assistant", "", entry.source, true);
    node.dataset.key = key;
    node.dataset.raw = "";
    state.bubbles.set(key, node);
    const usage = state.usage.get(key);
    if (usage) showUsage(node, usage);
  }
  return node;
}

function setText(node, text) {
  node.dataset.raw = text;
  state.dirty.add(node);
  if (!state.renderTimer) state.renderTimer = setTimeout(renderDirty, 40);
}

function renderDirty() {
  state.renderTimer = null;
  for (const node of state.dirty) node.querySelector(".text").replaceChildren(markdown(node.dataset.raw));
  state.dirty.clear();
}

function usageText(usage, cost) {
  if (!usage) return "";
  const value = Number(cost);
  const money = cost != null ? ` · $${value > 0 && value < 0.01 ? value.toPrecision(2) : value.toFixed(4)}` : "";
  return `tokens ${usage.prompt_tokens} in / ${usage.completion_tokens} out${money}`;
}

function showUsage(node, text) {
  let footer = node.querySelector(":scope > .usage");
  if (!footer) { footer = el("div", { class: "usage" }); node.append(footer); }
  footer.textContent = text;
}

function messageUsage(entry) {
  const text = usageText(entry.usage, entry.cost);
  if (!text) return;
  const key = messageKey(entry);
  state.usage.set(key, text);
  const node = state.bubbles.get(key);
  if (node) showUsage(node, text);
}

// ---- Markdown (safe) --------------------------------------------------------------------------
// Model text is rendered as Markdown by building DOM nodes: every piece of text goes in as a
// text node, never as HTML, so a reply holding <script> or <img onerror> shows those characters.

const LINK_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
const INLINE = /(`+)([^\n]{1,400}?)\1|\*\*(?=\S)([^\n]{1,400}?)\*\*|__(?=\S)([^\n]{1,400}?)__|\*(?=[^\s*])([^\n]{1,400}?)\*|(?<![\w])_(?=[^\s_])([^\n]{1,400}?)_(?![\w])|~~(?=\S)([^\n]{1,400}?)~~|\[([^\]\n]{1,400})\]\(\s*<?([^)\s>]{1,2000})>?\s*\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"\]])/g;

function safeHref(raw) {
  try {
    const url = new URL(raw);
    return LINK_PROTOCOLS.has(url.protocol) ? url.href : null;
  } catch { return null; }
}

function link(href, label) {
  const safe = safeHref(href);
  if (!safe) return document.createTextNode(label);
  const a = el("a", { href: safe, target: "_blank", rel: "noopener noreferrer nofollow" });
  inline(label, a);
  return a;
}

function inline(text, parent) {
  const re = new RegExp(INLINE.source, "g");
  let last = 0, m;
  while ((m = re.exec(text))) {
    if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
    last = re.lastIndex;
    if (m[1]) parent.append(el("code", { textContent: m[2] }));
    else if (m[3] || m[4]) { const b = el("strong"); inline(m[3] || m[4], b); parent.append(b); }
    else if (m[5] || m[6]) { const i = el("em"); inline(m[5] || m[6], i); parent.append(i); }
    else if (m[7]) { const d = el("del"); inline(m[7], d); parent.append(d); }
    else if (m[8]) parent.append(link(m[9], m[8]));
    else if (m[10]) parent.append(link(m[10], m[10]));
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
  return parent;
}

const FENCE = /^\s{0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

function startsBlock(line, next) {
  return FENCE.test(line) || HEADING.test(line) || ITEM.test(line) || RULE.test(line)
    || QUOTE.test(line) || (line.includes("|") && next !== undefined && TABLE_SEP.test(next));
}

function cells(line) {
  let text = line.trim();
  if (text.startsWith("|")) text = text.slice(1);
  if (text.endsWith("|")) text = text.slice(0, -1);
  return text.split("|").map((c) => c.trim());
}

function list(lines, start) {
  // Items at the first item's indentation; deeper ones form nested lists.
  const first = ITEM.exec(lines[start]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const node = el(ordered ? "ol" : "ul");
  if (ordered && parseInt(first[2], 10) !== 1) node.start = parseInt(first[2], 10);
  let i = start, item = null;
  while (i < lines.length) {
    const line = lines[i];
    const m = ITEM.exec(line);
    if (m && m[1].length === indent && /\d/.test(m[2]) === ordered) {
      item = el("li"); inline(m[3], item); node.append(item); i++;
    } else if (m && m[1].length > indent && item) {
      const [sub, next] = list(lines, i); item.append(sub); i = next;
    } else if (line.trim() && item && /^\s+/.test(line) && !m) {
      item.append(el("br")); inline(line.trim(), item); i++;
    } else break;
  }
  return [node, i];
}

// Longer texts are shown as they are (a <pre>), which costs nothing to lay out.
const MARKDOWN_LIMIT = 100_000;

function markdown(text) {
  const out = document.createDocumentFragment();
  if (String(text ?? "").length > MARKDOWN_LIMIT) {
    out.append(el("pre", { class: "plain", textContent: String(text) }));
    return out;
  }
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if (!line.trim()) { i++; continue; }
    if ((m = FENCE.exec(line))) {
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(m[1])) body.push(lines[i++]);
      i++;
      const code = el("code", { textContent: body.join("\n") });
      if (m[2]) code.dataset.lang = m[2];
      out.append(el("pre", { class: "code" }, code));
    } else if ((m = HEADING.exec(line))) {
      out.append(inline(m[2], el(`h${Math.min(6, m[1].length + 2)}`))); i++;
    } else if (RULE.test(line)) {
      out.append(el("hr")); i++;
    } else if (ITEM.test(line)) {
      const [node, next] = list(lines, i); out.append(node); i = next;
    } else if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) { body.push(m[1]); i++; }
      out.append(el("blockquote", {}, markdown(body.join("\n"))));
    } else if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1])) {
      const table = el("table");
      table.append(el("thead", {}, el("tr", {}, ...cells(line).map((c) => inline(c, el("th"))))));
      const body = el("tbody");
      i += 2;
      while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
        body.append(el("tr", {}, ...cells(lines[i]).map((c) => inline(c, el("td"))))); i++;
      }
      table.append(body);
      out.append(table);
    } else {
      const para = el("p");
      inline(line, para); i++;
      while (i < lines.length && lines[i].trim() && !startsBlock(lines[i], lines[i + 1])) {
        para.append(el("br")); inline(lines[i], para); i++;
      }
      out.append(para);
    }
  }
  return out;
}

// ---- the computer -----------------------------------------------------------------------------

function pretty(args) {
  try { return JSON.stringify(JSON.parse(args), null, 2); } catch { return String(args); }
}

function terminalLine(text) {
  const term = $("#terminal");
  term.textContent += text.endsWith("\n") ? text : text + "\n";
  if (term.textContent.length > 200000) term.textContent = term.textContent.slice(-150000);
  term.scrollTop = term.scrollHeight;
}

const TERMINAL_TOOLS = new Set(["bash", "python_execute"]);

function toolCall(entry) {
  const step = bubble(entry);
  let calls = step.querySelector(":scope > .calls");
  if (!calls) { calls = el("div", { class: "calls" }); step.querySelector(".text").after(calls); }
  calls.append(el("span", { class: "call", textContent: entry.name }));
  if (entry.name === "browser_use") browserAction(entry);
  const result = el("pre", { class: "result" });
  const node = el("details", { class: "tool-call pending", dataset: { callId: entry.call_id, name: entry.name } },
    el("summary", { textContent: `${entry.name}` }),
    el("pre", { class: "args", textContent: pretty(entry.arguments) }), result);
  state.calls.set(entry.call_id, node);
  $("#activity").append(node);
  node.scrollIntoView({ block: "end" });
  if (TERMINAL_TOOLS.has(entry.name)) {
    let args = {};
    try { args = JSON.parse(entry.arguments); } catch { /* shown raw */ }
    terminalLine(entry.name === "bash" ? `$ ${args.command ?? entry.arguments}` : `>>> ${args.code ?? entry.arguments}`);
  }
}

// A call still pending when its task ends (Stop, or the server going down) never gets a result:
// it was cancelled, and says so instead of waiting forever.
function cancelPending() {
  for (const node of document.querySelectorAll("#activity details.tool-call.pending")) {
    node.classList.remove("pending");
    node.classList.add("cancelled");
    node.dataset.cancelled = "true";
    node.querySelector(".result").textContent = "cancelled: the task ended before this call finished";
    if (TERMINAL_TOOLS.has(node.dataset.name)) terminalLine("^C (cancelled)");
  }
}

function browserAction(entry) {
  let args = {};
  try { args = JSON.parse(entry.arguments) || {}; } catch { /* shown raw */ }
  $("#browser-panel").hidden = false;
  const action = String(args.action ?? "");
  let what = action;
  if (entry.element) what += ` → ${entry.element}`;
  else if (args.url) what += ` ${args.url}`;
  else if (args.index != null) what += ` element ${args.index}`;
  if (args.text != null && action === "input_text") what += `: “${args.text}”`;
  $("#browser-action").textContent = what;
  if (args.url && /^(go_to_url|open_tab)$/.test(action)) $("#browser-url").textContent = String(args.url);
}

function screenshot(entry) {
  $("#browser-panel").hidden = false;
  if (entry.url) $("#browser-url").textContent = entry.url;
  if (entry.title) $("#browser-url").title = entry.title;
  if (entry.n != null) {
    const img = $("#screenshot");
    img.src = `/api/sessions/${encodeURIComponent(state.sid)}/screenshot?n=${entry.n}`;
    img.hidden = false;
  }
}

// What a terminal would have printed: the tool's framing removed, python's JSON unwrapped.
function terminalOutput(output) {
  const text = String(output ?? "").replace(/^Observed output of cmd `\w+` executed:\n/, "");
  try {
    const data = JSON.parse(text);
    if (data && typeof data.observation === "string") return data.observation;
  } catch { /* plain text */ }
  return text;
}

function toolResult(entry) {
  const node = state.calls.get(entry.call_id);
  if (node) {
    node.querySelector(".result").textContent = entry.output;
    node.classList.remove("pending");
    node.classList.add(entry.error ? "failed" : "ok");
    node.dataset.failed = entry.error ? "true" : "false";
  }
  if (TERMINAL_TOOLS.has(entry.name)) terminalLine(terminalOutput(entry.output));
  scheduleFiles();
}

function renderPlan(plan) {
  if (!plan || !Array.isArray(plan.steps)) return;
  $("#plan-panel").hidden = false;
  $("#plan-title").textContent = plan.title ? `— ${plan.title}` : "";
  const statuses = plan.step_statuses || [];
  $("#plan").replaceChildren(...plan.steps.map((step, i) => {
    const status = statuses[i] || "not_started";
    return el("li", { dataset: { status, index: String(i) } }, step,
      el("span", { class: "st", textContent: status.replace("_", " ") }));
  }));
}

// ---- events -----------------------------------------------------------------------------------

function handle(entry) {
  switch (entry.kind) {
    case "task_started":
      cancelPending();
      addMessage("user", entry.prompt ?? "(carrying on the task that was cut short)");
      if (!entry.history) { setStatus("running", true); loadSessions(); }
      if (entry.profile) $("#model").textContent = `${entry.profile}: ${entry.model}`;
      $("#continue").hidden = true;
      break;
    case "text_delta": {
      const node = bubble(entry);
      setText(node, node.dataset.raw + entry.text);
      break;
    }
    case "thought":
      if (entry.text) setText(bubble(entry), entry.text);
      break;
    case "reasoning":
      if (entry.text) $("#chat").append(el("details", { class: "reasoning" },
        el("summary", { textContent: "thinking" }), el("pre", { textContent: entry.text })));
      break;
    case "tool_call": toolCall(entry); break;
    case "tool_result": toolResult(entry); break;
    case "screenshot": screenshot(entry); break;
    case "plan": renderPlan(entry.plan); break;
    case "usage":
      messageUsage(entry);
      $("#usage").textContent = usageText(entry.task_usage || entry.run_usage, entry.task_cost ?? entry.run_cost);
      break;
    case "question":
      state.question = entry.question_id;
      $("#question .question-text").textContent = entry.question;
      $("#question").hidden = false;
      $("#answer-input").focus();
      break;
    case "question_closed":
      if (state.question === entry.question_id) { state.question = null; $("#question").hidden = true; }
      break;
    case "error":
      addMessage("note", `⚠ ${entry.message}`);
      break;
    case "file_uploaded":
      addMessage("note", `uploaded ${entry.path} (${entry.size} bytes)`);
      scheduleFiles();
      break;
    case "task_finished": {
      cancelPending();
      const node = entry.ok
        ? addMessage("final", entry.final_answer || "(finished without a written answer)", "answer", true)
        : addMessage("error", `The task did not complete: ${entry.failure || "unknown reason"}`
          + (entry.stop_reason ? ` (${entry.stop_reason})` : ""));
      if (entry.usage) {
        $("#usage").textContent = usageText(entry.usage, entry.cost);
        showUsage(node, `task total: ${usageText(entry.usage, entry.cost)}`);
      }
      if (!entry.history) { setStatus(entry.state, false); loadSessions(); }
      state.question = null; $("#question").hidden = true;
      scheduleFiles();
      break;
    }
    default: break;
  }
}

// ---- the workspace ----------------------------------------------------------------------------

const fileUrl = (path, download) => `/api/sessions/${encodeURIComponent(state.sid)}/file?path=${encodeURIComponent(path)}${download ? "&download=1" : ""}`;

function scheduleFiles() {
  clearTimeout(state.filesTimer);
  state.filesTimer = setTimeout(loadFiles, 250);
}

async function loadFiles() {
  if (!state.sid) return;
  loadWritten();
  const root = el("ul", { class: "tree", id: "files" });
  await fillDir("", root);
  $("#files").replaceWith(root);
}

async function fillDir(path, list) {
  let listing;
  try { listing = await api(`/api/sessions/${encodeURIComponent(state.sid)}/files?path=${encodeURIComponent(path)}`); }
  catch (e) { list.append(el("li", { textContent: e.message })); return; }
  for (const entry of listing.entries) {
    const item = el("li", { class: entry.kind, dataset: { path: entry.path } }, el("span", { textContent: entry.name }));
    list.append(item);
    if (entry.kind === "dir") {
      const children = el("ul", { class: "tree" });
      item.append(children);
      if (state.openDirs.has(entry.path)) { item.classList.add("open"); await fillDir(entry.path, children); }
      item.firstChild.addEventListener("click", async () => {
        if (item.classList.toggle("open")) { state.openDirs.add(entry.path); await fillDir(entry.path, children); }
        else { state.openDirs.delete(entry.path); children.replaceChildren(); }
      });
    } else if (entry.kind === "file") {
      item.firstChild.addEventListener("click", () => preview(entry));
    }
  }
}

const IMAGE = /\.(png|jpe?g|gif|webp|svg)$/i;
const HTML = /\.html?$/i;

// The computer's "files written": what changed in the workspace since the session began,
// newest first. Images are shown inline (an <img> runs no script, SVG included); HTML pages
// in an iframe with sandbox="" (no scripts, no same origin), served with a sandboxing CSP.
function sandboxedFrame(entry) {
  const frame = el("iframe", { title: entry.name });
  frame.setAttribute("sandbox", "");
  frame.setAttribute("referrerpolicy", "no-referrer");
  frame.src = fileUrl(entry.path);
  return frame;
}

async function loadWritten() {
  const sid = state.sid;
  let data;
  try { data = await api(`/api/sessions/${encodeURIComponent(sid)}/recent?since=${state.since}`); }
  catch { return; }
  if (state.sid !== sid) return;
  const signature = JSON.stringify(data.files.map((f) => [f.path, f.mtime, f.size]));
  if (signature === state.written) return;
  state.written = signature;
  $("#written-panel").hidden = data.files.length === 0;
  $("#written").replaceChildren(...data.files.map((entry) => {
    const name = el("a", { class: "name", href: "#", textContent: entry.path, title: `${entry.size} bytes` });
    name.addEventListener("click", (e) => { e.preventDefault(); preview(entry); });
    const card = el("div", { class: "written", dataset: { path: entry.path } }, name);
    if (IMAGE.test(entry.name)) card.append(el("img", { src: `${fileUrl(entry.path)}&v=${entry.mtime}`, alt: entry.name }));
    else if (HTML.test(entry.name)) card.append(sandboxedFrame(entry));
    return card;
  }));
}

async function preview(entry) {
  const box = $("#preview");
  const link = el("a", { class: "download", href: fileUrl(entry.path, true), download: entry.name, textContent: `Download ${entry.name}` });
  const head = el("div", { class: "row" }, el("strong", { textContent: entry.path }), link);
  if (IMAGE.test(entry.name)) box.replaceChildren(head, el("img", { src: fileUrl(entry.path), alt: entry.name }));
  else if (HTML.test(entry.name)) box.replaceChildren(head, sandboxedFrame(entry)); else if (entry.size > 2_000_000) box.replaceChildren(head, el("p", { textContent: "Too large to preview." }));
  else {
    const response = await fetch(fileUrl(entry.path));
    const type = response.headers.get("content-type") || "";
    const body = type.startsWith("text/") ? await response.text() : "(binary file)";
    box.replaceChildren(head, el("pre", { class: "file-text", textContent: body }));
  }
}

async function upload(files) {
  if (!state.sid) await newSession();
  const status = $("#upload-status");
  for (const file of files) {
    status.textContent = `uploading ${file.name}…`;
    try {
      await api(`/api/sessions/${encodeURIComponent(state.sid)}/upload?path=${encodeURIComponent(file.name)}`, { method: "PUT", body: file });
      status.textContent = `uploaded ${file.name}`;
    } catch (e) { status.textContent = `upload failed: ${e.message}`; }
  }
  loadFiles();
}

// ---- wiring -----------------------------------------------------------------------------------

async function submitTask(event) {
  event.preventDefault();
  const prompt = $("#prompt").value.trim();
  if (!prompt) return;
  $("#send").disabled = true;
  try {
    if (!state.sid) await newSession(prompt);
    else await api(`/api/sessions/${encodeURIComponent(state.sid)}/tasks`, { json: { prompt } });
    $("#prompt").value = "";
  } catch (e) { showError(e.message); }
  finally { $("#send").disabled = false; }
}

async function sendAnswer() {
  if (!state.question) return;
  const answer = $("#answer-input").value;
  try {
    await api(`/api/sessions/${encodeURIComponent(state.sid)}/answer`, { json: { question_id: state.question, answer } });
    $("#answer-input").value = "";
    $("#question").hidden = true;
  } catch (e) { showError(e.message); }
}

function init() {
  $("#task-form").addEventListener("submit", submitTask);
  $("#prompt").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) submitTask(e); });
  $("#new-session").addEventListener("click", () => newSession().catch((e) => showError(e.message)));
  $("#stop").addEventListener("click", () => api(`/api/sessions/${encodeURIComponent(state.sid)}/stop`, { json: {} }).catch((e) => showError(e.message)));
  $("#continue").addEventListener("click", () => api(`/api/sessions/${encodeURIComponent(state.sid)}/continue`, { json: {} }).catch((e) => showError(e.message)));
  $("#answer-send").addEventListener("click", sendAnswer);
  $("#answer-input").addEventListener("keydown", (e) => { if (e.key === "Enter") sendAnswer(); });
  $("#refresh-files").addEventListener("click", loadFiles);
  $("#upload-input").addEventListener("change", (e) => { upload([...e.target.files]); e.target.value = ""; });
  loadSessions().catch((e) => showError(e.message));
  const wanted = decodeURIComponent(location.hash.slice(1));  // a reload reopens the session
  if (wanted) openSession(wanted).catch((e) => { history.replaceState(null, "", location.pathname); showError(e.message); });
  document.body.dataset.ready = "true";
}

init();
