// Chat view: question box, streaming answer with live stages, sources, citations, history.

import { clear, copyText, errMsg, h } from '../dom';
import { fmtDate, fmtInt, fmtMs, fmtNum, fmtRate } from '../format';
import { prefillRate, ttftCause } from '../latency/cause';
import { fallbackLabel, readWhileTyping } from '../latency/stats';
import { withUIMeasurement } from '../latency/waterfall';
import { renderMarkdown } from '../markdown';
import { lowSupport, SUPPORT_TITLE, supportText } from '../support';
import { DraftPrefetcher } from '../prefetch';
import { FollowScroll } from './follow';
import { ReadAhead } from './readahead';
import type { AskHandle, ChatMessage, ChatSummary, Source, StageEvent, Trace } from '../transport/types';
import { TTFTMeter, type TTFTResult } from '../ttft';
import type { Ctx } from './ctx';
import { sourceChip, locationText, scoresText } from './sources';
import { renderWelcome, type WelcomeInfo } from './welcome';
import { applyStage, fitText, initialStage, prefillFraction, prefillText, type StageState } from './stage';

const TTFT_SERVER_TITLE = 'Measured by Lore’s server: from the question’s arrival to its first token sent.';
const TTFT_UI_TITLE = 'Measured by this browser: from your click to the first token on screen. Another clock than the server’s: the two can differ by a few ms either way.';

/** How long after the last key the chat search asks the server. */
export const CHAT_SEARCH_DELAY_MS = 200;

function schedule(cb: () => void): void {
  if (document.visibilityState === 'hidden') setTimeout(cb, 16);
  else requestAnimationFrame(cb);
}

/** One question and its answer. */
class Turn {
  readonly el: HTMLElement;
  private readonly stageBox: HTMLElement;
  private readonly stageLabel: HTMLElement;
  private readonly prefillBox: HTMLElement;
  private readonly prefillBar: HTMLProgressElement;
  private readonly prefillLine: HTMLElement;
  private readonly fitLine: HTMLElement;
  private readonly sourcesBox: HTMLElement;
  private readonly sourcesList: HTMLOListElement;
  private readonly passage: HTMLElement;
  private readonly answer: HTMLElement;
  private readonly status: HTMLElement;
  private readonly metaLine: HTMLElement;
  private readonly causeLine: HTMLElement;
  private readonly actions: HTMLElement;
  private readonly reaskMain: HTMLButtonElement;

  raw = '';
  sources: Source[] = [];
  /** When a turn from history was answered ('' for a live one). */
  created = '';
  private readonly noSources: HTMLElement;
  private readonly noSourcesText: HTMLElement;
  private readonly noSourcesLink: HTMLButtonElement;
  /** The chat view, told when the turn grows (to keep its end in view) and when a passage is opened to read. */
  listener: { changed(): void; reading(): void } | undefined;
  requestId = '';
  trace: Trace | undefined;
  private stage: StageState = initialStage();
  private prefillStart = 0;
  private prefillTimer: ReturnType<typeof setInterval> | undefined;
  private renderQueued = false;
  private gotFirstToken = false;

