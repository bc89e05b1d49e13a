// Layout rules jsdom cannot measure, read from the stylesheet (the real-browser e2e measures them): issue 35.
import { describe, expect, it } from 'vitest';
import stylesheet from '../src/styles.css?raw';

const css = stylesheet.replace(/\/\*[^]*?\*\//g, ''); // comments out
/** The declarations of every rule whose selector list is exactly `sel`, joined. */
const rule = (sel: string) =>
  [...css.matchAll(/([^{}]+)\{([^{}]*)\}/g)].filter((m) => m[1].trim() === sel).map((m) => m[2]).join(';');

describe('stylesheet', () => {
  it('cuts a source chip\'s folder at its end, not from the left (11)', () => {
    expect(rule('.source-dir')).not.toMatch(/direction/);
    expect(rule('.source-btn > span')).toMatch(/text-overflow:\s*ellipsis/);
  });

  it('keeps the Ask/Stop column one width, so Stop appearing cannot narrow the question box (23)', () => {
    expect(rule('.ask-buttons')).toMatch(/flex:\s*none/);
    expect(rule('.ask-buttons')).toMatch(/width:\s*[\d.]+em/);
    expect(rule('.ask-buttons .btn')).toMatch(/width:\s*100%/);
  });

  it('fits the documents table to a narrow window instead of clipping it, names wrapping at <wbr> (21)', () => {
    expect(css).not.toMatch(/table\.docs[^{]*\{[^}]*display:\s*block/);
    expect(rule('table.docs td:first-child')).toMatch(/overflow-wrap:\s*break-word/);
  });

  it('gives every Settings number box the same width (19)', () => {
    expect(rule(".field-input input[type='number']")).toMatch(/width:\s*8em;\s*flex:\s*none/);
  });
});
