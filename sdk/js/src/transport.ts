// One WebSocket connection carrying binary frames (one message, one frame).
// Text messages (the JSON debugging form) are ignored, like the Go client's
// wsConn does.

import type { WebSocketConstructor, WebSocketLike } from "./types.js";

const OPEN = 1;

function bytesOf(data: unknown): Uint8Array | undefined {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (Array.isArray(data)) {
    // ws with binaryType "fragments"
    const parts = data as Uint8Array[];
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
  return undefined; // a text message
}

/** A WebSocket connection of frames. Frames that arrive before onFrame is set are kept, in order. */
export class Conn {
  private queue: Uint8Array[] = [];
  private frameHandler?: (f: Uint8Array) => void;
  private waiter?: (f: Uint8Array | undefined) => void;
  private closedFlag = false;
  private closeErr?: Error;
  private closeResolve!: () => void;
  /** resolves once the connection is closed (by either side) */
  readonly closed: Promise<void>;
  /** when the last frame arrived (ms) */
  lastFrameAt = Date.now();

  private constructor(private readonly ws: WebSocketLike) {
    this.closed = new Promise((r) => (this.closeResolve = r));
    ws.onmessage = (ev) => {
      const f = bytesOf(ev.data);
      this.lastFrameAt = Date.now();
      if (!f || this.closedFlag) return; // a closed session reads nothing more
      if (this.frameHandler) this.frameHandler(f);
      else if (this.waiter) {
        const w = this.waiter;
        this.waiter = undefined;
        w(f);
      } else this.queue.push(f);
    };
    ws.onclose = (ev) => this.onClosed(new Error(`connection closed (code ${ev?.code ?? "?"}${ev?.reason ? ": " + ev.reason : ""})`));
    ws.onerror = () => {
      this.closeErr ??= new Error("connection error");
    };
  }

  /** Opens a connection to url within timeoutMs. */
  static open(Impl: WebSocketConstructor, url: string, timeoutMs: number): Promise<Conn> {
    return new Promise((resolve, reject) => {
      let ws: WebSocketLike;
      try {
        ws = new Impl(url);
      } catch (e) {
        reject(e instanceof Error ? e : new Error(String(e)));
        return;
      }
      ws.binaryType = "arraybuffer";
      const timer = setTimeout(() => {
        ws.onopen = ws.onclose = ws.onerror = null;
        try {
          ws.close();
        } catch {
          /* not open yet */
        }
        reject(new Error(`dial ${url}: timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      ws.onopen = () => {
        clearTimeout(timer);
        resolve(new Conn(ws));
      };
      ws.onerror = () => {
        /* the close that follows says it */
      };
      ws.onclose = (ev) => {
        clearTimeout(timer);
        reject(new Error(`dial ${url}: connection failed (code ${ev?.code ?? "?"})`));
      };
    });
  }

  get isClosed(): boolean {
    return this.closedFlag;
  }

  /** Why it closed. */
  get error(): Error | undefined {
    return this.closeErr;
  }

  private onClosed(err: Error): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    this.closeErr ??= err;
    const w = this.waiter;
    this.waiter = undefined;
    w?.(undefined);
    this.closeResolve();
  }

  /** Writes one frame; false when the connection is not open (the frame is not sent). */
  write(frame: Uint8Array): boolean {
    if (this.closedFlag || this.ws.readyState !== OPEN) return false;
    try {
      this.ws.send(frame);
      return true;
    } catch (e) {
      this.close(e as Error);
      return false;
    }
  }

  /** The next frame, or undefined when the connection closed or timeoutMs passed. */
  nextFrame(timeoutMs: number): Promise<Uint8Array | undefined> {
    const f = this.queue.shift();
    if (f) return Promise.resolve(f);
    if (this.closedFlag) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        resolve(undefined);
      }, timeoutMs);
      this.waiter = (f) => {
        clearTimeout(timer);
        resolve(f);
      };
    });
  }

  /** Hands every frame, those queued first, to h (synchronously, in order). */
  onFrame(h: (f: Uint8Array) => void): void {
    this.frameHandler = h;
    while (this.queue.length > 0 && this.frameHandler === h) h(this.queue.shift()!);
  }

  close(err?: Error): void {
    if (!this.closedFlag) {
      try {
        this.ws.close();
      } catch {
        /* closing already */
      }
      // The close event may come late (a close handshake with a peer that
      // does not answer): the client goes on at once.
      this.onClosed(err ?? new Error("connection closed by the client"));
    }
  }
}
