// The receive side's bookkeeping, a port of client/order.go: which messages
// were handed over (dedupe by msg_id, and exactly by conv_seq below each
// conversation's high-water mark), the per-conversation buffer by conv_seq,
// and when a gap is given up on. It does no I/O and starts nothing: the
// receiver feeds it (add, addNewest, addPulled, dropSession) and asks it what
// to do next (release), so the ordering rules are tested with a clock of the
// test's own.

import type { Message } from "./types.js";

/** One batch followed until every message of it was handled. */
export interface BatchTrack {
  /** the session it came on (opaque to the order) */
  s: object;
  id: bigint;
  size: number;
  handled: bigint[];
}

export interface PendingMsg {
  m: Message;
  /** undefined for a pulled message (not an inbox entry) */
  b?: BatchTrack;
  arrived: number;
  /** retention removed its body: confirmed and passed over, never handed over */
  expired: boolean;
}

export type StepKind =
  /** hand over, next in conv_seq order */
  | "deliver"
  /** hand over, flagged late: below the high-water mark, never handed over */
  | "late"
  /** hand over at once: a newest page, ahead of order by design */
  | "newest"
  /** handed over before (or the store has it): confirm only */
  | "duplicate"
  /** the drain reached a message a newest page handed over: confirm only */
  | "newestAgain"
  /** an entry whose body retention removed: confirm only, its conv_seq is passed over */
  | "expired";

export type Step =
  | { kind: StepKind; p: PendingMsg }
  | { kind: "pull"; conv: number; after: number; before: number };

/** A live message waits at most this long for a backfill that stopped moving (maxGapHold). */
export const MAX_GAP_HOLD_MS = 10_000;

/** The conv_seqs lo..hi, both included. */
interface SeqRange {
  lo: number;
  hi: number;
}

/** A set of conv_seqs as sorted, disjoint, non-adjacent ranges. */
export class SeqRanges {
  rs: SeqRange[] = [];

  get length(): number {
    return this.rs.length;
  }

  has(x: number): boolean {
    let lo = 0;
    let hi = this.rs.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const r = this.rs[mid]!;
      if (r.hi < x) lo = mid + 1;
      else if (r.lo > x) hi = mid - 1;
      else return true;
    }
    return false;
  }

  add(lo: number, hi: number): void {
    if (lo > hi) return;
    const out: SeqRange[] = [];
    let placed = false;
    for (const r of this.rs) {
      if (r.hi + 1 < lo) out.push(r);
      else if (hi + 1 < r.lo) {
        if (!placed) {
          out.push({ lo, hi });
          placed = true;
        }
        out.push(r);
      } else {
        lo = Math.min(lo, r.lo);
        hi = Math.max(hi, r.hi);
      }
    }
    if (!placed) out.push({ lo, hi });
    this.rs = out;
  }

  remove(x: number): void {
    for (let i = 0; i < this.rs.length; i++) {
      const r = this.rs[i]!;
      if (x < r.lo || x > r.hi) continue;
      const repl: SeqRange[] = [];
      if (r.lo < x) repl.push({ lo: r.lo, hi: x - 1 });
      if (x < r.hi) repl.push({ lo: x + 1, hi: r.hi });
      this.rs.splice(i, 1, ...repl);
      return;
    }
  }

  /** Drops every conv_seq at or below x. */
  removeUpTo(x: number): void {
    let i = 0;
    while (i < this.rs.length && this.rs[i]!.hi <= x) i++;
    this.rs = this.rs.slice(i);
    const first = this.rs[0];
    if (first && first.lo <= x) this.rs[0] = { lo: x + 1, hi: first.hi };
  }
}

/** Remembers the last max msg_ids handed over (FIFO eviction). */
export class IdSet {
  private m = new Set<string>();
  private ring: string[] = [];
  private next = 0;
  constructor(private readonly max: number) {}

  has(id: string): boolean {
    return this.m.has(id);
  }

  add(id: string): void {
    if (this.max <= 0 || this.m.has(id)) return;
    if (this.ring.length < this.max) this.ring.push(id);
    else {
      this.m.delete(this.ring[this.next]!);
      this.ring[this.next] = id;
      this.next = (this.next + 1) % this.ring.length;
    }
    this.m.add(id);
  }
}

/**
 * One conversation's ordering state. Every conv_seq in (base, hwm] was
 * handed over (or the store said it had it), except those in passed; so a
 * repeat there is known without the dedupe set, however long ago it was
 * handed over.
 */
