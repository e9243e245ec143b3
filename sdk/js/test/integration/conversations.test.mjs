// Conversation state against a real inboxd: the login summary (and its
// pages), history by pull, read counts in a group.
import { test } from "node:test";
import assert from "node:assert/strict";
import { InboxdError } from "../../dist/node.js";
import { connect, conv, goDial, newUid, recorder, token, waitFor } from "./harness.mjs";

test("summary: the welcome's and summaryAll's conversations set the unread counts before any message is handled", async (t) => {
  const user = newUid();
  const peer = newUid();
  const p = await goDial(peer, "go");
  t.after(() => p.close());
  const convs = [];
  for (let i = 0; i < 3; i++) {
    const c = await conv([user, peer, newUid()], true);
    convs.push(c);
    await p.sendMany(c, i + 1, `c${i}-`);
  }
  // No handler: the client only reads state (and confirms nothing).
  const d = await connect(t, { token: await token(user, "web1") });
  const w = d.welcome();
  assert.equal(w.pending, 6);
  assert.deepEqual(w.summary.convs.map((s) => s.convId), [...convs].reverse(), "newest last message first");
  assert.deepEqual(w.summary.convs.map((s) => s.unread), [3, 2, 1]);
  assert.equal(w.summary.convs[0].lastPreview, "c2-3");
  for (const [i, c] of convs.entries()) {
    const cv = d.conversation(c);
    assert.equal(cv.unread, i + 1, `conversation ${c}'s unread from the summary`);
    assert.equal(cv.lastPreview, `c${i}-${i + 1}`);
  }
  const all = await d.summaryAll();
  assert.equal(all.length, 3);
  await d.read(convs[2], 3);
  const again = await d.summary();
  assert.deepEqual(again.convs.map((s) => s.convId), [convs[1], convs[0]], "a read conversation leaves the summary");
  assert.equal(d.conversation(convs[2]).unread, 0);
});

test("pull: history pages before and after a position, in ascending conv_seq", async (t) => {
  const user = newUid();
  const peer = newUid();
  const c = await conv([user, peer]);
  const p = await goDial(peer, "go");
  t.after(() => p.close());
  await p.sendMany(c, 120, "h");
  const d = await connect(t, { token: await token(user, "web1") });
  const last = await d.pull(c, 0, 121, 50);
  assert.deepEqual(last.messages.map((m) => m.convSeq), Array.from({ length: 50 }, (_, i) => 71 + i));
  assert.ok(last.hasMore);
  assert.ok(last.messages.every((m) => m.lane === "pull" && m.seq === 0 && m.senderUid === peer));
  const older = await d.pull(c, 0, 71, 50);
  assert.equal(older.messages[0].convSeq, 21);
  const first = await d.pull(c, 0, 0, 10);
  assert.deepEqual(first.messages.map((m) => m.text), Array.from({ length: 10 }, (_, i) => `h${i + 1}`));
  await assert.rejects(d.pull(c, 0, 0, 51), (e) => e instanceof InboxdError && e.code === "INVALID_ARGUMENT");
  const stranger = await conv([peer, newUid()]);
  await assert.rejects(d.pull(stranger, 0, 0, 10), (e) => e instanceof InboxdError && e.code === "NOT_MEMBER");
});

test("readCount: how many members of a group read a message", async (t) => {
  const [u1, u2, u3] = [newUid(), newUid(), newUid()];
  const g = await conv([u1, u2, u3], true);
  const rec = recorder();
  const d1 = await connect(t, { token: await token(u1, "web1"), handler: rec.handler });
  const { convSeq } = await d1.send(g, "g1", "hello group");
  const p2 = await goDial(u2, "go");
  t.after(() => p2.close());
  assert.deepEqual(await d1.readCount(g, convSeq), { read: 0, members: 2 });
  await p2.read(g, convSeq);
  await waitFor("one reader", async () => (await d1.readCount(g, convSeq)).read === 1);
});
