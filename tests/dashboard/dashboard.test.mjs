// End-to-end tests of stalkd's web dashboard (docs/DASHBOARD.md) in Debian's headless
// chromium, driven by playwright-core. Started by run_browser_tests.py, which runs stalkd
// (with --admin-http, --admin-accounts and -b) and passes in the environment:
//   STALKD_ADMIN_URL   http://127.0.0.1:<admin port>
//   STALKD_TEXT_PORT   the text protocol's port
//   STALKD_USER, STALKD_PASSWORD   an account of the --admin-accounts file
//   STALKD_SCREENSHOTS where the screenshots go (kept as test artifacts)
//   CHROMIUM           the browser (default /usr/bin/chromium; nothing is ever downloaded)
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { chromium } from 'playwright-core';

const base = process.env.STALKD_ADMIN_URL;
const textPort = Number(process.env.STALKD_TEXT_PORT);
const user = process.env.STALKD_USER;
const password = process.env.STALKD_PASSWORD;
const shots = process.env.STALKD_SCREENSHOTS;
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
// The page polls every 2 s and a change shows within one poll; this only bounds a hang
// (a loaded 2-core machine can hold a headless browser up for seconds).
const SEEN_MS = 30000;

// ---------------------------------------------------------------------------- a client

// A beanstalkd text protocol client: one command at a time, replies parsed as they come.
class Beanstalk {
  static connect(port) {
    return new Promise((resolve, reject) => {
      const sock = net.createConnection({ host: '127.0.0.1', port }, () => resolve(new Beanstalk(sock)));
      sock.once('error', reject);
    });
  }
  constructor(sock) {
    this.sock = sock;
    this.buf = Buffer.alloc(0);
    this.waiting = null;
    sock.on('data', (d) => {
      this.buf = Buffer.concat([this.buf, d]);
      this.pump();
    });
  }
  pump() {
    if (!this.waiting) return;
    const eol = this.buf.indexOf('\r\n');
    if (eol < 0) return;
    const line = this.buf.subarray(0, eol).toString('latin1');
    const words = line.split(' ');
    let end = eol + 2;
    let body = null;
    if (['OK', 'RESERVED', 'FOUND'].includes(words[0])) {
      const n = Number(words[words.length - 1]);
      if (this.buf.length < end + n + 2) return;
      body = this.buf.subarray(end, end + n);
      end += n + 2;
    }
    this.buf = this.buf.subarray(end);
    const w = this.waiting;
    this.waiting = null;
    w({ line, words, body });
  }
  // The next reply, without sending anything (the jobs after RESERVED-MANY).
  next() {
    assert.equal(this.waiting, null, 'one command at a time');
    return new Promise((resolve) => {
      this.waiting = resolve;
      this.pump();
    });
  }
  cmd(line, body) {
    assert.equal(this.waiting, null, 'one command at a time');
    return new Promise((resolve) => {
      this.waiting = resolve;
      const parts = [Buffer.from(line + '\r\n', 'latin1')];
      if (body !== undefined) parts.push(Buffer.from(body), Buffer.from('\r\n'));
      this.sock.write(Buffer.concat(parts));
      this.pump();
    });
  }
  async put(body, { pri = 0, delay = 0, ttr = 60 } = {}) {
    const b = Buffer.from(body);
    const r = await this.cmd(`put ${pri} ${delay} ${ttr} ${b.length}`, b);
    assert.equal(r.words[0], 'INSERTED', r.line);
    return Number(r.words[1]);
  }
  async stats(what) {
    const r = await this.cmd(what);
    assert.equal(r.words[0], 'OK', `${what}: ${r.line}`);
    const out = {};
    for (const l of r.body.toString().split('\n')) {
      const m = /^([\w-]+): "?(.*?)"?$/.exec(l);
      if (m) out[m[1]] = m[2];
    }
    return out;
  }
  close() {
    this.sock.destroy();
  }
}

// ---------------------------------------------------------------------------- the browser

let userDir;
let ctx;
let page;
let bs;
let keeper;  // watches the tubes the tests purge, so they outlive their jobs
const problems = [];

