// The frame codec (wire/frame.go): [version u8 = 1][type u8][protobuf body].
// On WebSocket one binary message is one frame.

import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import * as pb from "./gen/inboxd_pb.js";
import { InboxdError } from "./errors.js";

/** The protocol version this SDK speaks (wire.Version). */
export const VERSION = 1;

/** Frame types (wire.FrameType). */
export const FrameType = {
  hello: 1,
  send: 2,
  ack: 3,
  ping: 4,
  summaryRequest: 5,
  pull: 6,
  read: 7,
  ackRange: 8,
  readCount: 9,
  refresh: 10,
  welcome: 64,
  sendResult: 65,
  batch: 66,
  error: 67,
  pong: 68,
  summary: 69,
  pullResult: 70,
  readResult: 71,
  readCountResult: 72,
  refreshResult: 73,
} as const;

const clientSchemas = {
  [FrameType.hello]: pb.HelloSchema,
  [FrameType.send]: pb.SendSchema,
  [FrameType.ack]: pb.AckSchema,
  [FrameType.ping]: pb.PingSchema,
  [FrameType.summaryRequest]: pb.SummaryRequestSchema,
  [FrameType.pull]: pb.PullSchema,
  [FrameType.read]: pb.ReadSchema,
  [FrameType.ackRange]: pb.AckRangeSchema,
  [FrameType.readCount]: pb.ReadCountSchema,
  [FrameType.refresh]: pb.RefreshSchema,
} as const;

/** A decoded server frame. */
export type ServerFrame =
  | { type: "welcome"; m: pb.Welcome }
  | { type: "sendResult"; m: pb.SendResult }
  | { type: "batch"; m: pb.Batch }
  | { type: "error"; m: pb.Error }
  | { type: "pong"; m: pb.Pong }
  | { type: "summary"; m: pb.Summary }
  | { type: "pullResult"; m: pb.PullResult }
  | { type: "readResult"; m: pb.ReadResult }
  | { type: "readCountResult"; m: pb.ReadCountResult }
  | { type: "refreshResult"; m: pb.RefreshResult };

const serverSchemas: Record<number, [ServerFrame["type"], DescMessage]> = {
  [FrameType.welcome]: ["welcome", pb.WelcomeSchema],
  [FrameType.sendResult]: ["sendResult", pb.SendResultSchema],
  [FrameType.batch]: ["batch", pb.BatchSchema],
  [FrameType.error]: ["error", pb.ErrorSchema],
  [FrameType.pong]: ["pong", pb.PongSchema],
  [FrameType.summary]: ["summary", pb.SummarySchema],
  [FrameType.pullResult]: ["pullResult", pb.PullResultSchema],
  [FrameType.readResult]: ["readResult", pb.ReadResultSchema],
  [FrameType.readCountResult]: ["readCountResult", pb.ReadCountResultSchema],
  [FrameType.refreshResult]: ["refreshResult", pb.RefreshResultSchema],
};

type ClientType = keyof typeof clientSchemas;
type ClientInit<T extends ClientType> = Parameters<typeof create<(typeof clientSchemas)[T]>>[1];

/** The frame of a client message of type t built from init. */
export function encodeFrame<T extends ClientType>(t: T, init: ClientInit<T>): Uint8Array {
  const schema = clientSchemas[t] as DescMessage;
  const body = toBinary(schema, create(schema, init as never) as MessageShape<DescMessage>);
  const out = new Uint8Array(2 + body.length);
  out[0] = VERSION;
  out[1] = t;
  out.set(body, 2);
  return out;
}

/** Decodes a server frame; errors are InboxdError (BAD_FRAME, UNSUPPORTED_VERSION, UNKNOWN_TYPE). */
export function decodeFrame(frame: Uint8Array): ServerFrame {
  if (frame.length < 2) throw new InboxdError("BAD_FRAME", `frame of ${frame.length} bytes is shorter than its header`);
  if (frame[0] !== VERSION) {
    throw new InboxdError("UNSUPPORTED_VERSION", `protocol version ${frame[0]} is not supported; this client speaks ${VERSION}`);
  }
  const entry = serverSchemas[frame[1]!];
  if (!entry) throw new InboxdError("UNKNOWN_TYPE", `unknown frame type ${frame[1]}`);
  const [type, schema] = entry;
  try {
    return { type, m: fromBinary(schema, frame.subarray(2)) } as ServerFrame;
  } catch (e) {
    throw new InboxdError("BAD_FRAME", `${type} frame: ${(e as Error).message}`);
  }
}

/** n as a JavaScript number; a value beyond the safe integers is a protocol error, never rounded. */
export function num(n: bigint): number {
  if (n > BigInt(Number.MAX_SAFE_INTEGER) || n < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new InboxdError("BAD_FRAME", `value ${n} exceeds JavaScript's safe integers`);
  }
  return Number(n);
}
