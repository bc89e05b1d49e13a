// HTTP transport for `lore serve` (docs/api.md). Auth: `Authorization: Bearer TOKEN` on every call, with the
// token from the page URL's fragment (see takeToken); cookies are never sent (credentials: 'omit').

import { readSSE, type SSEEvent } from './sse';
import {
  ApiError,
  type AskCallbacks,
  type AskHandle,
  type AskRequest,
  type Chat,
  type PrefetchRequest,
  type PrefetchStatus,
  type ChatSummary,
  type Chunk,
  type DocumentInfo,
  type ModelInfo,
  type Progress,
  type ProgressCallbacks,
  type HNSWSweep,
  type Settings,
  type SystemInfo,
  type Source,
  type StageEvent,
  type Trace,
  type TraceStart,
  type TraceStats,
  type Transport,
  type Workspace,
} from './types';

export interface HttpTransportOptions {
  /** Origin + prefix of the API, '' for same origin (default). */
  baseURL?: string;
  /** Sent as `Authorization: Bearer …` when set. */
  token?: string;
  fetch?: typeof fetch;
}

const enc = encodeURIComponent;

export async function errorFrom(res: Response): Promise<ApiError> {
  let msg = `${res.status} ${res.statusText}`.trim();
  try {
    const text = await res.text();
    try {
      const j = JSON.parse(text) as { error?: unknown };
      if (j && typeof j.error === 'string' && j.error) msg = j.error;
    } catch {
      if (text && text.length < 300) msg = text.trim();
    }
  } catch {
    /* body unreadable: keep the status line */
  }
  const ra = res.headers.get('Retry-After');
  const retry = ra !== null && /^\d+$/.test(ra.trim()) ? parseInt(ra, 10) : undefined;
  if (res.status === 429 && retry !== undefined) msg += ` (retry in ${retry} s)`;
  return new ApiError(msg, res.status, retry);
}

/** Dispatches one ask-stream SSE event to the callbacks; returns true for a terminal event. */
export function dispatchAskEvent(ev: { event: string; data: unknown }, cb: AskCallbacks): boolean {
  switch (ev.event) {
    case 'trace':
      cb.onTrace(ev.data as TraceStart);
      return false;
    case 'stage':
      cb.onStage(ev.data as StageEvent);
      return false;
    case 'sources':
      cb.onSources(Array.isArray(ev.data) ? (ev.data as Source[]) : []);
      return false;
    case 'token': {
      const t = (ev.data as { text?: unknown } | null)?.text;
      if (typeof t === 'string') cb.onToken(t);
      return false;
    }
    case 'done':
      cb.onDone(ev.data as Trace);
      return true;
    case 'error': {
      const e = (ev.data as { error?: unknown } | null)?.error;
      cb.onError(typeof e === 'string' && e ? e : 'the server reported an error');
      return true;
    }
    default:
      return false; // unknown events are ignored (forward compatible)
  }
}

/** A random id for a client (a tab, an answer's event channel). */
export function newClientID(): string {
  const c = globalThis.crypto;
  if (c && typeof c.randomUUID === 'function') return c.randomUUID();
  return `c${Date.now().toString(36)}${Math.random().toString(36).slice(2)}`;
}

export class HttpTransport implements Transport {
  readonly kind = 'http' as const;
  readonly desktop = false;
  private readonly base: string;
  private readonly token: string | undefined;
  private readonly fetchFn: typeof fetch;
  private readonly clientID = newClientID(); // this tab, for the server's prefetch rate limit

  constructor(opts: HttpTransportOptions = {}) {
    this.base = (opts.baseURL ?? '').replace(/\/+$/, '');
    this.token = opts.token || undefined;
    const f = opts.fetch ?? globalThis.fetch;
    this.fetchFn = f.bind(globalThis);
  }

