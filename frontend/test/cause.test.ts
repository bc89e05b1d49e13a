import { describe, expect, it } from 'vitest';
import FX from '../e2e/fixtures/real-server.json';
import { causeText, prefillRate, ttftCause } from '../src/latency/cause';
import type { Trace } from '../src/transport/types';

const recorded = (FX as unknown as { ask: Array<{ event: string; data: unknown }> }).ask.find((e) => e.event === 'done')!.data as Trace;

describe('TTFT cause line', () => {
  it('names the biggest part of TTFT with the knob that helps', () => {
    const t: Trace = { request_id: 'a', prompt_tokens: 731, eval_tokens: 645, stages: { ttft_ms: 1000, prefill_ms: 990, embed_ms: 5, queue_ms: 1 } };
    expect(causeText(t)).toBe('prefill 99% of TTFT: 645 of 731 prompt tokens were new — fewer passages in the prompt: Top K, or Context tokens, in Settings — reading less can cost answer quality (see Support)');
    // An automatic budget (Context tokens 0) is named by the number it chose, not as a setting to lower.
    expect(ttftCause({ ...t, context_budget: 768 })!.knob).toBe('fewer passages in the prompt: Top K, or Context tokens (this prompt\'s passage budget: 768 tokens; 0 = automatic), in Settings — reading less can cost answer quality (see Support)');
    // The trace says where the budget came from: the setting, or automatic.
    expect(ttftCause({ ...t, context_budget: 900, context_budget_from: 'setting' })!.knob).toContain('900 tokens; set)');
    expect(ttftCause({ ...t, context_budget: 512, context_budget_from: 'measured earlier' })!.knob).toContain('512 tokens; automatic)');
    const cached: Trace = { ...t, eval_tokens: 40 };
    expect(ttftCause(cached)!.knob).toMatch(/cache/);
    const queued: Trace = { request_id: 'q', stages: { ttft_ms: 2000, queue_ms: 1500, prefill_ms: 400 } };
    expect(causeText(queued)).toMatch(/^waiting for the model 75% of TTFT \(1.50 s\).*Max answer tokens/);
    const rerank: Trace = { request_id: 'r', stages: { ttft_ms: 2000, rerank_ms: 1200, prefill_ms: 400 } };
    expect(ttftCause(rerank)!.stage).toBe('rerank');
    const search: Trace = { request_id: 's', stages: { ttft_ms: 400, retrieval_ms: 350, embed_ms: 10, prefill_ms: 20 } };
    expect(ttftCause(search)!.stage).toBe('search');
    const fast: Trace = { request_id: 'f', stages: { ttft_ms: 6.4, retrieval_ms: 2.7, prefill_ms: 0 } };
    // Fast, it is still a cause (where the time went), never the TTFT said again (issue 35, 17).
    expect(causeText(fast)).toBe('searching the library 42% of TTFT');
    expect(ttftCause(fast)!.knob).toBe('');
    expect(causeText({ request_id: 'n', stages: {} })).toBe('');
  });

  it('explains the recorded trace of lore serve', () => {
    const c = ttftCause(recorded);
    expect(c).toBeDefined();
    expect(c!.share).toBeGreaterThan(0);
    expect(c!.share).toBeLessThanOrEqual(1);
  });

  it('learns the prefill speed from a trace that read enough tokens', () => {
    expect(prefillRate({ request_id: 'p', eval_tokens: 600, stages: { prefill_ms: 300 } })).toBe(2);
    expect(prefillRate({ request_id: 'p', eval_tokens: 3, stages: { prefill_ms: 3 } })).toBe(0);
    expect(prefillRate({ request_id: 'p', stages: {} })).toBe(0);
  });
});

describe('ChatView: first-question estimate and the cause line', () => {
  it('estimates a prefill the server has no speed for from the last answer, and explains the TTFT after', async () => {
    const { ChatView } = await import('../src/views/chat');
    const { vi } = await import('vitest');
    const asks: Array<import('../src/transport/types').AskCallbacks> = [];
    const t = {
      kind: 'http', desktop: false,
      ask: (_r: unknown, cb: import('../src/transport/types').AskCallbacks) => (asks.push(cb), { cancel() {}, finished: Promise.resolve() }),
      reportUITTFT: async () => undefined, prefetch: async () => undefined,
      chats: async () => [], traces: vi.fn(async () => [{ request_id: 'old', eval_tokens: 600, stages: { prefill_ms: 300 } }]),
    } as unknown as import('../src/transport/types').Transport;
    const ctx = { t, workspace: () => 'w', showLatency() {}, traceFinished() {}, notify() {}, workspacesChanged() {} };
    const view = new ChatView(ctx);
    document.body.replaceChildren(view.el);
    await view.reset();
    await vi.waitFor(() => expect(t.traces).toHaveBeenCalled());
    await new Promise((r) => setTimeout(r, 0));
    view.ask('q');
    const q = (id: string) => view.el.querySelector(`[data-testid="${id}"]`) as HTMLElement;
    asks[0].onStage({ name: 'prefill', state: 'start', detail: { prompt_tokens: 1000, cached_tokens: 100, eval_tokens: 900, expected_ms: 0 } });
    expect(q('prefill-text').textContent).toBe('1,000 prompt tokens · 100 from cache · 900 to read · about 450 ms');
    asks[0].onToken('hi');
    asks[0].onDone({ request_id: 'r', prompt_tokens: 1000, eval_tokens: 900, stages: { ttft_ms: 500, prefill_ms: 460 } });
    expect(q('answer-cause').hidden).toBe(false);
    expect(q('answer-cause').textContent).toMatch(/^prefill 92% of TTFT: 900 of 1,000 prompt tokens were new/);
    // A fast answer: nothing to change, so no second line saying the meta line again (issue 35, 17).
    view.ask('q2');
    asks[1].onToken('hi');
    asks[1].onDone({ request_id: 'r2', stages: { ttft_ms: 116, prefill_ms: 80 } });
    const turns = view.el.querySelectorAll('[data-testid="turn"]');
    const last = turns[turns.length - 1];
    expect((last.querySelector('[data-testid="answer-cause"]') as HTMLElement).hidden).toBe(true);
    expect(last.querySelector('[data-testid="answer-meta"]')!.textContent).toBe('TTFT 116 ms (server)');
    expect((last.querySelector('[data-testid="answer-ttft"]') as HTMLElement).title).toMatch(/server/);
    document.body.replaceChildren();
  });
});
