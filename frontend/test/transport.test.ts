import { describe, expect, it, vi } from 'vitest';
import { HttpTransport, pickTransport, takeToken, TOKEN_KEY, WailsTransport } from '../src/transport';
import type { AskCallbacks, Trace } from '../src/transport/types';

type Call = { url: string; init: RequestInit };

function sseResponse(chunks: string[], opts: { hang?: boolean } = {}): Response {
  const enc = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async start(ctl) {
      for (const c of chunks) {
        ctl.enqueue(enc.encode(c));
        await new Promise((r) => setTimeout(r, 1));
      }
      if (!opts.hang) ctl.close();
    },
  });
  return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
}

function mockFetch(handler: (c: Call) => Response | Promise<Response>) {
  const calls: Call[] = [];
  const fn = vi.fn(async (url: RequestInfo | URL, init?: RequestInit) => {
    const c = { url: String(url), init: init ?? {} };
    calls.push(c);
    if (init?.signal?.aborted) throw new DOMException('aborted', 'AbortError');
    return handler(c);
  });
  return { fn: fn as unknown as typeof fetch, calls };
}

function recorder() {
  const log: Array<[string, unknown]> = [];
  const cb: AskCallbacks = {
    onTrace: (t) => log.push(['trace', t]),
    onStage: (s) => log.push(['stage', s]),
    onSources: (s) => log.push(['sources', s]),
    onToken: (t) => log.push(['token', t]),
    onDone: (t) => log.push(['done', t]),
    onError: (m) => log.push(['error', m]),
  };
  return { log, cb };
}

const TRACE_DONE: Trace = { request_id: 'r1', stages: { ttft_ms: 760 }, stage_starts: { queue_ms: 0 } };
const ASK_STREAM = [
  'event: trace\ndata: {"request_id":"r1","chat_id":12}\n\n',
  'event: stage\ndata: {"name":"retrieval","state":"done","ms":12,"detail":{"sources":2}}\n\n',
  'event: sources\ndata: [{"n":1,"chunk_id":5,"document":"a.md","path":"/a.md","text":"x"}]\n\n',
  'event: stage\ndata: {"name":"prefill","state":"start","detail":{"prompt_tokens":900,"cached_tokens":310,"eval_tokens":590,"expected_ms":700}}\n\n',
  'event: token\ndata: {"text":"Hel"}\n\nevent: tok',
  'en\ndata: {"text":"lo [1]"}\n\n',
  `event: done\ndata: ${JSON.stringify(TRACE_DONE)}\n\n`,
];

