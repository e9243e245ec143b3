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

// client/order_test.go's TestOrderRandomInterleavings: whatever the arrival
// (messages repeated on the wire, reordered, split over lanes, a newest
// page, sessions that end, a tiny dedupe set), once every message arrived
// and the gap timers ran out each message was handed over exactly once, and
// within a conversation every message not flagged (newest, late) came in
// conv_seq order.
test("random interleavings: each message once, unflagged ones in conv_seq order", async () => {
  for (let trial = 0; trial < 300; trial++) {
    let x = trial * 7919 + 7;
    const rnd = (n) => {
      // mulberry32
      x = (x + 0x6d2b79f5) | 0;
      let r = Math.imul(x ^ (x >>> 15), 1 | x);
      r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
      return (((r ^ (r >>> 14)) >>> 0) % n);
    };
    const o = new Order({ gapWaitMs: 100, dedupeSize: 1 + rnd(4) });
    let now = 0;
    let s = {};
    const convs = 3;
    const perConv = 12;
    let arrivals = [];
    for (let c = 1; c <= convs; c++) {
      for (let cs = 1; cs <= perConv; cs++) {
        for (let k = 0, n = 1 + rnd(3); k < n; k++) arrivals.push({ lane: ["live", "backfill", "backfill", "newest"][rnd(4)], conv: c, cs });
      }
    }
    for (let i = arrivals.length - 1; i > 0; i--) {
      const j = rnd(i + 1);
      [arrivals[i], arrivals[j]] = [arrivals[j], arrivals[i]];
    }
    const handed = new Map();
    const last = new Map();
    const top = new Map();
    const log = [];
    let pulls = [];
    const act = async (st) => {
      if (st.kind === "pull") {
        pulls.push(st);
        return true;
      }
      const m = st.p.m;
      if (st.kind === "deliver" || st.kind === "late" || st.kind === "newest") {
        handed.set(m.msgId, (handed.get(m.msgId) ?? 0) + 1);
        log.push(`${m.lane} c${m.convId}#${m.convSeq}`);
        if (m.lane !== "newest" && !m.late) {
          assert.ok(m.convSeq > (last.get(m.convId) ?? 0), `trial ${trial}: c${m.convId}#${m.convSeq} after #${last.get(m.convId)} unflagged; ${log}`);
          last.set(m.convId, m.convSeq);
        }
        if (m.late) assert.ok(m.convSeq <= (top.get(m.convId) ?? 0), `trial ${trial}: c${m.convId}#${m.convSeq} late, but nothing after it was handed over`);
        top.set(m.convId, Math.max(top.get(m.convId) ?? 0, m.convSeq));
      }
      return true;
    };
    const message = (lane, conv, cs) => ({ seq: 0, msgId: String(conv * 1000 + cs), convId: conv, convSeq: cs, senderUid: 1, kind: 1, text: "", createdAtMs: 0, lane, late: false });
    const step = async (d) => {
      now += d;
      await o.release(now, act, async () => {});
      for (const p of pulls) {
        const got = [];
        for (let cs = p.after + 1; cs < p.before; cs++) got.push(message("pull", p.conv, cs));
        o.addPulled(p.conv, got, false, 0, now);
      }
      pulls = [];
    };
    for (let i = 0; i < arrivals.length; i++) {
      const a = arrivals[i];
      o.idle = i > arrivals.length / 2;
      const p = { m: message(a.lane, a.conv, a.cs), b: { s, id: 1n, size: 1, handled: [] }, arrived: now, expired: false };
      if (a.lane === "newest") o.addNewest(p);
      else o.add(p);
      if (rnd(20) === 0) {
        // The session ends: what it had not handed over comes again on the next one.
        const again = (p) => p.b && p.b.s === s && arrivals.push({ lane: p.m.lane, conv: p.m.convId, cs: p.m.convSeq });
        o.newest.forEach(again);
        for (const cb of o.convs.values()) cb.pending.forEach(again);
        o.dropSession(s);
        s = {};
      }
      await step(rnd(30));
    }
    for (let k = 0; k < 5; k++) await step(10_000);
    for (let c = 1; c <= convs; c++) {
      for (let cs = 1; cs <= perConv; cs++) assert.equal(handed.get(String(c * 1000 + cs)), 1, `trial ${trial}: c${c}#${cs} handed over; ${log}`);
    }
  }
});
