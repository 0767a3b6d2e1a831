// Weekly reports: one ISO week's report as the server renders it for people (the sections of the
// HTML page the scheduled export writes: summary, recommended actions, sections with the week
// before, every figure), the downloads (JSON, CSV, HTML), and the scheduled runs. The week
// defaults to the last full week of the data.

import { h, notice, download } from '../lib/dom.js';
import { api, ApiError } from '../lib/api.js';
import { table } from '../lib/table.js';

const WEEK = /^\d{4}-W\d{2}$/;
const DAY_MS = 86_400_000;

/** The ISO week (YYYY-Www) of the day `date` (a Date at midnight UTC). */
export function isoWeek(date) {
  const thursday = new Date(date.getTime() + (3 - ((date.getUTCDay() + 6) % 7)) * DAY_MS);
  const year = thursday.getUTCFullYear();
  const week = 1 + Math.floor((thursday - Date.UTC(year, 0, 1)) / DAY_MS / 7);
  return `${year}-W${String(week).padStart(2, '0')}`;
}

/** The last full ISO week that ends by `to` (a date, exclusive): the week of the data. */
export function lastFullWeek(to) {
  const end = new Date(`${to}T00:00:00Z`);
  const monday = new Date(end.getTime() - ((end.getUTCDay() + 6) % 7) * DAY_MS);
  return isoWeek(new Date(monday.getTime() - 7 * DAY_MS));
}

/**
 * The report's page as the server renders it, read into this page: its sections, tables and
 * charts, styled by the dashboard's sheet (the page's own styles and title stay out: the
 * dashboard allows no inline style, and the card names the week).
 */
function reportBody(html) {
  // Its style sheet goes before parsing: even an inert parsed copy would apply it, which this
  // page's Content-Security-Policy forbids.
  const page = new DOMParser().parseFromString(html.replace(/<style>[\s\S]*?<\/style>/g, ''), 'text/html');
  page.querySelectorAll('script, h1').forEach((element) => element.remove());
  // A wide table scrolls inside its card, as the dashboard's own tables do.
  for (const element of page.querySelectorAll('table')) {
    const wrap = page.createElement('div');
    wrap.className = 'table-wrap';
    element.replaceWith(wrap);
    wrap.append(element);
  }
  return h('div', { class: 'report-body' }, [...page.body.childNodes].map((node) => document.importNode(node, true)));
}

export default async function reports({ params, period, navigate, me }) {
  if (me.team) return notice(`Weekly reports cover the whole fleet: this token is limited to team ${me.team}.`);
  const week = WEEK.test(params.get('week') || '') ? params.get('week') : lastFullWeek(period.to);
  const weekInput = h('input', { id: 'report-week', name: 'week', value: week, pattern: '\\d{4}-W\\d{2}', required: true, 'aria-describedby': 'report-week-help' });
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
  const path = `/v1/reports/weekly/${week}`;
  const save = (fmt, type) => h('button', { type: 'button', class: 'small', onclick: async () => {
    download(await api(`${path}?format=${fmt}`, { as: 'blob' }), `gpuledger-weekly-${week}.${fmt}`, type);
  } }, fmt.toUpperCase());
  const view = h('section', { class: 'card', id: 'report' },
    h('header', { class: 'card-head' }, h('h2', {}, `Week ${week}`),
      h('div', { class: 'buttons', role: 'group', 'aria-label': 'Download' }, 'Download: ', save('json', 'application/json'), save('csv', 'text/csv'), save('html', 'text/html'))));
  try {
    view.append(reportBody(await api(`${path}?format=html`)));
  } catch (error) {
    view.append(notice(error.message, 'error'));
  }
  return [
    pick,
    view,
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
}
