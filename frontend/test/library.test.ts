import { afterEach, describe, expect, it, vi } from 'vitest';
import { App } from '../src/app';
import type { DocumentInfo, ProgressCallbacks, Transport, Workspace } from '../src/transport/types';
import { fileType } from '../src/views/library';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A transport whose progress stream behaves like `lore serve`'s: `done` with the last summary at once when
 * nothing is indexing (then the stream ends); while a run is going, progress events and then `done`.
 */
function serverLike(opts: { docs?: number } = {}) {
  let summary = { files: 30, indexed: 30 };
  let pendingRun: { startsAfter: number } | undefined; // a requested run starts after N more subscriptions
  const docs = (): DocumentInfo[] =>
    Array.from({ length: opts.docs ?? 30 }, (_, i) => ({ id: i + 1, path: `/lib/f${i}.md`, rel: `f${i}.md`, status: 'indexed', chunks: 1 }));
  const ws: Workspace[] = [{ id: 1, name: 'default', folders: ['/lib'], documents: 30, chunks: 30 }];
  let docsGate: Promise<void> | undefined;
  const t = {
    kind: 'http',
    desktop: false,
    workspaces: vi.fn(async () => ws),
    documents: vi.fn(async () => {
      if (docsGate) await docsGate;
      return docs();
    }),
    chats: vi.fn(async () => []),
    addFolder: vi.fn(async (_w: string, path?: string) => {
      pendingRun = { startsAfter: 3 };
      return path ?? '';
    }),
    reindex: vi.fn(async () => void (pendingRun = { startsAfter: 2 })),
    watchProgress: vi.fn((_w: string, cb: ProgressCallbacks) => {
      let stopped = false;
      void (async () => {
        await sleep(1);
        if (stopped) return;
        if (pendingRun && pendingRun.startsAfter-- <= 0) {
          pendingRun = undefined;
          cb.onProgress({ phase: 'scan' });
          await sleep(2);
          if (stopped) return;
          cb.onProgress({ phase: 'parse', files_done: 1, files_total: 1 });
          summary = { ...summary, files: summary.files + 1 };
        }
        if (!stopped) cb.onDone(summary);
      })();
      return () => void (stopped = true);
    }),
  } as unknown as Transport;
  return {
    t,
    holdDocuments() {
      let release!: () => void;
      docsGate = new Promise((r) => (release = r));
      return () => {
        docsGate = undefined;
        release();
      };
    },
  };
}

async function openLibrary(t: Transport) {
  const app = new App(t);
  document.body.replaceChildren(app.el);
  await app.start();
  const q = (id: string) => app.el.querySelector(`[data-testid="${id}"]`) as HTMLElement;
  (q('nav-library') as HTMLButtonElement).click();
  return { app, q, rows: () => app.el.querySelectorAll('[data-testid="document"]').length };
}

afterEach(() => document.body.replaceChildren());

describe('Library view', () => {
  it('makes a bounded number of requests while idle (no reload loop when the stream ends)', async () => {
    const { t } = serverLike();
    const { q, rows } = await openLibrary(t);
    await sleep(300);
    expect(t.watchProgress).toHaveBeenCalledTimes(1);
    expect(t.documents).toHaveBeenCalledTimes(2); // the chat's welcome (example questions) at start, the Library
    expect(t.workspaces).toHaveBeenCalledTimes(1); // the start only
    expect(q('library-progress-text').textContent).toBe('Up to date');
    expect(rows()).toBe(30);
  });

  it('opens one stream per visit, not more', async () => {
    const { t } = serverLike();
    const { q } = await openLibrary(t);
    await sleep(50);
    (q('nav-chat') as HTMLButtonElement).click();
    (q('nav-library') as HTMLButtonElement).click();
    await sleep(200);
    expect(t.watchProgress).toHaveBeenCalledTimes(2);
    expect(t.workspaces).toHaveBeenCalledTimes(1);
  });

  it('after Add folder waits (bounded) for the run, follows it, then reloads once', async () => {
    const { t } = serverLike();
    const { q } = await openLibrary(t);
    await sleep(50);
    (q('folder-path-input') as HTMLInputElement).value = '/more';
    (q('add-folder') as HTMLButtonElement).click();
    await vi.waitFor(() => expect(q('library-progress-text').textContent).toBe('Starting…'));
    await vi.waitFor(() => expect(q('library-progress-text').textContent).toBe('Up to date'), { timeout: 3000 });
    await sleep(600);
    // 1 on opening, 3 idle answers before the run started, 1 that saw it
    expect(t.watchProgress).toHaveBeenCalledTimes(5);
    // start, add folder, the finished run
    expect(t.workspaces).toHaveBeenCalledTimes(3);
  });

  it('gives up waiting for a run that never comes', async () => {
    const { t } = serverLike();
    const { q } = await openLibrary(t);
    await sleep(50);
    (t.reindex as ReturnType<typeof vi.fn>).mockImplementationOnce(async () => undefined); // nothing starts
    (q('reindex') as HTMLButtonElement).click();
    await sleep(7000);
    const n = (t.watchProgress as ReturnType<typeof vi.fn>).mock.calls.length;
    expect(n).toBeLessThanOrEqual(1 + 1 + 20);
    await sleep(600);
    expect((t.watchProgress as ReturnType<typeof vi.fn>).mock.calls.length).toBe(n);
    expect(q('library-progress-text').textContent).toBe('Up to date');
  }, 10_000);

  it('keeps the documents on screen while the list reloads', async () => {
    const lib = serverLike();
    const { app, rows } = await openLibrary(lib.t);
    await sleep(50);
    expect(rows()).toBe(30);
    const release = lib.holdDocuments();
    const reload = app.loadWorkspaces();
    await sleep(20);
    expect(rows()).toBe(30); // not emptied while the request is out
    release();
    await reload;
    expect(rows()).toBe(30);
  });
});

describe('documents table', () => {
  it('names the file type from the extension', () => {
    expect(fileType('/a/b/Report.PDF')).toBe('pdf');
    expect(fileType('/a/b.d/README')).toBe('');
    expect(fileType('C:\\x\\notes.md')).toBe('md');
  });
});
