import { afterEach, describe, expect, it, vi } from 'vitest';
import { TTFTMeter } from '../src/ttft';
import { ChatView } from '../src/views/chat';
import type { Ctx } from '../src/views/ctx';
import { applyStage, fitText, initialStage, prefillFraction, prefillText } from '../src/views/stage';
import { slotOptions } from '../src/views/models';
import { progressText } from '../src/views/library';
import type { AskCallbacks, AskRequest, Trace, Transport } from '../src/transport/types';

describe('TTFTMeter', () => {
  it('measures submit → first visible token painted, once', () => {
    let now = 100;
    const paints: Array<() => void> = [];
    const m = new TTFTMeter(() => now, (cb) => paints.push(cb));
    m.start();
    const results: unknown[] = [];
    now = 400;
    expect(m.token('', 400, (r) => results.push(r))).toBe(false);
    expect(m.token('  \n', 400, (r) => results.push(r))).toBe(false);
    now = 900;
    expect(m.token('Hi', 890, (r) => results.push(r))).toBe(true);
    expect(m.token('there', 895, (r) => results.push(r))).toBe(false);
    expect(results).toEqual([]); // not before the paint
    now = 912.34;
    paints[0]();
    expect(results).toEqual([{ uiTTFTms: 812.3, paintMs: 22.3 }]);
    expect(paints).toHaveLength(1);
  });
});

describe('stage placeholder', () => {
  it('follows the pipeline stages', () => {
    let s = initialStage();
    expect(s.label).toBe('Sending…');
    s = applyStage(s, { name: 'queue', state: 'start' });
    expect(s.label).toBe('Waiting for the model…');
    s = applyStage(s, { name: 'retrieval', state: 'start' });
    expect(s.label).toBe('Retrieving…');
    s = applyStage(s, { name: 'retrieval', state: 'done', ms: 12, detail: { sources: 5 } });
    expect(s.label).toBe('Retrieving…'); // a done event does not change the label
    s = applyStage(s, { name: 'rerank', state: 'start' });
    expect(s.label).toBe('Reranking…');
    s = applyStage(s, { name: 'prompt_assemble', state: 'start' });
    expect(s.label).toBe('Fitting 5 candidates into the prompt…');
    expect(fitText(s)).toBe('');
    s = applyStage(s, { name: 'prompt_assemble', state: 'done', ms: 3, detail: { sources: 4, candidates: 20 } });
    expect(fitText(s)).toBe('4 of 20 candidates fit the prompt');
    expect(fitText(applyStage(s, { name: 'prompt_assemble', state: 'done', detail: { sources: 5 } }))).toBe('5 passages in the prompt');
    s = applyStage(s, { name: 'prefill', state: 'start', detail: { prompt_tokens: 1900, cached_tokens: 310, eval_tokens: 1590, expected_ms: 700 } });
    expect(s.label).toBe('Reading 1,900 prompt tokens…');
    expect(prefillText(s.prefill!)).toBe('1,900 prompt tokens · 310 from cache · 1,590 to read · about 700 ms');
    s = applyStage(s, { name: 'prefill', state: 'done', ms: 702.4 });
    expect(prefillText(s.prefill!, s.prefillDoneMs)).toBe('1,900 prompt tokens · 310 from cache · 1,590 to read · read in 702 ms');
    s = applyStage(s, { name: 'generate', state: 'start' });
    expect(s.label).toBe('Generating…');
    expect(applyStage(initialStage(), { name: 'prompt_assemble', state: 'start' }).label).toBe('Building the prompt…');
    expect(applyStage(initialStage(), { name: 'retrieval', state: 'done', detail: { sources: 1 } }).sources).toBe(1);
  });

  it('prefill fraction stays below 1 until done', () => {
    expect(prefillFraction(350, 700, false)).toBeCloseTo(0.5);
    expect(prefillFraction(5000, 700, false)).toBe(0.97);
    expect(prefillFraction(10, 0, false)).toBe(0);
    expect(prefillFraction(10, 700, true)).toBe(1);
  });
});

