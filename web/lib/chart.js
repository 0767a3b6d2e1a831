// Charts drawn as inline SVG: bars (grouped or stacked) and lines over categories. Each chart is
// an image with a text alternative, and every mark has a tooltip (<title>) with its value.

import { s, h, format } from './dom.js';

// Colours distinguishable with the common colour-vision deficiencies (Okabe–Ito), dark enough
// against white for the 3:1 that graphics need.
export const PALETTE = ['#0072b2', '#d55e00', '#009e73', '#cc79a7', '#e69f00', '#56b4e9', '#6b6b6b', '#8c564b'];

const W = 720;
const H = 260;
const M = { top: 12, right: 12, bottom: 40, left: 64 };

/** Round numbers for an axis from 0 to at least `max`. */
function ticks(max) {
  if (!(max > 0)) return [0, 1];
  const rough = max / 4;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((m) => m >= rough);
  const out = [];
  for (let t = 0; t <= max + step * 0.001; t += step) out.push(t);
  if (out[out.length - 1] < max) out.push(out[out.length - 1] + step);
  return out;
}

/**
 * chart({labels, series: [{name, values}], kind: 'bar' | 'stacked' | 'line', unit, label, legend})
 * `label` is the accessible name; `unit` a format kind for values ('money', 'number'); the
 * legend shows with two series or more, or always with `legend: true`.
 */
export function chart({ labels, series, kind = 'bar', unit = 'number', label, legend: alwaysLegend = false }) {
  const plotW = W - M.left - M.right;
  const plotH = H - M.top - M.bottom;
  const totals = labels.map((_, i) => series.reduce((sum, se) => sum + Math.max(0, se.values[i] || 0), 0));
  const peak = kind === 'stacked'
    ? Math.max(0, ...totals)
    : Math.max(0, ...series.flatMap((se) => se.values.map((v) => v || 0)));
  const axis = ticks(peak);
  const top = axis[axis.length - 1];
  const y = (v) => M.top + plotH - (v / top) * plotH;
  const band = plotW / Math.max(1, labels.length);
  const marks = [];

  for (const t of axis) {
    marks.push(s('line', { x1: M.left, x2: W - M.right, y1: y(t), y2: y(t), class: 'grid' }));
    marks.push(s('text', { x: M.left - 6, y: y(t) + 4, class: 'tick', 'text-anchor': 'end' }, format(t, unit === 'money' ? 'money-axis' : 'number')));
  }
  // Label at most ~12 categories so that they never overlap.
  const every = Math.ceil(labels.length / 12);
  labels.forEach((text, i) => {
    if (i % every) return;
    marks.push(s('text', { x: M.left + band * (i + 0.5), y: H - M.bottom + 16, class: 'tick', 'text-anchor': 'middle' }, text));
  });

  if (kind === 'line') {
    series.forEach((se, k) => {
      const points = se.values.map((v, i) => (v === null || v === undefined ? null : [M.left + band * (i + 0.5), y(v)]));
      let path = '';
      points.forEach((p, i) => { if (p) path += `${path && points[i - 1] ? 'L' : 'M'}${p[0].toFixed(1)},${p[1].toFixed(1)}`; });
      marks.push(s('path', { d: path, fill: 'none', stroke: PALETTE[k % PALETTE.length], 'stroke-width': 2, class: 'series' }));
      points.forEach((p, i) => p && marks.push(s('circle', { cx: p[0], cy: p[1], r: 3.5, fill: PALETTE[k % PALETTE.length], class: 'mark' },
        s('title', {}, `${se.name}, ${labels[i]}: ${format(se.values[i], unit)}`))));
    });
  } else {
    // Bars no wider than 60 px a series, centred in their band, however few the categories.
    const inner = Math.min(band * 0.8, 60 * (kind === 'stacked' ? 1 : series.length));
    labels.forEach((text, i) => {
      let base = 0;
      series.forEach((se, k) => {
        const v = Math.max(0, se.values[i] || 0);
        const width = kind === 'stacked' ? inner : inner / series.length;
        const x = M.left + band * i + (band - inner) / 2 + (kind === 'stacked' ? 0 : width * k);
        const y0 = kind === 'stacked' ? base : 0;
        if (v > 0) {
          marks.push(s('rect', { x, y: y(y0 + v), width: Math.max(1, width - 1), height: y(y0) - y(y0 + v), fill: PALETTE[k % PALETTE.length], class: 'mark' },
            s('title', {}, `${se.name}, ${text}: ${format(se.values[i], unit)}`)));
        }
        if (kind === 'stacked') base += v;
      });
    });
  }
  marks.push(s('line', { x1: M.left, x2: W - M.right, y1: y(0), y2: y(0), class: 'axis' }));

  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label, class: 'chart', preserveAspectRatio: 'xMidYMid meet' },
    s('title', {}, label), marks);
  // Each legend entry keeps its series' total in data-total, so a test or a reader can add up.
  const legend = h('ul', { class: 'legend' }, series.map((se, k) => h('li', {
    dataset: { series: se.name, total: String(se.values.reduce((sum, v) => sum + (v || 0), 0)) },
  }, h('span', { class: 'swatch', dataset: { color: k % PALETTE.length } }), se.name)));
  return h('figure', { class: 'chart-box' }, svg, series.length > 1 || alwaysLegend ? legend : null);
}

/**
 * A horizontal meter of `value` against `of` (a budget), with markers (its thresholds, in
 * percent). The track is the budget: spend past it fills the meter and turns it red, and a
 * forecast past it reaches the end, so a team over budget never looks almost empty.
 */
export function meter({ value, of, forecast, markers = [], label }) {
  const width = 300;
  const x = (v) => (of > 0 ? Math.min(1, Math.max(0, v) / of) : 1) * width;
  const over = value > of;
  return s('svg', { viewBox: `0 0 ${width} 18`, class: 'meter', role: 'img', 'aria-label': label, dataset: { over: String(over) } },
    s('title', {}, label),
    s('rect', { x: 0, y: 4, width, height: 10, class: 'meter-track' }),
    forecast ? s('rect', { x: 0, y: 4, width: x(forecast), height: 10, class: 'meter-forecast' }) : null,
    s('rect', { x: 0, y: 4, width: x(value), height: 10, class: over ? 'meter-over' : 'meter-value' }),
    markers.filter((pct) => pct < 100).map((pct) => s('line', { x1: x((of * pct) / 100), x2: x((of * pct) / 100), y1: 0, y2: 18, class: 'meter-mark' })));
}