async function shot(name) {
  await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

// Waits until the locator's element shows exactly `text` (trimmed).
async function seeText(selector, text, timeout = SEEN_MS) {
  const want = text instanceof RegExp ? text : new RegExp(`^\\s*${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s*$`);
  await page.locator(selector, { hasText: want }).first().waitFor({ timeout });
}

async function confirm(fields = {}) {
  const dialog = page.locator('dialog#confirm');
  await dialog.waitFor({ state: 'visible' });
  for (const [name, value] of Object.entries(fields)) {
    const el = dialog.locator(`[name="${name}"]`);
    if ((await el.evaluate((e) => e.tagName)) === 'SELECT') await el.selectOption(value);
    else await el.fill(String(value));
  }
  await dialog.locator('button[value="ok"]').click();
  await dialog.waitFor({ state: 'hidden' });
}

async function waitFor(pred, timeout = SEEN_MS) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

before(async () => {
  assert.ok(base && textPort && shots, 'run by run_browser_tests.py');
  fs.mkdirSync(shots, { recursive: true });
  userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'stalkd-chromium-'));
  ctx = await chromium.launchPersistentContext(userDir, {
    executablePath,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1280, height: 900 },
    httpCredentials: { username: user, password },
  });
  page = ctx.pages()[0] || (await ctx.newPage());
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    // A failed request is reported below, with its address.
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) {
      problems.push(`console error: ${m.text()}`);
    }
  });
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`${r.status()} for ${r.request().method()} ${r.url()}`);
  });
  // Everything comes from the server itself: no CDN, no other origin.
  page.on('request', (r) => {
    if (!r.url().startsWith(base + '/')) problems.push(`request elsewhere: ${r.url()}`);
  });
  bs = await Beanstalk.connect(textPort);
  keeper = await Beanstalk.connect(textPort);
});

after(async () => {
  if (ctx) await ctx.close();
  if (userDir) fs.rmSync(userDir, { recursive: true, force: true });
  if (bs) bs.close();
  if (keeper) keeper.close();
});

const DESKTOP = { width: 1280, height: 900 };
const PHONE = { width: 400, height: 844 };

// A worker: a connection of its own that watches `tube` only. Its reservations end when it
// is closed; detached ones (as an HTTP consume makes) do not.
async function workerOn(tube) {
  const w = await Beanstalk.connect(textPort);
  assert.equal((await w.cmd(`watch ${tube}`)).line, 'WATCHING 2');
  assert.equal((await w.cmd('ignore default')).line, 'WATCHING 1');
  return w;
}

// Reserves the worker's next ready job, detached or as a worker; its id.
async function reserve(worker, detached) {
  if (!detached) {
    const r = await worker.cmd('reserve-with-timeout 0');
    assert.equal(r.words[0], 'RESERVED', r.line);
    return Number(r.words[1]);
  }
  assert.equal((await worker.cmd('reserve-ext 0 detached')).line, 'RESERVED-MANY 1');
  const r = await worker.next();
  assert.equal(r.words[0], 'RESERVED', r.line);
  return Number(r.words[1]);
}

// Waits until the page's address (its hash included) matches `re`.
async function seeURL(re) {
  assert.ok(await waitFor(() => re.test(page.url())), `the page is at ${page.url()}, not ${re}`);
}

// Every cell of each row of the jobs table spans the row exactly (no cell shifted by a
// flex box inside the table), and the table fits its box with each row's last button in
// the viewport.
async function assertRowsAligned(width) {
  const rows = await page.locator('#jobs-table tbody tr').evaluateAll((trs) =>
    trs.map((tr) => {
      const r = tr.getBoundingClientRect();
      return {
        id: tr.dataset.job,
        top: r.top,
        bottom: r.bottom,
        // The columns a narrow screen hides have no box.
        cells: [...tr.children].filter((c) => c.getClientRects().length > 0).map((c) => {
          const b = c.getBoundingClientRect();
          return { top: b.top, bottom: b.bottom };
        }),
      };
    }),
  );
  assert.ok(rows.length > 0);
  for (const row of rows) {
    for (const c of row.cells) {
      assert.ok(Math.abs(c.top - row.top) <= 1 && Math.abs(c.bottom - row.bottom) <= 1,
        `row ${row.id}: a cell spans ${c.top}..${c.bottom}, the row ${row.top}..${row.bottom}`);
    }
  }
  const fit = await page.locator('#jobs-table').evaluate((t) => ({
    table: t.scrollWidth,
    box: t.parentElement.clientWidth,
    page: document.documentElement.scrollWidth,
  }));
  assert.ok(fit.table <= fit.box, `the table is ${fit.table} px wide in a box of ${fit.box}`);
  assert.ok(fit.page <= width, `the page is ${fit.page} px wide`);
  for (const b of await page.locator('#jobs-table tbody td.row-actions button').all()) {
    const box = await b.boundingBox();
    assert.ok(box && box.x >= 0 && box.x + box.width <= width, `a button at ${JSON.stringify(box)}`);
  }
}

