// Budgets: monthly budgets per team, namespace or cost centre — listed with this month's spend,
// forecast and state, created, edited, deleted, and each one's status in detail.

import { h, format, notice } from '../lib/dom.js';
import { api, ApiError } from '../lib/api.js';
import { table } from '../lib/table.js';
import { objectForm } from '../lib/form.js';
import { meter } from '../lib/chart.js';

const TARGETS = ['team', 'namespace', 'cost_center'];

const FIELDS = [
  { key: 'name', label: 'Name', required: true },
  { key: 'applies_to', label: 'Applies to', type: 'select', required: true, options: TARGETS },
  { key: 'target', label: 'Team, namespace or cost centre', required: true },
  { key: 'amount', label: 'Monthly amount', type: 'number', required: true },
  { key: 'currency', label: 'Currency', required: true },
  { key: 'thresholds', label: 'Alert thresholds (%)', type: 'numbers', help: 'default 50, 80, 100' },
  { key: 'webhook', label: 'Webhook URL', help: 'optional: called once per threshold crossed' },
];

const targetOf = (spec) => TARGETS.find((t) => spec[t] != null) || 'team';

/** Form values → the budget's spec (exactly one of team, namespace, cost_center). */
function specOf(values) {
  const spec = { [values.applies_to]: values.target, amount: values.amount, currency: values.currency };
  if (values.thresholds) spec.thresholds = values.thresholds;
  if (values.webhook) spec.webhook = values.webhook;
  return spec;
}

/** Spend and forecast against the amount, with a mark at each threshold (default 50, 80, 100 %). */
export function statusMeter(status, thresholds = [50, 80, 100]) {
  if (!status) return '—';
  return meter({
    value: status.spend_to_date,
    of: status.amount,
    forecast: status.forecast,
    markers: thresholds,
    label: `${format(status.spend_to_date, 'money')} spent, ${format(status.forecast, 'money')} forecast of ${format(status.amount, 'money')}`,
  });
}

function statusCard(status, thresholds) {
  const pair = (label, value) => h('tr', {}, h('th', { scope: 'row' }, label), h('td', {}, value));
  return h('section', { class: 'card', id: 'budget-status', 'aria-labelledby': 'budget-status-title' },
    h('h2', { id: 'budget-status-title' }, `${status.budget}, ${status.month}`),
    statusMeter(status, thresholds),
    h('table', { class: 'pairs' }, h('tbody', {},
      pair('Budget', `${format(status.amount, 'money')} ${status.currency}`),
      pair('Spend to date', format(status.spend_to_date, 'money')),
      pair('Forecast (end of month)', format(status.forecast, 'money')),
      pair('Used', `${format(status.percent_used, 'number')} %`),
      pair('State', h('span', { class: `badge ${status.state}` }, status.state)),
      pair('Thresholds crossed', (status.thresholds_crossed || []).map((t) => `${t} %`).join(', ') || 'none'))));
}

export default async function budgets({ me }) {
  const canWrite = me.scope === 'admin';
  const list = h('div', { id: 'budget-list' });
  const editor = h('div', { id: 'budget-editor' });
  const detail = h('div', { id: 'budget-detail', 'aria-live': 'polite' });

  async function refresh(message) {
    const rows = (await api('/v1/budgets')).map((b) => ({
      name: b.name,
      applies_to: targetOf(b.spec),
      target: b.spec[targetOf(b.spec)],
      amount: b.spec.amount,
      currency: b.spec.currency,
      spend_to_date: b.status ? b.status.spend_to_date : null,
      forecast: b.status ? b.status.forecast : null,
      state: b.status ? b.status.state : null,
      _budget: b,
    }));
    list.replaceChildren(...[
      message ? notice(message) : null,
      table(rows, {
        caption: 'Budgets',
        columns: [
          { key: 'name', label: 'Name' },
          { key: 'applies_to', label: 'Applies to' },
          { key: 'target', label: 'Target' },
          { key: 'amount', label: 'Amount', format: 'money' },
          { key: 'currency', label: 'Currency' },
          { key: 'spend_to_date', label: 'Spend to date', format: 'money' },
          { key: 'forecast', label: 'Forecast', format: 'money' },
          { key: 'state', label: 'State', render: (r) => (r.state ? h('span', { class: `badge ${r.state}` }, r.state) : '—') },
          { key: 'meter', label: 'This month', render: (r) => statusMeter(r._budget.status, r._budget.spec.thresholds) },
        ],
        actions: (row) => [
          h('button', { type: 'button', class: 'small', onclick: () => showStatus(row._budget) }, 'Status', h('span', { class: 'sr-only' }, ` of ${row.name}`)),
          canWrite ? h('button', { type: 'button', class: 'small', onclick: () => edit(row._budget) }, 'Edit', h('span', { class: 'sr-only' }, ` ${row.name}`)) : null,
          canWrite ? h('button', { type: 'button', class: 'small danger', onclick: () => remove(row.name) }, 'Delete', h('span', { class: 'sr-only' }, ` ${row.name}`)) : null,
        ],
        empty: 'No budgets yet.',
      }),
    ].filter(Boolean));
  }

  async function showStatus(budget) {
    try {
      const status = await api(`/v1/budgets/${encodeURIComponent(budget.name)}/status`);
      detail.replaceChildren(statusCard(status, budget.spec.thresholds));
    } catch (error) {
      detail.replaceChildren(notice(error.message, 'error'));
    }
  }

  async function remove(name) {
    if (!window.confirm(`Delete the budget ${name}?`)) return;
    await api(`/v1/budgets/${encodeURIComponent(name)}`, { method: 'DELETE' });
    detail.replaceChildren();
    await refresh(`Deleted ${name}.`);
  }

  function edit(budget) {
    const existing = Boolean(budget);
    const values = existing
      ? { ...budget.spec, name: budget.name, applies_to: targetOf(budget.spec), target: budget.spec[targetOf(budget.spec)] }
      : { currency: 'USD', thresholds: [50, 80, 100], applies_to: 'team' };
    editor.replaceChildren(objectForm({
      id: 'budget-form',
      legend: existing ? `Edit ${budget.name}` : 'New budget',
      fields: FIELDS.map((f) => (f.key === 'name' && existing ? { ...f, readonly: true } : f)),
      values,
      submitLabel: existing ? 'Save' : 'Create',
      cancel: () => editor.replaceChildren(),
      submit: async (out) => {
        if (existing) {
          await api(`/v1/budgets/${encodeURIComponent(budget.name)}`, { method: 'PUT', body: { spec: specOf(out) } });
        } else {
          await api('/v1/budgets', { method: 'POST', body: { name: out.name, spec: specOf(out) } });
        }
        editor.replaceChildren();
        await refresh(`${existing ? 'Saved' : 'Created'} ${out.name}.`);
      },
    }));
    editor.querySelector('input').focus();
  }

  try {
    await refresh();
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      return notice('Budgets are not available on this server.', 'error');
    }
    throw error;
  }
  return [
    h('p', { class: 'note' }, 'Monthly budgets with spend to date from the ledger and an end-of-month forecast from the run rate. Guardrails warn; nothing stops a workload.'),
    canWrite ? h('button', { type: 'button', id: 'new-budget', onclick: () => edit(null) }, 'New budget') : h('p', { class: 'note' }, 'Changing budgets needs an admin token.'),
    editor,
    detail,
    list,
  ];
}
