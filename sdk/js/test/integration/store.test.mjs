// Reload with the persistent store: a new SDK instance over the same store
// (a reloaded page) keeps conv_seq order and does not hand over again what
// the handler took before.
import { test } from "node:test";
import assert from "node:assert/strict";
import "fake-indexeddb/auto";
import { IndexedDBStore, MemoryStore } from "../../dist/node.js";
import { assertInOrder, connect, conv, goDial, newUid, recorder, token, waitFor } from "./harness.mjs";

// Each test runs over both stores: IndexedDBStore (over fake-indexeddb in
// Node; a new instance of the same database is the reloaded page) and
// MemoryStore (the same instance again).
const stores = {
  MemoryStore: () => {
    const s = new MemoryStore();
    return () => s;
  },
  IndexedDBStore: () => {
    const name = `inboxd-test-${Math.random()}`;
    return () => new IndexedDBStore(name);
  },
};

for (const [kind, makeStore] of Object.entries(stores)) {
  test(`reload (${kind}): what the handler took is not handed over again, though the server delivers it again`, async (t) => {
    const alice = newUid();
    const bob = newUid();
    const c = await conv([alice, bob]);
    const a = await goDial(alice, "go");
    t.after(() => a.close());
    await a.sendMany(c, 30, "m");

    const page = makeStore();
    // The first page handles everything but its confirmations never reach the
    // server (noAck: the tab closed before they went out).
    const rec1 = recorder();
    const p1 = await connect(t, { token: await token(bob, "web1"), handler: rec1.handler, store: page(), noAck: true });
    await waitFor("30 handled", () => rec1.got.length >= 30);
    await p1.close();
    assertInOrder(assert, rec1.got, 1, 30, "first page");

    await a.sendMany(c, 10, "n"); // conv_seq 31..40 while the page reloads

    const rec2 = recorder();
    const p2 = await connect(t, { token: await token(bob, "web1"), handler: rec2.handler, store: page() });
    assert.equal(p2.welcome().pending, 40, "the server hands the unconfirmed 30 over again, and the 10 new ones");
    await waitFor("the 10 new messages", () => rec2.got.length >= 10);
    await new Promise((r) => setTimeout(r, 500));
    assertInOrder(assert, rec2.got, 31, 40, "reloaded page");
    assert.equal(p2.stats().duplicates, 30, "the 30 repeats confirmed without being handed over");
    await p2.close();
  });

  test(`reload (${kind}): a conversation's order is kept across the reload (a gap after it is filled by pull, not skipped)`, async (t) => {
    const alice = newUid();
    const bob = newUid();
    const c = await conv([alice, bob]);
    const a = await goDial(alice, "go");
    t.after(() => a.close());
    await a.sendMany(c, 5, "m"); // 1..5

    const page = makeStore();
    const rec1 = recorder();
    const p1 = await connect(t, { token: await token(bob, "web1"), handler: rec1.handler, store: page() });
    await waitFor("5 handled", () => rec1.got.length >= 5);
    await p1.close(); // the store holds conversation c at 5

    // 6..9 leave the device's inbox without reaching this page: a client of
    // the device confirms them with ack_range, as one that drops an old
    // backlog does. They are still in the conversation's timeline.
    await a.sendMany(c, 4, "gap"); // 6..9
    let upTo = 0;
    const skip = recorder();
    skip.onMessage = async (m) => (upTo = Math.max(upTo, m.seq));
    const p15 = await connect(t, { token: await token(bob, "web1"), handler: skip.handler, noAck: true });
    await waitFor("6..9 seen by the skipping client", () => skip.got.length >= 4);
    p15.ackRange(upTo);
    await new Promise((r) => setTimeout(r, 300));
    await p15.close();

    const rec2 = recorder();
    const p2 = await connect(t, { token: await token(bob, "web1"), handler: rec2.handler, store: page(), gapWaitMs: 200 });
    assert.equal(p2.welcome().pending, 0, "ack_range confirmed 6..9");
    await a.send(c, "ten", "10"); // live, after a gap of 6..9 in this page's order
    await waitFor("6..10 handed over", () => rec2.got.length >= 5);
    await new Promise((r) => setTimeout(r, 300));
    assertInOrder(assert, rec2.got, 6, 10, "reloaded page");
    assert.deepEqual(rec2.got.map((m) => m.lane), ["pull", "pull", "pull", "pull", "live"]);
    assert.ok(p2.stats().gapPulls >= 1);
  });
}
