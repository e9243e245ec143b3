// The read side of a Client (client/receive.go): it feeds the ordering
// buffer, calls the handler with what the buffer releases, one message at a
// time, persists what was handed over (the store), and confirms batches once
// every message of them was handled. Everything runs on one loop: frames
// that arrive while the handler works wait in the queue, as in Go, where the
// receiver's goroutine owns the order.

import * as pb from "./gen/inboxd_pb.js";
import { encodeFrame, num } from "./frame.js";
import { StopDelivery, InboxdError } from "./errors.js";
import { Order, type BatchTrack, type ConvBuf, type PendingMsg, type Step } from "./order.js";
import * as cv from "./convert.js";
import type { Client, Session } from "./client.js";
import type { Lane, Message, Stats } from "./types.js";
import type { StoreState, StoreUpdate } from "./store.js";

/** fillGapTimeout: the conversation pulls that fill one gap are bounded. */
const FILL_GAP_TIMEOUT_MS = 8_000;

type Ev =
  | { kind: "start"; s: Session }
  | { kind: "down"; s: Session }
  | { kind: "batch"; s: Session; b: pb.Batch }
  | { kind: "pulled"; conv: number; msgs: Message[]; partial: boolean; expired: number }
  | { kind: "closing"; done: () => void };

export class Receiver {
  stats: Omit<Stats, "sessions"> = {
    liveReceived: 0, backfillReceived: 0, duplicates: 0, handled: 0, late: 0, newestAgain: 0, expired: 0, gapPulls: 0,
  };
  private q: Ev[] = [];
  private wake?: () => void;
  private ord: Order;
  private batches = new Set<BatchTrack & { s: Session }>();
  private stopped = false; // the handler stopped delivery (StopDelivery), or the client closes
  private ended = false;
  private tick?: ReturnType<typeof setInterval>;
  private storeIds?: Set<string>;
  private persisted = new Map<number, number>(); // the lastConvSeq the store holds

  constructor(
    private readonly c: Client,
    state?: StoreState,
  ) {
    if (state) {
      this.storeIds = new Set(state.delivered);
      this.persisted = new Map(state.lastConvSeq);
    }
    this.ord = new Order({
      gapWaitMs: c.opts.gapWaitMs,
      dedupeSize: c.opts.dedupeSize,
      lastConvSeq: state ? (id) => state.lastConvSeq.get(id) ?? 0 : undefined,
      delivered: state ? (id) => this.storeIds!.has(id) : undefined,
    });
  }

