// The views against lore serve's own answers, recorded by e2e/real.mjs (e2e/fixtures/real-server.json):
// the shapes here are the server's, not hand-written ones.
import { describe, expect, it, vi } from 'vitest';
import FX from '../e2e/fixtures/real-server.json';
import { compareRecordings, omitEmpty } from '../e2e/fixtures.mjs';
import { fmtMs } from '../src/format';
import { groupRows, bucketLabel } from '../src/latency/stats';
import { layoutWaterfall } from '../src/latency/waterfall';
import type { Settings, StageEvent, Trace, TraceStats, Transport } from '../src/transport/types';
import type { Ctx } from '../src/views/ctx';
import { specText } from '../src/views/latency';
import { SettingsView } from '../src/views/settings';
import { applyStage, fitText, initialStage } from '../src/views/stage';

const fx = FX as unknown as Record<string, unknown>;
const stats = fx['GET /api/traces/stats'] as TraceStats;
const ask = fx.ask as Array<{ event: string; data: unknown }>;

describe('recorded lore serve answers', () => {
  it('grouped TTFT tables have a row per group the server sent, with its figures', () => {
    for (const groups of [stats.by_bucket, stats.by_fallback]) {
      const rows = groupRows(groups, bucketLabel);
      expect(rows.length).toBe(Object.keys(groups!).length);
      expect(rows.length).toBeGreaterThan(0);
      for (const r of rows) {
        const g = groups![r.key];
        expect(r.p50).toBe(fmtMs(g.ttft.p50));
        expect(r.n).toBe(g.n);
      }
    }
  });

  it('the recorded settings (0 = auto) save back unchanged', async () => {
    const settings = fx['GET /api/settings'] as Settings;
    expect(settings.ef_search === 0 || settings.context_tokens === 0).toBe(true); // the case that was refused
    const saved: Settings[] = [];
    const t = { settings: vi.fn(async () => settings), hnswSweep: vi.fn(async () => ({ measured_at: '', cpu: '', sizes: [] })), saveSettings: vi.fn(async (s: Settings) => void saved.push(s)) } as unknown as Transport;
    const ctx = { t, notify: vi.fn() } as unknown as Ctx;
    const view = new SettingsView(ctx);
    document.body.replaceChildren(view.el);
    await view.load();
    (view.el.querySelector('[data-testid="save-settings"]') as HTMLButtonElement).click();
    await vi.waitFor(() => expect(saved).toHaveLength(1));
    expect(saved[0]).toEqual(settings);
    expect(view.el.querySelector('[data-testid="settings-status"]')!.textContent).toBe('Saved.');
    expect(view.el.querySelector('[data-testid="setting-context_tokens-zero"]')!.textContent).toBe('0 = auto');
  });

  it('the recorded trace draws retrieval with its parts, and decode after the first token', () => {
    const trace = ask.find((e) => e.event === 'done')!.data as Trace;
    const rows = Object.fromEntries(layoutWaterfall(trace).rows.map((r) => [r.stage, r]));
    for (const s of ['retrieval', 'embed', 'vector', 'bm25', 'prompt_assemble', 'queue', 'prefill', 'first_decode', 'decode']) {
      expect(rows[s]?.x, s).not.toBeNull();
    }
    expect(rows.embed.parent).toBe('retrieval');
    expect('rerank' in rows).toBe('rerank_ms' in trace.stages);
    // The live generate-done event carries the stored trace's decode figure.
    const gen = ask.find((e) => e.event === 'stage' && (e.data as StageEvent).name === 'generate' && (e.data as StageEvent).state === 'done')!.data as StageEvent;
    expect(gen.ms).toBe(trace.stages.decode_ms);
  });

  it('a recorded speculative answer says how its drafts went, one without says off', () => {
    const traces = fx['GET /api/traces'] as Trace[];
    const spec = traces.find((t) => t.spec_note)!;
    expect(spec, 'the e2e run records a speculative answer').toBeDefined();
    const text = specText(spec);
    expect(text.startsWith(spec.spec_note!)).toBe(true);
    if (spec.drafted) expect(text).toContain(`${spec.accepted ?? 0} of ${spec.drafted} drafted tokens kept`);
    expect(text.includes("route's acceptance")).toBe(spec.draft_accept_rate != null);
    expect(specText(traces.find((t) => !t.spec_note)!)).toBe('off');
  });

  it('the recorded stage events say how many candidates fit the prompt', () => {
    let s = initialStage();
    for (const e of ask) if (e.event === 'stage') s = applyStage(s, e.data as StageEvent);
    const d = (ask.find((e) => e.event === 'stage' && (e.data as StageEvent).name === 'prompt_assemble' && (e.data as StageEvent).state === 'done')!.data as StageEvent).detail!;
    expect(fitText(s)).toBe(`${d.sources} of ${d.candidates} candidates fit the prompt`);
  });

  it('a mock answer of another shape is caught as drift', () => {
    expect(compareRecordings(fx, fx).problems).toEqual([]);
    const drifted = structuredClone(fx) as Record<string, unknown>;
    const st = drifted['GET /api/traces/stats'] as { by_bucket: Record<string, unknown> };
    // What the old mock sent: bare percentiles per bucket.
    st.by_bucket = { '0-512': { p50: 1, p95: 2, p99: 3, n: 4 } };
    const d = compareRecordings(drifted, fx);
    expect(d.problems.join('\n')).toMatch(/by_bucket\{\}\.p50: in the fixture, not in the server's answer/);
  });

  it('a field the server omits when empty may be missing from one answer; any other may not', () => {
    const optional = omitEmpty('../app') // vitest runs in frontend/;
    expect(optional.has('stale_passages')).toBe(true);
    expect(optional.has('prompt_tokens')).toBe(false);
    const live = structuredClone(fx) as Record<string, Array<Record<string, unknown>>>;
    const withField = structuredClone(fx) as Record<string, Array<Record<string, unknown>>>;
    for (const t of live['GET /api/traces']) {
      delete t.stale_passages;
      delete t.prompt_tokens;
    }
    withField['GET /api/traces'][0].stale_passages = 1;
    const problems = compareRecordings(withField, live, optional).problems.join('\n');
    expect(problems).not.toMatch(/stale_passages/);
    expect(problems).toMatch(/traces\[\]\.prompt_tokens: in the fixture, not in the server's answer/);
  });
});

describe('privacy badge', () => {
  it('says the recorded local server keeps everything on this machine', async () => {
    const { PrivacyBadge } = await import('../src/views/privacy');
    const b = new PrivacyBadge();
    b.show(fx['GET /api/system'] as { local: boolean; remote: [] });
    expect(b.el.textContent).toBe('On this machine');
    expect(b.el.classList.contains('leaves')).toBe(false);
  });
  it('names what leaves and for which host (app.DataLeaves: role, url, what)', async () => {
    const { PrivacyBadge } = await import('../src/views/privacy');
    const b = new PrivacyBadge();
    const what = 'your questions, the chat so far and the passages retrieved from your library are sent to this server';
    b.show({ local: false, remote: [{ role: 'chat', url: 'https://gpu.example:8443/v1', what }] });
    expect(b.el.textContent).toBe('Leaves this machine: chat → gpu.example:8443');
    expect(b.el.classList.contains('leaves')).toBe(true);
    expect(b.el.title).toBe(`https://gpu.example:8443/v1: ${what}`);
  });
});
