// The dashboard in a real browser: start the daemon, open the page in
// headless Chromium, drive traffic over the Unix socket, and watch the
// counters, the charts and the hot-keys table move. Then, with API keys
// configured: sign in through the page (a session cookie, never a key in a
// URL) and see only the signed-in tenant's keys.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import net from "node:net";
import { chromium } from "playwright-core";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const bin = process.env.LEASEHOLD_BIN ?? join(process.env.CARGO_TARGET_DIR ?? join(root, "target"), "debug", "leasehold");
const shots = join(root, "target");

function startDaemon(extraConfig = "") {
  const dir = mkdtempSync(join(tmpdir(), "leasehold-browser-"));
  const socket = join(dir, "leasehold.sock");
  const config = join(dir, "leasehold.toml");
  // A generous limit, so most traffic is allowed.
  writeFileSync(config, '[limits.api]\nalgorithm = "token_bucket"\ncapacity = 1000000\nrefill_per_sec = 100000\nlease_max = 5000\n\n[limits.login]\nalgorithm = "fixed_window"\nlimit = 5\nwindow = "1m"\nmode = "direct"\n' + extraConfig);
  // The default store (a file): the dashboard shows decisions per file write.
  const store = `embedded:${join(dir, "leasehold.redb")}`;
  const child = spawn(bin, ["serve", "--config", config, "--store", store, "--socket", socket, "--http", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolveUrl, reject) => {
    let out = "";
    child.on("exit", (code) => reject(new Error(`daemon exited with ${code}: ${out}`)));
    child.stdout.on("data", (chunk) => {
      out += chunk;
      const m = out.match(/http:\s+(http:\/\/127\.0\.0\.1:\d+)/);
      if (m) resolveUrl({ child, url: m[1], socket });
    });
  });
}

const resp = (...args) => `*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join("");

// Pipelines THROTTLE commands over one connection until `stop()`; resolves
// with the number of replies read.
function drive(socket, key, batch = 200) {
  const conn = net.createConnection(socket);
  let running = true, replies = 0, pending = 0;
  const send = () => { if (running) { pending += batch; conn.write(resp("THROTTLE", "api", key).repeat(batch)); } };
  conn.on("data", (buf) => {
    // Every reply is an array of five integers: count the array headers.
    const n = buf.toString().split("*5\r\n").length - 1;
    replies += n; pending -= n;
    if (pending <= 0) send();
  });
  conn.on("connect", send);
  return { stop: () => new Promise((r) => { running = false; conn.end(); conn.on("close", () => r(replies)); }) };
}

const launch = () => chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});

test("the dashboard shows live decisions, the write saving and the hot key", { timeout: 120_000 }, async () => {
  const { child, url, socket } = await startDaemon();
  const browser = await launch();
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const external = [];
    page.on("request", (r) => { if (!r.url().startsWith(url)) external.push(r.url()); });
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url);
    await page.getByTestId("connection").filter({ hasText: "live" }).waitFor({ timeout: 10_000 });
    await page.getByTestId("limits").getByText("api").waitFor();
    assert.equal(await page.getByTestId("decisions-total").textContent(), "0");

    const hot = drive(socket, "user-hot");
    const cold = drive(socket, "user-cold", 1);
    await page.waitForFunction(() => Number(document.querySelector("[data-testid=decisions-total]").textContent.replace(/\D/g, "")) > 500, null, { timeout: 20_000 });
    await page.getByTestId("hot-keys").getByText("api/user-hot").waitFor({ timeout: 20_000 });
    const inked = () => page.evaluate(() => {
      const c = document.querySelector("[data-testid=chart-decisions]");
      const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let coloured = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i + 1] > 150 && d[i] < 120) coloured++; // the green "allowed" line
      return coloured;
    });
    await page.waitForTimeout(1_500); // a few points first
    const early = await inked();
    await page.waitForTimeout(3_000); // six more points while traffic flows
    const later = await inked();
    assert.ok(early > 0 && later > early, `the decisions chart grows as points arrive (${early} -> ${later} green pixels)`);
    mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: join(shots, "dashboard.png"), fullPage: true });
    const before = Number((await page.getByTestId("decisions-total").textContent()).replace(/\D/g, ""));
    const served = (await hot.stop()) + (await cold.stop());
    assert.ok(served > 500, `replies read: ${served}`);
    await page.waitForTimeout(1_000);
    const after = Number((await page.getByTestId("decisions-total").textContent()).replace(/\D/g, ""));
    assert.ok(after >= before && after >= served, `the counter caught up with the traffic: ${before} -> ${after} (${served} replies)`);

    const saving = await page.getByTestId("saving").textContent();
    assert.match(saving, /× fewer/, "the write saving is shown");
    const firstHot = await page.locator("[data-testid=hot-keys] tr td").first().textContent();
    assert.equal(firstHot, "api/user-hot", "the hot key tops the table");
    assert.deepEqual(external, [], "no external requests");
    assert.deepEqual(errors, [], "no page errors");
  } finally {
    await browser.close();
    child.kill("SIGTERM");
  }
});

const KEYS = `
[[auth.keys]]
key = "tenant-a-dashboard-key"
tenant = "a"
permissions = ["check", "dashboard"]

