// The Latency view as a new user meets it (issue 35): a row of Recent requests brings "This answer" into view
// (4), the tables name stages as the waterfall does (18), the prompt's token parts add up (10).
import { afterEach, describe, expect, it, vi } from 'vitest';
import FX from '../e2e/fixtures/real-server.json';
import { stageLabel, stageRows } from '../src/latency/stats';
import { WATERFALL_ROWS } from '../src/latency/waterfall';
import type { Trace, TraceStats, Transport } from '../src/transport/types';
import type { Ctx } from '../src/views/ctx';
import { LatencyView, renderDetails } from '../src/views/latency';

const fx = FX as unknown as Record<string, unknown>;
const STATS = fx['GET /api/traces/stats'] as TraceStats;
const TRACE = fx['GET /api/traces/{id}'] as Trace;

afterEach(() => {
  document.body.replaceChildren();
  vi.restoreAllMocks();
});

function view(traces: Trace[]) {
  const t = {
    kind: 'http',
    desktop: false,
    traceStats: vi.fn(async () => STATS),
    traces: vi.fn(async () => traces),
    trace: vi.fn(async (id: string) => traces.find((x) => x.request_id === id)),
  } as unknown as Transport;
  const ctx = { t, notify: vi.fn() } as unknown as Ctx;
  const v = new LatencyView(ctx);
  document.body.replaceChildren(v.el);
  const q = (id: string) => v.el.querySelector(`[data-testid="${id}"]`) as HTMLElement;
  return { v, t, q, ctx };
}

describe('Latency view', () => {
  it('a click on a recent request brings This answer into view, on that request, its row marked', async () => {
    const traces = [0, 1, 2].map((i) => ({ ...TRACE, request_id: `req-${i}`, question: `question ${i}` }));
    const { v, q } = view(traces);
    await v.refresh();
    // jsdom has no scrolling: record which element is asked to come into view.
    const seen: Element[] = [];
    const proto = Element.prototype as { scrollIntoView?: unknown };
    const had = proto.scrollIntoView;
    proto.scrollIntoView = function (this: Element) {
      seen.push(this);
    };
    try {
    const rows = Array.from(v.el.querySelectorAll('[data-testid="history-item"]')) as HTMLButtonElement[];
    rows[2].click();
    await vi.waitFor(() => expect(q('trace-id').textContent).toContain('req-2'));
    await vi.waitFor(() => expect(seen).toContain(q('latency-current')));
    expect(q('trace-question').textContent).toBe('question 2');
    expect(rows[2].classList.contains('active')).toBe(true);
    expect(rows[2].getAttribute('aria-current')).toBe('true');
    expect(rows[0].classList.contains('active')).toBe(false);
    expect(document.activeElement).toBe(q('latency-current'));
    } finally {
      proto.scrollIntoView = had;
    }
  });

  it('opens on the newest request when no answer was asked in this session', async () => {
    const { v, q } = view([{ ...TRACE, request_id: 'newest', question: 'the newest' }, { ...TRACE, request_id: 'older' }]);
    await v.refresh();
    expect(q('trace-question').textContent).toBe('the newest');
    expect(v.el.querySelector('.history-item.active')?.getAttribute('data-request-id')).toBe('newest');
  });

  it('the stage tables use the waterfall\'s names, one per stage (recorded stats)', () => {
    const labels = stageRows(STATS).map((r) => r.label);
    for (const bad of ['ui ttft', 'llm ttft', 'runner rtt', 'prompt assemble', 'first decode', 'paint']) expect(labels).not.toContain(bad);
    for (const row of WATERFALL_ROWS) expect(stageLabel(row.key)).toBe(row.label);
    expect(stageLabel('prompt_assemble_ms')).toBe('prompt assembly');
    expect(stageLabel('first_decode_ms')).toBe('first token');
    expect(stageLabel('paint_ms')).toBe('paint (UI)');
    expect(stageLabel('ttft_ms')).toBe('TTFT (server)');
    expect(stageLabel('ui_ttft_ms')).toBe('TTFT (UI)');
    expect(stageLabel('llm_ttft_ms')).toBe('model TTFT');
    expect(stageLabel('runner_rtt_ms')).toBe('runner round trip');
    expect(new Set(labels).size).toBe(labels.length);
  });

  it('prompt tokens: the parts add up to the total (read while typing is not also counted as cached)', () => {
    const t: Trace = { ...TRACE, prefetch: 'hit', prefetched_tokens: 305, cached_tokens: 391, eval_tokens: 426, prompt_tokens: 817, stitched_tokens: 0 };
    const text = renderDetails(t).querySelector('[data-testid="token-split-text"]')!.textContent!;
    expect(text).toBe('86 cached (11%) · 305 prefilled while you typed · 426 evaluated · 817 total');
    const nums = text.split(' · ').slice(0, -1).map((p) => parseInt(p.replace(/,/g, ''), 10));
    expect(nums.reduce((a, b) => a + b, 0)).toBe(817);
  });

  it('cache: the tokens an earlier question\'s kept state gave, or why it did not', () => {
    const cache = (t: Trace) => renderDetails(t).querySelector('[data-testid="detail-cache"]')!.textContent;
    const base = { ...TRACE, embed_cache_hit: false, retrieval_cache_hit: false };
    expect(cache({ ...base, restored_tokens: 1145 })).toBe('embedding miss · retrieval miss · 1,145 tokens restored from an earlier question');
    expect(cache({ ...base, restore_note: 'no longer kept' })).toBe('embedding miss · retrieval miss · earlier question\'s state not restored: no longer kept');
    expect(cache(base)).toBe('embedding miss · retrieval miss');
  });

  it('passage budget: the number and where it came from', () => {
    const budget = (t: Trace) => renderDetails(t).querySelector('[data-testid="detail-budget"]')!.textContent;
    expect(budget({ ...TRACE, context_budget: 1152, context_budget_from: 'measured earlier' })).toBe('1,152 tokens (automatic: the reading speed measured in an earlier run)');
    expect(budget({ ...TRACE, context_budget: 3072, context_budget_from: 'setting' })).toBe('3,072 tokens (set in Settings)');
    expect(budget({ ...TRACE, context_budget: undefined })).toBe('—');
  });
});
