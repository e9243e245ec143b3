// Sending against a real inboxd: client_msg_id, queued and retried in
// order across reconnects, idempotent; sends that can never be stored are
// refused at once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { InboxdError, MAX_TEXT_LEN } from "../../dist/node.js";
import { connect, conv, ctl, goDial, killableWebSocket, newUid, token, waitFor, WS_CUT_URL } from "./harness.mjs";

test("sends queued while the connection is cut are stored once each, in issue order", async (t) => {
  const alice = newUid();
  const bob = newUid();
  const c = await conv([alice, bob]);
  const a = await connect(t, { url: WS_CUT_URL, token: await token(alice, "web1"), minBackoffMs: 20, maxBackoffMs: 200 });
  const sends = [];
  for (let i = 1; i <= 60; i++) {
    sends.push(a.send(c, `cmid-${i}`, `text ${i}`));
    if (i === 20 || i === 40) await ctl("/cut"); // the socket goes away under the queue
  }
  const results = await Promise.all(sends);
  const seqs = results.map((r) => r.convSeq);
  assert.deepEqual(seqs, Array.from({ length: 60 }, (_, i) => i + 1), "conv_seqs follow the issue order");
  assert.ok(a.stats().sessions >= 2, "the cut forced a reconnect");

  // Idempotent: the same client_msg_id gets the original msg_id and conv_seq.
  const again = await a.send(c, "cmid-7", "text 7");
  assert.equal(again.msgId, results[6].msgId);
  assert.equal(again.convSeq, 7);

  // The peer got each message once.
  const b = await goDial(bob, "go");
  t.after(() => b.close());
  await waitFor("Bob's Go client handled 60", async () => (await b.conv(c)).handled === 60);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal((await b.conv(c)).handled, 60, "messages stored twice");
});

test("a send sent twice over a killed socket is stored once (the retry with the same client_msg_id)", async (t) => {
  const alice = newUid();
  const bob = newUid();
  const c = await conv([alice, bob]);
  const ks = killableWebSocket();
  const a = await connect(t, { WebSocket: ks.WebSocket, token: await token(alice, "web1"), minBackoffMs: 20, maxBackoffMs: 100 });
  const p = a.send(c, "only-once", "hello");
  ks.killAll(); // the frame may or may not have reached the server: the client sends it again
  const r = await p;
  const r2 = await a.send(c, "next", "after");
  assert.equal(r2.convSeq, r.convSeq + 1, "the first send was stored once");
});

test("a send that can never be stored is refused at once with the gateway's code and words", async (t) => {
  const alice = newUid();
  const bob = newUid();
  const c = await conv([alice, bob]);
  const a = await connect(t, { token: await token(alice, "web1") });
  await assert.rejects(a.send(c, "big", "x".repeat(MAX_TEXT_LEN + 1)), (e) => e instanceof InboxdError && e.code === "INVALID_ARGUMENT" && /text exceeds 16384 bytes/.test(e.message));
  await assert.rejects(a.send(c, "", "x"), (e) => e instanceof InboxdError && e.code === "INVALID_ARGUMENT");
  await assert.rejects(a.send(0, "z", "x"), (e) => e instanceof InboxdError && /conv_id must be positive/.test(e.message));
  // Not a member: the server's permanent answer.
  const other = await conv([bob, newUid()]);
  await assert.rejects(a.send(other, "nm", "x"), (e) => e instanceof InboxdError && e.code === "NOT_MEMBER");
  // A text within 16 KiB of bytes but whose frame exceeds the welcome's max_frame cannot happen at 64 KiB:
  // the largest text is stored.
  const ok = await a.send(c, "max", "é".repeat(MAX_TEXT_LEN / 2));
  assert.equal(ok.convSeq, 1);
});
