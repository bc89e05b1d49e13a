// The chat's scroll follows a streaming answer to its end, unless the user scrolled up to read: then it stays
// where they put it and a "Jump to latest" button brings them back (and following resumes at the bottom).

import { h } from '../dom';

/** How close to the bottom (px) still counts as "at the latest". */
export const NEAR_BOTTOM_PX = 32;

/** The scroll metrics the logic needs (an element, or a stand-in in tests). */
export interface Scroller {
  scrollTop: number;
  readonly scrollHeight: number;
  readonly clientHeight: number;
}

export function nearBottom(el: Scroller, slack = NEAR_BOTTOM_PX): boolean {
  return el.scrollHeight - el.scrollTop - el.clientHeight <= slack;
}

export class FollowScroll {
  /** The control shown while the user is away from the latest text. */
  readonly button: HTMLButtonElement;
  private following = true;
  /** scrollTop at the last scroll event (or the last scroll made here): a smaller one is the user going up. */
  private lastTop = 0;

  constructor(
    private readonly el: Scroller & Partial<Pick<HTMLElement, 'addEventListener'>>,
    observe: ((el: unknown, cb: () => void) => void) | undefined = resizeObserver,
  ) {
    this.button = h('button', {
      type: 'button', class: 'btn small jump-latest', testid: 'jump-latest', text: 'Jump to latest ↓', hidden: true,
      on: { click: () => this.jump() },
    });
    el.addEventListener?.('scroll', () => this.onScroll());
    // A wheel turned up is the user's intent at once, before its scroll event (the next frame) arrives.
    el.addEventListener?.('wheel', (ev) => {
      if ((ev as WheelEvent).deltaY < 0) this.hold();
    }, { passive: true });
    // The list's own box changes too (the chat list above it reloads, the line under the question box wraps):
    // no content event says so, yet the end it showed would slip out of view.
    observe?.(el, () => this.resized());
  }

  /**
   * The list's box changed size: keep the end in view while following. A hidden list (another view open: a 0-px
   * box whose scrollTop reads 0) says nothing about where the user is, so it changes nothing.
   */
  resized(): void {
    if (this.el.clientHeight === 0) return;
    if (this.following) this.toBottom();
    else this.button.hidden = nearBottom(this.el);
  }

  get isFollowing(): boolean {
    return this.following;
  }

  /**
   * A scroll happened (the user's, or one made here). Going up away from the bottom stops following; reaching
   * the bottom again resumes it. Content that grows does not scroll, so it never counts as the user's move.
   */
  onScroll(): void {
    const top = this.el.scrollTop;
    if (nearBottom(this.el)) this.following = true;
    else if (top < this.lastTop - 1) this.following = false;
    this.lastTop = top;
    this.button.hidden = this.following;
  }

  /** The content changed (a token, sources, a new turn): keep the end in view while following. */
  changed(): void {
    // A scroll the user made since the last one seen here, its event not delivered yet, still counts.
    if (this.el.scrollTop < this.lastTop - 1) this.onScroll();
    if (this.following) this.toBottom();
    else this.button.hidden = nearBottom(this.el);
  }

  /** The user is reading something above the end (an opened passage): stop following until they come back. */
  hold(): void {
    this.following = false;
    this.button.hidden = nearBottom(this.el);
  }

  /** Back to the latest text, following again. */
  jump(): void {
    this.following = true;
    this.button.hidden = true;
    this.toBottom();
  }

  private toBottom(): void {
    const top = Math.max(0, this.el.scrollHeight - this.el.clientHeight);
    if (this.el.scrollTop !== top) this.el.scrollTop = top;
    this.lastTop = this.el.scrollTop;
  }
}

/** Calls back when el's box changes size, where the browser can say so (not in unit tests' stand-ins). */
function resizeObserver(el: unknown, cb: () => void): void {
  if (typeof ResizeObserver === 'undefined' || !(el instanceof Element)) return;
  new ResizeObserver(cb).observe(el);
}
