// Sortable tables. Columns: {key, label, format ('money' | 'number' | …), render, ellipsis}. Each
// cell keeps its raw value in data-value, so tests and copy-paste see the number, not its
// formatting.

import { h, format } from './dom.js';

const NUMERIC = new Set(['money', 'hours', 'number', 'decimal', 'int', 'percent']);

/** Columns of names, cut with an ellipsis unless the column says `ellipsis: false`. */
const NAMES = new Set(['team', 'owner', 'namespace', 'workload']);

function compare(a, b) {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1; // blanks last, whichever the direction
  if (b === null || b === undefined) return -1;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a).localeCompare(String(b), 'en', { numeric: true });
}

/**
 * A table of `rows` (objects). `columns` defaults to every key of the first row.
 * `actions(row)` adds a last cell of buttons. Sorting is by clicking (or Enter on) a header.
 */
export function table(rows, { columns, caption, actions, empty = 'No rows.' } = {}) {
  const cols = columns || Object.keys(rows[0] || {}).map((key) => ({
    key, label: key, format: typeof rows[0][key] === 'number' ? 'decimal' : undefined,
  }));
  if (rows.length === 0) return h('p', { class: 'empty' }, empty);
  let sortKey = null;
  let ascending = true;
  const body = h('tbody');
  const headers = cols.map((col) => {
    const button = h('button', { type: 'button', class: 'sort', onclick: () => sortBy(col.key) }, col.label);
    return h('th', { scope: 'col', class: NUMERIC.has(col.format) ? 'num' : '', dataset: { key: col.key } }, button);
  });

  function render() {
    const sorted = sortKey === null ? rows : [...rows].sort((a, b) => {
      const order = compare(a[sortKey], b[sortKey]);
      return ascending || a[sortKey] == null || b[sortKey] == null ? order : -order;
    });
    body.replaceChildren(...sorted.map((row) => h('tr', {},
      cols.map((col) => h('td', {
        class: [NUMERIC.has(col.format) ? 'num' : '', (col.ellipsis ?? NAMES.has(col.key)) ? 'ellipsis' : ''].filter(Boolean).join(' '),
        dataset: { key: col.key, value: row[col.key] ?? '' },
        // A name cut with an ellipsis keeps its whole text on hover.
        title: typeof row[col.key] === 'string' ? row[col.key] : undefined,
      }, col.render ? col.render(row) : format(row[col.key], col.format))),
      actions ? h('td', { class: 'actions' }, actions(row)) : null,
    )));
    headers.forEach((th, i) => {
      th.setAttribute('aria-sort', cols[i].key === sortKey ? (ascending ? 'ascending' : 'descending') : 'none');
    });
  }

  function sortBy(key) {
    ascending = key === sortKey ? !ascending : true;
    sortKey = key;
    render();
  }

  render();
  return h('div', { class: 'table-wrap', tabindex: 0, role: 'region', 'aria-label': caption || 'table' },
    h('table', {},
      caption ? h('caption', {}, caption) : null,
      h('thead', {}, h('tr', {}, headers, actions ? h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Actions')) : null)),
      body));
}
