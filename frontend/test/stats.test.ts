import { describe, expect, it } from 'vitest';
import { fmtBytes, fmtDate, fmtDuration, fmtInt, fmtMs, fmtNum, fmtParams, fmtPct, fmtRate } from '../src/format';
import { binHeights, bucketLabel, fallbackLabel, groupOrder, groupRows, histogramBins, hitRateText, prefetchLabel, stageRows } from '../src/latency/stats';
import { renderHistogram } from '../src/views/latency';
import type { GroupStats, TraceStats } from '../src/transport/types';

/** A group as the server sends it (store.Stats): n, ttft, total and per-stage percentiles. */
function group(p50: number, n: number): GroupStats {
  const p = { p50, p95: p50 * 1.5, p99: p50 * 2, n };
  return { n, ttft: p, total: { ...p, p50: p50 * 3 }, stages: { prefill_ms: p } };
}

describe('formatting (no Intl)', () => {
  it('formats milliseconds across ranges', () => {
    expect(fmtMs(0)).toBe('0 ms');
    expect(fmtMs(0.123)).toBe('0.12 ms');
    expect(fmtMs(4.25)).toBe('4.3 ms');
    expect(fmtMs(9.96)).toBe('10.0 ms');
    expect(fmtMs(123.4)).toBe('123 ms');
    expect(fmtMs(999.4)).toBe('999 ms');
    expect(fmtMs(999.6)).toBe('1.00 s');
    expect(fmtMs(1234)).toBe('1.23 s');
    expect(fmtMs(12345)).toBe('12.3 s');
    expect(fmtMs(125000)).toBe('2 min 05 s');
    expect(fmtMs(-5)).toBe('-5.0 ms');
    expect(fmtMs(undefined)).toBe('—');
    expect(fmtMs(NaN)).toBe('—');
    expect(fmtMs(Infinity)).toBe('—');
    expect(fmtMs('12' as unknown)).toBe('—');
  });

  it('formats integers with separators', () => {
    expect(fmtInt(0)).toBe('0');
    expect(fmtInt(999)).toBe('999');
    expect(fmtInt(1000)).toBe('1,000');
    expect(fmtInt(1234567)).toBe('1,234,567');
    expect(fmtInt(-12345.6)).toBe('-12,346');
    expect(fmtInt(null)).toBe('—');
  });

  it('formats the rest', () => {
    expect(fmtNum(1.5, 2)).toBe('1.5');
    expect(fmtNum(2, 2)).toBe('2');
    expect(fmtRate(42.46, 'tok/s')).toBe('42.5 tok/s');
    expect(fmtRate(42, 'tok/s')).toBe('42 tok/s');
    expect(fmtRate(1234.5, 'files/s')).toBe('1,235 files/s');
    expect(fmtBytes(512)).toBe('512 B');
    expect(fmtBytes(1536)).toBe('1.50 KiB');
    expect(fmtBytes(234 * 1024 * 1024)).toBe('234.0 MiB');
    expect(fmtBytes(4.07 * 1024 ** 3)).toBe('4.07 GiB');
    expect(fmtParams(494032768)).toBe('494M');
    expect(fmtParams(1.54e9)).toBe('1.5B');
    expect(fmtParams('7B')).toBe('7B');
    expect(fmtDuration(8)).toBe('8 s');
    expect(fmtDuration(125)).toBe('2 min 05 s');
    expect(fmtDuration(3720)).toBe('1 h 02 min');
    expect(fmtDuration(-1)).toBe('—');
    expect(fmtPct(0.344)).toBe('34%');
    expect(fmtDate('garbage')).toBe('garbage');
    expect(fmtDate('2026-12-02T13:00:00.123Z')).toMatch(/^2026-12-0[23] \d\d:\d\d$/);
  });

  it('works when Intl.NumberFormat throws (LANG=C webview)', () => {
    const orig = Intl.NumberFormat;
    const origLocale = Number.prototype.toLocaleString;
    (Intl as { NumberFormat: unknown }).NumberFormat = function () {
      throw new RangeError('Incorrect locale information provided');
    };
    Number.prototype.toLocaleString = function () {
      throw new RangeError('Incorrect locale information provided');
    };
    try {
      expect(fmtInt(1234)).toBe('1,234');
      expect(fmtMs(1234)).toBe('1.23 s');
      expect(fmtRate(3, 'x')).toBe('3 x');
      const el = renderHistogram({ stages: {}, ttft_histogram: [{ le: 250, count: 1 }] });
      expect(el.textContent).toContain('250 ms');
    } finally {
      (Intl as { NumberFormat: unknown }).NumberFormat = orig;
      Number.prototype.toLocaleString = origLocale;
    }
  });
});

