// Training: what each training workload's GPU time bought — effective GPU-hours (not later
// recomputed) against the hours lost to failures and preemptions, and what that loss cost.

import { h, format } from '../lib/dom.js';
import { args } from '../lib/period.js';
import { figure, tile } from '../lib/figure.js';
import { table } from '../lib/table.js';
import { chart } from '../lib/chart.js';
import { topN } from '../lib/top.js';

/** Workloads shown by name, by cost; the rest are one "other" row. */
const SHOWN = 20;

export const trainingQuery = (period) =>
  `SELECT team, namespace, workload, runs, succeeded, failed, preempted, success_rate,\n` +
  `  gpu_hours, effective_gpu_hours, cost, failure_loss, recompute_cost, cost_per_1m_samples, cost_per_1b_tokens\n` +
  `FROM training_economics(${args(period)})\nORDER BY cost DESC`;

export default async function training({ period }) {
  return figure('Training workloads', trainingQuery(period), (rows) => {
    const sum = (key) => rows.reduce((total, r) => total + (r[key] || 0), 0);
    const shown = topN(rows, {
      n: SHOWN,
      by: 'cost',
      labelKey: 'workload',
      other: (count) => `${count} other workloads`,
      sums: ['runs', 'succeeded', 'failed', 'preempted', 'gpu_hours', 'effective_gpu_hours', 'cost', 'failure_loss', 'recompute_cost'],
    });
    return [
      h('div', { class: 'tiles' },
        tile('Effective GPU-hours', format(sum('effective_gpu_hours'), 'hours'), { name: 'effective-gpu-hours' }),
        tile('Lost GPU-hours', format(sum('gpu_hours') - sum('effective_gpu_hours'), 'hours')),
        tile('Failure loss', format(sum('failure_loss'), 'money'), { name: 'failure-loss' }),
        tile('Recompute after preemption', format(sum('recompute_cost'), 'money'))),
      shown.length ? chart({
        labels: shown.map((r) => r.workload),
        series: [
          { name: 'Effective GPU-hours', values: shown.map((r) => r.effective_gpu_hours) },
          { name: 'Lost GPU-hours', values: shown.map((r) => (r.gpu_hours || 0) - (r.effective_gpu_hours || 0)) },
        ],
        kind: 'stacked',
        unit: 'hours',
        label: `Effective and lost GPU-hours of the ${Math.min(SHOWN, rows.length)} costliest training workloads${rows.length > SHOWN ? ' and the rest' : ''}`,
      }) : null,
      table(shown, {
        caption: 'Training economics',
        columns: [
          { key: 'team', label: 'Team' }, { key: 'workload', label: 'Workload' },
          { key: 'runs', label: 'Runs', format: 'int' }, { key: 'failed', label: 'Failed', format: 'int' },
          { key: 'preempted', label: 'Preempted', format: 'int' }, { key: 'success_rate', label: 'Success', format: 'percent' },
          { key: 'gpu_hours', label: 'GPU-hours', format: 'hours' }, { key: 'effective_gpu_hours', label: 'Effective', format: 'hours' },
          { key: 'cost', label: 'Cost', format: 'money' }, { key: 'failure_loss', label: 'Failure loss', format: 'money' },
          { key: 'recompute_cost', label: 'Recompute', format: 'money' }, { key: 'cost_per_1m_samples', label: 'Per 1M samples', format: 'money' },
        ],
        empty: 'No training workloads in this period.',
      }),
    ];
  }, { id: 'training', note: 'Failure loss: GPU time after the last checkpoint of a failed run × GPUs × the GPU-hour price.' });
}
