// The ordering buffer's rules with a clock of the test's own (a port of
// client/order_test.go's core cases).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Order, SeqRanges, IdSet } from "../../dist/internal.js";

const S = {}; // a session
let nextSeq = 1;
function msg(conv, convSeq, lane = "backfill", msgId = `${conv}-${convSeq}`) {
  return { seq: nextSeq++, msgId, convId: conv, convSeq, senderUid: 9, kind: 1, text: "", createdAtMs: 0, lane, late: false };
}
function pend(m, at = 0) {
  return { m, b: { s: S, id: 1n, size: 1, handled: [] }, arrived: at, expired: false };
}
/** Runs release at now and returns the steps as "kind:conv/convSeq" (pull: "pull:conv/after-before"). */
async function release(o, now) {
  const out = [];
  await o.release(
    now,
    async (st) => {
      out.push(st.kind === "pull" ? `pull:${st.conv}/${st.after}-${st.before}` : `${st.kind}:${st.p.m.convId}/${st.p.m.convSeq}`);
      return true;
    },
    async () => {},
  );
  return out;
}

test("in order: messages go by conv_seq, whatever order they arrive in within a release", async () => {
  const o = new Order({ gapWaitMs: 500, dedupeSize: 100 });
  o.add(pend(msg(1, 2)));
  o.add(pend(msg(1, 1)));
  o.add(pend(msg(1, 3)));
  assert.deepEqual(await release(o, 0), ["deliver:1/1", "deliver:1/2", "deliver:1/3"]);
});

test("dedupe: a repeat by msg_id, and by conv_seq below the high-water mark, is confirmed, not handed over", async () => {
  const o = new Order({ gapWaitMs: 500, dedupeSize: 100 });
  o.add(pend(msg(1, 1)));
  o.add(pend(msg(1, 2)));
  await release(o, 0);
  o.add(pend(msg(1, 2)));
  o.add(pend(msg(1, 1, "backfill", "other-id"))); // same conv_seq, id forgotten: still known by conv_seq
  assert.deepEqual(await release(o, 0), ["duplicate:1/1", "duplicate:1/2"]);
});

test("a live message after a gap waits while the backfill runs, then gapWait, then pulls in a followed conversation", async () => {
  const o = new Order({ gapWaitMs: 500, dedupeSize: 100 });
  o.add(pend(msg(1, 1)));
  await release(o, 0);
  o.idle = false;
  o.lastBackfill = 0;
  o.add(pend(msg(1, 4, "live"), 0));
  assert.deepEqual(await release(o, 100), [], "held while the backfill runs");
  o.idle = true;
  assert.deepEqual(await release(o, 400), [], "held for gapWait after the backfill is done");
  assert.deepEqual(await release(o, 600), ["pull:1/1-4"]);
  o.addPulled(1, [msg(1, 2, "pull"), msg(1, 3, "pull")], false, 0, 600);
  assert.deepEqual(await release(o, 600), ["deliver:1/2", "deliver:1/3", "deliver:1/4"]);
});

test("a gap in a conversation seen first is not waited for; what comes later below the mark is late", async () => {
  const o = new Order({ gapWaitMs: 500, dedupeSize: 100 });
  o.idle = true;
  o.add(pend(msg(1, 5)));
  assert.deepEqual(await release(o, 0), ["deliver:1/5"], "the first message of a conversation goes (backfill gaps are final)");
  o.add(pend(msg(1, 7))); // a backfill gap in a followed conversation: pull first
  assert.deepEqual(await release(o, 0), ["pull:1/5-7"]);
  o.addPulled(1, [], false, 0, 0); // the pull found nothing: not this device's
  assert.deepEqual(await release(o, 0), ["deliver:1/7"]);
  o.add(pend(msg(1, 6)));
  assert.deepEqual(await release(o, 0), ["late:1/6"]);
});

test("the store's position: a conversation continues after lastConvSeq, its repeats known only to delivered()", async () => {
  const have = new Set(["1-3"]);
  const o = new Order({ gapWaitMs: 500, dedupeSize: 100, lastConvSeq: (c) => (c === 1 ? 3 : 0), delivered: (id) => have.has(id) });
  o.idle = true;
  o.add(pend(msg(1, 3)));
  o.add(pend(msg(1, 6, "live"), 0));
  assert.deepEqual(await release(o, 0), ["duplicate:1/3"]);
  assert.deepEqual(await release(o, 600), ["pull:1/3-6"], "after a gap from the stored position, a pull");
});

test("expired ranges move the mark past them: no wait, no pull", async () => {
  const o = new Order({ gapWaitMs: 500, dedupeSize: 100 });
  o.add(pend(msg(1, 1)));
  await release(o, 0);
  o.expire(1, 10);
  o.add(pend(msg(1, 11)));
  assert.deepEqual(await release(o, 0), ["deliver:1/11"]);
});

test("a newest page goes first, ahead of order; the drain reaching it again is confirmed only", async () => {
  const o = new Order({ gapWaitMs: 500, dedupeSize: 100 });
  o.addNewest(pend(msg(1, 9, "newest")));
  assert.deepEqual(await release(o, 0), ["newest:1/9"]);
  o.add(pend(msg(1, 8)));
  o.add(pend(msg(1, 9)));
  assert.deepEqual(await release(o, 0), ["deliver:1/8", "newestAgain:1/9"]);
});

test("a handler that fails keeps the message and stops the release", async () => {
  const o = new Order({ gapWaitMs: 500, dedupeSize: 100 });
  o.add(pend(msg(1, 1)));
  o.add(pend(msg(1, 2)));
  let calls = 0;
  await o.release(0, async () => ++calls > 1 ? false : true, async () => {});
  assert.equal(calls, 2);
  assert.deepEqual(await release(o, 0), ["deliver:1/2"], "the refused message comes again");
});

test("SeqRanges and IdSet", () => {
  const r = new SeqRanges();
  r.add(1, 3);
  r.add(5, 6);
  r.add(4, 4);
  assert.deepEqual(r.rs, [{ lo: 1, hi: 6 }]);
  r.remove(3);
  assert.ok(!r.has(3) && r.has(2) && r.has(4));
  r.removeUpTo(4);
  assert.deepEqual(r.rs, [{ lo: 5, hi: 6 }]);
  const s = new IdSet(2);
  s.add("a");
  s.add("b");
  s.add("c");
  assert.ok(!s.has("a") && s.has("b") && s.has("c"), "FIFO eviction");
});
