// stalkd dashboard (docs/DASHBOARD.md): the overview, a tube's page and a job's page, each
// refreshed every two seconds while the tab is visible, and the actions, each confirmed in
// a dialog and followed by an immediate refresh. Routes live in the URL's fragment:
//   #/                         overview (?q=&sort=&order=&offset=)
//   #/tube/<name>              a tube (?state=ready|delayed|reserved|buried&from=<id>)
//   #/job/<id>                 a job
//   #/tokens/<namespace>       lmstfy's tokens of a namespace and their rate limits (tokens.js)
//   #/put?tube=|copy=          the put form (put.js)
//   #/search/<name>?q=         a search of a tube's job bodies (search.js)
import {
  api,
  ApiError,
  asText,
  bytes,
  confirmDialog,
  duration,
  enc,
  fromBase64,
  h,
  hexDump,
  isText,
  newest,
  num,
  peak,
  plural,
  prettyJson,
  preview,
  rate,
  sparkline,
  toast,
} from './util.js';
import {
  buryReason,
  deadLetterActions,
  kickLabel,
  loadTree,
  priority,
  priorityColumn,
  priorityDetail,
  queueBadge,
  stateLabel,
  stateName,
  treeRows,
} from './lmstfy.js';
import { tokensView } from './tokens.js';
import { copyLink, putLink, putView } from './put.js';
import { searchLink, searchView } from './search.js';

const POLL_MS = 2000;
// Sorting the tube list by a count reads every tube's stats on the server: with more than
// SLOW_TUBES tubes the overview refreshes less often.
const SLOW_TUBES = 10000;
const SLOW_POLL_MS = 10000;
const PAGE = 50;
const STATES = ['ready', 'delayed', 'reserved', 'buried'];
const SORTS = [
  ['name', 'Name'],
  ['ready', 'Ready'],
  ['reserved', 'Reserved'],
  ['delayed', 'Delayed'],
  ['buried', 'Buried'],
  ['waiting', 'Waiting'],
  ['total_jobs', 'Total jobs'],
];

const main = document.getElementById('main');
const crumbs = document.getElementById('crumbs');
const statusEl = document.getElementById('status');

let view = null;
let timer = null;

// ---------------------------------------------------------------------------- routing

function parseRoute() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  const seg = path
    .split('/')
    .filter((s) => s !== '')
    .map((s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        return s;
      }
    });
  if (seg[0] === 'tube' && seg.length === 2) return { name: 'tube', tube: seg[1], params };
  if (seg[0] === 'job' && seg.length === 2) return { name: 'job', id: seg[1], params };
  if (seg[0] === 'tokens' && seg.length <= 2) return { name: 'tokens', ns: seg[1] || '', params };
  if (seg[0] === 'put' && seg.length === 1) return { name: 'put', params };
  if (seg[0] === 'search' && seg.length === 2) return { name: 'search', tube: seg[1], params };
  return { name: 'overview', params };
}

// Changes the fragment's query without a new history entry or a re-render.
function setQuery(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '' && v !== 0) q.set(k, v);
  }
  const s = q.toString();
  history.replaceState(null, '', '#' + path + (s ? '?' + s : ''));
}

export function tubeHref(name) {
  return '#/tube/' + enc(name);
}

function render() {
  clearTimeout(timer);
  if (view && view.destroy) view.destroy();
  const r = parseRoute();
  main.replaceChildren();
  if (r.name === 'tube') view = tubeView(r.tube, r.params);
  else if (r.name === 'job') view = jobView(r.id);
  else if (r.name === 'tokens') view = tokensView(r.ns, { act });
  else if (r.name === 'put') view = putView(r.params);
  else if (r.name === 'search') view = searchView(r.tube, r.params);
  else view = overviewView(r.params);
  main.append(view.el);
  crumbs.replaceChildren(...(view.crumbs || []));
  document.title = view.title ? `${view.title} · stalkd` : 'stalkd';
  const mine = view;
  refresh(mine).then(() => schedule(mine));
}

async function refresh(v) {
  try {
    await v.refresh();
    if (v === view) setStatus('');
  } catch (e) {
    if (v !== view) return;
    if (e instanceof ApiError && v.onError && v.onError(e)) return;
    setStatus(e instanceof ApiError ? e.message : 'cannot reach the server; retrying', true);
  }
}

function schedule(v) {
  if (v !== view) return;
  clearTimeout(timer);
  timer = setTimeout(async () => {
    if (v !== view) return;
    if (!document.hidden) await refresh(v);
    schedule(v);
  }, v.interval ? v.interval() : POLL_MS);
}

// Refreshes the current view now (after an action).
function refreshNow() {
  const v = view;
  return refresh(v).then(() => schedule(v));
}

function setStatus(text, error = false) {
  statusEl.textContent = text;
  statusEl.className = error ? 'status error' : 'status';
}

document.addEventListener('visibilitychange', () => {
  if (!document.hidden && view) refreshNow();
});
window.addEventListener('hashchange', render);

// Runs an action after its dialog: the request, a toast with its answer, a refresh.
async function act(dialog, run, done) {
  const values = await confirmDialog(dialog);
  if (!values) return;
  const at = location.hash;
  try {
    const res = await run(values);
    toast(done(res, values));
  } catch (e) {
    toast(e.message, true);
  }
  // An action that went to another page (a deleted job's tube, a moved job's new id) leaves
  // it to the router: the page it left would ask for what is gone.
  if (location.hash === at) await refreshNow();
}

// ---------------------------------------------------------------------------- overview

