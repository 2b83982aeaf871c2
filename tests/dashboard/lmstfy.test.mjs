// End-to-end tests of the dashboard's lmstfy view (docs/DASHBOARD.md, "lmstfy's view") in
// Debian's headless chromium, driven by playwright-core: the namespace tree, dead letters
// and lmstfy priorities on lmstfy queues, and tokens with their rate limits, at desktop
// (1280 px) and phone (400 px) width. Started by run_browser_tests.py after
// dashboard.test.mjs, against the same server, with the same environment (see there).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { chromium } from 'playwright-core';

const base = process.env.STALKD_ADMIN_URL;
const textPort = Number(process.env.STALKD_TEXT_PORT);
const auth = 'Basic ' + Buffer.from(`${process.env.STALKD_USER}:${process.env.STALKD_PASSWORD}`).toString('base64');
const shots = process.env.STALKD_SCREENSHOTS;
// Only bounds a hang: the page polls every 2 s (tokens every 10 s, but an action refreshes).
const SEEN_MS = 30000;
const SIZES = [['desktop', { width: 1280, height: 900 }], ['phone', { width: 400, height: 844 }]];

// Sends text protocol commands (each a line, or [line, body]) on a fresh connection and
// resolves to their replies' first lines (a RESERVED or FOUND reply's body, one line here,
// is left out), the connection closed after.
function text(...commands) {
  return new Promise((resolve, reject) => {
    const sock = net.createConnection({ host: '127.0.0.1', port: textPort });
    let got = '';
    sock.on('error', reject);
    sock.on('data', (d) => {
      got += d.toString('latin1');
      const lines = got.split('\r\n');
      lines.pop();  // an unfinished line
      const replies = [];
      for (let i = 0; i < lines.length; i++) {
        replies.push(lines[i]);
        if (/^(RESERVED|FOUND) /.test(lines[i])) i++;
      }
      if (replies.length >= commands.length) {
        sock.destroy();
        resolve(replies.slice(0, commands.length));
      }
    });
    sock.write(commands.map((c) => (Array.isArray(c) ? `${c[0]}\r\n${c[1]}\r\n` : `${c}\r\n`)).join(''));
  });
}

// A worker of shop/orders takes its next job and releases it: the replies to both.
async function consumeAndRelease() {
  const r = await text('watch shop/orders', 'ignore default', 'reserve-with-timeout 0', `release ${dead} 0 0`);
  return r.slice(2);
}

// An admin route, as an lmstfy admin client calls it (with the account).
async function admin(method, p, body) {
  const res = await fetch(base + p, { method, headers: { Authorization: auth }, body });
  return { status: res.status, json: res.status === 204 ? null : await res.json() };
}

let userDir;
let ctx;
let page;
let keeper;  // keeps the emptied tubes alive
const problems = [];

async function shot(name) {
  await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

async function see(selector, want) {
  const re = want instanceof RegExp ? want : new RegExp(`^\\s*${want.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s*$`);
  await page.locator(selector, { hasText: re }).first().waitFor({ timeout: SEEN_MS });
}

async function confirm(fields = {}) {
  const dialog = page.locator('dialog#confirm');
  await dialog.waitFor({ state: 'visible' });
  for (const [name, value] of Object.entries(fields)) await dialog.locator(`[name="${name}"]`).fill(String(value));
  await dialog.locator('button[value="ok"]').click();
  await dialog.waitFor({ state: 'hidden' });
}

// The page fits the viewport's width (nothing scrolls sideways).
async function assertFits(width) {
  const w = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(w <= width, `the page is ${w} px wide`);
}

before(async () => {
  assert.ok(base && textPort && shots, 'run by run_browser_tests.py');
  fs.mkdirSync(shots, { recursive: true });
  userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'stalkd-chromium-'));
  ctx = await chromium.launchPersistentContext(userDir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
    viewport: SIZES[0][1],
    httpCredentials: { username: process.env.STALKD_USER, password: process.env.STALKD_PASSWORD },
  });
  page = ctx.pages()[0] || (await ctx.newPage());
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`${r.status()} for ${r.request().method()} ${r.url()}`);
  });
  page.on('request', (r) => {
    if (!r.url().startsWith(base + '/')) problems.push(`request elsewhere: ${r.url()}`);
  });
  keeper = net.createConnection({ host: '127.0.0.1', port: textPort });
  keeper.write('watch shop/orders\r\nwatch shop/refunds\r\nwatch mail/out\r\n');
});

after(async () => {
  if (ctx) await ctx.close();
  if (userDir) fs.rmSync(userDir, { recursive: true, force: true });
  if (keeper) keeper.destroy();
});