  enqueue(ev: Ev): void {
    this.q.push(ev);
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /** Confirms what the handler took (partial batches by seq), then stops delivering. */
  closing(): Promise<void> {
    return new Promise((done) => this.enqueue({ kind: "closing", done }));
  }

  stop(): void {
    this.ended = true;
    if (this.tick) clearInterval(this.tick);
    this.wake?.();
  }

  run(): void {
    this.tick = setInterval(() => {
      if (this.ord.busy()) this.wake?.();
    }, Math.max(10, this.c.opts.gapWaitMs / 4));
    void this.loop();
  }

  private async loop(): Promise<void> {
    while (!this.ended) {
      if (this.q.length === 0) {
        await new Promise<void>((r) => (this.wake = r));
        if (this.ended) break;
      }
      while (this.q.length > 0) this.handle(this.q.shift()!);
      try {
        await this.release();
      } catch (e) {
        this.c.report(e as Error);
      }
      this.confirm();
    }
  }

  private handle(ev: Ev): void {
    switch (ev.kind) {
      case "pulled":
        this.ord.addPulled(ev.conv, ev.msgs, ev.partial, ev.expired, Date.now());
        return;
      case "closing":
        // release() runs before the confirmation below, in closingDone.
        this.closingWaiters.push(ev.done);
        return;
      case "start":
        this.ord.idle = ev.s.welcome.pending === 0n;
        return;
      case "down":
        // Unconfirmed messages of that session come again on the next one.
        for (const b of this.batches) if (b.s === ev.s) this.batches.delete(b);
        this.ord.dropSession(ev.s);
        return;
      case "batch":
        try {
          this.onBatch(ev.s, ev.b);
        } catch (e) {
          this.c.report(e as Error);
        }
        return;
    }
  }

  private closingWaiters: (() => void)[] = [];

  private onBatch(s: Session, b: pb.Batch): void {
    const now = Date.now();
    if (b.lane === pb.Lane.BACKFILL) {
      this.ord.idle = !b.hasMore;
      this.ord.lastBackfill = now;
    }
    // Ranges retention removed go first: the order buffer passes over them.
    for (const x of b.expired) {
      this.ord.expire(num(x.convId), num(x.upToConvSeq));
      this.c.convs.applyExpired(num(x.convId), num(x.upToConvSeq));
    }
    if (b.messages.length === 0) return;
    const bt = { s, id: b.batchId, size: b.messages.length, handled: [] as bigint[] };
    this.batches.add(bt);
    const lane: Lane = b.newest ? "newest" : b.lane === pb.Lane.LIVE ? "live" : "backfill";
    if (b.lane === pb.Lane.LIVE) this.stats.liveReceived += b.messages.length;
    else this.stats.backfillReceived += b.messages.length;
    for (const pm of b.messages) {
      if (pm.event) {
        // Events are applied at once (they carry positions, which only
        // ever grow) and confirmed with their batch.
        const type = cv.eventType(pm.event.type);
        if (type) {
          const e = { type, convId: num(pm.event.convId), upTo: num(pm.event.upToConvSeq), peerUid: num(pm.event.peerUid), seq: num(pm.seq) };
          this.c.convs.applyEvent(e.type, e.convId, e.upTo);
          const onEvent = this.c.opts.onEvent;
          if (onEvent) this.c.callApp(() => onEvent(e));
        }
        bt.handled.push(pm.seq);
        continue;
      }
      const p: PendingMsg = { m: cv.fromProto(pm, lane), b: bt, arrived: now, expired: pm.expired };
      if (b.newest) this.ord.addNewest(p);
      else this.ord.add(p);
    }
  }

  private async release(): Promise<void> {
    if (!this.stopped) await this.ord.release(Date.now(), (st) => this.act(st), (st, cb) => this.applied(st, cb));
    if (this.closingWaiters.length > 0) {
      this.confirmPartial();
      this.stopped = true;
      for (const w of this.closingWaiters.splice(0)) w();
    }
  }

  /** Carries out one decision of the ordering buffer; false: the handler did not take the message. */
  private async act(st: Step): Promise<boolean> {
    if (st.kind === "pull") {
      void this.fillGap(st.conv, st.after, st.before);
      return true;
    }
    switch (st.kind) {
      case "duplicate":
        this.stats.duplicates++;
        return true;
      case "newestAgain":
        this.stats.newestAgain++;
        return true;
      case "expired":
        this.stats.expired++;
        this.c.convs.applyExpiredEntry(st.p.m);
        return true;
    }
    const p = st.p;
    try {
      await this.c.opts.handler!({ ...p.m });
    } catch (err) {
      if (!p.b) {
        // a pulled message: nothing to reconnect for
        this.stopped = err instanceof StopDelivery;
        return false;
      }
      if (err instanceof StopDelivery) {
        this.stopped = true;
        return false;
      }
      this.c.report(err instanceof Error ? err : new Error(String(err)));
      (p.b.s as Session).close(); // reconnect; unconfirmed messages come again
      return false;
    }
    this.c.convs.applyMessage(p.m, this.c.uid);
    this.stats.handled++;
    if (p.m.late) this.stats.late++;
    return true;
  }

  /** After the order recorded a decision: persist it, then count the message as handled in its batch. */
  private async applied(st: Step, cb: ConvBuf): Promise<void> {
    if (st.kind === "pull") return;
    const p = st.p;
    const store = this.c.opts.store;
    if (store) {
      const u: StoreUpdate = { delivered: [], lastConvSeq: [] };
      if (st.kind !== "duplicate" && st.kind !== "newestAgain") {
        u.delivered.push(p.m.msgId);
        this.storeIds?.add(p.m.msgId);
      }
      if (cb.hwm > (this.persisted.get(p.m.convId) ?? 0)) {
        u.lastConvSeq.push([p.m.convId, cb.hwm]);
        this.persisted.set(p.m.convId, cb.hwm);
      }
      if (u.delivered.length > 0 || u.lastConvSeq.length > 0) {
        try {
          await store.save(u);
        } catch (e) {
          // Not recorded: not confirmed either. The session ends and the
          // server hands it over again.
          this.c.report(new Error(`store: save: ${(e as Error).message}`, { cause: e }));
          if (p.b) (p.b.s as Session).close();
          return;
        }
      }
    }
    if (p.b) p.b.handled.push(BigInt(p.m.seq));
  }

  /** Pulls the messages between hwm and before of a conversation (receive.go's fillGap). */
  private async fillGap(conv: number, hwm: number, before: number): Promise<void> {
    const signal = AbortSignal.timeout(FILL_GAP_TIMEOUT_MS);
    const got: Message[] = [];
    let expired = 0;
    let after = hwm;
    let complete = false;
    while (after + 1 < before && !this.ended) {
      this.stats.gapPulls++;
      try {
        const pg = await this.c.pull(conv, after, 0, Math.min(before - after - 1, 50), { signal });
        if (pg.expiredUpTo > after) {
          expired = pg.expiredUpTo;
          after = Math.min(pg.expiredUpTo, before - 1);
        }
        for (const m of pg.messages) {
          if (m.convSeq < before) {
            got.push(m);
            after = m.convSeq;
          }
        }
        if (!pg.hasMore || pg.messages.length === 0 || after >= before - 1) {
          complete = true;
          break;
        }
      } catch (err) {
        this.c.report(err as Error);
        if (signal.aborted) break;
        const wait = err instanceof InboxdError && err.retryAfterMs > 0 ? err.retryAfterMs : 200;
        await new Promise((r) => setTimeout(r, wait));
        if (signal.aborted) break;
      }
    }
    if (after + 1 >= before) complete = true;
    this.enqueue({ kind: "pulled", conv, msgs: got, partial: !complete, expired });
  }

  /** Acknowledges every batch whose messages were all handled. */
  private confirm(): void {
    if (this.c.opts.noAck) return;
    const acks = new Map<Session, bigint[]>();
    for (const b of this.batches) {
      if (b.handled.length === b.size) {
        if (b.id !== 0n) acks.set(b.s, [...(acks.get(b.s) ?? []), b.id]);
        this.batches.delete(b);
      }
    }
    for (const [s, ids] of acks) if (!s.write(encodeFrame(3, { batchIds: ids }))) s.close();
  }

  /** Acknowledges the handled messages of unfinished batches (once delivery stopped, before closing). */
  private confirmPartial(): void {
    if (this.c.opts.noAck) return;
    this.confirm();
    const acks = new Map<Session, bigint[]>();
    for (const b of this.batches) if (b.handled.length > 0) acks.set(b.s, [...(acks.get(b.s) ?? []), ...b.handled]);
    for (const [s, seqs] of acks) s.write(encodeFrame(3, { seqs }));
  }
}
