// The client, a port of client/client.go, send.go, requests.go and token.go:
// it connects over WebSocket, says hello with a signed token, refreshes the
// token on the connection before it expires (refreshToken), reconnects with
// jittered backoff honouring the server's retry hints (but not once its
// device logged in elsewhere, or was revoked), and sends messages
// idempotently (a send is retried with the same client_msg_id until the
// server answers STORED or REJECTED).

import { create } from "@bufbuild/protobuf";
import * as pb from "./gen/inboxd_pb.js";
import { decodeFrame, encodeFrame, num, type ServerFrame } from "./frame.js";
import { ClientStoppedError, codeName, InboxdError, NotConnectedError } from "./errors.js";
import { checkSend } from "./limits.js";
import { Conn } from "./transport.js";
import { Receiver } from "./receiver.js";
import { Convs } from "./convs.js";
import * as cv from "./convert.js";
import type {
  CallOptions,
  ClientOptions,
  Conversation,
  PullPage,
  ReadCount,
  SendResult,
  Stats,
  Summary,
  WebSocketConstructor,
  Welcome,
  ConvSummary,
} from "./types.js";

/** The SDK's version, sent in hello. */
export const SDK_VERSION = "0.1.0";

/** The maximum time before exp a token refresh starts (maxRefreshLead). */
const MAX_REFRESH_LEAD_MS = 5 * 60_000;

type Required2<T> = { [K in keyof T]-?: T[K] };
type Resolved = Required2<
  Pick<ClientOptions, "deviceKind" | "dialTimeoutMs" | "minBackoffMs" | "maxBackoffMs" | "gapWaitMs" | "dedupeSize" | "clientName">
> &
  ClientOptions;

let defaultWebSocket: WebSocketConstructor | undefined;

/** Sets the WebSocket used when ClientOptions.WebSocket is not given (the Node entry sets `ws`). */
export function setDefaultWebSocket(ws: WebSocketConstructor): void {
  defaultWebSocket = ws;
}

/** A send awaiting STORED or REJECTED. */
interface PendingSend {
  clientMsgId: string;
  frame: Uint8Array;
  order: number;
  onWire: boolean;
  queued: boolean;
  attempts: number;
  settle: (r: pb.SendResult) => void;
}

/** One connection's lifetime. */
export class Session {
  readonly done: Promise<void>;
  private resolveDone!: () => void;
  ended = false;
  /** the retry_after_ms of the fatal error the server ended the session with */
  hint = 0;
  /** set when the server's error stops the client (SESSION_REPLACED, REVOKED) */
  stopped?: ClientStoppedError;
  private pinger?: ReturnType<typeof setInterval>;

  constructor(
    readonly c: Client,
    readonly conn: Conn,
    readonly welcome: pb.Welcome,
  ) {
    this.done = new Promise((r) => (this.resolveDone = r));
    void conn.closed.then(() => this.end());
  }

  write(frame: Uint8Array): boolean {
    return this.conn.write(frame);
  }

  close(err?: Error): void {
    this.conn.close(err);
  }

  /** Starts reading frames and pinging every heartbeat; a connection silent for 3 heartbeats is closed. */
  start(): void {
    const hb = this.welcome.heartbeatMs > 0 ? this.welcome.heartbeatMs : 20_000;
    let nonce = 0n;
    this.pinger = setInterval(() => {
      if (Date.now() - this.conn.lastFrameAt > 3 * hb) {
        this.close(new Error(`no frame from the server for ${3 * hb} ms`));
        return;
      }
      nonce++;
      if (!this.write(encodeFrame(4, { nonce }))) this.close();
    }, hb);
    this.conn.onFrame((f) => {
      let fr: ServerFrame;
      try {
        fr = decodeFrame(f);
      } catch (e) {
        this.c.report(e as Error);
        return;
      }
      this.c.handle(this, fr);
    });
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.pinger) clearInterval(this.pinger);
    this.resolveDone();
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done);
  });
}

