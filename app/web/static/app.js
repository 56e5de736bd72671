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
  sid: null, source: null, live: false, running: false, question: null,
  bubbles: new Map(), calls: new Map(), filesTimer: null, openDirs: new Set([""]),
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
  Object.assign(state, { sid, running: info.running, question: null });
  state.bubbles.clear(); state.calls.clear(); state.openDirs = new Set([""]);
  for (const sel of ["#chat", "#activity", "#terminal", "#plan", "#files", "#preview"]) $(sel).replaceChildren();
  $("#plan-panel").hidden = true; $("#browser-panel").hidden = true; $("#question").hidden = true;
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

function addMessage(kind, text, who) {
  const node = el("div", { class: `msg ${kind}` });
  if (who) node.append(el("span", { class: "who", textContent: who }));
  node.append(el("span", { class: "text", textContent: text }));
  $("#chat").append(node);
  node.scrollIntoView({ block: "end" });
  return node;
}

function bubble(entry) {
  const key = `${entry.source}#${entry.step}`;
  let node = state.bubbles.get(key);
  if (!node) {
    node = addMessage("assistant", "", entry.source);
    state.bubbles.set(key, node);
  }
  return node.querySelector(".text");
}

function usageText(usage, cost) {
  if (!usage) return "";
  const money = cost != null ? ` · $${Number(cost).toFixed(4)}` : "";
  return `tokens ${usage.prompt_tokens} in / ${usage.completion_tokens} out${money}`;
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

function toolResult(entry) {
  const node = state.calls.get(entry.call_id);
  if (node) {
    node.querySelector(".result").textContent = entry.output;
    node.classList.remove("pending");
    node.classList.add(entry.error ? "failed" : "ok");
    node.dataset.failed = entry.error ? "true" : "false";
  }
  if (TERMINAL_TOOLS.has(entry.name)) terminalLine(entry.output.replace(/^Observed output of cmd `\w+` executed:\n/, ""));
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
      addMessage("user", entry.prompt ?? "(carrying on the task that was cut short)");
      if (!entry.history) { setStatus("running", true); loadSessions(); }
      if (entry.profile) $("#model").textContent = `${entry.profile}: ${entry.model}`;
      $("#continue").hidden = true;
      break;
    case "text_delta":
      bubble(entry).textContent += entry.text;
      break;
    case "thought":
      if (entry.text) bubble(entry).textContent = entry.text;
      break;
    case "reasoning":
      if (entry.text) $("#chat").append(el("details", { class: "reasoning" },
        el("summary", { textContent: "thinking" }), el("pre", { textContent: entry.text })));
      break;
    case "tool_call": toolCall(entry); break;
    case "tool_result": toolResult(entry); break;
    case "screenshot":
      $("#browser-panel").hidden = false;
      $("#screenshot").src = `/api/sessions/${encodeURIComponent(state.sid)}/screenshot?n=${entry.n}`;
      break;
    case "plan": renderPlan(entry.plan); break;
    case "usage":
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
    case "task_finished":
      if (entry.ok) addMessage("final", entry.final_answer || "(finished without a written answer)", "answer");
      else addMessage("error", `The task did not complete: ${entry.failure || "unknown reason"}`
        + (entry.stop_reason ? ` (${entry.stop_reason})` : ""));
      if (entry.usage) $("#usage").textContent = usageText(entry.usage, entry.cost);
      if (!entry.history) { setStatus(entry.state, false); loadSessions(); }
      state.question = null; $("#question").hidden = true;
      scheduleFiles();
      break;
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

async function preview(entry) {
  const box = $("#preview");
  const link = el("a", { class: "download", href: fileUrl(entry.path, true), download: entry.name, textContent: `Download ${entry.name}` });
  const head = el("div", { class: "row" }, el("strong", { textContent: entry.path }), link);
  if (IMAGE.test(entry.name)) box.replaceChildren(head, el("img", { src: fileUrl(entry.path), alt: entry.name }));
  else if (HTML.test(entry.name)) {
    const frame = el("iframe", { title: entry.name });
    frame.setAttribute("sandbox", "");
    frame.src = fileUrl(entry.path);
    box.replaceChildren(head, frame);
  } else if (entry.size > 2_000_000) box.replaceChildren(head, el("p", { textContent: "Too large to preview." }));
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
  document.body.dataset.ready = "true";
}

init();
