// OpenManus web UI: one ES module, no framework, no build step.
// The page renders the session's event log (SSE); every view is derived from those events, and
// reconciled with the API whenever the stream reconnects.

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
const enc = encodeURIComponent;

const state = {
  sid: null, source: null, live: false, running: false, question: null, since: 0,
  bubbles: new Map(), calls: new Map(), filesTimer: null, openDirs: new Set([""]),
  usage: new Map(), dirty: new Set(), renderTimer: null, written: "",
  lastId: 0, instance: null, reconnecting: false, wake: null, lastBubble: null, streamFailures: 0,
  listSeq: 0, listTimer: null, previewSeq: 0, zoom: 1, opener: null,
};

class ApiError extends Error {
  constructor(message, status) { super(message); this.status = status; }
}

async function api(path, options = {}) {
  const init = { ...options, headers: { ...(options.headers || {}) } };
  if (options.json !== undefined) {
    init.method = init.method || "POST";
    init.body = JSON.stringify(options.json);
    init.headers["content-type"] = "application/json";
  }
  let response;
  try { response = await fetch(path, init); } catch {
    reconnect();  // the server is unreachable: say so, and retry until it answers
    throw new ApiError("The server cannot be reached.", 0);
  }
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { error: text }; }
  if (response.status === 401) reconnect();
  if (!response.ok) throw new ApiError((data && data.error) || `HTTP ${response.status}`, response.status);
  return data;
}

function showError(message) {
  addMessage("error", message);
}

// ---- the connection -----------------------------------------------------------------------------
// "connecting" and "reconnecting" are neutral; "offline" (red, with what to do) only once an
// attempt to reach the server has failed.

const CONNECTION_TEXT = { idle: "", connecting: "connecting…", on: "live", retrying: "reconnecting…", off: "offline", login: "logged out" };

function setConnection(kind) {
  const node = $("#connection");
  node.dataset.state = kind;
  node.textContent = CONNECTION_TEXT[kind] ?? "";
}

function showBanner(kind) {
  const banner = $("#banner");
  const origin = location.origin;
  const retry = el("button", { type: "button", id: "banner-retry", textContent: "Retry now" });
  retry.addEventListener("click", () => { if (state.wake) state.wake(); });
  if (kind === "login") {
    banner.replaceChildren(
      el("strong", { textContent: "Logged out. " }),
      "The server at ", el("code", { textContent: origin }), " no longer accepts this page's login: it restarted with a new access token. ",
      "Open the login address it printed in its terminal (it ends in ", el("code", { textContent: "?token=…" }),
      "), or set ", el("code", { textContent: "OPENMANUS_WEB_TOKEN" }), " to keep one token across restarts. ", retry);
  } else {
    banner.replaceChildren(
      el("strong", { textContent: "Cannot reach the OpenManus server " }), el("code", { textContent: origin }), ". ",
      "If it stopped, start it again in a terminal: ", el("code", { textContent: "python -m app.web" }),
      " (or ", el("code", { textContent: "openmanus-web" }), "). This page reconnects by itself once the server answers at this address; ",
      "if the server prints a new login address, open that one. ", retry);
  }
  banner.dataset.kind = kind;
  banner.hidden = false;
}

function hideBanner() {
  $("#banner").hidden = true;
}

// Reach the server again (after the stream or a request failed): probe it, with backoff, until
// it answers; then reconcile with the API. A restarted server (a new instance) replays the
// session from its start; the same server resumes the stream after the last event seen.
async function reconnect() {
  if (state.reconnecting) return;
  state.reconnecting = true;
  closeStream();
  setConnection("retrying");
  let delay = 500;
  // A stream that keeps failing before it opens (the server answers, the stream does not)
  // is retried with the same backoff, never in a tight loop.
  if (state.streamFailures > 0) await pause(Math.min(250 * 2 ** state.streamFailures, 5000));
  for (;;) {
    const status = await resync();
    if (status === "ok") break;
    showBanner(status === 401 ? "login" : "off");
    setConnection(status === 401 ? "login" : "off");
    await pause(delay);
    delay = Math.min(delay * 2, 5000);
  }
  state.reconnecting = false;
}

