// Errors of the SDK: the server's protocol errors (stable codes, like
// wire.Error) and the reasons a client stops (client.ErrClosed,
// ErrReplaced, ErrRevoked).

import { ErrorCode } from "./gen/inboxd_pb.js";

/** The stable error codes of the protocol (ErrorCode in the schema), by name. */
export type ErrorCodeName = keyof typeof ErrorCode;

/** The name of a numeric ErrorCode ("INTERNAL" for an unknown one). */
export function codeName(code: number): ErrorCodeName {
  const n = ErrorCode[code];
  return (typeof n === "string" ? n : "INTERNAL") as ErrorCodeName;
}

/** A protocol error with a stable code (wire.Error): from the server, or the client's own check of a send. */
export class InboxdError extends Error {
  readonly code: ErrorCodeName;
  readonly retryAfterMs: number;
  readonly fatal: boolean;
  constructor(code: ErrorCodeName, message: string, retryAfterMs = 0, fatal = false) {
    super(`${code}: ${message}`);
    this.name = "InboxdError";
    this.code = code;
    this.retryAfterMs = retryAfterMs;
    this.fatal = fatal;
  }
}

/** Why a client stopped: close(), or the server ended it for good. */
export type StopReason =
  /** close() was called (client.ErrClosed) */
  | "closed"
  /** the device logged in on another connection (SESSION_REPLACED, client.ErrReplaced) */
  | "replaced"
  /** the device or its user was revoked (REVOKED, client.ErrRevoked) */
  | "revoked";

/**
 * The error of every call on a stopped client, of pending sends when it
 * stopped, and of done. A replaced or revoked client does not reconnect:
 * only a new Client.connect logs the device in again.
 */
export class ClientStoppedError extends Error {
  readonly reason: StopReason;
  /** the server's error (replaced, revoked) */
  readonly serverError?: InboxdError;
  constructor(reason: StopReason, serverError?: InboxdError) {
    const words = { closed: "closed", replaced: "session replaced", revoked: "revoked" }[reason];
    super(serverError ? `client: ${words}: ${serverError.message}` : `client: ${words}`);
    this.name = "ClientStoppedError";
    this.reason = reason;
    this.serverError = serverError;
  }
}

/** A call made while the client is between sessions (transient: try again). */
export class NotConnectedError extends Error {
  constructor(message = "client: not connected") {
    super(message);
    this.name = "NotConnectedError";
  }
}

/**
 * Rejecting a handler's promise with StopDelivery stops delivery (client.ErrStop):
 * the message and everything after it stay unconfirmed (the server delivers
 * them again next time).
 */
export class StopDelivery extends Error {
  constructor() {
    super("client: stop delivery");
    this.name = "StopDelivery";
  }
}
