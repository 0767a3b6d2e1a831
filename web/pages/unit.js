// Unit economics: what a million SLO-met tokens and one successful request cost, per model, how
// that moved day by day, and how much of the money bought requests that missed their SLO.

import { h } from '../lib/dom.js';
import { args, days } from '../lib/period.js';
import { figure } from '../lib/figure.js';
import { table } from '../lib/table.js';
import { chart } from '../lib/chart.js';

export const byModelQuery = (period) =>
  `SELECT model,\n  sum(requests) AS requests,\n  sum(successful_slo_met_requests) AS slo_met_requests,\n` +
  `  sum(loaded_cost) AS cost,\n` +
  `  sum(loaded_cost) / nullif(CAST(sum(tokens_slo_met) AS DOUBLE), 0) * 1e6 AS cost_per_1m_slo_met_tokens,\n` +
  `  sum(loaded_cost) / nullif(CAST(sum(successful_slo_met_requests) AS DOUBLE), 0) AS cost_per_request,\n` +
  `  CAST(sum(slo_missed_requests) AS DOUBLE) / nullif(sum(requests), 0) AS slo_missed_share,\n` +
  `  sum(slo_missed_cost) AS slo_missed_cost\n` +
  `FROM unit_economics(${args(period)})\nGROUP BY model\nORDER BY cost DESC`;

const trendQuery = (period) =>
  `SELECT day, model,\n  sum(loaded_cost) / nullif(CAST(sum(tokens_slo_met) AS DOUBLE), 0) * 1e6 AS cost_per_1m_slo_met_tokens\n` +
  `FROM unit_economics_daily(${args(period)})\nGROUP BY day, model\nORDER BY day, model`;

export default async function unit({ period }) {
  const labels = days(period);
  return [
    figure('By model', byModelQuery(period), (rows) => table(rows, {
      caption: 'Unit economics by model',
      columns: [
        { key: 'model', label: 'Model' },
        { key: 'requests', label: 'Requests', format: 'int' },
        { key: 'slo_met_requests', label: 'SLO-met', format: 'int' },
        { key: 'cost', label: 'Cost', format: 'money' },
        { key: 'cost_per_1m_slo_met_tokens', label: 'Per 1M SLO-met tokens', format: 'money' },
        { key: 'cost_per_request', label: 'Per successful request', format: 'money' },
        { key: 'slo_missed_share', label: 'SLO missed', format: 'percent' },
        { key: 'slo_missed_cost', label: 'Cost of missed', format: 'money' },
      ],
      empty: 'No gateway requests in this period.',
    }), { id: 'unit-models', note: 'Only requests that succeeded and met their SLO count as output: throughput that breaks the SLO is not a saving.' }),
    figure('Cost per 1M SLO-met tokens, per day', trendQuery(period), (rows) => {
      if (rows.length === 0) return h('p', { class: 'empty' }, 'No gateway requests in this period.');
      const models = [...new Set(rows.map((r) => r.model))];
      const at = new Map(rows.map((r) => [`${String(r.day).slice(0, 10)} ${r.model}`, r.cost_per_1m_slo_met_tokens]));
      return chart({
        labels: labels.map((d) => d.slice(5)),
        series: models.map((m) => ({ name: m || '(no model)', values: labels.map((d) => at.get(`${d} ${m}`) ?? null) })),
        kind: 'line',
        unit: 'money',
        label: 'Cost per 1M SLO-met tokens per day and model',
      });
    }, { id: 'unit-trend' }),
  ];
}
