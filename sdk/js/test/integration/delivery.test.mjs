// Receiving against a real inboxd: offline delivery once and in order, a
// connection killed in the middle of a backlog, confirmation only after the
// handler resolved.
import { test } from "node:test";
import assert from "node:assert/strict";
import { assertInOrder, connect, conv, ctl, goDial, killableWebSocket, newUid, recorder, token, waitFor, WS_CUT_URL, WS_NEWEST_URL } from "./harness.mjs";

test("offline delivery: a backlog sent while the device was away comes once and in order", async (t) => {
  const alice = newUid();
  const bob = newUid();
  const c1 = await conv([alice, bob]);
  const c2 = await conv([alice, bob, newUid()], true);
  const a = await goDial(alice, "go");
  t.after(() => a.close());

  // Bob's device logs in once (it exists, its cursor is at the end), then goes away.
  const first = recorder();
  const b0 = await connect(t, { token: await token(bob, "web1"), handler: first.handler });
  await b0.close();

  await a.sendMany(c1, 150, "one-");
  await a.sendMany(c2, 150, "two-");

  const rec = recorder();
  const b = await connect(t, { token: await token(bob, "web1"), handler: rec.handler });
  assert.equal(b.welcome().pending, 300, "the welcome's pending entries");
  await waitFor("300 messages handed over", () => rec.got.length >= 300);
  await new Promise((r) => setTimeout(r, 300)); // nothing more may come
  assertInOrder(assert, rec.of(c1), 1, 150, "conversation 1");
  assertInOrder(assert, rec.of(c2), 1, 150, "conversation 2");
  assert.equal(rec.got.length, 300);
  assert.deepEqual(rec.of(c1).map((m) => m.text).slice(0, 2), ["one-1", "one-2"]);
  assert.ok(rec.got.every((m) => m.lane === "backfill" && m.senderUid === alice));
  const cv = b.conversation(c1);
  assert.equal(cv.lastSeq, 150);
  assert.equal(cv.unread, 150, "unread from the summary and the messages");
  await b.close();

  // Everything was confirmed: the next session of the device has nothing pending.
  const again = recorder();
  const b2 = await connect(t, { token: await token(bob, "web1"), handler: again.handler });
  assert.equal(b2.welcome().pending, 0, "pending after everything was handled and confirmed");
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(again.got.length, 0, "messages handed over again on the next session");
});

for (const side of ["server", "client"]) {
  test(`a connection killed mid-backfill (${side} side): nothing lost, nothing handed over twice, order kept`, async (t) => {
    const alice = newUid();
    const bob = newUid();
    const c1 = await conv([alice, bob]);
    const c2 = await conv([alice, bob, newUid()], true);
    const a = await goDial(alice, "go");
    t.after(() => a.close());
    await a.sendMany(c1, 300, "x");
    await a.sendMany(c2, 300, "y");

    const ks = killableWebSocket();
    const rec = recorder();
    const kills = [];
    let b;
    const kill = async () => kills.push(side === "server" ? (await ctl("/cut")).cut : ks.killAll());
    rec.onMessage = async () => {
      // A web device gets 50, then 200 a batch, 2 batches unconfirmed: the
      // first session has at most 450 of the 600 when it is killed at 120,
      // in the middle of its second batch. The second kill hits a later
      // session in the middle of its backlog (the first one past 450 that
      // is up: until then the handler may still be working through what
      // the first session brought).
      if (rec.got.length === 120) await kill();
      else if (kills.length === 1 && rec.got.length >= 450 && b.connected && b.stats().sessions >= 2) await kill();
    };
    b = await connect(t, {
      url: WS_CUT_URL,
      WebSocket: ks.WebSocket,
      token: await token(bob, "web1"),
      handler: rec.handler,
      minBackoffMs: 20,
      maxBackoffMs: 200,
    });
    await waitFor("600 messages handed over", () => rec.got.length >= 600, 60_000);
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(kills, [1, 1], `connections killed; stats ${JSON.stringify(b.stats())}`);
    assertInOrder(assert, rec.of(c1), 1, 300, "conversation 1");
    assertInOrder(assert, rec.of(c2), 1, 300, "conversation 2");
    const st = b.stats();
    assert.ok(st.sessions >= 3, `sessions: ${st.sessions}`);
    // The messages handled but not confirmed before each kill came again
    // and were caught as repeats.
    assert.ok(st.duplicates > 0, `repeats after the kills: ${st.duplicates}`);
    assert.equal(st.handled, 600);
    assert.ok(b.errors.some((e) => /connection lost/.test(e.message)), "the lost connections reported");
    await b.close();
    const again = recorder();
    const b2 = await connect(t, { token: await token(bob, "web1"), handler: again.handler });
    assert.equal(b2.welcome().pending, 0, "everything confirmed in the end");
  });
}

