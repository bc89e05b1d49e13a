// The app shell: what a page without its token shows (issue 35, 13), the header (16), the error banner (8).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { App, landingWorkspace, TOKEN_GUIDANCE } from '../src/app';
import { ApiError, type Transport, type Workspace } from '../src/transport/types';

afterEach(() => {
  document.body.replaceChildren();
  localStorage.clear();
});

function transport(workspaces: () => Promise<unknown>): Transport {
  return {
    kind: 'http',
    desktop: false,
    workspaces: vi.fn(workspaces),
    system: vi.fn(async () => {
      throw new ApiError('missing or wrong token', 401);
    }),
    chats: vi.fn(async () => []),
    documents: vi.fn(async () => []),
    settings: vi.fn(async () => ({})),
    traces: vi.fn(async () => []),
  } as unknown as Transport;
}

async function start(t: Transport) {
  const app = new App(t);
  document.body.replaceChildren(app.el);
  await app.start();
  const q = (id: string) => app.el.querySelector(`[data-testid="${id}"]`) as HTMLElement;
  return { app, q };
}

describe('App shell', () => {
  it('without its token shows only the guidance: no views, no workspace menu, no "create a workspace"', async () => {
    const { app, q } = await start(transport(async () => {
      throw new ApiError('missing or wrong token: open the URL that `lore serve` printed, or use the API key it printed for /v1', 401);
    }));
    expect(q('global-error').hidden).toBe(false);
    expect(q('global-error-text').textContent).toBe(TOKEN_GUIDANCE.replace(/`/g, ''));
    expect(q('global-error-text').querySelector('code')?.textContent).toBe('lore serve'); // no literal backticks
    expect(q('dismiss-error').hidden).toBe(true); // nothing else to show behind it
    expect((app.el.querySelector('main') as HTMLElement).hidden).toBe(true);
    expect(q('workspace-select').closest('label')!.hidden).toBe(true);
    expect(Array.from(q('workspace-select').querySelectorAll('option')).map((o) => o.textContent)).toEqual([]);
    expect(q('chat-hint').hidden).toBe(true);
    expect(app.el.textContent).not.toMatch(/Create a workspace|none/);
  });

  it('a server that cannot be reached: the banner says so, closes, and no advice to create a workspace', async () => {
    const { q } = await start(transport(async () => {
      throw new TypeError('Failed to fetch');
    }));
    expect(q('global-error-text').textContent).toBe('Cannot reach Lore: Failed to fetch');
    expect(q('chat-hint').hidden).toBe(true);
    expect(q('workspace-select').querySelectorAll('option').length).toBe(0);
    q('dismiss-error').click();
    expect(q('global-error').hidden).toBe(true);
  });

  it('a reachable server with no workspace still says to create one', async () => {
    const { q } = await start(transport(async () => []));
    expect(q('chat-hint').hidden).toBe(false);
    expect(q('chat-hint').textContent).toMatch(/^Create a workspace/);
    expect(q('global-error').hidden).toBe(true);
  });

  it('the header names no transport ("browser" meant nothing to a user); the app element still carries it', async () => {
    const { app, q } = await start(transport(async () => [{ id: 1, name: 'notes', folders: [], documents: 0 }]));
    expect(q('transport-kind')).toBeNull();
    expect(app.el.querySelector('header')!.textContent).not.toMatch(/browser|desktop/);
    expect(app.el.getAttribute('data-transport')).toBe('http');
  });
});

describe('the workspace the page opens on (issue 35, 6 and 12)', () => {
  const ws = (name: string, documents: number, last_used?: string): Workspace => ({ id: name.length, name, folders: [], documents, chunks: documents, ...(last_used ? { last_used } : {}) });
  const cases: Array<{ name: string; wss: Workspace[]; stored: string; want: string }> = [
    { name: 'after make demo: the only one with documents, not the empty default', wss: [ws('default', 0), ws('demo', 13)], stored: '', want: 'demo' },
    { name: 'the one this browser chose', wss: [ws('default', 0), ws('demo', 13), ws('notes', 2)], stored: 'notes', want: 'notes' },
    { name: 'a chosen one since deleted: the last one asked something', wss: [ws('a', 5, '2026-12-01T10:00:00Z'), ws('b', 1, '2026-12-03T10:00:00Z')], stored: 'gone', want: 'b' },
    { name: 'last used beats more documents', wss: [ws('big', 900), ws('small', 3, '2026-12-01T10:00:00Z')], stored: '', want: 'small' },
    { name: 'none used: the most documents', wss: [ws('a', 2), ws('b', 40), ws('default', 0)], stored: '', want: 'b' },
    { name: 'all empty: default', wss: [ws('alpha', 0), ws('default', 0)], stored: '', want: 'default' },
    { name: 'all empty, no default: the first', wss: [ws('alpha', 0), ws('beta', 0)], stored: '', want: 'alpha' },
    { name: 'none at all', wss: [], stored: 'x', want: '' },
  ];
  for (const c of cases) it(c.name, () => expect(landingWorkspace(c.wss, c.stored)).toBe(c.want));

  it('a fresh browser opens on the workspace with documents and remembers only what the user picks', async () => {
    const list = [ws('default', 0), ws('demo', 13)];
    const { app, q } = await start(transport(async () => list));
    const select = q('workspace-select') as HTMLSelectElement;
    expect(select.value).toBe('demo');
    expect(localStorage.getItem('lore.workspace')).toBeNull(); // an automatic pick is not a choice
    select.value = 'default';
    select.dispatchEvent(new Event('change'));
    await vi.waitFor(() => expect(localStorage.getItem('lore.workspace')).toBe('default'));
    const again = await start(transport(async () => list));
    expect((again.q('workspace-select') as HTMLSelectElement).value).toBe('default');
    void app;
  });
});