function overviewView(params) {
  const state = {
    q: params.get('q') || '',
    sort: params.get('sort') || 'name',
    order: params.get('order') || '',
    offset: Math.max(0, parseInt(params.get('offset'), 10) || 0),
    // lmstfy's view: tubes "ns/q" grouped by namespace (lmstfy.js), and the open ones.
    group: params.get('group') === 'ns',
    open: new Set((params.get('open') || '').split(',').filter((n) => n)),
  };
  let seq = 0;
  let slow = false;  // many tubes sorted by a count: every tube's stats each time
  const server = h('section', { id: 'server', class: 'cards', 'aria-label': 'server' });
  const search = h('input', {
    type: 'search',
    id: 'search',
    placeholder: 'Search tubes by name…',
    value: state.q,
    'aria-label': 'search tubes',
    autocomplete: 'off',
  });
  const sort = h(
    'select',
    { id: 'sort', 'aria-label': 'sort by' },
    SORTS.map(([k, label]) => h('option', { value: k, selected: k === state.sort }, label)),
  );
  const order = h('button', { id: 'order', type: 'button', class: 'secondary', title: 'order' });
  const group = h('button', {
    id: 'group',
    type: 'button',
    class: 'secondary',
    title: "lmstfy's view: the queues (tubes ns/q) under their namespace, with its totals",
  }, 'Group by namespace');
  const summary = h('span', { id: 'tubes-summary', class: 'muted' });
  const scaleNote = h('span', { id: 'tubes-scale', class: 'muted opt2' });
  const table = h('div', { class: 'table-wrap' });
  const prev = h('button', { id: 'prev', type: 'button', class: 'secondary' }, '‹ Previous');
  const next = h('button', { id: 'next', type: 'button', class: 'secondary' }, 'Next ›');
  const el = h(
    'div',
    { class: 'overview' },
    server,
    h(
      'section',
      { class: 'tubes', 'aria-label': 'tubes' },
      h('div', { class: 'toolbar' }, h('h2', {}, 'Tubes'), search, sort, order, group, summary, putLink(null, 'put-new')),
      table,
      h('div', { class: 'pager' }, scaleNote, prev, next),
    ),
  );

  function desc() {
    return state.order ? state.order === 'desc' : state.sort !== 'name';
  }
  function sync() {
    order.textContent = desc() ? '↓ desc' : '↑ asc';
    group.setAttribute('aria-pressed', state.group ? 'true' : 'false');
    group.classList.toggle('active', state.group);
    setQuery('/', {
      q: state.q,
      sort: state.sort === 'name' ? '' : state.sort,
      order: state.order,
      offset: state.offset,
      group: state.group ? 'ns' : '',
      open: state.group ? [...state.open].join(',') : '',
    });
  }
  let debounce = null;
  search.addEventListener('input', () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => {
      state.q = search.value.trim();
      state.offset = 0;
      sync();
      refreshNow();
    }, 250);
  });
  sort.addEventListener('change', () => {
    state.sort = sort.value;
    state.order = '';
    state.offset = 0;
    sync();
    refreshNow();
  });
  order.addEventListener('click', () => {
    state.order = desc() ? 'asc' : 'desc';
    state.offset = 0;
    sync();
    refreshNow();
  });
  group.addEventListener('click', () => {
    state.group = !state.group;
    state.offset = 0;
    sync();
    refreshNow();
  });
  function toggle(ns) {
    if (!state.open.delete(ns)) state.open.add(ns);
    sync();
    refreshNow();
  }
  prev.addEventListener('click', () => {
    state.offset = Math.max(0, state.offset - PAGE);
    sync();
    refreshNow();
  });
  next.addEventListener('click', () => {
    state.offset += PAGE;
    sync();
    refreshNow();
  });
  sync();

  async function refresh() {
    const mine = ++seq;
    const dir = desc() ? 'desc' : 'asc';
    const [srv, tubes] = await Promise.all([
      // Points of 5 s: rates are averaged over them, which smooths the throughput line.
      api('server', { params: { step: 5 } }),
      state.group
        ? // Namespaces and plain tubes by name; the open namespaces' queues in the sort.
          loadTree(
            { q: state.q, sort: state.sort, order: state.sort === 'name' ? dir : 'asc', queueOrder: dir, offset: state.offset, limit: PAGE },
            state.open,
            PAGE,
          )
        : api('tubes', { params: { q: state.q, sort: state.sort, order: dir, offset: state.offset, limit: PAGE } }),
    ]);
    if (mine !== seq) return;  // a newer search answered first
    // The tree reads the stats of its namespaces' queues, as a sort by a count does.
    slow = (state.group ? tubes.groups : tubes).total_tubes > SLOW_TUBES && (state.group || state.sort !== 'name');
    renderServer(server, srv);
    renderTubes(state.group ? treePage(tubes) : tubes, state.group ? tubes : null);
  }

  // The tree's page as renderTubes reads a page: its tubes (plain and open queues) give
  // the charts' scale; `more` says whether there is a next page.
  function treePage(tree) {
    const g = tree.groups;
    const tubes = g.rows.filter((r) => r.kind === 'tube').map((r) => r.tube);
    for (const list of tree.queues.values()) tubes.push(...list.tubes);
    return { ...g, tubes, rowsShown: g.rows.length };
  }

  function header(key, label, cls) {
    const active = state.sort === key;
    return h(
      'th',
      { class: cls, scope: 'col' },
      h(
        'button',
        {
          type: 'button',
          class: active ? 'sort active' : 'sort',
          dataset: { sort: key },
          onclick: () => {
            if (state.sort === key) state.order = desc() ? 'asc' : 'desc';
            else {
              state.sort = key;
              state.order = '';
              sort.value = key;
            }
            state.offset = 0;
            sync();
            refreshNow();
          },
        },
        label,
        active ? (desc() ? ' ↓' : ' ↑') : '',
      ),
    );
  }

  // `tree`: the namespace tree's answer (lmstfy.js), or null for the flat list.
  function renderTubes(t, tree) {
    const from = t.matched ? t.offset + 1 : 0;
    const to = t.offset + (tree ? t.rowsShown : t.tubes.length);
    summary.textContent =
      (tree
        ? `namespaces and tubes ${num(from)}–${num(to)}${t.more ? '' : ' (the last)'}, of ${plural(t.matched, 'tube')}`
        : `${num(from)}–${num(to)} of ${plural(t.matched, 'tube')}`) +
      (state.q ? ` matching “${state.q}” (${num(t.total_tubes)} in all)` : '') +
      (slow ? ` · refreshed every ${SLOW_POLL_MS / 1000} s` : '');
    prev.disabled = t.offset === 0;
    next.disabled = tree ? !t.more : to >= t.matched;
    // One scale for every row's chart, so that tubes compare: the page's peaks.
    const withHistory = t.tubes.filter((r) => r.history);
    const scale = {
      ready: peak(...withHistory.map((r) => r.history.ready)),
      rate: peak(...withHistory.flatMap((r) => [r.history.puts, r.history.reserves])),
    };
    scaleNote.textContent = withHistory.length
      ? `Charts share one scale: top ${num(scale.ready)} ready, ${rateText(scale.rate)}/s`
      : '';
    const rows = tree ? treeRows(tree, state.open, tubeRow, scale, toggle) : t.tubes.map((r) => tubeRow(r, scale));
    const empty = h('tr', {}, h('td', { colspan: 11, class: 'empty' }, state.q ? 'No tube matches.' : 'No tubes.'));
    table.replaceChildren(
      h(
        'table',
        { id: 'tubes-table' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            header('name', 'Tube'),
            header('ready', 'Ready', 'n'),
            header('reserved', 'Reserved', 'n'),
            header('delayed', 'Delayed', 'n opt'),
            header('buried', 'Buried', 'n'),
            header('waiting', 'Waiting', 'n opt'),
            h('th', { class: 'opt', scope: 'col' }, 'Paused'),
            h('th', { class: 'n opt', scope: 'col', title: 'jobs put per second, last 10 s' }, 'Put/s'),
            h('th', { class: 'n opt', scope: 'col', title: 'first reservations per second, last 10 s' }, 'Reserve/s'),
            h(
              'th',
              {
                class: 'n opt',
                scope: 'col',
                title:
                  'age (since put) of the next ready job, the one a reserve would take: the oldest ready job when the tube uses one priority',
              },
              'Ready age',
            ),
            h('th', { class: 'opt2', scope: 'col', title: 'ready jobs (area), puts and reserves per second, last 5 minutes' }, 'Last 5 min'),
          ),
        ),
        h('tbody', {}, rows.length ? rows : empty),
      ),
    );
  }

  return {
    el,
    refresh,
    interval: () => (slow ? SLOW_POLL_MS : POLL_MS),
    title: 'Overview',
    crumbs: [h('span', {}, 'Overview')],
  };
}