let dead;  // a dead letter of shop/orders: its tries ran out
let urgent;  // published with lmstfy priority 10 (pri 245)
test('lmstfy queues and a dead letter', async () => {
  const r = await text(
    'use shop/orders',
    ['put-ext 245 0 60 6 tries=1', 'urgent'],
    ['put-ext 0 0 60 4 tries=1', 'dead'],
    ['put 1024 0 60 5', 'plain'],
    'use shop/refunds',
    ['put 255 0 60 2', 'r1'],
    'use mail/out',
    ['put 255 0 60 2', 'm1'],
  );
  urgent = Number(r[1].split(' ')[1]);
  dead = Number(r[2].split(' ')[1]);
  // A consume that runs out of tries: reserved (the best priority first), released, so
  // buried (retries exhausted; the release itself is answered RELEASED, docs/EXTENSIONS.md).
  assert.deepEqual(await consumeAndRelease(), [`RESERVED ${dead} 4`, 'RELEASED']);
});

for (const [size, viewport] of SIZES) {
  test(`the namespace tree (${size})`, async () => {
    await page.setViewportSize(viewport);
    await page.goto(`${base}/#/`);
    await page.locator('#group').click();
    const shop = page.locator('#tubes-table tr.ns-row[data-namespace="shop"]');
    await shop.waitFor({ timeout: SEEN_MS });
    // Totals of its two queues: 3 ready (urgent, plain, r1), 1 dead letter.
    await see('#tubes-table tr[data-namespace="shop"] .ns-count', '2 queues');
    await see('#tubes-table tr[data-namespace="shop"] td[data-col="ready"]', '3');
    await see('#tubes-table tr[data-namespace="shop"] td[data-col="buried"]', '1');
    // Plain tubes stay as they are, between the namespaces by name.
    await page.locator('#tubes-table tr[data-tube="default"]').waitFor();
    assert.equal(await page.locator('#tubes-table tr[data-tube="shop/orders"]').count(), 0);
    await shop.locator('button.ns-toggle').click();
    await page.locator('#tubes-table tr.ns-queue[data-tube="shop/orders"]').waitFor({ timeout: SEEN_MS });
    await see('#tubes-table tr[data-tube="shop/orders"] th a', 'orders');
    await see('#tubes-table tr[data-tube="shop/refunds"] td[data-col="ready"]', '1');
    assert.match(page.url(), /group=ns&open=shop$/);
    assert.equal(await page.locator('#tubes-table tr[data-tube="shop/orders"] td[data-col="buried"]').getAttribute('title'), 'dead letters');
    await assertFits(viewport.width);
    await shot(`20-${size}-namespace-tree`);
    // Closed again.
    await shop.locator('button.ns-toggle').click();
    await page.locator('#tubes-table tr[data-tube="shop/orders"]').waitFor({ state: 'detached', timeout: SEEN_MS });
    await page.locator('#group').click();  // back to the flat list
    await page.locator('#tubes-table tr[data-tube="shop/orders"]').waitFor({ timeout: SEEN_MS });
  });

  test(`dead letters and lmstfy priorities (${size})`, async () => {
    await page.setViewportSize(viewport);
    await page.goto(`${base}/#/tube/${encodeURIComponent('shop/orders')}`);
    await see('#lmstfy-badge', 'lmstfy queue orders of shop');
    await see('#tube-stats .card-title', 'Dead letters');
    await see('.tabs button[data-state="buried"]', /^Dead letters 1$/);
    // Ready jobs: lmstfy's priority shown, beanstalkd's pri on hover.
    const cell = page.locator(`#jobs-table tr[data-job="${urgent}"] td`).first();
    await cell.waitFor({ timeout: SEEN_MS });
    assert.equal((await cell.innerText()).trim(), '10');
    assert.match(await cell.getAttribute('title'), /lmstfy priority 10 .* beanstalkd pri 245/);
    await see('#jobs-table th[title^="lmstfy"]', 'Priority');
    await page.locator('.tabs button[data-state="buried"]').click();
    await page.locator(`#jobs-table tr[data-job="${dead}"]`).waitFor({ timeout: SEEN_MS });
    if (size === 'desktop') assert.match(await page.locator(`#jobs-table tr[data-job="${dead}"]`).innerText(), /retries exhausted \(release\)/);
    await see(`#jobs-table tr[data-job="${dead}"] button[data-action="kick"]`, 'Respawn');
    assert.equal(await page.locator('#delete-dead').isVisible(), true);
    assert.equal(await page.locator('#respawn').isVisible(), true);
    await assertFits(viewport.width);
    await shot(`21-${size}-dead-letters`);
    await page.goto(`${base}/#/job/${dead}`);
    await see('dd[data-field="State"]', 'dead letter');
    await see('dd[data-field="Priority"]', '255 (lmstfy priority) · beanstalkd pri 0');
    await see('dd[data-field="Bury reason"]', 'retries exhausted (release)');
    await see('#job-kick', 'Respawn');
    await shot(`22-${size}-dead-letter-job`);
  });
}

