// Wails v2 transport: bound Go methods on window.go.main.App and runtime events.
//   Ask(req) → Promise<request_id>, then events `ask:<request_id>` carrying {type, data}
//   progress events `progress:<workspace>`
// A bound Go method cannot see JS-side cancellation, hence the explicit Cancel(request_id).

import { dispatchAskEvent, newClientID } from './http';
import type {
  AskCallbacks,
  AskHandle,
  AskRequest,
  Chat,
  PrefetchRequest,
  PrefetchStatus,
  ChatSummary,
  Chunk,
  DocumentInfo,
  ModelInfo,
  Progress,
  ProgressCallbacks,
  HNSWSweep,
  Settings,
  SystemInfo,
  Trace,
  TraceStats,
  Transport,
  Workspace,
} from './types';

type Fn = (...args: any[]) => Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface WailsRuntime {
  EventsOn(name: string, cb: (...data: unknown[]) => void): (() => void) | void;
  EventsOff(name: string, ...more: string[]): void;
}

export interface WailsWindow {
  go?: { main?: { App?: Record<string, Fn> } };
  runtime?: WailsRuntime;
}

function message(e: unknown): string {
  if (typeof e === 'string') return e;
  if (e instanceof Error) return e.message;
  if (e && typeof e === 'object' && 'error' in e) return String((e as { error: unknown }).error);
  return String(e);
}

export class WailsTransport implements Transport {
  readonly kind = 'wails' as const;
  readonly desktop = true;
  private readonly w: WailsWindow;

  constructor(w: WailsWindow = window as unknown as WailsWindow) {
    this.w = w;
  }

  private get app(): Record<string, Fn> {
    const app = this.w.go?.main?.App;
    if (!app) throw new Error('Wails bindings (window.go.main.App) are missing');
    return app;
  }

  private async invoke<T>(method: string, ...args: unknown[]): Promise<T> {
    const fn = this.app[method];
    if (typeof fn !== 'function') throw new Error(`the desktop app has no ${method} binding`);
    try {
      return (await fn(...args)) as T;
    } catch (e) {
      throw new Error(message(e));
    }
  }

  async prefetch(req: PrefetchRequest): Promise<void> {
    await this.invoke<unknown>('Prefetch', req);
  }

  watchReadAhead(onStatus: (st: PrefetchStatus) => void): () => void {
    // The Go side emits `prefetch` {type: "status", data} after every change; the status now comes from the
    // binding, unless an event came first (it is newer).
    let heard = false;
    let off: () => void = () => undefined;
    try {
      off = this.on('prefetch', (payload) => {
        const p = payload as { type?: unknown; data?: unknown } | null;
        if (!p || p.type !== 'status' || !p.data) return;
        heard = true;
        onStatus(p.data as PrefetchStatus);
      });
    } catch {
      return off;
    }
    this.invoke<PrefetchStatus>('PrefetchStatus').then(
      (st) => !heard && onStatus(st),
      () => undefined,
    );
    return () => {
      heard = true;
      off();
    };
  }

  private on(name: string, cb: (payload: unknown) => void): () => void {
    const rt = this.w.runtime;
    if (!rt) throw new Error('the Wails runtime (window.runtime) is missing');
    const off = rt.EventsOn(name, (...data: unknown[]) => cb(data[0]));
    return typeof off === 'function' ? off : () => rt.EventsOff(name);
  }

  ask(req: AskRequest, cb: AskCallbacks): AskHandle {
    let cancelled = false;
    let ended = false;
    let requestId = '';
    const offs: Array<() => void> = [];
    const unsubscribe = () => offs.splice(0).forEach((off) => off());
    let resolveFinished!: () => void;
    const finished = new Promise<void>((r) => (resolveFinished = r));
    const finish = () => {
      ended = true;
      unsubscribe();
      resolveFinished();
    };

    const guard: AskCallbacks = {
      onTrace: (t) => !cancelled && cb.onTrace(t),
      onStage: (s) => !cancelled && cb.onStage(s),
      onSources: (s) => !cancelled && cb.onSources(s),
      onToken: (t) => !cancelled && cb.onToken(t),
      onDone: (t) => !cancelled && cb.onDone(t),
      onError: (m) => !cancelled && cb.onError(m),
    };
    const handler = (payload: unknown) => {
      if (ended) return;
      const p = payload as { type?: unknown; data?: unknown } | null;
      if (!p || typeof p.type !== 'string') return;
      if (dispatchAskEvent({ event: p.type, data: p.data }, guard)) finish();
    };

    // Events emitted before JS subscribes are lost, and `ask:<request_id>` can only be subscribed to once Ask
    // has returned the id. We therefore also subscribe to `ask:<client_id>` *before* calling Ask and send
    // client_id along; a backend that honours it (see the report on docs/api.md) cannot lose the first events.
    const clientID = newClientID();
    try {
      offs.push(this.on(`ask:${clientID}`, handler));
    } catch (e) {
      queueMicrotask(() => {
        guard.onError(message(e));
        finish();
      });
      return { finished, cancel: () => undefined };
    }

    const body: AskRequest & { client_id: string } = {
      question: req.question,
      workspace: req.workspace,
      client_id: clientID,
    };
    if (req.chat_id !== undefined) body.chat_id = req.chat_id;
    if (req.route) body.route = req.route;

    this.invoke<string>('Ask', body).then(
      (id) => {
        requestId = String(id ?? '');
        if (cancelled) {
          if (requestId) void this.cancel(requestId).catch(() => undefined);
          return;
        }
        if (ended) return;
        if (requestId && requestId !== clientID) offs.push(this.on(`ask:${requestId}`, handler));
      },
      (e) => {
        if (ended) return;
        guard.onError(message(e));
        finish();
      },
    );

    return {
      finished,
      cancel: () => {
        if (cancelled || ended) return;
        cancelled = true;
        if (requestId) void this.cancel(requestId).catch(() => undefined);
        finish();
      },
    };
  }