// A row of the tube list (and of the namespace tree, whose queues are labelled by their
// queue's name): its counts, pause, rates, ready age and chart on the page's `scale`.
function tubeRow(r, scale, label = r.name) {
  return h(
    'tr',
    { dataset: { tube: r.name } },
    h('th', { scope: 'row', class: 'name' }, h('a', { href: tubeHref(r.name), title: label === r.name ? null : r.name }, label)),
    h('td', { class: 'n', dataset: { col: 'ready' } }, num(r.ready)),
    h('td', { class: 'n', dataset: { col: 'reserved' } }, num(r.reserved)),
    h('td', { class: 'n opt', dataset: { col: 'delayed' } }, num(r.delayed)),
    h('td', { class: r.buried ? 'n warn' : 'n', dataset: { col: 'buried' }, title: stateLabel(r.name, 'buried').toLowerCase() }, num(r.buried)),
    h('td', { class: 'n opt', dataset: { col: 'waiting' } }, num(r.waiting)),
    h(
      'td',
      { class: 'opt', dataset: { col: 'paused' } },
      r.paused ? h('span', { class: 'badge paused' }, `paused ${duration(r.pause_left_s)}`) : '',
    ),
    h('td', { class: 'n opt', dataset: { col: 'put_rate' } }, rate(r.put_rate)),
    h('td', { class: 'n opt', dataset: { col: 'reserve_rate' } }, rate(r.reserve_rate)),
    h(
      'td',
      {
        class: 'n opt',
        dataset: { col: 'age' },
        title: r.next_ready_id ? `job ${r.next_ready_id}, the next a reserve would take` : '',
      },
      r.next_ready_age_s === null ? '–' : duration(r.next_ready_age_s),
    ),
    h('td', { class: 'spark-cell opt2' }, r.history ? tubeSpark(r.history, 120, 26, scale) : h('span', { class: 'muted' }, '–')),
  );
}

