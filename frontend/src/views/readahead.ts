// The line under the chat box that says what the drafts have read ahead (pushed by the server: GET
// /api/prefetch/events, the desktop's prefetch event), so the user sees that Enter will answer from a prompt
// already read. Within one question the line only moves forward (a newer draft starting over does not take it
// back), and it settles when nothing more happens.

import { h } from '../dom';
import { fmtInt } from '../format';
import type { PrefetchStatus } from '../transport/types';

/** Reading with no news for this long (typing stopped, nothing more read): the line settles, without "…". */
export const SETTLE_MS = 2000;
/** What the line is for, on hover. */
export const READ_AHEAD_TITLE =
  'While you type, Lore finds the passages for your question and reads them into the model, so that the answer starts sooner after Enter.';

/** What the line shows: a status, or the furthest one seen for this question. */
export type ReadAheadShown = Pick<PrefetchStatus, 'state' | 'read' | 'passages' | 'tokens'>;

/** The line for a status as [what it is for, how far]; undefined hides it. */
export function readAheadParts(st: ReadAheadShown): [string, string] | undefined {
  const n = (k: number) => `${fmtInt(k)} passage${k === 1 ? '' : 's'}`;
  switch (st.state) {
    case 'reading':
      return ['Preparing the answer while you type: ', `${fmtInt(st.read)} of ${n(st.passages)} read…`];
    case 'ready':
      return st.passages ? ['Prepared while you type: ', `${n(st.passages)}, ${fmtInt(st.tokens)} tokens read ahead`] : undefined;
    case 'stopped':
      return st.read ? ['Prepared while you type: ', `${fmtInt(st.read)} of ${n(st.passages)} read ahead`] : undefined;
    default:
      return undefined;
  }
}

/** The line for a status; '' hides it. */
export function readAheadText(st: ReadAheadShown): string {
  return readAheadParts(st)?.join('') ?? '';
}

/**
 * The next line of one question: a status that has read fewer passages than the line shows (a newer draft
 * starting over, "3 of 6" → "0 of 5") keeps the line as it is (settled, once that status is no longer
 * reading); one that has read as many or more replaces it. A status with nothing for the next question
 * settles what is shown.
 */
export function nextShown(prev: ReadAheadShown | undefined, st: PrefetchStatus): ReadAheadShown | undefined {
  const known = st.state === 'reading' || st.state === 'ready' || st.state === 'stopped';
  const cur: ReadAheadShown = { state: st.state, read: st.read, passages: st.passages, tokens: st.tokens };
  if (!prev) return known ? cur : undefined;
  if (known && st.read >= prev.read) return cur;
  return prev.state === 'reading' && st.state !== 'reading' ? { ...prev, state: 'stopped' } : prev;
}

function same(a: ReadAheadShown | undefined, b: ReadAheadShown | undefined): boolean {
  return a === b || (!!a && !!b && a.state === b.state && a.read === b.read && a.passages === b.passages && a.tokens === b.tokens);
}

/** Follows the read-ahead status (the status now, then each change; onEnd: it stopped); returns the unsubscribe function. */
export type WatchReadAhead = (onStatus: (st: PrefetchStatus) => void, onEnd: () => void) => () => void;

export class ReadAhead {
  readonly el: HTMLElement;
  /** Set while a question is being typed: the status is followed from its first draft until it is sent. */
  private unwatch: (() => void) | undefined;
  private settle: ReturnType<typeof setTimeout> | undefined;
  /** Bumped by each subscription and by clear. */
  private gen = 0;
  /** This question's line so far (cleared when the question is sent or the box emptied). */
  private shown: ReadAheadShown | undefined;

  constructor(private readonly watch: WatchReadAhead) {
    this.el = h('div', { class: 'read-ahead', testid: 'read-ahead', hidden: true, title: READ_AHEAD_TITLE });
  }

  /** A draft went out: follow what is read for this question until it is sent. */
  follow(): void {
    if (this.unwatch) {
      this.show(); // a new draft is news: the line is live again
      return;
    }
    // Only this subscription's statuses count: a late one of an earlier question's is dropped.
    const gen = ++this.gen;
    this.unwatch = this.watch(
      (st) => {
        if (gen !== this.gen) return;
        const next = nextShown(this.shown, st);
        if (same(next, this.shown)) return;
        this.shown = next;
        this.show();
      },
      () => {
        // The stream ended (refused, the server restarted): the next draft subscribes again.
        if (gen === this.gen) this.unwatch = undefined;
      },
    );
  }

  /** The question was sent or the draft emptied: nothing to show, and the next question starts afresh. */
  clear(): void {
    this.gen++;
    this.unwatch?.();
    this.unwatch = undefined;
    clearTimeout(this.settle);
    this.shown = undefined;
    this.render(undefined);
  }

  /** Renders the line as live, and settles it (no "…") if nothing changes for SETTLE_MS. */
  private show(): void {
    clearTimeout(this.settle);
    this.render(this.shown);
    if (this.shown?.state !== 'reading') return;
    const settled = this.shown;
    this.settle = setTimeout(() => {
      if (this.shown === settled) this.render({ ...settled, state: 'stopped' });
    }, SETTLE_MS);
  }

  private render(view: ReadAheadShown | undefined): void {
    const parts = view ? readAheadParts(view) : undefined;
    // On a narrow window the purpose gives way (cut with "…"); how far it got stays whole.
    this.el.replaceChildren(...(parts ? [h('span', { class: 'ra-what', text: parts[0] }), h('span', { class: 'ra-count', text: parts[1] })] : []));
    this.el.hidden = !parts;
    if (view && parts) this.el.dataset.state = view.state;
    else delete this.el.dataset.state;
  }
}