// "ok" once the server answered and the page agrees with it again; else the HTTP status
// (0: unreachable).
async function resync() {
  let info;
  try {
    const response = await fetch("/api/info", { cache: "no-store" });
    if (!response.ok) return response.status;
    info = await response.json();
  } catch { return 0; }
  hideBanner();
  const sid = state.sid;
  const restarted = state.instance !== null && info.instance !== state.instance;
  state.instance = info.instance;
  try {
    if (!sid) setConnection("idle");
    else if (restarted) await openSession(sid);
    else {
      const current = await api(`/api/sessions/${enc(sid)}/open`, { json: {} });
      if (state.sid === sid) { applyInfo(current); connect(sid, state.lastId); }
    }
  } catch (e) {
    if (e.status === 0 || e.status === 401) return e.status;
    setConnection("idle");
    showError(e.message);
  }
  loadSessions().catch(() => {});
  return "ok";
}

// Wait ``ms`` (the banner's "Retry now" ends the wait early).
function pause(ms) {
  return new Promise((resolve) => {
    const done = () => { if (state.wake === done) state.wake = null; resolve(); };
    state.wake = done;
    setTimeout(done, ms);
  });
}

function closeStream() {
  if (state.source) state.source.close();
  state.source = null;
}

function connect(sid, after = 0) {
  closeStream();
  const query = after ? `?after=${after}` : "";
  const source = new EventSource(`/api/sessions/${enc(sid)}/events${query}`);
  state.source = source;
  setConnection("connecting");
  let opened = false;
  source.onopen = () => {
    opened = true;
    state.streamFailures = 0;
    if (state.source === source) setConnection("on");
  };
  source.onerror = () => {
    if (state.source !== source) return;
    if (!opened) state.streamFailures += 1;
    reconnect();  // we reconnect ourselves: the server may have restarted (new event numbers)
  };
  source.onmessage = (message) => {
    if (state.sid !== sid || state.source !== source) return;
    let entry;
    try { entry = JSON.parse(message.data); } catch { return; }
    state.lastId = Math.max(state.lastId, Number(message.lastEventId) || 0);
    entry._received = performance.now();
    handle(entry);
    window.dispatchEvent(new CustomEvent("openmanus:event", { detail: entry }));
  };
}

// ---- sessions ---------------------------------------------------------------------------------

function sessionItem(s) {
  const item = el("li", { dataset: { id: s.id, state: s.state, mode: s.mode }, tabIndex: 0, role: "button" },
    el("span", { class: "title", textContent: s.title || "(no task yet)" }),
    el("span", { class: "meta", textContent: `${s.mode} · ${s.state}` }));
  if (s.id === state.sid) { item.classList.add("current"); item.setAttribute("aria-current", "true"); }
  const open = () => openSession(s.id).catch((e) => showError(e.message));
  item.addEventListener("click", open);
  item.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(); } });
  return item;
}

// Only the newest listing is shown: an older request answered late would show a stale state.
async function loadSessions() {
  const seq = ++state.listSeq;
  const { sessions } = await api("/api/sessions");
  if (seq !== state.listSeq) return;
  $("#sessions").replaceChildren(...sessions.map(sessionItem));
  $("#sessions-empty").hidden = sessions.length > 0;
  clearTimeout(state.listTimer);
  // Another session's task ends without an event on this page's stream: look again.
  if (sessions.some((s) => s.running && s.id !== state.sid)) state.listTimer = setTimeout(() => loadSessions().catch(() => {}), 3000);
}

// The current session's line in the list follows its event stream.
function markSession(sessionState) {
  const item = state.sid && document.querySelector(`#sessions li[data-id="${CSS.escape(state.sid)}"]`);
  if (!item) return;
  item.dataset.state = sessionState;
  item.querySelector(".meta").textContent = `${item.dataset.mode} · ${sessionState}`;
}

async function newSession(prompt) {
  const body = { mode: $("#mode").value };
  if (prompt) body.prompt = prompt;
  const info = await api("/api/sessions", { json: body });
  await openSession(info.id, info);
  return info;
}

function applyInfo(info) {
  setStatus(info.state, info.running);
  markSession(info.running ? "running" : info.state);
  $("#continue").hidden = !info.incomplete;
  if (info.profile) $("#model").textContent = `${info.profile}: ${info.model}`;
}

