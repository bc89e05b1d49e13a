import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DraftPrefetcher, IDLE_MS } from '../src/prefetch';
import type { PrefetchStatus } from '../src/transport/types';
import { nextShown, POLL_MS, READ_AHEAD_TITLE, ReadAhead, readAheadText, SETTLE_MS, SETTLED_POLL_MS } from '../src/views/readahead';

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
    expect(new ReadAhead(async () => st('none', 0, 0)).el.title).toBe(READ_AHEAD_TITLE);
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

  it('follows a draft while it is read, stops when it is ready, and a cleared line stays cleared', async () => {
    vi.useFakeTimers();
    try {
      const answers = [st('reading', 0, 3), st('reading', 2, 3), st('ready', 3, 3, 500)];
      let calls = 0;
      const r = new ReadAhead(async () => answers[Math.min(calls++, answers.length - 1)]);
      r.follow();
      await vi.advanceTimersByTimeAsync(0);
      expect(r.el.hidden).toBe(false);
      expect(r.el.textContent).toBe('Preparing the answer while you type: 0 of 3 passages read…');
      await vi.advanceTimersByTimeAsync(POLL_MS);
      expect(r.el.textContent).toBe('Preparing the answer while you type: 2 of 3 passages read…');
      // Two parts: on a narrow window the purpose is cut, how far it got stays whole.
      expect(r.el.querySelector('.ra-what')!.textContent).toBe('Preparing the answer while you type: ');
      expect(r.el.querySelector('.ra-count')!.textContent).toBe('2 of 3 passages read…');
      await vi.advanceTimersByTimeAsync(POLL_MS);
      expect(r.el.textContent).toBe('Prepared while you type: 3 passages, 500 tokens read ahead');
      expect(r.el.dataset.state).toBe('ready');
      await vi.advanceTimersByTimeAsync(POLL_MS * 5);
      expect(calls).toBe(3); // no polling once it is read

      calls = 0;
      r.follow();
      r.clear(); // Enter before the first answer: the late answer must not show the line again
      await vi.advanceTimersByTimeAsync(POLL_MS * 3);
      expect(r.el.hidden).toBe(true);
      expect(r.el.textContent).toBe('');
      expect(calls).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it('holds across drafts of one question, starts afresh after clear, and settles when reading stalls', async () => {
    vi.useFakeTimers();
    try {
      let now = st('reading', 3, 6);
      let calls = 0;
      const r = new ReadAhead(async () => (calls++, now));
      r.follow();
      await vi.advanceTimersByTimeAsync(0);
      expect(r.el.textContent).toBe('Preparing the answer while you type: 3 of 6 passages read…');
      now = st('reading', 0, 5); // the next word's draft starts over
      r.follow();
      await vi.advanceTimersByTimeAsync(0);
      expect(r.el.textContent).toBe('Preparing the answer while you type: 3 of 6 passages read…');
      // Typing stopped and nothing more is read: no "…" for ever, and slower polling.
      await vi.advanceTimersByTimeAsync(SETTLE_MS + POLL_MS);
      expect(r.el.textContent).toBe('Prepared while you type: 3 of 6 passages read ahead');
      expect(r.el.dataset.state).toBe('stopped');
      const before = calls;
      await vi.advanceTimersByTimeAsync(SETTLED_POLL_MS * 2);
      expect(calls - before).toBeLessThanOrEqual(2);
      // It finishes late: shown.
      now = st('ready', 5, 5, 640);
      await vi.advanceTimersByTimeAsync(SETTLED_POLL_MS);
      expect(r.el.textContent).toBe('Prepared while you type: 5 passages, 640 tokens read ahead');
      const polls = calls;
      await vi.advanceTimersByTimeAsync(SETTLED_POLL_MS * 3);
      expect(calls).toBe(polls); // settled for good
      // The next question starts from nothing.
      r.clear();
      now = st('reading', 1, 4);
      r.follow();
      await vi.advanceTimersByTimeAsync(0);
      expect(r.el.textContent).toBe('Preparing the answer while you type: 1 of 4 passages read…');
      r.clear();
    } finally {
      vi.useRealTimers();
    }
  });
});
