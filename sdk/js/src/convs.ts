// The conversations' read state (client/convs.go), kept from the login
// summary, the messages handed over, reads and the inbox's events.

import * as pb from "./gen/inboxd_pb.js";
import { num } from "./frame.js";
import type { Conversation, EventType, Message } from "./types.js";

export class Convs {
  private m = new Map<number, Conversation>();
  constructor(private readonly onChange?: (c: Conversation) => void) {}

  private conv(id: number): Conversation {
    let c = this.m.get(id);
    if (!c) {
      c = {
        convId: id, lastSeq: 0, readSeq: 0, unread: 0, peerDelivered: 0, peerRead: 0, expiredUpTo: 0,
        lastMsgId: "", lastSenderUid: 0, lastPreview: "", lastAtMs: 0,
      };
      this.m.set(id, c);
    }
    return c;
  }

  private changed(c: Conversation): void {
    c.unread = Math.max(0, c.lastSeq - c.readSeq);
    if (this.onChange) this.onChange({ ...c });
  }

  all(): Map<number, Conversation> {
    return new Map([...this.m].map(([id, c]) => [id, { ...c }]));
  }

  get(id: number): Conversation | undefined {
    const c = this.m.get(id);
    return c ? { ...c } : undefined;
  }

  applySummary(s: pb.Summary | undefined): void {
    for (const cs of s?.convs ?? []) {
      const c = this.conv(num(cs.convId));
      const last = num(cs.lastSeq);
      if (last >= c.lastSeq) {
        c.lastMsgId = cs.lastMsgId.toString();
        c.lastSenderUid = num(cs.lastSenderUid);
        c.lastPreview = cs.lastPreview;
        c.lastAtMs = num(cs.lastAtMs);
      }
      c.lastSeq = Math.max(c.lastSeq, last);
      c.readSeq = Math.max(c.readSeq, num(cs.readSeq));
      c.expiredUpTo = Math.max(c.expiredUpTo, num(cs.expiredUpToConvSeq));
      this.changed(c);
    }
  }

  /** An inbox entry whose body retention removed. */
  applyExpiredEntry(m: Message): void {
    const c = this.conv(m.convId);
    c.lastSeq = Math.max(c.lastSeq, m.convSeq);
    c.expiredUpTo = Math.max(c.expiredUpTo, m.convSeq);
    this.changed(c);
  }

  applyExpired(conv: number, upTo: number): void {
    const c = this.conv(conv);
    c.expiredUpTo = Math.max(c.expiredUpTo, upTo);
    this.changed(c);
  }

  applyRead(conv: number, seq: number): void {
    const c = this.conv(conv);
    c.readSeq = Math.max(c.readSeq, seq);
    this.changed(c);
  }

  /** A message handed to the application. */
  applyMessage(m: Message, self: number): void {
    const c = this.conv(m.convId);
    if (m.convSeq >= c.lastSeq) {
      c.lastMsgId = m.msgId;
      c.lastSenderUid = m.senderUid;
      c.lastPreview = [...m.text].slice(0, 80).join("");
      c.lastAtMs = m.createdAtMs;
    }
    c.lastSeq = Math.max(c.lastSeq, m.convSeq);
    if (m.senderUid === self) c.readSeq = Math.max(c.readSeq, m.convSeq);
    this.changed(c);
  }

  applyEvent(type: EventType, conv: number, upTo: number): void {
    const c = this.conv(conv);
    switch (type) {
      case "READ_SYNC":
        c.readSeq = Math.max(c.readSeq, upTo);
        c.lastSeq = Math.max(c.lastSeq, upTo);
        break;
      case "DELIVERED":
        c.peerDelivered = Math.max(c.peerDelivered, upTo);
        break;
      case "READ":
        c.peerRead = Math.max(c.peerRead, upTo);
        c.peerDelivered = Math.max(c.peerDelivered, upTo);
        break;
    }
    this.changed(c);
  }
}