[[auth.keys]]
key = "tenant-b-dashboard-key"
tenant = "b"
permissions = ["check", "dashboard"]
`;

// Spends `n` units of "api" for `key` as the API key's holder, over HTTP.
async function checks(url, apiKey, key, n) {
  for (let i = 0; i < n; i++) {
    const r = await fetch(`${url}/v1/check`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": apiKey }, body: JSON.stringify({ limit: "api", key }) });
    assert.equal(r.status, 200);
    await r.arrayBuffer();
  }
}

test("with API keys, the page signs in with a session cookie and shows only its tenant", { timeout: 120_000 }, async () => {
  const { child, url } = await startDaemon(KEYS);
  const browser = await launch();
  try {
    const context = await browser.newContext();
    const page = await context.newPage();
    const urls = [];
    page.on("request", (r) => urls.push(r.url()));
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(url);
    await page.getByTestId("signin").waitFor({ timeout: 10_000 });
    assert.equal(await page.getByTestId("connection").textContent(), "signed out");

    await page.getByTestId("key").fill("not-a-key-at-all");
    await page.getByTestId("key").press("Enter");
    await page.getByTestId("signin-error").filter({ hasText: "unknown API key" }).waitFor({ timeout: 10_000 });

    await page.getByTestId("key").fill("tenant-a-dashboard-key");
    await page.getByTestId("key").press("Enter");
    await page.getByTestId("connection").filter({ hasText: "live" }).waitFor({ timeout: 10_000 });
    await page.getByTestId("limits").getByText("api").waitFor();
    const [cookie] = (await context.cookies()).filter((c) => c.name === "leasehold_session");
    assert.ok(cookie, "a session cookie");
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, "Strict");
    assert.ok(!cookie.value.includes("tenant-a"), "the cookie is not the key");
    assert.equal(await page.evaluate(() => document.cookie), "", "page scripts cannot read it");

    await checks(url, "tenant-a-dashboard-key", "alice", 200);
    await checks(url, "tenant-b-dashboard-key", "bob", 400);
    await page.getByTestId("hot-keys").getByText("api/a:alice").waitFor({ timeout: 20_000 });
    await page.waitForTimeout(1_500); // a few more events
    const shown = await page.getByTestId("hot-keys").textContent();
    assert.ok(!shown.includes("b:bob"), `tenant a sees only its keys: ${shown}`);
    const recent = await page.locator("#recent").textContent();
    assert.ok(!recent.includes("bob"), `nor another tenant's decisions: ${recent}`);

    // A reload keeps the session; signing out ends it.
    await page.reload();
    await page.getByTestId("connection").filter({ hasText: "live" }).waitFor({ timeout: 10_000 });
    await page.getByTestId("signout").click();
    await page.getByTestId("signin").waitFor({ timeout: 10_000 });
    const after = await fetch(`${url}/v1/limits`, { headers: { cookie: `leasehold_session=${cookie.value}` } });
    assert.equal(after.status, 401, "the session ended on the server too");

    assert.ok(urls.every((u) => !u.includes("tenant-a-dashboard-key")), `no key in any URL: ${urls.join(" ")}`);
    assert.deepEqual(errors, [], "no page errors");
  } finally {
    await browser.close();
    child.kill("SIGTERM");
  }
});
