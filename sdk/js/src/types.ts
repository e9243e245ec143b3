// The public types of the SDK. They mirror the Go package client/ (see
// client/*.go and docs/protocol.md): the same names where JavaScript allows,
// camelCase fields.
//
// Numbers: msg_id is a 64-bit time-ordered id and does not fit a JavaScript
// number, so it is a decimal string everywhere (msgId). Every other 64-bit
// field (uid, conv_id, conv_seq, inbox seq, times in ms) is a number; a
// frame carrying one above Number.MAX_SAFE_INTEGER is refused as a protocol
// error rather than rounded.

import type { Store } from "./store.js";

/** How a message reached the client (client.Message.Lane). */
export type Lane =
  /** stored while the device was connected */
  | "live"
  /** the device's inbox from its cursor */
  | "backfill"
  /** fetched from the conversation's timeline to fill a gap */
  | "pull"
  /**
   * the newest page of a device that was offline too long (welcome
   * offlineTooLong): handed over at once, ahead of conv_seq order by
   * design; the older messages follow in order.
   */
  | "newest";

/** A message handed to the application. */
export interface Message {
  /** inbox sequence (the cursor's unit); 0 for a pulled message */
  seq: number;
  /** the message's id, a decimal string (64 bits) */
  msgId: string;
  convId: number;
  convSeq: number;
  senderUid: number;
  /** 1: text; 2: deleted (its sender's data was deleted; text is empty) */
  kind: number;
  text: string;
  createdAtMs: number;
  lane: Lane;
  /**
   * Set on a message that came after the client gave up waiting for it:
   * its convSeq is below one the in-order stream of its conversation
   * already passed. It is a real message that was not handed over before;
   * place it by convSeq.
   */
  late: boolean;
}

/**
 * Receives the device's messages: each msgId once, and within each
 * conversation in convSeq order (except lane "newest" and late, which the
 * message says). The client confirms a message to the server only after the
 * returned promise resolved: store it before resolving. A rejection with
 * {@link StopDelivery} stops delivery (the message and everything after it
 * stay unconfirmed); any other rejection closes the session, and the
 * unconfirmed messages come again after the reconnect.
 */
export type Handler = (m: Message) => void | Promise<void>;

/** The server's event types (client.Event.Type). */
export type EventType = "READ_SYNC" | "DELIVERED" | "READ";

/** A per-user event as the client applied it. */
export interface InboxEvent {
  /**
   * READ_SYNC: this user read convId up to upTo on some device;
   * DELIVERED: a device of peerUid stored it up to there;
   * READ: peerUid read it up to there.
   */
  type: EventType;
  convId: number;
  upTo: number;
  peerUid: number;
  /** its inbox sequence */
  seq: number;
}

/**
 * The client's view of a conversation's read state, kept from the login
 * summary, the messages handed over, reads, and the events of the inbox
 * (read_sync from the user's other devices, receipts from the peer), so
 * every device of a user agrees on unread counts.
 */
export interface Conversation {
  convId: number;
  /** highest conv_seq known */
  lastSeq: number;
  /** the user's read position (own messages count as read) */
  readSeq: number;
  /** lastSeq - readSeq, at least 0 */
  unread: number;
  /** direct conversations: how far the peer's devices stored */
  peerDelivered: number;
  /** direct conversations: how far the peer read */
  peerRead: number;
  /** retention removed the messages up to this conv_seq (0: none) */
  expiredUpTo: number;
  /** the last message known (from the summary or a message handed over); "" / 0 when unknown */
  lastMsgId: string;
  lastSenderUid: number;
  /** at most 80 characters from the summary, the text of a message handed over */
  lastPreview: string;
  lastAtMs: number;
}

/** A conversation of the login summary (pb.ConvSummary). */
export interface ConvSummary {
  convId: number;
  unread: number;
  lastSeq: number;
  readSeq: number;
  lastMsgId: string;
  lastSenderUid: number;
  lastPreview: string;
  lastAtMs: number;
  expiredUpTo: number;
}

/** A page of the login summary (pb.Summary). */
export interface Summary {
  /** newest last message first */
  convs: ConvSummary[];
  /** the device's unconfirmed inbox entries */
  pending: number;
  /** more pages follow: ask with summaryPage(nextBeforeMsgId) */
  hasMore: boolean;
  nextBeforeMsgId: string;
}

