// App shell: header (nav, workspace switcher), views, global error banner.

import { codeText, errMsg, h } from './dom';
import { ApiError, type Trace, type Transport, type Workspace } from './transport/types';
import { ChatView } from './views/chat';
import type { Ctx } from './views/ctx';
import { LatencyView } from './views/latency';
import { LibraryView } from './views/library';
import { ModelsView } from './views/models';
import { PrivacyBadge } from './views/privacy';
import { SettingsView } from './views/settings';

type ViewName = 'chat' | 'library' | 'latency' | 'models' | 'settings';
const VIEWS: Array<[ViewName, string]> = [
  ['chat', 'Chat'],
  ['library', 'Library'],
  ['latency', 'Latency'],
  ['models', 'Models'],
  ['settings', 'Settings'],
];
const WS_KEY = 'lore.workspace';

/** What the page says, and all it shows, when the server refuses it for want of the token (HTTP 401). */
export const TOKEN_GUIDANCE =
  'This page needs Lore’s access token. Open the address `lore serve` printed when it started (it ends in #token=…); each start prints a new one.';

function storedWorkspace(): string {
  try {
    return localStorage.getItem(WS_KEY) ?? '';
  } catch {
    return '';
  }
}

/**
 * The workspace the page opens on: the one this browser last chose, else the one last asked something (the
 * server knows, whichever browser or command asked), else the one with the most documents (after `make demo`:
 * the demo, not the empty "default"), else "default", else the first. '' when there is none.
 */
export function landingWorkspace(wss: Workspace[], stored: string): string {
  if (stored && wss.some((w) => w.name === stored)) return stored;
  const when = (w: Workspace) => (w.last_used ? Date.parse(w.last_used) || 0 : 0);
  const used = wss.filter((w) => when(w) > 0).sort((a, b) => when(b) - when(a));
  if (used.length) return used[0].name;
  const full = wss.filter((w) => (w.documents ?? 0) > 0).sort((a, b) => (b.documents ?? 0) - (a.documents ?? 0));
  if (full.length) return full[0].name;
  return wss.find((w) => w.name === 'default')?.name ?? wss[0]?.name ?? '';
}

export class App {
  readonly el: HTMLElement;
  private ws = '';
  private workspaces: Workspace[] = [];
  private view: ViewName = 'chat';
  private readonly wsSelect: HTMLSelectElement;
  private readonly banner: HTMLElement;
  private readonly bannerText: HTMLElement;
  private readonly bannerClose: HTMLButtonElement;
  private readonly header: HTMLElement;
  private readonly main: HTMLElement;
  /** The server answered the workspace list (false after a failure: no "create a workspace" advice then). */
  private reachable = true;
  private readonly nav = new Map<ViewName, HTMLButtonElement>();
  private readonly chat: ChatView;
  private readonly library: LibraryView;
  private readonly latency: LatencyView;
  private readonly models: ModelsView;
  private readonly settings: SettingsView;
  private readonly privacy = new PrivacyBadge();
  private readonly ctx: Ctx;

  constructor(readonly t: Transport) {
    this.ctx = {
      t,
      workspace: () => this.ws,
      showLatency: (ref: Trace | string) => {
        this.go('latency');
        void this.latency.open(ref);
      },
      traceFinished: (trace: Trace) => this.latency.update(trace),
      notify: (m: string) => this.notify(m),
      workspacesChanged: (select?: string) => void this.loadWorkspaces(select),
      currentWorkspace: () => this.current(),
      workspaceNames: () => this.workspaces.map((w) => w.name),
      goto: (view) => this.go(view),
      reachable: () => this.reachable,
    };
    this.chat = new ChatView(this.ctx);
    this.library = new LibraryView(this.ctx);
    this.latency = new LatencyView(this.ctx);
    this.models = new ModelsView(this.ctx);
    this.settings = new SettingsView(this.ctx);

    this.wsSelect = h('select', { class: 'ws-select', testid: 'workspace-select', attrs: { 'aria-label': 'Workspace' } });
    this.wsSelect.addEventListener('change', () => void this.selectWorkspace(this.wsSelect.value, true));
    const navBar = h('nav', { class: 'nav' });
    for (const [name, label] of VIEWS) {
      const b = h('button', { type: 'button', class: 'nav-btn', testid: `nav-${name}`, text: label, on: { click: () => this.go(name) } });
      this.nav.set(name, b);
      navBar.append(b);
    }
    this.bannerText = h('span', { class: 'banner-text', testid: 'global-error-text' });
    this.bannerClose = h('button', {
      type: 'button', class: 'banner-close', testid: 'dismiss-error', text: '×', title: 'Dismiss',
      attrs: { 'aria-label': 'Dismiss' }, on: { click: () => (this.banner.hidden = true) },
    });
    this.banner = h('div', { class: 'banner', testid: 'global-error', role: 'alert', hidden: true }, this.bannerText, this.bannerClose);

    this.header = h('header', { class: 'top' },
      h('span', { class: 'brand', text: 'Lore' }),
      navBar,
      h('span', { class: 'grow' }),
      h('label', { class: 'inline ws-label' }, h('span', { class: 'muted small', text: 'Workspace' }), this.wsSelect),
      this.privacy.el,
    );
    this.main = h('main', { class: 'views' }, this.chat.el, this.library.el, this.latency.el, this.models.el, this.settings.el);
    // The transport (http or wails) is for tests and styles only: it means nothing to the user.
    this.el = h('div', { class: 'app', attrs: { 'data-transport': t.kind } }, this.header, this.banner, this.main);
    this.go('chat');
  }