  constructor(
    private readonly ctx: Ctx,
    readonly question: string,
    private readonly onRetry: (q: string, route?: 'main') => void,
    /** The last measured prefill speed (tokens/ms, 0 unknown), for an estimate when the server has none. */
    private readonly prefillRate: () => number = () => 0,
  ) {
    this.stageLabel = h('span', { class: 'stage-label', testid: 'answer-stage', text: this.stage.label });
    this.prefillBar = h('progress', { class: 'prefill-bar', attrs: { max: 1, value: 0 } });
    this.prefillLine = h('span', { class: 'prefill-line', testid: 'prefill-text' });
    this.prefillBox = h('div', { class: 'prefill', testid: 'prefill-progress', hidden: true }, this.prefillBar, this.prefillLine);
    this.fitLine = h('span', { class: 'fit-line', testid: 'answer-fit', hidden: true });
    this.stageBox = h(
      'div',
      { class: 'placeholder', testid: 'answer-placeholder', role: 'status', attrs: { 'aria-live': 'polite' } },
      h('span', { class: 'spinner', attrs: { 'aria-hidden': 'true' } }),
      this.stageLabel,
      this.fitLine,
      this.prefillBox,
    );
    this.sourcesList = h('ol', { class: 'sources-list' });
    this.sourcesBox = h('details', { class: 'sources', testid: 'sources', hidden: true, attrs: { open: true } },
      h('summary', { text: 'Sources' }), this.sourcesList);
    this.noSourcesText = h('span', { testid: 'no-sources-text' });
    this.noSourcesLink = h('button', { type: 'button', class: 'link-btn', testid: 'no-sources-library', on: { click: () => this.ctx.goto?.('library') } });
    this.noSources = h('div', { class: 'no-sources', testid: 'no-sources', role: 'note', hidden: true }, this.noSourcesText, ' ', this.noSourcesLink);
    this.passage = h('div', { class: 'passage', testid: 'source-passage', hidden: true });
    this.answer = h('div', { class: 'answer markdown', testid: 'answer' });
    this.answer.addEventListener('click', (ev) => {
      const a = (ev.target as Element | null)?.closest?.('a.cite');
      if (!a) return;
      ev.preventDefault();
      this.openSource(parseInt(a.getAttribute('data-cite') ?? '0', 10));
    });
    this.status = h('div', { class: 'turn-status', testid: 'answer-error', hidden: true });
    this.metaLine = h('span', { class: 'turn-meta', testid: 'answer-meta' });
    this.causeLine = h('div', { class: 'turn-cause', testid: 'answer-cause', hidden: true });
    this.reaskMain = h('button', { type: 'button', class: 'btn small', testid: 'reask-main', text: 'Ask the main model', hidden: true,
      title: 'The fast model answered: ask the same question again with the main chat model', on: { click: () => this.onRetry(this.question, 'main') } });
    this.actions = h('div', { class: 'turn-actions', hidden: true },
      h('button', { type: 'button', class: 'btn small', testid: 'copy', text: 'Copy', on: { click: (e) => this.copy(e.currentTarget as HTMLButtonElement) } }),
      h('button', { type: 'button', class: 'btn small', testid: 'retry', text: 'Retry', on: { click: () => this.onRetry(this.question) } }),
      this.reaskMain,
      h('button', { type: 'button', class: 'btn small', testid: 'show-latency', text: 'Latency', on: { click: () => this.showLatency() } }),
      this.metaLine,
    );
    this.el = h('article', { class: 'turn', testid: 'turn' },
      h('div', { class: 'msg user', testid: 'question', text: question }),
      h('div', { class: 'msg assistant' }, this.stageBox, this.noSources, this.sourcesBox, this.passage, this.answer, this.status, this.actions, this.causeLine),
    );
  }

  /**
   * A finished message from history, as it was shown live: its sources (chips and citations), the meta line from
   * its stored trace (TTFT, on screen, tokens/s…) with its date, its Latency link, and "Stopped." for one the user
   * stopped.
   */
  static fromHistory(ctx: Ctx, q: string, a: ChatMessage | undefined, onRetry: (q: string, route?: 'main') => void): Turn {
    const t = new Turn(ctx, q, onRetry);
    t.stageBox.hidden = true;
    if (a) {
      t.raw = a.content;
      t.requestId = a.request_id ?? '';
      t.created = a.created ?? '';
      t.trace = a.trace && typeof a.trace === 'object' ? a.trace : undefined;
      t.onSources(Array.isArray(a.sources) ? a.sources : []);
      if (!a.content.trim()) t.noSources.hidden = true; // it failed: no answer to label
      t.render();
      t.updateMeta();
      if (a.stopped) t.markStopped();
    }
    t.actions.hidden = false;
    t.el.classList.add('done');
    return t;
  }

