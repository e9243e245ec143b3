// Read sync between two SDK instances of one user and a Go client (the
// client package) of the same user; the peer's read receipts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { connect, conv, goDial, newUid, recorder, token, waitFor } from "./harness.mjs";

test("read sync: two SDK devices and a Go device of one user agree on the read position", async (t) => {
  const user = newUid();
  const peer = newUid();
  const c = await conv([user, peer]);
  const p = await goDial(peer, "go");
  t.after(() => p.close());
  await p.sendMany(c, 6, "hi");

  const events1 = [];
  const r1 = recorder();
  const r2 = recorder();
  const d1 = await connect(t, { token: await token(user, "web1"), handler: r1.handler, onEvent: (e) => events1.push(e) });
  const d2 = await connect(t, { token: await token(user, "web2"), handler: r2.handler });
  const g = await goDial(user, "go");
  t.after(() => g.close());
  await waitFor("both SDK devices got the 6", () => r1.got.length >= 6 && r2.got.length >= 6);
  assert.equal(d1.conversation(c).unread, 6, "unread before any read");
  await waitFor("the Go device got the 6", async () => (await g.conv(c)).handled === 6);

  // An SDK device reads up to 4: the other SDK device and the Go device follow.
  assert.equal(await d1.read(c, 4), 4);
  assert.equal(d1.conversation(c).readSeq, 4);
  await waitFor("READ_SYNC at the second SDK device", () => d2.conversation(c).readSeq === 4);
  assert.equal(d2.conversation(c).unread, 2);
  await waitFor("READ_SYNC at the Go device", async () => (await g.conv(c)).read_seq === 4);

  // The Go device reads everything: both SDK devices follow.
  assert.equal(await g.read(c, 6), 6);
  await waitFor("READ_SYNC from the Go device at both SDK devices", () => d1.conversation(c).readSeq === 6 && d2.conversation(c).readSeq === 6);
  assert.equal(d1.conversation(c).unread, 0);
  assert.equal(d2.conversation(c).unread, 0);
  assert.ok(events1.some((e) => e.type === "READ_SYNC" && e.convId === c && e.upTo === 6), "d1's onEvent saw the Go device's read");

  // The peer got READ receipts.
  await waitFor("the peer's READ receipt", async () => (await p.conv(c)).peer_read === 6);

  // A device that logs in later learns the read position from the summary
  // and its backlog of events: nothing unread.
  const r3 = recorder();
  const d3 = await connect(t, { token: await token(user, "web3"), handler: r3.handler });
  await waitFor("the new device's backlog", () => r3.got.length >= 6);
  await waitFor("the new device's read position", () => d3.conversation(c).readSeq === 6);
  assert.equal(d3.conversation(c).unread, 0);
});

test("receipts: an SDK sender sees its peer's DELIVERED and READ", async (t) => {
  const user = newUid();
  const peer = newUid();
  const c = await conv([user, peer]);
  const events = [];
  const d = await connect(t, { token: await token(user, "web1"), handler: async () => {}, onEvent: (e) => events.push(e) });
  for (let i = 1; i <= 3; i++) await d.send(c, `s${i}`, `hello ${i}`);
  const p = await goDial(peer, "go");
  t.after(() => p.close());
  await waitFor("DELIVERED from the peer", () => d.conversation(c).peerDelivered === 3);
  await p.read(c, 2);
  await waitFor("READ from the peer", () => d.conversation(c).peerRead === 2);
  assert.ok(events.some((e) => e.type === "READ" && e.peerUid === peer && e.upTo === 2));
  assert.equal(d.conversation(c).unread, 0, "own messages count as read");
});
