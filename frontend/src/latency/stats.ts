// Shaping /api/traces/stats for display. Percentiles come from the server; nothing is recomputed here.

import { fmtMs } from '../format';
import type { HistogramBucket, HitRate, Percentiles, Trace, TraceStats } from '../transport/types';
import { WATERFALL_ROWS } from './waterfall';

/** Display order of stage keys; keys the server adds later are appended alphabetically. */
export const STAGE_ORDER = [
  'ttft_ms',
  'ui_ttft_ms',
  'queue_ms',
  'embed_ms',
  'vector_ms',
  'bm25_ms',
  'retrieval_ms',
  'rerank_ms',
  'prompt_assemble_ms',
  'tokenize_ms',
  'restore_ms',
  'prefill_ms',
  'first_decode_ms',
  'runner_rtt_ms',
  'llm_ttft_ms',
  'flush_ms',
  'paint_ms',
  'decode_ms',
  'total_ms',
];

export interface StatRow {
  key: string;
  label: string;
  p50: string;
  p95: string;
  p99: string;
  n: number;
}

/** Stages the waterfall has no row for: its two markers' names, and the parts it does not draw. */
const OTHER_LABELS: Record<string, string> = {
  ttft_ms: 'TTFT (server)',
  ui_ttft_ms: 'TTFT (UI)',
  llm_ttft_ms: 'model TTFT',
  runner_rtt_ms: 'runner round trip',
  total_ms: 'total',
};

/** A stage's name for people, the same in every table as in the waterfall ("prompt_assemble_ms" → "prompt assembly"). */
export function stageLabel(key: string): string {
  const row = WATERFALL_ROWS.find((r) => r.key === key);
  if (row) return row.label;
  return OTHER_LABELS[key] ?? key.replace(/_ms$/, '').replace(/_/g, ' ');
}

function isPercentiles(v: unknown): v is Percentiles {
  return !!v && typeof v === 'object' && 'p50' in v;
}

function row(key: string, label: string, p: Percentiles): StatRow {
  return { key, label, p50: fmtMs(p.p50), p95: fmtMs(p.p95), p99: fmtMs(p.p99), n: typeof p.n === 'number' ? p.n : 0 };
}

export function stageRows(stats: TraceStats | undefined): StatRow[] {
  const st = stats?.stages ?? {};
  const keys = Object.keys(st).filter((k) => isPercentiles(st[k]));
  keys.sort((a, b) => {
    const ia = STAGE_ORDER.indexOf(a);
    const ib = STAGE_ORDER.indexOf(b);
    if (ia !== -1 || ib !== -1) return (ia === -1 ? 1e9 : ia) - (ib === -1 ? 1e9 : ib);
    return a < b ? -1 : a > b ? 1 : 0;
  });
  return keys.map((k) => row(k, stageLabel(k), st[k]));
}

/**
 * Sort key of a group name: "<512" before "512-1023" before ">=4096"; fallback levels "0", "1" as numbers.
 * Names that hold no number go last, in text order.
 */
export function groupOrder(name: string): number {
  const m = /^\s*(<=?|>=?)?\s*(\d+(?:\.\d+)?)/.exec(name);
  if (!m) return Number.POSITIVE_INFINITY;
  const n = parseFloat(m[2]);
  if (m[1] === '<') return n - 0.5; // everything below n: before the bucket that starts at n
  if (m[1] === '<=') return n - 0.25;
  if (m[1] === '>') return n + 0.5;
  return n; // "n-m", "n+", ">=n", "n"
}

