// A figure: a titled section whose numbers come from one SQL query, with a "Show query" link
// that opens the SQL page on the same query, so every number can be traced and re-run.

import { h, notice } from './dom.js';
import { sql } from './api.js';

/** The address of the SQL page with `query` in it. */
export const queryLink = (query) => `#/sql?${new URLSearchParams({ q: query })}`;

/**
 * A section titled `title` that runs `query` and shows `render(rows)` (an element or a list of
 * them). Returns the section at once; `.ready` resolves with the rows when drawn.
 */
export function figure(title, query, render, { id, note } = {}) {
  const body = h('div', { class: 'figure-body', 'aria-busy': 'true' }, h('p', { class: 'loading' }, 'Loading…'));
  const section = h('section', { class: 'card', id, 'aria-labelledby': id && `${id}-title` },
    h('header', { class: 'card-head' },
      h('h2', { id: id && `${id}-title` }, title),
      h('a', { class: 'show-query', href: queryLink(query) }, 'Show query')),
    note ? h('p', { class: 'note' }, note) : null,
    body);
  section.ready = sql(query).then(
    (rows) => { body.replaceChildren(...[render(rows)].flat().filter(Boolean)); return rows; },
    (error) => { body.replaceChildren(notice(error.message, 'error')); return null; },
  ).finally(() => body.setAttribute('aria-busy', 'false'));
  return section;
}

/** A big number with its label ("tile"); `data-figure` names it for tests and links. */
export function tile(label, value, { name, href } = {}) {
  return h('div', { class: 'tile', dataset: { figure: name || '' } },
    h('span', { class: 'tile-label' }, label),
    href ? h('a', { class: 'tile-value', href }, value) : h('span', { class: 'tile-value' }, value));
}
