// Library: workspaces, folders, indexing progress, per-file errors, documents.

import { breakablePath, clear, errMsg, h } from '../dom';
import { fmtDuration, fmtInt, fmtRate } from '../format';
import { ApiError, type DocumentInfo, type Progress, type ProgressError, type Workspace } from '../transport/types';
import type { Ctx } from './ctx';

/** "notes/a.PDF" → "pdf"; '' without an extension. */
export function fileType(path: string): string {
  const m = /\.([a-z0-9]{1,8})$/i.exec(path.split(/[/\\]/).pop() ?? '');
  return m ? m[1].toLowerCase() : '';
}

/** Where a folder path typed in the browser must start: the server resolves any other against its own folder. */
export const ABSOLUTE_HINT = 'Type the folder’s full path, from the top: /home/you/notes (or C:\\Users\\you\\notes on Windows).';

/** "/notes", "C:\\notes", "\\\\server\\share": a path that does not depend on the server's working folder. */
export function isAbsolutePath(p: string): boolean {
  return p.startsWith('/') || /^[A-Za-z]:[\\/]/.test(p) || p.startsWith('\\\\');
}

/** Why a typed path is refused before it is sent ('' when it is fine). */
export function relativePathText(p: string): string {
  if (isAbsolutePath(p)) return '';
  if (p === '~' || /^~[\\/]/.test(p)) return `“~” is not expanded here: ${p}`;
  return `That is not a full path: ${p} would be looked for in the folder lore serve was started from.`;
}

/**
 * The server's error for an added folder in plain words, with what to do: "invalid request: folder /x: stat
 * /x: no such file or directory" → "That folder does not exist: /x". `path` is what was typed ('' from the
 * desktop picker: then it is taken from the message).
 */
export function folderErrorText(raw: string, path = ''): { text: string; hint: string } {
  const msg = raw.replace(/^invalid request:\s*/i, '').trim();
  const where = path || /^folder (.+?): l?stat /.exec(msg)?.[1] || /^(.+) is not a folder$/.exec(msg)?.[1] || '';
  const at = where ? `: ${where}` : '';
  if (/ is not a folder$/.test(msg)) return { text: `That is a file, not a folder${at}`, hint: 'Add the folder that holds it.' };
  if (/no such file or directory|not a directory|cannot find the (file|path)/i.test(msg)) return { text: `That folder does not exist${at}`, hint: ABSOLUTE_HINT };
  if (/permission denied|access is denied|operation not permitted/i.test(msg)) {
    return { text: `Lore may not read that folder${at}`, hint: 'The user that runs Lore needs permission to open it.' };
  }
  return { text: `Cannot add the folder${at}: ${msg}`, hint: '' };
}

/** Which workspace names the server accepts (app.NameRule), said to the user. */
export const WORKSPACE_NAME_RULE = 'Use 1–64 letters, digits, spaces, hyphens (-), underscores (_) and dots (.), starting with a letter or digit.';

/**
 * Why a new workspace name would be refused ('' when it is fine): empty, not in WORKSPACE_NAME_RULE, or taken
 * (`taken`: the names there are, `except` the one being renamed). The server checks the same.
 */
export function workspaceNameError(name: string, taken: string[], except = ''): string {
  const n = name.trim();
  if (!n) return 'Type a name for the workspace first.';
  if ([...n].length > 64 || !/^[\p{L}\p{Nd}][\p{L}\p{Nd} ._-]*$/u.test(n)) return `“${n}” cannot be a workspace name. ${WORKSPACE_NAME_RULE}`;
  if (n !== except && taken.includes(n)) return `A workspace called “${n}” already exists.`;
  return '';
}

/** The folder's documents, by path ("/a/b" holds "/a/b/c.md", not "/a/bc/d.md"). */
export function docsInFolder(docs: DocumentInfo[], folder: string): number {
  const base = folder.replace(/[/\\]+$/, '');
  return docs.filter((d) => d.path === base || d.path.startsWith(base + '/') || d.path.startsWith(base + '\\')).length;
}

