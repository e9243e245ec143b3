// The session's lifetime against a real inboxd: token refresh on the
// connection, a device replaced by a newer login, a revoked device.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ClientStoppedError } from "../../dist/node.js";
import { connect, conv, ctl, goDial, newUid, recorder, token, waitFor } from "./harness.mjs";

test("token refresh: the session outlives its first token's exp without reconnecting", async (t) => {
  const alice = newUid();
  const bob = newUid();
  const c = await conv([alice, bob]);
  let refreshes = 0;
  const rec = recorder();
  const b = await connect(t, {
    token: await token(bob, "web1", 4), // exp in 4 s: a refresh a quarter of that before
    refreshToken: async () => {
      refreshes++;
      return token(bob, "web1", 3600);
    },
    handler: rec.handler,
  });
  const exp = b.welcome().tokenExpiresAtMs;
  await new Promise((r) => setTimeout(r, Math.max(0, exp - Date.now()) + 2_000)); // past exp and the 5 s... of the server's check
  const a = await goDial(alice, "go");
  t.after(() => a.close());
  await a.send(c, "after-exp", "still here");
  await waitFor("a live message after the first token's exp", () => rec.got.length === 1);
  assert.ok(refreshes >= 1, "refreshToken asked");
  assert.equal(b.stats().sessions, 1, "no reconnect: the refresh kept the session");
  assert.ok(!b.errors.some((e) => /TOKEN_EXPIRED/.test(e.message)), b.errors.join("; "));
});

test("an expired token without refresh: TOKEN_EXPIRED ends the session, the client reconnects with tokenFunc's", async (t) => {
  const bob = newUid();
  let asked = 0;
  const b = await connect(t, {
    tokenFunc: async () => token(bob, "web1", asked++ === 0 ? 3 : 3600),
    minBackoffMs: 20,
    maxBackoffMs: 100,
  });
  await waitFor("a second session after TOKEN_EXPIRED", () => b.stats().sessions >= 2, 15_000);
  assert.ok(b.errors.some((e) => e.code === "TOKEN_EXPIRED"), "the server's TOKEN_EXPIRED reported");
  assert.equal(b.err, undefined, "still running");
});

test("a device that logs in elsewhere stops for good (replaced), without reconnecting", async (t) => {
  const bob = newUid();
  const first = await connect(t, { token: await token(bob, "web1"), minBackoffMs: 20, maxBackoffMs: 100 });
  const second = await connect(t, { token: await token(bob, "web1") });
  await first.done;
  assert.ok(first.err instanceof ClientStoppedError && first.err.reason === "replaced", String(first.err));
  assert.equal(first.err.serverError?.code, "SESSION_REPLACED");
  const c = await conv([bob, newUid()]);
  await assert.rejects(first.send(c, "x", "y"), (e) => e instanceof ClientStoppedError && e.reason === "replaced");
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(first.stats().sessions, 1, "the replaced client did not log in again");
  assert.ok(second.connected, "the newer login keeps its session");
  assert.equal((await second.send(c, "x", "y")).convSeq, 1);
});

test("a revoked device stops for good (revoked), its pending sends fail", async (t) => {
  const bob = newUid();
  const c = await conv([bob, newUid()]);
  const b = await connect(t, { token: await token(bob, "web1"), minBackoffMs: 20, maxBackoffMs: 100 });
  await ctl("/revoke", { uid: bob, device: "web1" });
  await b.done;
  assert.ok(b.err instanceof ClientStoppedError && b.err.reason === "revoked", String(b.err));
  await assert.rejects(b.send(c, "x", "y"), (e) => e instanceof ClientStoppedError && e.reason === "revoked");
  // A token issued before the revocation is refused at hello, as revoked.
  await assert.rejects(connect(t, { token: await token(bob, "web1") }), (e) => e instanceof ClientStoppedError && e.reason === "revoked");
});
