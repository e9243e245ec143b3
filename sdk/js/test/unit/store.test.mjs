// The stores (MemoryStore, IndexedDBStore over fake-indexeddb), the send
// checks and the reconnect delay.
import "fake-indexeddb/auto";
import { test } from "node:test";
import assert from "node:assert/strict";
import { IndexedDBStore, MemoryStore, checkSend, reconnectDelay, MAX_TEXT_LEN } from "../../dist/node.js";

for (const [name, make] of [
  ["MemoryStore", () => { const s = new MemoryStore(3); return () => s; }],
  ["IndexedDBStore", () => { const db = `t-${Math.random()}`; return () => new IndexedDBStore(db, 3); }],
]) {
  test(`${name}: keeps the recent msg_ids (oldest forgotten first) and the highest positions across instances`, async () => {
    const open = make();
    const s1 = open();
    await s1.load();
    await s1.save({ delivered: ["1", "2"], lastConvSeq: [[7, 2]] });
    await s1.save({ delivered: ["3", "4"], lastConvSeq: [[7, 4], [8, 1]] });
    s1.close?.();
    const s2 = open(); // a reloaded page
    const st = await s2.load();
    assert.deepEqual(st.delivered, ["2", "3", "4"]);
    assert.deepEqual([...st.lastConvSeq].sort(), [[7, 4], [8, 1]]);
    await s2.save({ delivered: ["5"], lastConvSeq: [] });
    const st2 = await open().load();
    assert.deepEqual(st2.delivered, ["3", "4", "5"]);
  });
}

test("checkSend refuses what the gateway would, with its words", () => {
  assert.equal(checkSend(1, "a", "hi"), undefined);
  assert.match(checkSend(0, "a", "hi").message, /INVALID_ARGUMENT: conv_id must be positive/);
  assert.match(checkSend(1, "", "hi").message, /client_msg_id must be 1..128 bytes/);
  assert.match(checkSend(1, "é".repeat(65), "hi").message, /client_msg_id must be 1..128 bytes/, "bytes, not characters");
  assert.match(checkSend(1, "a\n", "hi").message, /printable/);
  assert.match(checkSend(1, "a", "x".repeat(MAX_TEXT_LEN + 1)).message, /text exceeds 16384 bytes/);
  assert.equal(checkSend(1, "a", "x".repeat(MAX_TEXT_LEN)), undefined);
  assert.match(checkSend(1, "a", "\ud800").message, /valid UTF-8/);
});

test("reconnectDelay: full jitter within the backoff, after the server's hint", () => {
  for (let i = 0; i < 200; i++) {
    const d = reconnectDelay(100, 5000, 3, 0);
    assert.ok(d >= 1 && d <= 801, `attempt 3: ${d}`);
    const h = reconnectDelay(100, 5000, 20, 2000);
    assert.ok(h >= 2001 && h <= 7001, `capped, after the hint: ${h}`);
  }
});
