// stalkd dashboard: helpers shared by the views (app.js). Plain modern JavaScript, served
// from the stalkd binary; nothing is loaded from anywhere else.

// ---------------------------------------------------------------------------- the API

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// Calls the dashboard's JSON API (docs/DASHBOARD.md). Changing requests carry
// X-Requested-With, which the server requires of them (a cross-site form cannot send it).
// `body` (a string or bytes) is sent as it is: a job's body for a put.
export async function api(path, { method = 'GET', params, body: payload } = {}) {
  let url = '/dashboard/api/' + path;
  if (params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
    }
    const s = q.toString();
    if (s) url += '?' + s;
  }
  const headers = { Accept: 'application/json' };
  if (method !== 'GET') headers['X-Requested-With'] = 'stalkd-dashboard';
  if (payload !== undefined) headers['Content-Type'] = 'application/octet-stream';
  const res = await fetch(url, { method, headers, body: payload, credentials: 'same-origin', cache: 'no-store' });
  const text = await res.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!res.ok) {
    const msg = (body && (body.error || body.msg)) || `HTTP ${res.status}`;
    throw new ApiError(res.status, msg);
  }
  return body;
}

export const enc = encodeURIComponent;

// ---------------------------------------------------------------------------- the DOM

// h('a', {href: '#/', class: 'x'}, 'text', child...): an element. Attributes starting with
// "on" are listeners; `dataset` sets data-*; null/false attributes are left out.
export function h(tag, attrs, ...children) {
  const svg = tag.startsWith('svg:');
  const el = svg
    ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4))
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (k === 'dataset') {
      Object.assign(el.dataset, v);
    } else if (k === 'value' && !svg) {
      el.value = v;
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// ---------------------------------------------------------------------------- formatting

const numberFormat = new Intl.NumberFormat('en-US');

export function num(n) {
  return n === null || n === undefined ? '–' : numberFormat.format(n);
}

export function rate(r) {
  if (r === null || r === undefined) return '–';
  if (r === 0) return '0';
  if (r < 10) return r.toFixed(2).replace(/\.?0+$/, '');
  return numberFormat.format(Math.round(r));
}

// 3725 -> "1h 2m"; 59 -> "59s".
export function duration(s) {
  if (s === null || s === undefined) return '–';
  if (s < 0) s = 0;
  const d = Math.floor(s / 86400);
  const hr = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = Math.floor(s % 60);
  if (d) return `${d}d ${hr}h`;
  if (hr) return `${hr}h ${m}m`;
  if (m) return `${m}m ${sec}s`;
  return `${sec}s`;
}

export function bytes(n) {
  if (n === null || n === undefined) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export function plural(n, word) {
  return `${num(n)} ${word}${n === 1 ? '' : 's'}`;
}

// ---------------------------------------------------------------------------- sparklines

// The largest number of some series (arrays of numbers or nulls), 0 if none.
export function peak(...series) {
  let m = 0;
  for (const s of series) for (const v of s || []) if (v !== null && v > m) m = v;
  return m;
}

// The newest number of a series (its last non-null), or null.
export function newest(series) {
  for (let i = (series || []).length - 1; i >= 0; i--) if (series[i] !== null) return series[i];
  return null;
}

// An inline SVG of one or more series (arrays of numbers or nulls, oldest first); a null is a
// gap (no sample). Each series is scaled to its `max` (charts that are compared share one:
// the same height means the same number), or else to its own largest value.
export function sparkline(series, { width = 120, height = 28, title = '' } = {}) {
  const svg = h('svg:svg', {
    class: 'spark',
    viewBox: `0 0 ${width} ${height}`,
    width,
    height,
    preserveAspectRatio: 'none',
    role: 'img',
    'aria-label': title || 'history',
  });
  if (title) svg.append(h('svg:title', {}, title));
  for (const { values, cls, area, max: scale } of series) {
    if (!values || values.length === 0) continue;
    const max = Math.max(1e-9, scale ?? peak(values));
    const step = values.length > 1 ? width / (values.length - 1) : width;
    let d = '';
    let start = null;
    let pen = false;
    const segments = [];
    values.forEach((v, i) => {
      if (v === null) {
        if (pen) segments.push([start, i - 1]);
        pen = false;
        return;
      }
      const x = (i * step).toFixed(1);
      const y = (height - 1 - (v / max) * (height - 3)).toFixed(1);
      d += `${pen ? 'L' : 'M'}${x} ${y} `;
      if (!pen) start = i;
      pen = true;
    });
    if (pen) segments.push([start, values.length - 1]);
    if (!d) continue;
    if (area) {
      for (const [a, b] of segments) {
        let p = `M${(a * step).toFixed(1)} ${height} `;
        for (let i = a; i <= b; i++) {
          const y = (height - 1 - (values[i] / max) * (height - 3)).toFixed(1);
          p += `L${(i * step).toFixed(1)} ${y} `;
        }
        p += `L${(b * step).toFixed(1)} ${height} Z`;
        svg.append(h('svg:path', { d: p, class: `${cls} area` }));
      }
    }
    svg.append(h('svg:path', { d, class: cls }));
  }
  return svg;
}

// ---------------------------------------------------------------------------- dialogs

// Asks for confirmation in a modal dialog; `fields` adds inputs ({name, label, type,
// value, min, max, options}). Resolves to the fields' values, or null if cancelled.
export function confirmDialog({ title, message, fields = [], confirm = 'Confirm', danger = false }) {
  const dialog = document.getElementById('confirm');
  const inputs = {};
  const form = h(
    'form',
    { method: 'dialog', class: 'confirm-form' },
    h('h2', {}, title),
    message ? h('p', { class: 'message' }, message) : null,
    fields.map((f) => {
      let input;
      if (f.options) {
        input = h(
          'select',
          { name: f.name, id: `f-${f.name}` },
          f.options.map((o) => h('option', { value: o, selected: o === f.value }, o)),
        );
      } else {
        input = h('input', {
          name: f.name,
          id: `f-${f.name}`,
          type: f.type || 'text',
          value: f.value ?? '',
          min: f.min,
          max: f.max,
          required: f.required,
          placeholder: f.placeholder,
          autocomplete: 'off',
        });
      }
      inputs[f.name] = input;
      return h('label', { for: `f-${f.name}` }, h('span', {}, f.label), input);
    }),
    h(
      'div',
      { class: 'buttons' },
      h('button', { value: 'cancel', type: 'submit', formnovalidate: true, class: 'secondary' }, 'Cancel'),
      h('button', { value: 'ok', type: 'submit', class: danger ? 'danger' : 'primary' }, confirm),
    ),
  );
  dialog.replaceChildren(form);
  return new Promise((resolve) => {
    dialog.addEventListener(
      'close',
      () => {
        if (dialog.returnValue !== 'ok') return resolve(null);
        const values = {};
        for (const [k, el] of Object.entries(inputs)) values[k] = el.value;
        resolve(values);
      },
      { once: true },
    );
    dialog.returnValue = '';
    dialog.showModal();
    const first = Object.values(inputs)[0];
    if (first) first.focus();
  });
}

let toastTimer = null;
export function toast(text, error = false) {
  const el = document.getElementById('toast');
  el.textContent = text;
  el.className = error ? 'show error' : 'show';
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => (el.className = ''), error ? 6000 : 3000);
}

// ---------------------------------------------------------------------------- job bodies

export function fromBase64(b64) {
  const s = atob(b64 || '');
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

// The bytes as text: UTF-8 where it is valid, other bytes and control characters (but tab
// and newline) as \xNN, so a binary body shows what it holds.
export function asText(data) {
  try {
    const t = new TextDecoder('utf-8', { fatal: true }).decode(data);
    return t.replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, (c) => '\\x' + c.charCodeAt(0).toString(16).padStart(2, '0'));
  } catch {
    let s = '';
    for (const b of data) {
      s += (b >= 0x20 && b < 0x7f) || b === 0x0a || b === 0x09 ? String.fromCharCode(b) : '\\x' + b.toString(16).padStart(2, '0');
    }
    return s;
  }
}

// Whether the bytes are text worth showing as such: valid UTF-8 with few control bytes.
export function isText(data) {
  try {
    const t = new TextDecoder('utf-8', { fatal: true }).decode(data);
    const ctl = (t.match(/[\u0000-\u0008\u000b-\u001f\u007f]/g) || []).length;
    return ctl <= t.length / 20;
  } catch {
    return false;
  }
}

// A hex dump: offset, 16 bytes, their ASCII.
export function hexDump(data) {
  const lines = [];
  for (let at = 0; at < data.length; at += 16) {
    const row = data.subarray(at, at + 16);
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, '0'));
    const left = hex.slice(0, 8).join(' ');
    const right = hex.slice(8).join(' ');
    const ascii = Array.from(row, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
    lines.push(`${at.toString(16).padStart(8, '0')}  ${left.padEnd(23)}  ${right.padEnd(23)}  |${ascii}|`);
  }
  return lines.join('\n');
}

// Pretty JSON of the bytes, or null if they are not JSON.
export function prettyJson(data) {
  try {
    const t = new TextDecoder('utf-8', { fatal: true }).decode(data).trim();
    if (!t || !'{["'.includes(t[0]) && !/^(-?\d|true|false|null)/.test(t)) return null;
    return JSON.stringify(JSON.parse(t), null, 2);
  } catch {
    return null;
  }
}

// A one-line preview of a list row's first bytes.
export function preview(b64, size) {
  const data = fromBase64(b64);
  const more = size > data.length ? '…' : '';
  if (isText(data)) return asText(data).replace(/\s+/g, ' ') + more;
  return Array.from(data.subarray(0, 16), (b) => b.toString(16).padStart(2, '0')).join(' ') + (size > 16 ? ' …' : '');
}
