// The inboxd web client: log in, conversations with unread counts, a
// conversation's history paged by pull, sending with its marks (pending,
// stored, delivered, read), and a debug panel of the delivery lanes.
//
// Everything the protocol guarantees comes from the SDK (inboxd-sdk.js,
// built from sdk/js): dedupe, per-conversation order, confirmation after
// the handler, read state from the summary and the events. This file only
// shows it. A tab is one device: its login lives in sessionStorage (a
// reload keeps it, another tab logs in as another device) and the SDK's
// receive state in IndexedDB under the user and device.

import { Client, IndexedDBStore } from "./inboxd-sdk.js";

const $ = (id) => document.getElementById(id);

const PAGE = 20; // messages per pull when opening or paging back
const LOG_MAX = 50; // lines of the lane log

const state = {
  config: { ws_path: "/ws", dev_tokens: false },
  login: null, // {uid, device, token}
  client: null,
  // convId -> {msgs: Map<convSeq, message>, loaded, hasOlder, peer}
  views: new Map(),
  // clientMsgId -> {convId, text, status, convSeq, msgId, error}
  outgoing: new Map(),
  open: 0,
  lanes: { live: 0, backfill: 0, pull: 0, newest: 0 },
  // The debug panel's hold per message (ms): a slow device, whose backfill
  // takes long enough to watch live messages overtake it.
  delay: 0,
};

// ---- login -------------------------------------------------------------

const LOGIN_KEY = "inboxd.login";
const OPEN_KEY = "inboxd.open";
const DELAY_KEY = "inboxd.delay";

async function init() {
  try {
    const r = await fetch("config.json", { cache: "no-store" });
    if (r.ok) state.config = await r.json();
  } catch {
    // An older gateway without config.json: paste a token.
  }
  // With development tokens: user id and device, or a token (the
  // details); without: a token only.
  const dev = state.config.dev_tokens;
  $("login-dev").hidden = !dev;
  $("token-summary").hidden = !dev;
  $("token-details").open = !dev;
  const tokenMode = () => {
    const useToken = $("token-details").open;
    $("login-token").required = useToken;
    for (const f of ["uid", "device"]) {
      $(`${f}-field`).hidden = !dev || useToken;
      $(`login-${f}`).required = dev && !useToken;
    }
  };
  $("token-details").addEventListener("toggle", tokenMode);
  tokenMode();
  $("login-form").addEventListener("submit", onLogin);
  $("logout").addEventListener("click", logout);
  $("open-form").addEventListener("submit", onOpenForm);
  $("compose").addEventListener("submit", onSend);
  $("older").addEventListener("click", () => loadOlder(state.open));
  $("history").addEventListener("scroll", onScroll);
  $("conv-list").addEventListener("keydown", onListKey);
  document.addEventListener("visibilitychange", () => markRead(state.open));
  const q = new URLSearchParams(location.search).get("delay");
  if (q !== null) sessionStorage.setItem(DELAY_KEY, q);
  state.delay = Math.max(0, Number(sessionStorage.getItem(DELAY_KEY)) || 0);
  $("debug-delay").value = String(state.delay);
  $("debug-delay").addEventListener("change", (ev) => {
    state.delay = Math.max(0, Number(ev.target.value) || 0);
    sessionStorage.setItem(DELAY_KEY, String(state.delay));
  });
  const saved = sessionStorage.getItem(LOGIN_KEY);
  if (saved) {
    try {
      await start(JSON.parse(saved));
      return;
    } catch (e) {
      sessionStorage.removeItem(LOGIN_KEY);
      $("login-error").textContent = `Saved login failed: ${e.message}`;
    }
  }
  showLogin();
}

function showLogin() {
  setStatus("logged out");
  $("login").hidden = false;
  $("app").hidden = true;
  $("who").hidden = true;
  $("logout").hidden = true;
  ($("token-details").open ? $("login-token") : $("login-uid")).focus();
}

