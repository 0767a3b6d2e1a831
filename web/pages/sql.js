// SQL: any read-only query (a team token's runs in its team's view), its result as a sortable
// table, and the same result as CSV. Every "Show query" link of the dashboard lands here. Beside
// the editor: example queries over the period, and the tables with their columns as the
// server's information_schema lists them (a team token sees the tables it may read).

import { h, notice, download } from '../lib/dom.js';
import { sql, sqlCsv } from '../lib/api.js';
import { table } from '../lib/table.js';
import { costOverTimeQuery, teamCostsQuery } from './overview.js';
import { nodesQuery, summaryQuery } from './idle.js';
import { byModelQuery } from './unit.js';
import { trainingQuery } from './training.js';

/** The questions analysts start with: the queries behind the dashboard's own figures. */
const EXAMPLES = [
  ['Spend by team', teamCostsQuery],
  ['Cost per day by team', (period) => costOverTimeQuery(period, 'team')],
  ['Where idle money went', summaryQuery],
  ['Unexplained idle by node', nodesQuery],
  ['Cost per 1M tokens by model', byModelQuery],
  ['Training failure loss', trainingQuery],
];

const COLUMNS_QUERY = "SELECT table_name, column_name, data_type\nFROM information_schema.columns\n" +
  "WHERE table_schema = 'public'\nORDER BY table_name, ordinal_position";

/** The tables and their columns; a table's name puts a first query over it in the editor. */
function schemaBrowser(use) {
  const body = h('div', { class: 'figure-body', 'aria-busy': 'true' }, h('p', { class: 'loading' }, 'Loading…'));
  sql(COLUMNS_QUERY).then((rows) => {
    const tables = new Map();
    for (const r of rows) {
      if (!tables.has(r.table_name)) tables.set(r.table_name, []);
      tables.get(r.table_name).push(r);
    }
    body.replaceChildren(h('ul', { class: 'schema' }, [...tables].map(([name, columns]) => h('li', { dataset: { table: name } },
      h('button', { type: 'button', class: 'link', title: `SELECT * FROM ${name} LIMIT 100`, onclick: () => use(`SELECT *\nFROM ${name}\nLIMIT 100`) }, name),
      h('details', {},
        h('summary', { class: 'note' }, `${columns.length} columns`),
        h('ul', { class: 'columns' }, columns.map((c) => h('li', { dataset: { column: c.column_name } },
          h('code', {}, c.column_name), ' ', h('span', { class: 'note' }, c.data_type))))),
    ))));
  }, (error) => body.replaceChildren(notice(error.message, 'error')))
    .finally(() => body.setAttribute('aria-busy', 'false'));
  return h('section', { class: 'card', id: 'sql-schema', 'aria-labelledby': 'sql-schema-title' },
    h('header', { class: 'card-head' }, h('h2', { id: 'sql-schema-title' }, 'Tables')),
    body);
}

export default async function sqlPage({ params, navigate, period }) {
  const initial = params.get('q');
  const editor = h('textarea', { id: 'sql-text', name: 'sql', rows: 8, spellcheck: 'false', 'aria-describedby': 'sql-help', value: initial || teamCostsQuery(period) });
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
  // An example or a table puts its query in the address, which runs it.
  const use = (query) => navigate('sql', { q: query });
  const exampleList = h('section', { class: 'card', id: 'sql-examples', 'aria-labelledby': 'sql-examples-title' },
    h('header', { class: 'card-head' }, h('h2', { id: 'sql-examples-title' }, 'Examples'),
      h('span', { class: 'note' }, `${period.from} to ${period.to} (exclusive)`)),
    h('ul', { class: 'examples' }, EXAMPLES.map(([title, query]) => h('li', {},
      h('button', { type: 'button', class: 'link', dataset: { example: title }, onclick: () => use(query(period)) }, title)))));
  if (initial) run();
  return [form, result, h('div', { class: 'sql-aside' }, exampleList, schemaBrowser(use))];
}
