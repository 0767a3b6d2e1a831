// Small helpers to build the DOM: no templates, no innerHTML, so no data can become markup.

const SVG_NS = 'http://www.w3.org/2000/svg';

function build(element, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      element.addEventListener(key.slice(2), value);
    } else if (key === 'dataset') {
      Object.assign(element.dataset, value);
    } else if (key === 'value' && 'value' in element) {
      element.value = value;
    } else {
      element.setAttribute(key, value === true ? '' : String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** An HTML element: h('a', {href: '#/x'}, 'text', …). */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element, same calling convention as h(). */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

// One format per kind, everywhere: the ledger's currency (its bills are USD) with cents on money,
// one decimal on GPU-hours and other quantities, thousands separators on both.
const CURRENCY = 'USD';
const money = new Intl.NumberFormat('en-US', { style: 'currency', currency: CURRENCY, minimumFractionDigits: 2, maximumFractionDigits: 2 });
const hours = new Intl.NumberFormat('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });
const number = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 });
const axisMoney = new Intl.NumberFormat('en-US', { style: 'currency', currency: CURRENCY, maximumFractionDigits: 2 });
const percent = new Intl.NumberFormat('en-US', { style: 'percent', maximumFractionDigits: 1 });
// Query results: enough digits to check a figure by hand, without binary floating-point noise.
const decimal = new Intl.NumberFormat('en-US', { maximumFractionDigits: 6, useGrouping: false });

const missing = (v) => v === null || v === undefined || Number.isNaN(v);

/**
 * `value` rounded half away from zero to `places` (so -0.125 and 0.125 round alike), without a
 * negative zero ("-$0.00" says nothing true).
 */
const rounded = (value, places) => (Math.sign(value) * Math.round(Math.abs(value) * 10 ** places)) / 10 ** places || 0;

/**
 * Formats by kind: 'money' ($1,234.56), 'hours' (GPU-hours: 1,234.5), 'number' (other
 * quantities, up to 2 decimals), 'decimal' (as exact as a value is entered), 'percent' (a share,
 * 0.25 → 25 %), 'int', the chart axes' 'money-axis' ($2.5, $250), or text.
 */
export function format(value, kind) {
  if (missing(value)) return '—';
  switch (kind) {
    case 'money': return money.format(rounded(value, 2));
    case 'hours': return hours.format(rounded(value, 1));
    case 'number': return number.format(value);
    case 'money-axis': return axisMoney.format(value);
    case 'decimal': return decimal.format(value);
    case 'int': return Math.round(value).toLocaleString('en-US');
    case 'percent': return percent.format(value);
    case 'day': return String(value).slice(0, 10);
    default:
      if (Array.isArray(value)) return value.map((v) => format(v)).join(', ');
      return typeof value === 'object' ? JSON.stringify(value) : String(value);
  }
}

/** A status line that screen readers announce. */
export function notice(text, kind = 'info') {
  return h('p', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);
}

/** Saves `data` as a file through a temporary link (the only way to attach a name). */
export function download(data, filename, type) {
  const url = URL.createObjectURL(data instanceof Blob ? data : new Blob([data], { type }));
  const link = h('a', { href: url, download: filename, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
