// stalkd dashboard: lmstfy's tokens of a namespace and their rate limits (docs/DASHBOARD.md,
// "Tokens"), through the admin listener's own lmstfy routes (docs/HTTP.md, section 5):
//   GET /token/:ns                  the tokens' ids and descriptions (never a secret)
//   POST /token/:ns                 a new token, whose secret is shown once
//   DELETE /token/:ns/:id           a token, and its limit
//   GET /limits                     every limit (those of the namespace are shown)
//   PUT|DELETE /token/:ns/:id/limit a token's limit
// They sit behind the same basic auth as the dashboard, which the browser sends, and so
// would send for another site's page too: what stops such a page is the server, which
// refuses a changing request (POST, PUT, DELETE) whose Origin is not this listener's host
// or whose Sec-Fetch-Site is cross-site or same-site (docs/HTTP.md, section 5).
import { ApiError, enc, h, num, plural } from './util.js';

const NAMESPACE = /^[-_A-Za-z0-9]+$/;

// One request to an admin route: a form (`form`) or JSON (`json`) body; the JSON answer,
// or null for 204. lmstfy's errors are {"error": text}. X-Requested-With is sent as on the
// dashboard's own changing requests, though these routes do not check it (lmstfy's
// clients do not send it); the browser's Origin and Sec-Fetch-Site headers are what the
// server checks.
async function admin(method, path, { form, json } = {}) {
  const init = {
    method,
    headers: { Accept: 'application/json', 'X-Requested-With': 'stalkd-dashboard' },
    credentials: 'same-origin',
    cache: 'no-store',
  };
  if (form) init.body = new URLSearchParams(form);
  if (json) {
    init.body = JSON.stringify(json);
    init.headers['Content-Type'] = 'application/json';
  }
  const res = await fetch(path, init);
  const answer = res.status === 204 ? null : await res.json().catch(() => null);
  if (!res.ok) throw new ApiError(res.status, (answer && (answer.error || answer.msg)) || `HTTP ${res.status}`);
  return answer;
}

function limitText(l) {
  if (!l) return 'none';
  const side = (n, what) => (n > 0 ? `${num(n)} ${what}` : `${what} unlimited`);
  return `${side(l.read, 'consumes')} · ${side(l.write, 'publishes')} per ${plural(l.interval, 'second')}`;
}

