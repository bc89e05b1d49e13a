import { afterEach, describe, expect, it, vi } from 'vitest';
import { App } from '../src/app';
import type { DocumentInfo, ProgressCallbacks, Transport, Workspace } from '../src/transport/types';
import { ApiError } from '../src/transport/types';
import { ABSOLUTE_HINT, docsInFolder, fileType, folderErrorText, isAbsolutePath, relativePathText, WORKSPACE_NAME_RULE, workspaceNameError } from '../src/views/library';

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
    removeFolder: vi.fn(async (_w: string, path: string) => void (ws[0].folders = ws[0].folders!.filter((f) => f !== path))),
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

describe('Library: removing a folder asks first (issue 35, 5)', () => {
  it('one click deletes nothing: an in-page confirmation says what goes; Cancel keeps it; Remove folder removes it', async () => {
    const { t } = serverLike();
    const { q, app } = await openLibrary(t);
    await sleep(50);
    q('remove-folder').click();
    await sleep(20);
    expect(t.removeFolder).not.toHaveBeenCalled();
    expect(q('remove-confirm')).not.toBeNull();
    expect(q('remove-confirm-text').textContent).toBe('Remove this folder from default? Its 30 indexed documents leave the index; the files stay on disk.');
    expect((q('remove-folder') as HTMLButtonElement).disabled).toBe(true);
    expect(document.activeElement).toBe(q('cancel-remove')); // the safe choice has the focus
    q('cancel-remove').click();
    expect(q('remove-confirm')).toBeNull();
    expect(app.el.querySelectorAll('[data-testid="folder"]').length).toBe(1);

    q('remove-folder').click();
    q('remove-confirm').dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
    expect(q('remove-confirm')).toBeNull();
    expect(t.removeFolder).not.toHaveBeenCalled();

    q('remove-folder').click();
    q('confirm-remove').click();
    expect(t.removeFolder).toHaveBeenCalledWith('default', '/lib');
    await vi.waitFor(() => expect(app.el.querySelectorAll('[data-testid="folder"]').length).toBe(0));
  });

  it('counts a folder\'s documents by path', () => {
    const d = (path: string) => ({ id: 1, path, status: 'indexed', chunks: 1 });
    expect(docsInFolder([d('/a/b/c.md'), d('/a/bc/d.md'), d('/a/b/e/f.md')], '/a/b')).toBe(2);
    expect(docsInFolder([d('/a/b/c.md')], '/a/b/')).toBe(1);
    expect(docsInFolder([d('C:\\n\\x.md')], 'C:\\n')).toBe(1);
  });
});

describe('Library: adding a folder, in plain words (issue 35, 8)', () => {
  it('says the server\'s errors plainly, with the absolute-path hint', () => {
    expect(folderErrorText('invalid request: folder /does/not/exist: stat /does/not/exist: no such file or directory', '/does/not/exist'))
      .toEqual({ text: 'That folder does not exist: /does/not/exist', hint: ABSOLUTE_HINT });
    expect(folderErrorText('invalid request: folder /x: stat /x: no such file or directory')).toEqual({ text: 'That folder does not exist: /x', hint: ABSOLUTE_HINT });
    expect(folderErrorText('invalid request: /etc/passwd is not a folder', '/etc/passwd').text).toBe('That is a file, not a folder: /etc/passwd');
    expect(folderErrorText('invalid request: folder /root/x: stat /root/x: permission denied', '/root/x').text).toBe('Lore may not read that folder: /root/x');
    expect(folderErrorText('database is locked', '/n')).toEqual({ text: 'Cannot add the folder: /n: database is locked', hint: '' });
    expect(ABSOLUTE_HINT).toMatch(/full path/);
  });

  it('refuses a relative path before sending it (the server would resolve it against its own folder)', () => {
    for (const p of ['/home/u/notes', 'C:\\Users\\u', 'c:/u', '\\\\srv\\share']) expect(isAbsolutePath(p), p).toBe(true);
    for (const p of ['notes', './notes', '../x', '~/notes', 'C:notes']) expect(isAbsolutePath(p), p).toBe(false);
    expect(relativePathText('notes')).toBe('That is not a full path: notes would be looked for in the folder lore serve was started from.');
    expect(relativePathText('~/notes')).toBe('“~” is not expanded here: ~/notes');
    expect(relativePathText('/n')).toBe('');
  });

  it('shows the error under the box, closes on ×, and clears on a later success', async () => {
    const { t } = serverLike();
    const { q, app } = await openLibrary(t);
    await sleep(50);
    const add = async (path: string) => {
      (q('folder-path-input') as HTMLInputElement).value = path;
      (q('add-folder') as HTMLButtonElement).click();
      await sleep(10);
    };
    await add('notes');
    expect(t.addFolder).not.toHaveBeenCalled();
    expect(q('folder-error').hidden).toBe(false);
    expect(q('folder-error-hint').textContent).toBe(ABSOLUTE_HINT);

    (t.addFolder as ReturnType<typeof vi.fn>).mockImplementationOnce(async () => {
      throw new ApiError('invalid request: folder /does/not/exist: stat /does/not/exist: no such file or directory', 400);
    });
    await add('/does/not/exist');
    expect(q('folder-error-text').textContent).toBe('That folder does not exist: /does/not/exist');
    expect(q('global-error').hidden).toBe(true); // not the page-wide banner
    q('dismiss-folder-error').click();
    expect(q('folder-error').hidden).toBe(true);

    (t.addFolder as ReturnType<typeof vi.fn>).mockImplementationOnce(async () => {
      throw new ApiError('invalid request: folder /nope: stat /nope: no such file or directory', 400);
    });
    await add('/nope');
    expect(q('folder-error').hidden).toBe(false);
    await add('/more');
    expect(t.addFolder).toHaveBeenLastCalledWith('default', '/more');
    expect(q('folder-error').hidden).toBe(true);
    expect(app.el.textContent).not.toContain('no such file');
  });
});

