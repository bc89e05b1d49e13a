// Latency panel: the current answer's waterfall and details; percentiles, TTFT histogram, buckets and the
// request history over a chosen window. All numbers shown come from the server's trace/stats, except the
// UI's own paint and ui_ttft measurement.

import { clear, download, errMsg, h, svg } from '../dom';
import { fmtDate, fmtInt, fmtMs, fmtPct, fmtRate } from '../format';
import { binHeights, bucketLabel, fallbackLabel, groupRows, histogramBins, hitRateText, prefetchLabel, readWhileTyping, stageRows, type StatRow } from '../latency/stats';
import { causeText } from '../latency/cause';
import { layoutWaterfall } from '../latency/waterfall';
import { SUPPORT_TITLE, supportDetail, supportStatsText } from '../support';
import type { Trace, TraceStats } from '../transport/types';
import type { Ctx } from './ctx';

const WINDOWS = ['15m', '1h', '24h', '7d'];

// SVG coordinates are percentages of the element's own box (no viewBox), so bars and labels line up
// at any width without stretching text, and nothing needs an inline style.
const pct = (f: number) => `${Math.round(f * 1e6) / 1e4}%`;

export function renderWaterfall(trace: Trace): HTMLElement {
  const lay = layoutWaterfall(trace);
  const box = h('div', { class: 'waterfall', testid: 'waterfall', attrs: { 'data-axis-ms': lay.axisMs } });
  const markerLines = () =>
    lay.markers.map((m) =>
      svg('line', { x1: pct(m.x), x2: pct(m.x), y1: '0', y2: '100%', class: `wf-marker ${m.label.includes('UI') ? 'ui' : 'server'}` }),
    );
  for (const r of lay.rows) {
    const bar =
      r.x !== null && r.w !== null
        ? svg('rect', { x: pct(r.x), y: '15%', width: pct(r.w), height: '70%', class: `wf-bar stage-${r.stage}` },
            svg('title', {}, `${r.label}: ${fmtMs(r.durMs)} from ${fmtMs(r.startMs)}`))
        : null;
    box.append(
      h('div', { class: `wf-row${r.parallel ? ' parallel' : ''}${r.parent ? ' child' : ''}`, testid: `waterfall-row-${r.stage}`, attrs: { 'data-stage': r.stage, 'data-start-ms': r.startMs ?? '', 'data-ms': r.durMs ?? '' } },
        h('span', { class: 'wf-label', text: (r.parallel ? '‖ ' : '') + r.label }),
        svg('svg', { class: 'wf-track', 'aria-hidden': 'true' }, ...markerLines(), bar),
        h('span', { class: 'wf-ms', title: r.skipped ?? '',
          text: r.skipped !== undefined ? 'skipped' : r.startMs === null ? `${fmtMs(r.durMs)} (no start)` : fmtMs(r.durMs) }),
      ),
    );
  }
  // time axis: ticks and their labels at the same positions
  const axis = svg('svg', { class: 'wf-axis', 'aria-hidden': 'true' });
  for (const t of lay.ticks) {
    const anchor = t.x < 0.04 ? 'start' : t.x > 0.96 ? 'end' : 'middle';
    axis.append(
      svg('line', { x1: pct(t.x), x2: pct(t.x), y1: '0', y2: '5', class: 'wf-tick' }),
      svg('text', { x: pct(t.x), y: '16', 'text-anchor': anchor, class: 'wf-tick-label' }, fmtMs(t.ms)),
    );
  }
  box.append(h('div', { class: 'wf-row axis' }, h('span', { class: 'wf-label' }), axis, h('span', { class: 'wf-ms' })));
  const legend = h('div', { class: 'wf-legend' });
  for (const m of lay.markers) legend.append(h('span', { class: `wf-legend-item ${m.label.includes('UI') ? 'ui' : 'server'}`, text: `${m.label} ${fmtMs(m.ms)}` }));
  box.append(legend);
  return box;
}