/** The welcome of a session (pb.Welcome). */
export interface Welcome {
  uid: number;
  device: string;
  /** the device's confirmed inbox seq */
  cursor: number;
  /** the gateway process's start (ns, decimal): differs after a reconnect to another gateway */
  epoch: string;
  heartbeatMs: number;
  /** the largest frame the server accepts */
  maxFrame: number;
  server: string;
  /** inbox entries after the cursor at login */
  pending: number;
  pageSize: number;
  maxInflightSends: number;
  summary: Summary;
  /** pending is above the server's threshold: the newest page comes first */
  offlineTooLong: boolean;
  /** the token's exp (unix ms): the connection ends then unless refreshed */
  tokenExpiresAtMs: number;
}

/** The answer to a stored send. */
export interface SendResult {
  clientMsgId: string;
  msgId: string;
  convSeq: number;
}

/** A page of a conversation's timeline. */
export interface PullPage {
  /** ascending conv_seq; lane "pull", seq 0 */
  messages: Message[];
  /** more remain in the pull's direction */
  hasMore: boolean;
  /** retention removed the conversation's messages up to here (0: none) */
  expiredUpTo: number;
}

/** The answer to readCount. */
export interface ReadCount {
  read: number;
  members: number;
}

/** What reached the client (client.Stats). */
export interface Stats {
  liveReceived: number;
  backfillReceived: number;
  /** messages not handed over again: they were before (repeats on the wire) */
  duplicates: number;
  /** messages the handler took */
  handled: number;
  /** of them, flagged late */
  late: number;
  /** messages the backfill brought after a newest page had handed them over */
  newestAgain: number;
  /** inbox entries whose body retention removed: confirmed, never handed over */
  expired: number;
  /** conversation pulls made to fill gaps */
  gapPulls: number;
  /** sessions that came up (the first included) */
  sessions: number;
}

/** Per-call options of requests and sends. */
export interface CallOptions {
  /** ends the wait (the send is abandoned, as in Go when ctx ends) */
  signal?: AbortSignal;
}

/** The minimal WebSocket the client needs: the browser's, or the `ws` package's. */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code?: number; reason?: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
}

/** A WebSocket constructor (globalThis.WebSocket or `ws`'s default export). */
export type WebSocketConstructor = new (url: string) => WebSocketLike;

/** Options of {@link Client.connect} (client.Options). */
export interface ClientOptions {
  /** the gateway's WebSocket URL, e.g. ws://127.0.0.1:7070/ws */
  url: string;
  /** presented in hello; tokenFunc, when set, is asked on every (re)connect instead */
  token?: string;
  tokenFunc?: () => Promise<string>;
  /**
   * Asked for a new token of the same uid and device before the current one
   * expires (a quarter of what is left, at most 5 minutes, before exp); the
   * client hands it to the server in a refresh frame and the session goes
   * on. Asked too before a reconnect when the token expired or was refused
   * (TOKEN_EXPIRED, UNAUTHENTICATED), unless tokenFunc is set.
   */
  refreshToken?: () => Promise<string>;
  /** mobile, desktop or web (default web) */
  deviceKind?: "mobile" | "desktop" | "web";
  /** WebSocket implementation (default globalThis.WebSocket; the Node entry defaults to `ws`) */
  WebSocket?: WebSocketConstructor;
  /** bounds one connection attempt including hello (default 10000) */
  dialTimeoutMs?: number;
  /** bounds of the jittered reconnect delay (defaults 100 and 5000) */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** receives the errors the client gets over, and once the one that stopped it */
  onError?: (err: Error) => void;
  /** receives the device's messages; without one the client only sends and confirms nothing */
  handler?: Handler;
  /** how long a live message waits for earlier ones of its conversation (default 500) */
  gapWaitMs?: number;
  /** how many recent msg_ids are remembered in memory to drop repeats (default 1,000,000) */
  dedupeSize?: number;
  /**
   * Persists what was handed over (recent msg_ids and each conversation's
   * in-order position), so that a new client over the same store (a
   * reloaded page) keeps conv_seq order and does not hand over again what
   * the handler took. IndexedDBStore in the browser, MemoryStore in tests.
   */
  store?: Store;
  /** never confirm anything (tests: a client that crashes before it stored) */
  noAck?: boolean;
  /** each per-user event (read_sync, receipts); conversations() reflects them either way */
  onEvent?: (e: InboxEvent) => void;
  /** a conversation's state changed (summary, message, read, event) */
  onConversation?: (c: Conversation) => void;
  /** each session's welcome (after every reconnect) */
  onWelcome?: (w: Welcome) => void;
  /** the connection went down (the client reconnects unless stopped) */
  onDisconnect?: (err: Error | undefined) => void;
  /** free-form client name sent in hello (default "inboxd-js/<version>") */
  clientName?: string;
}
