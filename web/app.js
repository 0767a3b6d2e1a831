// The dashboard's entry point: sign-in, the header, and a router over the address's hash
// (#/page?query): every view has an address that can be shared, bookmarked and reloaded.

import { h, notice } from './lib/dom.js';
import { session, me, ledgerStatus } from './lib/api.js';
import { defaultPeriod, periodOf, picker } from './lib/period.js';
import overview from './pages/overview.js';
import idle from './pages/idle.js';
import unit from './pages/unit.js';
import training from './pages/training.js';
import reports from './pages/reports.js';
import budgets from './pages/budgets.js';
import { reservations, valueMappings } from './pages/objects.js';
import sqlPage from './pages/sql.js';

/** page → [title, render, whether it reports on a period]. */
const PAGES = {
  overview: ['Overview', overview, true],
  idle: ['Idle GPUs', idle, true],
  unit: ['Unit economics', unit, true],
  training: ['Training', training, true],
  reports: ['Weekly reports', reports, false],
  budgets: ['Budgets', budgets, false],
  value_mapping: ['Value mappings', valueMappings, false],
  reservation: ['Reservations', reservations, false],
  sql: ['SQL', sqlPage, false],
};

const main = document.getElementById('main');
let who = null; // {scope, team} of the signed-in token

function parseHash() {
  const [path, query = ''] = location.hash.replace(/^#\/?/, '').split('?');
  return { page: PAGES[path] ? path : 'overview', params: new URLSearchParams(query) };
}

/** Goes to `page` with `params` (an object or URLSearchParams). */
export function navigate(page, params = {}) {
  const query = new URLSearchParams(params).toString();
  location.hash = `#/${page}${query ? `?${query}` : ''}`;
}

function signInForm(message) {
  const input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', required: true, 'aria-describedby': 'token-help' });
  const status = h('div', { 'aria-live': 'polite' }, message ? notice(message, 'error') : null);
  const form = h('form', {
    class: 'card sign-in',
    onsubmit: async (event) => {
      event.preventDefault();
      const token = input.value.trim();
      try {
        who = await me(token);
        session.start(token);
        await route();
      } catch (error) {
        status.replaceChildren(notice(error.status === 401 ? 'That token is not valid (unknown or revoked).' : error.message, 'error'));
      }
    },
  },
  h('h1', {}, 'Sign in'),
  h('label', { for: 'token' }, 'API token'),
  input,
  h('p', { id: 'token-help', class: 'note' },
    'A token from ', h('code', {}, 'gpuledger token create --scope read'),
    '. It is kept in this tab only and sent to this server only.'),
  h('button', { type: 'submit' }, 'Sign in'),
  status);
  main.replaceChildren(form);
  document.getElementById('nav').hidden = true;
  document.getElementById('who').hidden = true;
  document.title = 'Sign in · gpuledger';
  input.focus();
}

function showWho() {
  document.getElementById('who-text').textContent =
    `${who.scope} token${who.team ? ` · team ${who.team}` : ' · all teams'}`;
  document.getElementById('who').hidden = false;
  document.getElementById('nav').hidden = false;
}

/** "Ledger as of <UTC minute>" in the header, and how far it is behind when it is. */
function showLedgerAsOf(status) {
  const shown = document.getElementById('ledger-as-of');
  if (!status) {
    shown.textContent = '';
    return;
  }
  if (!status.last_build_at) {
    shown.textContent = 'Ledger not built yet';
    return;
  }
  const at = `${status.last_build_at.slice(0, 10)} ${status.last_build_at.slice(11, 16)} UTC`;
  // A live ledger is up to one interval behind by design; say so only past two.
  const behind = status.lag_seconds > Math.max(2 * status.interval_seconds, 120)
    ? ` · ${Math.round(status.lag_seconds / 60)} min behind its inputs` : '';
  shown.textContent = `Ledger as of ${at}${behind}`;
  shown.title = `Built through ${status.built_through}; newest input ${status.newest_input_at || 'none'}`;
}

async function route() {
  if (!session.token()) return signInForm();
  if (!who) {
    try {
      who = await me();
    } catch (error) {
      return signInForm(error.status === 401 ? 'Your session ended: sign in again.' : error.message);
    }
  }
  showWho();
  // Until this route is drawn, `main` says which one it shows: none.
  delete main.dataset.route;
  // The header's status is shown when it comes; a page waits for it only to pick its default
  // period, when the address names none.
  const status = ledgerStatus().catch(() => null);
  status.then(showLedgerAsOf);
  const { page, params } = parseHash();
  const [title, render, periodic] = PAGES[page];
  for (const link of document.querySelectorAll('#nav a')) {
    if (link.getAttribute('href') === `#/${page}`) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  document.title = `${title} · gpuledger`;
  const period = periodOf(params) || defaultPeriod((await status)?.built_through);
  const ctx = {
    params,
    period,
    builtThrough: (await status)?.built_through,
    me: who,
    navigate,
    reload: route,
  };
  const heading = h('div', { class: 'page-head' },
    h('h1', {}, title),
    periodic ? picker(period, (p) => navigate(page, { ...Object.fromEntries(params), ...p })) : null);
  const content = h('div', { class: 'page' });
  main.replaceChildren(heading, content);
  try {
    content.append(...[await render(ctx)].flat().filter(Boolean));
  } catch (error) {
    content.append(notice(error.message, 'error'));
  }
  main.dataset.route = location.hash;
}

document.getElementById('sign-out').addEventListener('click', () => {
  session.end();
  who = null;
  location.hash = '#/overview';
  signInForm();
});
window.addEventListener('gpuledger:signed-out', () => { who = null; signInForm('Your token is no longer valid: sign in again.'); });
window.addEventListener('hashchange', () => { route().then(() => main.focus({ preventScroll: true })); });
route();