// ---------------------------------------------------------------------------- scenarios

test('the dashboard needs the admin account', async () => {
  for (const p of ['/', '/dashboard/app.js', '/dashboard/api/server']) {
    const res = await fetch(base + p);
    assert.equal(res.status, 401, p);
    assert.match(res.headers.get('www-authenticate') || '', /^Basic /);
  }
});

test('the overview loads', async () => {
  await page.goto(base + '/');
  await seeText('#server .card-value', /stalkd 1\.13\./);
  await page.locator('#tubes-table tr[data-tube="default"]').waitFor();
  await seeText('#server .card', /Binlog/);
  assert.match(await page.locator('#server').innerText(), /1 file/);
  await shot('01-overview');
});

test('a job put over the text protocol appears', async () => {
  await keeper.cmd('watch e2e-live');
  await bs.cmd('use e2e-live');
  await bs.put('hello from the text protocol');
  await seeText('#tubes-table tr[data-tube="e2e-live"] td[data-col="ready"]', '1');
  await bs.put('and another one');
  await seeText('#tubes-table tr[data-tube="e2e-live"] td[data-col="ready"]', '2');
  await shot('02-overview-text-put');
});

test('the tube list is searched and sorted on the server', async () => {
  await page.fill('#search', 'E2E-LI');
  await page.locator('#tubes-table tr[data-tube="default"]').waitFor({ state: 'detached' });
  await page.locator('#tubes-table tr[data-tube="e2e-live"]').waitFor();
  assert.equal(await page.locator('#tubes-table tbody tr').count(), 1);
  await page.fill('#search', '');
  await page.selectOption('#sort', 'ready');
  await seeText('#tubes-table tbody tr:first-child th', 'e2e-live');
  await page.selectOption('#sort', 'name');
});

test('ready age: the next job, and the oldest when priorities differ', async () => {
  await keeper.cmd('watch e2e-prio');
  await bs.cmd('use e2e-prio');
  const old = await bs.put('old and unimportant', { pri: 100 });
  const urgent = await bs.put('new and urgent', { pri: 1 });
  await page.goto(`${base}/#/tube/e2e-prio`);
  await seeText('#tube-stats a[href="#/job/' + urgent + '"]', `next: job ${urgent}`);
  await seeText('#oldest-ready', new RegExp(`^oldest: job ${old}, \\d+s$`));
  await bs.cmd(`delete ${old}`);
  await page.locator('#oldest-ready').waitFor({ state: 'detached' });
});