// A tube's chart: ready jobs (the area) on one scale, puts/s and reserves/s (the lines) on
// another they share. `scale` {ready, rate}: the scales (the tube list's rows share them),
// by default the tube's own peaks. Its title says the values now and at their peak.
function tubeSpark(hist, width, height, scale = {}) {
  const ready = scale.ready ?? peak(hist.ready);
  const rate = scale.rate ?? peak(hist.puts, hist.reserves);
  const svg = sparkline(
    [
      { values: hist.ready, cls: 's-ready', area: true, max: ready },
      { values: hist.puts, cls: 's-put', max: rate },
      { values: hist.reserves, cls: 's-reserve', max: rate },
    ],
    {
      width,
      height,
      title:
        `ready now ${num(newest(hist.ready) ?? 0)}, peak ${num(peak(hist.ready))} (chart top ${num(ready)}); ` +
        `puts/s now ${rateText(newest(hist.puts))}, peak ${rateText(peak(hist.puts))}; ` +
        `reserves/s now ${rateText(newest(hist.reserves))}, peak ${rateText(peak(hist.reserves))} ` +
        `(chart top ${rateText(rate)}/s); ${hist.step_s} s a point`,
    },
  );
  svg.dataset.scaleReady = String(ready);
  svg.dataset.scaleRate = String(rate);
  return svg;
}

function rateText(v) {
  return v === null || v === undefined ? '–' : String(Math.round(v * 100) / 100);
}

function card(title, value, ...rest) {
  return h('div', { class: 'card' }, h('div', { class: 'card-title' }, title), h('div', { class: 'card-value' }, value), ...rest);
}

function renderServer(el, s) {
  const hist = s.history;
  const mem = s.memory;
  const memPct = mem.limit ? Math.round((mem.used / mem.limit) * 1000) / 10 : 0;
  el.replaceChildren(
    card(
      'Server',
      h('span', {}, `stalkd ${s.version}`),
      h('div', { class: 'muted' }, `up ${duration(s.uptime_s)} · pid ${s.pid} · ${s.hostname}`),
      s.draining ? h('span', { class: 'badge paused' }, 'draining') : null,
    ),
    card(
      'Jobs',
      h(
        'span',
        { id: 'server-jobs' },
        `${num(s.jobs.ready)} ready · ${num(s.jobs.reserved)} reserved`,
      ),
      h('div', { class: 'muted' }, `${num(s.jobs.delayed)} delayed · ${num(s.jobs.buried)} buried · ${num(s.tubes)} tubes`),
      sparkline([{ values: hist.ready, cls: 's-ready', area: true }, { values: hist.buried, cls: 's-buried' }], {
        width: 220,
        height: 30,
        title: 'ready (area) and buried jobs, last 5 minutes',
      }),
    ),
    card(
      'Throughput',
      h('span', {}, `${rate(s.put_rate)} put/s · ${rate(s.reserve_rate)} reserve/s`),
      h('div', { class: 'muted' }, `${num(s.jobs.total)} jobs put since start`),
      sparkline([{ values: hist.puts, cls: 's-put' }, { values: hist.reserves, cls: 's-reserve' }], {
        width: 220,
        height: 30,
        title: 'puts and first reservations per second, last 5 minutes',
      }),
    ),
    card(
      'Connections',
      h('span', {}, num(s.connections.current)),
      h(
        'div',
        { class: 'muted' },
        `${num(s.connections.producers)} producers · ${num(s.connections.workers)} workers · ${num(s.connections.waiting)} waiting`,
      ),
    ),
    card(
      'Memory',
      h('span', {}, `${bytes(mem.used)} of ${bytes(mem.limit)}`),
      h('meter', { min: 0, max: mem.limit || 1, value: mem.used, high: (mem.limit || 1) * 0.8, title: `${memPct}%` }),
      h('div', { class: 'muted' }, `${memPct}% of --max-memory`),
    ),
    card(
      'Binlog',
      s.binlog.enabled
        ? h('span', {}, `${plural(s.binlog.files, 'file')} · ${bytes(s.binlog.live_bytes + s.binlog.dead_bytes)}`)
        : h('span', { class: 'muted' }, 'off (no -b)'),
      s.binlog.enabled
        ? h(
            'div',
            { class: 'muted' },
            `${bytes(s.binlog.live_bytes)} live · ${bytes(s.binlog.dead_bytes)} to compact · files of ${bytes(s.binlog.file_size)}`,
          )
        : null,
      s.binlog.failed ? h('span', { class: 'badge error' }, 'failed') : null,
    ),
    card(
      'Sync latency',
      s.sync.count
        ? h('span', {}, `${s.sync.mean_ms} ms mean · p99 ≤ ${s.sync.p99_ms} ms`)
        : h('span', { class: 'muted' }, 'no syncs'),
      h('div', { class: 'muted' }, `${plural(s.sync.count, 'sync')} in the last ${s.sync.window_s} s`),
    ),
  );
}

// ---------------------------------------------------------------------------- a tube