/** A connection to inboxd that survives reconnects (client.Client). */
export class Client {
  readonly opts: Resolved;
  private readonly WS: WebSocketConstructor;
  private cur?: Session;
  private lastWelcome?: pb.Welcome;
  private closedFlag = false;
  private stopErr?: ClientStoppedError; // why the server stopped the client; undefined after close()
  private tok: { cur: string; expMs: number; stale: boolean } = { cur: "", expMs: 0, stale: false };

  // Sends: every send not answered for good is in pending; those waiting
  // for a slot on the wire are in queue, in issue order. At most limit are
  // on the wire at once (the server's max_inflight_sends).
  private pending = new Map<string, PendingSend>();
  private queue: PendingSend[] = [];
  private inflight = 0;
  // abandoned counts, per client_msg_id, attempts on the wire of the
  // current session whose waiter gave up: each holds a slot until the
  // server answers it.
  private abandoned = new Map<string, number>();
  private limit = 256;
  private nextOrd = 0;

  /** @internal */ readonly recv?: Receiver;
  /** @internal */ readonly convs: Convs;
  private reqs = new Map<bigint, (f: ServerFrame) => void>();
  private nextReq = 0n;
  private sessions = 0;

  private readonly stopCtl = new AbortController();
  /** resolves once the client stopped: after close(), or when the server ended it for good (see err) */
  readonly done: Promise<void>;
  private resolveDone!: () => void;

