// stalkd dashboard: lmstfy's view of the tubes (docs/DASHBOARD.md, "lmstfy's view").
// lmstfy's queue q of namespace ns is the tube "ns/q" (docs/HTTP.md): here are the names
// lmstfy gives what the views (app.js) show: namespaces as a tree of their queues, buried
// jobs as dead letters, and lmstfy's priority beside beanstalkd's pri.
import { api, enc, h, num, plural } from './util.js';

// A name of lmstfy's ([-_A-Za-z0-9]+); a queue may not start with "_".
const NAME = /^[-_A-Za-z0-9]+$/;

// The namespace and queue of an lmstfy tube ("ns/q"), or null for a plain beanstalkd tube.
export function lmstfyQueue(tube) {
  const slash = tube.indexOf('/');
  if (slash < 0) return null;
  const ns = tube.slice(0, slash);
  const queue = tube.slice(slash + 1);
  if (!NAME.test(ns) || !NAME.test(queue) || queue.startsWith('_')) return null;
  return { ns, queue };
}

// ---------------------------------------------------------------------------- wording

// A state's name on a tab or badge: lmstfy calls a queue's buried jobs its dead letters.
export function stateLabel(tube, state) {
  if (state === 'buried' && lmstfyQueue(tube)) return 'Dead letters';
  return state[0].toUpperCase() + state.slice(1);
}

// A job's state on its page: a buried job of an lmstfy queue is a dead letter.
export function stateName(tube, state) {
  return state === 'buried' && lmstfyQueue(tube) ? 'dead letter' : state;
}

// A buried or delayed job's Kick: on an lmstfy queue a dead letter is respawned (kick-job
// gives it a try, as lmstfy's respawn does).
export function kickLabel(tube, state) {
  return state === 'buried' && lmstfyQueue(tube) ? 'Respawn' : 'Kick';
}

// Why a job is buried, in lmstfy's words on an lmstfy queue: a job that ran out of tries
// (at a TTR timeout or a release) is a dead letter; `bury` is a beanstalkd client's.
export function buryReason(tube, reason) {
  if (!lmstfyQueue(tube)) return reason || 'bury';
  if (reason === 'timeout' || reason === 'release') return `retries exhausted (${reason})`;
  return 'buried by a bury command';
}

// lmstfy's priority of a job of an lmstfy queue: a publish with priority p (0..255, higher
// first) puts the job with beanstalkd pri 255 − p (lower first; api_publish.cc). A pri
// above 255 (a put over the text protocol) has no lmstfy priority: it comes after all.
// {text, title}: what to show, and what the hover says.
export function priority(tube, pri) {
  if (!lmstfyQueue(tube)) return { text: String(pri), title: `beanstalkd pri ${pri} (lower first)` };
  if (pri <= 255) {
    return { text: String(255 - pri), title: `lmstfy priority ${255 - pri} (higher first) = beanstalkd pri ${pri}` };
  }
  return {
    text: `pri ${num(pri)}`,
    title: `beanstalkd pri ${pri}: no lmstfy priority (put over the text protocol), consumed after every published job`,
  };
}

// The jobs table's priority column: lmstfy's on an lmstfy queue (the pri on hover).
export function priorityColumn(tube) {
  return lmstfyQueue(tube)
    ? { text: 'Priority', title: "lmstfy's priority, higher first (hover a value for beanstalkd's pri)" }
    : { text: 'Pri', title: "beanstalkd's priority, lower first" };
}

// A job page's priority: lmstfy's and the pri it maps to, on an lmstfy queue.
export function priorityDetail(tube, pri) {
  if (!lmstfyQueue(tube)) return String(pri);
  if (pri <= 255) return `${255 - pri} (lmstfy priority) · beanstalkd pri ${pri}`;
  return `none (lmstfy) · beanstalkd pri ${pri}, after every published job`;
}

// A tube page's lmstfy badge: which queue of which namespace, and its tokens.
export function queueBadge(tube) {
  const q = lmstfyQueue(tube);
  if (!q) return null;
  return h(
    'span',
    { class: 'badge lmstfy', id: 'lmstfy-badge', title: 'reached over the HTTP API as /api/' + q.ns + '/' + q.queue },
    `lmstfy queue ${q.queue} of `,
    h('a', { href: `#/tokens/${enc(q.ns)}` }, q.ns),
  );
}