function prefetchText(t: Trace): string {
  const parts: string[] = [];
  switch (t.prefetch) {
    case 'hit':
    case 'partial':
      parts.push(`${t.prefetch} · ${fmtInt(t.prefetched_tokens)} tokens read while you typed, starting ${fmtMs(t.prefetch_age_ms)} ahead`);
      if (t.prefetch_new_passages) parts.push(`${fmtInt(t.prefetch_new_passages)} new passages read after Enter`);
      break;
    case 'miss':
      parts.push(`miss${t.prefetch_miss ? ` (${t.prefetch_miss})` : ''}`);
      break;
    default:
      parts.push(t.prefetch || '—');
  }
  if (t.stale_passages) parts.push(`${fmtInt(t.stale_passages)} kept from the drafts`);
  if (t.late_passages) parts.push(`${fmtInt(t.late_passages)} left out: reading them would miss the first-token budget`);
  if (t.cut) parts.push(`best passage cut by ${fmtInt(t.cut.tokens)} tokens for the same budget`);
  return parts.join(' · ');
}

/** What an earlier question's kept state did for this prompt ('' when none was named). */
export function restoredText(t: Trace): string {
  if (t.restored_tokens) return ` · ${fmtInt(t.restored_tokens)} tokens restored from an earlier question`;
  return t.restore_note ? ` · earlier question's state not restored: ${t.restore_note}` : '';
}

/** What saved passage KV did for this answer ('—' when the setting is off). */
export function stitchText(t: Trace): string {
  if (t.stitch === 'refused') return `refused${t.stitch_note ? ` — ${t.stitch_note}` : ''}`;
  if (t.stitch !== 'on') return '—';
  const parts = [`approximate · ${fmtInt(t.stitched_passages ?? 0)} passages placed from saved KV (${fmtInt(t.stitched_tokens ?? 0)} tokens not read, ${fmtInt(t.repaired_tokens ?? 0)} read again)`];
  if (t.uncached_passages) parts.push(`${fmtInt(t.uncached_passages)} not saved yet, read`);
  if (t.stitch_note) parts.push(t.stitch_note);
  return parts.join(' · ');
}

function yesNo(b: unknown): string {
  return b === true ? 'hit' : b === false ? 'miss' : '—';
}

export function renderDetails(t: Trace): HTMLElement {
  const s = t.stages ?? {};
  const prompt = t.prompt_tokens ?? 0;
  const cached = t.cached_tokens ?? 0;
  const evald = t.eval_tokens ?? 0;
  const stitched = t.stitched_tokens ?? 0;
  // Of the cached tokens, those read while the user typed (adopted from the speculative prefill).
  const typed = readWhileTyping(t) ? Math.min(t.prefetched_tokens ?? 0, cached) : 0;
  const typedText = typed > 0 ? `${fmtInt(typed)} prefilled while you typed · ` : '';
  const tokens = h('div', { class: 'token-split', testid: 'token-split' });
  if (prompt > 0) {
    tokens.append(
      svg('svg', { class: 'token-bar', 'aria-hidden': 'true' },
        svg('rect', { x: '0', y: '0', width: pct((cached - typed) / prompt), height: '100%', class: 'tok-cached' }),
        svg('rect', { x: pct((cached - typed) / prompt), y: '0', width: pct(typed / prompt), height: '100%', class: 'tok-typed' }),
        svg('rect', { x: pct(cached / prompt), y: '0', width: pct(stitched / prompt), height: '100%', class: 'tok-stitched' }),
        svg('rect', { x: pct((cached + stitched) / prompt), y: '0', width: pct(evald / prompt), height: '100%', class: 'tok-eval' }),
      ),
    );
  }
  // The parts add up to the total: the tokens read while typing are counted once, not also as cached.
  tokens.append(h('span', { testid: 'token-split-text', text: `${fmtInt(cached - typed)} cached (${fmtPct(prompt ? (cached - typed) / prompt : NaN)}) · ${typedText}${stitched ? `${fmtInt(stitched)} stitched · ` : ''}${fmtInt(evald)} evaluated · ${fmtInt(prompt)} total` }));
  const item = (k: string, v: Node | string, id?: string, title?: string) => [h('dt', { text: k, title }), h('dd', { testid: id, title }, v)];
  const fb = t.fallback_level ? `level ${t.fallback_level}${t.fallback_reason ? ` — ${t.fallback_reason}` : ''}` : t.fallback_reason || 'none';
  return h('dl', { class: 'trace-details', testid: 'trace-details' },
    ...item('TTFT', `${fmtMs(s.ttft_ms)} server · ${fmtMs(s.ui_ttft_ms)} on screen`, 'detail-ttft'),
    ...item('Mostly', causeText(t) || '—', 'detail-cause'),
    ...item('Support', supportDetail(t), 'detail-support', SUPPORT_TITLE),
    ...item('Prompt tokens', tokens, 'detail-tokens'),
    ...item('Cache', `embedding ${yesNo(t.embed_cache_hit)} · retrieval ${yesNo(t.retrieval_cache_hit)}${restoredText(t)}`, 'detail-cache'),
    ...item('Prefetch', prefetchText(t), 'detail-prefetch'),
    ...item('Passage KV', stitchText(t), 'detail-stitch'),
    ...item('Fallback', fb, 'detail-fallback'),
    ...item('Route', routeText(t), 'detail-route'),
    ...item('Rerank', rerankText(t), 'detail-rerank'),
    ...item('Speculation', specText(t), 'detail-spec'),
    ...item('Version', t.version_id || '—', 'detail-version'),
    ...item('Context chunks', fmtInt(t.context_chunks), 'detail-chunks'),
    ...item('Passage budget', budgetText(t), 'detail-budget', BUDGET_TITLE),
    ...item('Decode', `${fmtRate(t.decode_tok_s, 'tok/s')} · ${fmtInt(t.decode_tokens)} tokens in ${fmtMs(s.decode_ms)}`, 'detail-decode'),
    ...item('Total', fmtMs(s.total_ms), 'detail-total'),
  );
}

