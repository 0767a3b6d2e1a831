// The dashboard in a real browser (Debian's chromium, driven by playwright-core), against a
// `gpuledger serve` loaded with the worked example of docs/ledger.md. tests/web.rs starts the
// server and runs this script; it prints what it checked and exits non-zero on the first failure.
//
// Environment: GPULEDGER_URL, ADMIN_TOKEN, TEAM_TOKEN (a read token of team nlp),
// SCREENSHOTS (a directory), CHROMIUM (default /usr/bin/chromium).

import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { topN } from '../../web/lib/top.js';
import { elapsed } from '../../web/lib/period.js';

const base = process.env.GPULEDGER_URL;
const admin = process.env.ADMIN_TOKEN;
const team = process.env.TEAM_TOKEN;
const shots = process.env.SCREENSHOTS;
// The worked example is one day, 2026-11-02: every page shows November 2026.
const PERIOD = 'from=2026-11-01&to=2026-12-01';

mkdirSync(shots, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), 'gpuledger-chromium-'));

async function apiCall(path, { token = admin, method = 'GET', body } = {}) {
  const response = await fetch(base + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: response.status, body: response.status === 204 ? null : await response.json().catch(() => null) };
}

const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 900 },
  acceptDownloads: true,
});

/** Console errors and uncaught exceptions, per page. */
const problems = [];
function watch(page, who) {
  page.on('console', (message) => {
    if (message.type() !== 'error') return;
    const url = message.location().url || '';
    problems.push(`[${who} ${page.url()}] console: ${message.text()} ${url}`);
  });
  page.on('pageerror', (error) => problems.push(`[${who} ${page.url()}] exception: ${error.message}`));
}

/** Opens a page of the dashboard and waits until it is drawn and every figure has loaded. */
async function open(page, hash) {
  await page.goto(`${base}/#/${hash}`);
  // `main` names the route it shows once drawn, so a test never reads the page before.
  await page.waitForFunction((route) => document.getElementById('main').dataset.route === route, `#/${hash}`);
  await page.waitForFunction(() => !document.querySelector('[aria-busy="true"], .loading'));
  // A missing value shows as a dash, never as the word a JavaScript null prints as.
  assert.ok(!/\bnull\b|undefined|NaN/.test(await page.locator('main').innerText()), `${hash} shows null, undefined or NaN`);
}

async function signIn(page, token) {
  await page.goto(`${base}/#/overview?${PERIOD}`);
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#who-text').waitFor();
}

/** How far the page is wider than the window, and the outermost elements that reach past it. */
async function overflow(page) {
  return page.evaluate(() => {
    const width = window.innerWidth;
    const past = [...document.querySelectorAll('body *')]
      .filter((e) => e.getBoundingClientRect().right > width + 1 && !e.parentElement.closest('.table-wrap'))
      .filter((e, _, all) => !all.includes(e.parentElement))
      .slice(0, 5)
      .map((e) => `${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}${e.className && typeof e.className === 'string' ? `.${e.className.split(' ').join('.')}` : ''} (${Math.round(e.getBoundingClientRect().right - width)}px)`);
    return { wider: document.documentElement.scrollWidth - width, past };
  });
}

let checks = 0;
const ok = (what) => { checks += 1; console.log(`ok ${checks} - ${what}`); };

