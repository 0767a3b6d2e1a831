// Overview: cost over time by team (or namespace, or any attribution label), what each team
// spent in the period against its budget, the run-rate forecast, what could be reclaimed (the
// recommended actions, with owners), the money no team holds (reserved, unexplained and fault
// idle), and the ledger's balance.

import { h, format, notice } from '../lib/dom.js';
import { api, ApiError } from '../lib/api.js';
import { args, days, elapsed, shortDay, within } from '../lib/period.js';
import { figure, tile, queryLink } from '../lib/figure.js';
import { table } from '../lib/table.js';
import { chart } from '../lib/chart.js';
import { statusMeter } from './budgets.js';
import { topN } from '../lib/top.js';

export const teamCostsQuery = (period) =>
  `SELECT team, gpu_hours, direct_cost, allocated_idle_cost, shared_cost, total_cost\n` +
  `FROM team_costs(${args(period)})\nORDER BY total_cost DESC`;

// `gpu_hours > 0` also keeps out the all-NULL rows that idle_summary gives for classes the
// class filter excludes (the filter is pushed below its global aggregates).
const unallocatedQuery = (period) =>
  `SELECT class, reason, gpu_hours, cost\nFROM idle_summary(${args(period)})\n` +
  `WHERE class IN ('reserved', 'unexplained', 'fault') AND gpu_hours > 0\nORDER BY cost DESC`;

export const recommendationsQuery = (period) =>
  `SELECT kind, coalesce(team, 'platform') AS owner, action, gpu_hours, cost, cost_per_day\n` +
  `FROM recommendations(${args(period)})\nORDER BY cost DESC`;

/** Actions listed by name; the rest sum into one row. */
const ACTIONS_SHOWN = 10;

/** What could be reclaimed: each action with its owner and money, largest first. */
function recommendationsCard(period) {
  return figure('Recommended actions', recommendationsQuery(period), (rows) => {
    const total = rows.reduce((sum, r) => sum + (r.cost || 0), 0);
    return [
      h('p', { class: 'figure-total', dataset: { figure: 'recommendations-total', value: total } },
        rows.length === 0
          ? 'Nothing to reclaim: no workload held idle GPUs and every idle GPU had a declared reason.'
          : `${rows.length} ${rows.length === 1 ? 'action' : 'actions'}, ${format(total, 'money')} in this period.`),
      table(topN(rows, { n: ACTIONS_SHOWN, by: 'cost', labelKey: 'action', other: (count) => `${count} more actions`, sums: ['gpu_hours', 'cost', 'cost_per_day'] }), {
        caption: 'Recommended actions, largest first',
        columns: [
          { key: 'owner', label: 'Owner' },
          { key: 'action', label: 'Action' },
          { key: 'gpu_hours', label: 'Idle GPU-hours', format: 'hours' },
          { key: 'cost', label: 'Cost', format: 'money' },
          { key: 'cost_per_day', label: 'Per day', format: 'money' },
        ],
        empty: null,
      }),
    ];
  }, {
    id: 'recommendations',
    note: 'Workloads that held GPUs they did not use (release or right-size them) and nodes whose idle GPUs had no declared reason (find an owner, reserve or release them). Together: the period\'s waste, allocated idle plus unexplained.',
  });
}

const accountedQuery = ({ from, to }) =>
  `SELECT bucket, sum(amount) AS amount\nFROM cost_entries\n` +
  `WHERE day >= TIMESTAMP '${from} 00:00:00' AND day < TIMESTAMP '${to} 00:00:00'\nGROUP BY bucket\nORDER BY amount DESC`;

/**
 * What the cost-over-time chart can stack by. A team's cost is everything the ledger charges it
 * (`cost_entries`: direct, its own allocated idle, shared costs): the same totals as
 * `team_costs`. The other dimensions are the GPU-hour cost of allocated time (`gpu_hours`: busy
 * and allocated idle), since shared costs are spread over teams only; attribution labels come
 * from each workload's allocations.
 */
const BREAKDOWNS = {
  team: 'Team',
  namespace: 'Namespace',
  cost_center: 'Cost center',
  model: 'Model',
  environment: 'Environment',
  workload_type: 'Workload type',
};

/** Series shown by name in the chart, by total; the rest stack as one "other". */
const SERIES_SHOWN = 7;

