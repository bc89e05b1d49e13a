import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DraftPrefetcher, IDLE_MS } from '../src/prefetch';
import type { PrefetchStatus } from '../src/transport/types';
import { nextShown, READ_AHEAD_TITLE, ReadAhead, readAheadText, SETTLE_MS } from '../src/views/readahead';

describe('DraftPrefetcher', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  function typeOut(p: DraftPrefetcher, text: string, gapMs: number): void {
    for (let i = 1; i <= text.length; i++) {
      p.input(text.slice(0, i));
      vi.advanceTimersByTime(gapMs);
    }
  }

  it('sends nothing under three words, then at each completed word and on a pause', () => {
    const sent: string[] = [];
    const p = new DraftPrefetcher((d) => sent.push(d));
    typeOut(p, 'how many days of ', 200); // 5 characters a second: no pause long enough
    expect(sent).toEqual(['how many days', 'how many days of']);
    p.input('how many days of hol');
    vi.advanceTimersByTime(IDLE_MS - 1);
    expect(sent.length).toBe(2);
    vi.advanceTimersByTime(1);
    expect(sent).toEqual(['how many days', 'how many days of', 'how many days of hol']);
  });

  it('never sends the same draft twice in a row, and forgets it on reset', () => {
    const sent: string[] = [];
    const p = new DraftPrefetcher((d) => sent.push(d));
    p.input('one two three ');
    p.input('one two three  ');
    vi.advanceTimersByTime(IDLE_MS * 2);
    expect(sent).toEqual(['one two three']);
    p.reset();
    p.input('one two three ');
    expect(sent).toEqual(['one two three', 'one two three']);
  });

  it('a pending pause-send is dropped when the question is submitted', () => {
    const sent: string[] = [];
    const p = new DraftPrefetcher((d) => sent.push(d));
    p.input('one two three four');
    p.reset();
    vi.advanceTimersByTime(IDLE_MS * 2);
    expect(sent).toEqual([]);
  });
});

import cases from './typing-cases.json';

describe('DraftPrefetcher on the shared typing cases (bench/typing.go replays the same)', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  for (const c of cases as Array<{ text: string; gap_ms: number; sends: Array<[number, string]> }>) {
    it(`sends what the benchmark expects for ${JSON.stringify(c.text)}`, () => {
      const sent: Array<[number, string]> = [];
      const t0 = Date.now(); // fake timers move the clock too
      const p = new DraftPrefetcher((d) => sent.push([Date.now() - t0, d]));
      const step = (ms: number) => vi.advanceTimersByTime(ms);
      for (let i = 1; i <= c.text.length; i++) {
        step(c.gap_ms);
        p.input(c.text.slice(0, i));
      }
      step(c.gap_ms); // Enter comes one gap after the last key
      p.reset();
      expect(sent).toEqual(c.sends);
    });
  }
});