export class ConvBuf {
  /** the in-order high-water mark: highest conv_seq the in-order stream passed */
  hwm = 0;
  /** hwm at start, from the store: at or below it only delivered() knows */
  base = 0;
  /** conv_seqs at or below hwm skipped by a gap release, never handed over */
  passed = new SeqRanges();
  /** conv_seqs above hwm handed over from a newest page */
  ahead = new SeqRanges();
  pending: PendingMsg[] = [];
  /** gap fill by conversation pull: 0 none, 1 running, 2 done */
  pull = 0;
  /** the pull fills the conv_seqs below this one */
  pullTo = 0;

  insert(p: PendingMsg): void {
    // After the equal ones: a repeat goes behind the first copy (Go's
    // BinarySearch inserts before; either copy stands for the conv_seq).
    let lo = 0;
    let hi = this.pending.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.pending[mid]!.m.convSeq <= p.m.convSeq) lo = mid + 1;
      else hi = mid;
    }
    this.pending.splice(lo, 0, p);
  }

  /** Moves the high-water mark to convSeq, which is handed over. */
  advance(convSeq: number): void {
    this.passTo(convSeq - 1);
    this.ahead.removeUpTo(convSeq);
    this.hwm = convSeq;
    this.pullBehind();
  }

  /** Moves the high-water mark to x without handing anything over. */
  passTo(x: number): void {
    let lo = this.hwm + 1;
    for (const r of this.ahead.rs) {
      if (r.lo > x) break;
      if (r.lo > lo) this.passed.add(lo, r.lo - 1);
      lo = Math.max(lo, r.hi + 1);
    }
    if (lo <= x) this.passed.add(lo, x);
    this.ahead.removeUpTo(x);
    this.hwm = Math.max(this.hwm, x);
    this.pullBehind();
  }

  private pullBehind(): void {
    if (this.pull === 2 && this.hwm >= this.pullTo) this.pull = 0;
  }
}

export interface OrderOptions {
  gapWaitMs: number;
  dedupeSize: number;
  /** where the application has a conversation in order (the store's lastConvSeq) */
  lastConvSeq?: (convId: number) => number;
  /** whether the application has a message (the store's dedupe set) */
  delivered?: (msgId: string) => boolean;
}

/** The ordering buffer (client/order.go's order). */
export class Order {
  seen: IdSet;
  convs = new Map<number, ConvBuf>();
  /** a newest page's messages not handed over yet, in arrival order */
  newest: PendingMsg[] = [];
  gapWait: number;
  gapHold = MAX_GAP_HOLD_MS;
  /** the server said the backfill is done */
  idle = false;
  /** when the last backfill batch arrived */
  lastBackfill = 0;

  constructor(private readonly o: OrderOptions) {
    this.seen = new IdSet(o.dedupeSize);
    this.gapWait = o.gapWaitMs;
  }

  conv(id: number): ConvBuf {
    let cb = this.convs.get(id);
    if (!cb) {
      cb = new ConvBuf();
      if (this.o.lastConvSeq) {
        cb.base = this.o.lastConvSeq(id);
        cb.hwm = cb.base;
      }
      this.convs.set(id, cb);
    }
    return cb;
  }

  /** Buffers a message of the inbox (live or backfill lane). */
  add(p: PendingMsg): void {
    this.conv(p.m.convId).insert(p);
  }

  /** Queues a message of a newest page: handed over first, outside the conversation's order. */
  addNewest(p: PendingMsg): void {
    this.conv(p.m.convId);
    this.newest.push(p);
  }

  /**
   * Passes over conv's conv_seqs up to upTo, which retention removed. A
   * conversation the client does not follow yet (hwm 0) needs nothing.
   */
  expire(conv: number, upTo: number): void {
    const cb = this.conv(conv);
    if (cb.hwm > 0 && upTo > cb.hwm) cb.passTo(upTo);
  }

  /** Buffers the answer of a gap fill; partial: the pull gave up before it covered the gap. */
  addPulled(conv: number, msgs: Message[], partial: boolean, expiredUpTo: number, now: number): void {
    const cb = this.convs.get(conv);
    if (!cb) return;
    if (expiredUpTo > 0) this.expire(conv, expiredUpTo);
    if (cb.pull === 1) cb.pull = partial ? 0 : 2;
    for (const m of msgs) cb.insert({ m, arrived: now, expired: false });
  }

  /** Forgets the unconfirmed inbox entries of session s (they come again on the next session). */
  dropSession(s: object): void {
    const ofS = (p: PendingMsg) => p.b !== undefined && p.b.s === s;
    this.newest = this.newest.filter((p) => !ofS(p));
    for (const [id, cb] of this.convs) {
      cb.pending = cb.pending.filter((p) => !ofS(p));
      if (cb.pending.length === 0 && cb.hwm === 0 && cb.ahead.length === 0 && cb.pull !== 1) this.convs.delete(id);
    }
  }