describe('Library: file names wrap at / or - (issue 35, 21)', () => {
  it('puts a break opportunity after separators and dashes only, keeping the text', async () => {
    const { t } = serverLike({ docs: 1 });
    (t.documents as ReturnType<typeof vi.fn>).mockImplementation(async () => [
      { id: 1, path: '/lib/2024-04-17_offsite/planning notes.md', rel: '2024-04-17_offsite/planning notes.md', status: 'indexed', chunks: 3 },
    ]);
    const { q } = await openLibrary(t);
    await vi.waitFor(() => expect(q('document')).not.toBeNull());
    const code = q('document').querySelector('td code')!;
    expect(code.textContent).toBe('2024-04-17_offsite/planning notes.md');
    expect(Array.from(code.childNodes).filter((n) => n.nodeType === Node.TEXT_NODE).map((n) => n.textContent))
      .toEqual(['2024-', '04-', '17_', 'offsite/', 'planning notes.md']);
    expect(code.querySelectorAll('wbr').length).toBe(4);
  });
});

describe('Library: workspaces are named, renamed and deleted in plain words (issue 35, 12)', () => {
  const cases: Array<[string, string[], string, string]> = [
    ['notes', ['default'], '', ''],
    ['My Notes', ['default'], '', ''],
    ['Été 2024_v1.2-final', [], '', ''],
    ['', ['default'], '', 'Type a name for the workspace first.'],
    ['   ', [], '', 'Type a name for the workspace first.'],
    ['My Notes!', [], '', `“My Notes!” cannot be a workspace name. ${WORKSPACE_NAME_RULE}`],
    ['a/b', [], '', `“a/b” cannot be a workspace name. ${WORKSPACE_NAME_RULE}`],
    ['-x', [], '', `“-x” cannot be a workspace name. ${WORKSPACE_NAME_RULE}`],
    ['x'.repeat(65), [], '', `“${'x'.repeat(65)}” cannot be a workspace name. ${WORKSPACE_NAME_RULE}`],
    ['default', ['default'], '', 'A workspace called “default” already exists.'],
    [' notes ', ['notes'], 'notes', ''], // its own name, when renaming it
  ];
  for (const [name, taken, except, want] of cases) {
    it(`name ${JSON.stringify(name)} → ${want || 'accepted'}`, () => expect(workspaceNameError(name, taken, except)).toBe(want));
  }

  function withWorkspaces() {
    const { t } = serverLike();
    const list: Workspace[] = [
      { id: 1, name: 'default', folders: [], documents: 0, chunks: 0 },
      { id: 2, name: 'notes', folders: ['/lib'], documents: 30, chunks: 30, last_used: '2026-12-01T10:00:00Z' },
    ];
    Object.assign(t, {
      workspaces: vi.fn(async () => list),
      createWorkspace: vi.fn(async (name: string) => {
        if (list.some((w) => w.name === name)) throw new ApiError(`already exists: a workspace called "${name}"`, 409);
        list.push({ id: list.length + 1, name, folders: [], documents: 0, chunks: 0 });
      }),
      renameWorkspace: vi.fn(async (from: string, name: string) => {
        if (list.some((w) => w.name === name)) throw new ApiError(`already exists: a workspace called "${name}"`, 409);
        list.find((w) => w.name === from)!.name = name;
      }),
      deleteWorkspace: vi.fn(async (name: string) => void list.splice(list.findIndex((w) => w.name === name), 1)),
    });
    return { t, list };
  }

  it('an empty, invalid or taken name says why, under the form, and is never sent', async () => {
    const { t } = withWorkspaces();
    const { q } = await openLibrary(t);
    await sleep(20);
    const create = async (name: string) => {
      (q('new-workspace-input') as HTMLInputElement).value = name;
      (q('create-workspace') as HTMLButtonElement).click();
      await sleep(10);
    };
    for (const [name, want] of [
      ['', 'Type a name for the workspace first.'],
      ['My Notes!', `“My Notes!” cannot be a workspace name. ${WORKSPACE_NAME_RULE}`],
      ['notes', 'A workspace called “notes” already exists.'],
    ]) {
      await create(name);
      expect(q('workspace-error').hidden, name).toBe(false);
      expect(q('workspace-error-text').textContent).toBe(want);
    }
    expect(t.createWorkspace).not.toHaveBeenCalled();
    expect(q('global-error').hidden).toBe(true);
    expect(q('workspace-rule').textContent).toBe(WORKSPACE_NAME_RULE);
    // One the page did not know of is refused by the server: the same words.
    (t.createWorkspace as ReturnType<typeof vi.fn>).mockRejectedValueOnce(new ApiError('already exists: a workspace called "papers"', 409));
    await create('papers');
    expect(q('workspace-error-text').textContent).toBe('A workspace called “papers” already exists.');
    await create('birds');
    expect(t.createWorkspace).toHaveBeenLastCalledWith('birds');
    expect(q('workspace-error').hidden).toBe(true);
    await vi.waitFor(() => expect((q('workspace-select') as HTMLSelectElement).value).toBe('birds'));
  });

  it('rename and delete ask in the page; the default workspace has neither', async () => {
    const { t, list } = withWorkspaces();
    const { q } = await openLibrary(t);
    await vi.waitFor(() => expect(q('workspace-name').textContent).toBe('notes')); // the one last used
    q('rename-workspace').click();
    const input = q('rename-workspace-input') as HTMLInputElement;
    expect(document.activeElement).toBe(input);
    input.value = 'default';
    q('confirm-rename-workspace').click();
    await sleep(10);
    expect(q('workspace-error-text').textContent).toBe('A workspace called “default” already exists.');
    expect(t.renameWorkspace).not.toHaveBeenCalled();
    input.value = 'papers 2026';
    q('confirm-rename-workspace').click();
    await vi.waitFor(() => expect(q('workspace-name').textContent).toBe('papers 2026'));
    expect(t.renameWorkspace).toHaveBeenCalledWith('notes', 'papers 2026');
    expect((q('workspace-select') as HTMLSelectElement).value).toBe('papers 2026');
    expect(q('rename-workspace-form')).toBeNull();

    q('delete-workspace').click();
    await sleep(10);
    expect(t.deleteWorkspace).not.toHaveBeenCalled();
    expect(q('delete-workspace-text').textContent).toBe('Delete the workspace “papers 2026”? Its 30 indexed documents, chats and latency traces go from Lore; the files stay on disk.');
    expect(document.activeElement).toBe(q('cancel-delete-workspace'));
    q('cancel-delete-workspace').click();
    expect(q('delete-workspace-confirm')).toBeNull();
    q('delete-workspace').click();
    q('confirm-delete-workspace').click();
    await vi.waitFor(() => expect(q('workspace-name').textContent).toBe('default'));
    expect(t.deleteWorkspace).toHaveBeenCalledWith('papers 2026');
    expect(list.map((w) => w.name)).toEqual(['default']);
    expect(q('rename-workspace')).toBeNull();
    expect(q('delete-workspace')).toBeNull();
    expect(q('workspace-fixed').textContent).toMatch(/can be emptied, not renamed or deleted/);
  });
});

