// Library: workspaces, folders, indexing progress, per-file errors, documents.

import { clear, errMsg, h } from '../dom';
import { fmtDuration, fmtInt, fmtRate } from '../format';
import type { DocumentInfo, Progress, ProgressError, Workspace } from '../transport/types';
import type { Ctx } from './ctx';

/** "notes/a.PDF" → "pdf"; '' without an extension. */
export function fileType(path: string): string {
  const m = /\.([a-z0-9]{1,8})$/i.exec(path.split(/[/\\]/).pop() ?? '');
  return m ? m[1].toLowerCase() : '';
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
    this.wsInput = h('input', { type: 'text', testid: 'new-workspace-input', placeholder: 'New workspace name', attrs: { 'aria-label': 'Workspace name', maxlength: 64 } });

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
      h('section', { class: 'card' }, h('h3', { text: 'Workspaces' }), wsForm),
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
    clear(this.folders);
    this.renderErrors();
    if (!ws) {
      this.wsTitle.textContent = 'Library';
      this.folders.append(h('li', { class: 'muted', text: 'No workspace yet: create one below.' }));
      return;
    }
    this.wsTitle.textContent = `Library — ${ws.name}`;
    for (const f of ws.folders ?? []) {
      this.folders.append(
        h('li', { class: 'folder', testid: 'folder', attrs: { 'data-path': f } },
          h('code', { text: f }),
          h('button', { type: 'button', class: 'btn small danger', testid: 'remove-folder', text: 'Remove', on: { click: () => void this.removeFolder(f) } }),
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
    clear(this.docs); // replaced in one go: no empty table in between
    for (const d of docs) {
      this.docs.append(
        h('tr', { class: d.status === 'error' ? 'error' : '', testid: 'document', attrs: { 'data-status': d.status } },
          h('td', { title: d.path }, h('code', { text: d.rel || d.path })),
          h('td', { class: 'muted', text: fileType(d.path) }),
          h('td', { title: d.error || '' }, d.status, d.error ? h('span', { class: 'doc-error', testid: 'document-error', text: ` — ${d.error}` }) : null),
          h('td', { text: fmtInt(d.chunks) }),
        ),
      );
    }
    this.docErrors = docs.filter((d) => d.error).map((d) => ({ path: d.path, reason: d.error ?? '' }));
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

  private async addFolder(): Promise<void> {
    const ws = this.ctx.workspace();
    if (!ws) return this.ctx.notify('Create a workspace first.');
    const path = this.pathInput?.value.trim();
    if (this.pathInput && !path) return this.ctx.notify('Type the folder path first.');
    try {
      const added = await this.ctx.t.addFolder(ws, path);
      if (this.pathInput) this.pathInput.value = '';
      if (added === '' && this.ctx.t.desktop) return; // picker cancelled
      this.barText.textContent = 'Starting…';
      this.watch(true);
      this.ctx.workspacesChanged();
    } catch (e) {
      this.ctx.notify(`Cannot add the folder: ${errMsg(e)}`);
    }
  }

  private async removeFolder(path: string): Promise<void> {
    const ws = this.ctx.workspace();
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

  private async createWorkspace(): Promise<void> {
    const name = this.wsInput.value.trim();
    if (!name) return;
    try {
      await this.ctx.t.createWorkspace(name);
      this.wsInput.value = '';
      this.ctx.workspacesChanged(name);
    } catch (e) {
      this.ctx.notify(`Cannot create the workspace: ${errMsg(e)}`);
    }
  }
}
