// Pure logic of the "thinking" placeholder: which label to show for the stage events seen so far.

import { fmtInt, fmtMs } from '../format';
import type { PrefillDetail, StageEvent } from '../transport/types';

export interface StageState {
  /** Current stage name ('' before any). */
  stage: string;
  label: string;
  /** Candidates retrieved (retrieval done), then also those that fit the prompt (prompt_assemble done). */
  sources?: number;
  fitted?: number;
  candidates?: number;
  prefill?: PrefillDetail;
  prefillDoneMs?: number;
}

export function initialStage(): StageState {
  return { stage: '', label: 'Sending…' };
}

function plural(n: number, one: string, many = one + 's'): string {
  return `${fmtInt(n)} ${n === 1 ? one : many}`;
}

/** Folds one stage event into the placeholder state. */
export function applyStage(s: StageState, ev: StageEvent): StageState {
  const next: StageState = { ...s };
  const d = ev.detail ?? {};
  if (ev.name === 'retrieval' && ev.state === 'done' && typeof d.sources === 'number') next.sources = d.sources;
  if (ev.name === 'prompt_assemble' && ev.state === 'done' && typeof d.sources === 'number') {
    next.fitted = d.sources;
    const c = d.candidates;
    next.candidates = typeof c === 'number' ? c : next.sources;
  }
  if (ev.name === 'prefill' && ev.state === 'start') {
    next.prefill = {
      prompt_tokens: num(d.prompt_tokens),
      cached_tokens: num(d.cached_tokens),
      eval_tokens: num(d.eval_tokens),
      expected_ms: num(d.expected_ms),
    };
  }
  if (ev.name === 'prefill' && ev.state === 'done' && typeof ev.ms === 'number') next.prefillDoneMs = ev.ms;
  if (ev.state !== 'start') return next;
  next.stage = ev.name;
  next.label = labelFor(ev.name, next);
  return next;
}

function num(x: unknown): number {
  return typeof x === 'number' && Number.isFinite(x) ? x : 0;
}

export function labelFor(name: string, s: Pick<StageState, 'sources' | 'prefill'>): string {
  switch (name) {
    case 'queue':
      return 'Waiting for the model…';
    case 'embed':
      return 'Reading the question…';
    case 'vector':
    case 'bm25':
    case 'retrieval':
      return 'Retrieving…';
    case 'rerank':
      return 'Reranking…';
    case 'prompt_assemble':
      return s.sources !== undefined ? `Fitting ${plural(s.sources, 'candidate')} into the prompt…` : 'Building the prompt…';
    case 'prefill':
      return s.prefill && s.prefill.prompt_tokens
        ? `Reading ${plural(s.prefill.prompt_tokens, 'prompt token')}…`
        : 'Reading the prompt…';
    case 'generate':
      return 'Generating…';
    default:
      return `${name.replace(/_/g, ' ')}…`;
  }
}

/** The prefill indicator's line: how many tokens, how many from cache, the expected wait. */
export function prefillText(p: PrefillDetail, doneMs?: number): string {
  const parts = [`${plural(p.prompt_tokens, 'prompt token')}`];
  parts.push(`${fmtInt(p.cached_tokens)} from cache`);
  parts.push(`${fmtInt(p.eval_tokens)} to read`);
  if (doneMs !== undefined) parts.push(`read in ${fmtMs(doneMs)}`);
  else if (p.expected_ms > 0) parts.push(`about ${fmtMs(p.expected_ms)}`);
  return parts.join(' · ');
}

/** Fraction of the expected prefill elapsed, held below 1 until the server says it is done. */
export function prefillFraction(elapsedMs: number, expectedMs: number, done: boolean): number {
  if (done) return 1;
  if (!(expectedMs > 0)) return 0;
  return Math.min(0.97, Math.max(0, elapsedMs / expectedMs));
}

/** "4 of 20 candidates fit the prompt" once prompt_assemble is done; '' before. */
export function fitText(s: Pick<StageState, 'fitted' | 'candidates'>): string {
  if (s.fitted === undefined) return '';
  if (s.candidates === undefined || s.candidates === s.fitted) return `${plural(s.fitted, 'passage')} in the prompt`;
  return `${fmtInt(s.fitted)} of ${plural(s.candidates, 'candidate')} fit the prompt`;
}