describe('Library: every file is listed (issue 35, 15)', () => {
  it('a skipped file shows in Documents with why; Problems lists the files that failed', async () => {
    const { t } = serverLike();
    (t.documents as ReturnType<typeof vi.fn>).mockResolvedValue([
      { id: 1, path: '/lib/notes.md', rel: 'notes.md', status: 'indexed', chunks: 2 },
      { id: 2, path: '/lib/random.bin', rel: 'random.bin', status: 'skipped', error: 'not text, PDF or Word (.docx): its first bytes are binary', chunks: 0 },
      { id: 3, path: '/lib/report.docx', rel: 'report.docx', status: 'error', error: 'corrupt or unreadable document: zip: not a valid zip file', chunks: 0 },
    ]);
    const { q, app } = await openLibrary(t);
    await vi.waitFor(() => expect(app.el.querySelectorAll('[data-testid="document"]').length).toBe(3));
    const row = app.el.querySelector('[data-testid="document"][data-status="skipped"]')!;
    expect(row.querySelector('[data-testid="document-error"]')?.textContent).toBe(' — not text, PDF or Word (.docx): its first bytes are binary');
    const problems = Array.from(q('library-errors').querySelectorAll('[data-testid="library-error"]')).map((li) => li.textContent);
    expect(problems).toEqual(['/lib/report.docx — corrupt or unreadable document: zip: not a valid zip file']);
  });
});
