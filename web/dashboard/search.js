// stalkd dashboard: searching a tube's job bodies (docs/DASHBOARD.md, "Search job bodies").
// The server scans a bounded slice per request and answers a cursor to go on from; the page
// asks on, a few requests per click, while it has found fewer than a page of matches.
//   #/search/<tube>?q=<text>&state=<all|ready|delayed|reserved|buried>&case=1
import { api, asText, bytes, enc, fromBase64, h, num, plural, toast } from './util.js';

const STATES = ['all', 'ready', 'delayed', 'reserved', 'buried'];
const PAGE = 20; // matches a click looks for
const REQUESTS_PER_CLICK = 10; // each scans at most 1000 jobs or 16 MiB of bodies

export function searchLink(tube) {
  return h('a', { href: `#/search/${enc(tube)}`, class: 'button secondary', id: 'tube-search' }, 'Search bodies…');
}

// A match's snippet: the bytes around it as text, the match highlighted.
function snippet(m, length) {
  const data = fromBase64(m.snippet);
  const at = m.at - m.snippet_at;
  const flat = (d) => asText(d).replace(/\s+/g, ' ');
  return h(
    'code',
    { class: 'snippet' },
    m.snippet_at > 0 ? '…' : '',
    flat(data.subarray(0, at)),
    h('mark', {}, flat(data.subarray(at, at + length))),
    flat(data.subarray(at + length)),
    m.snippet_at + data.length < m.body_size ? '…' : '',
  );
}

export function searchView(tube, params) {
  const path = '/search/' + enc(tube);
  const input = h('input', { type: 'search', id: 'body-search', value: params.get('q') || '', placeholder: 'Text in the job bodies…', maxlength: 256, required: true, autocomplete: 'off', spellcheck: false, 'aria-label': 'text to look for' });
  const state = h(
    'select',
    { id: 'body-search-state', 'aria-label': 'jobs that are' },
    STATES.map((s) => h('option', { value: s, selected: s === (params.get('state') || 'all') }, s === 'all' ? 'all states' : s)),
  );
  const matchCase = h('input', { type: 'checkbox', id: 'body-search-case', checked: params.get('case') === '1' });
  const go = h('button', { type: 'submit', class: 'primary', id: 'body-search-go' }, 'Search');
  const more = h('button', { type: 'button', class: 'secondary', id: 'body-search-more', hidden: true }, 'Search on');
  const summary = h('p', { class: 'muted', id: 'body-search-summary' });
  const results = h('ol', { class: 'search-results', id: 'body-search-results' });
  const form = h(
    'form',
    { class: 'toolbar search-form', id: 'body-search-form' },
    input,
    state,
    h('label', { for: 'body-search-case', class: 'check' }, matchCase, ' match case'),
    go,
  );
  let run = null; // the search shown: its query, cursor and totals

  function setQuery() {
    const q = new URLSearchParams();
    if (run.q) q.set('q', run.q);
    if (run.state !== 'all') q.set('state', run.state);
    if (run.matchCase) q.set('case', '1');
    const s = q.toString();
    history.replaceState(null, '', '#' + path + (s ? '?' + s : ''));
  }

  function show() {
    const where = run.cursor ? 'not every job yet' : 'every job';
    summary.textContent = `${num(run.found)} ${run.found === 1 ? 'match' : 'matches'} in ${plural(run.scanned, 'job')} searched (${bytes(run.bytes)} of bodies; ${where}).`;
    more.hidden = !run.cursor || run.busy;
    go.disabled = run.busy;
  }

  // Asks on from the cursor until a page of matches, the end, or REQUESTS_PER_CLICK requests.
  async function ask(r) {
    r.busy = true;
    show();
    const length = new TextEncoder().encode(r.q).length;
    let found = 0;
    try {
      for (let i = 0; i < REQUESTS_PER_CLICK && found < PAGE; i++) {
        const a = await api(`tubes/${enc(tube)}/search`, {
          params: { q: r.q, state: r.state, match_case: r.matchCase ? 1 : '', cursor: r.cursor, limit: PAGE - found },
        });
        if (r !== run) return; // another search began
        r.cursor = a.cursor;
        r.scanned += a.scanned;
        r.bytes += a.scanned_bytes;
        r.found += a.matches.length;
        found += a.matches.length;
        for (const m of a.matches) {
          results.append(
            h(
              'li',
              { dataset: { id: m.id } },
              h('a', { href: `#/job/${m.id}` }, `Job ${m.id}`),
              ' ',
              h('span', { class: `badge state-${m.state}` }, m.state),
              h('span', { class: 'muted' }, ` ${bytes(m.body_size)}, at byte ${num(m.at)}`),
              snippet(m, length),
            ),
          );
        }
        if (!r.cursor) break;
      }
    } finally {
      r.busy = false;
      if (r === run) show();
    }
  }

  function start() {
    const q = input.value;
    if (!q) return;
    run = { q, state: state.value, matchCase: matchCase.checked, cursor: null, scanned: 0, bytes: 0, found: 0, busy: false };
    results.replaceChildren();
    setQuery();
    return ask(run);
  }

  function failed(e) {
    summary.textContent = e.message;
    toast(e.message, true);
  }
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    Promise.resolve(start()).catch(failed);
  });
  more.addEventListener('click', () => run && ask(run).catch(failed));

  // The search runs when asked; the first refresh runs the one the address names.
  let began = false;
  async function refresh() {
    if (began) return;
    began = true;
    if (input.value) await start();
  }

  return {
    el: h(
      'div',
      { class: 'body-search' },
      h('h1', {}, `Search the job bodies of ${tube}`),
      h('p', { class: 'muted' }, 'A substring of the bodies, read without reserving or changing any job (ASCII letters in either case unless "match case"), in slices: the server searches up to 1,000 jobs per request.'),
      form,
      summary,
      results,
      h('div', { class: 'pager' }, more),
    ),
    refresh,
    interval: () => 60000,
    title: `Search ${tube}`,
    crumbs: [h('a', { href: '#/' }, 'Overview'), h('span', {}, ' / '), h('a', { href: '#/tube/' + enc(tube) }, tube), h('span', {}, ' / search')],
  };
}
