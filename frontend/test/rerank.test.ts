// The latency panel's rerank line, for the rerank_route values the Go tests record against a second lore serve
// (app/server/rerank_test.go): remote, local fallback, none.
import { describe, expect, it } from 'vitest';
import type { Trace } from '../src/transport/types';
import { renderDetails, rerankText } from '../src/views/latency';

const base: Trace = { request_id: 'r1', stages: { ttft_ms: 120, total_ms: 300 } } as Trace;

describe('rerank line', () => {
  it('names the remote reranker, the local fallback, or none', () => {
    expect(rerankText({ ...base, stages: { ...base.stages, rerank_ms: 40 } })).toBe('local');
    expect(rerankText(base)).toBe('not run');
    expect(rerankText({ ...base, stages: { ...base.stages, rerank_ms: 0 }, skipped_stages: { rerank_ms: 'no rerank model' } })).toBe('not run: no rerank model');
    const remote = 'remote:http://127.0.0.1:46305/v1#rerank';
    expect(rerankText({ ...base, rerank_route: remote })).toBe(remote);
    const fb = `rerank@36e39bc0 (fallback from ${remote})`;
    expect(rerankText({ ...base, rerank_route: fb, fallback_level: 1 })).toBe(fb);
  });

  it('shows it in the details beside the fallback level and reason', () => {
    const fb = 'none (fallback from remote:http://127.0.0.1:34395/v1#rerank)';
    const el = renderDetails({ ...base, rerank_route: fb, fallback_level: 1, fallback_reason: 'rerank skipped: remote rerank unavailable (no local rerank model to fall back to): connection refused' });
    expect(el.querySelector('[data-testid="detail-rerank"]')!.textContent).toBe(fb);
    expect(el.querySelector('[data-testid="detail-fallback"]')!.textContent).toContain('level 1 — rerank skipped: remote rerank unavailable');
  });
});