async function onLogin(ev) {
  ev.preventDefault();
  $("login-error").textContent = "";
  try {
    let login;
    if (state.config.dev_tokens && !$("token-details").open) {
      const uid = $("login-uid").value.trim();
      const device = $("login-device").value.trim();
      login = { uid: Number(uid), device, token: await devToken(uid, device) };
    } else {
      const token = $("login-token").value.trim();
      const claims = tokenClaims(token);
      login = { uid: Number(claims.sub), device: claims.dev, token };
    }
    await start(login);
  } catch (e) {
    $("login-error").textContent = e.message;
  }
}

// devToken asks the gateway for a development token (only a gateway with
// the development secret has the endpoint).
async function devToken(uid, device) {
  const r = await fetch("dev/token", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ uid, device }),
  });
  if (!r.ok) throw new Error(`token: ${(await r.text()).trim() || r.status}`);
  return (await r.json()).token;
}

// tokenClaims reads a JWT's payload for display only: the gateway verifies.
function tokenClaims(token) {
  const parts = token.split(".");
  if (parts.length !== 3) throw new Error("token: not a JWT (three dot-separated parts)");
  try {
    const json = atob(parts[1].replace(/-/g, "+").replace(/_/g, "/"));
    const c = JSON.parse(json);
    if (!c.sub || !c.dev) throw new Error("no sub or dev claim");
    return c;
  } catch (e) {
    throw new Error(`token: unreadable payload (${e.message})`);
  }
}

async function start(login) {
  setStatus("connecting…");
  const wsURL = `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}${state.config.ws_path}`;
  const opts = {
    url: wsURL,
    token: login.token,
    deviceKind: "web",
    clientName: "inboxd-web",
    store: new IndexedDBStore(`inboxd-${login.uid}-${login.device}`),
    handler: onMessage,
    onConversation: () => scheduleRender(),
    onEvent: onEvent,
    onWelcome: (w) => {
      $("stat-pending").textContent = String(w.pending);
      setStatus(`connected to ${w.server}`);
    },
    onDisconnect: () => setStatus("reconnecting…"),
    onError: (e) => console.warn("inboxd:", e),
  };
  if (state.config.dev_tokens) {
    opts.refreshToken = async () => {
      const t = await devToken(String(login.uid), login.device);
      login.token = t;
      sessionStorage.setItem(LOGIN_KEY, JSON.stringify(login));
      return t;
    };
  }
  // The handler may run before connect resolves: it needs the login.
  state.login = login;
  let client;
  try {
    client = await Client.connect(opts);
  } catch (e) {
    state.login = null;
    throw e;
  }
  state.client = client;
  sessionStorage.setItem(LOGIN_KEY, JSON.stringify(login));
  // The client stops for good when this device logs in elsewhere (a
  // duplicated tab copies the login) or is revoked: say so, send nothing.
  void client.done.then(() => {
    if (state.client !== client || !client.err || client.err.reason === "closed") return;
    const why = client.err.reason === "replaced" ? "this device logged in in another tab or window" : "this device was revoked";
    setStatus(`stopped: ${why}; log out and in again`);
    $("compose-text").disabled = true;
    $("compose-send").disabled = true;
  });
  const w = client.welcome();
  if (w) {
    $("stat-pending").textContent = String(w.pending);
    setStatus(`connected to ${w.server}`);
  }
  $("login").hidden = true;
  $("app").hidden = false;
  $("who").hidden = false;
  $("who").textContent = `user ${login.uid} · device ${login.device}`;
  $("logout").hidden = false;
  for (const id of knownConvs()) view(id);
  scheduleRender();
  // A reload reopens the conversation that was open; a fresh login opens
  // none, so that the unread counts stay until the user looks.
  const open = Number(sessionStorage.getItem(OPEN_KEY));
  if (open > 0) await openConv(open);
}

async function logout() {
  sessionStorage.removeItem(LOGIN_KEY);
  sessionStorage.removeItem(OPEN_KEY);
  const c = state.client;
  state.client = null;
  state.views.clear();
  state.outgoing.clear();
  state.open = 0;
  $("messages").replaceChildren();
  if (c) await c.close();
  showLogin();
}

function setStatus(s) {
  $("status").textContent = s;
}