async function openSession(sid, info) {
  if (!info || !info.live) info = await api(`/api/sessions/${enc(sid)}/open`, { json: {} });
  closeStream();
  Object.assign(state, { sid, running: info.running, question: null, since: Number(info.created) || 0, written: "", lastId: 0, lastBubble: null });
  state.bubbles.clear(); state.calls.clear(); state.usage.clear(); state.dirty.clear(); state.openDirs = new Set([""]);
  for (const sel of ["#chat", "#activity", "#terminal", "#plan", "#files", "#preview", "#written", "#browser-action"]) $(sel).replaceChildren();
  $("#plan-panel").hidden = true; $("#browser-panel").hidden = true; $("#question").hidden = true;
  $("#written-panel").hidden = true; $("#screenshot-open").hidden = true; $("#browser-url").textContent = "";
  if ($("#viewer").open) $("#viewer").close();
  history.replaceState(null, "", `#${enc(sid)}`);
  $("#usage").textContent = "";
  $("#model").textContent = "";
  applyInfo(info);
  connect(sid);
  loadFiles();
  loadSessions().catch(() => {});
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

// A scroll box that stays at its end while the reader is there (new messages, a usage line, a
// total arriving later), and stays put when the reader scrolled up.
function follow(box) {
  let pinned = true;
  box.addEventListener("scroll", () => { pinned = box.scrollHeight - box.scrollTop - box.clientHeight < 48; });
  new MutationObserver(() => { if (pinned) box.scrollTop = box.scrollHeight; })
    .observe(box, { childList: true, subtree: true, characterData: true });
}

function addMessage(kind, text, who, rich) {
  const node = el("div", { class: `msg ${kind}` });
  if (who) node.append(el("span", { class: "who", textContent: who }));
  const body = el("div", { class: rich ? "text md" : "text" });
  if (rich) body.append(markdown(text)); else body.textContent = text;
  node.append(body);
  $("#chat").append(node);
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
  state.lastBubble = node;
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

function showUsage(node, text, kind = "usage") {
  let footer = node.querySelector(`:scope > .${kind}`);
  if (!footer) { footer = el("div", { class: kind }); node.append(footer); }
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

// The answer is shown once: when it is the text of the run's last message (it usually is), that
// message becomes the answer card; otherwise (a flow's summary) the card is added.
function answerCard(answer) {
  const last = state.lastBubble;
  if (last && answer.trim() && last.dataset.raw.trim() === answer.trim()) {
    last.classList.add("final");
    const who = last.querySelector(":scope > .who");
    if (who) who.textContent = `${who.textContent} · answer`;
    return last;
  }
  return addMessage("final", answer || "(finished without a written answer)", "answer", true);
}

// ---- Markdown (safe) --------------------------------------------------------------------------
// Model text (and a Markdown file in the workspace) is rendered by building DOM nodes: every
// piece of text goes in as a text node, never as HTML, so a reply holding <script> or
// <img onerror> shows those characters. Links go to http(s)/mailto only, never to this
// machine's addresses (a click there would carry the web UI's login cookie); images are
// never fetched from elsewhere: a file preview shows the workspace's own, others are links.

const LINK_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
const LOCAL_HOST = /^(localhost|.+\.localhost|127(\.\d{1,3}){3}|0\.0\.0\.0|\[::1?\]|\[::ffff:(7f[0-9a-f]{2}|127\.[\d.]+):?[0-9a-f]*\]|\[::\])\.?$/i;
const INLINE = new RegExp([
  String.raw`\\(?<esc>[!-\/:-@\[-\x60{-~])`,
  String.raw`(?<tick>\x60+)(?<code>[^\n]{1,400}?)\k<tick>`,
  String.raw`\*\*(?=\S)(?<strong>[^\n]{1,400}?)\*\*`,
  String.raw`__(?=\S)(?<strong2>[^\n]{1,400}?)__`,
  String.raw`\*(?=[^\s*])(?<em>[^\n]{1,400}?)\*`,
  String.raw`(?<![\w])_(?=[^\s_])(?<em2>[^\n]{1,400}?)_(?![\w])`,
  String.raw`~~(?=\S)(?<del>[^\n]{1,400}?)~~`,
  String.raw`!\[(?<alt>[^\]\n]{0,400})\]\(\s*<?(?<src>[^)\s>]{1,2000})>?(?:\s+"[^"\n]{0,400}")?\s*\)`,
  String.raw`\[(?<label>[^\]\n]{1,400})\]\(\s*<?(?<href>[^)\s>]{1,2000})>?(?:\s+"[^"\n]{0,400}")?\s*\)`,
  String.raw`<(?<angle>(?:https?|mailto):[^\s<>]{1,2000})>`,
  String.raw`(?<url>https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"\]])`,
].join("|"), "g");

const ENTITIES = {
  amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: "\u00a0", copy: "©", reg: "®",
  trade: "™", hellip: "…", mdash: "—", ndash: "–", laquo: "«", raquo: "»", ldquo: "“",
  rdquo: "”", lsquo: "‘", rsquo: "’", times: "×", middot: "·", deg: "°", euro: "€",
  rarr: "→", larr: "←", bull: "•",
};

// HTML entities become the characters they name, as text (never markup).
function decodeEntities(text) {
  if (!text.includes("&")) return text;
  return text.replace(/&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|([A-Za-z][A-Za-z0-9]{1,31}));/g, (m, dec, hex, name) => {
    if (name) return Object.hasOwn(ENTITIES, name) ? ENTITIES[name] : m;
    const code = dec ? parseInt(dec, 10) : parseInt(hex, 16);
    return code > 0 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff) ? String.fromCodePoint(code) : "\ufffd";
  });
}

function safeHref(raw) {
  let url;
  try { url = new URL(decodeEntities(raw)); } catch { return null; }
  if (!LINK_PROTOCOLS.has(url.protocol)) return null;
  if (url.protocol !== "mailto:" && (url.hostname === location.hostname || LOCAL_HOST.test(url.hostname))) return null;
  return url.href;
}

// ``rich``: the label is Markdown ([label](href)); a bare address is its own label, as text.
function link(href, label, rich = true) {
  const safe = safeHref(href);
  if (!safe) return el("span", { class: "no-link", title: "not a link this page opens", textContent: decodeEntities(label) });
  const a = el("a", { href: safe, target: "_blank", rel: "noopener noreferrer nofollow", referrerPolicy: "no-referrer" });
  if (rich) inline(label, a); else a.textContent = label;
  return a;
}

// Where images of the Markdown being rendered live: the directory of a previewed workspace file;
// null for the model's messages (their images are shown as links).
let imageBase = null;

// A relative path to an image in the workspace (resolved against ``imageBase``), else null.
function workspaceImage(raw) {
  if (imageBase === null || !state.sid) return null;
  let text = decodeEntities(raw);
  try { text = decodeURIComponent(text); } catch { return null; }
  if (!IMAGE.test(text) || /^[a-z][a-z0-9+.-]*:/i.test(text) || /[\\\0-\x1f?#]/.test(text) || /^\//.test(text)) return null;
  const parts = [];
  for (const part of `${imageBase}/${text}`.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") { if (!parts.length) return null; parts.pop(); } else parts.push(part);
  }
  return parts.length ? parts.join("/") : null;
}

function image(alt, src) {
  const path = workspaceImage(src);
  if (path) return el("img", { class: "md-image", src: fileUrl(path), alt: decodeEntities(alt) || path, referrerPolicy: "no-referrer" });
  return link(src, `image: ${alt || src}`);
}

function inline(text, parent) {
  const re = new RegExp(INLINE.source, "g");
  let last = 0, m;
  const plain = (s) => document.createTextNode(decodeEntities(s));
  while ((m = re.exec(text))) {
    if (m.index > last) parent.append(plain(text.slice(last, m.index)));
    last = re.lastIndex;
    const g = m.groups;
    if (g.esc !== undefined) parent.append(document.createTextNode(g.esc));
    else if (g.tick !== undefined) parent.append(el("code", { textContent: g.code }));
    else if (g.strong !== undefined || g.strong2 !== undefined) parent.append(inline(g.strong ?? g.strong2, el("strong")));
    else if (g.em !== undefined || g.em2 !== undefined) parent.append(inline(g.em ?? g.em2, el("em")));
    else if (g.del !== undefined) parent.append(inline(g.del, el("del")));
    else if (g.src !== undefined) parent.append(image(g.alt, g.src));
    else if (g.label !== undefined) parent.append(link(g.href, g.label));
    else if (g.angle !== undefined) parent.append(link(g.angle, g.angle, false));
    else if (g.url !== undefined) parent.append(link(g.url, g.url, false));
  }
  if (last < text.length) parent.append(plain(text.slice(last)));
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

// ``base``: the workspace directory a previewed file is in (its images are shown); omitted for
// the model's messages.
function markdown(text, base = null) {
  const outer = imageBase;
  imageBase = base;
  try { return blocks(String(text ?? "")); } finally { imageBase = outer; }
}

function blocks(text) {
  const out = document.createDocumentFragment();
  if (text.length > MARKDOWN_LIMIT) {
    out.append(el("pre", { class: "plain", textContent: text }));
    return out;
  }
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
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
      out.append(el("blockquote", {}, blocks(body.join("\n"))));
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
const CANCELLED = "^C (cancelled)";

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
  // Opened, the call is brought fully into view (a long one scrolls within its card).
  node.addEventListener("toggle", () => { if (node.open) node.scrollIntoView({ block: "nearest" }); });
  state.calls.set(entry.call_id, node);
  $("#activity").append(node);
  if (TERMINAL_TOOLS.has(entry.name)) {
    let args = {};
    try { args = JSON.parse(entry.arguments); } catch { /* shown raw */ }
    terminalLine(entry.name === "bash" ? `$ ${args.command ?? entry.arguments}` : `>>> ${args.code ?? entry.arguments}`);
  }
}

function markCancelled(node, output) {
  node.classList.remove("pending");
  node.classList.add("cancelled");
  node.dataset.cancelled = "true";
  const result = node.querySelector(".result");
  result.textContent = output ? `${output}\n${CANCELLED}` : "cancelled: the task ended before this call finished";
}

// A call still pending when its task ends (Stop, or the server going down) and for which no
// cancelled result came: it was cancelled, and says so instead of waiting forever.
function cancelPending() {
  for (const node of document.querySelectorAll("#activity details.tool-call.pending")) {
    markCancelled(node, "");
    if (TERMINAL_TOOLS.has(node.dataset.name)) terminalLine(CANCELLED);
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
  if (entry.url) { $("#browser-url").textContent = entry.url; $("#viewer-url").textContent = entry.url; }
  if (entry.title) $("#browser-url").title = entry.title;
  if (entry.n != null) {
    const src = `/api/sessions/${enc(state.sid)}/screenshot?n=${entry.n}`;
    $("#screenshot").src = src;
    $("#screenshot-open").hidden = false;
    if ($("#viewer").open) $("#viewer-image").src = src;  // the open viewer follows the page live
  }
}

// ---- the browser view, full size ----------------------------------------------------------------
// The thumbnail opens a dialog showing the screenshot at its real size (scroll to pan), with zoom
// (buttons, + / - / 0 for fit / 1 for full size, Ctrl+wheel); Escape closes it and focus goes back
// to the thumbnail. While open it follows the agent's browser live.

const ZOOMS = [0.25, 0.33, 0.5, 0.67, 0.75, 0.9, 1, 1.25, 1.5, 2, 3, 4];

function fitZoom() {
  const img = $("#viewer-image"), frame = $("#viewer-frame");
  if (!img.naturalWidth) return 1;
  return Math.min(1, frame.clientWidth / img.naturalWidth, frame.clientHeight / img.naturalHeight);
}

function setZoom(zoom) {
  const img = $("#viewer-image");
  state.zoom = zoom;
  const scale = zoom === "fit" ? fitZoom() : zoom;
  if (img.naturalWidth) img.style.width = `${Math.round(img.naturalWidth * scale)}px`;
  $("#zoom-level").textContent = `${Math.round(scale * 100)}%`;
}

function stepZoom(direction) {
  const current = state.zoom === "fit" ? fitZoom() : state.zoom;
  const next = direction > 0 ? ZOOMS.find((z) => z > current + 0.001) : [...ZOOMS].reverse().find((z) => z < current - 0.001);
  if (next) setZoom(next);
}

function openViewer() {
  const viewer = $("#viewer");
  state.opener = document.activeElement;
  $("#viewer-image").src = $("#screenshot").src;
  $("#viewer-url").textContent = $("#browser-url").textContent;
  viewer.showModal();
  setZoom(1);
  $("#viewer-frame").focus();
}

function initViewer() {
  const viewer = $("#viewer");
  $("#screenshot-open").addEventListener("click", openViewer);
  $("#viewer-image").addEventListener("load", () => setZoom(state.zoom));
  $("#zoom-in").addEventListener("click", () => stepZoom(1));
  $("#zoom-out").addEventListener("click", () => stepZoom(-1));
  $("#zoom-fit").addEventListener("click", () => setZoom("fit"));
  $("#zoom-actual").addEventListener("click", () => setZoom(1));
  $("#viewer-close").addEventListener("click", () => viewer.close());
  viewer.addEventListener("close", () => { const back = state.opener || $("#screenshot-open"); if (back && back.isConnected) back.focus(); });
  viewer.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const action = { "+": 1, "=": 1, "-": -1 }[e.key];
    if (action) { e.preventDefault(); stepZoom(action); }
    else if (e.key === "0") { e.preventDefault(); setZoom("fit"); }
    else if (e.key === "1") { e.preventDefault(); setZoom(1); }
  });
  $("#viewer-frame").addEventListener("wheel", (e) => {
    if (!e.ctrlKey) return;
    e.preventDefault();
    stepZoom(e.deltaY < 0 ? 1 : -1);
  }, { passive: false });
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
  if (entry.cancelled) {  // cut short by Stop: what it printed until then
    if (node) markCancelled(node, entry.output);
    if (TERMINAL_TOOLS.has(entry.name)) {
      if (entry.output) terminalLine(entry.output);
      terminalLine(CANCELLED);
    }
    return;
  }
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
      state.lastBubble = null;
      addMessage("user", entry.prompt ?? "(carrying on the task that was cut short)");
      if (!entry.history) { setStatus("running", true); markSession("running"); loadSessions().catch(() => {}); }
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
        ? answerCard(entry.final_answer || "")
        : addMessage("error", `The task did not complete: ${entry.failure || "unknown reason"}`
          + (entry.stop_reason ? ` (${entry.stop_reason})` : ""));
      state.lastBubble = null;
      if (entry.usage) {
        $("#usage").textContent = usageText(entry.usage, entry.cost);
        showUsage(node, `task total: ${usageText(entry.usage, entry.cost)}`, "total");
      }
      if (!entry.history) {
        const ended = entry.state || (entry.ok ? "finished" : "failed");
        setStatus(ended, false); markSession(ended); loadSessions().catch(() => {});
      }
      state.question = null; $("#question").hidden = true;
      scheduleFiles();
      break;
    }
    default: break;
  }
}

// ---- the workspace ----------------------------------------------------------------------------

const fileUrl = (path, download) => `/api/sessions/${enc(state.sid)}/file?path=${enc(path)}${download ? "&download=1" : ""}`;

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
  try { listing = await api(`/api/sessions/${enc(state.sid)}/files?path=${enc(path)}`); }
  catch (e) { list.append(el("li", { textContent: e.message })); return; }
  for (const entry of listing.entries) {
    const name = el("span", { textContent: entry.name, tabIndex: 0, role: "button" });
    const item = el("li", { class: entry.kind, dataset: { path: entry.path } }, name);
    list.append(item);
    let activate = null;
    if (entry.kind === "dir") {
      const children = el("ul", { class: "tree" });
      item.append(children);
      if (state.openDirs.has(entry.path)) { item.classList.add("open"); await fillDir(entry.path, children); }
      activate = async () => {
        if (item.classList.toggle("open")) { state.openDirs.add(entry.path); await fillDir(entry.path, children); }
        else { state.openDirs.delete(entry.path); children.replaceChildren(); }
      };
    } else if (entry.kind === "file") {
      activate = () => preview(entry);
    }
    if (activate) {
      name.addEventListener("click", activate);
      name.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); activate(); } });
    }
  }
}

