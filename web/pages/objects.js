// Catalog objects people edit by hand — reservations and value mappings — listed, created,
// edited and deleted over /v1/objects/{kind}. The server validates; its message names the field.

import { h, notice } from '../lib/dom.js';
import { api } from '../lib/api.js';
import { table } from '../lib/table.js';
import { objectForm } from '../lib/form.js';

const RESERVATION = {
  kind: 'reservation',
  noun: 'reservation',
  // A reservation is named by its document, not its spec.
  nameInSpec: false,
  fields: [
    { key: 'cluster', label: 'Cluster', required: true },
    { key: 'node', label: 'Node', required: true },
    { key: 'gpu_indices', label: 'GPU indices', type: 'numbers', help: 'e.g. 6, 7; empty reserves every GPU of the node' },
    { key: 'from', label: 'From', required: true, placeholder: '2026-11-01T00:00:00Z', help: 'RFC 3339, UTC' },
    { key: 'to', label: 'To', required: true, placeholder: '2026-12-01T00:00:00Z', help: 'RFC 3339, exclusive' },
    { key: 'reason', label: 'Reason', type: 'select', required: true, options: ['ha_redundancy', 'release_overlap', 'gang_wait', 'warm_pool', 'maintenance', 'latency_guarantee'] },
    { key: 'note', label: 'Note' },
  ],
  columns: ['cluster', 'node', 'gpu_indices', 'from', 'to', 'reason', 'note'],
  // A fleet holds many: a line per reason first, with how many reservations and nodes it covers.
  groupBy: 'reason',
  intro: 'GPUs held idle on purpose: their idle time is reserved:<reason>, shown apart from unexplained waste.',
};

const VALUE_MAPPING = {
  kind: 'value_mapping',
  noun: 'value mapping',
  nameInSpec: true,
  fields: [
    { key: 'name', label: 'Name', required: true },
    { key: 'product_line', label: 'Product line', required: true },
    { key: 'metric', label: 'Metric', type: 'select', required: true, options: ['p50_latency_ms', 'p95_latency_ms', 'p99_latency_ms', 'p50_ttft_ms', 'p95_ttft_ms', 'p99_ttft_ms', 'success_rate', 'slo_met_share', 'requests', 'tokens'] },
    { key: 'at_most', label: 'At most', type: 'number' },
    { key: 'at_least', label: 'At least', type: 'number' },
    { key: 'model', label: 'Model' },
    { key: 'team', label: 'Team' },
    { key: 'namespace', label: 'Namespace' },
    { key: 'event', label: 'Business event', required: true },
    { key: 'counts', label: 'Counts', type: 'select', options: ['requests', 'slo_met_requests'] },
    { key: 'value', label: 'Value', type: 'number', required: true },
    { key: 'per', label: 'Per (events)', type: 'number', help: 'default 1' },
    { key: 'currency', label: 'Currency', placeholder: 'USD' },
  ],
  columns: ['product_line', 'metric', 'at_most', 'at_least', 'event', 'value', 'per', 'currency'],
  intro: 'A technical metric and a condition → a business event → a value per unit (the value report sets it beside cost).',
};