function tubeView(tube, params) {
  const state = {
    state: STATES.includes(params.get('state')) ? params.get('state') : 'ready',
    from: Math.max(1, parseInt(params.get('from'), 10) || 1),
    back: [],
    tube: null,
    next: 0,
  };
  const path = '/tube/' + enc(tube);
  const title = h('h1', {}, tube);
  const badges = h('span', { class: 'badges' });
  const cards = h('section', { class: 'cards', id: 'tube-stats' });
  const chart = h('div', { class: 'chart' });
  const actions = h('div', { class: 'actions', id: 'tube-actions' });
  const tabs = h('div', { class: 'tabs', role: 'tablist' });
  const summary = h('span', { class: 'muted', id: 'jobs-summary' });
  const table = h('div', { class: 'table-wrap' });
  const first = h('button', { type: 'button', id: 'jobs-first', class: 'secondary' }, '« First');
  const prev = h('button', { type: 'button', id: 'jobs-prev', class: 'secondary' }, '‹ Previous');
  const next = h('button', { type: 'button', id: 'jobs-next', class: 'secondary' }, 'Next ›');
  const missing = h('p', { class: 'missing', hidden: true });
  const body = h(
    'div',
    { class: 'tube-body' },
    h('div', { class: 'title-row' }, title, badges),
    cards,
    chart,
    actions,
    h('section', { class: 'jobs', 'aria-label': 'jobs' }, tabs, h('div', { class: 'toolbar' }, summary), table, h('div', { class: 'pager' }, first, prev, next)),
  );
  const el = h('div', { class: 'tube' }, missing, body);

  function sync() {
    setQuery(path, { state: state.state === 'ready' ? '' : state.state, from: state.from === 1 ? '' : state.from });
  }
  first.addEventListener('click', () => {
    state.from = 1;
    state.back = [];
    sync();
    refreshNow();
  });
  prev.addEventListener('click', () => {
    state.from = state.back.pop() || 1;
    sync();
    refreshNow();
  });
  next.addEventListener('click', () => {
    if (!state.next) return;
    state.back.push(state.from);
    state.from = state.next;
    sync();
    refreshNow();
  });

  function actionButton(id, label, onclick, cls = 'secondary') {
    return h('button', { type: 'button', id, class: cls, onclick }, label);
  }

  function renderActions(t) {
    const kickDefault = t.buried || t.delayed || 1;
    actions.replaceChildren(
      actionButton('kick', 'Kick…', () =>
        act(
          {
            title: `Kick jobs of ${tube}`,
            message: `Moves up to this many buried jobs back to ready; if the tube has no buried jobs, delayed ones (as beanstalkd's kick). Buried now: ${num(t.buried)}, delayed: ${num(t.delayed)}.`,
            fields: [{ name: 'count', label: 'How many', type: 'number', min: 1, value: kickDefault, required: true }],
            confirm: 'Kick',
          },
          (v) => api(`tubes/${enc(tube)}/kick`, { method: 'POST', params: { count: v.count } }),
          (r) => `Kicked ${plural(r.kicked, 'job')}`,
        ),
      ),
      t.paused
        ? actionButton('resume', 'Resume', () =>
            act(
              { title: `Resume ${tube}?`, message: 'Workers get its jobs again at once.', confirm: 'Resume' },
              () => api(`tubes/${enc(tube)}/pause`, { method: 'POST', params: { seconds: 0 } }),
              () => `Resumed ${tube}`,
            ),
          )
        : actionButton('pause', 'Pause…', () =>
            act(
              {
                title: `Pause ${tube}`,
                message: 'No job of the tube is reserved until the pause ends (as pause-tube).',
                fields: [{ name: 'seconds', label: 'Seconds', type: 'number', min: 1, value: 60, required: true }],
                confirm: 'Pause',
              },
              (v) => api(`tubes/${enc(tube)}/pause`, { method: 'POST', params: { seconds: v.seconds } }),
              (r) => `Paused ${tube} for ${duration(r.seconds)}`,
            ),
          ),
      actionButton('respawn', 'Respawn dead letters…', () =>
        act(
          {
            title: `Respawn dead letters of ${tube}`,
            message: `Kicks buried jobs back to ready, oldest burial first, each with one try left (as lmstfy's respawn). Buried now: ${num(t.buried)}.`,
            fields: [
              { name: 'count', label: 'How many', type: 'number', min: 1, value: t.buried || 1, required: true },
              { name: 'ttl', label: 'TTL in seconds (0: none)', type: 'number', min: 0, value: 0, required: true },
            ],
            confirm: 'Respawn',
          },
          (v) => api(`tubes/${enc(tube)}/respawn`, { method: 'POST', params: { count: v.count, ttl: v.ttl } }),
          (r) => `Respawned ${plural(r.respawned, 'job')}`,
        ),
      ),
      actionButton('move', 'Move…', () =>
        act(
          {
            title: `Move jobs of ${tube}`,
            message:
              'Each job is put into the other tube (same body, priority, TTR, remaining delay, tries and TTL; a buried job arrives ready) and deleted here. It gets a new id. Reserved jobs cannot be moved.',
            fields: [
              { name: 'state', label: 'Jobs that are', options: ['ready', 'delayed', 'buried'], value: state.state === 'reserved' ? 'ready' : state.state },
              { name: 'to', label: 'To tube', required: true, placeholder: 'tube name' },
              { name: 'count', label: 'How many', type: 'number', min: 1, value: 100, required: true },
            ],
            confirm: 'Move',
          },
          (v) => api(`tubes/${enc(tube)}/move`, { method: 'POST', params: v }),
          (r, v) => `Moved ${plural(r.moved, 'job')} to ${v.to}` + (r.failed ? `; ${num(r.failed)} not moved: ${r.error}` : ''),
        ),
      ),
      actionButton(
        'purge',
        'Purge…',
        () =>
          act(
            {
              title: `Purge ${tube}`,
              message: 'Deletes every job of the tube in this state. Reserved jobs are never purged. This cannot be undone.',
              fields: [{ name: 'state', label: 'Jobs that are', options: ['ready', 'delayed', 'buried', 'all'], value: 'all' }],
              confirm: 'Purge',
              danger: true,
            },
            (v) => api(`tubes/${enc(tube)}/purge`, { method: 'POST', params: { state: v.state } }),
            (r) => `Purged ${plural(r.purged, 'job')}`,
          ),
        'danger',
      ),
      ...deadLetterActions(tube, t, act),
      putLink(tube),
      searchLink(tube),
    );
  }

  function renderTube(t, oldest) {
    state.tube = t;
    badges.replaceChildren(
      t.paused ? h('span', { class: 'badge paused', id: 'paused-badge' }, `paused · ${duration(t.pause_left_s)} left`) : '',
      queueBadge(tube) || '',
    );
    cards.replaceChildren(
      card('Ready', h('span', { dataset: { stat: 'ready' } }, num(t.ready)), h('div', { class: 'muted' }, `${num(t.urgent)} urgent`)),
      card('Reserved', h('span', { dataset: { stat: 'reserved' } }, num(t.reserved))),
      card('Delayed', h('span', { dataset: { stat: 'delayed' } }, num(t.delayed))),
      card(stateLabel(tube, 'buried'), h('span', { dataset: { stat: 'buried' }, class: t.buried ? 'warn' : '' }, num(t.buried)), h('div', { class: 'muted' }, `${num(t.tries_exhausted)} ran out of tries`)),
      card('Clients', h('span', {}, `${num(t.waiting)} waiting`), h('div', { class: 'muted' }, `${num(t.using)} using · ${num(t.watching)} watching`)),
      card('Rates', h('span', {}, `${rate(t.put_rate)} put/s · ${rate(t.reserve_rate)} reserve/s`), h('div', { class: 'muted' }, `${num(t.total_jobs)} put · ${num(t.deletes)} deleted · ${num(t.expired)} expired`)),
      card(
        'Ready age',
        h('span', { title: 'age of the next ready job, the one a reserve would take' }, t.next_ready_age_s === null ? '–' : duration(t.next_ready_age_s)),
        h(
          'div',
          { class: 'muted' },
          t.next_ready_id ? h('a', { href: `#/job/${t.next_ready_id}` }, `next: job ${t.next_ready_id}`) : 'nothing ready',
          // The Ready tab from its start lists the oldest put first: the exact oldest.
          oldest && oldest.id !== t.next_ready_id
            ? [' · ', h('a', { href: `#/job/${oldest.id}`, id: 'oldest-ready' }, `oldest: job ${oldest.id}, ${duration(oldest.age_s)}`)]
            : null,
        ),
      ),
      card('Default tries', h('span', {}, t.default_tries ? num(t.default_tries) : 'unlimited')),
    );
    chart.replaceChildren(
      t.history
        ? h(
            'figure',
            {},
            tubeSpark(t.history, 600, 70),
            h(
              'figcaption',
              { class: 'muted', id: 'tube-chart-caption' },
              h('span', { class: 'key s-ready' }, `ready ${num(newest(t.history.ready) ?? 0)} (peak ${num(peak(t.history.ready))})`),
              ' ',
              h('span', { class: 'key s-put' }, `puts/s ${rateText(newest(t.history.puts))} (peak ${rateText(peak(t.history.puts))})`),
              ' ',
              h('span', { class: 'key s-reserve' }, `reserves/s ${rateText(newest(t.history.reserves))} (peak ${rateText(peak(t.history.reserves))})`),
              ` · top of the chart: ${num(peak(t.history.ready))} ready, ${rateText(peak(t.history.puts, t.history.reserves))}/s · last 5 minutes`,
            ),
          )
        : h('p', { class: 'muted' }, 'No history yet.'),
    );
    renderActions(t);
    tabs.replaceChildren(
      ...STATES.map((s) =>
        h(
          'button',
          {
            type: 'button',
            role: 'tab',
            class: s === state.state ? 'tab active' : 'tab',
            'aria-selected': s === state.state ? 'true' : 'false',
            dataset: { state: s },
            onclick: () => {
              state.state = s;
              state.from = 1;
              state.back = [];
              sync();
              refreshNow();
            },
          },
          `${stateLabel(tube, s)} `,
          h('span', { class: 'count' }, num(t[s])),
        ),
      ),
    );
  }

  function jobActions(j) {
    const out = [];
    if (j.state === 'buried' || j.state === 'delayed') {
      out.push(
        h('button', {
          type: 'button',
          class: 'small secondary',
          dataset: { action: 'kick' },
          onclick: () => kickJob(j),
        }, kickLabel(j.tube, j.state)),
      );
    }
    if (j.state !== 'reserved') {
      out.push(
        h('button', {
          type: 'button',
          class: 'small secondary',
          dataset: { action: 'move' },
          onclick: () => moveJob(j),
        }, 'Move'),
      );
    }
    // A worker's reservation is its worker's; a detached one anyone may delete.
    if (j.state !== 'reserved' || j.detached) {
      out.push(
        h('button', {
          type: 'button',
          class: 'small danger',
          dataset: { action: 'delete' },
          onclick: () => deleteJob(j),
        }, 'Delete'),
      );
    }
    return out;
  }

  function renderJobs(list) {
    state.next = list.next;
    const shown = list.jobs.length;
    summary.textContent = `${num(shown)} shown of ${plural(list.count, stateName(tube, list.state) === list.state ? list.state + ' job' : stateName(tube, list.state))}, by id` + (state.from > 1 ? ` from ${state.from}` : '');
    first.disabled = state.from === 1;
    prev.disabled = state.back.length === 0 && state.from === 1;
    next.disabled = !list.next;
    const timed = list.state === 'delayed' || list.state === 'reserved';
    const rows = list.jobs.map((j) =>
      h(
        'tr',
        { dataset: { job: String(j.id) } },
        h('th', { scope: 'row' }, h('a', { href: `#/job/${j.id}` }, String(j.id))),
        h('td', { class: 'n', title: priority(tube, j.pri).title }, priority(tube, j.pri).text),
        h('td', { class: 'n' }, duration(j.age_s)),
        h('td', { class: 'n opt' }, timed ? duration(j.time_left_s) : '–'),
        h('td', { class: 'n opt' }, duration(j.ttr_s)),
        h('td', { class: 'n opt' }, j.tries_left === null ? '∞' : num(j.tries_left)),
        h('td', { class: 'n opt' }, j.ttl_left_s === null ? '–' : duration(j.ttl_left_s)),
        h('td', { class: 'n opt' }, num(j.reserves)),
        list.state === 'buried' ? h('td', { class: 'opt' }, buryReason(tube, j.bury_reason)) : null,
        h('td', { class: 'n opt' }, bytes(j.body_size)),
        h('td', { class: 'preview' }, preview(j.preview, j.body_size)),
        h('td', { class: 'row-actions' }, h('div', { class: 'row-buttons' }, jobActions(j))),
      ),
    );
    const cols = list.state === 'buried' ? 12 : 11;
    table.replaceChildren(
      h(
        'table',
        { id: 'jobs-table' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', { scope: 'col' }, 'Id'),
            h('th', { class: 'n', scope: 'col', title: priorityColumn(tube).title }, priorityColumn(tube).text),
            h('th', { class: 'n', scope: 'col' }, 'Age'),
            h('th', { class: 'n opt', scope: 'col' }, list.state === 'delayed' ? 'Delay left' : 'TTR left'),
            h('th', { class: 'n opt', scope: 'col' }, 'TTR'),
            h('th', { class: 'n opt', scope: 'col' }, 'Tries left'),
            h('th', { class: 'n opt', scope: 'col' }, 'TTL left'),
            h('th', { class: 'n opt', scope: 'col' }, 'Reserves'),
            list.state === 'buried' ? h('th', { class: 'opt', scope: 'col' }, 'Why') : null,
            h('th', { class: 'n opt', scope: 'col' }, 'Size'),
            h('th', { scope: 'col' }, 'Body'),
            h('th', { scope: 'col' }, ''),
          ),
        ),
        h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: cols, class: 'empty' }, `No ${list.state} jobs here.`))),
      ),
    );
  }

  async function refresh() {
    const [t, list] = await Promise.all([
      api(`tubes/${enc(tube)}`, { params: { step: 2 } }),
      api(`tubes/${enc(tube)}/jobs`, { params: { state: state.state, from: state.from, limit: PAGE } }),
    ]);
    missing.hidden = true;
    body.hidden = false;
    const oldest = list.state === 'ready' && state.from === 1 && list.jobs.length ? list.jobs[0] : null;
    renderTube(t, oldest);
    renderJobs(list);
  }

  function onError(e) {
    if (e.status !== 404) return false;
    missing.replaceChildren(
      `Tube “${tube}” does not exist now: a tube exists while it holds jobs or a client uses or watches it. `,
      h('a', { href: '#/' }, 'Back to the overview'),
    );
    missing.hidden = false;
    body.hidden = true;
    return true;
  }

  return {
    el,
    refresh,
    onError,
    title: tube,
    crumbs: [h('a', { href: '#/' }, 'Overview'), h('span', {}, ' / '), h('span', {}, tube)],
  };
}

