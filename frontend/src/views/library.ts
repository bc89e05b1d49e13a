// Library: workspaces, folders, indexing progress, per-file errors, documents.

import { clear, errMsg, h } from '../dom';
import { fmtDuration, fmtInt, fmtRate } from '../format';
import type { DocumentInfo, Progress, ProgressError, Workspace } from '../transport/types';
import type { Ctx } from './ctx';

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
          h('thead', {}, h('tr', {}, h('th', { text: 'File' }), h('th', { text: 'Status' }), h('th', { text: 'Chunks' }))),
          this.docs),
      ),
      h('section', { class: 'card' }, h('h3', { text: 'Workspaces' }), wsForm),
    );
    this.renderErrors();
  }

  /** Shows the workspace (or the empty state) and starts following its indexing progress. */
  async load(ws: Workspace | undefined): Promise<void> {
    clear(this.folders);
    clear(this.docs);
    this.docErrors = [];
    if (this.watching !== (ws?.name ?? '')) {
      this.progressErrors = [];
      this.stopWatching();
      this.bar.value = 0;
      this.barText.textContent = 'Idle';
      this.current.textContent = '';
    }
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
    this.watch();
    await this.loadDocuments();
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
    clear(this.docs);
    for (const d of docs) {
      this.docs.append(
        h('tr', { class: d.status === 'error' ? 'error' : '', testid: 'document', attrs: { 'data-status': d.status } },
          h('td', {}, h('code', { text: d.path })),
          h('td', { text: d.status, title: d.error || '' }),
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

  private watch(): void {
    const ws = this.ctx.workspace();
    if (!ws || this.unwatch) return;
    this.watching = ws;
    this.unwatch = this.ctx.t.watchProgress(ws, {
      onProgress: (p) => this.onProgress(p),
      onDone: () => {
        this.bar.value = this.bar.max;
        this.barText.textContent = 'Up to date';
        this.current.textContent = '';
        // An HTTP progress stream ends after `done`; it is opened again after the next add/re-index.
        if (this.ctx.t.kind === 'http') this.stopWatching();
        void this.loadDocuments();
        this.ctx.workspacesChanged();
      },
      onError: (m) => {
        this.stopWatching();
        this.barText.textContent = `Progress unavailable: ${m}`;
      },
    });
  }

  private stopWatching(): void {
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
      this.watch();
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
      this.watch();
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