function page(def) {
  return async function objectsPage({ me }) {
    const canWrite = me.scope === 'admin';
    const list = h('div', { id: `${def.kind}-list` });
    const editor = h('div', { id: `${def.kind}-editor` });
    const base = `/v1/objects/${def.kind}`;
    let allRows = [];
    let shownMessage = null;
    const filter = h('input', {
      type: 'search', id: `${def.kind}-filter`, placeholder: 'name, node, reason…',
      oninput: () => draw(),
    });

    /** One line per value of `def.groupBy`: how many objects, and on how many nodes. */
    function groups(rows) {
      const by = new Map();
      for (const r of rows) {
        const key = r[def.groupBy] ?? '—';
        const group = by.get(key) || { [def.groupBy]: key, count: 0, nodes: new Set() };
        group.count += 1;
        if (r.node) group.nodes.add(`${r.cluster}/${r.node}`);
        by.set(key, group);
      }
      return [...by.values()].map((g) => ({ ...g, nodes: g.nodes.size })).sort((a, b) => b.count - a.count);
    }

    async function refresh(message) {
      const objects = await api(base);
      allRows = objects.map((o) => ({ name: o.name, ...Object.fromEntries(def.columns.map((c) => [c, o.spec[c]])), _object: o }));
      shownMessage = message;
      draw();
    }

    function draw() {
      const needle = filter.value.trim().toLowerCase();
      const rows = needle
        ? allRows.filter((r) => [r.name, ...def.columns.map((c) => r[c])].some((v) => v != null && String(v).toLowerCase().includes(needle)))
        : allRows;
      list.replaceChildren(...[
        shownMessage ? notice(shownMessage) : null,
        def.groupBy && rows.length ? h('div', { id: `${def.kind}-groups` }, table(groups(rows), {
          caption: `${def.noun}s by ${def.groupBy}`,
          columns: [
            { key: def.groupBy, label: def.groupBy.replace(/_/g, ' ') },
            { key: 'count', label: `${def.noun}s`, format: 'int' },
            { key: 'nodes', label: 'nodes', format: 'int' },
          ],
        })) : null,
        needle ? h('p', { class: 'note', dataset: { shown: rows.length } }, `${rows.length} of ${allRows.length} ${def.noun}s match "${filter.value.trim()}".`) : null,
        h('div', { id: `${def.kind}-table` }, table(rows, {
          caption: `${def.noun}s`,
          columns: [{ key: 'name', label: 'Name' }, ...def.columns.map((c) => ({
            key: c, label: c.replace(/_/g, ' '), format: typeof rows[0]?.[c] === 'number' ? 'decimal' : undefined,
          }))],
          actions: canWrite ? (row) => [
            h('button', { type: 'button', class: 'small', onclick: () => edit(row._object) }, 'Edit', h('span', { class: 'sr-only' }, ` ${row.name}`)),
            h('button', { type: 'button', class: 'small danger', onclick: () => remove(row.name) }, 'Delete', h('span', { class: 'sr-only' }, ` ${row.name}`)),
          ] : undefined,
          empty: needle ? `No ${def.noun}s match.` : `No ${def.noun}s yet.`,
        })),
      ].filter(Boolean));
    }

    async function remove(name) {
      if (!window.confirm(`Delete the ${def.noun} ${name}?`)) return;
      await api(`${base}/${encodeURIComponent(name)}`, { method: 'DELETE' });
      await refresh(`Deleted ${name}.`);
    }

    function edit(object) {
      const existing = Boolean(object);
      const fields = def.nameInSpec
        ? def.fields.map((f) => (f.key === 'name' && existing ? { ...f, readonly: true } : f))
        : [{ key: '__name', label: 'Name', required: true, readonly: existing }, ...def.fields];
      const values = existing ? { ...object.spec, __name: object.name } : {};
      editor.replaceChildren(objectForm({
        id: `${def.kind}-form`,
        legend: existing ? `Edit ${object.name}` : `New ${def.noun}`,
        fields,
        values,
        submitLabel: existing ? 'Save' : 'Create',
        cancel: () => editor.replaceChildren(),
        submit: async (out) => {
          const name = def.nameInSpec ? out.name : out.__name;
          delete out.__name;
          if (existing) {
            await api(`${base}/${encodeURIComponent(object.name)}`, { method: 'PUT', body: { spec: out } });
          } else {
            await api(base, { method: 'POST', body: def.nameInSpec ? { spec: out } : { name, spec: out } });
          }
          editor.replaceChildren();
          await refresh(`${existing ? 'Saved' : 'Created'} ${name}.`);
        },
      }));
      editor.querySelector('input, select').focus();
    }

    await refresh();
    return [
      h('p', { class: 'note' }, def.intro),
      canWrite ? h('button', { type: 'button', onclick: () => edit(null) }, `New ${def.noun}`) : h('p', { class: 'note' }, 'Changing these needs an admin token.'),
      editor,
      h('p', { class: 'filter' }, h('label', { for: `${def.kind}-filter` }, 'Filter '), filter),
      list,
    ];
  };
}

export const reservations = page(RESERVATION);
export const valueMappings = page(VALUE_MAPPING);