test('respawn and delete dead letters', async () => {
  await page.goto(`${base}/#/tube/${encodeURIComponent('shop/orders')}?state=buried`);
  await page.locator(`#jobs-table tr[data-job="${dead}"]`).waitFor({ timeout: SEEN_MS });
  await page.locator('#respawn').click();
  await confirm({ count: 1, ttl: 0 });
  await see('#toast', 'Respawned 1 job');
  assert.deepEqual(await consumeAndRelease(), [`RESERVED ${dead} 4`, 'RELEASED']);
  await see('[data-stat="buried"]', '1');
  await page.locator('#delete-dead').click();
  await confirm();
  await see('#toast', 'Deleted 1 dead letter');
  await see('[data-stat="buried"]', '0');
  assert.deepEqual(await text(`stats-job ${dead}`), ['NOT_FOUND']);
});

for (const [size, viewport] of SIZES) {
  test(`tokens and their rate limits (${size})`, async () => {
    await page.setViewportSize(viewport);
    const ns = `shop${size}`;
    await page.goto(`${base}/#/`);
    await page.locator('#nav-tokens').click();
    await page.fill('#token-ns', ns);
    await page.locator('#token-ns-form button[type="submit"]').click();
    await see('#tokens-summary', '0 tokens');
    // Create: the secret is shown once.
    await page.locator('#token-create').click();
    await confirm({ description: `billing on a ${size}` });
    const secretField = page.locator('#token-secret-value');
    await secretField.waitFor({ timeout: SEEN_MS });
    const token = await secretField.inputValue();
    assert.match(token, /^[0-9a-f]{12}\.[0-9a-f]{32}$/);
    const id = token.split('.')[0];
    await see('#tokens-summary', '1 token');
    await see(`#tokens-table tr[data-token="${id}"] td.desc`, `billing on a ${size}`);
    await see(`#tokens-table tr[data-token="${id}"] td[data-col="limit"]`, 'none');
    assert.deepEqual((await admin('GET', `/token/${ns}`)).json, { tokens: { [id]: `billing on a ${size}` } });
    await assertFits(viewport.width);
    await shot(`23-${size}-token-created`);
    // Once dismissed (or on the next visit) the secret is nowhere on the page.
    await page.locator('#token-secret-done').click();
    await page.reload();
    await see('#tokens-summary', '1 token');
    assert.ok(!(await page.content()).includes(token.split('.')[1]), 'the secret is shown again');
    // A rate limit.
    await page.locator(`#tokens-table tr[data-token="${id}"] button[data-action="limit"]`).click();
    await confirm({ read: 5, write: 7, interval: 10 });
    await see('#toast', `Token ${id}: 5 consumes · 7 publishes per 10 seconds`);
    await see(`#tokens-table tr[data-token="${id}"] td[data-col="limit"]`, '5 consumes · 7 publishes per 10 seconds');
    assert.deepEqual((await admin('GET', `/token/${ns}/${id}/limit`)).json, { read: 5, write: 7, interval: 10 });
    await shot(`24-${size}-token-limit`);
    await page.locator(`#tokens-table tr[data-token="${id}"] button[data-action="unlimit"]`).click();
    await confirm();
    await see(`#tokens-table tr[data-token="${id}"] td[data-col="limit"]`, 'none');
    assert.equal((await admin('GET', `/token/${ns}/${id}/limit`)).status, 404);
    // A refused limit says why.
    await page.locator(`#tokens-table tr[data-token="${id}"] button[data-action="limit"]`).click();
    await confirm({ read: 0, write: 0, interval: 10 });
    await see('#toast', "the read and write of limiter can't be 0 at the same time");
    problems.splice(0, problems.length, ...problems.filter((p) => !p.startsWith('400 for PUT')));
    // Delete.
    await page.locator(`#tokens-table tr[data-token="${id}"] button[data-action="delete"]`).click();
    await confirm();
    await see('#toast', `Deleted token ${id}`);
    await see('#tokens-summary', '0 tokens');
    assert.deepEqual((await admin('GET', `/token/${ns}`)).json, { tokens: {} });
  });
}

test('a namespace in the tree links to its tokens', async () => {
  await page.setViewportSize(SIZES[0][1]);
  await page.goto(`${base}/#/?group=ns`);
  await page.locator('#tubes-table tr[data-namespace="mail"] a.ns-tokens').click();
  await see('#tokens-summary', '0 tokens');
  assert.equal(await page.locator('#token-ns').inputValue(), 'mail');
});

test('nothing went wrong in the page', () => {
  assert.deepEqual(problems, []);
});