test("a message is confirmed only after its handler resolved: one whose handler rejected comes again", async (t) => {
  const alice = newUid();
  const bob = newUid();
  const c = await conv([alice, bob]);
  const a = await goDial(alice, "go");
  t.after(() => a.close());
  await a.sendMany(c, 5, "m");

  const rec = recorder();
  let failed = 0;
  const b = await connect(t, {
    token: await token(bob, "web1"),
    minBackoffMs: 20,
    maxBackoffMs: 100,
    handler: async (m) => {
      if (m.convSeq === 3 && failed === 0) {
        failed++;
        throw new Error("disk full"); // the application could not store it
      }
      await rec.handler(m);
    },
  });
  await waitFor("5 messages handled", () => rec.got.length >= 5);
  assertInOrder(assert, rec.got, 1, 5, "the conversation");
  assert.equal(failed, 1);
  assert.ok(b.stats().sessions >= 2, "the failed handler ended the session");
  assert.ok(b.errors.some((e) => /disk full/.test(e.message)), "the handler's error reported");
  await b.close();

  const again = recorder();
  const b2 = await connect(t, { token: await token(bob, "web1"), handler: again.handler });
  assert.equal(b2.welcome().pending, 0, "everything confirmed once handled");
});

test("live messages: handed over while connected, in order, and the conversation state follows", async (t) => {
  const alice = newUid();
  const bob = newUid();
  const c = await conv([alice, bob]);
  const rec = recorder();
  const b = await connect(t, { token: await token(bob, "web1"), handler: rec.handler });
  const a = await goDial(alice, "go");
  t.after(() => a.close());
  await a.sendMany(c, 20, "live");
  await waitFor("20 live messages", () => rec.got.length >= 20);
  assertInOrder(assert, rec.got, 1, 20, "live");
  assert.ok(rec.got.every((m) => m.lane === "live"));
  const cv = b.conversation(c);
  assert.equal(cv.lastSeq, 20);
  assert.equal(cv.lastPreview, "live20");
  assert.equal(cv.unread, 20);
  // Alice's device stored them: a DELIVERED receipt reaches her (Go) client.
  await waitFor("the peer's DELIVERED receipt", async () => (await a.conv(c)).peer_delivered === 20);
});

test("offline too long: the newest page first, then the older messages in order, none twice", async (t) => {
  const alice = newUid();
  const bob = newUid();
  const c = await conv([alice, bob]);
  const a = await goDial(alice, "go");
  t.after(() => a.close());
  const b0 = await connect(t, { url: WS_NEWEST_URL, token: await token(bob, "web1") });
  await b0.close();
  await a.sendMany(c, 300, "m"); // above this gateway's threshold of 50
  // The newest page is read from the archive, which is up to 200 ms behind.
  await ctl("/archived", { uid: bob, entries: 300 });

  const rec = recorder();
  const b = await connect(t, { url: WS_NEWEST_URL, token: await token(bob, "web1"), handler: rec.handler });
  assert.equal(b.welcome().offlineTooLong, true);
  await waitFor("300 handed over", () => rec.got.length >= 300, 30_000);
  await new Promise((r) => setTimeout(r, 500));
  const newest = rec.got.filter((m) => m.lane === "newest");
  assert.ok(newest.length > 0, "a newest page");
  assert.deepEqual(rec.got.slice(0, newest.length), newest, "the newest page first");
  const top = newest[0].convSeq;
  assert.deepEqual(newest.map((m) => m.convSeq), Array.from({ length: newest.length }, (_, i) => top + i), "the newest page is the newest messages");
  assertInOrder(assert, rec.got.slice(newest.length), 1, top - 1, "the drain from the cursor");
  assert.equal(new Set(rec.got.map((m) => m.msgId)).size, 300, "each message once");
  // The drain of this session skips the newest page's entries (the server
  // treats them as live ones); a later session's drain would bring them
  // again, confirmed without being handed over (stats.newestAgain).
  await b.close();
  const again = await connect(t, { url: WS_NEWEST_URL, token: await token(bob, "web1"), handler: rec.handler });
  assert.equal(again.welcome().pending, 0, "everything confirmed, the newest page included");
});
