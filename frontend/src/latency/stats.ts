// Shaping /api/traces/stats for display. Percentiles come from the server; nothing is recomputed here.

import { fmtMs } from '../format';
import type { HistogramBucket, Percentiles, TraceStats } from '../transport/types';

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

export function stageLabel(key: string): string {
  return key.replace(/_ms$/, '').replace(/_/g, ' ');
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

/** Lower bound of a bucket name like "0-512", "512-1024", "4096+" (for sorting). */
function bucketLow(name: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)/.exec(name);
  return m ? parseFloat(m[1]) : Number.POSITIVE_INFINITY;
}

/**
 * Rows for by_bucket / by_fallback. contract: each value is "{…}"; accepted are Percentiles (of TTFT) or a
 * per-stage map (whose `ttft_ms` entry is shown).
 */
export function groupRows(groups: TraceStats['by_bucket'], stage = 'ttft_ms'): StatRow[] {
  if (!groups) return [];
  const out: StatRow[] = [];
  for (const [name, v] of Object.entries(groups)) {
    if (isPercentiles(v)) out.push(row(name, name, v));
    else if (v && typeof v === 'object' && isPercentiles((v as Record<string, unknown>)[stage])) {
      out.push(row(name, name, (v as Record<string, Percentiles>)[stage]));
    }
  }
  out.sort((a, b) => bucketLow(a.key) - bucketLow(b.key) || (a.key < b.key ? -1 : 1));
  return out;
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