  onStage(ev: StageEvent): void {
    this.stage = applyStage(this.stage, ev);
    if (ev.name === 'prompt_assemble' && ev.state === 'done') this.showFit();
    if (this.gotFirstToken) return;
    this.stageLabel.textContent = this.stage.label;
    this.stageBox.setAttribute('data-stage', this.stage.stage);
    let p = this.stage.prefill;
    // The first question after a start has no server estimate yet: use the speed of the last answer seen.
    if (p && !(p.expected_ms > 0) && this.prefillRate() > 0) p = { ...p, expected_ms: p.eval_tokens / this.prefillRate() };
    if (ev.name === 'prefill' && ev.state === 'start' && p) {
      this.prefillBox.hidden = false;
      this.prefillStart = performance.now();
      this.prefillLine.textContent = prefillText(p);
      this.prefillBar.value = 0;
      this.stopPrefillTimer();
      const expected = p.expected_ms;
      this.prefillTimer = setInterval(() => {
        this.prefillBar.value = prefillFraction(performance.now() - this.prefillStart, expected, false);
      }, 100);
    }
    if (ev.name === 'prefill' && ev.state === 'done' && p) {
      this.stopPrefillTimer();
      this.prefillBar.value = 1;
      this.prefillLine.textContent = prefillText(p, this.stage.prefillDoneMs);
    }
    this.listener?.changed();
  }

  onSources(src: Source[]): void {
    this.sources = src;
    clear(this.sourcesList);
    for (const s of src) this.sourcesList.append(sourceChip(s, (n) => this.openSource(n)));
    this.sourcesBox.hidden = src.length === 0;
    this.showNoSources(src.length === 0);
    this.showFit();
    if (this.raw) this.render();
    this.listener?.changed();
  }

  /**
   * An answer without sources is the model's alone: said above it in plain words, with why (nothing indexed in
   * the workspace, or nothing in it matched) and the way to the Library.
   */
  private showNoSources(none: boolean): void {
    this.noSources.hidden = !none;
    if (!none) return;
    const ws = this.ctx.currentWorkspace?.();
    const name = ws?.name ?? this.ctx.workspace();
    const empty = ws !== undefined && !(ws.documents > 0);
    this.noSourcesText.textContent = empty
      ? `No sources: model only. Nothing is indexed in “${name}” yet, so this answer does not come from your documents.`
      : 'No sources: model only. Nothing in your library matched the question, so this answer does not come from your documents.';
    this.noSourcesLink.hidden = !this.ctx.goto;
    this.noSourcesLink.textContent = empty ? 'Add a folder in the Library' : 'Open the Library';
  }

  /** "4 of 20 candidates fit the prompt" under the stage label and on the sources' summary. */
  private showFit(): void {
    const fit = fitText(this.stage);
    this.fitLine.textContent = fit;
    this.fitLine.hidden = !fit;
    this.sourcesBox.querySelector('summary')!.textContent = fit ? `Sources · ${fit}` : `Sources (${this.sources.length})`;
  }

  /** Returns true when this token was the first visible one (it is in the DOM on return). */
  onToken(text: string): boolean {
    this.raw += text;
    if (!this.gotFirstToken && text.trim()) {
      this.gotFirstToken = true;
      this.stopPrefillTimer();
      this.stageBox.hidden = true;
      this.render(); // synchronously: the TTFT measurement waits for the paint after this
      return true;
    }
    if (this.gotFirstToken && !this.renderQueued) {
      this.renderQueued = true;
      schedule(() => {
        this.renderQueued = false;
        this.render();
      });
    }
    return false;
  }

  render(): void {
    const cites = new Set(this.sources.map((s) => s.n));
    this.answer.replaceChildren(renderMarkdown(this.raw, { citations: cites }));
    this.listener?.changed();
  }

  finish(trace: Trace | undefined): void {
    this.stopPrefillTimer();
    this.stageBox.hidden = true;
    this.trace = trace;
    this.render();
    this.actions.hidden = false;
    this.el.classList.add('done');
    if (trace) this.updateMeta();
    if (!this.raw.trim() && !this.status.textContent) this.fail('The model returned an empty answer.');
    this.listener?.changed(); // the buttons and the meta line below the answer
  }

