// Long lists cut to what a person reads: the largest rows, and one "other" row that sums the
// rest, so that a chart or table of hundreds of workloads still adds up to the same total.

/**
 * The `n` largest of `rows` by `by` (descending, blanks last), then — when more remain — one row
 * labelled `other(count)` under `labelKey`, with each key of `sums` summed over the rest and
 * every other key blank. The other row has `_other: true`.
 */
export function topN(rows, { n = 20, by, labelKey, other = (count) => `${count} others`, sums = [] }) {
  const value = (row) => (typeof row[by] === 'number' ? row[by] : -Infinity);
  const sorted = [...rows].sort((a, b) => value(b) - value(a));
  if (sorted.length <= n) return sorted;
  const rest = sorted.slice(n);
  const summed = Object.fromEntries(sums.map((key) => [key, rest.reduce((total, row) => total + (row[key] || 0), 0)]));
  return [...sorted.slice(0, n), { [labelKey]: other(rest.length), ...summed, _other: true }];
}
