// The period every page reports on: [from, to) in UTC days, kept in the address (#/page?from=…&to=…)
// so that a link shows the same numbers to whoever opens it.

import { h } from './dom.js';

const DAY = /^\d{4}-\d{2}-\d{2}$/;
const iso = (date) => date.toISOString().slice(0, 10);
const utc = (text) => new Date(`${text}T00:00:00Z`);
const addDays = (text, n) => { const d = utc(text); d.setUTCDate(d.getUTCDate() + n); return iso(d); };

function month(offset) {
  const now = new Date();
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + offset, 1));
  const end = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + offset + 1, 1));
  return { from: iso(start), to: iso(end) };
}

/** The `n` days ending with `last` (today by default), both included. */
function lastDays(n, last = iso(new Date())) {
  return { from: addDays(last, 1 - n), to: addDays(last, 1) };
}

/** The period of the address, or null when it names none. Dates are checked, so safe in SQL. */
export function periodOf(params) {
  const from = params.get('from');
  const to = params.get('to');
  if (DAY.test(from || '') && DAY.test(to || '') && !Number.isNaN(utc(from)) && utc(from) < utc(to)) {
    return { from, to };
  }
  return null;
}

/**
 * The period a page opens on when the address names none: the last 30 days that hold data,
 * ending with the latest day the ledger has built (today at the latest), so that the first screen
 * is never an empty or one-day month; this calendar month when nothing is built yet.
 */
export function defaultPeriod(builtThrough, today = iso(new Date())) {
  if (!DAY.test(builtThrough || '')) return month(0);
  return lastDays(30, builtThrough < today ? builtThrough : today);
}

/**
 * Days in the period, and of those, the days the ledger holds (for run-rate forecasts): up to
 * now, and no further than the last day built (`builtThrough`, a date), since the ledger keeps
 * costs per day — a day still being built, or a future one, would dilute the rate.
 */
export function elapsed({ from, to }, builtThrough, now = Date.now()) {
  const total = (utc(to) - utc(from)) / 86_400_000;
  const held = DAY.test(builtThrough || '') ? utc(builtThrough).getTime() + 86_400_000 : now;
  const past = Math.min(total, Math.max(0, (Math.min(now, held) - utc(from)) / 86_400_000));
  return { total, past };
}

/** `'from', 'to'` as table-function arguments. */
export const args = ({ from, to }) => `'${from}', '${to}'`;

/** A WHERE condition on a timestamp column for the period. */
export const within = (column, { from, to }) =>
  `${column} >= TIMESTAMP '${from} 00:00:00' AND ${column} < TIMESTAMP '${to} 00:00:00'`;

/** The picker: two dates (the last one inclusive, as people say it) and presets. */
export function picker(period, choose) {
  const fromInput = h('input', { type: 'date', id: 'period-from', name: 'from', value: period.from, required: true });
  const untilInput = h('input', { type: 'date', id: 'period-until', name: 'until', value: addDays(period.to, -1), required: true });
  const preset = (label, p) => h('button', { type: 'button', class: 'preset', onclick: () => choose(p) }, label);
  return h('form', {
    class: 'period',
    'aria-label': 'Period',
    onsubmit: (event) => {
      event.preventDefault();
      if (fromInput.value && untilInput.value && fromInput.value <= untilInput.value) {
        choose({ from: fromInput.value, to: addDays(untilInput.value, 1) });
      }
    },
  },
  h('label', { for: 'period-from' }, 'From'), fromInput,
  h('label', { for: 'period-until' }, 'to'), untilInput,
  h('button', { type: 'submit' }, 'Show'),
  h('span', { class: 'presets' },
    preset('This month', month(0)), preset('Last month', month(-1)),
    preset('Last 7 days', lastDays(7)), preset('Last 30 days', lastDays(30))));
}

/** A day as a chart axis shows it: `Nov 2`. */
export const shortDay = (day) => utc(day).toLocaleDateString('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' });

/** Each UTC day of the period, as YYYY-MM-DD (chart categories, with no gaps). */
export function days({ from, to }) {
  const out = [];
  for (let d = from; d < to; d = addDays(d, 1)) out.push(d);
  return out;
}
