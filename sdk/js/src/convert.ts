// From the generated protobuf types to the SDK's public ones.

import * as pb from "./gen/inboxd_pb.js";
import { num } from "./frame.js";
import type { ConvSummary, EventType, Lane, Message, Summary, Welcome } from "./types.js";

export function fromProto(pm: pb.Message, lane: Lane): Message {
  return {
    seq: num(pm.seq),
    msgId: pm.msgId.toString(),
    convId: num(pm.convId),
    convSeq: num(pm.convSeq),
    senderUid: num(pm.senderUid),
    kind: pm.kind,
    text: pm.text,
    createdAtMs: num(pm.createdAtMs),
    lane,
    late: false,
  };
}

export function convSummary(c: pb.ConvSummary): ConvSummary {
  return {
    convId: num(c.convId),
    unread: num(c.unread),
    lastSeq: num(c.lastSeq),
    readSeq: num(c.readSeq),
    lastMsgId: c.lastMsgId.toString(),
    lastSenderUid: num(c.lastSenderUid),
    lastPreview: c.lastPreview,
    lastAtMs: num(c.lastAtMs),
    expiredUpTo: num(c.expiredUpToConvSeq),
  };
}

export function summary(s: pb.Summary | undefined): Summary {
  return {
    convs: (s?.convs ?? []).map(convSummary),
    pending: s ? num(s.pending) : 0,
    hasMore: s?.hasMore ?? false,
    nextBeforeMsgId: (s?.nextBeforeMsgId ?? 0n).toString(),
  };
}

export function welcome(w: pb.Welcome): Welcome {
  return {
    uid: num(w.uid),
    device: w.device,
    cursor: num(w.cursor),
    epoch: w.epoch.toString(),
    heartbeatMs: w.heartbeatMs,
    maxFrame: w.maxFrame,
    server: w.server,
    pending: num(w.pending),
    pageSize: w.pageSize,
    maxInflightSends: w.maxInflightSends,
    summary: summary(w.summary),
    offlineTooLong: w.offlineTooLong,
    tokenExpiresAtMs: num(w.tokenExpiresAtMs),
  };
}

export function eventType(t: pb.EventType): EventType | undefined {
  switch (t) {
    case pb.EventType.READ_SYNC:
      return "READ_SYNC";
    case pb.EventType.DELIVERED:
      return "DELIVERED";
    case pb.EventType.READ:
      return "READ";
  }
  return undefined;
}
