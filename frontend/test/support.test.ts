import { describe, expect, it } from 'vitest';
import { lowSupport, SUPPORT_TITLE, supportDetail, supportStatsText, supportText } from '../src/support';
import type { Trace } from '../src/transport/types';
import { renderDetails } from '../src/views/latency';

const trace = (t: Partial<Trace>): Trace => ({ request_id: 'r', stages: {}, ...t });

describe('support figures', () => {
  it.each([
    [{ support: 0.8, checked_sentences: 5, supported_sentences: 4 }, 'supported 80% (4/5 sentences)', false],
    [{ support: 1, checked_sentences: 1, supported_sentences: 1 }, 'supported 100% (1/1 sentence)', false],
    [{ support: 0.5, checked_sentences: 2, supported_sentences: 1 }, 'supported 50% (1/2 sentences)', false],
    // The server omits a count of 0.
    [{ support: 0, checked_sentences: 3 }, 'supported 0% (0/3 sentences)', true],
    [{ support: 0.333, checked_sentences: 3, supported_sentences: 1 }, 'supported 33% (1/3 sentences)', true],
    // No checkable sentence: no score, no line (not "0%").
    [{}, '', false],
    [{ support: undefined, checked_sentences: 0 }, '', false],
    [{ support: NaN }, '', false],
  ] as Array<[Partial<Trace>, string, boolean]>)('%j → %s', (t, text, low) => {
    expect(supportText(trace(t))).toBe(text);
    expect(lowSupport(trace(t))).toBe(low);
  });

  it('the details row adds the uncited sentences, or says why there is no figure', () => {
    expect(supportDetail(trace({ support: 0.75, checked_sentences: 4, supported_sentences: 3, uncited_sentences: 2 }))).toBe(
      'supported 75% (3/4 sentences) · 2 without a citation');
    expect(supportDetail(trace({ support: 0.75, checked_sentences: 4, supported_sentences: 3 }))).toBe('supported 75% (3/4 sentences)');
    expect(supportDetail(trace({}))).toBe('— (no sentence to check)');
  });

  it('the window summary gives the mean and the share under 50%', () => {
    expect(supportStatsText({ n: 14, mean: 0.716, low: 3, low_rate: 0.214 })).toBe('mean 72% over 14 answers · 3 (21%) under 50%');
    expect(supportStatsText({ n: 1, mean: 1, low: 0, low_rate: 0 })).toBe('mean 100% over 1 answer · 0 (0%) under 50%');
    expect(supportStatsText({ n: 0, mean: 0, low: 0, low_rate: 0 })).toBe('no checked answers');
    expect(supportStatsText(undefined)).toBe('no checked answers');
  });

  it('the latency panel shows it in the answer card, with the check explained', () => {
    const dl = renderDetails(trace({ support: 0.6, checked_sentences: 5, supported_sentences: 3, uncited_sentences: 1 }));
    const dd = dl.querySelector('[data-testid="detail-support"]') as HTMLElement;
    expect(dd.textContent).toBe('supported 60% (3/5 sentences) · 1 without a citation');
    expect(dd.title).toBe(SUPPORT_TITLE);
  });
});