  /** Whether m reached the application before. */
  handedOver(cb: ConvBuf, m: Message): boolean {
    if (this.seen.has(m.msgId) || cb.ahead.has(m.convSeq)) return true;
    if (m.convSeq > cb.base && m.convSeq <= cb.hwm && !cb.passed.has(m.convSeq)) return true;
    return this.o.delivered !== undefined && this.o.delivered(m.msgId);
  }

  /** Whether release has anything to look at. */
  busy(): boolean {
    if (this.newest.length > 0) return true;
    for (const cb of this.convs.values()) if (cb.pending.length > 0) return true;
    return false;
  }

  /**
   * Decides, message by message, what goes to the application now. act
   * performs a decision and resolves false when it could not (the handler
   * failed): the message stays, and release stops. applied is called after
   * the order recorded a decision (the conversation's new high-water mark:
   * what the store persists), before the next one.
   */
  async release(
    now: number,
    act: (st: Step) => Promise<boolean>,
    applied: (st: Step, cb: ConvBuf) => Promise<void>,
  ): Promise<void> {
    while (this.newest.length > 0) {
      const p = this.newest[0]!;
      const cb = this.conv(p.m.convId);
      let kind: StepKind = "newest";
      if (this.handedOver(cb, p.m)) kind = "duplicate";
      else if (p.expired) kind = "expired";
      if (p.m.convSeq <= cb.hwm) p.m.late = true;
      const st = { kind, p };
      if (!(await act(st))) return;
      this.newest.shift();
      if (kind === "newest" || kind === "expired") {
        this.seen.add(p.m.msgId);
        if (p.m.convSeq > cb.hwm) cb.ahead.add(p.m.convSeq, p.m.convSeq);
        else cb.passed.remove(p.m.convSeq);
      }
      await applied(st, cb);
    }
    for (const [id, cb] of [...this.convs]) {
      if (!(await this.releaseConv(id, cb, now, act, applied))) return;
    }
  }

  private async releaseConv(
    id: number,
    cb: ConvBuf,
    now: number,
    act: (st: Step) => Promise<boolean>,
    applied: (st: Step, cb: ConvBuf) => Promise<void>,
  ): Promise<boolean> {
    while (cb.pending.length > 0) {
      const p = cb.pending[0]!;
      if (p.m.convSeq > cb.hwm + 1) {
        const [release, pull] = this.gapReleased(cb, p, now);
        if (pull) {
          cb.pull = 1;
          cb.pullTo = p.m.convSeq;
          await act({ kind: "pull", conv: id, after: cb.hwm, before: p.m.convSeq });
        }
        if (!release) return true; // hold it: earlier messages of the conversation may come
      }
      let kind: StepKind = "deliver";
      if (cb.ahead.has(p.m.convSeq)) kind = "newestAgain";
      else if (this.handedOver(cb, p.m)) kind = "duplicate";
      else if (p.expired) kind = "expired";
      else if (p.m.convSeq <= cb.hwm) {
        kind = "late";
        p.m.late = true;
      }
      const st = { kind, p };
      if (!(await act(st))) return false;
      cb.pending.shift();
      switch (kind) {
        case "deliver":
          this.seen.add(p.m.msgId);
          break;
        case "late":
          this.seen.add(p.m.msgId);
          cb.passed.remove(p.m.convSeq);
          break;
        case "duplicate":
          cb.passed.remove(p.m.convSeq); // the application has it
          break;
        case "expired":
          this.seen.add(p.m.msgId); // a repeat of it is confirmed again, not passed over twice
          cb.passed.remove(p.m.convSeq); // accounted for: it never comes with a body
          break;
      }
      if (p.m.convSeq > cb.hwm) cb.advance(p.m.convSeq);
      await applied(st, cb);
    }
    return true;
  }

  /** Whether a message after a gap goes now, and whether a gap fill should start for it (see order.go). */
  gapReleased(cb: ConvBuf, p: PendingMsg, now: number): [release: boolean, pull: boolean] {
    const waited = now - p.arrived;
    const stalled = waited >= this.gapHold && now - this.lastBackfill >= this.gapHold;
    if (!stalled && p.m.lane === "live" && !(this.idle && waited >= this.gapWait)) return [false, false];
    if (cb.hwm === 0) return [true, false]; // the first message of the conversation here
    if (cb.pull === 1) return [false, false]; // the pull runs
    if (cb.pull === 2 && p.m.convSeq <= cb.pullTo) return [true, false]; // what the pull did not find is not this device's
    return [false, true];
  }
}
