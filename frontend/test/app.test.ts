// The app shell: what a page without its token shows (issue 35, 13), the header (16), the error banner (8).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { App, TOKEN_GUIDANCE } from '../src/app';
import { ApiError, type Transport } from '../src/transport/types';

afterEach(() => document.body.replaceChildren());

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
