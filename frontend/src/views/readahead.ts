// The line under the chat box that says what the drafts have read ahead (GET /api/prefetch), so the user sees
// that Enter will answer from a prompt already read.

import { h } from '../dom';
import { fmtInt } from '../format';
import type { PrefetchStatus } from '../transport/types';

/** How often a draft still being read is asked about. */
export const POLL_MS = 300;

/** The line for a status; '' hides it. */
export function readAheadText(st: PrefetchStatus): string {
  const n = (k: number) => `${fmtInt(k)} passage${k === 1 ? '' : 's'}`;
  switch (st.state) {
    case 'reading':
      return `Reading ahead: ${fmtInt(st.read)} of ${n(st.passages)}…`;
    case 'ready':
      return st.passages ? `Read ahead: ${n(st.passages)}, ${fmtInt(st.tokens)} tokens` : '';
    case 'stopped':
      return st.read ? `Read ahead: ${fmtInt(st.read)} of ${n(st.passages)}` : '';
    default:
      return '';
  }
}

export class ReadAhead {
  readonly el: HTMLElement;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Bumped by every follow and clear, so a late answer of an older poll is dropped. */
  private gen = 0;

  constructor(private readonly status: () => Promise<PrefetchStatus>) {
    this.el = h('div', { class: 'read-ahead', testid: 'read-ahead', hidden: true });
  }

  /** A draft went out: show its reading until it is done. */
  follow(): void {
    const gen = this.stop();
    const poll = async (): Promise<void> => {
      const st = await this.status().catch((): PrefetchStatus => ({ state: 'none', passages: 0, read: 0, tokens: 0, read_tokens: 0 }));
      if (gen !== this.gen) return;
      this.el.dataset.state = st.state;
      this.el.textContent = readAheadText(st);
      this.el.hidden = !this.el.textContent;
      if (st.state === 'reading') this.timer = setTimeout(() => void poll(), POLL_MS);
    };
    void poll();
  }

  /** The question was sent or the draft emptied: nothing to show. */
  clear(): void {
    this.stop();
    this.el.hidden = true;
    this.el.textContent = '';
    delete this.el.dataset.state;
  }

  private stop(): number {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    return ++this.gen;
  }
}