// Conversations the user opened or received in, per user on this browser
// (the summary names only those with something unread).
function knownKey() {
  return `inboxd.convs.${state.login?.uid}`;
}

function knownConvs() {
  try {
    return JSON.parse(localStorage.getItem(knownKey()) ?? "[]").filter((n) => Number.isSafeInteger(n) && n > 0);
  } catch {
    return [];
  }
}

function remember(convId) {
  const k = knownConvs();
  if (!k.includes(convId)) {
    k.push(convId);
    localStorage.setItem(knownKey(), JSON.stringify(k));
  }
}

// ---- receiving ---------------------------------------------------------

function view(convId) {
  let v = state.views.get(convId);
  if (!v) {
    // readCount: {convSeq, read, members} of the newest message of ours.
    v = { msgs: new Map(), loaded: false, hasOlder: false, peer: 0, readCount: null };
    state.views.set(convId, v);
  }
  return v;
}

function addMessage(m) {
  const v = view(m.convId);
  if (m.senderUid !== state.login.uid) v.peer = m.senderUid;
  v.msgs.set(m.convSeq, m);
  if (m.senderUid !== state.login.uid) return;
  // A message of our own that came back: a copy of one of our sends, which
  // the inbox may bring before the send's STORED answer (the message
  // carries no client_msg_id: the oldest send of the same text in the
  // conversation is it, sends being stored in order). Its outgoing entry
  // is done, so that the text is shown once.
  for (const [id, o] of state.outgoing) {
    if (o.msgId ? o.msgId === m.msgId : o.convId === m.convId && o.text === m.text && o.status === "pending") {
      state.outgoing.delete(id);
      break;
    }
  }
}

// onMessage is the SDK's handler: each msgId once, in conv_seq order per
// conversation. Resolving confirms the message.
async function onMessage(m) {
  if (state.delay > 0) await new Promise((r) => setTimeout(r, state.delay));
  state.lanes[m.lane] = (state.lanes[m.lane] ?? 0) + 1;
  logLane(m);
  const v = view(m.convId);
  const fresh = !v.msgs.has(m.convSeq);
  // A shown conversation takes what follows its first shown message; an
  // older one comes back with the "older" pages.
  if (!v.loaded || v.msgs.size === 0 || m.convSeq > Math.min(...v.msgs.keys())) addMessage(m);
  remember(m.convId);
  if (fresh && m.senderUid !== state.login.uid && m.lane === "live") {
    announce(`New message from user ${m.senderUid} in conversation ${m.convId}: ${m.text}`);
  }
  if (m.convId === state.open) markRead(m.convId);
  scheduleRender();
}

function onEvent(e) {
  const li = document.createElement("li");
  li.dataset.lane = "event";
  li.textContent = `event ${e.type} conv ${e.convId} up to ${e.upTo}${e.peerUid ? ` (user ${e.peerUid})` : ""}`;
  pushLog(li);
  scheduleRender();
}

function logLane(m) {
  const li = document.createElement("li");
  li.dataset.lane = m.lane;
  li.textContent = `${m.lane} conv ${m.convId} #${m.convSeq}${m.late ? " late" : ""}`;
  pushLog(li);
}

function pushLog(li) {
  const log = $("lane-log");
  log.prepend(li);
  while (log.children.length > LOG_MAX) log.lastElementChild.remove();
}

function announce(text) {
  const p = document.createElement("p");
  p.textContent = text;
  const a = $("announce");
  a.append(p);
  while (a.children.length > 5) a.firstElementChild.remove();
}

// ---- conversations -----------------------------------------------------

async function onOpenForm(ev) {
  ev.preventDefault();
  const id = Number($("open-conv").value);
  if (!Number.isSafeInteger(id) || id <= 0) return;
  $("open-conv").value = "";
  remember(id);
  await openConv(id);
}

