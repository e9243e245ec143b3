// The integration tests' side of the Go harness (internal/e2e/sdkjs/sdkjs_test.go,
// TestSDKJS): the gateway's URLs and the control endpoint come in the
// environment; this file wraps them.
import WebSocket from "ws";
import { Client } from "../../dist/node.js";

const env = (name) => {
  const v = process.env[name];
  if (!v) {
    throw new Error(`${name} is not set: these tests run against a real inboxd started by the Go harness: go test -count=1 -run TestSDKJS ./internal/e2e/sdkjs/ (or make test)`);
  }
  return v;
};

export const WS_URL = env("INBOXD_WS_URL");
export const WS_CUT_URL = env("INBOXD_WS_CUT_URL");
export const WS_NEWEST_URL = env("INBOXD_WS_NEWEST_URL");
const CTL = env("INBOXD_CTL_URL");

/** POSTs body to the harness's path and returns its JSON answer. */
export async function ctl(path, body = {}) {
  const r = await fetch(CTL + path, { method: "POST", body: JSON.stringify(body) });
  const text = await r.text();
  if (!r.ok) throw new Error(`harness ${path}: ${r.status} ${text}`);
  return JSON.parse(text);
}

// Each test file gets its own uids (one database for the whole run).
let nextUid = 1000 + (process.pid % 1000) * 1000;
export function newUid() {
  return nextUid++;
}

export async function token(uid, device, ttlS = 3600) {
  return (await ctl("/token", { uid, device, ttl_s: ttlS })).token;
}

export async function conv(members, group = false) {
  return (await ctl("/conv", { members, group })).conv_id;
}

/** A Go client (the client package) of uid/device in the harness. */
export async function goDial(uid, device) {
  const { id } = await ctl("/go/dial", { uid, device });
  return {
    id,
    send: (c, cmid, text) => ctl("/go/send", { id, conv: c, cmid, text }),
    sendMany: async (c, n, prefix) => Number((await ctl("/go/sendmany", { id, conv: c, n, prefix })).last_conv_seq),
    read: async (c, upTo) => Number((await ctl("/go/read", { id, conv: c, up_to: upTo })).read_seq),
    conv: async (c) => {
      const r = await ctl("/go/conv", { id, conv: c });
      return Object.fromEntries(Object.entries(r).map(([k, v]) => [k, Number(v)]));
    },
    close: () => ctl("/go/close", { id }),
  };
}

/** Polls fn until it returns a truthy value; fails after ms with what it waited for and the last value seen. */
export async function waitFor(what, fn, ms = 20_000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}; last: ${last instanceof Error ? last.stack : JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A handler that records every message it is given. */
export function recorder() {
  const got = [];
  const rec = {
    got,
    handler: async (m) => {
      got.push(m);
      if (rec.onMessage) await rec.onMessage(m);
    },
    onMessage: undefined,
    of: (c) => got.filter((m) => m.convId === c),
  };
  return rec;
}

/**
 * A WebSocket whose instances the test can kill: terminate() ends the TCP
 * connection at once, without a close handshake (the page or the network
 * went away).
 */
export function killableWebSocket() {
  const open = new Set();
  class KillableWebSocket extends WebSocket {
    constructor(url) {
      super(url);
      open.add(this);
      this.addEventListener("close", () => open.delete(this));
    }
  }
  return {
    WebSocket: KillableWebSocket,
    killAll() {
      const n = open.size;
      for (const ws of open) ws.terminate();
      return n;
    },
  };
}

/** Connects an SDK client; closed by the returned cleanup list. */
export async function connect(t, opts) {
  const errors = [];
  const c = await Client.connect({ url: WS_URL, deviceKind: "web", onError: (e) => errors.push(e), ...opts });
  c.errors = errors;
  t.after(() => c.close());
  return c;
}

/** Asserts got holds exactly convSeqs from..to in order, each msgId once, none late. */
export function assertInOrder(assert, got, from, to, what) {
  const seqs = got.map((m) => m.convSeq);
  const want = Array.from({ length: to - from + 1 }, (_, i) => from + i);
  assert.deepEqual(seqs, want, `${what}: conv_seqs handed over`);
  const ids = new Set(got.map((m) => m.msgId));
  assert.equal(ids.size, got.length, `${what}: a msg_id handed over twice`);
  assert.equal(got.filter((m) => m.late).length, 0, `${what}: messages flagged late`);
}
