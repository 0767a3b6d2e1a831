// Forms generated from a list of fields, for catalog objects. A field: {key, label, type
// ('text' | 'number' | 'select' | 'datetime' | 'numbers'), options, required, help}. Empty fields
// are left out of the spec, so the server's defaults apply.

import { h } from './dom.js';

function control(field, id, value) {
  const common = { id, name: field.key, required: field.required, 'aria-describedby': field.help ? `${id}-help` : undefined };
  if (field.type === 'select') {
    return h('select', common,
      field.required ? null : h('option', { value: '' }, '—'),
      field.options.map((o) => h('option', { value: o, selected: String(value ?? '') === o }, o)));
  }
  const shown = field.type === 'numbers' && Array.isArray(value) ? value.join(', ') : value ?? '';
  return h('input', {
    ...common,
    type: field.type === 'number' ? 'number' : 'text',
    step: field.type === 'number' ? 'any' : undefined,
    placeholder: field.placeholder,
    value: String(shown),
    inputmode: field.type === 'numbers' ? 'decimal' : undefined,
  });
}

/** The value of one control, typed; undefined when empty. */
function read(field, element) {
  const raw = element.value.trim();
  if (raw === '') return undefined;
  switch (field.type) {
    case 'number': return Number(raw);
    case 'numbers': return raw.split(/[\s,]+/).filter(Boolean).map(Number);
    default: return raw;
  }
}

/**
 * A form for `fields`, filled from `values`. `submit(values)` is awaited; what it throws is shown
 * beside the form (the server's message names the field).
 */
export function objectForm({ id, legend, fields, values = {}, submitLabel, submit, cancel }) {
  const controls = new Map();
  const status = h('div', { 'aria-live': 'polite', class: 'form-status' });
  const rows = fields.map((field) => {
    const cid = `${id}-${field.key}`;
    const element = control(field, cid, values[field.key]);
    if (field.readonly) element.setAttribute('readonly', '');
    controls.set(field.key, element);
    return h('div', { class: 'field' },
      h('label', { for: cid }, field.label, field.required ? h('span', { class: 'req', 'aria-hidden': 'true' }, ' *') : null),
      element,
      field.help ? h('small', { id: `${cid}-help` }, field.help) : null);
  });
  const form = h('form', {
    id,
    class: 'card object-form',
    onsubmit: async (event) => {
      event.preventDefault();
      const out = {};
      for (const field of fields) {
        const value = read(field, controls.get(field.key));
        if (value !== undefined) out[field.key] = value;
      }
      status.replaceChildren();
      try {
        await submit(out);
      } catch (error) {
        status.replaceChildren(h('p', { class: 'notice error', role: 'alert' }, error.message));
      }
    },
  },
  h('fieldset', {}, h('legend', {}, legend), h('div', { class: 'fields' }, rows)),
  h('div', { class: 'buttons' },
    h('button', { type: 'submit' }, submitLabel),
    cancel ? h('button', { type: 'button', class: 'secondary', onclick: cancel }, 'Cancel') : null),
  status);
  return form;
}