const IMAGE = /\.(png|jpe?g|gif|webp|svg)$/i;
const HTML = /\.html?$/i;
const MARKDOWN_FILE = /\.(md|markdown|mdown|mkd)$/i;

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
  try { data = await api(`/api/sessions/${enc(sid)}/recent?since=${state.since}`); }
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

// A Markdown file is rendered as the model's messages are (same renderer, same rules), with a
// button to see its source; its images are the workspace's own.
function markdownPreview(entry, source) {
  const dir = entry.path.includes("/") ? entry.path.slice(0, entry.path.lastIndexOf("/")) : "";
  const rendered = el("div", { class: "md file-md" }, markdown(source, dir));
  const raw = el("pre", { class: "file-text", textContent: source, hidden: true });
  const toggle = el("button", { type: "button", class: "source-toggle", textContent: "Source", "aria-pressed": "false" });
  toggle.addEventListener("click", () => {
    raw.hidden = !raw.hidden; rendered.hidden = !raw.hidden;
    toggle.textContent = raw.hidden ? "Source" : "Rendered";
    toggle.setAttribute("aria-pressed", String(!raw.hidden));
  });
  return [toggle, rendered, raw];
}

async function preview(entry) {
  const seq = ++state.previewSeq;
  const box = $("#preview");
  const link = el("a", { class: "download", href: fileUrl(entry.path, true), download: entry.name, textContent: `Download ${entry.name}` });
  const head = el("div", { class: "row" }, el("strong", { textContent: entry.path }), link);
  if (IMAGE.test(entry.name)) box.replaceChildren(head, el("img", { src: fileUrl(entry.path), alt: entry.name }));
  else if (HTML.test(entry.name)) box.replaceChildren(head, sandboxedFrame(entry));
  else if (entry.size > 2_000_000) box.replaceChildren(head, el("p", { textContent: "Too large to preview." }));
  else {
    let response, source = null;
    try {
      response = await fetch(fileUrl(entry.path));
      if (response.ok && (response.headers.get("content-type") || "").startsWith("text/")) source = await response.text();
    } catch { response = null; }
    if (seq !== state.previewSeq) return;  // another file was clicked meanwhile
    let body;
    if (!response) body = el("p", { textContent: "Cannot preview: the server cannot be reached." });
    else if (!response.ok) body = el("p", { textContent: `Cannot preview: HTTP ${response.status}` });
    else if (source === null) body = el("p", { textContent: "(binary file)" });
    else if (MARKDOWN_FILE.test(entry.name)) body = markdownPreview(entry, source);
    else body = el("pre", { class: "file-text", textContent: source });
    box.replaceChildren(head, ...[body].flat());
  }
}

