// The empty chat: what the model and the library are ready for, what to do first, a few questions to try
// from the library's own documents, and the last chat to pick up again.

import { h } from '../dom';
import { fmtDate, fmtInt } from '../format';
import type { ChatSummary, DocumentInfo, Settings, Workspace } from '../transport/types';

export interface WelcomeInfo {
  workspace?: Workspace;
  settings?: Settings;
  docs: DocumentInfo[];
  chats: ChatSummary[];
}

export interface WelcomeActions {
  ask(question: string): void;
  openChat(id: number): void;
  goto(view: 'library' | 'models' | 'settings'): void;
}

/** "notes/tide-tables.md" → "tide tables". */
export function topicOf(path: string): string {
  const base = path.split(/[/\\]/).pop() ?? path;
  return base.replace(/\.[a-z0-9]+$/i, '').replace(/[-_.]+/g, ' ').replace(/\s+/g, ' ').trim();
}

/** A date or number at the start of a file name ("2024-04-17 offsite planning" → "offsite planning"). */
const LEADING_DATE = /^(\d{2,4}[ ._-]?){1,3}(?=[^\d ._-])/;

/**
 * What a document is about, in words a question uses: its title when it comes from its content (a Markdown
 * heading, a Word or web page title; not just its file name again), else its file name without a leading date.
 */
export function topicFor(d: DocumentInfo): string {
  const file = topicOf(d.rel || d.path);
  const title = (d.title ?? '').replace(/\s+/g, ' ').trim();
  const base = (d.rel || d.path).split(/[/\\]/).pop() ?? '';
  if (title && title.length <= 60 && title !== base && topicOf(title) !== file) return title;
  return file.replace(LEADING_DATE, '').trim() || file;
}

/** Up to n questions about indexed documents, spread over the list, one per topic. */
export function exampleQuestions(docs: DocumentInfo[], n = 3): string[] {
  const topics: string[] = [];
  for (const d of docs) {
    if (d.status !== 'indexed' || !(d.chunks > 0)) continue;
    const t = topicFor(d);
    if (t.length >= 3 && !/^\d+$/.test(t) && !topics.includes(t)) topics.push(t);
  }
  if (!topics.length) return [];
  const picks: string[] = [];
  for (let i = 0; i < n && i < topics.length; i++) picks.push(topics[Math.floor((i * topics.length) / Math.min(n, topics.length))]);
  return [...new Set(picks)].map((t) => `What do my documents say about ${t}?`);
}

function modelLine(s: Settings | undefined, act: WelcomeActions): HTMLElement {
  if (!s) return h('li', { class: 'muted', text: 'Model: unknown (settings not loaded).' });
  const name = (p: string) => p.split(/[/\\]/).pop() ?? p;
  if (!s.chat_model) {
    return h('li', { testid: 'welcome-model' }, 'No chat model chosen: answers quote the best passages. ',
      h('button', { type: 'button', class: 'link-btn', text: 'Choose one in Models', on: { click: () => act.goto('models') } }));
  }
  return h('li', { testid: 'welcome-model', text: `Chat model ${name(s.chat_model)}${s.embed_model ? ` · embeddings ${name(s.embed_model)}` : ' · keyword search only (no embedding model)'}` });
}

function libraryLine(ws: Workspace | undefined, act: WelcomeActions): HTMLElement {
  const go = h('button', { type: 'button', class: 'link-btn', text: 'Open the Library', on: { click: () => act.goto('library') } });
  if (!ws) return h('li', { testid: 'welcome-library' }, 'No workspace yet: create one and add a folder. ', go);
  if (!ws.folders?.length) return h('li', { testid: 'welcome-library' }, `${ws.name} has no folders yet: add one to start. `, go);
  return h('li', { testid: 'welcome-library', text: `${ws.name}: ${fmtInt(ws.documents)} documents, ${fmtInt(ws.chunks)} passages in ${fmtInt(ws.folders.length)} folder${ws.folders.length === 1 ? '' : 's'}${ws.indexing ? ' · indexing now' : ''}` });
}

export function renderWelcome(info: WelcomeInfo, act: WelcomeActions): HTMLElement {
  const examples = exampleQuestions(info.docs);
  const last = info.chats[0];
  return h('section', { class: 'welcome', testid: 'welcome' },
    h('h2', { text: 'Ask your library' }),
    h('ul', { class: 'welcome-status' }, libraryLine(info.workspace, act), modelLine(info.settings, act)),
    examples.length
      ? h('div', { class: 'welcome-examples' },
          h('h3', { text: 'Try' }),
          ...examples.map((q) => h('button', { type: 'button', class: 'btn example', testid: 'example-question', text: q, on: { click: () => act.ask(q) } })))
      : null,
    last
      ? h('p', { class: 'welcome-last' },
          h('button', { type: 'button', class: 'btn', testid: 'reopen-last', text: `Continue “${last.title || `Chat ${last.id}`}”`, on: { click: () => act.openChat(last.id) } }),
          h('span', { class: 'muted small', text: ` ${fmtDate(last.updated || last.created)}` }))
      : null,
  );
}
