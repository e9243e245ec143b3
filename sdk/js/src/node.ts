// The Node entry: everything of index.ts, with the `ws` package as the
// default WebSocket (Node 20 has no global WebSocket).

import WebSocket from "ws";
import { setDefaultWebSocket } from "./client.js";
import type { WebSocketConstructor } from "./types.js";

setDefaultWebSocket(WebSocket as unknown as WebSocketConstructor);

export * from "./index.js";