  updateMeta(): void {
    const s = this.trace?.stages ?? {};
    const parts: Array<string | HTMLElement> = [];
    const fast = this.trace?.route_role === 'fast';
    if (fast) parts.push(`fast model ${this.trace?.route ?? ''}`.trim());
    this.reaskMain.hidden = !fast;
    this.metaLine.title = this.trace?.route_reason ?? '';
    // Two clocks: the server's from the question's arrival to its first token sent, this browser's from the click
    // to the first token painted. Each is named, so one a few ms below the other reads as what it is.
    if (s.ttft_ms !== undefined) parts.push(h('span', { testid: 'answer-ttft', title: TTFT_SERVER_TITLE, text: `TTFT ${fmtMs(s.ttft_ms)} (server)` }));
    if (s.ui_ttft_ms !== undefined) parts.push(h('span', { testid: 'answer-ui-ttft', title: TTFT_UI_TITLE, text: `on screen ${fmtMs(s.ui_ttft_ms)} (browser)` }));
    if (this.trace?.decode_tok_s !== undefined) parts.push(fmtRate(this.trace.decode_tok_s, 'tok/s'));
    const support = supportText(this.trace);
    if (support) parts.push(h('span', { class: `support${lowSupport(this.trace) ? ' low' : ''}`, testid: 'answer-support', title: SUPPORT_TITLE, text: support }));
    if (readWhileTyping(this.trace)) parts.push(`${fmtInt(this.trace?.prefetched_tokens)} tokens prefilled while you typed`);
    if (this.trace?.late_passages) parts.push(`${fmtInt(this.trace.late_passages)} passages left out to answer fast`);
    if (this.trace?.cut) parts.push(`best passage cut by ${fmtInt(this.trace.cut.tokens)} tokens to answer fast`);
    if (this.trace?.stitched_passages) parts.push(`${fmtInt(this.trace.stitched_passages)} passages from saved KV (approximate)`);
    if (this.trace?.fallback_level) {
      // In words, with the server's reason in its title: a bare "fallback 2" says nothing.
      parts.push(h('span', { class: 'fallback', testid: 'answer-fallback', title: this.trace.fallback_reason ?? '',
        text: `fallback ${fallbackLabel(fmtNum(this.trace.fallback_level, 0))}` }));
    }
    if (this.created) parts.push(fmtDate(this.created));
    this.metaLine.replaceChildren(...parts.flatMap((p, i) => (i ? [' · ', p] : [p])));
    // Only when something would help: a fast answer's line would only say the meta line again.
    const c = this.trace ? ttftCause(this.trace) : undefined;
    const cause = c?.knob ? `${c.text} — ${c.knob}` : '';
    this.causeLine.textContent = cause;
    this.causeLine.hidden = !cause;
  }

  setUIMeasurement(r: TTFTResult): void {
    if (this.trace) {
      this.trace = withUIMeasurement(this.trace, r.uiTTFTms, r.paintMs);
      this.updateMeta();
    }
  }

  fail(message: string): void {
    this.stopPrefillTimer();
    this.stageBox.hidden = true;
    this.status.hidden = false;
    this.status.textContent = message;
    this.status.classList.add('error');
    this.actions.hidden = false;
    this.el.classList.add('done');
    this.listener?.changed();
  }

  stopped(): void {
    this.stopPrefillTimer();
    this.stageBox.hidden = true;
    this.markStopped();
    this.actions.hidden = false;
    this.el.classList.add('done');
    this.render();
  }

  /** "Stopped." under the answer: what came before the user stopped it. */
  private markStopped(): void {
    this.status.hidden = false;
    this.status.textContent = 'Stopped.';
    this.status.classList.remove('error');
    this.el.classList.add('stopped');
  }

  private stopPrefillTimer(): void {
    if (this.prefillTimer !== undefined) clearInterval(this.prefillTimer);
    this.prefillTimer = undefined;
  }

  private async copy(btn: HTMLButtonElement): Promise<void> {
    try {
      await copyText(this.raw);
      btn.textContent = 'Copied';
      setTimeout(() => (btn.textContent = 'Copy'), 1500);
    } catch (e) {
      this.ctx.notify(`Copy failed: ${errMsg(e)}`);
    }
  }

