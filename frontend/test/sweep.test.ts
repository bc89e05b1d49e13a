import { describe, expect, it } from 'vitest';
import type { HNSWSweep } from '../src/transport/types';
import { efFor, knee, renderSweep } from '../src/views/sweep';

// The shape app.HNSWSweep serialises to (cmd/lore's sweep test checks the saved copy against the bench's output).
const sw: HNSWSweep = {
  measured_at: '2026-12-04T22:00:00Z',
  cpu: 'avx512',
  sizes: [
    { n: 100000, dim: 384, build_s: 12, exact_p95_ms: 7.6, points: [
      { ef_search: 16, recall_at_10: 0.763, p50_ms: 0.13, p95_ms: 0.19 },
      { ef_search: 64, recall_at_10: 0.989, p50_ms: 0.28, p95_ms: 0.43 },
      { ef_search: 96, recall_at_10: 0.997, p50_ms: 0.31, p95_ms: 0.6 },
      { ef_search: 400, recall_at_10: 1, p50_ms: 0.52, p95_ms: 0.68 },
    ] },
    { n: 1000000, dim: 384, build_s: 466, exact_p95_ms: 72, points: [
      { ef_search: 96, recall_at_10: 0.752, p50_ms: 0.97, p95_ms: 1.4 },
      { ef_search: 400, recall_at_10: 0.936, p50_ms: 2.49, p95_ms: 3.63 },
    ] },
  ],
};

describe('efSearch sweep', () => {
  it('the knee is the smallest efSearch within 0.01 of the best recall', () => {
    expect(knee(sw.sizes[0])).toBe(96); // 0.989 at 64 is 0.011 short of 1
    expect(knee(sw.sizes[1])).toBe(400);
    expect(efFor(0)).toBe(96);
  });

  it('marks the current setting and each size’s knee; says how to measure when nothing was', () => {
    const el = renderSweep(sw, 0);
    const row = (ef: number) => el.querySelector(`[data-testid="sweep-row-${ef}"]`)!;
    expect(row(96).textContent).toMatch(/^96 \(current, knee at 100,000\)0\.9970\.600\.7521\.40$/);
    expect(row(96).classList.contains('current')).toBe(true);
    expect(row(64).textContent).not.toContain('knee');
    expect(row(16).textContent).toContain('—'); // not measured at 1M
    expect(row(400).textContent).toContain('knee at 1,000,000');
    expect(el.querySelectorAll('polyline')).toHaveLength(2);
    expect(renderSweep({ ...sw, sizes: [] }, 96).getAttribute('data-testid')).toBe('sweep-none');
  });
});
