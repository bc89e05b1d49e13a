import { describe, expect, it } from 'vitest';
import { layoutWaterfall, niceStep, withUIMeasurement } from '../src/latency/waterfall';
import { renderWaterfall } from '../src/views/latency';
import type { Trace } from '../src/transport/types';

// The example trace of docs/api.md, with stage_starts filled in.
const TRACE: Trace = {
  request_id: 'r1',
  stages: {
    queue_ms: 0.1, embed_ms: 9, vector_ms: 2, bm25_ms: 3, retrieval_ms: 12, rerank_ms: 0,
    prompt_assemble_ms: 4, tokenize_ms: 1, prefill_ms: 700, first_decode_ms: 20,
    runner_rtt_ms: 0.4, llm_ttft_ms: 730, flush_ms: 0.1, ttft_ms: 760,
    decode_ms: 1500, total_ms: 2300, ui_ttft_ms: 790, paint_ms: 3,
  },
  stage_starts: {
    queue_ms: 0, embed_ms: 0.2, vector_ms: 9.3, bm25_ms: 9.3, retrieval_ms: 9.3, rerank_ms: 21.4,
    prompt_assemble_ms: 21.5, tokenize_ms: 25.6, prefill_ms: 26.7, first_decode_ms: 727, flush_ms: 759.8,
  },
};

const byStage = (t: Trace) => Object.fromEntries(layoutWaterfall(t).rows.map((r) => [r.stage, r]));

describe('layoutWaterfall', () => {
  it('puts every stage on one axis from stage_starts and stages', () => {
    const lay = layoutWaterfall(TRACE);
    // The axis ends at the latest of: stage ends, server TTFT, UI TTFT (790).
    expect(lay.axisMs).toBe(790);
    const r = byStage(TRACE);
    expect(r.prefill.startMs).toBe(26.7);
    expect(r.prefill.durMs).toBe(700);
    expect(r.prefill.x).toBeCloseTo(26.7 / 790, 9);
    expect(r.prefill.w).toBeCloseTo(700 / 790, 9);
    expect(r.embed.x).toBeCloseTo(0.2 / 790, 9);
    expect(r.first_decode.x).toBeCloseTo(727 / 790, 9);
  });

  it('lists a skipped stage with the reason the server gave, without a bar', () => {
    const { rerank_ms: _, ...starts } = TRACE.stage_starts!;
    const t: Trace = { ...TRACE, stage_starts: starts, skipped_stages: { rerank_ms: 'no rerank model' } };
    const r = byStage(t);
    expect(r.rerank).toMatchObject({ durMs: 0, x: null, skipped: 'no rerank model' });
    const row = renderWaterfall(t).querySelector('[data-testid="waterfall-row-rerank"] .wf-ms')!;
    expect(row.textContent).toBe('skipped');
    expect(row.getAttribute('title')).toBe('no rerank model');
  });

  it('lists rows in pipeline order, with the optional ones the trace has', () => {
    expect(layoutWaterfall(TRACE).rows.map((r) => r.stage)).toEqual([
      'retrieval', 'embed', 'vector', 'bm25', 'rerank', 'prompt_assemble', 'queue', 'tokenize', 'prefill', 'first_decode', 'flush', 'paint', 'decode',
    ]);
    const minimal: Trace = { request_id: 'm', stages: { prefill_ms: 5 }, stage_starts: { prefill_ms: 0 } };
    const rows = layoutWaterfall(minimal).rows.map((r) => r.stage);
    expect(rows).not.toContain('tokenize');
    expect(rows).not.toContain('rerank'); // skipped: no stage, no bar
    const extractive: Trace = { request_id: 'x', stages: { retrieval_ms: 2.5, bm25_ms: 2.3, ttft_ms: 4.5 }, stage_starts: { retrieval_ms: 0, bm25_ms: 0.1 } };
    expect(layoutWaterfall(extractive).rows.map((r) => r.stage)).toEqual(['retrieval', 'embed', 'vector', 'bm25', 'prompt_assemble']);
  });

  it('draws retrieval as the parent of embed, vector and bm25, and decode after the first token', () => {
    const t: Trace = {
      ...TRACE,
      stage_starts: { ...TRACE.stage_starts, retrieval_ms: 0.2, decode_ms: 747 },
    };
    const lay = layoutWaterfall(t);
    const r = Object.fromEntries(lay.rows.map((x) => [x.stage, x]));
    expect(lay.axisMs).toBe(747 + 1500); // decode ends the axis
    expect(r.retrieval.parent).toBeUndefined();
    expect(['embed', 'vector', 'bm25'].map((k) => r[k].parent)).toEqual(['retrieval', 'retrieval', 'retrieval']);
    expect(r.decode.x).toBeCloseTo(747 / 2247, 9);
    expect(r.decode.w).toBeCloseTo(1500 / 2247, 9);
    const el = renderWaterfall(t);
    expect(el.querySelector('[data-testid="waterfall-row-embed"]')!.classList.contains('child')).toBe(true);
    expect(el.querySelector('[data-testid="waterfall-row-retrieval"]')!.classList.contains('child')).toBe(false);
    expect(el.querySelector('[data-testid="waterfall-row-decode"] rect.wf-bar')).not.toBeNull();
    const noDecode: Trace = { request_id: 'x', stages: { prefill_ms: 5 }, stage_starts: { prefill_ms: 0 } };
    expect(layoutWaterfall(noDecode).rows.map((x) => x.stage)).not.toContain('decode');
  });

  it('marks vector and bm25 as parallel when they overlap, not when they are sequential', () => {
    let r = byStage(TRACE);
    expect(r.vector.parallel).toBe(true);
    expect(r.bm25.parallel).toBe(true);
    expect(r.embed.parallel).toBe(false);
    const seq: Trace = { ...TRACE, stage_starts: { ...TRACE.stage_starts, vector_ms: 9.3, bm25_ms: 11.3 } };
    r = byStage(seq);
    expect(r.vector.parallel).toBe(false);
    expect(r.bm25.parallel).toBe(false);
  });

  it('gives zero-length stages a minimum visible width, kept inside the axis', () => {
    const r = byStage(TRACE);
    expect(r.rerank.durMs).toBe(0);
    expect(r.rerank.w).toBeGreaterThan(0);
    const t: Trace = { request_id: 'z', stages: { prefill_ms: 100, first_decode_ms: 0 }, stage_starts: { prefill_ms: 0, first_decode_ms: 100 } };
    const fd = byStage(t).first_decode;
    expect(fd.x! + fd.w!).toBeLessThanOrEqual(1 + 1e-12);
  });

  it('places the UI paint row from the UI measurement: it ends at ui_ttft_ms', () => {
    const p = byStage(TRACE).paint;
    expect(p.startMs).toBe(787);
    expect(p.durMs).toBe(3);
    expect((p.x! + p.w!) * 790).toBeCloseTo(790, 6);
  });

  it('draws no bar for a stage without a start, rather than guessing one', () => {
    const t: Trace = { request_id: 'n', stages: { embed_ms: 9, prefill_ms: 50 }, stage_starts: { prefill_ms: 10 } };
    const r = byStage(t);
    expect(r.embed.durMs).toBe(9);
    expect(r.embed.startMs).toBeNull();
    expect(r.embed.x).toBeNull();
    expect(r.prefill.x).toBeCloseTo(10 / 60, 9);
  });

  it('ignores negative and non-numeric values', () => {
    const t = { request_id: 'b', stages: { prefill_ms: -5, embed_ms: 'x' as unknown as number }, stage_starts: { prefill_ms: 0, embed_ms: 0 } } as Trace;
    const r = byStage(t);
    expect(r.prefill.durMs).toBe(0);
    expect(r.embed.durMs).toBe(0);
    expect(layoutWaterfall(t).axisMs).toBe(1);
  });

  it('adds TTFT markers and nice ticks covering the axis', () => {
    const lay = layoutWaterfall(TRACE);
    expect(lay.markers.map((m) => [m.label, m.ms])).toEqual([['TTFT (server)', 760], ['TTFT (UI)', 790]]);
    expect(lay.markers[1].x).toBe(1);
    expect(lay.ticks[0]).toEqual({ ms: 0, x: 0 });
    const steps = lay.ticks.slice(1).map((t, i) => t.ms - lay.ticks[i].ms);
    expect(new Set(steps.map((s) => s.toFixed(6))).size).toBe(1);
    expect(lay.ticks[lay.ticks.length - 1].ms).toBeLessThanOrEqual(790);
    expect(lay.ticks.length).toBeGreaterThanOrEqual(4);
  });

  it('niceStep picks 1/2/2.5/5 × 10^k', () => {
    expect(niceStep(790)).toBe(200);
    expect(niceStep(100)).toBe(20);
    expect(niceStep(12)).toBe(2.5);
    expect(niceStep(0.9)).toBe(0.2);
    expect(niceStep(0)).toBe(1);
  });

  it('withUIMeasurement fills the UI numbers without overriding the server copy', () => {
    const t: Trace = { request_id: 'u', stages: { ttft_ms: 10 } };
    const m = withUIMeasurement(t, 20, 2);
    expect(m.stages.ui_ttft_ms).toBe(20);
    expect(m.stages.paint_ms).toBe(2);
    expect(t.stages.ui_ttft_ms).toBeUndefined();
    expect(withUIMeasurement(m, 99, 9).stages.ui_ttft_ms).toBe(20);
  });
});

