// Idle: where the GPU-hours went, day by day, by idle class; intentional idle (reservations)
// beside unexplained waste; and the nodes with the most unexplained idle.

import { h, notice } from '../lib/dom.js';
import { args, days, shortDay, within } from '../lib/period.js';
import { figure } from '../lib/figure.js';
import { table } from '../lib/table.js';
import { chart } from '../lib/chart.js';

const CLASSES = [
  ['busy', 'Busy'],
  ['allocated_idle', 'Allocated idle'],
  ['reserved', 'Reserved (intentional)'],
  ['unexplained', 'Unexplained'],
  ['fault', 'Fault'],
];

export const dailyQuery = (period) =>
  `SELECT date_trunc('day', hour) AS day,\n` +
  CLASSES.map(([c]) => `  sum(${c}_seconds) / 3600 AS ${c}_gpu_hours,\n  sum(cost_${c}) AS ${c}_cost`).join(',\n') +
  `\nFROM gpu_hours\nWHERE ${within('hour', period)}\nGROUP BY 1\nORDER BY 1`;

export const summaryQuery = (period) =>
  `SELECT class, reason, intentional, gpu_hours, cost\nFROM idle_summary(${args(period)})\nORDER BY cost DESC`;

export const nodesQuery = (period) =>
  `SELECT cluster, node, sum(unexplained_seconds) / 3600 AS unexplained_gpu_hours, sum(cost_unexplained) AS unexplained_cost\n` +
  `FROM gpu_hours\nWHERE ${within('hour', period)}\nGROUP BY cluster, node\nHAVING sum(unexplained_seconds) > 0\n` +
  `ORDER BY unexplained_cost DESC\nLIMIT 10`;

export default async function idle({ period, params, me, navigate }) {
  const measure = params.get('measure') === 'cost' ? 'cost' : 'gpu_hours';
  const choice = h('div', { class: 'toggle', role: 'group', 'aria-label': 'Measure' },
    [['gpu_hours', 'GPU-hours'], ['cost', 'Cost']].map(([value, label]) => h('button', {
      type: 'button',
      'aria-pressed': String(value === measure),
      onclick: () => navigate('idle', { ...Object.fromEntries(params), ...period, measure: value }),
    }, label)));
  const labels = days(period);
  const daily = figure('By idle class, per day', dailyQuery(period), (rows) => {
    const byDay = new Map(rows.map((r) => [String(r.day).slice(0, 10), r]));
    return chart({
      labels: labels.map(shortDay),
      series: CLASSES.map(([c, name]) => ({ name, values: labels.map((d) => (byDay.get(d) || {})[`${c}_${measure}`] || 0) })),
      kind: 'stacked',
      unit: measure === 'cost' ? 'money' : 'hours',
      label: `${measure === 'cost' ? 'Cost' : 'GPU-hours'} per day by idle class`,
    });
  }, { id: 'idle-daily' });

  const sections = [choice, daily];
  if (me.team) {
    sections.push(notice(`This token sees team ${me.team} only: its busy and allocated-idle hours. Reserved, unexplained and fault idle belong to no team.`));
    return sections;
  }
  sections.push(
    figure('Intentional and unexplained', summaryQuery(period), (rows) => table(rows, {
      caption: 'Idle summary',
      columns: [
        { key: 'class', label: 'Class' }, { key: 'reason', label: 'Reason' },
        { key: 'intentional', label: 'Intentional', render: (r) => (r.intentional === null ? '—' : r.intentional ? 'yes' : 'no') },
        { key: 'gpu_hours', label: 'GPU-hours', format: 'hours' }, { key: 'cost', label: 'Cost', format: 'money' },
      ],
    }), { id: 'idle-summary', note: 'Reserved idle was declared (warm pools, HA, maintenance …); unexplained idle is the waste to chase.' }),
    figure('Top unexplained nodes', nodesQuery(period), (rows) => table(rows, {
      caption: 'Nodes with the most unexplained idle',
      columns: [
        { key: 'cluster', label: 'Cluster' }, { key: 'node', label: 'Node' },
        { key: 'unexplained_gpu_hours', label: 'GPU-hours', format: 'hours' },
        { key: 'unexplained_cost', label: 'Cost', format: 'money' },
      ],
      empty: 'No unexplained idle in this period.',
    }), { id: 'idle-nodes' }),
  );
  return sections;
}