export function costOverTimeQuery(period, by) {
  if (by === 'team') {
    return `SELECT day, team AS series, sum(amount) AS cost\nFROM cost_entries\n` +
      `WHERE team IS NOT NULL AND ${within('day', period)}\nGROUP BY day, team\nORDER BY day, series`;
  }
  const hours = `SELECT date_trunc('day', hour) AS day, cluster, namespace, workload,\n` +
    `    sum(cost_busy + cost_allocated_idle) AS cost\n  FROM gpu_hours\n` +
    `  WHERE team IS NOT NULL AND ${within('hour', period)}\n  GROUP BY 1, 2, 3, 4`;
  if (by === 'namespace') {
    return `SELECT day, coalesce(namespace, '(none)') AS series, sum(cost) AS cost\nFROM (${hours}) h\n` +
      `GROUP BY day, series\nORDER BY day, series`;
  }
  return `SELECT h.day, coalesce(l.${by}, '(none)') AS series, sum(h.cost) AS cost\nFROM (${hours}) h\n` +
    `LEFT JOIN (SELECT cluster, namespace, workload, max(${by}) AS ${by} FROM allocations\n` +
    `  GROUP BY cluster, namespace, workload) l\n` +
    `  ON h.cluster IS NOT DISTINCT FROM l.cluster AND h.namespace IS NOT DISTINCT FROM l.namespace\n` +
    `  AND h.workload IS NOT DISTINCT FROM l.workload\n` +
    `GROUP BY h.day, series\nORDER BY h.day, series`;
}

/** Cost per day of the period, stacked by `by`, with a control to stack by another dimension. */
function costOverTime(period, by, choose) {
  const select = h('select', { id: 'breakdown', onchange: (event) => choose(event.target.value) },
    Object.entries(BREAKDOWNS).map(([value, label]) => h('option', { value, selected: value === by }, label)));
  const section = figure('Cost over time', costOverTimeQuery(period, by), (rows) => {
    const labels = days(period);
    const totals = new Map();
    for (const r of rows) totals.set(r.series, (totals.get(r.series) || 0) + (r.cost || 0));
    const named = topN([...totals].map(([key, cost]) => ({ key, cost })), { n: SERIES_SHOWN, by: 'cost', labelKey: 'key', other: (count) => `${count} others` });
    const series = named.map((r) => ({ name: r.key, values: labels.map(() => 0) }));
    // topN keeps the named series first, in order; the "others" series, if any, comes last.
    const byName = new Map(named.filter((r) => !r._other).map((r, k) => [r.key, series[k]]));
    const others = series.length > byName.size ? series[series.length - 1] : undefined;
    const dayIndex = new Map(labels.map((day, i) => [day, i]));
    for (const r of rows) {
      const index = dayIndex.get(String(r.day).slice(0, 10));
      const target = byName.get(r.series) || others;
      if (index !== undefined && target) target.values[index] += r.cost || 0;
    }
    return rows.length === 0
      ? h('p', { class: 'empty' }, 'No costs in this period.')
      : chart({ labels: labels.map(shortDay), series, kind: 'stacked', unit: 'money', legend: true, label: `Cost per day by ${BREAKDOWNS[by].toLowerCase()}` });
  }, {
    id: 'cost-over-time',
    note: by === 'team'
      ? 'Everything the ledger charges each team: direct GPU time, its own allocated idle and its share of shared costs (the totals of Spend by team).'
      : 'The GPU-hour cost of allocated time (busy and allocated idle); shared costs are spread over teams only.',
  });
  section.querySelector('.card-head').append(h('label', { for: 'breakdown', class: 'inline' }, 'By '), select);
  return section;
}

/**
 * Budgets, each with its status in the month the period ends in (at the period's last second, or
 * now if that is later), or null when this server has no budgets (an older server: 404).
 */