export function progressText(p: Progress): string {
  const parts: string[] = [];
  if (p.phase) parts.push(p.phase);
  if (typeof p.files_total === 'number' && p.files_total > 0) parts.push(`${fmtInt(p.files_done ?? 0)} / ${fmtInt(p.files_total)} files`);
  else if (typeof p.files_done === 'number') parts.push(`${fmtInt(p.files_done)} files`);
  if (typeof p.chunks === 'number') parts.push(`${fmtInt(p.chunks)} chunks`);
  if (typeof p.files_per_s === 'number') parts.push(fmtRate(p.files_per_s, 'files/s'));
  if (typeof p.eta_s === 'number' && p.eta_s >= 0) parts.push(`ETA ${fmtDuration(p.eta_s)}`);
  return parts.join(' · ');
}

/** After an add or re-index: how often, and how far apart, an idle answer is taken as "not started yet". */
const RUN_WAIT_TRIES = 20;
const RUN_WAIT_MS = 250;

export class LibraryView {
  readonly el: HTMLElement;
  private readonly wsTitle: HTMLElement;
  private readonly folders: HTMLUListElement;
  private readonly pathInput: HTMLInputElement | undefined;
  private readonly bar: HTMLProgressElement;
  private readonly barText: HTMLElement;
  private readonly current: HTMLElement;
  private readonly errors: HTMLUListElement;
  private readonly docs: HTMLTableSectionElement;
  private readonly wsInput: HTMLInputElement;
  /** The current workspace's name, rename and delete. */
  private readonly wsManage: HTMLElement;
  /** Why the last create, rename or delete failed (or what to do), until closed or a later success. */
  private readonly wsError: HTMLElement;
  private readonly wsErrorText: HTMLElement;
  /** Rename or delete of the current workspace waiting for the user ('' none). */
  private wsAction: '' | 'rename' | 'delete' = '';
  /** Why the last add failed, in plain words, until closed or a later add succeeds. */
  private readonly addError: HTMLElement;
  private readonly addErrorText: HTMLElement;
  private readonly addErrorHint: HTMLElement;
  /** The folder whose removal waits for the user's confirmation. */
  private confirming: string | undefined;
  private docList: DocumentInfo[] = [];
  private ws: Workspace | undefined;
  private unwatch: (() => void) | undefined;
  private watching = '';
  private progressErrors: ProgressError[] = [];
  private docErrors: ProgressError[] = [];
  /** The summary the last progress stream ended with (JSON), to tell a finished run from an idle answer. */
  private lastSummary: string | undefined;
  /** Retries left while waiting for a run the view asked for (add folder, re-index) to show up. */
  private expectRuns = 0;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly ctx: Ctx) {
    const desktop = ctx.t.desktop;
    this.wsTitle = h('h2', { text: 'Library' });
    this.folders = h('ul', { class: 'folder-list', testid: 'folder-list' });
    this.bar = h('progress', { class: 'index-bar', testid: 'library-progress', attrs: { max: 1, value: 0 } });
    this.barText = h('span', { class: 'index-text', testid: 'library-progress-text', text: 'Idle' });
    this.current = h('span', { class: 'index-current muted small', testid: 'library-current' });
    this.errors = h('ul', { class: 'error-list', testid: 'library-errors' });
    this.docs = h('tbody');
    this.wsInput = h('input', { type: 'text', testid: 'new-workspace-input', placeholder: 'New workspace name',
      title: WORKSPACE_NAME_RULE, attrs: { 'aria-label': 'Workspace name', maxlength: 64 } });
    this.wsManage = h('div', { class: 'ws-manage', testid: 'workspace-manage' });
    this.wsErrorText = h('span', { class: 'inline-error-text', testid: 'workspace-error-text' });
    this.wsError = h('div', { class: 'inline-error', testid: 'workspace-error', role: 'alert', hidden: true },
      this.wsErrorText,
      h('button', { type: 'button', class: 'banner-close', testid: 'dismiss-workspace-error', text: '×', title: 'Dismiss',
        attrs: { 'aria-label': 'Dismiss' }, on: { click: () => this.showWsError('') } }));

    this.addErrorText = h('span', { testid: 'folder-error-text' });
    this.addErrorHint = h('small', { class: 'inline-error-hint', testid: 'folder-error-hint' });
    this.addError = h('div', { class: 'inline-error', testid: 'folder-error', role: 'alert', hidden: true },
      h('span', { class: 'inline-error-text' }, this.addErrorText, this.addErrorHint),
      h('button', { type: 'button', class: 'banner-close', testid: 'dismiss-folder-error', text: '×', title: 'Dismiss',
        attrs: { 'aria-label': 'Dismiss' }, on: { click: () => this.showAddError(undefined) } }));
    let addRow: HTMLElement;
    if (desktop) {
      addRow = h('div', { class: 'row' },
        h('button', { type: 'button', class: 'btn primary', testid: 'add-folder', text: 'Add folder…', on: { click: () => void this.addFolder() } }),
      );
    } else {
      this.pathInput = h('input', { type: 'text', class: 'grow', testid: 'folder-path-input', placeholder: '/absolute/path/to/folder', attrs: { 'aria-label': 'Folder path' } });
      const form = h('form', { class: 'row' }, this.pathInput, h('button', { type: 'submit', class: 'btn primary', testid: 'add-folder', text: 'Add folder' }));
      form.addEventListener('submit', (ev) => {
        ev.preventDefault();
        void this.addFolder();
      });
      addRow = form;
    }
    const wsForm = h('form', { class: 'row' }, this.wsInput, h('button', { type: 'submit', class: 'btn', testid: 'create-workspace', text: 'Create workspace' }));
    wsForm.addEventListener('submit', (ev) => {
      ev.preventDefault();
      void this.createWorkspace();
    });

    this.el = h('div', { class: 'view library-view', testid: 'library-view' },
      h('section', { class: 'card' },
        h('div', { class: 'card-head' }, this.wsTitle,
          h('button', { type: 'button', class: 'btn', testid: 'reindex', text: 'Re-index', on: { click: () => void this.reindex() } })),
        h('h3', { text: 'Folders' }),
        this.folders,
        addRow,
        this.addError,
      ),
      h('section', { class: 'card' },
        h('h3', { text: 'Indexing' }),
        h('div', { class: 'index-progress' }, this.bar, this.barText),
        this.current,
        h('h3', { text: 'Problems' }),
        this.errors,
      ),
      h('section', { class: 'card' },
        h('h3', { text: 'Documents' }),
        h('table', { class: 'docs', testid: 'documents' },
          h('thead', {}, h('tr', {}, h('th', { text: 'File' }), h('th', { text: 'Type' }), h('th', { text: 'Status' }), h('th', { text: 'Chunks' }))),
          this.docs),
      ),
      h('section', { class: 'card' }, h('h3', { text: 'Workspaces' }), this.wsManage, wsForm,
        h('small', { class: 'muted', testid: 'workspace-rule', text: WORKSPACE_NAME_RULE }), this.wsError),
    );
    this.renderErrors();
  }

  /**
   * The view was opened, or its workspace changed while open: shows the workspace (or the empty state),
   * lists its documents and follows its indexing. An idle workspace answers the progress stream with `done`
   * at once; that ends the stream and nothing more is asked until the user acts (or a run is reported).
   */
  async show(ws: Workspace | undefined): Promise<void> {
    const name = ws?.name ?? '';
    if (this.watching !== name) {
      this.stopWatching();
      this.watching = name;
      this.progressErrors = [];
      this.lastSummary = undefined;
      this.expectRuns = 0;
      this.bar.value = 0;
      this.barText.textContent = 'Idle';
      this.current.textContent = '';
      clear(this.docs);
      this.docErrors = [];
    }
    this.renderWorkspace(ws);
    if (!ws) return;
    this.watch();
    await this.loadDocuments();
  }

  /** The workspace's data changed (folders, counts): re-renders it and its documents; opens no stream. */
  async update(ws: Workspace | undefined): Promise<void> {
    if ((ws?.name ?? '') !== this.watching) return this.show(ws);
    this.renderWorkspace(ws);
    if (ws) await this.loadDocuments();
  }

  private renderWorkspace(ws: Workspace | undefined): void {
    if (ws?.name !== this.ws?.name) this.wsAction = '';
    this.ws = ws;
    if (this.confirming && !ws?.folders?.includes(this.confirming)) this.confirming = undefined;
    clear(this.folders);
    this.renderErrors();
    this.renderManage();
    if (!ws) {
      this.wsTitle.textContent = 'Library';
      this.folders.append(h('li', { class: 'muted', text: 'No workspace yet: create one below.' }));
      return;
    }
    this.wsTitle.textContent = `Library — ${ws.name}`;
    for (const f of ws.folders ?? []) {
      const asking = this.confirming === f;
      this.folders.append(
        h('li', { class: 'folder', testid: 'folder', attrs: { 'data-path': f } },
          h('code', { text: f }),
          h('button', { type: 'button', class: 'btn small danger', testid: 'remove-folder', text: 'Remove', disabled: asking,
            on: { click: () => this.askRemove(f) } }),
          asking ? this.confirmBox(f) : null,
        ),
      );
    }
    if (!ws.folders?.length) this.folders.append(h('li', { class: 'muted', text: 'No folders yet.' }));
  }

  private async loadDocuments(): Promise<void> {
    const ws = this.ctx.workspace();
    if (!ws) return;
    let docs: DocumentInfo[];
    try {
      docs = (await this.ctx.t.documents(ws)) ?? [];
    } catch (e) {
      this.ctx.notify(`Cannot list documents: ${errMsg(e)}`);
      return;
    }
    if (ws !== this.ctx.workspace()) return; // switched meanwhile
    this.docList = docs;
    if (this.confirming) this.renderWorkspace(this.ws); // the confirmation counts the folder's documents
    clear(this.docs); // replaced in one go: no empty table in between
    for (const d of docs) {
      this.docs.append(
        h('tr', { class: d.status === 'error' ? 'error' : '', testid: 'document', attrs: { 'data-status': d.status } },
          h('td', { title: d.path }, h('code', {}, ...breakablePath(d.rel || d.path))),
          h('td', { class: 'muted', text: fileType(d.path) }),
          h('td', { title: d.error || '' }, d.status, d.error ? h('span', { class: 'doc-error', testid: 'document-error', text: ` — ${d.error}` }) : null),
          h('td', { text: fmtInt(d.chunks) }),
        ),
      );
    }
    // Problems are the files that failed; the skipped ones (binary, no text…) say why in the table.
    this.docErrors = docs.filter((d) => d.status === 'error' && d.error).map((d) => ({ path: d.path, reason: d.error ?? '' }));
    this.renderErrors();
  }

  private renderErrors(): void {
    clear(this.errors);
    const seen = new Set<string>();
    for (const e of [...this.progressErrors, ...this.docErrors]) {
      const key = `${e.path}\u0000${e.reason}`;
      if (seen.has(key)) continue;
      seen.add(key);
      this.errors.append(h('li', { class: 'error', testid: 'library-error' }, h('code', { text: e.path }), ' — ', h('span', { text: e.reason })));
    }
    if (!seen.size) this.errors.append(h('li', { class: 'muted', text: 'None.' }));
  }

  /**
   * Follows the workspace's indexing. Over HTTP each stream ends with `done` (at once when idle), so a run
   * is seen only by a stream open while it runs: after an add or re-index the stream is reopened a few times
   * (bounded) until the run shows up or its summary differs from the last one seen.
   */
  private watch(expectRun = false): void {
    const ws = this.ctx.workspace();
    if (!ws) return;
    if (expectRun) this.expectRuns = RUN_WAIT_TRIES;
    if (this.unwatch) return;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.watching = ws;
    let sawProgress = false;
    this.unwatch = this.ctx.t.watchProgress(ws, {
      onProgress: (p) => {
        sawProgress = true;
        this.expectRuns = 0;
        this.onProgress(p);
      },
      onDone: (summary) => {
        const http = this.ctx.t.kind === 'http';
        if (http) this.stopWatching(); // the stream has ended
        const key = JSON.stringify(summary ?? null);
        const ran = !http || sawProgress || (this.lastSummary !== undefined && key !== this.lastSummary);
        this.lastSummary = key;
        if (!ran && this.expectRuns > 0) {
          // The run asked for has not started yet: look again shortly.
          this.expectRuns--;
          this.retryTimer = setTimeout(() => {
            this.retryTimer = undefined;
            if (this.watching === ws) this.watch();
          }, RUN_WAIT_MS);
          return;
        }
        this.expectRuns = 0;
        this.bar.max = 1;
        this.bar.value = 1;
        this.barText.textContent = 'Up to date';
        this.current.textContent = '';
        // A finished run changed the documents and the workspace's counts: the shell reloads both.
        if (ran) this.ctx.workspacesChanged();
      },
      onError: (m) => {
        this.stopWatching();
        this.expectRuns = 0;
        this.barText.textContent = `Progress unavailable: ${m}`;
      },
    });
  }

  private stopWatching(): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.unwatch?.();
    this.unwatch = undefined;
  }

  onProgress(p: Progress): void {
    const total = p.files_total ?? 0;
    if (total > 0) {
      this.bar.max = total;
      this.bar.value = Math.min(p.files_done ?? 0, total);
    } else {
      this.bar.removeAttribute('value'); // indeterminate
    }
    this.barText.textContent = progressText(p) || 'Indexing…';
    this.current.textContent = p.current ?? '';
    if (p.error && p.error.path) {
      this.progressErrors.push(p.error);
      this.renderErrors();
    }
  }

  /** Shows (or, undefined, hides) the add-folder error under the path box. */
  private showAddError(e: { text: string; hint: string } | undefined): void {
    this.addError.hidden = !e;
    this.addErrorText.textContent = e?.text ?? '';
    this.addErrorHint.textContent = e?.hint ?? '';
    this.addErrorHint.hidden = !e?.hint;
  }

  private async addFolder(): Promise<void> {
    const ws = this.ctx.workspace();
    if (!ws) return this.showAddError({ text: 'Create a workspace first (below).', hint: '' });
    const path = this.pathInput?.value.trim();
    if (this.pathInput && !path) return this.showAddError({ text: 'Type the folder’s path first.', hint: ABSOLUTE_HINT });
    // The server would resolve a relative path against its own working folder: refused here, with the reason.
    const relative = path ? relativePathText(path) : '';
    if (relative) return this.showAddError({ text: relative, hint: ABSOLUTE_HINT });
    try {
      const added = await this.ctx.t.addFolder(ws, path);
      this.showAddError(undefined);
      if (this.pathInput) this.pathInput.value = '';
      if (added === '' && this.ctx.t.desktop) return; // picker cancelled
      this.barText.textContent = 'Starting…';
      this.watch(true);
      this.ctx.workspacesChanged();
    } catch (e) {
      this.showAddError(folderErrorText(errMsg(e), path ?? ''));
    }
  }

  /** Remove asks first, in the page (a native confirm() can be dismissed unseen by a webview or a test driver). */
  private askRemove(path: string): void {
    this.confirming = path;
    this.renderWorkspace(this.ws);
    (this.folders.querySelector('[data-testid="cancel-remove"]') as HTMLButtonElement | null)?.focus();
  }

  private confirmBox(path: string): HTMLElement {
    const n = docsInFolder(this.docList.filter((d) => d.status === 'indexed'), path);
    const cancel = () => {
      this.confirming = undefined;
      this.renderWorkspace(this.ws);
    };
    const box = h('div', { class: 'folder-confirm', testid: 'remove-confirm', role: 'group', attrs: { 'aria-label': 'Confirm removal' } },
      h('span', { class: 'folder-confirm-text', testid: 'remove-confirm-text',
        text: `Remove this folder from ${this.ws?.name ?? 'the workspace'}? ${n ? `Its ${fmtInt(n)} indexed document${n === 1 ? '' : 's'} leave the index` : 'Its documents leave the index'}; the files stay on disk.` }),
      h('button', { type: 'button', class: 'btn small danger', testid: 'confirm-remove', text: 'Remove folder', on: { click: () => void this.removeFolder(path) } }),
      h('button', { type: 'button', class: 'btn small', testid: 'cancel-remove', text: 'Cancel', on: { click: cancel } }),
    );
    box.addEventListener('keydown', (ev) => {
      if ((ev as KeyboardEvent).key === 'Escape') cancel();
    });
    return box;
  }

  private async removeFolder(path: string): Promise<void> {
    const ws = this.ctx.workspace();
    this.confirming = undefined;
    this.renderWorkspace(this.ws);
    if (!ws) return;
    try {
      await this.ctx.t.removeFolder(ws, path);
      this.ctx.workspacesChanged();
    } catch (e) {
      this.ctx.notify(`Cannot remove the folder: ${errMsg(e)}`);
    }
  }

  private async reindex(): Promise<void> {
    const ws = this.ctx.workspace();
    if (!ws) return;
    try {
      this.progressErrors = [];
      this.renderErrors();
      await this.ctx.t.reindex(ws);
      this.barText.textContent = 'Starting…';
      this.watch(true);
    } catch (e) {
      this.ctx.notify(`Cannot re-index: ${errMsg(e)}`);
    }
  }

  /** The workspace names the app knows (for a duplicate caught before asking the server). */
  private names(): string[] {
    return this.ctx.workspaceNames?.() ?? (this.ws ? [this.ws.name] : []);
  }

  private showWsError(text: string): void {
    this.wsError.hidden = !text;
    this.wsErrorText.textContent = text;
  }

  /** A server's refusal in plain words (the status says which: taken, not allowed, gone). */
  private wsFailure(what: string, name: string, e: unknown): string {
    const status = e instanceof ApiError ? e.status : 0;
    if (status === 409) return `A workspace called “${name}” already exists.`;
    if (status === 400) return `Cannot ${what}: ${errMsg(e).replace(/^invalid request:\s*/i, '')}`;
    return `Cannot ${what}: ${errMsg(e)}`;
  }

  private async createWorkspace(): Promise<void> {
    const name = this.wsInput.value.trim();
    const bad = workspaceNameError(name, this.names());
    if (bad) return this.showWsError(bad);
    try {
      await this.ctx.t.createWorkspace(name);
      this.wsInput.value = '';
      this.showWsError('');
      this.ctx.workspacesChanged(name);
    } catch (e) {
      this.showWsError(this.wsFailure('create the workspace', name, e));
    }
  }

  /**
   * The current workspace with Rename and Delete; each asks in the page first (a name box, or what a delete
   * removes). The default workspace is where commands go without --workspace: it stays.
   */
  private renderManage(): void {
    const ws = this.ws;
    clear(this.wsManage);
    if (!ws) return;
    const fixed = ws.name === 'default';
    const row = h('div', { class: 'row ws-current' },
      h('span', {}, 'Current: ', h('strong', { testid: 'workspace-name', text: ws.name })),
      fixed
        ? h('small', { class: 'muted', testid: 'workspace-fixed', text: 'The default workspace is where commands go without --workspace: it can be emptied, not renamed or deleted.' })
        : null,
      fixed ? null : h('button', { type: 'button', class: 'btn small', testid: 'rename-workspace', text: 'Rename', disabled: this.wsAction !== '',
        on: { click: () => this.askWs('rename') } }),
      fixed ? null : h('button', { type: 'button', class: 'btn small danger', testid: 'delete-workspace', text: 'Delete', disabled: this.wsAction !== '',
        on: { click: () => this.askWs('delete') } }),
    );
    this.wsManage.append(row);
    if (this.wsAction === 'rename') this.wsManage.append(this.renameBox(ws));
    if (this.wsAction === 'delete') this.wsManage.append(this.deleteBox(ws));
  }

  private askWs(action: 'rename' | 'delete'): void {
    this.wsAction = action;
    this.showWsError('');
    this.renderManage();
    const focus = action === 'rename' ? 'rename-workspace-input' : 'cancel-delete-workspace';
    (this.wsManage.querySelector(`[data-testid="${focus}"]`) as HTMLElement | null)?.focus();
  }

  private cancelWs(): void {
    this.wsAction = '';
    this.renderManage();
  }

  private renameBox(ws: Workspace): HTMLElement {
    const input = h('input', { type: 'text', testid: 'rename-workspace-input', value: ws.name, title: WORKSPACE_NAME_RULE,
      attrs: { 'aria-label': 'New name', maxlength: 64 } });
    const form = h('form', { class: 'row ws-confirm', testid: 'rename-workspace-form' }, input,
      h('button', { type: 'submit', class: 'btn small primary', testid: 'confirm-rename-workspace', text: 'Save name' }),
      h('button', { type: 'button', class: 'btn small', testid: 'cancel-rename-workspace', text: 'Cancel', on: { click: () => this.cancelWs() } }));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      void this.renameWorkspace(ws.name, input.value);
    });
    form.addEventListener('keydown', (ev) => {
      if ((ev as KeyboardEvent).key === 'Escape') this.cancelWs();
    });
    return form;
  }

  private deleteBox(ws: Workspace): HTMLElement {
    const n = ws.documents ?? 0;
    const box = h('div', { class: 'folder-confirm ws-confirm', testid: 'delete-workspace-confirm', role: 'group', attrs: { 'aria-label': 'Confirm delete' } },
      h('span', { class: 'folder-confirm-text', testid: 'delete-workspace-text',
        text: `Delete the workspace “${ws.name}”? Its ${n ? `${fmtInt(n)} indexed document${n === 1 ? '' : 's'}, ` : ''}chats and latency traces go from Lore; the files stay on disk.` }),
      h('button', { type: 'button', class: 'btn small danger', testid: 'confirm-delete-workspace', text: 'Delete workspace',
        on: { click: () => void this.deleteWorkspace(ws.name) } }),
      h('button', { type: 'button', class: 'btn small', testid: 'cancel-delete-workspace', text: 'Cancel', on: { click: () => this.cancelWs() } }),
    );
    box.addEventListener('keydown', (ev) => {
      if ((ev as KeyboardEvent).key === 'Escape') this.cancelWs();
    });
    return box;
  }

  private async renameWorkspace(from: string, to: string): Promise<void> {
    const name = to.trim();
    if (name === from) return this.cancelWs();
    const bad = workspaceNameError(name, this.names(), from);
    if (bad) return this.showWsError(bad);
    try {
      await this.ctx.t.renameWorkspace(from, name);
      this.wsAction = '';
      this.showWsError('');
      this.ctx.workspacesChanged(name);
    } catch (e) {
      this.showWsError(this.wsFailure('rename the workspace', name, e));
    }
  }

  private async deleteWorkspace(name: string): Promise<void> {
    this.wsAction = '';
    this.renderManage();
    try {
      await this.ctx.t.deleteWorkspace(name);
      this.showWsError('');
      this.ctx.workspacesChanged();
    } catch (e) {
      this.showWsError(this.wsFailure('delete the workspace', name, e));
    }
  }
}