/** Rows for by_bucket / by_fallback: each group's time to first token, ordered numerically by name. */
export function groupRows(groups: TraceStats['by_bucket'], label: (name: string) => string = (n) => n): StatRow[] {
  if (!groups) return [];
  const out: StatRow[] = [];
  for (const [name, g] of Object.entries(groups)) {
    if (g && isPercentiles(g.ttft)) out.push(row(name, label(name), { ...g.ttft, n: typeof g.n === 'number' ? g.n : g.ttft.n }));
  }
  out.sort((a, b) => groupOrder(a.key) - groupOrder(b.key) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return out;
}

const FALLBACKS: Record<string, string> = {
  '0': '0 · full pipeline',
  '1': '1 · rerank skipped',
  '2': '2 · BM25 only',
  '3': '3 · extractive (no model)',
};

/** "1" → "1 · rerank skipped" (docs/design.md, "Fallback levels"). */
export function fallbackLabel(level: string): string {
  return FALLBACKS[level] ?? level;
}

/** "<512" → "< 512", ">=4096" → "≥ 4,096", "512-1023" → "512–1,023". */
export function bucketLabel(name: string): string {
  const int = (d: string) => d.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return name
    .replace(/^>=\s*/, '≥ ')
    .replace(/^<=\s*/, '≤ ')
    .replace(/^<\s*/, '< ')
    .replace(/^>\s*/, '> ')
    .replace(/(\d)-(\d)/, '$1–$2')
    .replace(/\d+/g, int);
}

export interface HistBin {
  lo: number;
  hi: number; // Infinity for the open last bucket
  count: number;
  label: string;
}

function leValue(le: HistogramBucket['le']): number {
  if (typeof le === 'number' && Number.isFinite(le)) return le;
  if (typeof le === 'string' && /^\d+(\.\d+)?$/.test(le.trim())) return parseFloat(le);
  return Number.POSITIVE_INFINITY; // null, "+Inf", "inf", …
}

/**
 * Turns ttft_histogram into bins. contract: `le` buckets may be cumulative (Prometheus style) or per-bucket;
 * they are taken as cumulative when the counts never decrease, the last equals `total` (the ttft n) and the
 * counts do not already add up to `total`.
 */
export function histogramBins(buckets: HistogramBucket[] | undefined, total?: number): HistBin[] {
  if (!buckets?.length) return [];
  const sorted = buckets
    .map((b) => ({ le: leValue(b.le), count: typeof b.count === 'number' && b.count > 0 ? b.count : 0 }))
    .sort((a, b) => a.le - b.le);
  const counts = sorted.map((b) => b.count);
  const sum = counts.reduce((a, b) => a + b, 0);
  const nondecreasing = counts.every((c, i) => i === 0 || c >= counts[i - 1]);
  const cumulative =
    total !== undefined && nondecreasing && counts[counts.length - 1] === total && sum !== total && counts.length > 1;
  let lo = 0;
  return sorted.map((b, i) => {
    const count = cumulative && i > 0 ? counts[i] - counts[i - 1] : counts[i];
    const hi = b.le;
    const label =
      hi === Number.POSITIVE_INFINITY ? `> ${fmtMs(lo)}` : i === 0 ? `≤ ${fmtMs(hi)}` : `${fmtMs(lo)}–${fmtMs(hi)}`;
    const bin = { lo, hi, count, label };
    lo = hi;
    return bin;
  });
}

/** Bar heights as fractions of the tallest bin (0 when all are empty). */
export function binHeights(bins: HistBin[]): number[] {
  const max = bins.reduce((m, b) => Math.max(m, b.count), 0);
  return bins.map((b) => (max > 0 ? b.count / max : 0));
}

/** "63% of 40 lookups" for one cache; "no lookups" when none. */
export function hitRateText(r: Partial<HitRate> | undefined): string {
  const n = typeof r?.lookups === 'number' ? r.lookups : 0;
  if (n <= 0) return 'no lookups';
  const hits = typeof r?.hits === 'number' ? r.hits : 0;
  return `${Math.round((100 * hits) / n)}% of ${n} lookup${n === 1 ? '' : 's'}`;
}

const PREFETCHES: Record<string, string> = { hit: 'hit · read while typing', partial: 'partial · new passages read after Enter', miss: 'miss', none: 'none' };

/** Whether the answer adopted a prompt read while the user typed (all of it, or all but its new passages). */
export function readWhileTyping(t: Trace | undefined): boolean {
  return t?.prefetch === 'hit' || t?.prefetch === 'partial';
}

export function prefetchLabel(outcome: string): string {
  return PREFETCHES[outcome] ?? outcome;
}