let buried;
test('browse a buried job', async () => {
  await keeper.cmd('watch e2e-dead');
  await bs.cmd('use e2e-dead');
  buried = await bs.put(JSON.stringify({ order: 42, items: ['tea', 'cake'] }), { pri: 7 });
  await bs.cmd('watch e2e-dead');
  await bs.cmd('ignore default');
  const r = await bs.cmd('reserve-with-timeout 0');
  assert.match(r.line, new RegExp(`^RESERVED ${buried} `));
  assert.equal((await bs.cmd(`bury ${buried} 7`)).line, 'BURIED');

  await page.goto(base + '/');
  await page.locator('#tubes-table tr[data-tube="e2e-dead"] a').click();
  await seeText('h1', 'e2e-dead');
  await seeText('[data-stat="buried"]', '1');
  await page.locator('.tabs button[data-state="buried"]').click();
  await page.locator(`#jobs-table tr[data-job="${buried}"]`).waitFor();
  assert.match(await page.locator(`#jobs-table tr[data-job="${buried}"]`).innerText(), /"order":42/);
  await shot('03-tube-buried');

  await page.locator(`#jobs-table tr[data-job="${buried}"] a`).click();
  await seeText('dd[data-field="State"]', 'buried');
  await seeText('dd[data-field="Bury reason"]', 'bury');
  await seeText('dd[data-field="Priority"]', '7');
  await seeText('#job-body', /"order": 42,\n\s+"items": \[/);
  await shot('04-job-buried');
});

test('kick it', async () => {
  await page.locator('#job-kick').click();
  await confirm();
  await seeText('#toast', `Kicked job ${buried}`);
  await seeText('dd[data-field="State"]', 'ready');
  const st = await bs.stats(`stats-job ${buried}`);
  assert.equal(st.state, 'ready');
  assert.equal(st.kicks, '1');
  await shot('05-job-kicked');
});

test('a binary body shows as hex', async () => {
  await bs.cmd('use e2e-binary');
  const id = await bs.put(Buffer.from([0, 1, 2, 0xff, 0xfe, 0x0a, 0x0d, 0x41]));
  await page.goto(`${base}/#/job/${id}`);
  await seeText('#job-body', /^00000000  00 01 02 ff fe 0a 0d 41\s+\|\.\.\.\.\.\.\.A\|$/);
  assert.equal(await page.locator('.body-viewer button[data-mode="json"]').isDisabled(), true);
  await page.locator('.body-viewer button[data-mode="text"]').click();
  await seeText('#job-body', '\\x00\\x01\\x02\\xff\\xfe\n\\x0dA');
  await shot('06-job-binary');
});

test('purge a tube', async () => {
  await bs.cmd('use e2e-dead');
  for (let i = 0; i < 3; i++) await bs.put(`ready ${i}`);
  await bs.put('later', { delay: 3600 });
  await page.goto(`${base}/#/tube/e2e-dead`);
  await seeText('[data-stat="ready"]', '4');
  await seeText('[data-stat="delayed"]', '1');
  await page.locator('#purge').click();
  await confirm({ state: 'all' });
  await seeText('#toast', 'Purged 5 jobs');
  await seeText('[data-stat="ready"]', '0');
  await seeText('[data-stat="delayed"]', '0');
  const st = await bs.stats('stats-tube e2e-dead');
  assert.equal(st['current-jobs-ready'], '0');
  assert.equal(st['current-jobs-delayed'], '0');
  await shot('07-tube-purged');
});

test('pause and resume', async () => {
  await page.goto(`${base}/#/tube/e2e-live`);
  await seeText('[data-stat="ready"]', '2');
  await page.locator('#pause').click();
  await confirm({ seconds: 300 });
  await page.locator('#paused-badge').waitFor();
  assert.equal((await bs.stats('stats-tube e2e-live')).pause, '300');
  await shot('08-tube-paused');
  await page.goto(`${base}/#/`);
  await seeText('#tubes-table tr[data-tube="e2e-live"] td[data-col="paused"]', /paused/);
  await page.goto(`${base}/#/tube/e2e-live`);
  await page.locator('#resume').click();
  await confirm();
  await page.locator('#paused-badge').waitFor({ state: 'detached' });
  await page.locator('#pause').waitFor();
  assert.equal((await bs.stats('stats-tube e2e-live')).pause, '0');
  await shot('09-tube-resumed');
});

test('move and delete jobs', async () => {
  await page.goto(`${base}/#/tube/e2e-live`);
  const first = page.locator('#jobs-table tbody tr').first();
  const id = Number(await first.getAttribute('data-job'));
  await first.locator('button[data-action="move"]').click();
  await confirm({ to: 'e2e-moved' });
  await seeText('#toast', new RegExp(`Moved job ${id} to e2e-moved as job \\d+`));
  await seeText('[data-stat="ready"]', '1');
  assert.equal((await bs.stats('stats-tube e2e-moved'))['current-jobs-ready'], '1');
  assert.equal((await bs.cmd(`stats-job ${id}`)).line, 'NOT_FOUND');

  const other = Number(await page.locator('#jobs-table tbody tr').first().getAttribute('data-job'));
  await page.locator(`#jobs-table tr[data-job="${other}"] button[data-action="delete"]`).click();
  await confirm();
  await seeText('#toast', `Deleted job ${other}`);
  await seeText('[data-stat="ready"]', '0');
  assert.equal((await bs.cmd(`stats-job ${other}`)).line, 'NOT_FOUND');
});

for (const [size, viewport] of [['desktop', DESKTOP], ['phone', PHONE]]) {
  test(`a detached reservation is shown and deleted (${size})`, async () => {
    await page.setViewportSize(viewport);
    const tube = `e2e-detached-${size}`;
    await keeper.cmd(`watch ${tube}`);
    const worker = await workerOn(tube);
    await bs.cmd(`use ${tube}`);
    const held = await bs.put('held by a worker');
    const consumed = await bs.put('consumed over HTTP');
    assert.equal(await reserve(worker, false), held);
    assert.equal(await reserve(worker, true), consumed);
    // The Reserved tab: the worker's job has no Delete, the detached one has.
    await page.goto(`${base}/#/tube/${tube}?state=reserved`);
    await page.locator(`#jobs-table tr[data-job="${consumed}"]`).waitFor();
    assert.equal(await page.locator(`#jobs-table tr[data-job="${held}"] button[data-action="delete"]`).count(), 0);
    assert.equal(await page.locator(`#jobs-table tr[data-job="${consumed}"] button[data-action="delete"]`).count(), 1);
    await assertRowsAligned(viewport.width);
    await shot(`12-${size}-reserved-tab`);
    // The worker's job: no actions, and why.
    await page.goto(`${base}/#/job/${held}`);
    await seeText('dd[data-field="Reserved by"]', "a worker's connection");
    assert.equal(await page.locator('#job-delete').count(), 0);
    // The detached one: Delete.
    await page.goto(`${base}/#/job/${consumed}`);
    await seeText('dd[data-field="Reserved by"]', /^no connection \(detached/);
    await seeText('#job-reserved-note', /detached reservation/);
    assert.equal(await page.locator('#job-move').count(), 0);
    await shot(`13-${size}-job-detached`);
    await page.locator('#job-delete').click();
    await confirm();
    await seeText('#toast', `Deleted job ${consumed}`);
    await seeURL(new RegExp(`#/tube/${tube}$`));
    assert.equal((await bs.cmd(`stats-job ${consumed}`)).line, 'NOT_FOUND');
    worker.close();
    await page.setViewportSize(DESKTOP);
  });

  test(`a buried row's actions fit (${size})`, async () => {
    await page.setViewportSize(viewport);
    const tube = `e2e-rows-${size}`;
    await keeper.cmd(`watch ${tube}`);
    const worker = await workerOn(tube);
    await bs.cmd(`use ${tube}`);
    await bs.put('x'.repeat(200));
    const id = await reserve(worker, false);
    assert.equal((await worker.cmd(`bury ${id} 0`)).line, 'BURIED');
    worker.close();
    await page.goto(`${base}/#/tube/${tube}?state=buried`);
    await page.locator(`#jobs-table tr[data-job="${id}"] button[data-action="delete"]`).waitFor();
    for (const a of ['kick', 'move', 'delete']) {
      assert.ok(await page.locator(`#jobs-table tr[data-job="${id}"] button[data-action="${a}"]`).isVisible(), a);
    }
    await assertRowsAligned(viewport.width);
    await shot(`14-${size}-buried-row`);
    await page.setViewportSize(DESKTOP);
  });

  test(`after a move the job page shows the new job (${size})`, async () => {
    await page.setViewportSize(viewport);
    await bs.cmd('use e2e-move-from');
    const id = await bs.put(`move me on a ${size}`, { pri: 9 });
    await page.goto(`${base}/#/job/${id}`);
    await seeText('dd[data-field="State"]', 'ready');
    await page.locator('#job-move').click();
    await confirm({ to: `e2e-move-to-${size}` });
    await seeText('#toast', new RegExp(`Moved job ${id} to e2e-move-to-${size} as job \\d+`));
    const moved = Number((await page.locator('#toast').innerText()).match(/as job (\d+)/)[1]);
    await seeURL(new RegExp(`#/job/${moved}$`));
    await seeText('h1', `Job ${moved}`);
    await seeText('dd[data-field="Tube"]', `e2e-move-to-${size}`);
    await seeText('dd[data-field="Priority"]', '9');
    assert.equal(await page.locator('p.missing').isVisible(), false);
    await shot(`15-${size}-moved-job`);
    await page.setViewportSize(DESKTOP);
  });
}

// ---------------------------------------------------------------------------- put, copy, search

// The page is no wider than the screen.
async function assertFits(width) {
  const w = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(w <= width, `the page is ${w} px wide on a ${width} px screen`);
}

// The body of job `id` as the text protocol sees it (null: no such job).
async function peekBody(id) {
  const r = await bs.cmd(`peek ${id}`);
  return r.words[0] === 'FOUND' ? r.body : null;
}

const FORM_FIELDS = ['tube', 'pri', 'delay', 'ttr', 'body'];

// The put form's values (those of `FORM_FIELDS`).
async function formValues() {
  const out = {};
  for (const f of FORM_FIELDS) out[f] = await page.locator(`#put-${f}`).inputValue();
  return out;
}

async function fillForm(values) {
  for (const [f, v] of Object.entries(values)) await page.locator(`#put-${f}`).fill(String(v));
}

// Confirms the put form's dialog; the new job's id, once the page went to it.
async function confirmPut(tube) {
  await confirm();
  await seeText('#toast', new RegExp(`^Put job \\d+ into ${tube}$`));
  const id = Number((await page.locator('#toast').innerText()).match(/job (\d+)/)[1]);
  await seeURL(new RegExp(`#/job/${id}$`));
  await seeText('h1', `Job ${id}`);
  return id;
}

for (const [size, viewport] of [['desktop', DESKTOP], ['phone', PHONE]]) {
  test(`put a job from the form (${size})`, async () => {
    await page.setViewportSize(viewport);
    const tube = `e2e-put-${size}`;
    await page.goto(`${base}/#/`);
    await page.locator('#put-new').click();
    await seeURL(/#\/put$/);
    // The defaults of stalk put and beanstalk_console.
    assert.deepEqual(await formValues(), { tube: 'default', pri: '1024', delay: '0', ttr: '60', body: '' });
    const body = `{"hello":"from the form on a ${size}"}`;
    await fillForm({ tube, pri: 7, ttr: 30, body });
    await seeText('#put-size', `${Buffer.byteLength(body)} B`);
    await assertFits(viewport.width);
    await shot(`18-${size}-put-form`);
    await page.locator('#put-submit').click();
    const id = await confirmPut(tube);
    await seeText('dd[data-field="Tube"]', tube);
    await seeText('dd[data-field="Priority"]', '7');
    assert.equal((await peekBody(id)).toString(), body);
    const st = await bs.stats(`stats-job ${id}`);
    assert.deepEqual([st.pri, st.delay, st.ttr, st.state], ['7', '0', '30', 'ready']);
    await page.setViewportSize(DESKTOP);
  });

  test(`copy a job, edited, into another tube (${size})`, async () => {
    await page.setViewportSize(viewport);
    const from = `e2e-copy-from-${size}`;
    const to = `e2e-copy-to-${size}`;
    await bs.cmd(`use ${from}`);
    const id = await bs.put('copy me\nline two', { pri: 11, delay: 3600, ttr: 45 });
    await page.goto(`${base}/#/job/${id}`);
    await page.locator('#job-copy').click();
    await seeURL(new RegExp(`#/put\\?copy=${id}$`));
    await waitFor(async () => (await page.locator('#put-tube').inputValue()) === from);
    assert.deepEqual(await formValues(), { tube: from, pri: '11', delay: '3600', ttr: '45', body: 'copy me\nline two' });
    await fillForm({ tube: to, delay: 0, body: 'copy me\nline two, edited' });
    await assertFits(viewport.width);
    await shot(`19-${size}-copy-form`);
    await page.locator('#put-submit').click();
    const copy = await confirmPut(to);
    assert.notEqual(copy, id);
    await seeText('dd[data-field="Tube"]', to);
    await seeText('dd[data-field="Priority"]', '11');
    assert.equal((await peekBody(copy)).toString(), 'copy me\nline two, edited');
    // The original is as it was.
    assert.equal((await peekBody(id)).toString(), 'copy me\nline two');
    const st = await bs.stats(`stats-job ${id}`);
    assert.deepEqual([st.tube, st.state], [from, 'delayed']);
    await page.setViewportSize(DESKTOP);
  });

  test(`search a tube's job bodies (${size})`, async () => {
    await page.setViewportSize(viewport);
    const tube = `e2e-search-${size}`;
    await keeper.cmd(`watch ${tube}`);
    await bs.cmd(`use ${tube}`);
    await bs.put('alpha');
    const plain = await bs.put('the needle in a haystack');
    const long = await bs.put('x'.repeat(200) + 'NEEDLE' + 'y'.repeat(200));
    await bs.put('nothing here');
    const later = await bs.put('a delayed Needle', { delay: 3600 });
    await page.goto(`${base}/#/tube/${tube}`);
    await page.locator('#tube-search').click();
    await seeURL(new RegExp(`#/search/${tube}$`));
    await page.locator('#body-search').fill('needle');
    await page.locator('#body-search-go').click();
    await seeText('#body-search-summary', /^3 matches in 5 jobs searched \(.* of bodies; every job\)\.$/);
    await seeURL(new RegExp(`#/search/${tube}\\?q=needle$`));
    const found = await page.locator('#body-search-results li').evaluateAll((lis) =>
      lis.map((li) => [Number(li.dataset.id), li.querySelector('mark').textContent]));
    assert.deepEqual(found, [[plain, 'needle'], [long, 'NEEDLE'], [later, 'Needle']]);
    // A long body shows the bytes around the match, not all of it.
    const snip = await page.locator(`#body-search-results li[data-id="${long}"] .snippet`).innerText();
    assert.equal(snip, '…' + 'x'.repeat(48) + 'NEEDLE' + 'y'.repeat(48) + '…');
    await assertFits(viewport.width);
    await shot(`20-${size}-search`);
    // Match case, delayed jobs only.
    await page.locator('#body-search').fill('Needle');
    await page.locator('#body-search-state').selectOption('delayed');
    await page.locator('#body-search-case').check();
    await page.locator('#body-search-go').click();
    await seeText('#body-search-summary', /^1 match in 1 job searched/);
    await page.locator(`#body-search-results li[data-id="${later}"] a`).click();
    await seeURL(new RegExp(`#/job/${later}$`));
    await seeText('dd[data-field="State"]', 'delayed');
    await page.setViewportSize(DESKTOP);
  });
}

test('a binary job is copied byte for byte', async () => {
  await bs.cmd('use e2e-copy-binary');
  const bin = Buffer.from([0, 1, 2, 0xff, 0x0d, 0x0a, 0x80]);
  const id = await bs.put(bin);
  await page.goto(`${base}/#/put?copy=${id}`);
  await seeText('#put-binary', /^The body \(7 B\) is not plain text/);
  assert.equal(await page.locator('#put-body').isVisible(), false);
  await shot('21-desktop-copy-binary');
  await page.locator('#put-submit').click();
  const copy = await confirmPut('e2e-copy-binary');
  assert.deepEqual(await peekBody(copy), bin);
});

test('the tube list\'s charts share one scale and say their values', async () => {
  await page.goto(`${base}/#/`);
  await seeText('#tubes-scale', /^Charts share one scale: top [\d,]+ ready, [\d.]+\/s$/);
  const scales = await page.locator('#tubes-table svg.spark').evaluateAll((svgs) =>
    svgs.map((s) => `${s.dataset.scaleReady} ${s.dataset.scaleRate}`));
  assert.ok(scales.length >= 2, `${scales.length} charts`);
  assert.equal(new Set(scales).size, 1, `scales ${[...new Set(scales)]}`);
  const title = await page.locator('#tubes-table svg.spark title').first().textContent();
  assert.match(title, /^ready now [\d,]+, peak [\d,]+ \(chart top [\d,]+\); puts\/s now /);
  await shot('16-desktop-shared-scale');
});

for (const [size, viewport] of [['desktop', DESKTOP], ['phone', PHONE]]) {
  test(`a tube's chart says its values now and at their peak (${size})`, async () => {
    await page.setViewportSize(viewport);
    await bs.cmd('use e2e-chart');
    await bs.put('one');
    await bs.put('two');
    await page.goto(`${base}/#/tube/e2e-chart`);
    await seeText('#tube-chart-caption', /ready 2 \(peak 2\).*puts\/s [\d.–]+ \(peak [\d.]+\).*top of the chart: 2 ready/);
    await shot(`17-${size}-tube-chart`);
    await page.setViewportSize(DESKTOP);
  });
}

test('on a phone', async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${base}/#/`);
  await page.locator('#tubes-table tr[data-tube="e2e-moved"]').waitFor();
  // The least needed columns give way; the table fits the screen.
  assert.equal(await page.locator('#tubes-table th', { hasText: 'Put/s' }).isVisible(), false);
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `the page is ${width} px wide`);
  await shot('10-phone-overview');
  await page.goto(`${base}/#/tube/e2e-moved`);
  await seeText('[data-stat="ready"]', '1');
  await shot('11-phone-tube');
  await page.setViewportSize({ width: 1280, height: 900 });
});

test('nothing went wrong in the page', () => {
  assert.deepEqual(problems, []);
});