// The dead-letter actions of an lmstfy queue's page, as lmstfy names them: respawn (kick
// with one try and a TTL) and delete. `act` runs a confirmed action (app.js).
export function deadLetterActions(tube, t, act) {
  if (!lmstfyQueue(tube)) return [];
  return [
    h(
      'button',
      {
        type: 'button',
        id: 'delete-dead',
        class: 'danger',
        onclick: () =>
          act(
            {
              title: `Delete dead letters of ${tube}`,
              message: `Deletes up to this many dead letters, the oldest first (as lmstfy's DELETE /api/…/deadletter?limit=). Dead letters now: ${num(t.buried)}. This cannot be undone.`,
              fields: [{ name: 'count', label: 'How many', type: 'number', min: 1, value: t.buried || 1, required: true }],
              confirm: 'Delete dead letters',
              danger: true,
            },
            (v) => api(`tubes/${enc(tube)}/delete-dead`, { method: 'POST', params: { count: v.count } }),
            (r) => `Deleted ${plural(r.deleted, 'dead letter')}`,
          ),
      },
      'Delete dead letters…',
    ),
  ];
}

// ---------------------------------------------------------------------------- the tree

// Reads the grouped tube list: a page of namespaces and plain tubes (GET namespaces), and
// for each open namespace of the page the first `PAGE` of its queues (GET tubes with its
// prefix, in the list's sort). `list`: {q, sort, order, offset, limit}; `open`: a Set.
export async function loadTree(list, open, page) {
  const groups = await api('namespaces', {
    params: { q: list.q, order: list.order, offset: list.offset, limit: list.limit },
  });
  const queues = new Map();
  await Promise.all(
    groups.rows
      .filter((r) => r.kind === 'namespace' && open.has(r.namespace))
      .map(async (r) => {
        queues.set(
          r.namespace,
          await api('tubes', {
            params: { prefix: r.namespace + '/', q: list.q, sort: list.sort, order: list.queueOrder, limit: page },
          }),
        );
      }),
  );
  return { groups, queues };
}

// The tree's table rows: a namespace's row (its totals; a button opens it), then, open,
// its queues' rows (`tubeRow(r, scale, label)` of app.js, labelled by queue); a plain
// tube's row as in the flat list. `toggle(ns)` opens or closes a namespace.
export function treeRows({ groups, queues }, open, tubeRow, scale, toggle) {
  const rows = [];
  for (const g of groups.rows) {
    if (g.kind === 'tube') {
      rows.push(tubeRow(g.tube, scale));
      continue;
    }
    const ns = g.namespace;
    const isOpen = open.has(ns);
    rows.push(
      h(
        'tr',
        { class: 'ns-row', dataset: { namespace: ns } },
        h(
          'th',
          { scope: 'row', class: 'name' },
          h(
            'button',
            {
              type: 'button',
              class: 'ns-toggle',
              'aria-expanded': isOpen ? 'true' : 'false',
              title: isOpen ? 'close' : 'show its queues',
              onclick: () => toggle(ns),
            },
            isOpen ? '▾ ' : '▸ ',
            ns,
          ),
          ' ',
          h('span', { class: 'muted ns-count' }, plural(g.queues, 'queue')),
          ' ',
          h('a', { href: `#/tokens/${enc(ns)}`, class: 'ns-tokens', title: `tokens of ${ns}` }, 'tokens'),
        ),
        h('td', { class: 'n', dataset: { col: 'ready' } }, num(g.ready)),
        h('td', { class: 'n', dataset: { col: 'reserved' } }, num(g.reserved)),
        h('td', { class: 'n opt', dataset: { col: 'delayed' } }, num(g.delayed)),
        h('td', { class: g.buried ? 'n warn' : 'n', dataset: { col: 'buried' }, title: 'dead letters of its queues' }, num(g.buried)),
        h('td', { class: 'n opt', dataset: { col: 'waiting' } }, num(g.waiting)),
        h('td', { class: 'opt', dataset: { col: 'paused' } }, g.paused ? h('span', { class: 'badge paused' }, `${num(g.paused)} paused`) : ''),
        h('td', { class: 'opt', colspan: 4 }, h('span', { class: 'muted' }, `${num(g.total_jobs)} put · ${num(g.tries_exhausted)} ran out of tries`)),
      ),
    );
    const list = isOpen ? queues.get(ns) : null;
    if (!list) continue;
    for (const r of list.tubes) {
      const row = tubeRow(r, scale, lmstfyQueue(r.name) ? lmstfyQueue(r.name).queue : r.name);
      row.classList.add('ns-queue');
      rows.push(row);
    }
    if (list.matched > list.tubes.length) {
      rows.push(
        h(
          'tr',
          { class: 'ns-queue ns-more' },
          h(
            'td',
            { colspan: 11, class: 'muted' },
            `${num(list.tubes.length)} of ${plural(list.matched, 'queue')} shown: `,
            h('a', { href: `#/?q=${enc(ns + '/')}` }, 'all of them in the tube list'),
          ),
        ),
      );
    }
  }
  return rows;
}
