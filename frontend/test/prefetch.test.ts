import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DraftPrefetcher, IDLE_MS } from '../src/prefetch';

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
