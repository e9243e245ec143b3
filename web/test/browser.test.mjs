// The web client in a real browser (Debian's Chromium, headless, driven by
// playwright-core) against a real inboxd that web/browser_test.go started
// and seeded: conversation A of users 1 and 2 with BACKLOG_12 messages from
// user 2, conversation B of users 1 and 3 with BACKLOG_13 from user 3.
// Two tabs of one browser are two devices of user 1 (tab-a, tab-b); another
// browser context is user 2. It checks what a person would see: unread
// counts, history in order and each message once, the marks of a send
// (pending, stored, delivered, read), a live message shown while a backlog
// still syncs, read state following to the other tab, and a reload that
// keeps history and order. Screenshots go to INBOXD_ARTIFACTS (and, with
// INBOXD_DOCS_SCREENSHOTS=1, to docs/).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { chromium } from "playwright-core";

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set: run this through web/browser_test.go (go test ./web/ -run TestBrowser)`);
  return v;
};
const APP = env("INBOXD_APP_URL");
const CONV_A = Number(env("INBOXD_CONV_12"));
const CONV_B = Number(env("INBOXD_CONV_13"));
const CONV_C = Number(env("INBOXD_CONV_23")); // users 2 and 3, empty
const BACKLOG_A = Number(env("INBOXD_BACKLOG_12"));
const BACKLOG_B = Number(env("INBOXD_BACKLOG_13"));
const ARTIFACTS = env("INBOXD_ARTIFACTS");
const DOCS = process.env.INBOXD_DOCS_SCREENSHOTS === "1" ? resolve(process.cwd(), "../../docs") : "";
const WAIT = 20_000; // for one thing a person waits for

mkdirSync(ARTIFACTS, { recursive: true });

let browser, ctx1, ctx2;
const errors = [];

before(async () => {
  browser = await chromium.launch({
    executablePath: env("INBOXD_CHROMIUM"),
    // Root in a container has no user namespaces for the sandbox.
    args: process.getuid?.() === 0 ? ["--no-sandbox"] : [],
  });
  ctx1 = await browser.newContext({ viewport: { width: 1280, height: 760 } });
  ctx2 = await browser.newContext({ viewport: { width: 1280, height: 760 } });
});

after(async () => {
  await browser?.close();
});

async function openPage(ctx, name, query = "") {
  const p = await ctx.newPage();
  p.on("pageerror", (e) => errors.push(`${name}: ${e.message}`));
  p.on("console", (m) => {
    if (m.type() === "error") errors.push(`${name}: console: ${m.text()}`);
  });
  await p.goto(APP + query);
  return p;
}

// login logs in with a development token, or with token pasted.
async function login(p, uid, device, token) {
  if (token) {
    await p.getByText("Log in with a token instead").click();
    await p.getByLabel("Token").fill(token);
  } else {
    await p.getByLabel("User id").fill(String(uid));
    await p.getByLabel("Device").fill(device);
  }
  await p.getByRole("button", { name: "Log in" }).click();
  await p.locator("#who").filter({ hasText: `user ${uid} · device ${device}` }).waitFor({ timeout: WAIT });
  await p.locator("#status").filter({ hasText: "connected to" }).waitFor({ timeout: WAIT });
}

const convButton = (p, conv) => p.locator(`#conv-list button[data-conv="${conv}"]`);
const unread = (p, conv) => convButton(p, conv).locator(".unread");

async function waitUnread(p, conv, n) {
  await p.waitForFunction(
    ([c, want]) => document.querySelector(`#conv-list button[data-conv="${c}"] .unread`)?.dataset.unread === String(want),
    [conv, n],
    { timeout: WAIT },
  );
}

// The texts of the open conversation, top to bottom.
const texts = (p) => p.locator("#messages li .text").allTextContents();
const seqs = (p) => p.locator("#messages li[data-conv-seq]").evaluateAll((els) => els.map((e) => Number(e.dataset.convSeq)));

async function lane(p, name) {
  return Number(await p.locator(`#lane-${name}`).textContent());
}

async function shot(p, name, docName) {
  const file = join(ARTIFACTS, name);
  const png = await p.screenshot({ path: file });
  if (DOCS && docName) writeFileSync(join(DOCS, docName), png);
  return png;
}

