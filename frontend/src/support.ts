// How well an answer is backed by the passages it cites (Trace.support, app.CheckSupport on the server): a cheap
// word-overlap check, shown beside the answer's latency.

import { fmtInt, fmtPct } from './format';
import type { SupportStats, Trace } from './transport/types';

/** The tooltip that says what the figure measures, and what it cannot. */
export const SUPPORT_TITLE =
  'Share of the answer\'s sentences whose content words mostly (at least half) occur in the passages they cite; ' +
  'a sentence without a citation is checked against all the passages, and one citing a source the prompt did not ' +
  'have is unsupported. Sentences of fewer than 2 content words are not checked. A cheap local word check: it ' +
  'flags answers that drift from their sources, but cannot tell a paraphrase from a contradiction.';

/** Whether a score counts as poorly supported (app.LowSupport). */
export const LOW_SUPPORT = 0.5;

function count(n: unknown): number {
  return typeof n === 'number' && Number.isFinite(n) ? n : 0;
}

function score(t: Trace | undefined): number | undefined {
  const s = t?.support;
  return typeof s === 'number' && Number.isFinite(s) ? s : undefined;
}

/** The answer line's part: "supported 80% (4/5 sentences)"; '' when the answer has no score. */
export function supportText(t: Trace | undefined): string {
  const s = score(t);
  if (s === undefined) return '';
  const checked = count(t?.checked_sentences);
  return `supported ${fmtPct(s)} (${fmtInt(count(t?.supported_sentences))}/${fmtInt(checked)} sentence${checked === 1 ? '' : 's'})`;
}

/** Whether the answer scored under LOW_SUPPORT. */
export function lowSupport(t: Trace | undefined): boolean {
  const s = score(t);
  return s !== undefined && s < LOW_SUPPORT;
}

/** The latency panel's "Support" row: the figure and its uncited sentences, or why there is none. */
export function supportDetail(t: Trace): string {
  const line = supportText(t);
  if (!line) return '— (no sentence to check)';
  const uncited = count(t.uncited_sentences);
  return uncited ? `${line} · ${fmtInt(uncited)} without a citation` : line;
}

/** The window's summary: "mean 72% over 14 answers · 3 (21%) under 50%". */
export function supportStatsText(s: Partial<SupportStats> | undefined): string {
  const n = count(s?.n);
  if (n <= 0) return 'no checked answers';
  return `mean ${fmtPct(s?.mean)} over ${fmtInt(n)} answer${n === 1 ? '' : 's'} · ${fmtInt(count(s?.low))} (${fmtPct(count(s?.low_rate))}) under ${fmtPct(LOW_SUPPORT)}`;
}
