// stalkd dashboard: putting a job (docs/DASHBOARD.md, "Put a job, copy a job"): a form for
// a new job, or for a copy of a job, filled with the job's tube, priority, delay, TTR and
// body, all editable (the original stays as it is). The put is confirmed in a dialog, as
// every action is, then the page goes to the new job. Routes:
//   #/put?tube=<name>   the form, for that tube
//   #/put?copy=<id>     the form filled from job <id>
import { api, ApiError, bytes, confirmDialog, duration, enc, fromBase64, h, toast } from './util.js';

// The form starts from stalk put's and beanstalk_console's (Pheanstalk's) defaults:
// beanstalkd's put itself has none.
export const PUT_DEFAULTS = { pri: 1024, delay: 0, ttr: 60 };
const MAX_U32 = 4294967295;

// A link to the form, for a tube (or none: "default").
export function putLink(tube, id = 'tube-put') {
  return h('a', { href: '#/put' + (tube ? '?tube=' + enc(tube) : ''), class: 'button secondary', id }, 'Put a job…');
}

// A link to the form filled from job `id`.
export function copyLink(id) {
  return h('a', { href: `#/put?copy=${enc(id)}`, class: 'button secondary', id: 'job-copy', title: 'A new job from this one: its tube, priority, delay, TTR and body, editable' }, 'Copy…');
}

// Whether bytes can be edited in a text area and put back unchanged: UTF-8 without NUL or
// CR (a text area turns CR LF into LF).
function editable(data) {
  try {
    const t = new TextDecoder('utf-8', { fatal: true }).decode(data);
    return /[\u0000\r]/.test(t) ? null : t;
  } catch {
    return null;
  }
}

export function putView(params) {
  const copyOf = params.get('copy');
  function number(id, label, value, unit) {
    const input = h('input', { id, name: id, type: 'number', min: 0, max: MAX_U32, step: 1, required: true, value, inputmode: 'numeric' });
    return [input, h('label', { for: id }, h('span', {}, label), h('span', { class: 'field-input' }, input, unit ? h('span', { class: 'muted' }, unit) : null))];
  }
  const tube = h('input', { id: 'put-tube', name: 'tube', required: true, maxlength: 200, autocomplete: 'off', spellcheck: false, value: params.get('tube') || 'default' });
  const [pri, priLabel] = number('put-pri', 'Priority (0 is the most urgent)', PUT_DEFAULTS.pri);
  const [delay, delayLabel] = number('put-delay', 'Delay', PUT_DEFAULTS.delay, 'seconds');
  const [ttr, ttrLabel] = number('put-ttr', 'TTR (time to run)', PUT_DEFAULTS.ttr, 'seconds');
  const body = h('textarea', { id: 'put-body', name: 'body', rows: 12, spellcheck: false, placeholder: 'the job\'s body' });
  const size = h('span', { class: 'muted', id: 'put-size' });
  const binaryNote = h('p', { class: 'muted', id: 'put-binary', hidden: true });
  const error = h('p', { class: 'form-error', id: 'put-error', role: 'alert', hidden: true });
  const submit = h('button', { type: 'submit', class: 'primary', id: 'put-submit' }, copyOf ? 'Put the copy…' : 'Put…');
  const missing = h('p', { class: 'missing', hidden: true });
  let binary = null; // a copied body that cannot be edited as text: put byte for byte

  function payload() {
    return binary || new TextEncoder().encode(body.value);
  }
  function showSize() {
    size.textContent = bytes(payload().length);
  }
  body.addEventListener('input', showSize);
  showSize();

  const form = h(
    'form',
    { class: 'put-form', id: 'put-form', novalidate: true },
    h('label', { for: 'put-tube' }, h('span', {}, 'Tube'), tube),
    h('div', { class: 'put-numbers' }, priLabel, delayLabel, ttrLabel),
    h('label', { for: 'put-body' }, h('span', {}, 'Body ', size), body),
    binaryNote,
    error,
    h('div', { class: 'buttons' }, submit),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    error.hidden = true;
    if (!form.reportValidity()) return;
    const t = tube.value.trim();
    const data = payload();
    const ok = await confirmDialog({
      title: `Put a job into ${t}?`,
      message:
        `Priority ${pri.value}, delay ${duration(Number(delay.value))}, TTR ${duration(Number(ttr.value))}, a body of ${bytes(data.length)}.` +
        (copyOf ? ` A new job with a new id; job ${copyOf} stays as it is.` : ''),
      confirm: 'Put',
    });
    if (!ok) return;
    try {
      const r = await api(`tubes/${enc(t)}/put`, { method: 'POST', params: { pri: pri.value, delay: delay.value, ttr: ttr.value }, body: data });
      toast(`Put job ${r.id} into ${r.tube}`);
      location.hash = `#/job/${r.id}`;
    } catch (e) {
      error.textContent = e.message;
      error.hidden = false;
      toast(e.message, true);
    }
  });

  // Fills the form from the job being copied: its fields, then its whole body.
  async function fill() {
    const j = await api(`jobs/${enc(copyOf)}`);
    let data = fromBase64(j.body);
    if (j.body_truncated) {
      const res = await fetch(`/dashboard/api/jobs/${enc(copyOf)}/body`, { credentials: 'same-origin', cache: 'no-store' });
      if (!res.ok) throw new ApiError(res.status, 'job not found');
      data = new Uint8Array(await res.arrayBuffer());
    }
    tube.value = j.tube;
    pri.value = j.pri;
    delay.value = j.delay_s;
    ttr.value = j.ttr_s;
    const text = editable(data);
    if (text === null) {
      binary = data;
      body.hidden = true;
      binaryNote.replaceChildren(
        `The body (${bytes(data.length)}) is not plain text (binary, or with CR or NUL bytes): it is copied byte for byte. `,
        h('button', {
          type: 'button',
          class: 'secondary small',
          id: 'put-edit-text',
          onclick: () => {
            binary = null;
            body.value = new TextDecoder().decode(data);
            body.hidden = false;
            binaryNote.hidden = true;
            showSize();
          },
        }, 'Edit as text instead'),
      );
      binaryNote.hidden = false;
    } else {
      body.value = text;
    }
    showSize();
  }

  let filled = !copyOf;
  async function refresh() {
    if (filled) return;
    await fill();
    filled = true;
  }

  function onError(e) {
    if (e.status !== 404 || filled) return false;
    missing.replaceChildren(`Job ${copyOf} does not exist (deleted, expired or never put): there is nothing to copy. `, h('a', { href: '#/' }, 'Back to the overview'));
    missing.hidden = false;
    form.hidden = true;
    return true;
  }

  const title = copyOf ? `Copy job ${copyOf}` : 'Put a job';
  return {
    el: h('div', { class: 'put' }, h('h1', {}, title), missing, form),
    refresh,
    onError,
    interval: () => 60000,
    title,
    crumbs: [h('a', { href: '#/' }, 'Overview'), h('span', {}, ' / '), h('span', {}, copyOf ? `copy of job ${copyOf}` : 'put a job')],
  };
}