// ---------------------------------------------------------------------------- job actions

function kickJob(j) {
  // A dead letter of an lmstfy queue is respawned (lmstfy.js); the rest kicked.
  const label = kickLabel(j.tube, j.state);
  const what = label === 'Kick' ? `${j.state} job` : 'dead letter, with one try,';
  return act(
    { title: `${label} job ${j.id}?`, message: `The ${what} becomes ready.`, confirm: label },
    () => api(`jobs/${j.id}/kick`, { method: 'POST' }),
    () => `${label === 'Kick' ? 'Kicked' : 'Respawned'} job ${j.id}`,
  );
}

// `after(answer)`: what to do once moved (the job page goes to the new job).
function moveJob(j, after) {
  return act(
    {
      title: `Move job ${j.id}`,
      message:
        'The job is put into the other tube (same body, priority, TTR, remaining delay, tries and TTL; a buried job arrives ready) and deleted here. It gets a new id.',
      fields: [{ name: 'to', label: 'To tube', required: true, placeholder: 'tube name' }],
      confirm: 'Move',
    },
    (v) => api(`jobs/${j.id}/move`, { method: 'POST', params: { to: v.to } }),
    (r) => {
      if (after) after(r);
      return `Moved job ${r.id} to ${r.tube} as job ${r.new_id}`;
    },
  );
}