function backlog(n) {
  return Array.from({ length: n }, (_, i) => `backlog ${i + 1}`);
}

test("the web client, two devices of one user and a peer", async (t) => {
  const b = await openPage(ctx2, "user2");
  const a1 = await openPage(ctx1, "tab-a");
  let a2;

  await t.test("pages are served with their CSP and log in with a development or a pasted token", async () => {
    const r = await b.request.get(APP);
    assert.match(r.headers()["content-security-policy"], /script-src 'self';/);
    await login(b, 2, "laptop", env("INBOXD_TOKEN_2"));
    await shot(a1, "00-login.png");
    await login(a1, 1, "tab-a");
  });

  await t.test("the conversation list shows the summary's unread counts", async () => {
    await waitUnread(a1, CONV_A, BACKLOG_A);
    await waitUnread(a1, CONV_B, BACKLOG_B);
    assert.equal(await unread(a1, CONV_A).getAttribute("aria-label"), `${BACKLOG_A} unread`);
    // user 2 sent conversation A's backlog itself (from another device):
    // its new device has it, nothing unread.
    await waitUnread(b, CONV_A, 0);
    assert.equal(await b.locator("#conv-list button").count(), 1);
    await shot(a1, "01-tab-a-unread.png");
  });

  await t.test("a second tab's backlog syncs while a live message overtakes it", async (st) => {
    // The second device holds each message 10 ms (the debug panel's
    // setting): its backfill of conversation B takes about 10 s. A live
    // frame waits in the client behind the at most two backfill batches
    // the server had sent (200 messages each for a web device), so a send
    // during the first 400 of 1,000 is handled well before the end.
    a2 = await openPage(ctx1, "tab-b", "?delay=10");
    await login(a2, 1, "tab-b");
    await a2.waitForFunction(() => Number(document.getElementById("lane-backfill").textContent) >= 100, null, { timeout: WAIT });
    // user 2 opens conversation A by id (nothing unread there for it) and
    // sends while tab-b's backfill runs.
    await b.getByLabel("Open conversation id").fill(String(CONV_A));
    await b.getByLabel("Open conversation id").press("Enter");
    await b.locator("#view-title").filter({ hasText: `Conversation ${CONV_A}` }).waitFor();
    await b.getByLabel("Message", { exact: true }).fill("live during backlog");
    await b.getByLabel("Message", { exact: true }).press("Enter");
    await a2.waitForFunction(() => Number(document.getElementById("lane-live").textContent) >= 1, null, { timeout: WAIT });
    const backfilled = await lane(a2, "backfill");
    assert.ok(
      backfilled < BACKLOG_A + BACKLOG_B,
      `the live message came after the whole backfill (${backfilled} of ${BACKLOG_A + BACKLOG_B}): not shown while the backlog synced`,
    );
    st.diagnostic(`tab-b handed over the live message after ${backfilled} of ${BACKLOG_A + BACKLOG_B} backfill messages`);
    const log = await a2.locator('#lane-log li[data-lane="live"]').allTextContents();
    assert.ok(log.some((l) => l.includes(`conv ${CONV_A} #${BACKLOG_A + 1}`)), `lane log: ${log}`);
    await shot(a2, "02-tab-b-live-during-backfill.png");
    // Full speed again for the rest (the panel's field).
    await a2.getByLabel("Hold each message (ms)").fill("0");
    await a2.getByLabel("Hold each message (ms)").press("Enter");
    // Then the backlog completes: every message once.
    await a2.waitForFunction((n) => Number(document.getElementById("lane-backfill").textContent) >= n, BACKLOG_A + BACKLOG_B, { timeout: 60_000 });
    assert.equal(await lane(a2, "backfill"), BACKLOG_A + BACKLOG_B);
    assert.equal(await lane(a2, "live"), 1);
    // The wire counts take events (receipts, read_sync) too.
    assert.ok(Number(await a2.locator("#wire-live").textContent()) >= 1);
    assert.ok(Number(await a2.locator("#wire-backfill").textContent()) >= BACKLOG_A + BACKLOG_B);
    await waitUnread(a2, CONV_A, BACKLOG_A + 1);
    await waitUnread(a2, CONV_B, BACKLOG_B);
  });

  await t.test("history pages back by pull, in order, each message once", async () => {
    await convButton(a1, CONV_A).click();
    await a1.locator("#view-title").filter({ hasText: `Conversation ${CONV_A} with user 2` }).waitFor();
    await a1.locator("#messages li .text", { hasText: "live during backlog" }).waitFor();
    const first = await texts(a1);
    assert.equal(first.length, 20, "the first page is 20 messages");
    assert.deepEqual(first, [...backlog(BACKLOG_A), "live during backlog"].slice(-20));
    const older = a1.getByRole("button", { name: "Older messages" });
    await older.focus();
    await a1.keyboard.press("Enter");
    await a1.waitForFunction((n) => document.querySelectorAll("#messages li").length === n, BACKLOG_A + 1, { timeout: WAIT });
    assert.deepEqual(await texts(a1), [...backlog(BACKLOG_A), "live during backlog"]);
    assert.deepEqual(await seqs(a1), Array.from({ length: BACKLOG_A + 1 }, (_, i) => i + 1));
    await older.waitFor({ state: "hidden" });
    // Opening it read it: unread 0 here, and on the other tab (read_sync).
    await waitUnread(a1, CONV_A, 0);
    await waitUnread(a2, CONV_A, 0);
  });

  await t.test("a send goes pending, stored, delivered, read", async (st) => {
    // user 2 looks at another conversation: it stores the message (a
    // delivered receipt) but does not read it yet.
    await b.getByLabel("Open conversation id").fill(String(CONV_C));
    await b.getByLabel("Open conversation id").press("Enter");
    await b.locator("#view-title").filter({ hasText: `Conversation ${CONV_C}` }).waitFor();
    // Record every mark the message shows, however briefly.
    await a1.evaluate(() => {
      window.__marks = [];
      window.__copies = 0; // the most copies of the text shown at once
      new MutationObserver(() => {
        let copies = 0;
        for (const li of document.querySelectorAll("#messages li.mine")) {
          if (li.querySelector(".text")?.textContent !== "hello from tab a") continue;
          copies++;
          const s = li.dataset.status;
          if (s && window.__marks.at(-1) !== s) window.__marks.push(s);
        }
        window.__copies = Math.max(window.__copies, copies);
      }).observe(document.getElementById("messages"), { childList: true, subtree: true, attributes: true });
    });
    const box = a1.getByLabel("Message", { exact: true });
    await box.fill("hello from tab a");
    await box.press("Enter");
    const mine = a1.locator("#messages li.mine", { hasText: "hello from tab a" });
    await mine.and(a1.locator('[data-status="delivered"]')).waitFor({ timeout: WAIT });
    await shot(a1, "03-tab-a-delivered.png");
    // user 2 has it unread, opens the conversation and reads it, once.
    await waitUnread(b, CONV_A, 1);
    assert.equal(await a1.locator('#messages li.mine[data-status="read"]').count(), 0);
    await convButton(b, CONV_A).click();
    await b.locator("#messages li .text", { hasText: "hello from tab a" }).waitFor({ timeout: WAIT });
    await waitUnread(b, CONV_A, 0);
    assert.equal(await b.locator("#messages li .text", { hasText: "hello from tab a" }).count(), 1);
    await mine.and(a1.locator('[data-status="read"]')).waitFor({ timeout: WAIT });
    // In order, never back; "stored" may be skipped when the delivered
    // receipt overtook the send's answer (both are milliseconds).
    const marks = await a1.evaluate(() => window.__marks);
    const order = ["pending", "stored", "delivered", "read"];
    assert.equal(marks[0], "pending", `marks seen: ${marks}`);
    assert.deepEqual(marks.filter((m) => m !== "stored"), ["pending", "delivered", "read"], `marks seen: ${marks}`);
    assert.deepEqual([...marks].sort((x, y) => order.indexOf(x) - order.indexOf(y)), marks, `marks seen: ${marks}`);
    st.diagnostic(`marks seen: ${marks.join(" → ")}`);
    assert.equal(await a1.evaluate(() => window.__copies), 1, "the message was shown twice at some moment");
    assert.equal(await mine.count(), 1);
    assert.equal(await mine.locator(".mark").textContent(), "✓✓ read");
  });

  await t.test("a reply appears once, the other tab follows the read state", async () => {
    const box = b.getByLabel("Message", { exact: true });
    await box.fill("reply from user 2");
    await box.press("Enter");
    await a1.locator("#messages li .text", { hasText: "reply from user 2" }).waitFor({ timeout: WAIT });
    assert.equal(await a1.locator("#messages li .text", { hasText: "reply from user 2" }).count(), 1);
    // tab-a has the conversation open and reads the reply: tab-b's count
    // goes up with the reply and back to 0 with tab-a's read.
    await waitUnread(a2, CONV_A, 0);
    // Conversation B: tab-b still shows its backlog unread until tab-a
    // opens it.
    assert.equal(await unread(a2, CONV_B).getAttribute("data-unread"), String(BACKLOG_B));
    assert.match(await a1.locator("#announce").textContent(), /New message from user 2 in conversation \d+: reply from user 2/);
    // By keyboard: down the list from conversation A to B, Enter opens it.
    await convButton(a1, CONV_A).focus();
    await a1.keyboard.press("ArrowDown");
    assert.equal(await a1.evaluate(() => document.activeElement?.dataset.conv), String(CONV_B));
    await a1.keyboard.press("Enter");
    await a1.locator("#messages li .text", { hasText: `backlog ${BACKLOG_B}` }).waitFor({ timeout: WAIT });
    await waitUnread(a1, CONV_B, 0);
    await waitUnread(a2, CONV_B, 0);
    await convButton(a1, CONV_A).click();
    await a1.locator("#messages li .text", { hasText: "reply from user 2" }).waitFor();
    const a1png = await shot(a1, "04-tab-a.png", "web-client.png");
    // tab-b shows the same conversation, read, with the same marks.
    await convButton(a2, CONV_A).click();
    await a2.locator("#messages li .text", { hasText: "reply from user 2" }).waitFor({ timeout: WAIT });
    await a2.locator('#messages li.mine[data-status="read"]', { hasText: "hello from tab a" }).waitFor({ timeout: WAIT });
    assert.equal(await a2.locator("#messages li .text", { hasText: "hello from tab a" }).count(), 1);
    const a2png = await shot(a2, "05-tab-b-read-synced.png");
    // Both tabs side by side for the README.
    const side = await browser.newPage({ viewport: { width: 2568, height: 760 } });
    await side.setContent(
      `<body style="margin:0;display:flex;gap:8px;background:#57606a">` +
        `<img src="data:image/png;base64,${a1png.toString("base64")}">` +
        `<img src="data:image/png;base64,${a2png.toString("base64")}"></body>`,
    );
    await shot(side, "06-two-tabs.png", "web-client-two-tabs.png");
    await side.close();
  });

  await t.test("a reload keeps the login, the history and its order", async () => {
    await a1.reload();
    await a1.locator("#status").filter({ hasText: "connected to" }).waitFor({ timeout: WAIT });
    await a1.locator("#messages li .text", { hasText: "reply from user 2" }).waitFor({ timeout: WAIT });
    await a1.getByRole("button", { name: "Older messages" }).click();
    const want = [...backlog(BACKLOG_A), "live during backlog", "hello from tab a", "reply from user 2"];
    await a1.waitForFunction((n) => document.querySelectorAll("#messages li").length === n, want.length, { timeout: WAIT });
    assert.deepEqual(await texts(a1), want);
    assert.deepEqual(await seqs(a1), want.map((_, i) => i + 1));
    // Everything was confirmed before the reload: nothing comes again.
    assert.equal(await lane(a1, "backfill"), 0);
    assert.equal(await a1.locator("#stat-duplicates").textContent(), "0");
    await waitUnread(a1, CONV_A, 0);
    assert.equal(await a1.locator('#messages li.mine[data-status="read"]').count(), 1);
    await shot(a1, "07-tab-a-reloaded.png");
  });

  await t.test("a browser that never saw the receipts shows the read mark from read_count", async () => {
    await a1.evaluate(() => localStorage.removeItem("inboxd.marks.1"));
    await a1.reload();
    const mine = a1.locator("#messages li.mine", { hasText: "hello from tab a" });
    await mine.and(a1.locator('[data-status="read"]')).waitFor({ timeout: WAIT });
  });

  assert.deepEqual(errors, [], "errors in the pages");
});