async function upload(files) {
  if (!state.sid) await newSession();
  const status = $("#upload-status");
  for (const file of files) {
    status.textContent = `uploading ${file.name}…`;
    try {
      await api(`/api/sessions/${enc(state.sid)}/upload?path=${enc(file.name)}`, { method: "PUT", body: file });
      status.textContent = `uploaded ${file.name}`;
    } catch (e) { status.textContent = `upload failed: ${e.message}`; }
  }
  loadFiles();
}

// ---- wiring -----------------------------------------------------------------------------------

async function submitTask(event) {
  event.preventDefault();
  const prompt = $("#prompt").value.trim();
  if (!prompt) { $("#prompt").focus(); return; }
  $("#send").disabled = true;
  try {
    if (!state.sid) await newSession(prompt);
    else await api(`/api/sessions/${enc(state.sid)}/tasks`, { json: { prompt } });
    $("#prompt").value = "";
  } catch (e) { showError(e.message); }
  finally { $("#send").disabled = false; }
}

async function sendAnswer() {
  if (!state.question) return;
  const answer = $("#answer-input").value;
  try {
    await api(`/api/sessions/${enc(state.sid)}/answer`, { json: { question_id: state.question, answer } });
    $("#answer-input").value = "";
    $("#question").hidden = true;
  } catch (e) { showError(e.message); }
}