describe('pickTransport', () => {
  it('picks Wails when window.go exists', () => {
    const w = { go: { main: { App: {} } }, location: { href: 'wails://wails/' } } as unknown as Window;
    const t = pickTransport(w);
    expect(t).toBeInstanceOf(WailsTransport);
    expect(t.kind).toBe('wails');
    expect(t.desktop).toBe(true);
  });

  it('picks HTTP otherwise', () => {
    const t = pickTransport(window);
    expect(t).toBeInstanceOf(HttpTransport);
    expect(t.desktop).toBe(false);
  });

  it('takes a leftover ?token= as bearer token and removes it from the address bar', async () => {
    window.sessionStorage.clear();
    window.history.replaceState(null, '', '/?token=s3cret&x=1#h');
    const t = pickTransport(window) as HttpTransport;
    expect(window.location.search).toBe('?x=1');
    expect(window.location.hash).toBe('#h');
    const { fn, calls } = mockFetch(() => new Response('[]', { status: 200 }));
    (t as unknown as { fetchFn: typeof fetch }).fetchFn = fn;
    await t.workspaces();
    expect((calls[0].init.headers as Record<string, string>).Authorization).toBe('Bearer s3cret');
    window.history.replaceState(null, '', '/');
  });

  it('takes #token= from the fragment, keeps it in sessionStorage only, and uses it after a reload', async () => {
    window.sessionStorage.clear();
    window.history.replaceState(null, '', '/#token=fr4g');
    const t = pickTransport(window) as HttpTransport;
    expect(window.location.href).not.toContain('fr4g');
    expect(window.location.hash).toBe('');
    expect(window.sessionStorage.getItem(TOKEN_KEY)).toBe('fr4g');
    expect(window.localStorage.getItem(TOKEN_KEY)).toBeNull();
    expect(document.cookie).not.toContain('fr4g');
    // A reload of the tab: the URL has no token any more, the stored one is used.
    const again = pickTransport(window) as HttpTransport;
    for (const tr of [t, again]) {
      const { fn, calls } = mockFetch(() => new Response('[]', { status: 200 }));
      (tr as unknown as { fetchFn: typeof fetch }).fetchFn = fn;
      await tr.workspaces();
      const init = calls[0].init;
      expect((init.headers as Record<string, string>).Authorization).toBe('Bearer fr4g');
      expect(init.credentials).toBe('omit');
    }
    window.sessionStorage.clear();
  });

  it('keeps other fragment parameters', () => {
    window.sessionStorage.clear();
    window.history.replaceState(null, '', '/#token=abc&view=latency');
    expect(takeToken(window)).toBe('abc');
    expect(window.location.hash).toBe('#view=latency');
    window.history.replaceState(null, '', '/');
    window.sessionStorage.clear();
  });
});

