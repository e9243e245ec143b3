// The browser's store: IndexedDB, one database per user and device (name it
// so: two devices of a user in one browser, two tabs, keep apart).

import { DEFAULT_STORE_DEDUPE, type Store, type StoreState, type StoreUpdate } from "./store.js";

const DELIVERED = "delivered"; // key: a running number (FIFO order), value: msg_id
const CONVS = "convs"; // key: conv_id, value: last_conv_seq

function req<T>(r: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

function done(tx: IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error ?? new Error("IndexedDB transaction aborted"));
  });
}

/**
 * A Store in IndexedDB. `new IndexedDBStore("inboxd-" + uid + "-" + device)`;
 * pass `indexedDB` for an implementation other than the global one (tests:
 * fake-indexeddb).
 */
export class IndexedDBStore implements Store {
  private db?: Promise<IDBDatabase>;
  private next = 0; // the next key of DELIVERED
  private first = 0; // the oldest key kept

  constructor(
    readonly name: string,
    private readonly max = DEFAULT_STORE_DEDUPE,
    private readonly factory: IDBFactory = globalThis.indexedDB,
  ) {
    if (!factory) throw new Error("IndexedDBStore: no indexedDB in this environment (use MemoryStore in Node)");
  }

  private open(): Promise<IDBDatabase> {
    this.db ??= new Promise((resolve, reject) => {
      const r = this.factory.open(this.name, 1);
      r.onupgradeneeded = () => {
        r.result.createObjectStore(DELIVERED);
        r.result.createObjectStore(CONVS);
      };
      r.onsuccess = () => resolve(r.result);
      r.onerror = () => reject(r.error);
      r.onblocked = () => reject(new Error(`IndexedDBStore ${this.name}: open blocked by another connection`));
    });
    return this.db;
  }

  async load(): Promise<StoreState> {
    const db = await this.open();
    const tx = db.transaction([DELIVERED, CONVS], "readonly");
    const [keys, ids, convKeys, seqs] = await Promise.all([
      req(tx.objectStore(DELIVERED).getAllKeys()),
      req(tx.objectStore(DELIVERED).getAll()),
      req(tx.objectStore(CONVS).getAllKeys()),
      req(tx.objectStore(CONVS).getAll()),
    ]);
    await done(tx);
    this.first = keys.length > 0 ? (keys[0] as number) : 0;
    this.next = keys.length > 0 ? (keys[keys.length - 1] as number) + 1 : 0;
    const lastConvSeq = new Map<number, number>();
    convKeys.forEach((k, i) => lastConvSeq.set(k as number, seqs[i] as number));
    return { delivered: ids as string[], lastConvSeq };
  }

  async save(u: StoreUpdate): Promise<void> {
    if (u.delivered.length === 0 && u.lastConvSeq.length === 0) return;
    const db = await this.open();
    const tx = db.transaction([DELIVERED, CONVS], "readwrite");
    const d = tx.objectStore(DELIVERED);
    for (const id of u.delivered) d.put(id, this.next++);
    if (this.next - this.first > this.max) {
      const upTo = this.next - this.max;
      d.delete(IDBKeyRange.bound(this.first, upTo, false, true));
      this.first = upTo;
    }
    const c = tx.objectStore(CONVS);
    for (const [conv, seq] of u.lastConvSeq) {
      // Positions only grow; the client writes each one higher than the last.
      c.put(seq, conv);
    }
    await done(tx);
  }

  close(): void {
    void this.db?.then((db) => db.close());
    this.db = undefined;
  }
}
