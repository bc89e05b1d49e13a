// Source chips under an answer and the passage header: the file name always shows in full; the folder,
// then the heading give way first; the line range never overflows the chip.

import { h } from '../dom';
import { fmtNum } from '../format';
import type { Source } from '../transport/types';

/** "notes/deep/a.md" → ["notes/deep/", "a.md"]; also splits Windows paths. */
export function splitName(doc: string): [string, string] {
  const i = Math.max(doc.lastIndexOf('/'), doc.lastIndexOf('\\'));
  return i < 0 ? ['', doc] : [doc.slice(0, i + 1), doc.slice(i + 1)];
}

/** "lines 3–20", "p. 4 · lines 3–20", '' when the passage has no location. */
export function locationText(s: Pick<Source, 'page' | 'line_start' | 'line_end'>): string {
  const parts: string[] = [];
  if (s.page) parts.push(`p. ${s.page}`);
  if (s.line_start) parts.push(s.line_end && s.line_end !== s.line_start ? `lines ${s.line_start}–${s.line_end}` : `line ${s.line_start}`);
  return parts.join(' · ');
}

/** Why a passage was picked: its retrieval scores, "bm25 1.2 · vector 0.81 · fused 0.031". */
export function scoresText(s: Pick<Source, 'scores'>): string {
  const sc = s.scores;
  if (!sc) return '';
  const parts: string[] = [];
  if (sc.bm25) parts.push(`bm25 ${fmtNum(sc.bm25, 2)}`);
  if (sc.vector) parts.push(`vector ${fmtNum(sc.vector, 2)}`);
  if (sc.rerank) parts.push(`rerank ${fmtNum(sc.rerank, 2)}`);
  if (sc.fused) parts.push(`fused ${fmtNum(sc.fused, 3)}`);
  return parts.join(' · ');
}

/** One chip: [n] name  folder/  heading  lines a–b. Its title has everything in full. */
export function sourceChip(s: Source, onOpen: (n: number) => void): HTMLLIElement {
  const [dir, name] = splitName(s.document || s.path || '');
  const loc = locationText(s);
  const title = [s.path || s.document, s.heading, loc, scoresText(s)].filter(Boolean).join('\n');
  return h('li', { class: 'source', testid: 'source', attrs: { 'data-n': s.n } },
    h('button', { type: 'button', class: 'source-btn', title, on: { click: () => onOpen(s.n) } },
      h('span', { class: 'source-n', text: `[${s.n}]` }),
      h('span', { class: 'source-doc', testid: 'source-name', text: name }),
      // The folder is cut at its end ("notes/de…"), as every label is: its start is what the user recognises.
      dir ? h('span', { class: 'source-dir', text: dir.replace(/[/\\]$/, '') }) : null,
      s.heading ? h('span', { class: 'source-heading', text: s.heading }) : null,
      loc ? h('span', { class: 'source-loc', testid: 'source-loc', text: loc }) : null,
    ),
  );
}