/** The model that answered, the router's pick and why. */
export function routeText(t: Trace): string {
  if (!t.route) return '—';
  if (!t.route_role) return t.route;
  return `${t.route} (${t.route_role} model${t.route_reason ? `: ${t.route_reason}` : ''})`;
}

const BUDGET_TITLE = 'The most passage tokens this prompt could hold: Context tokens in Settings, or (0 = automatic) about a second of reading at the speed this model measured on this machine';

/** The passage budget and where it came from (the setting, a measured speed, or a guess before any). */
export function budgetText(t: Trace): string {
  if (!t.context_budget) return '—';
  const from: Record<string, string> = {
    setting: 'set in Settings',
    measured: 'automatic: the reading speed measured now',
    'measured earlier': 'automatic: the reading speed measured in an earlier run',
    assumed: 'automatic: nothing measured yet, a guess',
  };
  const why = t.context_budget_from ? from[t.context_budget_from] ?? t.context_budget_from : '';
  return `${fmtInt(t.context_budget)} tokens${why ? ` (${why})` : ''}`;
}

/** Which reranker ran: a remote one, the local one standing in for a failed remote, or none (docs/design.md, "Fallback levels"). */
export function rerankText(t: Trace): string {
  if (t.rerank_route) return t.rerank_route;
  const skipped = t.skipped_stages?.rerank_ms;
  if (skipped !== undefined) return `not run: ${skipped}`;
  return t.stages?.rerank_ms != null ? 'local' : 'not run';
}

/** Whether speculative decoding ran, how, and how much of it was kept. */
export function specText(t: Trace): string {
  if (!t.spec_note) return 'off';
  const parts = [t.spec_note];
  if (t.drafted) parts.push(`${fmtInt(t.accepted ?? 0)} of ${fmtInt(t.drafted)} drafted tokens kept`);
  if (t.draft_accept_rate != null) parts.push(`route's acceptance ${Math.round(t.draft_accept_rate * 100)}%`);
  return parts.join(' · ');
}

function statTable(rows: StatRow[], first: string, testid: string): HTMLElement {
  if (!rows.length) return h('p', { class: 'muted', testid, text: 'No data in this window.' });
  return h('table', { class: 'stats', testid },
    h('thead', {}, h('tr', {}, h('th', { text: first }), h('th', { text: 'P50' }), h('th', { text: 'P95' }), h('th', { text: 'P99' }), h('th', { text: 'n' }))),
    h('tbody', {}, ...rows.map((r) =>
      h('tr', { attrs: { 'data-key': r.key } }, h('td', { text: r.label }), h('td', { text: r.p50 }), h('td', { text: r.p95 }), h('td', { text: r.p99 }), h('td', { text: fmtInt(r.n) })),
    )),
  );
}