describe('small view helpers', () => {
  it('offers models of the right kind and keeps an unknown current value', () => {
    const models = [
      { path: '/m/chat.gguf', name: 'chat', kind: 'chat', quantization: 'Q4_0', fits_in_ram: true },
      { path: '/m/big.gguf', name: 'big', kind: 'chat', fits_in_ram: false },
      { path: '/m/emb.gguf', name: 'emb', kind: 'embedding' },
    ];
    expect(slotOptions(models, 'chat', '/m/chat.gguf', false).map((o) => o.value)).toEqual(['/m/chat.gguf', '/m/big.gguf']);
    expect(slotOptions(models, 'chat', '', false)[1].label).toContain('does not fit');
    expect(slotOptions(models, 'rerank', '/gone.gguf', true)).toEqual([
      { value: '', label: 'none' },
      { value: '/gone.gguf', label: '/gone.gguf (not found)' },
    ]);
  });

  it('describes indexing progress', () => {
    expect(progressText({ phase: 'indexing', files_done: 120, files_total: 3000, chunks: 4567, files_per_s: 12.34, eta_s: 233 })).toBe(
      'indexing · 120 / 3,000 files · 4,567 chunks · 12.3 files/s · ETA 3 min 53 s',
    );
    expect(progressText({})).toBe('');
  });
});

// A transport whose ask() hands the callbacks to the test.
function fakeTransport() {
  const asks: Array<{ req: AskRequest; cb: AskCallbacks; cancel: ReturnType<typeof vi.fn> }> = [];
  const t = {
    kind: 'http',
    desktop: true,
    ask: vi.fn((req: AskRequest, cb: AskCallbacks) => {
      const cancel = vi.fn();
      asks.push({ req, cb, cancel });
      return { cancel, finished: Promise.resolve() };
    }),
    reportUITTFT: vi.fn(async () => undefined),
    chats: vi.fn(async () => [{ id: 12, title: 'First chat', created: '2026-12-02T13:00:00Z' }]),
    chat: vi.fn(async () => ({ id: 12, messages: [{ role: 'user', content: 'old q' }, { role: 'assistant', content: 'old **a** [1]', request_id: 'r0' }] })),
    chunk: vi.fn(async () => ({ text: 'the full passage text, longer than the snippet' })),
    openSource: vi.fn(async () => undefined),
    searchChats: vi.fn(async () => [] as unknown[]),
  } as unknown as Transport;
  return { t, asks };
}

function makeView() {
  const { t, asks } = fakeTransport();
  const finished: Trace[] = [];
  const ctx: Ctx = {
    t,
    workspace: () => 'notes',
    showLatency: vi.fn(),
    traceFinished: (tr) => finished.push(tr),
    notify: vi.fn(),
    workspacesChanged: vi.fn(),
  };
  const view = new ChatView(ctx);
  document.body.replaceChildren(view.el);
  view.updateHint();
  const q = (id: string) => view.el.querySelector(`[data-testid="${id}"]`) as HTMLElement;
  const all = (id: string) => Array.from(view.el.querySelectorAll(`[data-testid="${id}"]`)) as HTMLElement[];
  const ask = (text: string) => {
    (q('question-input') as HTMLTextAreaElement).value = text;
    (q('submit') as HTMLButtonElement).click();
  };
  return { view, t, asks, finished, ctx, q, all, ask };
}

const SOURCES = [
  { n: 1, chunk_id: 5, document: 'notes/a.md', path: '/abs/notes/a.md', heading: 'Intro > Setup', line_start: 3, line_end: 20, text: 'snippet one' },
  { n: 2, chunk_id: 6, document: 'notes/b.md', path: '/abs/notes/b.md', text: 'snippet two' },
];

afterEach(() => document.body.replaceChildren());