async function openConv(convId) {
  state.open = convId;
  sessionStorage.setItem(OPEN_KEY, String(convId));
  const v = view(convId);
  $("compose-text").disabled = false;
  $("compose-send").disabled = false;
  scheduleRender();
  if (!v.loaded) {
    v.loaded = true;
    try {
      // The newest page: the last messages before "infinity".
      const page = await state.client.pull(convId, 0, Number.MAX_SAFE_INTEGER, PAGE);
      // What the inbox handed over from before this page waits for the
      // "older" pages: no hole in what is shown.
      if (page.hasMore && page.messages.length > 0) {
        for (const seq of [...v.msgs.keys()]) if (seq < page.messages[0].convSeq) v.msgs.delete(seq);
      }
      for (const m of page.messages) addMessage(m);
      v.hasOlder = page.hasMore && page.messages.length > 0;
      state.lanes.pull += page.messages.length;
    } catch (e) {
      v.loaded = false;
      setStatus(`conversation ${convId}: ${e.message}`);
    }
  }
  scheduleRender(true);
  markRead(convId);
  void refreshReadCount(convId);
}

// refreshReadCount asks how many members read our newest message: the
// marks of a group, and of a direct conversation whose receipts this
// browser never saw (a new device, another browser).
async function refreshReadCount(convId) {
  const v = view(convId);
  const mine = [...v.msgs.values()].filter((m) => m.senderUid === state.login.uid);
  if (mine.length === 0) return;
  const seq = Math.max(...mine.map((m) => m.convSeq));
  try {
    const r = await state.client.readCount(convId, seq);
    v.readCount = { convSeq: seq, read: r.read, members: r.members };
    scheduleRender();
  } catch (e) {
    console.warn("read count", e);
  }
}

async function loadOlder(convId) {
  const v = view(convId);
  if (!v.hasOlder || v.loadingOlder) return;
  v.loadingOlder = true;
  try {
    const first = Math.min(...v.msgs.keys());
    const page = await state.client.pull(convId, 0, first, PAGE);
    for (const m of page.messages) addMessage(m);
    state.lanes.pull += page.messages.length;
    v.hasOlder = page.hasMore && page.messages.length > 0;
    const h = $("history");
    const before = h.scrollHeight - h.scrollTop;
    render();
    h.scrollTop = h.scrollHeight - before; // keep what was in view in place
    if (!v.hasOlder) $("compose-text").focus();
    else $("older").focus();
  } catch (e) {
    setStatus(`older messages: ${e.message}`);
  } finally {
    v.loadingOlder = false;
  }
}

// The conversation list is one tab stop's worth of arrows: up and down
// move between conversations, Home and End to the ends.
function onListKey(ev) {
  const buttons = [...$("conv-list").querySelectorAll("button.conv")];
  const i = buttons.indexOf(document.activeElement);
  if (i < 0) return;
  const to = { ArrowDown: i + 1, ArrowUp: i - 1, Home: 0, End: buttons.length - 1 }[ev.key];
  if (to === undefined) return;
  ev.preventDefault();
  buttons[Math.max(0, Math.min(buttons.length - 1, to))].focus();
}

function onScroll() {
  if ($("history").scrollTop < 40) void loadOlder(state.open);
}

// markRead reads the open conversation up to its last message while the
// tab is visible; the SDK applies the answer, the other tabs learn it by
// read_sync. One read at a time per conversation, the next one for
// whatever arrived meanwhile: a backlog streaming into an open
// conversation costs a few reads, not one per message (reads are rate
// limited per user).
const reading = new Map(); // convId -> true while a read is in flight; "again" when one more is due

async function markRead(convId) {
  if (!convId || document.visibilityState !== "visible" || !state.client) return;
  if (reading.has(convId)) {
    reading.set(convId, "again");
    return;
  }
  reading.set(convId, true);
  try {
    for (;;) {
      const c = state.client.conversation(convId);
      const v = view(convId);
      const top = Math.max(c?.lastSeq ?? 0, ...v.msgs.keys(), 0);
      if (top > 0 && !(c && c.readSeq >= top)) {
        try {
          await state.client.read(convId, top);
        } catch (e) {
          console.warn("read", e);
          return;
        }
        scheduleRender();
      }
      if (reading.get(convId) !== "again") return;
      reading.set(convId, true);
    }
  } finally {
    reading.delete(convId);
  }
}

// ---- sending -----------------------------------------------------------