  cancel(requestId: string): Promise<void> {
    return this.invoke('Cancel', requestId);
  }
  reportUITTFT(requestId: string, uiTTFTms: number, paintMs: number): Promise<void> {
    return this.invoke('ReportUI', requestId, uiTTFTms, paintMs);
  }
  workspaces(): Promise<Workspace[]> {
    return this.invoke('Workspaces');
  }
  createWorkspace(name: string): Promise<void> {
    // contract: docs/api.md lists no Wails binding for this; used only if the app binds it.
    return this.invoke('CreateWorkspace', name);
  }
  renameWorkspace(workspace: string, name: string): Promise<void> {
    return this.invoke('RenameWorkspace', workspace, name);
  }
  deleteWorkspace(workspace: string): Promise<void> {
    return this.invoke('DeleteWorkspace', workspace);
  }
  async addFolder(workspace: string, _path?: string): Promise<string> {
    // The native picker opens Go-side; the UI never passes a path to open.
    const r = await this.invoke<unknown>('AddFolder', workspace);
    return typeof r === 'string' ? r : '';
  }
  removeFolder(workspace: string, path: string): Promise<void> {
    return this.invoke('RemoveFolder', workspace, path);
  }
  reindex(workspace: string): Promise<void> {
    return this.invoke('Reindex', workspace);
  }
  watchProgress(workspace: string, cb: ProgressCallbacks): () => void {
    let off: () => void = () => undefined;
    try {
      off = this.on(`progress:${workspace}`, (payload) => {
        const p = payload as { type?: unknown; data?: unknown } | null;
        if (!p || typeof p !== 'object') return;
        // contract: the payload shape is unspecified; accept {type, data} (like ask) or a bare Progress.
        if (typeof p.type === 'string') {
          if (p.type === 'progress') cb.onProgress(p.data as Progress);
          else if (p.type === 'done') cb.onDone(p.data);
          else if (p.type === 'error') cb.onError?.(message(p.data));
        } else {
          cb.onProgress(p as Progress);
        }
      });
    } catch (e) {
      cb.onError?.(message(e));
    }
    return off;
  }
  documents(workspace: string): Promise<DocumentInfo[]> {
    return this.invoke('Documents', workspace);
  }
  chats(workspace: string): Promise<ChatSummary[]> {
    return this.invoke('Chats', workspace);
  }
  searchChats(workspace: string, query: string): Promise<ChatSummary[]> {
    return this.invoke('SearchChats', workspace, query);
  }
  chat(id: number): Promise<Chat> {
    return this.invoke('Chat', id);
  }
  chunk(id: number): Promise<Chunk> {
    return this.invoke('Chunk', id);
  }
  openSource(chunkID: number): Promise<void> {
    return this.invoke('OpenSource', chunkID);
  }
  traces(limit: number): Promise<Trace[]> {
    return this.invoke('Traces', limit);
  }
  trace(requestId: string): Promise<Trace> {
    return this.invoke('Trace', requestId);
  }
  traceStats(window: string): Promise<TraceStats> {
    return this.invoke('TraceStats', window);
  }
  models(): Promise<ModelInfo[]> {
    return this.invoke('Models');
  }
  system(): Promise<SystemInfo> {
    return this.invoke('System');
  }
  settings(): Promise<Settings> {
    return this.invoke('Settings');
  }
  hnswSweep(): Promise<HNSWSweep> {
    return this.invoke('Sweep');
  }
  saveSettings(s: Settings): Promise<void> {
    return this.invoke('SaveSettings', s);
  }
}