try {
  // Sign in, with a wrong token first.
  const page = context.pages()[0] || await context.newPage();
  watch(page, 'admin');
  await page.goto(`${base}/#/overview?${PERIOD}`);
  await page.getByLabel('API token').fill('glt_0000_wrong');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('That token is not valid').waitFor();
  assert.ok(await page.locator('#sign-out').isHidden(), 'the sign-in page offers no Sign out');
  problems.length = 0; // the 401 of the wrong token is this step's point
  await signIn(page, admin);
  assert.equal(await page.locator('#who-text').textContent(), 'admin token · all teams');
  // The worked example's ledger was built just before serve started: minutes ago at most.
  await page.getByText(/^Ledger as of \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/).waitFor();
  ok('signs in with an admin token (and refuses a wrong one); the header says when the ledger was built');

  // Overview: the totals are the API's, for the query the page links to.
  await open(page, `overview?${PERIOD}`);
  const shown = await page.$$eval('#teams tbody tr', (rows) => rows.map((row) => [
    row.querySelector('[data-key="team"]').dataset.value,
    Number(row.querySelector('[data-key="total_cost"]').dataset.value),
  ]));
  const link = await page.locator('#teams .show-query').getAttribute('href');
  const query = new URLSearchParams(link.split('?')[1]).get('q');
  const answer = await apiCall('/v1/sql', { method: 'POST', body: { query } });
  assert.equal(answer.status, 200);
  assert.deepEqual(shown, answer.body.map((r) => [r.team, r.total_cost]));
  // By hand (docs/ledger.md): nlp 40.728, vision 23.064, unattributed 5.208.
  assert.deepEqual(shown.map(([t, c]) => [t, Math.round(c * 1000) / 1000]),
    [['nlp', 40.728], ['vision', 23.064], ['unattributed', 5.208]]);
  const teamTotal = Number(await page.locator('[data-figure="team-total"]').getAttribute('data-value'));
  assert.ok(Math.abs(teamTotal - 69.0) < 1e-9, `team total ${teamTotal}`);
  // Teams 69.00 + unallocated 49.20 (reserved 9.60, unexplained 33.20, fault 6.40) = 118.20.
  assert.equal(await page.locator('[data-figure="total"] .tile-value').textContent(), '$118.20');
  assert.match(await page.locator('[data-figure="balanced"]').textContent(), /^Balanced/);
  assert.deepEqual(await page.$$eval('#unallocated tbody [data-key="class"]', (cells) => cells.map((c) => c.dataset.value)),
    ['unexplained', 'reserved', 'fault']);
  await page.screenshot({ path: join(shots, 'overview.png'), fullPage: true });

  // Every money figure carries its currency, with cents; no "-$0.00".
  const moneyCells = await page.$$eval('#teams td[data-key$="_cost"], #unallocated td[data-key="cost"], #balance td.num',
    (cells) => cells.map((c) => c.textContent));
  assert.ok(moneyCells.length >= 15, `${moneyCells.length} money cells`);
  for (const text of moneyCells) assert.match(text, /^(-?\$\d{1,3}(,\d{3})*\.\d{2}|—)$/, `money cell ${text}`);
  assert.ok(!moneyCells.includes('-$0.00'));

  // Cost over time, by team: one series per team of Spend by team, and the same totals.
  const legend = () => page.$$eval('#cost-over-time .legend li', (items) => items.map((li) => [li.dataset.series, Number(li.dataset.total)]));
  const byTeam = await legend();
  assert.deepEqual(byTeam.map(([name]) => name), shown.map(([t]) => t));
  for (const [name, total] of byTeam) {
    const expected = shown.find(([t]) => t === name)[1];
    assert.ok(Math.abs(total - expected) < 1e-9, `${name}: chart ${total}, team_costs ${expected}`);
  }
  assert.ok(await page.locator('#cost-over-time svg.chart rect.mark').count() >= 3);
  // By namespace: the GPU-hour cost of allocated time, namespace by namespace.
  await page.locator('#breakdown').selectOption('namespace');
  await page.waitForURL(/by=namespace/);
  // The page is drawn anew: wait for the namespace figure (its note says what it counts).
  await page.waitForFunction(() => /GPU-hour cost/.test(document.querySelector('#cost-over-time .note')?.textContent || '')
    && document.querySelector('#cost-over-time .legend li') && !document.querySelector('[aria-busy="true"], .loading'));
  const byNamespace = await legend();
  assert.notDeepEqual(byNamespace.map(([name]) => name), byTeam.map(([name]) => name));
  assert.ok(byNamespace.length >= 1);
  const namespaceTotal = byNamespace.reduce((sum, [, total]) => sum + total, 0);
  assert.ok(namespaceTotal > 0 && namespaceTotal <= teamTotal + 1e-9, `namespaces ${namespaceTotal} of ${teamTotal}`);
  assert.equal(await page.locator('#breakdown').inputValue(), 'namespace');
  await open(page, `overview?${PERIOD}`);
  ok('overview: money with currency; cost over time has one series per team with team_costs totals, and switches to namespaces');

  // Recommended actions (recommendations(from, to)): n1's unexplained idle 32.00, vision's idle
  // allocation 3.20, n2's unexplained idle 1.20; 36.40 in all, the period's waste.
  const actions = await page.$$eval('#recommendations tbody tr', (rows) => rows.map((row) => [
    row.querySelector('[data-key="owner"]').dataset.value, Number(row.querySelector('[data-key="cost"]').dataset.value)]));
  assert.deepEqual(actions.map(([owner, cost]) => [owner, Math.round(cost * 100) / 100]),
    [['platform', 32], ['vision', 3.2], ['platform', 1.2]]);
  const reclaimable = Number(await page.locator('[data-figure="recommendations-total"]').getAttribute('data-value'));
  assert.ok(Math.abs(reclaimable - 36.4) < 1e-9, `recommendations total ${reclaimable}`);
  assert.equal(await page.locator('[data-figure="recommendations-total"]').textContent(), '3 actions, $36.40 in this period.');
  ok('overview: the recommended actions, with owners, add up to the period\'s waste');

  // Opened without a period, a page shows the last 30 days that hold data: the worked example
  // is 2026-11-02 alone, so 2026-10-04 to 2026-11-02, with its 118.20.
  await open(page, 'overview');
  assert.equal(await page.getByLabel('From').inputValue(), '2026-10-04');
  assert.equal(await page.getByLabel('to', { exact: true }).inputValue(), '2026-11-02');
  await page.locator('[data-figure="total"]').waitFor();
  assert.equal(await page.locator('[data-figure="total"] .tile-value').textContent(), '$118.20');
  ok('a page opened without a period shows the last 30 days that hold data');

  // Sorting: Total ascending, then descending.
  const order = () => page.$$eval('#teams tbody [data-key="team"]', (cells) => cells.map((c) => c.dataset.value));
  await page.locator('#teams th[data-key="total_cost"] button').click();
  assert.deepEqual(await order(), ['unattributed', 'vision', 'nlp']);
  assert.equal(await page.locator('#teams th[data-key="total_cost"]').getAttribute('aria-sort'), 'ascending');
  await page.locator('#teams th[data-key="total_cost"] button').press('Enter');
  assert.deepEqual(await order(), ['nlp', 'vision', 'unattributed']);

  // The period picker: 2 November alone (the last day inclusive) has the same 118.20.
  await page.getByLabel('From').fill('2026-11-02');
  await page.getByLabel('to', { exact: true }).fill('2026-11-02');
  await page.getByRole('button', { name: 'Show', exact: true }).click();
  await page.waitForURL(/from=2026-11-02&to=2026-11-03/);
  await page.locator('[data-figure="total"]').waitFor();
  assert.equal(await page.locator('[data-figure="total"] .tile-value').textContent(), '$118.20');
  ok('overview: team totals equal POST /v1/sql of the linked query; $118.20 in all; balanced; sorts; the period picker');

  // "Show query" opens the SQL page on the same numbers; its CSV downloads.
  await page.locator('#teams .show-query').click();
  await page.locator('#sql-result table').waitFor();
  assert.equal(await page.locator('#sql-result tbody tr').count(), 3);
  const [csv] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download CSV' }).click()]);
  const text = readFileSync(await csv.path(), 'utf8');
  assert.equal(text.split('\n')[0], 'team,gpu_hours,direct_cost,allocated_idle_cost,shared_cost,total_cost');
  assert.equal(text.trim().split('\n').length, 4);
  await page.screenshot({ path: join(shots, 'sql.png'), fullPage: true });
  ok('show query opens the SQL page with the same 3 rows; CSV downloads with a header and 3 rows');

  // The SQL page lists the tables with their columns, and example queries that run.
  await page.locator('#sql-schema [data-table="gpu_hours"]').waitFor();
  const listed = await page.$$eval('#sql-schema [data-table]', (items) => items.map((li) => li.dataset.table));
  for (const name of ['allocations', 'billing_lines', 'cost_entries', 'gpu_hours', 'gpu_samples', 'scheduler_events', 'token_usage']) {
    assert.ok(listed.includes(name), `the schema lists ${name}: ${listed}`);
  }
  await page.locator('#sql-schema [data-table="gpu_hours"] summary').click();
  const columns = await page.$$eval('#sql-schema [data-table="gpu_hours"] [data-column]', (items) => items.map((li) => li.dataset.column));
  assert.ok(['hour', 'team', 'cost', 'unexplained_seconds'].every((c) => columns.includes(c)), `gpu_hours columns ${columns}`);
  await page.locator('[data-example="Where idle money went"]').click();
  await page.waitForURL(/idle_summary/);
  // The page is drawn anew for the new address: wait for its editor and its result.
  const ranQuery = (text) => page.waitForFunction((t) => document.querySelector('#sql-text')?.value.includes(t)
    && document.querySelector('#sql-result [data-rows]'), text);
  await ranQuery('idle_summary');
  // The worked example's unexplained idle (33.20) is the largest class.
  assert.equal(await page.locator('#sql-result tbody tr').first().locator('[data-key="class"]').getAttribute('data-value'), 'unexplained');
  await page.locator('#sql-schema [data-table="cost_entries"] button').click();
  await page.waitForURL(/FROM(%20|\+|%0A)cost_entries/);
  await ranQuery('FROM cost_entries');
  const costRows = Number(await page.locator('#sql-result [data-rows]').getAttribute('data-rows'));
  assert.ok(costRows > 0, `SELECT * FROM cost_entries gave ${costRows} rows`);
  ok('the SQL page lists every table with its columns; an example and a table name run their queries');

  // Idle: one day with data, and on it all five classes are non-zero: five bars.
  await open(page, `idle?${PERIOD}`);
  assert.equal(await page.locator('#idle-daily svg.chart rect.mark').count(), 5);
  assert.equal(await page.locator('#idle-nodes tbody tr').count(), 2); // n1 and n2 had unexplained idle
  await page.screenshot({ path: join(shots, 'idle.png'), fullPage: true });
  ok('idle chart renders five stacked bars for 2026-11-02; two nodes with unexplained idle');

  // The weekly report page shows the server's report for people. The worked example is week
  // 2026-W45 and nothing came before it: every team is new.
  await open(page, 'reports?week=2026-W45');
  const summary = await page.locator('.report-body #summary').textContent();
  assert.ok(summary.startsWith('The week cost $118.20, ▲ $118.20 (new) against the week before ($0.00). '
    + 'Biggest movers: nlp ▲ $40.73 (new), vision ▲ $23.06 (new), unattributed ▲ $5.21 (new).'), summary);
  // Its tables: teams largest first, every amount with its currency.
  const teamRows = await page.$$eval('.report-body #teams-table tbody tr', (rows) => rows.map((row) => [...row.cells].map((c) => c.textContent)));
  assert.deepEqual(teamRows.map((r) => r[0]), ['nlp', 'vision', 'unattributed']);
  for (const row of teamRows) for (const amount of row.slice(2, 6)) assert.match(amount, /^-?\$\d{1,3}(,\d{3})*\.\d{2}$/, `amount ${amount}`);
  // Its actions add up to what it claims for them.
  const reportActions = await page.$$eval('.report-body #recommendations b.money', (items) => items.map((b) => b.textContent));
  assert.deepEqual(reportActions, ['$32.00', '$3.20', '$1.20']);
  const cents = (amount) => Math.round(Number(amount.replace(/[$,]/g, '')) * 100);
  const claim = await page.locator('.report-body #recommendations-total').textContent();
  assert.equal(claim, 'These 3 actions: $36.40.');
  assert.equal(reportActions.reduce((sum, a) => sum + cents(a), 0), cents('$36.40'));
  assert.equal(await page.locator('.report-body svg').count(), 4);
  await page.screenshot({ path: join(shots, 'report.png'), fullPage: true });
  // Opened without a week, it shows the last full week before the data's end (2026-11-03):
  // 2026-W44, which holds nothing, and says so.
  await open(page, 'reports');
  assert.equal(await page.locator('#report-week').inputValue(), '2026-W44');
  await page.locator('.report-body .warning').getByText('No data for this week').waitFor();
  ok('the report page: summary with the change per team, amounts with currency, teams largest first, actions that add up; a week without data says so');

  for (const [name, hash] of [['unit', `unit?${PERIOD}`], ['training', `training?${PERIOD}`],
    ['reports', 'reports'], ['value_mapping', 'value_mapping'], ['reservation', 'reservation']]) {
    await open(page, hash);
    await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
  }
  assert.equal(await page.locator('#unit-models').count(), 0); // left the unit page; sanity of navigation
  ok('unit economics, training, reports, value mappings and reservations pages load');

  // A reservation made through the form is in the API.
  await open(page, 'reservation');
  await page.getByRole('button', { name: 'New reservation' }).click();
  await page.getByLabel(/^Name/).fill('n2-maintenance');
  await page.getByLabel('Cluster').fill('demo');
  await page.getByLabel('Node').fill('n2');
  await page.getByLabel('From').fill('2026-11-03T00:00:00Z');
  await page.getByLabel(/^To\b/).fill('2026-11-04T00:00:00Z');
  await page.locator('#reservation-form-reason').selectOption('maintenance');
  await page.getByRole('button', { name: 'Create' }).click();
  await page.getByText('Created n2-maintenance.').waitFor();
  const reservation = await apiCall('/v1/objects/reservation/n2-maintenance');
  assert.equal(reservation.status, 200);
  assert.equal(reservation.body.spec.reason, 'maintenance');
  ok('a reservation created through the form is in GET /v1/objects/reservation/n2-maintenance');

  // Reservations: one line per reason first (how many, on how many nodes), and a filter.
  const reasons = await page.$$eval('#reservation-groups tbody tr', (rows) => rows.map((row) => [
    row.querySelector('[data-key="reason"]').dataset.value, Number(row.querySelector('[data-key="count"]').dataset.value)]));
  assert.ok(reasons.some(([reason, count]) => reason === 'maintenance' && count === 1), `by reason ${JSON.stringify(reasons)}`);
  assert.ok(reasons.some(([reason]) => reason === 'warm_pool'), `by reason ${JSON.stringify(reasons)}`);
  await page.getByLabel('Filter').fill('n2-maint');
  assert.equal(await page.locator('#reservation-list [data-shown]').getAttribute('data-shown'), '1');
  assert.deepEqual(await page.$$eval('#reservation-table tbody [data-key="name"]', (cells) => cells.map((c) => c.dataset.value)), ['n2-maintenance']);
  ok('reservations are summed by reason and filter to what matches');

  // A budget made through the form is in the API.
  await open(page, 'budgets');
  await page.getByRole('button', { name: 'New budget' }).click();
  await page.getByLabel(/^Name/).fill('nlp-monthly');
  await page.getByLabel('Applies to').selectOption('team');
  await page.getByLabel('Team, namespace or cost centre').fill('nlp');
  await page.getByLabel('Monthly amount').fill('1000');
  await page.getByRole('button', { name: 'Create' }).click();
  await page.getByText('Created nlp-monthly.').waitFor();
  const budget = await apiCall('/v1/budgets/nlp-monthly');
  assert.equal(budget.status, 200);
  assert.deepEqual([budget.body.spec.team, budget.body.spec.amount, budget.body.spec.currency], ['nlp', 1000, 'USD']);
  assert.deepEqual(budget.body.spec.thresholds, [50, 80, 100]);
  await page.screenshot({ path: join(shots, 'budgets.png'), fullPage: true });
  ok('a budget created through the form is in GET /v1/budgets/nlp-monthly');

  // The overview sets it beside nlp's November spend: 40.728 of 1,000 is 4.0728 % used.
  await open(page, `overview?${PERIOD}`);
  const nlp = page.locator('#teams tbody tr', { hasText: 'nlp' });
  assert.equal(Number(await nlp.locator('[data-key="budget"]').getAttribute('data-value')), 1000);
  const used = Number(await nlp.locator('[data-key="percent_used"]').getAttribute('data-value'));
  assert.ok(Math.abs(used - 0.040728) < 1e-6, `percent used ${used}`);
  assert.equal(await nlp.locator('[data-key="state"]').getAttribute('data-value'), 'ok');
  await page.screenshot({ path: join(shots, 'overview-budget.png'), fullPage: true });
  ok('the overview shows nlp at 4.07 % of its 1,000 budget for November');

  // A team over budget: vision spent 23.064 in November against 18.4512, 125 %. Its meter is
  // full and red; nlp's (4 %) is not.
  const vision = await apiCall('/v1/budgets', { method: 'POST', body: { name: 'vision-monthly', spec: { team: 'vision', amount: 18.4512 } } });
  assert.equal(vision.status, 201);
  // The same address again is no navigation: reload, so the page reads the new budget.
  await page.reload();
  await open(page, `overview?${PERIOD}`);
  const visionRow = page.locator('#teams tbody tr', { hasText: 'vision' });
  const visionUsed = Number(await visionRow.locator('[data-key="percent_used"]').getAttribute('data-value'));
  assert.ok(Math.abs(visionUsed - 1.25) < 1e-6, `vision used ${visionUsed}`);
  const visionMeter = visionRow.locator('svg.meter');
  assert.equal(await visionMeter.getAttribute('data-over'), 'true');
  assert.equal(await visionMeter.locator('rect.meter-over').getAttribute('width'), '300');
  const nlpMeter = page.locator('#teams tbody tr', { hasText: 'nlp' }).locator('svg.meter');
  assert.equal(await nlpMeter.getAttribute('data-over'), 'false');
  const nlpWidth = Number(await nlpMeter.locator('rect.meter-value').getAttribute('width'));
  assert.ok(nlpWidth > 5 && nlpWidth < 20, `nlp meter ${nlpWidth} of 300`);
  ok('a team at 125 % of its budget shows a full, red meter; one at 4 % a short one');

  // Long lists: the training page and its chart show at most 20 workloads and one "other".
  const many = Array.from({ length: 45 }, (_, i) => ({ workload: `w${i}`, cost: i + 1, gpu_hours: 2 }));
  const cut = topN(many, { n: 20, by: 'cost', labelKey: 'workload', other: (count) => `${count} other workloads`, sums: ['cost', 'gpu_hours'] });
  assert.equal(cut.length, 21);
  assert.deepEqual([cut[0].workload, cut[19].workload], ['w44', 'w25']);
  // The 25 others cost 1 + … + 25 = 325 and held 50 GPU-hours: the total stays 1,035.
  assert.deepEqual([cut[20].workload, cut[20].cost, cut[20].gpu_hours, cut[20]._other], ['25 other workloads', 325, 50, true]);
  assert.equal(cut.reduce((sum, r) => sum + r.cost, 0), (45 * 46) / 2);
  ok('long lists keep the 20 largest and one "other" row whose figures sum the rest');

  // Run rates count the days the ledger holds: on 20 November with the ledger built through
  // 2 November, November's forecast runs on 2 days, not 19 (nor on future days).
  const november = { from: '2026-11-01', to: '2026-12-01' };
  const on20th = Date.UTC(2026, 10, 20);
  assert.deepEqual(elapsed(november, '2026-11-02', on20th), { total: 30, past: 2 });
  assert.deepEqual(elapsed(november, '2026-11-25', on20th), { total: 30, past: 19 });
  assert.deepEqual(elapsed(november, undefined, on20th), { total: 30, past: 19 });
  assert.deepEqual(elapsed(november, '2026-12-31', Date.UTC(2027, 0, 5)), { total: 30, past: 30 });
  ok('run-rate forecasts count only the days the ledger holds, never partial or future ones');

  // At a laptop's 1366 px, no page is wider than the screen.
  await page.setViewportSize({ width: 1366, height: 900 });
  for (const hash of [`overview?${PERIOD}`, 'budgets', `training?${PERIOD}`, 'reservation', `idle?${PERIOD}`, `unit?${PERIOD}`, 'reports?week=2026-W45',
    'value_mapping', `sql?q=${encodeURIComponent('SELECT * FROM team_costs(\'2026-11-01\', \'2026-12-01\')')}`]) {
    await open(page, hash);
    const { wider, past } = await overflow(page);
    assert.ok(wider <= 0, `${hash} is ${wider}px wider than a 1366px screen: ${past.join(', ')}`);
    // Nor does a table hide a column (a Delete button, a State) behind its own scroll bar.
    const clipped = await page.$$eval('.table-wrap', (wraps) => wraps
      .filter((w) => w.scrollWidth > w.clientWidth + 1)
      .map((w) => `${w.closest('section')?.id || '?'}: ${w.scrollWidth - w.clientWidth}px`));
    assert.deepEqual(clipped, [], `${hash}: tables wider than their card`);
  }
  await page.setViewportSize({ width: 1280, height: 900 });
  ok('no page or table overflows a 1366px-wide screen');

  // A team token sees its team only, and is not offered what covers every team.
  const teamPage = await context.newPage(); // a new tab: its own sessionStorage, so signed out
  watch(teamPage, 'nlp');
  await signIn(teamPage, team);
  assert.equal(await teamPage.locator('#who-text').textContent(), 'read token · team nlp');
  await open(teamPage, `overview?${PERIOD}`);
  const teams = await teamPage.$$eval('#teams tbody [data-key="team"]', (cells) => cells.map((c) => c.dataset.value));
  assert.deepEqual(teams, ['nlp']);
  assert.equal(await teamPage.locator('#balance, #unallocated').count(), 0);
  // Its recommended actions are its own: nlp held no idle GPUs, and nodes belong to no team.
  assert.equal(await teamPage.locator('#recommendations tbody tr').count(), 0);
  assert.match(await teamPage.locator('[data-figure="recommendations-total"]').textContent(), /^Nothing to reclaim/);
  await open(teamPage, `sql?q=${encodeURIComponent('SELECT DISTINCT team FROM cost_entries WHERE team IS NOT NULL')}`);
  await teamPage.locator('#sql-result table').waitFor();
  assert.deepEqual(await teamPage.$$eval('#sql-result tbody td', (cells) => cells.map((c) => c.textContent)), ['nlp']);
  // Its schema browser lists only what a team may read: tables with a team column, never the
  // bill, raw telemetry or the quarantine.
  await teamPage.locator('#sql-schema [data-table="cost_entries"]').waitFor();
  const teamTables = await teamPage.$$eval('#sql-schema [data-table]', (items) => items.map((li) => li.dataset.table));
  for (const hidden of ['billing_lines', 'gpu_samples', 'quarantine']) {
    assert.ok(!teamTables.includes(hidden), `a team token's schema lists ${hidden}: ${teamTables}`);
  }
  await open(teamPage, `idle?${PERIOD}`);
  assert.ok(!(await teamPage.locator('main').textContent()).includes('vision'));
  for (const hash of [`unit?${PERIOD}`, `training?${PERIOD}`, 'reports', 'budgets', 'value_mapping', 'reservation']) {
    await open(teamPage, hash);
    assert.ok(!(await teamPage.locator('main').textContent()).includes('vision'), `${hash} shows vision`);
  }
  await open(teamPage, `overview?${PERIOD}`);
  await teamPage.screenshot({ path: join(shots, 'overview-team-nlp.png'), fullPage: true });
  ok('a team token sees nlp only, in the overview and in its own SQL');

  // A narrow screen: the pages still fit.
  await page.setViewportSize({ width: 390, height: 844 });
  for (const hash of ['budgets', `training?${PERIOD}`, 'reports?week=2026-W45', `idle?${PERIOD}`, `unit?${PERIOD}`,
    'reservation', 'value_mapping', `sql?q=${encodeURIComponent('SELECT * FROM team_costs(\'2026-11-01\', \'2026-12-01\')')}`,
    `overview?${PERIOD}`]) {
    await open(page, hash);
    const { wider, past } = await overflow(page);
    assert.ok(wider <= 0, `${hash} is ${wider}px wider than a phone: ${past.join(', ')}`);
  }
  await page.screenshot({ path: join(shots, 'overview-phone.png'), fullPage: true });
  ok('every page fits a 390px-wide screen');

  assert.deepEqual(problems, []);
  ok('no console errors or exceptions on any page');
  console.log(`${checks} passed, 0 failed`);
} catch (error) {
  console.error(`not ok - ${error.stack || error}`);
  if (problems.length) console.error(problems.join('\n'));
  process.exitCode = 1;
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
