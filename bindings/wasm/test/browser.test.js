'use strict';
// Loads the `--target web` build in headless Chromium (Debian's, driven by
// playwright-core) from a page served over a local HTTP server, runs checks
// and replays the shared vectors inside the browser.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');

const ROOT = path.resolve(__dirname, '..', '..'); // bindings/
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

function serve() {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://localhost');
    const file = path.join(ROOT, path.normalize(decodeURIComponent(url.pathname)));
    if (!file.startsWith(ROOT + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404).end('not found');
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] || 'application/octet-stream' });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

test('the web build runs in headless Chromium', { timeout: 120_000 }, async (t) => {
  assert.ok(fs.existsSync(CHROMIUM), `no browser at ${CHROMIUM} (apt-get install chromium)`);
  const server = await serve();
  t.after(() => server.close());
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'leasehold-chromium-'));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
  t.after(async () => {
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
  });
  const page = await browser.newPage();
  const logs = [];
  page.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  await page.goto(`http://127.0.0.1:${server.address().port}/wasm/test/browser/index.html`);
  await page.waitForFunction(() => window.__result !== undefined, null, { timeout: 60_000 });
  const r = await page.evaluate(() => window.__result);
  assert.equal(r.fatal, undefined, `${r.fatal}\n${logs.join('\n')}`);
  assert.match(r.userAgent, /Chrome\//);
  assert.deepEqual(r.checks.map((d) => [d.allowed, d.remaining, d.retryAfterMs]), [
    [true, 1, 0], [true, 0, 0], [false, 0, 100], [true, 0, 0],
  ]);
  assert.deepEqual(r.systemClock.allowed, true);
  assert.equal(r.systemClock.remaining, 1);
  assert.deepEqual(r.error, { name: 'SpecError', field: 'limit', message: 'invalid `limit`: must be at least 1' });
  assert.deepEqual(r.failures, []);
  assert.ok(r.steps > 700, `${r.steps} steps replayed`);
  assert.ok(!logs.some((l) => l.startsWith('error') || l.startsWith('pageerror')), logs.join('\n'));
});