const STATS: TraceStats = {
  stages: {
    prefill_ms: { p50: 700, p95: 1200, p99: 1800.4, n: 40 },
    zeta_ms: { p50: 1, p95: 2, p99: 3, n: 40 },
    ttft_ms: { p50: 760, p95: 1500, p99: 2100, n: 40 },
    embed_ms: { p50: 9, p95: 12, p99: 30, n: 40 },
  },
  // The server's bucket names (store.PromptBucket), out of order.
  by_bucket: { '>=4096': group(4100, 1), '1024-2047': group(1500, 4), '<512': group(300, 20), '512-1023': group(800, 17), '2048-4095': group(2500, 3) },
  by_fallback: { '1': group(700, 38), '3': group(300, 2), '0': group(900, 1) },
};

describe('stats shaping', () => {
  it('orders stage rows by pipeline, unknown keys last, and formats percentiles', () => {
    const rows = stageRows(STATS);
    expect(rows.map((r) => r.key)).toEqual(['ttft_ms', 'embed_ms', 'prefill_ms', 'zeta_ms']);
    const prefill = rows.find((r) => r.key === 'prefill_ms')!;
    expect([prefill.label, prefill.p50, prefill.p95, prefill.p99, prefill.n]).toEqual(['prefill', '700 ms', '1.20 s', '1.80 s', 40]);
    expect(stageRows(undefined)).toEqual([]);
  });

  it('sorts prompt-length buckets numerically and shows each group\'s TTFT', () => {
    const rows = groupRows(STATS.by_bucket, bucketLabel);
    expect(rows.map((r) => r.key)).toEqual(['<512', '512-1023', '1024-2047', '2048-4095', '>=4096']);
    expect(rows.map((r) => r.label)).toEqual(['< 512', '512–1,023', '1,024–2,047', '2,048–4,095', '≥ 4,096']);
    expect(rows[1].p50).toBe('800 ms');
    expect(rows[1].n).toBe(17);
    expect(groupRows(undefined)).toEqual([]);
    const fb = groupRows(STATS.by_fallback, fallbackLabel);
    expect(fb.map((r) => r.label)).toEqual(['0 · full pipeline', '1 · rerank skipped', '3 · extractive (no model)']);
    expect(groupOrder('nonsense')).toBe(Infinity);
  });

  it('treats per-bucket histogram counts as they are', () => {
    const bins = histogramBins(
      [{ le: 500, count: 3 }, { le: 250, count: 2 }, { le: null, count: 1 }, { le: 1000, count: 4 }],
      10,
    );
    expect(bins.map((b) => [b.lo, b.hi, b.count])).toEqual([
      [0, 250, 2],
      [250, 500, 3],
      [500, 1000, 4],
      [1000, Infinity, 1],
    ]);
    expect(bins.map((b) => b.label)).toEqual(['≤ 250 ms', '250 ms–500 ms', '500 ms–1.00 s', '> 1.00 s']);
  });

  it('detects cumulative (Prometheus-style) counts and differences them', () => {
    const bins = histogramBins(
      [{ le: 250, count: 2 }, { le: 500, count: 5 }, { le: 1000, count: 9 }, { le: '+Inf', count: 10 }],
      10,
    );
    expect(bins.map((b) => b.count)).toEqual([2, 3, 4, 1]);
    // Same numbers but n says they already add up: not cumulative.
    expect(histogramBins([{ le: 250, count: 2 }, { le: 500, count: 5 }], 7).map((b) => b.count)).toEqual([2, 5]);
  });

  it('computes bar heights relative to the tallest bin', () => {
    expect(binHeights([{ lo: 0, hi: 1, count: 2, label: '' }, { lo: 1, hi: 2, count: 4, label: '' }])).toEqual([0.5, 1]);
    expect(binHeights([{ lo: 0, hi: 1, count: 0, label: '' }])).toEqual([0]);
  });

  it('renders the histogram as SVG bars with counts', () => {
    const el = renderHistogram({ stages: { ttft_ms: { p50: 1, p95: 1, p99: 1, n: 6 } }, ttft_histogram: [{ le: 250, count: 2 }, { le: 500, count: 4 }] });
    const rects = el.querySelectorAll('rect');
    expect(rects.length).toBe(2);
    expect(rects[1].getAttribute('height')).toBe('96%');
    expect(rects[0].getAttribute('height')).toBe('48%');
    expect(rects[0].getAttribute('y')).toBe('52%');
    expect(Array.from(el.querySelectorAll('[data-count]')).map((e) => e.getAttribute('data-count'))).toEqual(['2', '4']);
  });
});

describe('cache hit rates and prefetch labels', () => {
  it('says the share of lookups that hit', () => {
    expect(hitRateText({ lookups: 40, hits: 25, rate: 0.625 })).toBe('63% of 40 lookups');
    expect(hitRateText({ lookups: 1, hits: 0, rate: 0 })).toBe('0% of 1 lookup');
    expect(hitRateText({ lookups: 0, hits: 0, rate: 0 })).toBe('no lookups');
    expect(hitRateText(undefined)).toBe('no lookups');
  });
  it('labels prefetch outcomes', () => {
    expect(prefetchLabel('hit')).toBe('hit · read while typing');
    expect(prefetchLabel('other')).toBe('other');
  });
});