describe('HttpTransport', () => {
  it('streams ask events in order, split across chunks, without cookies', async () => {
    const { fn, calls } = mockFetch(() => sseResponse(ASK_STREAM));
    const t = new HttpTransport({ fetch: fn });
    const { log, cb } = recorder();
    const h = t.ask({ question: 'q?', workspace: 'notes', chat_id: 12, route: 'main' }, cb);
    await h.finished;
    expect(log.map((e) => e[0])).toEqual(['trace', 'stage', 'sources', 'stage', 'token', 'token', 'done']);
    expect(log[4][1]).toBe('Hel');
    expect(log[5][1]).toBe('lo [1]');
    expect(log[6][1]).toEqual(TRACE_DONE);
    expect(calls[0].url).toBe('/api/ask');
    expect(calls[0].init.method).toBe('POST');
    expect(calls[0].init.credentials).toBe('omit');
    expect(JSON.parse(calls[0].init.body as string)).toEqual({ question: 'q?', workspace: 'notes', chat_id: 12, route: 'main' });
    const hd = calls[0].init.headers as Record<string, string>;
    expect(hd['Content-Type']).toBe('application/json');
    expect(hd.Accept).toBe('text/event-stream');
    expect(hd.Authorization).toBeUndefined();
  });

  it('sends the bearer token when given one', async () => {
    const { fn, calls } = mockFetch(() => new Response('[]'));
    await new HttpTransport({ fetch: fn, token: 'tok' }).models();
    expect((calls[0].init.headers as Record<string, string>).Authorization).toBe('Bearer tok');
  });

  it('reports a JSON error body and Retry-After', async () => {
    const { fn } = mockFetch(
      () => new Response('{"error":"too many requests"}', { status: 429, headers: { 'Retry-After': '3' } }),
    );
    const { log, cb } = recorder();
    await new HttpTransport({ fetch: fn }).ask({ question: 'q', workspace: 'w' }, cb).finished;
    expect(log).toEqual([['error', 'too many requests (retry in 3 s)']]);
  });

  it('reports a stream that ends without done', async () => {
    const { fn } = mockFetch(() => sseResponse(ASK_STREAM.slice(0, 3)));
    const { log, cb } = recorder();
    await new HttpTransport({ fetch: fn }).ask({ question: 'q', workspace: 'w' }, cb).finished;
    expect(log[log.length - 1][0]).toBe('error');
    expect(String(log[log.length - 1][1])).toMatch(/ended/);
  });

  it('treats an error event as terminal and skips malformed events', async () => {
    const { fn } = mockFetch(() =>
      sseResponse(['event: token\ndata: {bad json\n\n', 'event: error\ndata: {"error":"model crashed"}\n\n', 'event: token\ndata: {"text":"late"}\n\n']),
    );
    const { log, cb } = recorder();
    await new HttpTransport({ fetch: fn }).ask({ question: 'q', workspace: 'w' }, cb).finished;
    expect(log).toEqual([['error', 'model crashed']]);
  });

  it('cancel aborts the stream, calls the cancel endpoint, and no callback fires after', async () => {
    let signal: AbortSignal | undefined;
    const { fn, calls } = mockFetch((c) => {
      if (c.url.endsWith('/cancel')) return new Response(null, { status: 204 });
      signal = c.init.signal ?? undefined;
      return sseResponse(ASK_STREAM.slice(0, 2), { hang: true });
    });
    const t = new HttpTransport({ fetch: fn });
    const { log, cb } = recorder();
    const h = t.ask({ question: 'q', workspace: 'w' }, cb);
    await vi.waitFor(() => expect(log.length).toBe(2));
    h.cancel();
    await h.finished;
    expect(signal?.aborted).toBe(true);
    expect(log.map((e) => e[0])).toEqual(['trace', 'stage']);
    expect(calls.some((c) => c.url === '/api/ask/r1/cancel' && c.init.method === 'POST')).toBe(true);
  });

  it('maps the other calls to the documented endpoints', async () => {
    const { fn, calls } = mockFetch(() => new Response(null, { status: 204 }));
    const t = new HttpTransport({ fetch: fn, baseURL: 'http://127.0.0.1:8765/' });
    await t.createWorkspace('my notes');
    await t.addFolder('my notes', '/home/u/docs');
    await t.removeFolder('my notes', '/home/u/a&b');
    await t.reindex('a/b');
    await t.documents('w');
    await t.chats('w x');
    await t.chat(12);
    await t.chunk(5);
    await t.traces(50);
    await t.trace('r/1');
    await t.traceStats('1h');
    await t.models();
    await t.settings();
    await t.reportUITTFT('r1', 812.5, 3.1);
    await t.cancel('r1');
    const s = { chat_model: 'm', embed_model: 'e', rerank_model: '', top_k: 5, rerank_k: 20, rerank_budget_ms: 1500, ef_search: 0, context_tokens: 0, max_tokens: 256, threads: 0, gpu_layers: 0, passage_kv: false, passage_repair: 16, route_ttft_ms: 1000, route_short_words: 0, speculate: 0, spec_floor_pct: 60 };
    await t.saveSettings(s);
    const B = 'http://127.0.0.1:8765';
    expect(calls.map((c) => `${c.init.method} ${c.url}`)).toEqual([
      `POST ${B}/api/workspaces`,
      `POST ${B}/api/workspaces/my%20notes/folders`,
      `DELETE ${B}/api/workspaces/my%20notes/folders?path=%2Fhome%2Fu%2Fa%26b`,
      `POST ${B}/api/workspaces/a%2Fb/index`,
      `GET ${B}/api/workspaces/w/documents`,
      `GET ${B}/api/chats?workspace=w%20x`,
      `GET ${B}/api/chats/12`,
      `GET ${B}/api/chunks/5`,
      `GET ${B}/api/traces?limit=50`,
      `GET ${B}/api/traces/r%2F1`,
      `GET ${B}/api/traces/stats?window=1h`,
      `GET ${B}/api/models`,
      `GET ${B}/api/settings`,
      `POST ${B}/api/traces/r1/ui`,
      `POST ${B}/api/ask/r1/cancel`,
      `PUT ${B}/api/settings`,
    ]);
    expect(JSON.parse(calls[0].init.body as string)).toEqual({ name: 'my notes' });
    expect(JSON.parse(calls[1].init.body as string)).toEqual({ path: '/home/u/docs' });
    expect(JSON.parse(calls[13].init.body as string)).toEqual({ ui_ttft_ms: 812.5, paint_ms: 3.1 });
    expect(JSON.parse(calls[15].init.body as string)).toEqual(s);
  });

  it('throws ApiError with the server message on failure', async () => {
    const { fn } = mockFetch(() => new Response('{"error":"no such workspace"}', { status: 404 }));
    await expect(new HttpTransport({ fetch: fn }).documents('x')).rejects.toMatchObject({ status: 404, message: 'no such workspace' });
  });

  it('streams indexing progress until done', async () => {
    const { fn, calls } = mockFetch(() =>
      sseResponse([
        'event: progress\ndata: {"phase":"indexing","files_done":1,"files_total":4,"files_per_s":2,"eta_s":1.5}\n\n',
        'event: progress\ndata: {"files_done":2,"files_total":4,"error":{"path":"/x.pdf","reason":"encrypted"}}\n\n',
        'event: done\ndata: {"files":4}\n\n',
      ]),
    );
    const got: unknown[] = [];
    let done: unknown;
    new HttpTransport({ fetch: fn }).watchProgress('w', { onProgress: (p) => got.push(p), onDone: (s) => (done = s) });
    await vi.waitFor(() => expect(done).toEqual({ files: 4 }));
    expect(got).toHaveLength(2);
    expect(calls[0].url).toBe('/api/workspaces/w/progress');
  });

  it('follows the read-ahead status pushed on /api/prefetch/events until unsubscribed', async () => {
    const { fn, calls } = mockFetch(() =>
      sseResponse(
        [
          'event: status\ndata: {"state":"none","passages":0,"read":0,"tokens":0,"read_tokens":0}\n\n',
          'event: status\ndata: {"state":"reading","passages":3,"read":1,"tokens":300,"read_tokens":90}\n\n',
        ],
        { hang: true },
      ),
    );
    const got: string[] = [];
    let ended = 0;
    const off = new HttpTransport({ fetch: fn }).watchReadAhead((st) => got.push(`${st.state} ${st.read}/${st.passages}`), () => ended++);
    await vi.waitFor(() => expect(got).toEqual(['none 0/0', 'reading 1/3']));
    expect(calls[0].url).toBe('/api/prefetch/events');
    expect((calls[0].init.headers as Record<string, string>).Accept).toBe('text/event-stream');
    off();
    expect(calls[0].init.signal?.aborted).toBe(true);
    await new Promise((r) => setTimeout(r, 10));
    expect(ended).toBe(0); // unsubscribed: not an end to report
  });

  it('says when the read-ahead stream ends by itself: closed, or refused', async () => {
    for (const res of [
      () => sseResponse(['event: status\ndata: {"state":"none","passages":0,"read":0,"tokens":0,"read_tokens":0}\n\n']),
      () => new Response(JSON.stringify({ error: 'too many event streams open (at most 16)' }), { status: 429 }),
    ]) {
      const { fn } = mockFetch(res);
      let ended = 0;
      new HttpTransport({ fetch: fn }).watchReadAhead(() => undefined, () => ended++);
      await vi.waitFor(() => expect(ended).toBe(1));
    }
  });
});

