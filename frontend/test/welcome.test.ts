import { describe, expect, it, vi } from 'vitest';
import FX from '../e2e/fixtures/real-server.json';
import type { ChatSummary, DocumentInfo, Settings, Workspace } from '../src/transport/types';
import { exampleQuestions, renderWelcome, topicFor, topicOf } from '../src/views/welcome';

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

  it('asks about a document by its title, not its file name; a file name loses its leading date (issue 35, 20)', () => {
    const d = (rel: string, title?: string): DocumentInfo => ({ id: 1, path: `/lib/${rel}`, rel, status: 'indexed', chunks: 3, ...(title !== undefined ? { title } : {}) });
    const cases: Array<[DocumentInfo, string]> = [
      [d('2024-04-17-offsite-planning.md', 'Offsite planning: Lisbon'), 'Offsite planning: Lisbon'],
      [d('2024-04-17-offsite-planning.md', '2024-04-17-offsite-planning'), 'offsite planning'], // a title that is the file name
      [d('2024_04_17 offsite planning.txt'), 'offsite planning'],
      [d('notes/tide-tables.md', 'tide-tables'), 'tide tables'],
      [d('report.docx', 'Quarterly report — harbour accounts'), 'Quarterly report — harbour accounts'],
      [d('main.go', 'main.go'), 'main'],
      [d('x.md', 'A title far too long to make a question of, running on and on well past sixty characters'), 'x'],
      [d('2024.md'), '2024'],
    ];
    for (const [doc, want] of cases) expect(topicFor(doc), doc.rel).toBe(want);
    expect(exampleQuestions([d('2024-04-17-offsite-planning.md', 'Offsite planning: Lisbon')])).toEqual(['What do my documents say about Offsite planning: Lisbon?']);
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