async function budgetsOrNull(period) {
  let budgets;
  try {
    budgets = await api('/v1/budgets');
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
  const end = new Date(`${period.to}T00:00:00Z`).getTime() - 1000;
  const at = new Date(Math.min(end, Date.now())).toISOString().replace(/\.\d+Z$/, 'Z');
  return Promise.all(budgets.map(async (b) => ({
    ...b,
    status: await api(`/v1/budgets/${encodeURIComponent(b.name)}/status?at=${at}`),
  })));
}

/** Spend → end-of-period forecast at the run rate over the days the ledger holds. */
function runRate(spend, period, builtThrough) {
  const { total, past } = elapsed(period, builtThrough);
  return past > 0 && past < total ? (spend / past) * total : spend;
}

function budgetFor(budgets, team) {
  return (budgets || []).find((b) => b.spec && b.spec.team === team);
}

function balanceCard(period) {
  const body = h('div', { class: 'figure-body' }, h('p', { class: 'loading' }, 'Loading…'));
  api(`/v1/ledger/balance?from=${period.from}&to=${period.to}`).then((b) => {
    const row = (label, value) => h('tr', {}, h('th', { scope: 'row' }, label), h('td', { class: 'num' }, format(value, 'money')));
    body.replaceChildren(
      h('p', { class: `badge ${b.balanced ? 'ok' : 'over'}`, dataset: { figure: 'balanced' } },
        b.balanced ? 'Balanced: every billed cent is accounted for' : 'Does not balance: rebuild the ledger for this period'),
      h('table', { class: 'pairs' }, h('tbody', {},
        row('Billed (effective cost)', b.billed), row('Manual costs', b.manual), row('Rate card (unbilled GPU time)', b.rate_card),
        row('Expected', b.expected), row('Accounted (cost entries)', b.accounted), row('Difference', b.difference))));
  }, (error) => body.replaceChildren(notice(error.message, 'error')));
  return h('section', { class: 'card', id: 'balance' },
    h('header', { class: 'card-head' }, h('h2', {}, 'Ledger balance'),
      h('a', { class: 'show-query', href: queryLink(accountedQuery(period)) }, 'Show query')),
    body);
}

export default async function overview({ period, me, params, navigate, builtThrough }) {
  const scoped = Boolean(me.team);
  const budgets = await budgetsOrNull(period);
  const tiles = h('div', { class: 'tiles', id: 'totals' });
  const by = Object.hasOwn(BREAKDOWNS, params.get('by') || '') ? params.get('by') : 'team';
  const overTime = costOverTime(period, by, (choice) => navigate('overview', { ...period, by: choice }));
  const teams = figure('Spend by team', teamCostsQuery(period), (rows) => {
    const withBudget = rows.map((r) => {
      const budget = budgetFor(budgets, r.team);
      const status = budget && budget.status;
      return {
        ...r,
        forecast: status && status.forecast != null ? status.forecast : runRate(r.total_cost, period, builtThrough),
        budget: budget ? budget.spec.amount : null,
        percent_used: status ? status.percent_used / 100 : null,
        _budget: budget,
        state: status ? status.state : null,
      };
    });
    return [
      rows.length === 0 ? null : chart({
        labels: rows.map((r) => r.team),
        series: [
          { name: 'Spend', values: withBudget.map((r) => r.total_cost) },
          { name: 'Forecast', values: withBudget.map((r) => r.forecast) },
          ...(budgets ? [{ name: 'Budget', values: withBudget.map((r) => r.budget) }] : []),
        ],
        unit: 'money',
        label: 'Spend, forecast and budget per team',
      }),
      table(withBudget, {
        caption: 'Spend by team',
        columns: [
          { key: 'team', label: 'Team' },
          { key: 'gpu_hours', label: 'GPU-hours', format: 'hours' },
          { key: 'direct_cost', label: 'Direct', format: 'money' },
          { key: 'allocated_idle_cost', label: 'Allocated idle', format: 'money' },
          { key: 'shared_cost', label: 'Shared', format: 'money' },
          { key: 'total_cost', label: 'Total', format: 'money' },
          { key: 'forecast', label: 'Forecast', format: 'money' },
          { key: 'budget', label: 'Budget', format: 'money' },
          { key: 'percent_used', label: 'Budget used', format: 'percent' },
          {
            key: 'budget_meter',
            label: 'Against budget',
            render: (r) => (r._budget ? statusMeter(r._budget.status, r._budget.spec.thresholds) : '—'),
          },
          { key: 'state', label: 'State', render: (r) => (r.state ? h('span', { class: `badge ${r.state}` }, r.state) : '—') },
        ],
        empty: 'No team has costs in this period.',
      }),
      budgets ? null : h('p', { class: 'note' }, 'Budgets are not available on this server.'),
    ];
  }, { id: 'teams', note: 'Budgets are monthly: their figures are for the month the period ends in. Forecast: the budget\'s own, else spend so far at the period\'s run rate.' });

  const sections = [tiles, overTime, teams, recommendationsCard(period)];
  let unallocated = Promise.resolve(null);
  if (!scoped) {
    const idle = figure('Unallocated: intentional and unexplained idle, faults', unallocatedQuery(period), (rows) => table(rows, {
      caption: 'Unallocated cost',
      columns: [
        { key: 'class', label: 'Class' }, { key: 'reason', label: 'Reason' },
        { key: 'gpu_hours', label: 'GPU-hours', format: 'hours' }, { key: 'cost', label: 'Cost', format: 'money' },
      ],
      empty: 'No unallocated GPU time in this period.',
    }), { id: 'unallocated' });
    unallocated = idle.ready;
    sections.push(idle, balanceCard(period));
  } else {
    sections.push(notice(`This token sees team ${me.team} only: unallocated idle and the ledger balance cover every team.`));
  }

  Promise.all([teams.ready, unallocated]).then(([teamRows, idleRows]) => {
    if (!teamRows) return;
    const teamTotal = teamRows.reduce((sum, r) => sum + (r.total_cost || 0), 0);
    const idleTotal = (idleRows || []).reduce((sum, r) => sum + (r.cost || 0), 0);
    tiles.replaceChildren(...[
      tile(scoped ? `Team ${me.team}` : 'Teams', format(teamTotal, 'money'), { name: 'team-total', href: queryLink(teamCostsQuery(period)) }),
      scoped ? null : tile('Unallocated', format(idleTotal, 'money'), { name: 'unallocated-total', href: queryLink(unallocatedQuery(period)) }),
      scoped ? null : tile('Total', format(teamTotal + idleTotal, 'money'), { name: 'total' }),
      tile('Forecast (run rate)', format(runRate(teamTotal + idleTotal, period, builtThrough), 'money'), { name: 'forecast' }),
    ].filter(Boolean));
    tiles.querySelector('[data-figure="team-total"]').dataset.value = teamTotal;
  });
  return sections;
}