  private constructor(opts: ClientOptions) {
    this.opts = {
      deviceKind: "web",
      dialTimeoutMs: 10_000,
      minBackoffMs: 100,
      maxBackoffMs: 5_000,
      gapWaitMs: 500,
      dedupeSize: 1 << 20,
      clientName: `inboxd-js/${SDK_VERSION}`,
      ...stripUndefined(opts),
    } as Resolved;
    const ws = opts.WebSocket ?? defaultWebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!ws) {
      throw new Error("inboxd: no WebSocket in this environment: pass options.WebSocket (Node 20: import WebSocket from \"ws\"), or import the SDK's Node entry");
    }
    this.WS = ws;
    const onConv = this.opts.onConversation;
    this.convs = new Convs(onConv ? (c) => this.callApp(() => onConv(c)) : undefined);
    this.done = new Promise((r) => (this.resolveDone = r));
  }

  /**
   * Connects, says hello and waits for the welcome (client.Dial). The client
   * then keeps the connection up (reconnecting as needed) until close(), or
   * until the device logs in on another connection or is revoked, after
   * which it does not reconnect. connect fails when the first connection
   * fails: a wrong token or URL is reported, not retried.
   */
  static async connect(opts: ClientOptions): Promise<Client> {
    if (!opts.url) throw new Error("inboxd: options.url is required (ws://127.0.0.1:7070/ws)");
    const c = new Client(opts);
    if (opts.handler) {
      const state = opts.store ? await opts.store.load() : undefined;
      (c as { recv?: Receiver }).recv = new Receiver(c, state);
    }
    let s: Session;
    try {
      s = await c.connectOnce();
    } catch (e) {
      c.stopCtl.abort();
      c.recv?.stop();
      throw e;
    }
    c.cur = s;
    c.lastWelcome = s.welcome;
    c.convs.applySummary(s.welcome.summary);
    c.recv?.run();
    c.run(s).catch((e) => c.report(new Error(`client: stopped by an internal error: ${(e as Error).message}`, { cause: e })));
    return c;
  }

  /** The welcome of the current (or last) session. */
  welcome(): Welcome | undefined {
    return this.lastWelcome ? cv.welcome(this.lastWelcome) : undefined;
  }

  /** The uid of the session (0 before the first welcome). */
  get uid(): number {
    return this.lastWelcome ? num(this.lastWelcome.uid) : 0;
  }

  /** Whether a session is up now. */
  get connected(): boolean {
    return this.cur !== undefined && !this.cur.ended;
  }

  /** undefined while the client runs; once stopped, why (reason "closed", "replaced" or "revoked"). */
  get err(): ClientStoppedError | undefined {
    if (!this.closedFlag) return undefined;
    return this.stopErrNow();
  }

  private stopErrNow(): ClientStoppedError {
    return this.stopErr ?? new ClientStoppedError("closed");
  }

  /**
   * Ends the session and stops reconnecting; pending sends fail with
   * ClientStoppedError("closed"). What the handler took is confirmed first.
   * It resolves once the client stopped (never rejects: see err).
   */
  async close(): Promise<void> {
    if (this.closedFlag) {
      await this.done;
      return;
    }
    this.closedFlag = true;
    const s = this.cur;
    if (this.recv) {
      // Confirm what the handler took before the connection goes.
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([this.recv.closing(), new Promise((r) => (timer = setTimeout(r, 5_000)))]);
      clearTimeout(timer);
    }
    this.stopCtl.abort();
    s?.close();
    if (this.cur && this.cur !== s) this.cur.close(); // a session that came up meanwhile
    await this.done;
  }

  /** Stops the client because the server ended s for good. */
  private stoppedBy(s: Session, why: ClientStoppedError): void {
    s.stopped = why;
    this.stopWith(why);
    s.close();
  }

  private stopWith(err: ClientStoppedError): void {
    const first = !this.closedFlag;
    if (first) {
      this.closedFlag = true;
      this.stopErr = err;
      this.report(err);
    }
  }

  /** @internal Calls an application's callback: what it throws is reported, never ends the client. */
  callApp(f: () => void): void {
    try {
      f();
    } catch (e) {
      this.report(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /** @internal */
  report(err: Error): void {
    if (this.opts.onError && err) {
      try {
        this.opts.onError(err);
      } catch {
        /* the application's */
      }
    }
  }

  /** Dials and completes hello. */
  private async connectOnce(): Promise<Session> {
    const deadline = Date.now() + this.opts.dialTimeoutMs;
    let tok: string;
    try {
      tok = await this.token();
    } catch (e) {
      throw new Error(`client: token: ${(e as Error).message}`, { cause: e });
    }
    let conn: Conn;
    try {
      conn = await Conn.open(this.WS, this.opts.url, Math.max(1, deadline - Date.now()));
    } catch (e) {
      throw new Error(`client: dial ${this.opts.url}: ${(e as Error).message}`, { cause: e });
    }
    conn.write(encodeFrame(1, { token: tok, deviceKind: this.opts.deviceKind, client: this.opts.clientName }));
    const f = await conn.nextFrame(Math.max(1, deadline - Date.now()));
    if (!f) {
      const why = conn.error?.message ?? "timed out";
      conn.close();
      throw new Error(`client: waiting for welcome: ${why}`);
    }
    let fr: ServerFrame;
    try {
      fr = decodeFrame(f);
    } catch (e) {
      conn.close();
      throw new Error(`client: welcome: ${(e as Error).message}`, { cause: e });
    }
    if (fr.type === "welcome") return new Session(this, conn, fr.m);
    conn.close();
    if (fr.type === "error") throw this.helloRefused(serverError(fr.m));
    throw new Error(`client: expected welcome, got ${fr.type}`);
  }

  /** Keeps a session up until close(), a replacement or a revocation. */
  private async run(first: Session): Promise<void> {
    let s: Session | undefined = first;
    let attempt = 0;
    let hint = 0; // the server's retry_after_ms, from the last session or refused hello
    const stop = this.stopCtl.signal;
    for (;;) {
      if (s) {
        if (!this.up(s)) {
          s.close(); // it came up while close() ran
          this.failPending(new ClientStoppedError("closed"));
          break;
        }
        attempt = 0;
        await s.done;
        if (!stop.aborted && !s.stopped) this.report(new Error(`client: connection lost: ${s.conn.error?.message ?? "closed"}`));
        this.down(s);
        if (s.stopped) {
          this.stopCtl.abort();
          this.failPending(this.stopErrNow());
          break;
        }
        hint = s.hint;
      }
      if (stop.aborted) {
        this.failPending(new ClientStoppedError("closed"));
        break;
      }
      const d = reconnectDelay(this.opts.minBackoffMs, this.opts.maxBackoffMs, attempt, hint);
      attempt++;
      await sleep(d, stop);
      if (stop.aborted) {
        this.failPending(new ClientStoppedError("closed"));
        break;
      }
      hint = 0;
      try {
        s = await this.connectOnce();
      } catch (e) {
        s = undefined;
        if (e instanceof ClientStoppedError) {
          this.stopWith(e);
          this.stopCtl.abort();
          this.failPending(e);
          break;
        }
        this.report(e as Error);
        if (e instanceof InboxdError) hint = e.retryAfterMs;
      }
    }
    this.recv?.stop();
    this.resolveDone();
  }

  /** Makes s the current session and sends every pending send on it, in issue order. */
  private up(s: Session): boolean {
    if (this.closedFlag) return false;
    this.cur = s;
    this.lastWelcome = s.welcome;
    this.sessions++;
    this.inflight = 0;
    this.abandoned = new Map();
    this.convs.applySummary(s.welcome.summary);
    this.tok.expMs = num(s.welcome.tokenExpiresAtMs);
    this.limit = s.welcome.maxInflightSends > 0 ? s.welcome.maxInflightSends : 256;
    this.queue = [...this.pending.values()].sort((a, b) => a.order - b.order);
    for (const p of this.queue) {
      p.onWire = false;
      p.queued = true;
    }
    this.recv?.enqueue({ kind: "start", s });
    s.start();
    this.pump(s);
    if (this.opts.onWelcome) this.callApp(() => this.opts.onWelcome!(cv.welcome(s.welcome)));
    if (this.opts.refreshToken && s.welcome.tokenExpiresAtMs > 0n) void this.keepToken(s, num(s.welcome.tokenExpiresAtMs));
    return true;
  }

  private down(s: Session): void {
    this.recv?.enqueue({ kind: "down", s });
    if (this.cur === s) this.cur = undefined;
    if (this.opts.onDisconnect) this.callApp(() => this.opts.onDisconnect!(s.conn.error));
  }

  private failPending(err: ClientStoppedError): void {
    for (const [id, p] of this.pending) {
      p.settle(create(pb.SendResultSchema, { clientMsgId: id, status: pb.SendStatus.FAILED, code: pb.ErrorCode.UNAVAILABLE, message: err.message }));
    }
    this.pending.clear();
    this.queue = [];
  }

  /** Writes queued sends on s while there is room on the wire. */
  private pump(s: Session): void {
    while (this.cur === s && this.inflight < this.limit && this.queue.length > 0) {
      const p = this.queue.shift()!;
      p.queued = false;
      if (!this.fits(s, p)) continue;
      p.onWire = true;
      this.inflight++;
      if (!s.write(p.frame)) {
        s.close(); // the session ends; up() sends again on the next one
        return;
      }
    }
  }

  private requeue(p: PendingSend): void {
    if (p.queued || p.onWire || this.pending.get(p.clientMsgId) !== p) return;
    let i = 0;
    while (i < this.queue.length && this.queue[i]!.order < p.order) i++;
    this.queue.splice(i, 0, p);
    p.queued = true;
  }

  /**
   * Stores a text message in a conversation; resolves once the server
   * answered STORED (the body is durable and every member's inbox holds it).
   * clientMsgId makes the send idempotent: the client retries it (on
   * reconnects and transient failures) until STORED or REJECTED, and a send
   * again with the same id gets the original msgId and convSeq. Sends go on
   * the wire in the order send was called. A REJECTED send rejects with an
   * InboxdError with the reason's code; a send that can never be stored
   * (wire.CheckSend, or a frame above the welcome's max_frame) is rejected
   * at once. Only opts.signal ends the retrying.
   */
  send(convId: number, clientMsgId: string, text: string, opts: CallOptions = {}): Promise<SendResult> {
    const bad = checkSend(convId, clientMsgId, text);
    if (bad) return Promise.reject(bad);
    if (this.closedFlag) return Promise.reject(this.stopErrNow());
    if (this.pending.has(clientMsgId)) {
      return Promise.reject(new InboxdError("INVALID_ARGUMENT", `a send with client_msg_id "${clientMsgId}" is already in flight`));
    }
    const frame = encodeFrame(2, { clientMsgId, convId: BigInt(convId), kind: 1, text });
    return new Promise<SendResult>((resolve, reject) => {
      const p: PendingSend = {
        clientMsgId,
        frame,
        order: ++this.nextOrd,
        onWire: false,
        queued: true,
        attempts: 0,
        settle: (r) => {
          opts.signal?.removeEventListener("abort", onAbort);
          if (r.status === pb.SendStatus.STORED) resolve({ clientMsgId, msgId: r.msgId.toString(), convSeq: num(r.convSeq) });
          else if (r.status === pb.SendStatus.REJECTED) reject(new InboxdError(codeName(r.code), r.message));
          else reject(this.stopErrNow()); // failed by the client's stop
        },
      };
      const onAbort = () => {
        if (this.pending.get(clientMsgId) === p) {
          this.pending.delete(clientMsgId);
          if (p.queued) {
            this.queue = this.queue.filter((q) => q !== p);
            p.queued = false;
          }
          // The server counts it until it answers: the slot is freed then.
          if (p.onWire) this.abandoned.set(clientMsgId, (this.abandoned.get(clientMsgId) ?? 0) + 1);
        }
        reject(opts.signal!.reason ?? new Error("aborted"));
      };
      if (opts.signal?.aborted) return onAbort();
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      this.pending.set(clientMsgId, p);
      this.queue.push(p);
      if (this.cur) this.pump(this.cur); // else: up() sends it when the next session starts
    });
  }

  /** Handles an answer: final ones go to the waiter; transient failures are retried after a growing pause. */
  private onSendResult(s: Session, r: pb.SendResult): void {
    if (this.cur !== s) return; // from an older session: its sends went out again on this one
    const p = this.pending.get(r.clientMsgId);
    if (!p || !p.onWire) {
      const n = this.abandoned.get(r.clientMsgId) ?? 0;
      if (n > 0) {
        // The answer to an attempt whose waiter gave up: its slot is free.
        this.abandoned.set(r.clientMsgId, n - 1);
        this.inflight--;
        this.pump(s);
      }
      return;
    }
    p.onWire = false;
    this.inflight--;
    if (r.status === pb.SendStatus.STORED || r.status === pb.SendStatus.REJECTED) {
      this.pending.delete(r.clientMsgId);
      p.settle(r);
    } else {
      p.attempts++;
      const wait = Math.min(2 ** Math.min(p.attempts, 6) * 25, 2_000);
      setTimeout(() => {
        this.requeue(p);
        if (this.cur) this.pump(this.cur);
      }, wait);
    }
    this.pump(s);
  }

  /** Whether p's frame is within the welcome's max_frame; one that is not is rejected with FRAME_TOO_LARGE. */
  private fits(s: Session, p: PendingSend): boolean {
    const limit = s.welcome.maxFrame;
    if (limit <= 0 || p.frame.length <= limit) return true;
    this.reject(p, pb.ErrorCode.FRAME_TOO_LARGE, `the send's frame of ${p.frame.length} bytes exceeds the server's max_frame of ${limit}`);
    return false;
  }

  /** A session the server ended with FRAME_TOO_LARGE: the largest send on the wire is rejected with its words. */
  private onFrameTooLarge(s: Session, err: InboxdError): void {
    if (this.cur !== s) return;
    let culprit: PendingSend | undefined;
    for (const p of this.pending.values()) {
      if (p.onWire && (!culprit || p.frame.length > culprit.frame.length)) culprit = p;
    }
    if (!culprit) return;
    culprit.onWire = false;
    this.inflight--;
    this.reject(culprit, pb.ErrorCode.FRAME_TOO_LARGE, `the send's frame of ${culprit.frame.length} bytes: ${err.message.replace(/^FRAME_TOO_LARGE: /, "")}`);
  }

  private reject(p: PendingSend, code: pb.ErrorCode, msg: string): void {
    this.pending.delete(p.clientMsgId);
    p.settle(create(pb.SendResultSchema, { clientMsgId: p.clientMsgId, status: pb.SendStatus.REJECTED, code, message: msg }));
  }

  /** @internal a frame of session s */
  handle(s: Session, fr: ServerFrame): void {
    switch (fr.type) {
      case "sendResult":
        this.onSendResult(s, fr.m);
        return;
      case "error": {
        const err = serverError(fr.m);
        if (fr.m.requestId !== 0n && this.answer(fr.m.requestId, fr)) return;
        if (err.code === "SESSION_REPLACED") return this.stoppedBy(s, new ClientStoppedError("replaced", err));
        if (err.code === "REVOKED" && err.fatal) return this.stoppedBy(s, new ClientStoppedError("revoked", err));
        if (err.code === "TOKEN_EXPIRED") this.tok.stale = true; // the reconnect asks refreshToken first
        this.report(err);
        if (err.code === "FRAME_TOO_LARGE") this.onFrameTooLarge(s, err);
        if (err.fatal) {
          s.hint = err.retryAfterMs;
          s.close(err);
        }
        return;
      }
      case "batch":
        this.recv?.enqueue({ kind: "batch", s, b: fr.m });
        return;
      case "pullResult":
      case "readResult":
      case "readCountResult":
      case "summary":
      case "refreshResult":
        this.answer(fr.m.requestId, fr);
        return;
      case "welcome":
      case "pong":
        return;
    }
  }

  private answer(id: bigint, fr: ServerFrame): boolean {
    const w = this.reqs.get(id);
    if (!w) return false;
    w(fr);
    return true;
  }

  private notConnected(): Error {
    return this.closedFlag ? this.stopErrNow() : new NotConnectedError();
  }

  /** Sends a request built with its request_id on s (default: the current session) and waits for the answer. */
  private requestOn(s: Session | undefined, opts: CallOptions, build: (id: bigint) => Uint8Array): Promise<ServerFrame> {
    if (!s || s.ended) return Promise.reject(this.notConnected());
    const id = ++this.nextReq;
    return new Promise<ServerFrame>((resolve, reject) => {
      const cleanup = () => {
        this.reqs.delete(id);
        opts.signal?.removeEventListener("abort", onAbort);
      };
      const onAbort = () => {
        cleanup();
        reject(opts.signal!.reason ?? new Error("aborted"));
      };
      if (opts.signal?.aborted) return onAbort();
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      this.reqs.set(id, (fr) => {
        cleanup();
        if (fr.type === "error") reject(serverError(fr.m));
        else resolve(fr);
      });
      void s.done.then(() => {
        if (!this.reqs.has(id)) return;
        cleanup();
        reject(this.closedFlag ? this.stopErrNow() : new NotConnectedError("client: connection lost before the answer"));
      });
      if (!s.write(build(id))) {
        cleanup();
        reject(this.notConnected());
      }
    });
  }

  /**
   * Reads a conversation's timeline: up to limit (≤ 50) messages after
   * afterConvSeq, or, with beforeConvSeq > 0, the last ones before it; always
   * in ascending conv_seq. Pulls are rate limited per user (RATE_LIMITED
   * carries retryAfterMs).
   */
  async pull(convId: number, afterConvSeq: number, beforeConvSeq = 0, limit = 50, opts: CallOptions = {}): Promise<PullPage> {
    const fr = await this.requestOn(this.cur, opts, (requestId) =>
      encodeFrame(6, { requestId, convId: BigInt(convId), afterConvSeq: BigInt(afterConvSeq), beforeConvSeq: BigInt(beforeConvSeq), limit }),
    );
    if (fr.type !== "pullResult") throw new Error(`client: pull answered with ${fr.type}`);
    const page: PullPage = {
      messages: fr.m.messages.map((m) => cv.fromProto(m, "pull")),
      hasMore: fr.m.hasMore,
      expiredUpTo: num(fr.m.expiredUpToConvSeq),
    };
    if (page.expiredUpTo > 0) this.convs.applyExpired(convId, page.expiredUpTo);
    return page;
  }

  /**
   * Marks the conversation read up to upToConvSeq on every device of the
   * user (and, in a direct conversation, tells the peer); resolves to the
   * read position after the request (committed).
   */
  async read(convId: number, upToConvSeq: number, opts: CallOptions = {}): Promise<number> {
    const fr = await this.requestOn(this.cur, opts, (requestId) =>
      encodeFrame(7, { requestId, convId: BigInt(convId), upToConvSeq: BigInt(upToConvSeq) }),
    );
    if (fr.type !== "readResult") throw new Error(`client: read answered with ${fr.type}`);
    const seq = num(fr.m.readSeq);
    this.convs.applyRead(convId, seq);
    return seq;
  }

  /** How many members of a group read message convSeq, out of those who can see it. */
  async readCount(convId: number, convSeq: number, opts: CallOptions = {}): Promise<ReadCount> {
    const fr = await this.requestOn(this.cur, opts, (requestId) =>
      encodeFrame(9, { requestId, convId: BigInt(convId), convSeq: BigInt(convSeq) }),
    );
    if (fr.type !== "readCountResult") throw new Error(`client: read count answered with ${fr.type}`);
    return { read: num(fr.m.read), members: num(fr.m.members) };
  }

  /** One page of the login summary: conversations with unread messages whose last message is older than beforeMsgId ("0": the first page). */
  async summaryPage(beforeMsgId: string = "0", opts: CallOptions = {}): Promise<Summary> {
    const fr = await this.requestOn(this.cur, opts, (requestId) => encodeFrame(5, { requestId, beforeMsgId: BigInt(beforeMsgId) }));
    if (fr.type !== "summary") throw new Error(`client: summary answered with ${fr.type}`);
    this.convs.applySummary(fr.m);
    return cv.summary(fr.m);
  }

  /** The first page of the summary again. */
  summary(opts: CallOptions = {}): Promise<Summary> {
    return this.summaryPage("0", opts);
  }

  /** Pages through the whole summary (newest last message first). */
  async summaryAll(opts: CallOptions = {}): Promise<ConvSummary[]> {
    const all: ConvSummary[] = [];
    let before = "0";
    for (;;) {
      const s = await this.summaryPage(before, opts);
      all.push(...s.convs);
      if (!s.hasMore) return all;
      const next = s.nextBeforeMsgId;
      if (BigInt(next) <= 0n || (before !== "0" && BigInt(next) >= BigInt(before))) {
        // Pages go to older messages; one that does not would loop.
        throw new Error(`client: summary page before ${before}: has_more with next_before_msg_id ${next}`);
      }
      before = next;
    }
  }

  /** Confirms every entry of the device's inbox up to seq, including those not fetched. */
  ackRange(seq: number): void {
    const s = this.cur;
    if (!s || !s.write(encodeFrame(8, { upToSeq: BigInt(seq) }))) throw this.notConnected();
  }

  /** The read state of every conversation the client knows of. */
  conversations(): Map<number, Conversation> {
    return this.convs.all();
  }

  /** One conversation's state (undefined: not known). */
  conversation(convId: number): Conversation | undefined {
    return this.convs.get(convId);
  }

  /** The client's counters. */
  stats(): Stats {
    return { ...(this.recv?.stats ?? emptyStats()), sessions: this.sessions };
  }

  // ---------------------------------------------------------------- tokens

  /** The token for the next hello (token.go's token). */
  private async token(): Promise<string> {
    if (this.opts.tokenFunc) return this.opts.tokenFunc();
    if (this.tok.cur === "" && !this.tok.stale) this.tok.cur = this.opts.token ?? "";
    const st = this.tok;
    const expired = st.expMs > 0 && Date.now() >= st.expMs;
    if (!this.opts.refreshToken || (!st.stale && !expired && st.cur !== "")) return st.cur;
    let tok: string;
    try {
      tok = await this.opts.refreshToken();
    } catch (e) {
      throw new Error(`refreshToken: ${(e as Error).message}`, { cause: e });
    }
    this.tok = { cur: tok, expMs: 0, stale: false };
    return tok;
  }

  /** The error of a hello the server refused. */
  private helloRefused(err: InboxdError): Error {
    if (err.code === "REVOKED") return new ClientStoppedError("revoked", err);
    if (err.code === "TOKEN_EXPIRED" || err.code === "UNAUTHENTICATED") this.tok.stale = true;
    return err;
  }

  /** Refreshes s's token before each exp until the session ends (token.go's keepToken). */
  private async keepToken(s: Session, expMs: number): Promise<void> {
    let retry = 0;
    const ended = new AbortController();
    void s.done.then(() => ended.abort());
    const stop = AbortSignal.any([ended.signal, this.stopCtl.signal]);
    for (;;) {
      const left = expMs - Date.now();
      let wait = left - Math.min(Math.max(left / 4, 0), MAX_REFRESH_LEAD_MS);
      if (retry > 0) wait = Math.min(this.opts.minBackoffMs * 2 ** Math.min(retry, 10), left / 2);
      await sleep(Math.max(wait, 0), stop);
      if (stop.aborted) return;
      if (Date.now() >= expMs) return; // too late: the server ends the session, the reconnect gets a token
      try {
        expMs = await this.refresh(s);
        retry = 0;
      } catch (e) {
        if (stop.aborted) return;
        this.report(new Error(`client: token refresh: ${(e as Error).message}`, { cause: e }));
        retry++;
      }
    }
  }

  private async refresh(s: Session): Promise<number> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tok = await Promise.race([
      this.opts.refreshToken!(),
      new Promise<never>((_, rej) => (timer = setTimeout(() => rej(new Error("refreshToken: timed out")), this.opts.dialTimeoutMs))),
    ]).finally(() => clearTimeout(timer));
    const fr = await this.requestOn(s, { signal: AbortSignal.timeout(this.opts.dialTimeoutMs) }, (requestId) =>
      encodeFrame(10, { requestId, token: tok }),
    );
    if (fr.type !== "refreshResult") throw new Error(`client: refresh answered with ${fr.type}`);
    const exp = num(fr.m.expiresAtMs);
    this.tok = { cur: tok, expMs: exp, stale: false };
    return exp;
  }
}

/**
 * The wait before reconnect attempt (0: right after a session ended): full
 * jitter over an exponential backoff, after the server's retry hint if it
 * gave one.
 */
export function reconnectDelay(minMs: number, maxMs: number, attempt: number, hintMs: number): number {
  const d = Math.min(maxMs, minMs * 2 ** Math.min(attempt, 16));
  return Math.max(hintMs, 0) + Math.floor(Math.random() * d) + 1;
}

function serverError(m: pb.Error): InboxdError {
  return new InboxdError(codeName(m.code), m.message, m.retryAfterMs, m.fatal);
}

function emptyStats(): Omit<Stats, "sessions"> {
  return { liveReceived: 0, backfillReceived: 0, duplicates: 0, handled: 0, late: 0, newestAgain: 0, expired: 0, gapPulls: 0 };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
