import { describe, expect, it, vi } from 'vitest';
import FX from '../e2e/fixtures/real-server.json';
import type { ChatSummary, DocumentInfo, Settings, Workspace } from '../src/transport/types';
import { exampleQuestions, renderWelcome, topicOf } from '../src/views/welcome';

const fx = FX as unknown as Record<string, unknown>;
const docs = fx['GET /api/workspaces/{ws}/documents'] as DocumentInfo[];
const ws = (fx['GET /api/workspaces'] as Workspace[])[0];
const settings = fx['GET /api/settings'] as Settings;
const chats = fx['GET /api/chats'] as ChatSummary[];

describe('the empty chat', () => {
  it('turns document names into topics and a few questions', () => {
    expect(topicOf('notes/tide-tables.md')).toBe('tide tables');
    expect(topicOf('C:\\a\\b_c.txt')).toBe('b c');
    const qs = exampleQuestions(docs);
    expect(qs.length).toBeGreaterThan(0);
    expect(qs.length).toBeLessThanOrEqual(3);
    for (const q of qs) expect(q).toMatch(/^What do my documents say about .+\?$/);
    expect(exampleQuestions([{ id: 1, path: '/a/x.md', status: 'error', chunks: 0 }])).toEqual([]);
  });

  it('shows the library and model status, questions to try and the last chat (recorded answers)', () => {
    const act = { ask: vi.fn(), openChat: vi.fn(), goto: vi.fn() };
    const el = renderWelcome({ workspace: ws, settings, docs, chats }, act);
    expect(el.querySelector('[data-testid="welcome-library"]')!.textContent).toContain(`${ws.documents} documents`);
    expect(el.querySelector('[data-testid="welcome-model"]')!.textContent).toMatch(/^Chat model /);
    (el.querySelector('[data-testid="example-question"]') as HTMLButtonElement).click();
    expect(act.ask).toHaveBeenCalledWith(expect.stringMatching(/^What do my documents say about/));
    (el.querySelector('[data-testid="reopen-last"]') as HTMLButtonElement).click();
    expect(act.openChat).toHaveBeenCalledWith(chats[0].id);
  });

  it('says what to do first without a workspace or a chat model', () => {
    const act = { ask: vi.fn(), openChat: vi.fn(), goto: vi.fn() };
    const el = renderWelcome({ settings: { ...settings, chat_model: '' }, docs: [], chats: [] }, act);
    expect(el.querySelector('[data-testid="welcome-library"]')!.textContent).toMatch(/No workspace yet/);
    expect(el.querySelector('[data-testid="welcome-model"]')!.textContent).toMatch(/answers quote the best passages/);
    (el.querySelector('[data-testid="welcome-library"] button') as HTMLButtonElement).click();
    expect(act.goto).toHaveBeenCalledWith('library');
    expect(el.querySelector('[data-testid="reopen-last"]')).toBeNull();
  });
});

describe('chat history', () => {
  it('lists chats with their dates and filters them by the search box', async () => {
    const { ChatView } = await import('../src/views/chat');
    const list: ChatSummary[] = [
      { id: 2, title: 'Tides and the moon', created: '2026-12-02T10:00:00Z', updated: '2026-12-02T11:00:00Z' },
      { id: 1, title: 'Volcano lava', created: '2026-12-01T10:00:00Z' },
    ];
    const t = { kind: 'http', desktop: false, chats: vi.fn(async () => list) } as unknown as import('../src/transport/types').Transport;
    const view = new ChatView({ t, workspace: () => 'w', showLatency() {}, traceFinished() {}, notify() {}, workspacesChanged() {} });
    document.body.replaceChildren(view.el);
    await view.loadChats();
    const titles = () => Array.from(view.el.querySelectorAll('[data-testid="chat-item"] .chat-title')).map((e) => e.textContent);
    expect(titles()).toEqual(['Tides and the moon', 'Volcano lava']);
    const search = view.el.querySelector('[data-testid="chat-search"]') as HTMLInputElement;
    expect(search.hidden).toBe(false);
    search.value = 'LAVA';
    search.dispatchEvent(new Event('input'));
    expect(titles()).toEqual(['Volcano lava']);
    search.value = 'zzz';
    search.dispatchEvent(new Event('input'));
    expect(view.el.querySelector('[data-testid="chat-list"]')!.textContent).toBe('No chat matches.');
    document.body.replaceChildren();
  });
});
