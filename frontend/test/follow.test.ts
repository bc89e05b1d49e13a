// Issue 35, finding 3: the chat follows a streaming answer unless the user scrolled up; then "Jump to latest".
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ChatView } from '../src/views/chat';
import type { Ctx } from '../src/views/ctx';
import { FollowScroll, nearBottom, type Scroller } from '../src/views/follow';
import type { AskCallbacks, AskRequest, Transport } from '../src/transport/types';

/** A scroll box with settable content height; scrollTop is clamped as a browser does. */
function box(clientHeight = 300) {
  let top = 0;
  const b = {
    contentHeight: clientHeight,
    clientHeight,
    get scrollHeight() {
      return Math.max(this.contentHeight, this.clientHeight);
    },
    get scrollTop() {
      return top;
    },
    set scrollTop(v: number) {
      top = Math.max(0, Math.min(v, this.scrollHeight - this.clientHeight));
    },
  };
  return b as typeof b & Scroller;
}

describe('FollowScroll', () => {
  it('keeps the end in view when the list itself shrinks (the chat list above it reloaded), unless held', () => {
    const el = box();
    let resized = () => {};
    const f = new FollowScroll(el, (_el, cb) => { resized = cb; });
    el.contentHeight = 500;
    f.changed();
    expect(el.scrollTop).toBe(200);
    el.clientHeight = 220; // the box got shorter: the last 80 px are out of view
    resized();
    expect(el.scrollTop).toBe(280);
    f.hold();
    el.clientHeight = 150;
    resized();
    expect(el.scrollTop).toBe(280); // the user is reading above: the view stays
    expect(f.button.hidden).toBe(false);
    // Another view opened (the list hidden: a 0-px box reading scrollTop 0), then back: still held, not followed.
    const top = el.scrollTop;
    el.clientHeight = 0;
    el.scrollTop = 0;
    resized();
    el.clientHeight = 150;
    el.scrollTop = top;
    resized();
    expect(f.isFollowing).toBe(false);
    expect(el.scrollTop).toBe(top);
  });

  it('keeps the end in view while following; a scroll up stops it and shows Jump to latest; jumping resumes', () => {
    const el = box();
    const f = new FollowScroll(el);
    expect(f.button.hidden).toBe(true);
    el.contentHeight = 500;
    f.changed();
    expect(el.scrollTop).toBe(200); // followed to the end
    f.onScroll(); // the scroll made here
    expect(f.isFollowing).toBe(true);
    el.contentHeight = 800;
    f.changed();
    expect(el.scrollTop).toBe(500);

    el.scrollTop = 120; // the user scrolls up to read
    f.onScroll();
    expect(f.isFollowing).toBe(false);
    expect(f.button.hidden).toBe(false);
    expect(f.button.textContent).toMatch(/^Jump to latest/);
    el.contentHeight = 1200; // the answer grows: the view stays where the user put it
    f.changed();
    expect(el.scrollTop).toBe(120);
    expect(f.button.hidden).toBe(false);

    f.button.click();
    expect(f.isFollowing).toBe(true);
    expect(f.button.hidden).toBe(true);
    expect(el.scrollTop).toBe(900);
    el.contentHeight = 1300;
    f.changed();
    expect(el.scrollTop).toBe(1000);
  });

  it('growth without a scroll never counts as the user moving; scrolling back to the bottom resumes', () => {
    const el = box();
    const f = new FollowScroll(el);
    el.contentHeight = 1000;
    f.changed();
    // A scroll event that arrives after more text came in (scrollTop unchanged): still following.
    el.contentHeight = 1100;
    f.onScroll();
    expect(f.isFollowing).toBe(true);
    el.scrollTop = 100;
    f.onScroll();
    expect(f.isFollowing).toBe(false);
    el.scrollTop = 790; // within NEAR_BOTTOM_PX of the end
    expect(nearBottom(el)).toBe(true);
    f.onScroll();
    expect(f.isFollowing).toBe(true);
    expect(f.button.hidden).toBe(true);
  });

  it('a scroll up whose event has not arrived yet still wins over the next token', () => {
    const el = box();
    const f = new FollowScroll(el);
    el.contentHeight = 900;
    f.changed();
    el.scrollTop = 250; // the user's wheel moved the view; its scroll event comes with the next frame
    el.contentHeight = 1000;
    f.changed();
    expect(el.scrollTop).toBe(250);
    expect(f.isFollowing).toBe(false);
    expect(f.button.hidden).toBe(false);
  });

  it('an opened passage holds the view until the user returns', () => {
    const el = box();
    const f = new FollowScroll(el);
    el.contentHeight = 900;
    f.changed();
    f.hold();
    el.contentHeight = 1000;
    f.changed();
    expect(el.scrollTop).toBe(600);
    expect(f.button.hidden).toBe(false);
  });
});

