// App shell: header (nav, workspace switcher), views, global error banner.

import { errMsg, h } from './dom';
import type { Trace, Transport, Workspace } from './transport/types';
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

function storedWorkspace(): string {
  try {
    return localStorage.getItem(WS_KEY) ?? '';
  } catch {
    return '';
  }
}

export class App {
  readonly el: HTMLElement;
  private ws = '';
  private workspaces: Workspace[] = [];
  private view: ViewName = 'chat';
  private readonly wsSelect: HTMLSelectElement;
  private readonly banner: HTMLElement;
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
      goto: (view) => this.go(view),
    };
    this.chat = new ChatView(this.ctx);
    this.library = new LibraryView(this.ctx);
    this.latency = new LatencyView(this.ctx);
    this.models = new ModelsView(this.ctx);
    this.settings = new SettingsView(this.ctx);

    this.wsSelect = h('select', { class: 'ws-select', testid: 'workspace-select', attrs: { 'aria-label': 'Workspace' } });
    this.wsSelect.addEventListener('change', () => void this.selectWorkspace(this.wsSelect.value));
    const navBar = h('nav', { class: 'nav' });
    for (const [name, label] of VIEWS) {
      const b = h('button', { type: 'button', class: 'nav-btn', testid: `nav-${name}`, text: label, on: { click: () => this.go(name) } });
      this.nav.set(name, b);
      navBar.append(b);
    }
    this.banner = h('div', { class: 'banner', testid: 'global-error', role: 'alert', hidden: true });
    this.banner.addEventListener('click', () => (this.banner.hidden = true));

    this.el = h('div', { class: 'app', attrs: { 'data-transport': t.kind } },
      h('header', { class: 'top' },
        h('span', { class: 'brand', text: 'Lore' }),
        navBar,
        h('span', { class: 'grow' }),
        h('label', { class: 'inline' }, h('span', { class: 'muted small', text: 'Workspace' }), this.wsSelect),
        this.privacy.el,
        h('span', { class: 'badge', testid: 'transport-kind', text: t.desktop ? 'desktop' : 'browser' }),
      ),
      this.banner,
      h('main', { class: 'views' }, this.chat.el, this.library.el, this.latency.el, this.models.el, this.settings.el),
    );
    this.go('chat');
  }

  async start(): Promise<void> {
    // The badge stays hidden until the server answers (the views report a server that cannot be reached).
    void Promise.resolve()
      .then(() => this.t.system())
      .then((s) => this.privacy.show(s), () => undefined);
    await this.loadWorkspaces(storedWorkspace());
  }

  notify(message: string): void {
    this.banner.textContent = message;
    this.banner.hidden = false;
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
    } catch (e) {
      this.notify(`Cannot reach Lore: ${errMsg(e)}`);
      this.workspaces = [];
    }
    this.wsSelect.replaceChildren(
      ...(this.workspaces.length ? this.workspaces : []).map((w) =>
        h('option', { value: w.name, text: `${w.name} (${w.documents ?? 0} docs)` }),
      ),
    );
    if (!this.workspaces.length) this.wsSelect.append(h('option', { value: '', text: 'none' }));
    const want = select && this.workspaces.some((w) => w.name === select) ? select : this.ws;
    const next = this.workspaces.some((w) => w.name === want) ? want : (this.workspaces[0]?.name ?? '');
    await this.selectWorkspace(next);
  }

  async selectWorkspace(name: string): Promise<void> {
    const changed = name !== this.ws;
    this.ws = name;
    this.wsSelect.value = name;
    try {
      if (name) localStorage.setItem(WS_KEY, name);
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
