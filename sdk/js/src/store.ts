// The persistent store of the receive side: what the Go client asks the
// application through Options.Delivered and Options.LastConvSeq, kept by the
// SDK itself. A new client over the same store (a reloaded page) then keeps
// conv_seq order (a message after a gap waits for, or pulls, the missing
// ones instead of being taken as the first one seen) and does not hand over
// again what the handler took before (it is confirmed again instead).

/** What a store holds, read once when a client starts. */
export interface StoreState {
  /** recent msg_ids handed to the application, oldest first */
  delivered: string[];
  /** per conversation, the in-order high-water mark: every conv_seq up to it was handed over or passed over */
  lastConvSeq: Map<number, number>;
}

/** One change, written after the handler resolved and before the message is confirmed. */
export interface StoreUpdate {
  /** msg_ids handed over (or confirmed without a body) */
  delivered: string[];
  /** conversations whose in-order position rose, with the new position */
  lastConvSeq: [convId: number, convSeq: number][];
}

/**
 * The SDK's persistent receive state. save must resolve only once the
 * update is durable: the client confirms a message to the server after it,
 * so that a message confirmed is never missing from the store.
 */
export interface Store {
  load(): Promise<StoreState>;
  save(u: StoreUpdate): Promise<void>;
  /** optional: release resources (the IndexedDB connection) */
  close?(): void;
}

/** The default number of msg_ids a store keeps (the oldest are forgotten first). */
export const DEFAULT_STORE_DEDUPE = 20_000;

/**
 * A store in memory: for Node and tests, and as the model of a store's
 * semantics. Give the same instance to a new client to act as a reloaded
 * page over a persistent store.
 */
export class MemoryStore implements Store {
  private delivered = new Set<string>(); // insertion order is FIFO order
  private last = new Map<number, number>();
  constructor(private readonly max = DEFAULT_STORE_DEDUPE) {}

  async load(): Promise<StoreState> {
    return { delivered: [...this.delivered], lastConvSeq: new Map(this.last) };
  }

  async save(u: StoreUpdate): Promise<void> {
    for (const id of u.delivered) {
      this.delivered.delete(id);
      this.delivered.add(id);
    }
    while (this.delivered.size > this.max) {
      const oldest = this.delivered.values().next().value as string;
      this.delivered.delete(oldest);
    }
    for (const [conv, seq] of u.lastConvSeq) this.last.set(conv, Math.max(this.last.get(conv) ?? 0, seq));
  }
}