describe('ChatView follows the stream', () => {
  afterEach(() => document.body.replaceChildren());

  function view() {
    const asks: Array<{ req: AskRequest; cb: AskCallbacks }> = [];
    const t = {
      kind: 'http',
      desktop: false,
      ask: vi.fn((req: AskRequest, cb: AskCallbacks) => {
        asks.push({ req, cb });
        return { cancel: vi.fn(), finished: Promise.resolve() };
      }),
      reportUITTFT: vi.fn(async () => undefined),
      chunk: vi.fn(async () => ({ text: '' })),
    } as unknown as Transport;
    const ctx: Ctx = { t, workspace: () => 'notes', showLatency: vi.fn(), traceFinished: vi.fn(), notify: vi.fn(), workspacesChanged: vi.fn() };
    const v = new ChatView(ctx);
    document.body.replaceChildren(v.el);
    const q = (id: string) => v.el.querySelector(`[data-testid="${id}"]`) as HTMLElement;
    // jsdom has no layout: the message list's height grows with the answer's text.
    const messages = q('messages');
    let top = 0;
    Object.defineProperty(messages, 'clientHeight', { configurable: true, get: () => 200 });
    Object.defineProperty(messages, 'scrollHeight', { configurable: true, get: () => Math.max(200, 100 + (messages.textContent ?? '').length * 2) });
    Object.defineProperty(messages, 'scrollTop', {
      configurable: true,
      get: () => top,
      set: (x: number) => void (top = Math.max(0, Math.min(x, messages.scrollHeight - messages.clientHeight))),
    });
    const scrollBy = (to: number) => {
      messages.scrollTop = to;
      messages.dispatchEvent(new Event('scroll'));
    };
    return { v, asks, q, messages, scrollBy };
  }

  it('keeps the growing answer in view, stays put after a scroll up, and Jump to latest brings it back', async () => {
    const { asks, q, messages, scrollBy } = view();
    (q('question-input') as HTMLTextAreaElement).value = 'q';
    (q('submit') as HTMLButtonElement).click();
    const cb = asks[0].cb;
    cb.onTrace({ request_id: 'r1', chat_id: 1 });
    cb.onToken('word '.repeat(100));
    const bottom = () => messages.scrollHeight - messages.clientHeight;
    expect(messages.scrollTop).toBe(bottom());
    expect(messages.scrollTop).toBeGreaterThan(0);
    cb.onToken('more '.repeat(100));
    await new Promise((r) => setTimeout(r, 50)); // the coalesced render
    expect(messages.scrollTop).toBe(bottom());

    scrollBy(100); // the user goes up to read
    expect(q('jump-latest').hidden).toBe(false);
    cb.onToken('again '.repeat(100));
    await new Promise((r) => setTimeout(r, 50));
    expect(messages.scrollTop).toBe(100);

    q('jump-latest').click();
    expect(messages.scrollTop).toBe(bottom());
    // A wheel turned up stops following at once.
    messages.dispatchEvent(new WheelEvent('wheel', { deltaY: -120 }));
    const at = messages.scrollTop;
    cb.onToken('wheel '.repeat(50));
    await new Promise((r) => setTimeout(r, 50));
    expect(messages.scrollTop).toBe(at);
    q('jump-latest').click();
    expect(messages.scrollTop).toBe(bottom());
    expect(q('jump-latest').hidden).toBe(true);
    cb.onDone({ request_id: 'r1', stages: { ttft_ms: 100 } });
    expect(messages.scrollTop).toBe(bottom()); // the buttons under the finished answer are in view
  });
});