async function onSend(ev) {
  ev.preventDefault();
  const input = $("compose-text");
  const text = input.value;
  const convId = state.open;
  if (!text.trim() || !convId) return;
  input.value = "";
  const id = crypto.randomUUID();
  const o = { convId, text, status: "pending", convSeq: 0, msgId: "" };
  state.outgoing.set(id, o);
  remember(convId);
  // Each mark is drawn at once, not at the next frame: a fast answer
  // would otherwise skip "pending" or "stored" on screen.
  renderNow(true);
  try {
    const r = await state.client.send(convId, id, text);
    o.status = "stored";
    o.convSeq = r.convSeq;
    o.msgId = r.msgId;
    addMessage({
      seq: 0, msgId: r.msgId, convId, convSeq: r.convSeq, senderUid: state.login.uid,
      kind: 1, text, createdAtMs: Date.now(), lane: "sent", late: false,
    });
    state.outgoing.delete(id);
  } catch (e) {
    o.status = "failed";
    o.error = e.message;
  }
  renderNow(true);
  markRead(convId);
  const v = view(convId);
  if (v.readCount && v.readCount.members > 1) void refreshReadCount(convId);
}

// ---- rendering ---------------------------------------------------------

let renderQueued = false;
let scrollQueued = false;

function scheduleRender(scrollToEnd = false) {
  scrollQueued ||= scrollToEnd;
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    if (renderQueued) renderNow(false);
  });
}

function renderNow(scrollToEnd) {
  renderQueued = false;
  const h = $("history");
  const atEnd = h.scrollHeight - h.scrollTop - h.clientHeight < 40;
  render();
  if (scrollQueued || scrollToEnd || atEnd) h.scrollTop = h.scrollHeight;
  scrollQueued = false;
}

function render() {
  if (!state.client) return;
  renderConvs();
  renderView();
  renderStats();
}

function convIds() {
  const convs = state.client.conversations();
  const ids = new Set([...convs.keys(), ...state.views.keys()]);
  const last = (id) => {
    const c = convs.get(id);
    const v = state.views.get(id);
    const m = v && v.msgs.size ? v.msgs.get(Math.max(...v.msgs.keys())) : undefined;
    return Math.max(c?.lastAtMs ?? 0, m?.createdAtMs ?? 0);
  };
  return [...ids].sort((a, b) => last(b) - last(a) || b - a);
}

function renderConvs() {
  const list = $("conv-list");
  const convs = state.client.conversations();
  const ids = convIds();
  $("conv-empty").hidden = ids.length > 0;
  const items = ids.map((id) => {
    const c = convs.get(id);
    const v = state.views.get(id);
    const li = document.createElement("li");
    const b = document.createElement("button");
    b.type = "button";
    b.className = "conv";
    b.dataset.conv = String(id);
    if (id === state.open) b.setAttribute("aria-current", "true");
    const unread = c?.unread ?? 0;
    const name = document.createElement("span");
    name.className = "conv-name";
    name.textContent = `Conversation ${id}${v?.peer ? ` · user ${v.peer}` : ""}`;
    const badge = document.createElement("span");
    badge.className = "unread";
    badge.dataset.unread = String(unread);
    badge.textContent = unread > 0 ? String(unread) : "";
    badge.setAttribute("aria-label", `${unread} unread`);
    const preview = document.createElement("span");
    preview.className = "preview";
    preview.textContent = c?.lastPreview ?? "";
    b.append(name, badge, preview);
    b.addEventListener("click", () => openConv(id));
    li.append(b);
    return li;
  });
  // Keep keyboard focus on the same conversation across re-renders.
  const focused = document.activeElement?.dataset?.conv;
  list.replaceChildren(...items);
  if (focused) list.querySelector(`button[data-conv="${focused}"]`)?.focus();
}

function markOf(m, c) {
  if (m.senderUid !== state.login.uid) return "";
  const [delivered, read] = peerMarks(m.convId, c);
  if (read >= m.convSeq) return "read";
  // Every recipient read our newest message: they read all before it.
  const rc = view(m.convId).readCount;
  // (read_count's members are the recipients: the sender is not counted.)
  if (rc && m.convSeq <= rc.convSeq && rc.members > 0 && rc.read >= rc.members) return "read";
  if (delivered >= m.convSeq) return "delivered";
  return "stored";
}

