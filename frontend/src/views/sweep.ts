// The efSearch trade-off `lore bench retrieval --sweep` measured on this machine, shown beside ef_search:
// recall@10 and p95 latency per efSearch at each corpus size, the knee marked, the current setting highlighted.
import { codeText, h, svg } from '../dom';
import { fmtInt } from '../format';
import type { HNSWSweep } from '../transport/types';

type Size = HNSWSweep['sizes'][number];

/** The smallest efSearch whose recall@10 is within 0.01 of the size's best: past it, latency buys little. */
export function knee(s: Size): number | undefined {
  const best = Math.max(...s.points.map((p) => p.recall_at_10));
  return [...s.points].sort((a, b) => a.ef_search - b.ef_search).find((p) => p.recall_at_10 >= best - 0.01)?.ef_search;
}

/** The efSearch the index uses for a setting (0 = the index default, 96). */
export const efFor = (setting: number): number => setting || 96;

/** recall@10 against efSearch, one line per size, efSearch on a log axis. */
function curve(sizes: Size[]): SVGElement {
  const W = 240, H = 90;
  const efs = sizes.flatMap((s) => s.points.map((p) => p.ef_search));
  const lo = Math.log(Math.min(...efs)), hi = Math.log(Math.max(...efs));
  const x = (ef: number) => (hi > lo ? ((Math.log(ef) - lo) / (hi - lo)) * (W - 10) + 5 : W / 2);
  const y = (r: number) => H - 5 - r * (H - 10);
  return svg('svg', { class: 'sweep-curve', viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': 'recall@10 against efSearch' },
    svg('line', { x1: 5, x2: W - 5, y1: y(1), y2: y(1), class: 'sweep-grid' }),
    ...sizes.map((s, i) => svg('polyline', {
      class: `sweep-line sweep-line-${i}`,
      points: [...s.points].sort((a, b) => a.ef_search - b.ef_search).map((p) => `${x(p.ef_search).toFixed(1)},${y(p.recall_at_10).toFixed(1)}`).join(' '),
    }, svg('title', {}, `${fmtInt(s.n)} vectors`))));
}

/** The measured curve, or how to measure it. */
export function renderSweep(sw: HNSWSweep | undefined, setting: number): HTMLElement {
  if (!sw?.sizes?.length) {
    return h('p', { class: 'muted small', testid: 'sweep-none' },
      ...codeText('Not measured on this machine yet: `lore bench retrieval --sweep` measures recall and latency per efSearch (about 1 minute at 100,000 vectors; `--sweep-sizes 100000`), and this table shows it.'));
  }
  const ef = efFor(setting);
  const knees = sw.sizes.map(knee);
  const efs = [...new Set(sw.sizes.flatMap((s) => s.points.map((p) => p.ef_search)))].sort((a, b) => a - b);
  const cell = (s: Size, e: number) => {
    const p = s.points.find((q) => q.ef_search === e);
    return p ? [h('td', { text: p.recall_at_10.toFixed(3) }), h('td', { text: p.p95_ms.toFixed(2) })] : [h('td', { text: '—' }), h('td', { text: '—' })];
  };
  const table = h('table', { class: 'stats sweep-table', testid: 'sweep-table' },
    h('thead', {},
      h('tr', {}, h('th', { text: '' }), ...sw.sizes.map((s) => h('th', { attrs: { colspan: 2 }, text: `${fmtInt(s.n)} vectors` }))),
      h('tr', {}, h('th', { text: 'efSearch' }), ...sw.sizes.flatMap(() => [h('th', { text: 'recall@10' }), h('th', { text: 'p95 ms' })]))),
    h('tbody', {}, ...efs.map((e) => {
      const marks = [e === ef ? 'current' : '', ...knees.map((k, i) => (k === e ? `knee at ${fmtInt(sw.sizes[i].n)}` : ''))].filter(Boolean);
      return h('tr', { class: e === ef ? 'current' : undefined, testid: `sweep-row-${e}` },
        h('th', { text: marks.length ? `${e} (${marks.join(', ')})` : String(e) }),
        ...sw.sizes.flatMap((s) => cell(s, e)));
    })));
  const when = new Date(sw.measured_at);
  return h('div', { class: 'sweep', testid: 'sweep' },
    curve(sw.sizes),
    table,
    h('p', { class: 'muted small', testid: 'sweep-note' }, ...codeText(
      `Measured ${Number.isNaN(when.getTime()) ? '' : when.toLocaleString()} by \`lore bench retrieval --sweep\` on synthetic clustered vectors (${sw.sizes.map((s) => `${fmtInt(s.n)}: built in ${s.build_s} s, exact search p95 ${s.exact_p95_ms.toFixed(1)} ms`).join('; ')}). Libraries under 10,000 chunks use exact search, where efSearch does not matter.`)));
}
