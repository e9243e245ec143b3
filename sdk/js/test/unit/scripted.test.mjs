// The client against a scripted server (a `ws` WebSocketServer on loopback
// speaking the binary frames), for what a real inboxd does not do on
// demand: a small advertised max_frame, a retry hint, transient send
// failures (client/scripted_test.go's approach).
import { test } from "node:test";
import assert from "node:assert/strict";
import { WebSocketServer } from "ws";
import { create, fromBinary, toBinary, pb } from "../../dist/internal.js";
import { Client, InboxdError } from "../../dist/node.js";

/** A scripted server: onHello answers each hello (a frame to send back); frames go to onFrame. */
function scripted(t, { onHello, onFrame = () => {} }) {
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  const conns = [];
  const frames = [];
  wss.on("connection", (ws) => {
    const conn = { ws, n: conns.length, send: (type, schema, init) => ws.send(frame(type, schema, init)) };
    conns.push(conn);
    ws.on("message", (data) => {
      const b = new Uint8Array(data);
      const type = b[1];
      const body = b.subarray(2);
      frames.push({ conn: conn.n, type, body });
      if (type === 1) onHello(conn, fromBinary(pb.HelloSchema, body));
      else onFrame(conn, type, body);
    });
  });
  t.after(() => new Promise((r) => { for (const c of conns) c.ws.terminate(); wss.close(r); }));
  return new Promise((resolve) => wss.on("listening", () => resolve({ url: `ws://127.0.0.1:${wss.address().port}/ws`, conns, frames })));
}

function frame(type, schema, init) {
  const body = toBinary(schema, create(schema, init));
  const out = new Uint8Array(body.length + 2);
  out[0] = 1;
  out[1] = type;
  out.set(body, 2);
  return out;
}

const welcome = (conn, extra = {}) =>
  conn.send(64, pb.WelcomeSchema, { uid: 1n, device: "d", heartbeatMs: 20000, maxFrame: 65536, maxInflightSends: 256, ...extra });

test("a send whose frame exceeds the welcome's max_frame is refused before the wire", async (t) => {
  const s = await scripted(t, { onHello: (c) => welcome(c, { maxFrame: 100 }) });
  const c = await Client.connect({ url: s.url, token: "t" });
  t.after(() => c.close());
  await assert.rejects(c.send(1, "big", "x".repeat(200)), (e) => e instanceof InboxdError && e.code === "FRAME_TOO_LARGE" && /exceeds the server's max_frame of 100/.test(e.message));
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(s.frames.filter((f) => f.type === 2).length, 0, "no send frame went on the wire");
});

test("a fatal error's retry hint: the client does not come back before it", async (t) => {
  const helloAt = [];
  const s = await scripted(t, {
    onHello: (c) => {
      helloAt.push(Date.now());
      welcome(c);
      if (c.n === 0) {
        c.send(67, pb.ErrorSchema, { code: pb.ErrorCode.UNAVAILABLE, message: "draining", retryAfterMs: 600, fatal: true });
        c.ws.close();
      }
    },
  });
  const c = await Client.connect({ url: s.url, token: "t", minBackoffMs: 10, maxBackoffMs: 20 });
  t.after(() => c.close());
  while (helloAt.length < 2) await new Promise((r) => setTimeout(r, 20));
  const waited = helloAt[1] - helloAt[0];
  assert.ok(waited >= 600, `came back after ${waited} ms, before the 600 ms hint`);
});

test("a FAILED send is retried with the same client_msg_id, and the sends keep their order", async (t) => {
  const seen = [];
  let failedOnce = false;
  const s = await scripted(t, {
    onHello: (c) => welcome(c),
    onFrame: (c, type, body) => {
      if (type !== 2) return;
      const m = fromBinary(pb.SendSchema, body);
      seen.push(m.clientMsgId);
      if (m.clientMsgId === "b" && !failedOnce) {
        failedOnce = true;
        c.send(65, pb.SendResultSchema, { clientMsgId: "b", status: pb.SendStatus.FAILED, code: pb.ErrorCode.RATE_LIMITED });
        return;
      }
      c.send(65, pb.SendResultSchema, { clientMsgId: m.clientMsgId, status: pb.SendStatus.STORED, msgId: BigInt(seen.length), convSeq: BigInt(seen.length) });
    },
  });
  const c = await Client.connect({ url: s.url, token: "t" });
  t.after(() => c.close());
  const [a, b] = await Promise.all([c.send(1, "a", "1"), c.send(1, "b", "2")]);
  assert.equal(a.clientMsgId, "a");
  assert.equal(b.clientMsgId, "b");
  assert.deepEqual(seen, ["a", "b", "b"], "b sent again after FAILED, with its id");
});

test("unanswered sends go out again in issue order after a reconnect", async (t) => {
  const bySession = [[], []];
  const s = await scripted(t, {
    onHello: (c) => welcome(c),
    onFrame: (c, type, body) => {
      if (type !== 2) return;
      const m = fromBinary(pb.SendSchema, body);
      bySession[c.n]?.push(m.clientMsgId);
      if (c.n === 0 && bySession[0].length === 3) c.ws.terminate(); // no answer to any of them
      if (c.n === 1) c.send(65, pb.SendResultSchema, { clientMsgId: m.clientMsgId, status: pb.SendStatus.STORED, msgId: 1n, convSeq: 1n });
    },
  });
  const c = await Client.connect({ url: s.url, token: "t", minBackoffMs: 10, maxBackoffMs: 20 });
  t.after(() => c.close());
  await Promise.all(["x", "y", "z"].map((id) => c.send(1, id, id)));
  assert.deepEqual(bySession, [["x", "y", "z"], ["x", "y", "z"]]);
});

test("SESSION_REPLACED stops the client: no reconnect", async (t) => {
  const s = await scripted(t, {
    onHello: (c) => {
      welcome(c);
      c.send(67, pb.ErrorSchema, { code: pb.ErrorCode.SESSION_REPLACED, message: "logged in elsewhere", fatal: true });
    },
  });
  const c = await Client.connect({ url: s.url, token: "t", minBackoffMs: 10, maxBackoffMs: 20 });
  await c.done;
  assert.equal(c.err?.reason, "replaced");
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(s.conns.length, 1, "logged in again");
});