// peerMarks are how far the peer's devices stored and the peer read, the
// higher of the SDK's (receipts of this session) and what this browser
// saw before: receipts come once, as inbox entries, and a reloaded page
// would otherwise lose the marks they set. Per user in localStorage.
function peerMarks(convId, c) {
  const key = `inboxd.marks.${state.login.uid}`;
  let all;
  try {
    all = JSON.parse(localStorage.getItem(key) ?? "{}");
  } catch {
    all = {};
  }
  const [d0, r0] = all[convId] ?? [0, 0];
  const d = Math.max(d0, c?.peerDelivered ?? 0, c?.peerRead ?? 0);
  const r = Math.max(r0, c?.peerRead ?? 0);
  if (d !== d0 || r !== r0) {
    all[convId] = [d, r];
    localStorage.setItem(key, JSON.stringify(all));
  }
  return [d, r];
}

const MARK_TEXT = { pending: "sending…", stored: "✓ stored", delivered: "✓✓ delivered", read: "✓✓ read", failed: "not sent" };

function renderView() {
  const id = state.open;
  const ol = $("messages");
  if (!id) {
    ol.replaceChildren();
    return;
  }
  const v = view(id);
  const c = state.client.conversation(id);
  $("view-title").textContent = `Conversation ${id}${v.peer ? ` with user ${v.peer}` : ""}`;
  $("older").hidden = !v.hasOlder;
  const items = [...v.msgs.values()].sort((a, b) => a.convSeq - b.convSeq).map((m) => {
    const li = msgItem(m, markOf(m, c));
    const rc = v.readCount;
    if (rc && rc.members > 1 && rc.convSeq === m.convSeq) {
      // A group: how many of the others read it.
      li.querySelector(".mark").textContent += ` · read by ${rc.read} of ${rc.members}`;
    }
    return li;
  });
  for (const [cid, o] of state.outgoing) {
    if (o.convId !== id) continue;
    items.push(msgItem({ convSeq: 0, msgId: "", senderUid: state.login.uid, text: o.text, createdAtMs: Date.now(), clientMsgId: cid }, o.status, o.error));
  }
  ol.replaceChildren(...items);
}

function msgItem(m, mark, error) {
  const li = document.createElement("li");
  const mine = m.senderUid === state.login.uid;
  li.className = mine ? "msg mine" : "msg";
  li.dataset.convSeq = String(m.convSeq);
  if (m.msgId) li.dataset.msgId = m.msgId;
  if (m.clientMsgId) li.dataset.clientMsgId = m.clientMsgId;
  const who = document.createElement("span");
  who.className = "from";
  who.textContent = mine ? "you" : `user ${m.senderUid}`;
  const text = document.createElement("span");
  text.className = "text";
  text.textContent = m.kind === 2 ? "(deleted)" : m.text;
  const time = document.createElement("time");
  const d = new Date(m.createdAtMs);
  time.dateTime = d.toISOString();
  time.textContent = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  li.append(who, text, time);
  if (mark) {
    li.dataset.status = mark;
    const s = document.createElement("span");
    s.className = "mark";
    s.textContent = MARK_TEXT[mark] ?? mark;
    if (error) s.title = error;
    li.append(s);
  }
  return li;
}

function renderStats() {
  for (const lane of ["live", "backfill", "pull", "newest"]) $(`lane-${lane}`).textContent = String(state.lanes[lane] ?? 0);
  const s = state.client.stats();
  // Received, repeats and events included: the lanes above count the
  // messages shown.
  $("wire-live").textContent = String(s.liveReceived);
  $("wire-backfill").textContent = String(s.backfillReceived);
  $("stat-duplicates").textContent = String(s.duplicates);
  $("stat-sessions").textContent = String(s.sessions);
}

init().catch((e) => {
  setStatus(`error: ${e.message}`);
  console.error(e);
});