export function renderHistogram(stats: TraceStats): HTMLElement {
  const bins = histogramBins(stats.ttft_histogram, stats.stages?.ttft_ms?.n);
  if (!bins.length) return h('p', { class: 'muted', testid: 'ttft-histogram', text: 'No TTFT histogram yet.' });
  const heights = binHeights(bins);
  const bw = 1 / bins.length;
  const chart = svg('svg', { class: 'hist', 'aria-hidden': 'true' });
  bins.forEach((b, i) => {
    const hgt = heights[i] * 0.96;
    chart.append(svg('rect', { x: pct(i * bw + bw * 0.08), y: pct(1 - hgt), width: pct(bw * 0.84), height: pct(hgt), class: 'hist-bar' }, svg('title', {}, `${b.label}: ${b.count}`)));
  });
  const labels = h('div', { class: 'hist-labels' }, ...bins.map((b) => h('span', { attrs: { 'data-count': b.count }, text: `${b.label} (${b.count})` })));
  return h('div', { class: 'histogram', testid: 'ttft-histogram' }, chart, labels);
}

export class LatencyView {
  readonly el: HTMLElement;
  private readonly current: HTMLElement;
  private readonly statsBox: HTMLElement;
  private readonly history: HTMLUListElement;
  private readonly windowSel: HTMLSelectElement;
  private trace: Trace | undefined;

  constructor(private readonly ctx: Ctx) {
    this.current = h('section', { class: 'card', testid: 'latency-current', attrs: { tabindex: -1, 'aria-label': 'This answer' } },
      h('p', { class: 'muted', text: 'Ask a question to see where its time went.' }));
    this.windowSel = h('select', { testid: 'stats-window', attrs: { 'aria-label': 'Window' } }, ...WINDOWS.map((w) => h('option', { value: w, text: w })));
    this.windowSel.value = '1h';
    this.windowSel.addEventListener('change', () => void this.refresh());
    this.statsBox = h('div', { class: 'stats-box' });
    this.history = h('ul', { class: 'history-list', testid: 'history-list' });
    this.el = h('div', { class: 'view latency-view', testid: 'latency-panel' },
      this.current,
      h('section', { class: 'card' },
        h('div', { class: 'card-head' },
          h('h2', { text: 'History' }),
          h('label', { class: 'inline' }, 'Window ', this.windowSel),
          h('button', { type: 'button', class: 'btn small', testid: 'refresh-stats', text: 'Refresh', on: { click: () => void this.refresh() } }),
        ),
        this.statsBox,
        h('h3', { text: 'Recent requests' }),
        this.history,
      ),
    );
  }

  show(trace: Trace): void {
    this.trace = trace;
    const t = trace;
    this.current.replaceChildren(
      h('div', { class: 'card-head' },
        h('h2', { text: 'This answer' }),
        h('button', { type: 'button', class: 'btn small', testid: 'export-trace', text: 'Export JSON', on: { click: () => this.export() } }),
      ),
      h('p', { class: 'trace-q', testid: 'trace-question', text: t.question || '' }),
      h('p', { class: 'muted small', testid: 'trace-id', text: `request ${t.request_id}${t.first_token_at ? ` · ${fmtDate(t.first_token_at)}` : ''}` }),
      renderWaterfall(t),
      renderDetails(t),
    );
    this.markRow();
  }

  /** Marks the row of the trace shown, if it is listed. */
  private markRow(): void {
    for (const b of Array.from(this.history.querySelectorAll('.history-item'))) {
      const on = b.getAttribute('data-request-id') === this.trace?.request_id;
      b.classList.toggle('active', on);
      if (on) b.setAttribute('aria-current', 'true');
      else b.removeAttribute('aria-current');
    }
  }

