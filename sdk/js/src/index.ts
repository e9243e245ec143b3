// @inboxd/sdk: the TypeScript client of inboxd (browser and Node).
//
// The same guarantees and semantics as the Go package client/ (see
// README.md): connect with a token and reconnect with full jitter honouring
// the server's retry hints; idempotent sends queued and retried in order;
// messages deduplicated by msg_id and ordered per conversation by conv_seq
// (gaps filled by pull), each confirmed only after the application's handler
// resolved; the conversations' read state from the summary, reads, receipts
// and read-sync events; a persistent store so a reloaded page keeps order.

export { Client, reconnectDelay, setDefaultWebSocket, SDK_VERSION } from "./client.js";
export { InboxdError, ClientStoppedError, NotConnectedError, StopDelivery, codeName } from "./errors.js";
export type { ErrorCodeName, StopReason } from "./errors.js";
export { checkSend, MAX_CLIENT_MSG_ID_LEN, MAX_TEXT_LEN } from "./limits.js";
export { MemoryStore, DEFAULT_STORE_DEDUPE } from "./store.js";
export type { Store, StoreState, StoreUpdate } from "./store.js";
export { IndexedDBStore } from "./idb.js";
export type {
  CallOptions,
  ClientOptions,
  Conversation,
  ConvSummary,
  EventType,
  Handler,
  InboxEvent,
  Lane,
  Message,
  PullPage,
  ReadCount,
  SendResult,
  Stats,
  Summary,
  WebSocketConstructor,
  WebSocketLike,
  Welcome,
} from "./types.js";
