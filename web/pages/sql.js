// SQL: any read-only query (a team token's runs in its team's view), its result as a sortable
// table, and the same result as CSV. Every "Show query" link of the dashboard lands here.

import { h, notice, download } from '../lib/dom.js';
import { sql, sqlCsv } from '../lib/api.js';
import { table } from '../lib/table.js';

const EXAMPLE = "SELECT team, total_cost\nFROM team_costs('2026-11-01', '2026-12-01')\nORDER BY total_cost DESC";

export default async function sqlPage({ params, navigate }) {
  const initial = params.get('q');
  const editor = h('textarea', { id: 'sql-text', name: 'sql', rows: 8, spellcheck: 'false', 'aria-describedby': 'sql-help', value: initial || EXAMPLE });
  const result = h('div', { id: 'sql-result', 'aria-live': 'polite' });
  const csv = h('button', { type: 'button', disabled: true, onclick: async () => {
    try {
      download(await sqlCsv(editor.value), 'gpuledger-query.csv', 'text/csv');
    } catch (error) {
      result.prepend(notice(error.message, 'error'));
    }
  } }, 'Download CSV');

  async function run() {
    result.replaceChildren(h('p', { class: 'loading' }, 'Running…'));
    csv.disabled = true;
    const started = performance.now();
    try {
      const rows = await sql(editor.value);
      const ms = Math.round(performance.now() - started);
      result.replaceChildren(
        h('p', { class: 'note', dataset: { rows: rows.length } }, `${rows.length} row${rows.length === 1 ? '' : 's'} in ${ms} ms`),
        table(rows, { caption: 'Query result', empty: 'The query returned no rows.' }));
      csv.disabled = false;
    } catch (error) {
      result.replaceChildren(notice(error.message, 'error'));
    }
  }

  const form = h('form', {
    class: 'card sql',
    onsubmit: (event) => {
      event.preventDefault();
      // The query goes into the address, so that the result can be linked to and reloaded.
      if (editor.value === params.get('q')) run();
      else navigate('sql', { q: editor.value });
    },
  },
  h('label', { for: 'sql-text' }, 'Query'),
  editor,
  h('p', { id: 'sql-help', class: 'note' }, 'Read-only SQL (PostgreSQL dialect) over the ledger: tables, views and table functions such as team_costs(from, to). Ctrl+Enter runs it.'),
  h('div', { class: 'buttons' }, h('button', { type: 'submit' }, 'Run'), csv));
  editor.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  if (initial) run();
  return [form, result];
}