  private showLatency(): void {
    if (this.trace) this.ctx.showLatency(this.trace);
    else if (this.requestId) this.ctx.showLatency(this.requestId);
    else this.ctx.notify('No latency trace for this answer yet.');
  }

  openSource(n: number): void {
    const s = this.sources.find((x) => x.n === n);
    if (!s) return;
    for (const li of Array.from(this.sourcesList.children)) li.classList.toggle('active', li.getAttribute('data-n') === String(n));
    const text = h('pre', { class: 'passage-text', testid: 'passage-text', text: s.text });
    const where = [s.path || s.document, locationText(s)].filter(Boolean).join(' · ');
    const why = scoresText(s);
    this.passage.replaceChildren(
      h('div', { class: 'passage-head' },
        h('strong', { text: `[${n}] ${s.document}` }),
        s.heading ? h('span', { class: 'passage-heading', text: s.heading }) : null,
        h('span', { class: 'passage-where', text: where }),
        why ? h('span', { class: 'passage-scores', testid: 'passage-scores', text: why }) : null,
        this.ctx.t.desktop
          ? h('button', { type: 'button', class: 'btn small', testid: 'open-source', text: 'Open file', on: { click: () => this.openFile(s.chunk_id) } })
          : null,
        h('button', { type: 'button', class: 'btn small', testid: 'close-passage', text: 'Close', on: { click: () => (this.passage.hidden = true) } }),
      ),
      text,
    );
    this.passage.hidden = false;
    this.listener?.reading(); // the user is reading: a streaming answer must not pull the passage away
    this.passage.scrollIntoView?.({ block: 'nearest' });
    // The sources event may carry a shortened passage; the chunk endpoint has the full one.
    this.ctx.t.chunk(s.chunk_id).then(
      (c) => {
        if (c && typeof c.text === 'string' && c.text.length > s.text.length) text.textContent = c.text;
      },
      () => undefined,
    );
  }

  private async openFile(chunkID: number): Promise<void> {
    try {
      await this.ctx.t.openSource(chunkID);
    } catch (e) {
      this.ctx.notify(`Cannot open the file: ${errMsg(e)}`);
    }
  }
}

export class ChatView {
  readonly el: HTMLElement;
  private readonly list: HTMLUListElement;
  private readonly search: HTMLInputElement;
  private readonly messages: HTMLElement;
  private readonly follow: FollowScroll;
  private readonly input: HTMLTextAreaElement;
  private readonly submitBtn: HTMLButtonElement;
  private readonly stopBtn: HTMLButtonElement;
  private readonly hint: HTMLElement;
  private chatId: number | undefined;
  private running: { turn: Turn; handle: AskHandle; isNew: boolean } | undefined;
  private chats: ChatSummary[] = [];
  /** The server's answer to the search box's words (undefined until it comes). */
  private found: ChatSummary[] | undefined;
  private searchTimer: ReturnType<typeof setTimeout> | undefined;
  private searchSeq = 0;
  private readonly prefetcher: DraftPrefetcher;
  private readonly readAhead: ReadAhead;
  /** Prefill speed (tokens/ms) of the latest answer seen, for a first estimate before the server has one. */
  private rate = 0;
  /** What the empty chat shows (loaded per workspace). */
  private welcome: WelcomeInfo = { docs: [], chats: [] };

