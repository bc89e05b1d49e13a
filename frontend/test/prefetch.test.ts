import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DraftPrefetcher, IDLE_MS } from '../src/prefetch';
import type { PrefetchStatus } from '../src/transport/types';
import { POLL_MS, ReadAhead, readAheadText } from '../src/views/readahead';

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

  it('says what the drafts read, and nothing when there is nothing for the next question', () => {
    expect(readAheadText(st('reading', 1, 4))).toBe('Reading ahead: 1 of 4 passages…');
    expect(readAheadText(st('ready', 4, 4, 1234))).toBe('Read ahead: 4 passages, 1,234 tokens');
    expect(readAheadText(st('ready', 1, 1, 90))).toBe('Read ahead: 1 passage, 90 tokens');
    expect(readAheadText(st('stopped', 2, 5))).toBe('Read ahead: 2 of 5 passages');
    expect(readAheadText(st('stopped', 0, 5))).toBe('');
    expect(readAheadText(st('ready', 0, 0))).toBe('');
    expect(readAheadText(st('none', 0, 0))).toBe('');
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
      expect(r.el.textContent).toBe('Reading ahead: 0 of 3 passages…');
      await vi.advanceTimersByTimeAsync(POLL_MS);
      expect(r.el.textContent).toBe('Reading ahead: 2 of 3 passages…');
      await vi.advanceTimersByTimeAsync(POLL_MS);
      expect(r.el.textContent).toBe('Read ahead: 3 passages, 500 tokens');
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
});