function deleteJob(j, after) {
  return act(
    {
      title: `Delete job ${j.id}?`,
      message: `The ${j.state} job of ${j.tube} is deleted. This cannot be undone.`,
      confirm: 'Delete',
      danger: true,
    },
    () => api(`jobs/${j.id}`, { method: 'DELETE' }),
    () => {
      if (after) after();
      return `Deleted job ${j.id}`;
    },
  );
}

// ---------------------------------------------------------------------------- a job

function jobView(id) {
  const fields = h('dl', { class: 'fields', id: 'job-fields' });
  const actions = h('div', { class: 'actions', id: 'job-actions' });
  const viewer = h('section', { class: 'body-viewer', 'aria-label': 'body' });
  const missing = h('p', { class: 'missing', hidden: true });
  const content = h('div', {}, h('h1', {}, `Job ${id}`), fields, actions, viewer);
  const el = h('div', { class: 'job' }, missing, content);
  let shownBody = false;
  let crumbTube = null;

  function field(label, value) {
    return [h('dt', {}, label), h('dd', { dataset: { field: label } }, value)];
  }

  function renderBody(j) {
    const data = fromBase64(j.body);
    const json = prettyJson(data);
    const modes = [
      ['text', 'Text', () => asText(data)],
      ['hex', 'Hex', () => hexDump(data)],
      ['json', 'JSON', () => json],
    ];
    const pre = h('pre', { class: 'body', id: 'job-body', tabindex: 0 });
    const tabs = h('div', { class: 'tabs', role: 'tablist' });
    let mode = json !== null ? 'json' : isText(data) ? 'text' : 'hex';
    function show() {
      for (const b of tabs.children) {
        const on = b.dataset.mode === mode;
        b.className = on ? 'tab active' : 'tab';
        b.setAttribute('aria-selected', on ? 'true' : 'false');
      }
      pre.textContent = modes.find((m) => m[0] === mode)[2]();
    }
    for (const [m, label] of modes) {
      tabs.append(
        h('button', {
          type: 'button',
          role: 'tab',
          dataset: { mode: m },
          disabled: m === 'json' && json === null,
          title: m === 'json' && json === null ? 'the body is not JSON' : '',
          onclick: () => {
            mode = m;
            show();
          },
        }, label),
      );
    }
    show();
    viewer.replaceChildren(
      h(
        'div',
        { class: 'toolbar' },
        h('h2', {}, 'Body'),
        tabs,
        h('span', { class: 'muted' }, `${bytes(j.body_size)}` + (j.body_truncated ? ` (the first ${bytes(data.length)} shown)` : '')),
        h('a', { href: `/dashboard/api/jobs/${j.id}/body`, download: `job-${j.id}.bin`, class: 'button secondary' }, 'Download'),
      ),
      pre,
    );
  }

  async function refresh() {
    const j = await api(`jobs/${enc(id)}`);
    missing.hidden = true;
    content.hidden = false;
    if (crumbTube !== j.tube) {
      crumbTube = j.tube;
      crumbs.replaceChildren(
        h('a', { href: '#/' }, 'Overview'),
        h('span', {}, ' / '),
        h('a', { href: tubeHref(j.tube) }, j.tube),
        h('span', {}, ` / job ${id}`),
      );
    }
    const timed = j.state === 'delayed' || j.state === 'reserved';
    fields.replaceChildren(
      ...field('Tube', h('a', { href: tubeHref(j.tube) }, j.tube)),
      ...field('State', h('span', { class: `badge state-${j.state}` }, stateName(j.tube, j.state))),
      ...(j.state === 'reserved'
        ? field('Reserved by', j.detached ? 'no connection (detached: an HTTP consume or reserve-ext detached)' : 'a worker\'s connection')
        : []),
      ...field('Priority', priorityDetail(j.tube, j.pri)),
      ...field('Age', `${duration(j.age_s)} (${num(j.age_ms)} ms)`),
      ...field('Delay', duration(j.delay_s)),
      ...field('TTR', duration(j.ttr_s)),
      ...field(j.state === 'delayed' ? 'Delay left' : 'TTR left', timed ? duration(j.time_left_s) : '–'),
      ...field('Tries left', j.tries_left === null ? 'unlimited' : num(j.tries_left)),
      ...field('TTL left', j.ttl_left_s === null ? 'none' : duration(j.ttl_left_s)),
      // A job without the extensions is buried only by the bury command.
      ...(j.state === 'buried' ? field('Bury reason', buryReason(j.tube, j.bury_reason)) : []),
      ...(j.key !== null ? field('Key', j.key) : []),
      ...field('Reserves', num(j.reserves)),
      ...field('Timeouts', num(j.timeouts)),
      ...field('Releases', num(j.releases)),
      ...field('Buries', num(j.buries)),
      ...field('Kicks', num(j.kicks)),
      ...field('Binlog file', j.file ? String(j.file) : '–'),
      ...Object.entries(j.attributes).flatMap(([k, v]) => field(`attr.${k}`, v)),
    );
    const acts = [];
    if (j.state === 'buried' || j.state === 'delayed') {
      acts.push(
        h('button', {
          type: 'button',
          id: 'job-kick',
          class: 'secondary',
          onclick: () => kickJob(j),
        }, kickLabel(j.tube, j.state)),
      );
    }
    if (j.state !== 'reserved') {
      acts.push(
        h('button', {
          type: 'button',
          id: 'job-move',
          class: 'secondary',
          onclick: () => moveJob(j, (r) => (location.hash = `#/job/${r.new_id}`)),
        }, 'Move…'),
      );
    }
    acts.push(copyLink(j.id));
    if (j.state !== 'reserved' || j.detached) {
      acts.push(
        h('button', {
          type: 'button',
          id: 'job-delete',
          class: 'danger',
          onclick: () => deleteJob(j, () => (location.hash = tubeHref(j.tube))),
        }, 'Delete'),
      );
    }
    if (j.state === 'reserved') {
      acts.push(h('span', { class: 'muted', id: 'job-reserved-note' }, j.detached
        ? 'A detached reservation: no worker\'s connection holds it, so it can be deleted here; it cannot be kicked or moved.'
        : 'Reserved by a worker: it cannot be kicked, moved or deleted from here.'));
    }
    actions.replaceChildren(...acts);
    if (!shownBody) {
      shownBody = true;
      renderBody(j);
    }
  }

  function onError(e) {
    if (e.status !== 404) return false;
    missing.replaceChildren(
      `Job ${id} does not exist (deleted, expired or never put). `,
      crumbTube ? h('a', { href: tubeHref(crumbTube) }, `Back to ${crumbTube}`) : h('a', { href: '#/' }, 'Back to the overview'),
    );
    missing.hidden = false;
    content.hidden = true;
    return true;
  }

  return {
    el,
    refresh,
    onError,
    title: `Job ${id}`,
    crumbs: [h('a', { href: '#/' }, 'Overview'), h('span', {}, ` / job ${id}`)],
  };
}

render();