async function loadInfo() {
  const info = await api("/api/info");
  state.instance = info.instance;
  if (!state.sid && info.model) $("#model").textContent = `default: ${info.model}`;
}

function init() {
  $("#task-form").addEventListener("submit", submitTask);
  $("#prompt").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) submitTask(e); });
  $("#new-session").addEventListener("click", () => newSession().catch((e) => showError(e.message)));
  $("#stop").addEventListener("click", () => api(`/api/sessions/${enc(state.sid)}/stop`, { json: {} }).catch((e) => showError(e.message)));
  $("#continue").addEventListener("click", () => api(`/api/sessions/${enc(state.sid)}/continue`, { json: {} }).catch((e) => showError(e.message)));
  $("#answer-send").addEventListener("click", sendAnswer);
  $("#answer-input").addEventListener("keydown", (e) => { if (e.key === "Enter") sendAnswer(); });
  $("#refresh-files").addEventListener("click", loadFiles);
  $("#upload-input").addEventListener("change", (e) => { upload([...e.target.files]); e.target.value = ""; });
  for (const example of document.querySelectorAll("#welcome [data-prompt]")) {
    example.addEventListener("click", () => { $("#prompt").value = example.dataset.prompt; $("#prompt").focus(); });
  }
  follow($("#chat"));
  follow($("#activity"));
  initViewer();
  loadInfo().catch(() => {});
  loadSessions().catch(() => {});
  const wanted = decodeURIComponent(location.hash.slice(1));  // a reload reopens the session
  if (wanted) openSession(wanted).catch((e) => { history.replaceState(null, "", location.pathname); showError(e.message); });
  document.body.dataset.ready = "true";
}

init();