  async start(): Promise<void> {
    // The badge stays hidden until the server answers (the views report a server that cannot be reached).
    void Promise.resolve()
      .then(() => this.t.system())
      .then((s) => this.privacy.show(s), () => undefined);
    await this.loadWorkspaces();
  }

  notify(message: string): void {
    this.bannerText.replaceChildren(...codeText(message));
    this.banner.hidden = false;
  }

  /**
   * The server refused the page (no token, or one from an earlier start): the banner's guidance is all there
   * is to do, so nothing else is shown (no views, no workspace menu, no close button).
   */
  private blocked(): void {
    this.notify(TOKEN_GUIDANCE);
    this.bannerClose.hidden = true;
    this.el.classList.add('blocked');
    this.main.hidden = true;
    for (const el of Array.from(this.header.children)) if (!el.classList.contains('brand')) (el as HTMLElement).hidden = true;
  }

  go(view: ViewName): void {
    this.view = view;
    const els: Record<ViewName, HTMLElement> = {
      chat: this.chat.el,
      library: this.library.el,
      latency: this.latency.el,
      models: this.models.el,
      settings: this.settings.el,
    };
    for (const [name, el] of Object.entries(els) as Array<[ViewName, HTMLElement]>) el.hidden = name !== view;
    for (const [name, b] of this.nav) {
      b.classList.toggle('active', name === view);
      if (name === view) b.setAttribute('aria-current', 'page');
      else b.removeAttribute('aria-current');
    }
    if (view === 'latency') void this.latency.refresh();
    if (view === 'models') void this.models.load();
    if (view === 'settings') void this.settings.load();
    if (view === 'library') void this.library.show(this.current());
  }

  private current(): Workspace | undefined {
    return this.workspaces.find((w) => w.name === this.ws);
  }

  async loadWorkspaces(select?: string): Promise<void> {
    try {
      this.workspaces = (await this.t.workspaces()) ?? [];
      this.reachable = true;
    } catch (e) {
      this.reachable = false;
      if (e instanceof ApiError && e.status === 401) this.blocked();
      else this.notify(`Cannot reach Lore: ${errMsg(e)}`);
      this.workspaces = [];
    }
    this.wsSelect.replaceChildren(
      ...(this.workspaces.length ? this.workspaces : []).map((w) =>
        h('option', { value: w.name, text: `${w.name} (${w.documents ?? 0} docs)` }),
      ),
    );
    if (!this.workspaces.length && this.reachable) this.wsSelect.append(h('option', { value: '', text: 'none' }));
    const has = (n: string | undefined) => !!n && this.workspaces.some((w) => w.name === n);
    // One named (created, renamed) is chosen by the user; else the one open stays; else the landing one.
    const next = has(select) ? select! : has(this.ws) ? this.ws : landingWorkspace(this.workspaces, storedWorkspace());
    await this.selectWorkspace(next, has(select));
  }

  /** Opens a workspace; `remember`: the user chose it, so this browser opens on it next time. */
  async selectWorkspace(name: string, remember = false): Promise<void> {
    const changed = name !== this.ws;
    this.ws = name;
    this.wsSelect.value = name;
    try {
      if (name && remember) localStorage.setItem(WS_KEY, name);
    } catch {
      /* storage unavailable */
    }
    if (changed) await this.chat.reset();
    else this.chat.updateHint();
    // The Library follows progress only while open; a reload of the list only re-renders it (no new
    // stream), so a stream that ends and reloads the workspaces cannot reopen itself.
    if (this.view === 'library') await (changed ? this.library.show(this.current()) : this.library.update(this.current()));
  }
}
