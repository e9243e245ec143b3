// The limits of a send, checked as the gateway checks them (wire.CheckSend):
// a send that can never be stored is refused at once with the gateway's
// code and words instead of going on the wire.

import { InboxdError } from "./errors.js";

/** The longest client_msg_id, in bytes (wire.MaxClientMsgIDLen). */
export const MAX_CLIENT_MSG_ID_LEN = 128;
/** The largest text of a message, in bytes of UTF-8 (wire.MaxTextLen). */
export const MAX_TEXT_LEN = 16 << 10;

const utf8 = new TextEncoder();

/** True when s holds a lone surrogate (it has no UTF-8 form). */
function hasLoneSurrogate(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        i++;
        continue;
      }
      return true;
    }
    if (c >= 0xdc00 && c <= 0xdfff) return true;
  }
  return false;
}

/**
 * The InboxdError (INVALID_ARGUMENT) saying why a send can never be stored,
 * or undefined when it may be.
 */
export function checkSend(convId: number, clientMsgId: string, text: string): InboxdError | undefined {
  const bad = (msg: string) => new InboxdError("INVALID_ARGUMENT", msg);
  if (!Number.isSafeInteger(convId) || convId <= 0) return bad("conv_id must be positive");
  const cmidLen = hasLoneSurrogate(clientMsgId) ? -1 : utf8.encode(clientMsgId).length;
  if (cmidLen === 0 || cmidLen > MAX_CLIENT_MSG_ID_LEN) {
    return bad(`client_msg_id must be 1..${MAX_CLIENT_MSG_ID_LEN} bytes`);
  }
  if (cmidLen < 0 || /[\u0000-\u001f\u007f]/.test(clientMsgId)) return bad("client_msg_id must be printable UTF-8");
  // A lone surrogate takes 3 bytes as U+FFFD, as its WTF-8 form would.
  if (utf8.encode(text).length > MAX_TEXT_LEN) return bad(`text exceeds ${MAX_TEXT_LEN} bytes`);
  if (hasLoneSurrogate(text)) return bad("text must be valid UTF-8");
  return undefined;
}