// The view: `ns` from the address (#/tokens/<ns>); `act` runs a confirmed action (app.js).
export function tokensView(ns, { act }) {
  const input = h('input', {
    type: 'text',
    id: 'token-ns',
    value: ns,
    placeholder: 'namespace',
    'aria-label': 'namespace',
    autocomplete: 'off',
    pattern: '[-_A-Za-z0-9]+',
    required: true,
  });
  const form = h(
    'form',
    {
      class: 'toolbar',
      id: 'token-ns-form',
      onsubmit: (e) => {
        e.preventDefault();
        const v = input.value.trim();
        if (NAMESPACE.test(v)) location.hash = `#/tokens/${enc(v)}`;
      },
    },
    h('h2', {}, 'Tokens of'),
    input,
    h('button', { type: 'submit', class: 'secondary' }, 'Show'),
  );
  const secret = h('section', { id: 'token-secret', class: 'secret', hidden: true, 'aria-live': 'polite' });
  const create = h('button', { type: 'button', id: 'token-create', class: 'primary', hidden: !ns }, 'New token…');
  const summary = h('span', { class: 'muted', id: 'tokens-summary' });
  const table = h('div', { class: 'table-wrap' });
  const el = h(
    'div',
    { class: 'tokens' },
    h('h1', {}, 'lmstfy tokens'),
    h(
      'p',
      { class: 'muted' },
      'A token lets an lmstfy client use the queues of its namespace over the HTTP API; ',
      'a token may have a rate limit of consumes and publishes per interval. ',
      'Only a new token’s secret is shown, once: the server keeps its hash.',
    ),
    h('section', { class: 'jobs', 'aria-label': 'tokens' }, form, h('div', { class: 'actions' }, create, summary), secret, table),
  );

  create.addEventListener('click', () =>
    act(
      {
        title: `New token of ${ns}`,
        message: 'Its secret is shown once, after it is made: copy it then.',
        fields: [{ name: 'description', label: 'Description', required: true, placeholder: 'who uses it' }],
        confirm: 'Create',
      },
      (v) => admin('POST', `/token/${enc(ns)}`, { form: { description: v.description } }),
      (r) => {
        showSecret(r.token);
        return `Created token ${r.token.split('.')[0]}`;
      },
    ),
  );

  function showSecret(token) {
    const field = h('input', { type: 'text', id: 'token-secret-value', readonly: true, value: token, 'aria-label': 'the new token' });
    secret.replaceChildren(
      h('strong', {}, 'The new token, shown only now:'),
      field,
      h('button', {
        type: 'button',
        class: 'secondary',
        onclick: () => {
          field.select();
          if (navigator.clipboard) navigator.clipboard.writeText(token).catch(() => {});
        },
      }, 'Copy'),
      h('button', {
        type: 'button',
        class: 'secondary',
        id: 'token-secret-done',
        onclick: () => {
          secret.replaceChildren();
          secret.hidden = true;
        },
      }, 'Done'),
    );
    secret.hidden = false;
  }

  function setLimit(id, l) {
    return act(
      {
        title: `Rate limit of token ${id}`,
        message: 'At most this many consumes (read) and publishes (write) per interval; 0: no limit on that side (not both).',
        fields: [
          { name: 'read', label: 'Consumes (read)', type: 'number', min: 0, value: l ? l.read : 0, required: true },
          { name: 'write', label: 'Publishes (write)', type: 'number', min: 0, value: l ? l.write : 0, required: true },
          { name: 'interval', label: 'Interval in seconds', type: 'number', min: 1, value: l ? l.interval : 1, required: true },
        ],
        confirm: 'Set',
      },
      (v) =>
        admin('PUT', `/token/${enc(ns)}/${enc(id)}/limit`, {
          json: { read: Number(v.read), write: Number(v.write), interval: Number(v.interval) },
        }),
      (r) => `Token ${id}: ${limitText(r.limiter)}`,
    );
  }

  function removeLimit(id) {
    return act(
      { title: `Remove the rate limit of token ${id}?`, message: 'The token is then unlimited.', confirm: 'Remove' },
      () => admin('DELETE', `/token/${enc(ns)}/${enc(id)}/limit`),
      () => `Token ${id} is unlimited`,
    );
  }

  function remove(id, description) {
    return act(
      {
        title: `Delete token ${id}?`,
        message: `“${description}” stops working at its next request; its rate limit goes with it. This cannot be undone.`,
        confirm: 'Delete',
        danger: true,
      },
      () => admin('DELETE', `/token/${enc(ns)}/${enc(id)}`),
      () => `Deleted token ${id}`,
    );
  }

  async function refresh() {
    if (!ns) {
      summary.textContent = 'Name a namespace to see its tokens.';
      table.replaceChildren();
      return;
    }
    if (!NAMESPACE.test(ns)) {
      summary.textContent = 'A namespace is made of letters, digits, - and _.';
      return;
    }
    const [list, limits] = await Promise.all([admin('GET', `/token/${enc(ns)}`), admin('GET', '/limits')]);
    const byId = new Map(limits.filter((l) => l.namespace === ns).map((l) => [l.token, l.limiter]));
    const tokens = Object.entries(list.tokens);
    summary.textContent = plural(tokens.length, 'token');
    const rows = tokens.map(([id, description]) => {
      const l = byId.get(id);
      return h(
        'tr',
        { dataset: { token: id } },
        h('th', { scope: 'row', class: 'mono' }, id),
        h('td', { class: 'desc' }, description),
        h('td', { dataset: { col: 'limit' }, class: 'limit' }, limitText(l)),
        h(
          'td',
          { class: 'row-actions' },
          h(
            'div',
            { class: 'row-buttons' },
            h('button', { type: 'button', class: 'small secondary', dataset: { action: 'limit' }, onclick: () => setLimit(id, l) }, 'Limit…'),
            l ? h('button', { type: 'button', class: 'small secondary', dataset: { action: 'unlimit' }, onclick: () => removeLimit(id) }, 'Unlimit') : null,
            h('button', { type: 'button', class: 'small danger', dataset: { action: 'delete' }, onclick: () => remove(id, description) }, 'Delete'),
          ),
        ),
      );
    });
    table.replaceChildren(
      h(
        'table',
        { id: 'tokens-table' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', { scope: 'col' }, 'Id'),
            h('th', { scope: 'col' }, 'Description'),
            h('th', { scope: 'col' }, 'Rate limit'),
            h('th', { scope: 'col' }, ''),
          ),
        ),
        h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 4, class: 'empty' }, `No tokens of ${ns}.`))),
      ),
    );
  }

  return {
    el,
    refresh,
    // Tokens change only by what is done here (or another admin): a slower refresh.
    interval: () => 10000,
    title: ns ? `Tokens of ${ns}` : 'Tokens',
    crumbs: [h('a', { href: '#/' }, 'Overview'), h('span', {}, ns ? ` / tokens of ${ns}` : ' / tokens')],
  };
}