describe('WailsTransport', () => {
  function fakeWails() {
    const listeners = new Map<string, Set<(d: unknown) => void>>();
    const order: string[] = [];
    const runtime = {
      EventsOn: vi.fn((name: string, cb: (...d: unknown[]) => void) => {
        order.push(`on ${name}`);
        const f = (d: unknown) => cb(d);
        if (!listeners.has(name)) listeners.set(name, new Set());
        listeners.get(name)!.add(f);
        return () => listeners.get(name)!.delete(f);
      }),
      EventsOff: vi.fn(),
    };
    const emit = (name: string, payload: unknown) => listeners.get(name)?.forEach((f) => f(payload));
    const count = (name: string) => listeners.get(name)?.size ?? 0;
    const App: Record<string, ReturnType<typeof vi.fn>> = {};
    const w = { go: { main: { App } }, runtime };
    return { w, App, emit, count, order, listeners };
  }

  it('subscribes before calling Ask, routes {type,data} events and unsubscribes on done', async () => {
    const f = fakeWails();
    let clientID = '';
    f.App.Ask = vi.fn(async (req: { client_id: string }) => {
      f.order.push('Ask');
      clientID = req.client_id;
      // A backend that emits right away on the client id: nothing is lost.
      f.emit(`ask:${clientID}`, { type: 'trace', data: { request_id: 'r9', chat_id: 1 } });
      return 'r9';
    });
    const t = new WailsTransport(f.w as never);
    const { log, cb } = recorder();
    const h = t.ask({ question: 'q', workspace: 'w' }, cb);
    expect(f.order[0]).toMatch(/^on ask:/);
    await vi.waitFor(() => expect(f.count('ask:r9')).toBe(1));
    expect(f.order.indexOf('Ask')).toBeGreaterThan(0);
    expect(f.App.Ask.mock.calls[0][0]).toMatchObject({ question: 'q', workspace: 'w' });
    // The documented channel works too.
    f.emit('ask:r9', { type: 'sources', data: [{ n: 1 }] });
    f.emit('ask:r9', { type: 'token', data: { text: 'hi' } });
    f.emit('ask:r9', { type: 'done', data: TRACE_DONE });
    f.emit('ask:r9', { type: 'token', data: { text: 'late' } });
    await h.finished;
    expect(log.map((e) => e[0])).toEqual(['trace', 'sources', 'token', 'done']);
    expect(f.count('ask:r9')).toBe(0);
    expect(f.count(`ask:${clientID}`)).toBe(0);
  });

  it('cancel calls Cancel(request_id) and silences further events', async () => {
    const f = fakeWails();
    f.App.Ask = vi.fn(async () => 'r5');
    f.App.Cancel = vi.fn(async () => undefined);
    const t = new WailsTransport(f.w as never);
    const { log, cb } = recorder();
    const h = t.ask({ question: 'q', workspace: 'w' }, cb);
    await vi.waitFor(() => expect(f.count('ask:r5')).toBe(1));
    f.emit('ask:r5', { type: 'token', data: { text: 'a' } });
    h.cancel();
    f.emit('ask:r5', { type: 'token', data: { text: 'b' } });
    await h.finished;
    expect(f.App.Cancel).toHaveBeenCalledWith('r5');
    expect(log).toEqual([['token', 'a']]);
  });

  it('cancel before Ask resolves cancels once the id is known', async () => {
    const f = fakeWails();
    let resolve!: (id: string) => void;
    f.App.Ask = vi.fn(() => new Promise<string>((r) => (resolve = r)));
    f.App.Cancel = vi.fn(async () => undefined);
    const h = new WailsTransport(f.w as never).ask({ question: 'q', workspace: 'w' }, recorder().cb);
    h.cancel();
    resolve('r7');
    await vi.waitFor(() => expect(f.App.Cancel).toHaveBeenCalledWith('r7'));
  });

  it('reports a rejected Ask as an error', async () => {
    const f = fakeWails();
    f.App.Ask = vi.fn(async () => {
      throw 'no model loaded';
    });
    const { log, cb } = recorder();
    await new WailsTransport(f.w as never).ask({ question: 'q', workspace: 'w' }, cb).finished;
    expect(log).toEqual([['error', 'no model loaded']]);
  });

  it('maps calls to the bound methods with their arguments', async () => {
    const f = fakeWails();
    for (const m of ['Workspaces', 'AddFolder', 'RemoveFolder', 'Reindex', 'Documents', 'Chats', 'Chat', 'Chunk', 'OpenSource', 'Traces', 'Trace', 'TraceStats', 'ReportUI', 'Models', 'Settings', 'SaveSettings']) {
      f.App[m] = vi.fn(async () => (m === 'AddFolder' ? '/picked' : []));
    }
    const t = new WailsTransport(f.w as never);
    await t.workspaces();
    expect(await t.addFolder('w', '/ignored')).toBe('/picked');
    await t.removeFolder('w', '/p');
    await t.reindex('w');
    await t.documents('w');
    await t.chats('w');
    await t.chat(3);
    await t.chunk(4);
    await t.openSource(4);
    await t.traces(50);
    await t.trace('r');
    await t.traceStats('1h');
    await t.reportUITTFT('r', 10.5, 2);
    await t.models();
    await t.settings();
    await t.saveSettings({ top_k: 1 } as never);
    expect(f.App.AddFolder).toHaveBeenCalledWith('w'); // never a path: the native picker opens Go-side
    expect(f.App.RemoveFolder).toHaveBeenCalledWith('w', '/p');
    expect(f.App.Chat).toHaveBeenCalledWith(3);
    expect(f.App.OpenSource).toHaveBeenCalledWith(4);
    expect(f.App.Traces).toHaveBeenCalledWith(50);
    expect(f.App.TraceStats).toHaveBeenCalledWith('1h');
    expect(f.App.ReportUI).toHaveBeenCalledWith('r', 10.5, 2);
    expect(f.App.SaveSettings).toHaveBeenCalledWith({ top_k: 1 });
    await expect(t.createWorkspace('x')).rejects.toThrow(/no CreateWorkspace binding/);
  });

  it('follows progress:<ws> events in either payload shape', () => {
    const f = fakeWails();
    const t = new WailsTransport(f.w as never);
    const got: unknown[] = [];
    let done: unknown;
    const off = t.watchProgress('notes', { onProgress: (p) => got.push(p), onDone: (s) => (done = s) });
    f.emit('progress:notes', { type: 'progress', data: { files_done: 1 } });
    f.emit('progress:notes', { files_done: 2, files_total: 3 });
    f.emit('progress:notes', { type: 'done', data: { ok: true } });
    expect(got).toEqual([{ files_done: 1 }, { files_done: 2, files_total: 3 }]);
    expect(done).toEqual({ ok: true });
    off();
    expect(f.count('progress:notes')).toBe(0);
  });

  it('follows the read-ahead: the status from the binding now, then prefetch events; none after unsubscribing', async () => {
    const f = fakeWails();
    f.App.PrefetchStatus = vi.fn(async () => ({ state: 'ready', passages: 2, read: 2, tokens: 90, read_tokens: 90 }));
    const t = new WailsTransport(f.w as never);
    const got: string[] = [];
    const off = t.watchReadAhead((st) => got.push(`${st.state} ${st.read}/${st.passages}`));
    await vi.waitFor(() => expect(got).toEqual(['ready 2/2']));
    f.emit('prefetch', { type: 'status', data: { state: 'reading', passages: 4, read: 1, tokens: 300, read_tokens: 60 } });
    expect(got).toEqual(['ready 2/2', 'reading 1/4']);
    off();
    expect(f.count('prefetch')).toBe(0);
  });
});

describe('pickTransportWhenReady', () => {
  it('waits for window.go when the Wails runtime is there but the bindings are not yet', async () => {
    const { pickTransportWhenReady } = await import('../src/transport');
    const w = { runtime: {}, location: { href: 'wails://wails/' } } as unknown as Window & { go?: unknown };
    setTimeout(() => (w.go = { main: { App: {} } }), 50);
    expect((await pickTransportWhenReady(w)).kind).toBe('wails');
  });

  it('does not wait in a plain browser', async () => {
    const { pickTransportWhenReady } = await import('../src/transport');
    const t0 = Date.now();
    expect((await pickTransportWhenReady(window)).kind).toBe('http');
    expect(Date.now() - t0).toBeLessThan(100);
  });
});