  private init(method: string, body?: unknown, signal?: AbortSignal): RequestInit {
    const headers: Record<string, string> = { Accept: 'application/json' };
    if (this.token) headers['Authorization'] = `Bearer ${this.token}`;
    const init: RequestInit = { method, headers, credentials: 'omit', cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    if (signal) init.signal = signal;
    return init;
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.fetchFn(this.base + path, this.init(method, body));
    if (!res.ok) throw await errorFrom(res);
    if (res.status === 204) return undefined as T;
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  ask(req: AskRequest, cb: AskCallbacks): AskHandle {
    const ctl = new AbortController();
    let requestId = '';
    let cancelled = false;
    let ended = false;
    const guard: AskCallbacks = {
      onTrace: (t) => {
        requestId = t.request_id;
        if (!cancelled) cb.onTrace(t);
      },
      onStage: (s) => !cancelled && cb.onStage(s),
      onSources: (s) => !cancelled && cb.onSources(s),
      onToken: (t) => !cancelled && cb.onToken(t),
      onDone: (t) => {
        ended = true;
        if (!cancelled) cb.onDone(t);
      },
      onError: (m) => {
        ended = true;
        if (!cancelled) cb.onError(m);
      },
    };
    const body: AskRequest = { question: req.question, workspace: req.workspace };
    if (req.chat_id !== undefined) body.chat_id = req.chat_id;
    if (req.route) body.route = req.route;

    const run = async () => {
      let res: Response;
      try {
        const init = this.init('POST', body, ctl.signal);
        (init.headers as Record<string, string>)['Accept'] = 'text/event-stream';
        res = await this.fetchFn(this.base + '/api/ask', init);
      } catch (e) {
        guard.onError(`cannot reach the server: ${(e as Error).message ?? e}`);
        return;
      }
      if (!res.ok) {
        guard.onError((await errorFrom(res)).message);
        return;
      }
      if (!res.body) {
        guard.onError('the server sent no stream');
        return;
      }
      try {
        await readSSE(res.body, (ev: SSEEvent) => {
          if (ended) return;
          let data: unknown;
          try {
            data = JSON.parse(ev.data);
          } catch {
            return; // a malformed event is skipped, not fatal
          }
          dispatchAskEvent({ event: ev.event, data }, guard);
        }, ctl.signal);
      } catch (e) {
        if (!cancelled && !ended) guard.onError(`the stream broke: ${(e as Error).message ?? e}`);
        return;
      }
      if (!ended) guard.onError('the stream ended before the answer was complete');
    };
    const finished = run().catch(() => undefined);
    return {
      finished,
      cancel: () => {
        if (cancelled || ended) return;
        cancelled = true;
        ctl.abort();
        // Aborting is enough (the server cancels on disconnect); the explicit cancel is belt and braces.
        if (requestId) void this.cancel(requestId).catch(() => undefined);
      },
    };
  }

  cancel(requestId: string): Promise<void> {
    return this.call('POST', `/api/ask/${enc(requestId)}/cancel`);
  }

  prefetch(req: PrefetchRequest): Promise<void> {
    return this.call('POST', '/api/prefetch', { ...req, client_id: this.clientID });
  }

  watchReadAhead(onStatus: (st: PrefetchStatus) => void, onEnd?: () => void): () => void {
    return this.stream(
      '/api/prefetch/events',
      (event, data) => {
        if (event === 'status') onStatus(data as PrefetchStatus);
      },
      () => onEnd?.(),
    );
  }

  reportUITTFT(requestId: string, uiTTFTms: number, paintMs: number): Promise<void> {
    return this.call('POST', `/api/traces/${enc(requestId)}/ui`, { ui_ttft_ms: uiTTFTms, paint_ms: paintMs });
  }

  workspaces(): Promise<Workspace[]> {
    return this.call('GET', '/api/workspaces');
  }
  createWorkspace(name: string): Promise<void> {
    return this.call('POST', '/api/workspaces', { name });
  }
  renameWorkspace(workspace: string, name: string): Promise<void> {
    return this.call('PATCH', `/api/workspaces/${enc(workspace)}`, { name });
  }
  deleteWorkspace(workspace: string): Promise<void> {
    return this.call('DELETE', `/api/workspaces/${enc(workspace)}`);
  }
  async addFolder(workspace: string, path?: string): Promise<string> {
    if (!path) throw new Error('a folder path is required');
    await this.call('POST', `/api/workspaces/${enc(workspace)}/folders`, { path });
    return path;
  }
  removeFolder(workspace: string, path: string): Promise<void> {
    return this.call('DELETE', `/api/workspaces/${enc(workspace)}/folders?path=${enc(path)}`);
  }
  reindex(workspace: string): Promise<void> {
    return this.call('POST', `/api/workspaces/${enc(workspace)}/index`);
  }

  watchProgress(workspace: string, cb: ProgressCallbacks): () => void {
    return this.stream(
      `/api/workspaces/${enc(workspace)}/progress`,
      (event, data) => {
        if (event === 'progress') cb.onProgress(data as Progress);
        else if (event === 'done') cb.onDone(data);
        else if (event === 'error') cb.onError?.(String((data as { error?: unknown })?.error ?? 'error'));
      },
      (error) => error !== undefined && cb.onError?.(error),
    );
  }

  /**
   * Reads a GET event stream, each event's JSON data to onEvent, until the returned function is called; onEnd
   * hears when it ends by itself (with the error, if it failed or was refused).
   */
  private stream(path: string, onEvent: (event: string, data: unknown) => void, onEnd?: (error?: string) => void): () => void {
    const ctl = new AbortController();
    let stopped = false;
    const run = async () => {
      const init = this.init('GET', undefined, ctl.signal);
      (init.headers as Record<string, string>)['Accept'] = 'text/event-stream';
      const res = await this.fetchFn(this.base + path, init);
      if (!res.ok) throw await errorFrom(res);
      if (!res.body) throw new Error('the server sent no stream');
      await readSSE(res.body, (ev) => {
        if (stopped) return;
        let data: unknown;
        try {
          data = JSON.parse(ev.data);
        } catch {
          return;
        }
        onEvent(ev.event, data);
      }, ctl.signal);
    };
    run().then(
      () => !stopped && onEnd?.(),
      (e: unknown) => !stopped && onEnd?.((e as Error)?.message ?? String(e)),
    );
    return () => {
      stopped = true;
      ctl.abort();
    };
  }

  documents(workspace: string): Promise<DocumentInfo[]> {
    return this.call('GET', `/api/workspaces/${enc(workspace)}/documents`);
  }
  chats(workspace: string): Promise<ChatSummary[]> {
    return this.call('GET', `/api/chats?workspace=${enc(workspace)}`);
  }
  searchChats(workspace: string, query: string): Promise<ChatSummary[]> {
    return this.call('GET', `/api/chats?workspace=${enc(workspace)}&q=${enc(query)}`);
  }
  chat(id: number): Promise<Chat> {
    return this.call('GET', `/api/chats/${enc(String(id))}`);
  }
  chunk(id: number): Promise<Chunk> {
    return this.call('GET', `/api/chunks/${enc(String(id))}`);
  }
  openSource(): Promise<void> {
    return Promise.reject(new Error('opening files is only available in the desktop app'));
  }
  traces(limit: number): Promise<Trace[]> {
    return this.call('GET', `/api/traces?limit=${enc(String(limit))}`);
  }
  trace(requestId: string): Promise<Trace> {
    return this.call('GET', `/api/traces/${enc(requestId)}`);
  }
  traceStats(window: string): Promise<TraceStats> {
    return this.call('GET', `/api/traces/stats?window=${enc(window)}`);
  }
  models(): Promise<ModelInfo[]> {
    return this.call('GET', '/api/models');
  }
  system(): Promise<SystemInfo> {
    return this.call('GET', '/api/system');
  }
  settings(): Promise<Settings> {
    return this.call('GET', '/api/settings');
  }
  hnswSweep(): Promise<HNSWSweep> {
    return this.call('GET', '/api/bench/hnsw');
  }
  saveSettings(s: Settings): Promise<void> {
    return this.call('PUT', '/api/settings', s);
  }
}
