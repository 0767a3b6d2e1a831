// Weekly reports: the scheduled runs, and one ISO week's report — viewed here section by section,
// or downloaded as JSON, CSV or HTML exactly as the API gives it.

import { h, format, notice, download } from '../lib/dom.js';
import { api, ApiError } from '../lib/api.js';
import { table } from '../lib/table.js';

const WEEK = /^\d{4}-W\d{2}$/;

/** The ISO week (YYYY-Www) of the last full week before today. */
function lastWeek() {
  const d = new Date();
  d.setUTCDate(d.getUTCDate() - 7);
  const day = (d.getUTCDay() + 6) % 7; // Monday = 0
  d.setUTCDate(d.getUTCDate() - day + 3); // the Thursday decides the year
  const firstThursday = new Date(Date.UTC(d.getUTCFullYear(), 0, 4));
  const week = 1 + Math.round(((d - firstThursday) / 86_400_000 - 3 + ((firstThursday.getUTCDay() + 6) % 7)) / 7);
  return `${d.getUTCFullYear()}-W${String(week).padStart(2, '0')}`;
}

/** A report section: a table for a list of records, pairs for a record, else the value. */
function section(title, value) {
  let body;
  if (Array.isArray(value) && value.every((v) => v && typeof v === 'object' && !Array.isArray(v))) {
    body = table(value, { caption: title });
  } else if (value && typeof value === 'object' && !Array.isArray(value)) {
    body = h('div', {}, Object.entries(value).map(([k, v]) => (v && typeof v === 'object'
      ? section(k, v)
      : h('p', { class: 'pair' }, h('span', { class: 'tile-label' }, `${k.replace(/_/g, ' ')}: `), format(v, typeof v === 'number' ? 'decimal' : undefined)))));
  } else {
    body = h('p', {}, format(value));
  }
  return h('section', { class: 'report-section' }, h('h3', {}, title.replace(/_/g, ' ')), body);
}

export default async function reports({ params, navigate, me }) {
  if (me.team) return notice(`Weekly reports cover the whole fleet: this token is limited to team ${me.team}.`);
  const chosen = WEEK.test(params.get('week') || '') ? params.get('week') : null;
  const weekInput = h('input', { id: 'report-week', name: 'week', value: chosen || lastWeek(), pattern: '\\d{4}-W\\d{2}', required: true, 'aria-describedby': 'report-week-help' });
  const pick = h('form', { class: 'inline', onsubmit: (e) => { e.preventDefault(); navigate('reports', { week: weekInput.value }); } },
    h('label', { for: 'report-week' }, 'Week'), weekInput,
    h('small', { id: 'report-week-help' }, 'ISO week, e.g. 2026-W45'),
    h('button', { type: 'submit' }, 'View'));

  let runs;
  try {
    runs = await api('/v1/reports/runs');
  } catch (error) {
    if (error instanceof ApiError && (error.status === 404 || error.status === 403)) {
      return notice(error.status === 404 ? 'Weekly reports are not available on this server.' : 'Weekly reports cover every team: this token may not read them.', 'error');
    }
    throw error;
  }
  const out = [
    pick,
    h('section', { class: 'card' }, h('h2', {}, 'Scheduled runs'), table(runs, {
      caption: 'Report runs',
      columns: [
        { key: 'week', label: 'Week', render: (r) => h('a', { href: `#/reports?week=${encodeURIComponent(r.week)}` }, r.week) },
        { key: 'status', label: 'Status' }, { key: 'attempts', label: 'Attempts', format: 'int' },
        { key: 'started_at', label: 'Started' }, { key: 'finished_at', label: 'Finished' }, { key: 'error', label: 'Error' },
      ],
      empty: 'No report has run yet.',
    })),
  ];
  if (chosen) {
    const path = `/v1/reports/weekly/${chosen}`;
    const save = (fmt, type) => h('button', { type: 'button', class: 'small', onclick: async () => {
      download(await api(`${path}?format=${fmt}`, { as: 'blob' }), `gpuledger-weekly-${chosen}.${fmt}`, type);
    } }, fmt.toUpperCase());
    const view = h('section', { class: 'card', id: 'report' },
      h('header', { class: 'card-head' }, h('h2', {}, `Week ${chosen}`),
        h('div', { class: 'buttons', role: 'group', 'aria-label': 'Download' }, 'Download: ', save('json', 'application/json'), save('csv', 'text/csv'), save('html', 'text/html'))));
    try {
      const report = await api(`${path}?format=json`);
      view.append(...Object.entries(report).map(([k, v]) => section(k, v)));
    } catch (error) {
      view.append(notice(error.message, 'error'));
    }
    out.splice(1, 0, view);
  }
  return out;
}
