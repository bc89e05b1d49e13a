import { describe, expect, it, vi } from 'vitest';
import FX from '../e2e/fixtures/real-server.json';
import type { Source } from '../src/transport/types';
import { locationText, scoresText, sourceChip, splitName } from '../src/views/sources';

const recorded = (FX as unknown as { ask: Array<{ event: string; data: unknown }> }).ask.find((e) => e.event === 'sources')!.data as Source[];

describe('source chips', () => {
  it('split the file name from its folder', () => {
    expect(splitName('notes/deep/a.md')).toEqual(['notes/deep/', 'a.md']);
    expect(splitName('a.md')).toEqual(['', 'a.md']);
    expect(splitName('C:\\docs\\b.txt')).toEqual(['C:\\docs\\', 'b.txt']);
  });

  it('say where the passage is and why it was picked', () => {
    expect(locationText({ line_start: 3, line_end: 20 })).toBe('lines 3–20');
    expect(locationText({ line_start: 7, line_end: 7 })).toBe('line 7');
    expect(locationText({ page: 4, line_start: 1, line_end: 9 })).toBe('p. 4 · lines 1–9');
    expect(locationText({ page: 0 })).toBe('');
    expect(scoresText({ scores: { bm25: 1.234, vector: 0.8123, rerank: 0, fused: 0.0312 } })).toBe('bm25 1.23 · vector 0.81 · fused 0.031');
  });

  it('show the name whole, folder and heading apart, the full story in the title (recorded sources)', () => {
    const open = vi.fn();
    const s: Source = { ...recorded[0], document: `deep/folder/${recorded[0].document}` };
    const li = sourceChip(s, open);
    expect(li.querySelector('[data-testid="source-name"]')!.textContent).toBe(recorded[0].document);
    expect(li.querySelector('.source-dir')!.textContent).toBe('deep/folder'); // cut at its end by CSS, no direction marks
    if (s.heading) expect(li.querySelector('.source-heading')!.textContent).toBe(s.heading);
    expect(li.querySelector('[data-testid="source-loc"]')!.textContent).toBe(locationText(s));
    const title = li.querySelector('button')!.title;
    expect(title).toContain(s.path);
    li.querySelector('button')!.click();
    expect(open).toHaveBeenCalledWith(s.n);
    for (const r of recorded) expect(sourceChip(r, open).querySelector('[data-testid="source-name"]')!.textContent).toBe(splitName(r.document)[1]);
  });
});