describe('renderWaterfall', () => {
  it('renders one row per stage with test ids and SVG bars at the computed positions', () => {
    const el = renderWaterfall(TRACE);
    const prefill = el.querySelector('[data-testid="waterfall-row-prefill"]')!;
    expect(prefill).not.toBeNull();
    const rect = prefill.querySelector('rect')!;
    expect(rect.getAttribute('x')).toMatch(/%$/);
    expect(parseFloat(rect.getAttribute('x')!)).toBeCloseTo((26.7 / 790) * 100, 3);
    expect(parseFloat(rect.getAttribute('width')!)).toBeCloseTo((700 / 790) * 100, 3);
    // axis labels sit at their ticks
    const labels = Array.from(el.querySelectorAll('.wf-tick-label'));
    expect(labels.map((l) => l.textContent)).toEqual(['0 ms', '200 ms', '400 ms', '600 ms']);
    expect(parseFloat(labels[2].getAttribute('x')!)).toBeCloseTo((400 / 790) * 100, 3);
    expect(prefill.textContent).toContain('700 ms');
    for (const s of ['queue', 'embed', 'vector', 'bm25', 'rerank', 'prompt_assemble', 'first_decode', 'paint']) {
      expect(el.querySelector(`[data-testid="waterfall-row-${s}"]`), s).not.toBeNull();
    }
    expect(el.querySelector('[data-testid="waterfall-row-vector"]')!.classList.contains('parallel')).toBe(true);
    expect(el.querySelectorAll('[style]').length).toBe(0);
  });
});