describe('ChatView', () => {
  it('shows the placeholder at once, live stages, prefill progress, sources before tokens, then the answer', async () => {
    const { asks, q, all, ask, finished, t } = makeView();
    ask('How do I set it up?');
    expect(asks[0].req).toEqual({ question: 'How do I set it up?', workspace: 'notes' });
    expect(q('answer-placeholder').hidden).toBe(false);
    expect(q('answer-stage').textContent).toBe('Sending…');
    expect((q('submit') as HTMLButtonElement).disabled).toBe(true);
    expect(q('stop').hidden).toBe(false);

    const cb = asks[0].cb;
    cb.onTrace({ request_id: 'r1', chat_id: 12 });
    cb.onStage({ name: 'retrieval', state: 'start' });
    expect(q('answer-stage').textContent).toBe('Retrieving…');
    cb.onStage({ name: 'retrieval', state: 'done', ms: 12, detail: { sources: 2 } });
    cb.onSources(SOURCES);
    expect(q('sources').hidden).toBe(false);
    expect(all('source').map((s) => s.getAttribute('data-n'))).toEqual(['1', '2']);
    expect(q('answer').textContent).toBe('');
    cb.onStage({ name: 'prompt_assemble', state: 'start' });
    expect(q('answer-stage').textContent).toBe('Fitting 2 candidates into the prompt…');
    expect(q('answer-fit').hidden).toBe(true);
    cb.onStage({ name: 'prompt_assemble', state: 'done', ms: 2, detail: { sources: 1, candidates: 2 } });
    expect(q('answer-fit').textContent).toBe('1 of 2 candidates fit the prompt');
    expect(q('sources').querySelector('summary')?.textContent).toBe('Sources · 1 of 2 candidates fit the prompt');
    cb.onStage({ name: 'prefill', state: 'start', detail: { prompt_tokens: 900, cached_tokens: 310, eval_tokens: 590, expected_ms: 700 } });
    expect(q('prefill-progress').hidden).toBe(false);
    expect(q('prefill-text').textContent).toContain('310 from cache');
    expect(q('prefill-text').textContent).toContain('about 700 ms');
    cb.onStage({ name: 'prefill', state: 'done', ms: 690 });
    cb.onStage({ name: 'generate', state: 'start' });

    cb.onToken('Run `lore serve` [1]');
    expect(q('answer-placeholder').hidden).toBe(true);
    expect(q('answer').querySelector('code')?.textContent).toBe('lore serve');
    expect(q('answer').querySelector('a.cite')?.getAttribute('data-cite')).toBe('1');
    cb.onToken(' and see [2].');
    await new Promise((r) => setTimeout(r, 50)); // coalesced re-render
    expect(q('answer').querySelectorAll('a.cite').length).toBe(2);

    // The UI's own TTFT is reported once painted.
    await vi.waitFor(() => expect(t.reportUITTFT).toHaveBeenCalledTimes(1));
    const [rid, uiTTFT, paint] = (t.reportUITTFT as ReturnType<typeof vi.fn>).mock.calls[0];
    expect(rid).toBe('r1');
    expect(uiTTFT).toBeGreaterThanOrEqual(paint);
    expect(paint).toBeGreaterThanOrEqual(0);

    const trace: Trace = { request_id: 'r1', stages: { ttft_ms: 760 }, decode_tok_s: 42.5 };
    cb.onDone(trace);
    expect(q('stop').hidden).toBe(true);
    expect((q('submit') as HTMLButtonElement).disabled).toBe(false);
    expect(q('answer-meta').textContent).toContain('TTFT 760 ms');
    expect(q('answer-meta').textContent).toContain('42.5 tok/s');
    const last = finished[finished.length - 1];
    expect(last.request_id).toBe('r1');
    expect(last.stages.ui_ttft_ms).toBe(uiTTFT);
  });

  it('the answer line says how well the cited passages support it, as text with the check in its title', () => {
    const { asks, ask } = makeView();
    for (const [i, support] of [0.75, 0.25, undefined].entries()) {
      ask('q');
      const cb = asks[i].cb;
      cb.onTrace({ request_id: `r${i}`, chat_id: 12 });
      cb.onToken('answer [1]');
      cb.onDone({ request_id: `r${i}`, stages: { ttft_ms: 760 }, support, checked_sentences: 4, supported_sentences: support ? support * 4 : 0 });
      const metas = Array.from(document.querySelectorAll('[data-testid="answer-meta"]'));
      const meta = metas[metas.length - 1] as HTMLElement;
      const span = meta.querySelector('[data-testid="answer-support"]') as HTMLElement | null;
      if (support === undefined) {
        expect(span).toBeNull();
        expect(meta.textContent).toBe('TTFT 760 ms (server)');
        continue;
      }
      const text = `supported ${support * 100}% (${support * 4}/4 sentences)`;
      expect(meta.textContent).toBe(`TTFT 760 ms (server) · ${text}`);
      expect(span!.textContent).toBe(text);
      expect(span!.title).toMatch(/^Share of the answer's sentences whose content words mostly/);
      expect(span!.classList.contains('low')).toBe(support < 0.5);
    }
  });

  it('opens a source passage from a citation, with Open file in the desktop app', async () => {
    const { asks, q, ask, t } = makeView();
    ask('q');
    const cb = asks[0].cb;
    cb.onTrace({ request_id: 'r1', chat_id: 12 });
    cb.onSources(SOURCES);
    cb.onToken('See [2].');
    (q('answer').querySelector('a.cite[data-cite="2"]') as HTMLElement).click();
    expect(q('source-passage').hidden).toBe(false);
    expect(q('passage-text').textContent).toBe('snippet two');
    expect(t.chunk).toHaveBeenCalledWith(6);
    await vi.waitFor(() => expect(q('passage-text').textContent).toBe('the full passage text, longer than the snippet'));
    q('open-source').click();
    expect(t.openSource).toHaveBeenCalledWith(6);
  });

  it('stop cancels the request and keeps the partial answer', () => {
    const { asks, q, ask } = makeView();
    ask('q');
    asks[0].cb.onToken('partial');
    q('stop').click();
    expect(asks[0].cancel).toHaveBeenCalledTimes(1);
    expect(q('answer-error').textContent).toBe('Stopped.');
    expect(q('answer').textContent).toContain('partial');
    expect(q('stop').hidden).toBe(true);
  });

  it('shows errors and allows retry', () => {
    const { asks, q, ask } = makeView();
    ask('why?');
    asks[0].cb.onError('model crashed');
    expect(q('answer-error').textContent).toBe('model crashed');
    q('retry').click();
    expect(asks).toHaveLength(2);
    expect(asks[1].req.question).toBe('why?');
  });

  it('sends chat_id for follow-ups and none after New chat', () => {
    const { asks, q, all, ask } = makeView();
    ask('first');
    asks[0].cb.onTrace({ request_id: 'r1', chat_id: 12 });
    asks[0].cb.onToken('ok');
    asks[0].cb.onDone({ request_id: 'r1', stages: {} });
    ask('second');
    expect(asks[1].req.chat_id).toBe(12);
    asks[1].cb.onDone({ request_id: 'r2', stages: {} });
    q('new-chat').click();
    expect(all('turn').length).toBe(0);
    expect(q('welcome')).not.toBeNull(); // the empty chat's welcome
    ask('third');
    expect(asks[2].req.chat_id).toBeUndefined();
  });

  it('renders hostile streamed output inert', () => {
    const { asks, q, ask } = makeView();
    ask('q');
    asks[0].cb.onSources(SOURCES);
    asks[0].cb.onToken('<img src=x onerror=alert(1)> ![x](http://127.0.0.1:9/leak?d=secret) [c](javascript:alert(1)) [1]');
    const a = q('answer');
    expect(a.querySelectorAll('img').length).toBe(0);
    expect(a.innerHTML).not.toContain('127.0.0.1:9');
    expect(Array.from(a.querySelectorAll('a')).every((x) => x.getAttribute('href') === '#source-1')).toBe(true);
  });

  it('loads history and opens a chat', async () => {
    const { view, q, all } = makeView();
    await view.loadChats();
    expect(all('chat-item').map((b) => b.querySelector('.chat-title')!.textContent)).toEqual(['First chat']);
    expect(all('chat-date')[0].textContent).toMatch(/^2026-12-0[23] \d\d:\d\d$/);
    await view.openChat(12);
    expect(all('question').map((e) => e.textContent)).toEqual(['old q']);
    expect(q('answer').querySelector('strong')?.textContent).toBe('a');
    expect(all('chat-item')[0].classList.contains('active')).toBe(true);
  });

  it('a chat reopened from history shows each answer as it was: sources, citations, TTFT line, Latency, stopped (issue 35, 1 and 2)', async () => {
    const { view, t, q, all, ctx } = makeView();
    const trace: Trace = { request_id: 'r1', stages: { ttft_ms: 812, ui_ttft_ms: 840 }, decode_tok_s: 30, fallback_level: 1, fallback_reason: 'rerank skipped: no rerank model' };
    (t.chat as ReturnType<typeof vi.fn>).mockResolvedValue({
      id: 12,
      messages: [
        { role: 'user', content: 'how do I set it up?' },
        { role: 'assistant', content: 'Run it [1] and see [2].', request_id: 'r1', created: '2026-12-02T13:00:00Z', sources: SOURCES, trace },
        { role: 'user', content: 'and then?' },
        { role: 'assistant', content: 'Then wait', request_id: 'r2', stopped: true, sources: [{ ...SOURCES[0], text: '' }] },
      ],
    });
    await view.openChat(12);
    const turns = all('turn');
    expect(turns).toHaveLength(2);
    const first = turns[0];
    const in1 = (id: string) => first.querySelector(`[data-testid="${id}"]`) as HTMLElement;
    expect(in1('sources').hidden).toBe(false);
    expect(Array.from(first.querySelectorAll('[data-testid="source"]')).map((e) => e.getAttribute('data-n'))).toEqual(['1', '2']);
    expect(first.querySelectorAll('a.cite').length).toBe(2);
    expect(in1('answer-meta').textContent).toMatch(/^TTFT 812 ms \(server\) · on screen 840 ms \(browser\) · 30(\.0)? tok\/s · fallback 1 · rerank skipped · 2026-12-0[23] \d\d:\d\d$/);
    expect(in1('answer-fallback').title).toBe('rerank skipped: no rerank model');
    expect(in1('no-sources').hidden).toBe(true);
    expect(in1('answer-error').hidden).toBe(true);
    (first.querySelector('a.cite') as HTMLElement).click();
    expect(in1('passage-text').textContent).toBe('snippet one');
    in1('show-latency').click();
    expect(ctx.showLatency).toHaveBeenCalledWith(trace);
    const second = turns[1];
    const in2 = (id: string) => second.querySelector(`[data-testid="${id}"]`) as HTMLElement;
    expect(in2('answer-error').textContent).toBe('Stopped.');
    expect(in2('answer-error').classList.contains('error')).toBe(false);
    expect(in2('answer').textContent?.trim()).toBe('Then wait'); // no "[stopped]" in the text
    // A passage whose text the chat did not keep is read from its chunk when opened.
    (second.querySelector('[data-testid="source"] button') as HTMLElement).click();
    await vi.waitFor(() => expect(in2('passage-text').textContent).toBe('the full passage text, longer than the snippet'));
    in2('show-latency').click();
    expect(ctx.showLatency).toHaveBeenLastCalledWith('r2');
    void q;
  });

  it('Stop, then Retry: one chat, named by the first event; the history lists it at once (issue 35, 2)', async () => {
    const { view, asks, q, all, ask, t } = makeView();
    await view.loadChats();
    ask('long question');
    asks[0].cb.onTrace({ request_id: 'r1', chat_id: 44 });
    asks[0].cb.onToken('partial');
    q('stop').click();
    expect(q('answer-error').textContent).toBe('Stopped.');
    await vi.waitFor(() => expect(t.chats).toHaveBeenCalledTimes(2)); // the stopped chat is listed now
    all('retry')[0].click();
    expect(asks).toHaveLength(2);
    expect(asks[1].req).toEqual({ question: 'long question', workspace: 'notes', chat_id: 44 });
  });

  it('an answer without sources says so, with the way to the Library (issue 35, 7)', () => {
    const { asks, q, ask, ctx } = makeView();
    ctx.currentWorkspace = () => ({ id: 1, name: 'notes', folders: [], documents: 0, chunks: 0 });
    ctx.goto = vi.fn();
    ask('anything?');
    asks[0].cb.onSources([]);
    expect(q('no-sources').hidden).toBe(false);
    expect(q('no-sources-text').textContent).toMatch(/^No sources: model only\. Nothing is indexed in “notes” yet/);
    asks[0].cb.onToken('A guess.');
    asks[0].cb.onDone({ request_id: 'r1', stages: { ttft_ms: 5 }, fallback_level: 2, fallback_reason: 'BM25 only: no embedding model' });
    expect(q('answer-meta').textContent).toContain('fallback 2 · BM25 only');
    q('no-sources-library').click();
    expect(ctx.goto).toHaveBeenCalledWith('library');

    ctx.currentWorkspace = () => ({ id: 1, name: 'notes', folders: ['/n'], documents: 12, chunks: 40 });
    ask('something else');
    asks[1].cb.onSources([]);
    const last = Array.from(document.querySelectorAll('[data-testid="no-sources-text"]')).pop()!;
    expect(last.textContent).toMatch(/^No sources: model only\. Nothing in your library matched/);
    asks[1].cb.onSources(SOURCES);
    expect((last.closest('[data-testid="no-sources"]') as HTMLElement).hidden).toBe(true);
  });

  it('chat search filters titles at once, then finds chats by their turns (issue 35, 14)', async () => {
    vi.useFakeTimers();
    try {
      const { view, t, q, all } = makeView();
      (t.chats as ReturnType<typeof vi.fn>).mockResolvedValue([
        { id: 1, title: 'What is the expense policy?', created: '2026-12-02T13:00:00Z' },
        { id: 2, title: 'Hotel reviews', created: '2026-12-01T13:00:00Z' },
        { id: 3, title: 'Holidays', created: '2026-12-01T12:00:00Z' },
      ]);
      (t.searchChats as ReturnType<typeof vi.fn>).mockResolvedValue([
        { id: 1, title: 'What is the expense policy?', created: '2026-12-02T13:00:00Z', snippet: 'and the hotel limit?' },
        { id: 2, title: 'Hotel reviews', created: '2026-12-01T13:00:00Z' },
      ]);
      await view.loadChats();
      const search = q('chat-search') as HTMLInputElement;
      search.value = 'hotel';
      search.dispatchEvent(new Event('input'));
      expect(all('chat-item').map((b) => b.getAttribute('data-chat-id'))).toEqual(['2']); // titles, at once
      expect(t.searchChats).not.toHaveBeenCalled();
      await vi.advanceTimersByTimeAsync(250);
      expect(t.searchChats).toHaveBeenCalledWith('notes', 'hotel');
      expect(all('chat-item').map((b) => b.getAttribute('data-chat-id'))).toEqual(['1', '2']);
      expect(all('chat-snippet').map((e) => e.textContent)).toEqual(['and the hotel limit?']);
      search.value = '';
      search.dispatchEvent(new Event('input'));
      expect(all('chat-item')).toHaveLength(3);
    } finally {
      vi.useRealTimers();
    }
  });

  it('tells apart chats that start alike: how many questions and the latest (issue 35, 22)', async () => {
    const { view, t, all } = makeView();
    (t.chats as ReturnType<typeof vi.fn>).mockResolvedValue([
      { id: 1, title: 'What is the expense policy?', created: '2026-12-02T13:00:00Z', questions: 3, last: 'and the hotel limit?' },
      { id: 2, title: 'What is the expense policy?', created: '2026-12-01T13:00:00Z', questions: 1, last: 'What is the expense policy?' },
    ]);
    await view.loadChats();
    expect(all('chat-last').map((e) => e.textContent)).toEqual(['then: and the hotel limit?']);
    expect(all('chat-date').map((e) => e.textContent!.replace(/^\S+ \S+/, 'DATE'))).toEqual(['DATE · 3 questions', 'DATE']);
  });
});