  constructor(private readonly ctx: Ctx) {
    this.prefetcher = new DraftPrefetcher((draft) => {
      const ws = this.ctx.workspace();
      if (!ws || this.busy) return;
      const req = { draft, workspace: ws, ...(this.chatId !== undefined ? { chat_id: this.chatId } : {}) };
      // Speculative: a refusal costs nothing.
      this.ctx.t.prefetch(req).then(() => {
        if (!this.busy && this.input.value.trim()) this.readAhead.follow();
      }, () => undefined);
    });
    this.readAhead = new ReadAhead((onStatus, onEnd) => this.ctx.t.watchReadAhead(onStatus, onEnd));
    this.list = h('ul', { class: 'chat-list', testid: 'chat-list' });
    this.search = h('input', { type: 'search', class: 'chat-search', testid: 'chat-search', placeholder: 'Search chats', attrs: { 'aria-label': 'Search chats' } });
    this.search.addEventListener('input', () => this.searchInput());
    this.messages = h('div', { class: 'messages', testid: 'messages', attrs: { 'aria-live': 'polite' } });
    this.follow = new FollowScroll(this.messages);
    this.input = h('textarea', {
      class: 'question-input',
      testid: 'question-input',
      placeholder: 'Ask about your documents…',
      attrs: { rows: 3, 'aria-label': 'Question' },
    });
    this.input.addEventListener('input', () => {
      this.prefetcher.input(this.input.value);
      if (!this.input.value.trim()) this.readAhead.clear();
    });
    this.input.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        this.submit();
      }
    });
    this.submitBtn = h('button', { type: 'submit', class: 'btn primary', testid: 'submit', text: 'Ask' });
    this.stopBtn = h('button', { type: 'button', class: 'btn danger', testid: 'stop', text: 'Stop', hidden: true, on: { click: () => this.stop() } });
    this.hint = h('div', { class: 'hint', testid: 'chat-hint', hidden: true });
    const form = h('form', { class: 'ask-form', testid: 'ask-form' }, this.input, h('div', { class: 'ask-buttons' }, this.submitBtn, this.stopBtn));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.submit();
    });
    this.el = h('div', { class: 'view chat-view', testid: 'chat-view' },
      h('aside', { class: 'sidebar' },
        h('button', { type: 'button', class: 'btn primary wide', testid: 'new-chat', text: 'New chat', on: { click: () => this.newChat() } }),
        h('h3', { text: 'History' }),
        this.search,
        this.list,
      ),
      h('section', { class: 'chat-main' }, h('div', { class: 'messages-wrap' }, this.messages, this.follow.button), this.hint, form, this.readAhead.el),
    );
  }

  get busy(): boolean {
    return this.running !== undefined;
  }

  /** Workspace changed: new chat, reload history. */
  async reset(): Promise<void> {
    this.stop();
    this.newChat();
    void this.learnRate();
    this.welcome = { docs: [], chats: [] };
    await this.loadChats();
    await this.loadWelcome();
  }

  /** Settings and documents for the empty chat's status and example questions. */
  private async loadWelcome(): Promise<void> {
    const ws = this.ctx.workspace();
    const get = async <T>(f: () => Promise<T>): Promise<T | undefined> => {
      try {
        return await f();
      } catch {
        return undefined;
      }
    };
    const [settings, docs] = await Promise.all([get(() => this.ctx.t.settings()), ws ? get(() => this.ctx.t.documents(ws)) : undefined]);
    if (ws !== this.ctx.workspace()) return;
    this.welcome = { settings, docs: docs ?? [], chats: this.chats };
    this.showWelcome();
  }

  /** The empty chat's welcome, while no question is on screen. */
  private showWelcome(): void {
    if (this.messages.querySelector('[data-testid="turn"]')) return;
    if (this.ctx.reachable?.() === false) return void this.messages.replaceChildren(); // the banner says why
    const info = { ...this.welcome, workspace: this.ctx.currentWorkspace?.(), chats: this.chats };
    this.messages.replaceChildren(renderWelcome(info, {
      ask: (q) => this.ask(q),
      openChat: (id) => void this.openChat(id),
      goto: (v) => this.ctx.goto?.(v),
    }));
  }

  /** The prefill speed of the most recent stored answers (once; later answers update it). */
  private async learnRate(): Promise<void> {
    if (this.rate) return;
    try {
      for (const t of (await this.ctx.t.traces(10)) ?? []) {
        const r = prefillRate(t);
        if (r) {
          this.rate = r;
          return;
        }
      }
    } catch {
      /* no traces yet: the server's estimate will do */
    }
  }

  newChat(): void {
    if (this.running) this.stop();
    this.readAhead.clear(); // read for the other chat
    this.chatId = undefined;
    clear(this.messages);
    this.follow.jump();
    this.showWelcome();
    this.markActive();
    this.updateHint();
    this.input.focus();
  }

  updateHint(): void {
    if (this.messages.querySelector('[data-testid="welcome"]')) this.showWelcome(); // counts may have changed
    const ws = this.ctx.workspace();
    // Without an answer from the server the banner says what to do; advice to create a workspace would be wrong.
    const advise = !ws && this.ctx.reachable?.() !== false;
    this.hint.hidden = !advise;
    this.hint.textContent = advise ? 'Create a workspace and add a folder in the Library to start asking.' : '';
    this.submitBtn.disabled = !ws || this.busy;
  }

  async loadChats(): Promise<void> {
    const ws = this.ctx.workspace();
    clear(this.list);
    if (!ws) return;
    try {
      this.chats = (await this.ctx.t.chats(ws)) ?? [];
    } catch (e) {
      this.ctx.notify(`Cannot load the chat history: ${errMsg(e)}`);
      return;
    }
    if (this.search.value.trim()) void this.searchChats();
    this.renderChats();
  }

  /**
   * The search box changed: titles are filtered at once, and a moment after typing stops the server searches the
   * turns' text too (a word said inside a chat finds it).
   */
  private searchInput(): void {
    this.found = undefined;
    clearTimeout(this.searchTimer);
    if (this.search.value.trim()) this.searchTimer = setTimeout(() => void this.searchChats(), CHAT_SEARCH_DELAY_MS);
    this.renderChats();
  }

  private async searchChats(): Promise<void> {
    const ws = this.ctx.workspace();
    const q = this.search.value.trim();
    if (!ws || !q) return;
    const seq = ++this.searchSeq;
    let found: ChatSummary[];
    try {
      found = (await this.ctx.t.searchChats(ws, q)) ?? [];
    } catch {
      return; // the title filter stays
    }
    if (seq !== this.searchSeq || ws !== this.ctx.workspace() || q !== this.search.value.trim()) return; // typed on
    this.found = found;
    this.renderChats();
  }

  /** The history list, filtered by the search box; each chat with its last date (and, found by a turn, where). */
  private renderChats(): void {
    clear(this.list);
    const q = this.search.value.trim().toLowerCase();
    const shown = !q ? this.chats : (this.found ?? this.chats.filter((c) => (c.title || '').toLowerCase().includes(q)));
    for (const c of shown) {
      this.list.append(
        h('li', {},
          h('button', {
            type: 'button', class: 'chat-item', testid: 'chat-item', title: c.title || `Chat ${c.id}`,
            attrs: { 'data-chat-id': c.id },
            on: { click: () => void this.openChat(c.id) },
          },
            h('span', { class: 'chat-title', text: c.title || `Chat ${c.id}` }),
            c.snippet ? h('span', { class: 'chat-snippet', testid: 'chat-snippet', text: c.snippet }) : null,
            !c.snippet && c.last && (c.questions ?? 0) > 1 && c.last !== c.title
              ? h('span', { class: 'chat-snippet', testid: 'chat-last', text: `then: ${c.last}` })
              : null,
            h('span', { class: 'chat-date', testid: 'chat-date' }, fmtDate(c.updated || c.created),
              (c.questions ?? 0) > 1 ? h('span', { class: 'chat-count', text: ` · ${fmtInt(c.questions)} questions` }) : null),
          ),
        ),
      );
    }
    if (!shown.length) this.list.append(h('li', { class: 'muted small', text: q ? 'No chat matches.' : 'No chats yet.' }));
    this.search.hidden = this.chats.length < 2 && !q;
    this.markActive();
  }

  private markActive(): void {
    for (const b of Array.from(this.list.querySelectorAll('.chat-item'))) {
      b.classList.toggle('active', b.getAttribute('data-chat-id') === String(this.chatId));
    }
  }

  async openChat(id: number): Promise<void> {
    if (this.running) this.stop();
    this.readAhead.clear(); // read for the other chat
    try {
      const chat = await this.ctx.t.chat(id);
      this.chatId = chat.id ?? id;
      clear(this.messages);
      const msgs = chat.messages ?? [];
      for (let i = 0; i < msgs.length; i++) {
        if (msgs[i].role !== 'user') continue;
        const a = msgs[i + 1]?.role === 'assistant' ? msgs[i + 1] : undefined;
        this.messages.append(Turn.fromHistory(this.ctx, msgs[i].content, a, (q, r) => this.ask(q, r)).el);
      }
      this.markActive();
      this.follow.jump();
    } catch (e) {
      this.ctx.notify(`Cannot open the chat: ${errMsg(e)}`);
    }
  }

  private submit(): void {
    const q = this.input.value.trim();
    if (!q || this.busy) return;
    this.prefetcher.reset();
    this.readAhead.clear();
    this.input.value = '';
    this.ask(q);
  }

  ask(question: string, route?: 'main'): void {
    const ws = this.ctx.workspace();
    if (!ws || this.busy) return;
    this.readAhead.clear(); // whatever was read ahead goes to this question (or is no longer for the box's draft)
    const meter = new TTFTMeter();
    meter.start(); // submit time: before anything else happens
    const turn = new Turn(this.ctx, question, (q, r) => this.ask(q, r), () => this.rate);
    this.messages.querySelector('[data-testid="welcome"]')?.remove();
    this.messages.append(turn.el);
    // A new question is followed to its answer's end, unless the user scrolls up to read.
    turn.listener = { changed: () => this.follow.changed(), reading: () => this.follow.hold() };
    this.follow.jump();
    const isNew = this.chatId === undefined;
    let measured: TTFTResult | undefined;
    const report = () => {
      if (measured && turn.requestId) {
        this.ctx.t.reportUITTFT(turn.requestId, measured.uiTTFTms, measured.paintMs).catch(() => undefined);
      }
    };

    const handle = this.ctx.t.ask(
      { question, workspace: ws, ...(this.chatId !== undefined ? { chat_id: this.chatId } : {}), ...(route ? { route } : {}) },
      {
        onTrace: (t) => {
          turn.requestId = t.request_id;
          if (typeof t.chat_id === 'number' && t.chat_id > 0) this.chatId = t.chat_id;
          report();
        },
        onStage: (s) => turn.onStage(s),
        onSources: (s) => turn.onSources(s),
        onToken: (text) => {
          const arrived = performance.now();
          if (turn.onToken(text)) {
            meter.token(text, arrived, (r) => {
              measured = r;
              turn.setUIMeasurement(r);
              if (turn.trace) this.ctx.traceFinished(turn.trace);
              report();
            });
          }
        },
        onDone: (trace) => {
          const merged = measured ? withUIMeasurement(trace, measured.uiTTFTms, measured.paintMs) : trace;
          if (!turn.requestId && trace?.request_id) turn.requestId = trace.request_id;
          if (typeof trace?.chat_id === 'number' && trace.chat_id > 0) this.chatId = trace.chat_id;
          turn.finish(merged);
          if (prefillRate(merged)) this.rate = prefillRate(merged);
          this.ctx.traceFinished(merged);
          this.end();
          if (isNew) void this.loadChats();
        },
        onError: (msg) => {
          turn.fail(msg);
          this.end();
          if (isNew) void this.loadChats();
        },
      },
    );
    this.running = { turn, handle, isNew };
    this.stopBtn.hidden = false;
    this.submitBtn.disabled = true;
  }

  /**
   * Stops the answer. The server keeps it, marked stopped, in the chat the first event named: a retry or a
   * follow-up continues that chat, and a chat the question started is listed now.
   */
  stop(): void {
    if (!this.running) return;
    const { turn, handle, isNew } = this.running;
    handle.cancel();
    turn.stopped();
    this.end();
    if (isNew && this.chatId !== undefined) void this.loadChats();
  }

  private end(): void {
    this.running = undefined;
    this.stopBtn.hidden = true;
    this.updateHint();
    this.input.focus();
  }
}