describe('read-ahead line', () => {
  const st = (state: string, read: number, passages: number, tokens = 0): PrefetchStatus => ({ state, read, passages, tokens, read_tokens: 0 });

  it('says what the drafts read and what for, and nothing when there is nothing for the next question', () => {
    expect(readAheadText(st('reading', 1, 4))).toBe('Preparing the answer while you type: 1 of 4 passages read…');
    expect(readAheadText(st('ready', 4, 4, 1234))).toBe('Prepared while you type: 4 passages, 1,234 tokens read ahead');
    expect(readAheadText(st('ready', 1, 1, 90))).toBe('Prepared while you type: 1 passage, 90 tokens read ahead');
    expect(readAheadText(st('stopped', 2, 5))).toBe('Prepared while you type: 2 of 5 passages read ahead');
    expect(readAheadText(st('stopped', 0, 5))).toBe('');
    expect(readAheadText(st('ready', 0, 0))).toBe('');
    expect(readAheadText(st('none', 0, 0))).toBe('');
    expect(new ReadAhead(() => () => undefined).el.title).toBe(READ_AHEAD_TITLE);
    expect(READ_AHEAD_TITLE).toMatch(/^While you type.*answer starts sooner/);
  });

  it('never goes backwards within a question: a newer draft starting over keeps the line (issue 35, 9)', () => {
    let shown = nextShown(undefined, st('reading', 3, 6));
    expect(shown).toMatchObject({ state: 'reading', read: 3, passages: 6 });
    // "3 of 6" → "0 of 5" was the jump: the line holds until the new draft has read as much.
    expect(nextShown(shown, st('reading', 0, 5))).toBe(shown);
    expect(nextShown(shown, st('reading', 2, 5))).toBe(shown);
    shown = nextShown(shown, st('reading', 3, 5));
    expect(shown).toMatchObject({ read: 3, passages: 5 });
    shown = nextShown(shown, st('ready', 5, 5, 700));
    expect(readAheadText(shown!)).toBe('Prepared while you type: 5 passages, 700 tokens read ahead');
    // A held "reading" line settles once the server is no longer reading.
    const held = nextShown(st('reading', 4, 6), st('ready', 2, 2, 100));
    expect(held).toMatchObject({ state: 'stopped', read: 4, passages: 6 });
    expect(readAheadText(held!)).toBe('Prepared while you type: 4 of 6 passages read ahead');
    // Nothing for the next question: what was shown settles; nothing shown stays nothing.
    expect(nextShown(st('reading', 2, 5), st('none', 0, 0))).toMatchObject({ state: 'stopped', read: 2 });
    expect(nextShown(undefined, st('none', 0, 0))).toBeUndefined();
  });

  /**
   * A status stream as the transports give it: push() sends a status to the newest subscriber, late() to an
   * earlier one (a status the transport had in flight when it was unsubscribed), end() ends the newest one.
   */
  function stream() {
    const s = { subs: 0, unsubs: 0 };
    const subs: Array<{ onStatus: (st: PrefetchStatus) => void; onEnd: () => void }> = [];
    const watch = (onStatus: (st: PrefetchStatus) => void, onEnd: () => void) => {
      s.subs++;
      subs.push({ onStatus, onEnd });
      return () => void s.unsubs++;
    };
    return {
      s,
      watch,
      push: (st: PrefetchStatus) => subs.at(-1)?.onStatus(st),
      late: (i: number, st: PrefetchStatus) => subs[i].onStatus(st),
      end: () => subs.at(-1)?.onEnd(),
    };
  }

  it('shows each pushed status while a question is typed, one subscription per question, none after clear', () => {
    const { s, watch, push, late } = stream();
    const r = new ReadAhead(watch);
    expect(s.subs).toBe(0); // nothing followed before the first draft
    r.follow();
    push(st('reading', 0, 3));
    expect(r.el.hidden).toBe(false);
    expect(r.el.textContent).toBe('Preparing the answer while you type: 0 of 3 passages read…');
    push(st('reading', 2, 3));
    expect(r.el.textContent).toBe('Preparing the answer while you type: 2 of 3 passages read…');
    // Two parts: on a narrow window the purpose is cut, how far it got stays whole.
    expect(r.el.querySelector('.ra-what')!.textContent).toBe('Preparing the answer while you type: ');
    expect(r.el.querySelector('.ra-count')!.textContent).toBe('2 of 3 passages read…');
    r.follow(); // the next word's draft: the same subscription
    push(st('ready', 3, 3, 500));
    expect(r.el.textContent).toBe('Prepared while you type: 3 passages, 500 tokens read ahead');
    expect(r.el.dataset.state).toBe('ready');
    expect(s.subs).toBe(1);

    r.clear(); // Enter: the line goes, and so does the subscription
    expect([r.el.hidden, r.el.textContent, s.unsubs]).toEqual([true, '', 1]);
    late(0, st('reading', 1, 3)); // a status the transport had in flight changes nothing
    expect(r.el.hidden).toBe(true);
    r.follow();
    expect(s.subs).toBe(2);
    push(st('reading', 1, 4)); // the next question starts from nothing
    expect(r.el.textContent).toBe('Preparing the answer while you type: 1 of 4 passages read…');
    late(0, st('ready', 3, 3, 500)); // nor does the earlier question's subscription, still
    expect(r.el.textContent).toBe('Preparing the answer while you type: 1 of 4 passages read…');
    r.clear();
  });

  it('subscribes again at the next draft when the stream ended by itself (refused, the server restarted)', () => {
    const { s, watch, push, end } = stream();
    const r = new ReadAhead(watch);
    r.follow();
    push(st('reading', 1, 4));
    end();
    r.follow(); // the next draft
    expect(s.subs).toBe(2);
    push(st('reading', 2, 4));
    expect(r.el.textContent).toBe('Preparing the answer while you type: 2 of 4 passages read…');
    r.follow(); // a live stream is kept
    expect(s.subs).toBe(2);
    r.clear();
  });

  it('holds across drafts of one question, and settles when nothing more is pushed', async () => {
    vi.useFakeTimers();
    try {
      const { watch, push } = stream();
      const r = new ReadAhead(watch);
      r.follow();
      push(st('reading', 3, 6));
      push(st('reading', 0, 5)); // the next word's draft starts over: the line holds
      expect(r.el.textContent).toBe('Preparing the answer while you type: 3 of 6 passages read…');
      await vi.advanceTimersByTimeAsync(SETTLE_MS - 100);
      expect(r.el.dataset.state).toBe('reading');
      // Typing stopped and nothing more is read: no "…" for ever.
      await vi.advanceTimersByTimeAsync(200);
      expect(r.el.textContent).toBe('Prepared while you type: 3 of 6 passages read ahead');
      expect(r.el.dataset.state).toBe('stopped');
      // A new draft is news: live again, and it settles again.
      r.follow();
      expect(r.el.dataset.state).toBe('reading');
      await vi.advanceTimersByTimeAsync(SETTLE_MS + 100);
      expect(r.el.dataset.state).toBe('stopped');
      // It finishes late: shown.
      push(st('ready', 5, 5, 640));
      expect(r.el.textContent).toBe('Prepared while you type: 5 passages, 640 tokens read ahead');
      await vi.advanceTimersByTimeAsync(SETTLE_MS * 2);
      expect(r.el.textContent).toBe('Prepared while you type: 5 passages, 640 tokens read ahead');
      r.clear();
    } finally {
      vi.useRealTimers();
    }
  });
});