  /**
   * A row of Recent requests was clicked: its trace becomes "This answer", and the card is brought into view
   * (it sits above the history, off-screen once the list is scrolled to).
   */
  private async openRow(requestId: string): Promise<void> {
    await this.open(requestId);
    if (this.trace?.request_id !== requestId) return; // it could not be loaded: the banner says so
    this.current.scrollIntoView?.({ block: 'start' });
    this.current.focus({ preventScroll: true });
  }

  async open(ref: Trace | string): Promise<void> {
    if (typeof ref !== 'string') {
      this.show(ref);
      return;
    }
    try {
      this.show(await this.ctx.t.trace(ref));
    } catch (e) {
      this.ctx.notify(`Cannot load trace ${ref}: ${errMsg(e)}`);
    }
  }

  /** Latest trace of the current answer (the chat view calls this when an answer finishes). */
  update(trace: Trace): void {
    // The newest answer becomes "this answer", unless the panel is open on another (history) trace.
    if (this.el.hidden || !this.trace || this.trace.request_id === trace.request_id) this.show(trace);
  }

  currentTrace(): Trace | undefined {
    return this.trace;
  }

  private export(): void {
    if (!this.trace) return;
    download(`lore-trace-${this.trace.request_id}.json`, JSON.stringify(this.trace, null, 2));
  }

  async refresh(): Promise<void> {
    const win = this.windowSel.value;
    const [stats, traces] = await Promise.allSettled([this.ctx.t.traceStats(win), this.ctx.t.traces(50)]);
    clear(this.statsBox);
    if (stats.status === 'fulfilled' && stats.value) {
      const st = stats.value;
      this.statsBox.append(
        h('h3', { text: `Per stage (${win})` }),
        statTable(stageRows(st), 'Stage', 'stats-table'),
        h('h3', { text: 'Time to first token' }),
        renderHistogram(st),
        h('h3', { text: 'TTFT by prompt length' }),
        statTable(groupRows(st.by_bucket, bucketLabel), 'Prompt tokens', 'bucket-table'),
        h('h3', { text: 'TTFT by fallback level' }),
        statTable(groupRows(st.by_fallback, fallbackLabel), 'Fallback', 'fallback-table'),
        h('h3', { text: 'TTFT by prefetch' }),
        statTable(groupRows(st.by_prefetch, prefetchLabel), 'Prefetch', 'prefetch-table'),
        h('h3', { text: 'TTFT by route' }),
        statTable(groupRows(st.by_route, (k) => `${k} model`), 'Route', 'route-table'),
        h('h3', { text: 'Caches' }),
        h('p', { testid: 'cache-rates', text: `Retrieval results: ${hitRateText(st.caches?.retrieval)} · query embeddings: ${hitRateText(st.caches?.embedding)}` }),
        h('h3', { text: 'Support by the cited passages' }),
        h('p', { testid: 'support-stats', title: SUPPORT_TITLE, text: supportStatsText(st.support) }),
      );
    } else if (stats.status === 'rejected') {
      this.statsBox.append(h('p', { class: 'error', text: `Cannot load stats: ${errMsg(stats.reason)}` }));
    }
    clear(this.history);
    if (traces.status === 'fulfilled') {
      for (const t of traces.value ?? []) {
        this.history.append(
          h('li', {},
            h('button', {
              type: 'button', class: 'history-item', testid: 'history-item', attrs: { 'data-request-id': t.request_id },
              title: 'Show this request above, under This answer',
              on: { click: () => void this.openRow(t.request_id) },
            },
              h('span', { class: 'hi-when', text: fmtDate(t.first_token_at) }),
              h('span', { class: 'hi-q', text: t.question || t.request_id }),
              h('span', { class: 'hi-ttft', text: fmtMs(t.stages?.ttft_ms) }),
            ),
          ),
        );
      }
      if (!traces.value?.length) this.history.append(h('li', { class: 'muted', text: 'No requests yet.' }));
      // Opened before any answer of this session: the newest request rather than an empty card.
      else if (!this.trace) this.show(traces.value[0]);
      this.markRow();
    } else {
      this.history.append(h('li', { class: 'error', text: `Cannot load traces: ${errMsg(traces.reason)}` }));
    }
  }
}
