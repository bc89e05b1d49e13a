// One line under each answer: where most of its time to first token went, and the knob that would help.
// Computed from the trace's own stage times (no timing of the UI's).

import { fmtInt, fmtMs, fmtPct } from '../format';
import type { Trace } from '../transport/types';
import { stageLabel } from './stats';

export interface Cause {
  stage: string;
  /** Share of the server's TTFT, 0..1. */
  share: number;
  text: string;
  /** What to change, '' when nothing in Lore's settings would help. */
  knob: string;
}

/** Below this TTFT no knob is worth turning. */
export const FAST_MS = 300;

const val = (t: Trace, k: string): number => {
  const v = t.stages?.[k];
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0;
};

/** A part of TTFT in words. */
const PHRASES: Record<string, string> = {
  queue: 'waiting for the model',
  embed: 'embedding the question',
  search: 'searching the library',
  rerank: 'rerank',
  prefill: 'prefill',
  first_decode: 'the first token itself',
};

/** The biggest part of TTFT, with its explanation; undefined when the trace has no TTFT. */
// fewerPassages is the prefill advice: it names the passage budget the question
// ran under, whether set or automatic (Context tokens 0), and what reading less costs.
function fewerPassages(t: Trace): string {
  const budget = t.context_budget ?? 0;
  const how = t.context_budget_from === 'setting' ? 'set' : t.context_budget_from ? 'automatic' : '0 = automatic';
  const set = budget > 0 ? ` (this prompt's passage budget: ${fmtInt(budget)} tokens; ${how})` : '';
  return `fewer passages in the prompt: Top K, or Context tokens${set}, in Settings — reading less can cost answer quality (see Support)`;
}

export function ttftCause(t: Trace): Cause | undefined {
  const ttft = val(t, 'ttft_ms');
  if (!ttft) return undefined;
  // Retrieval is embed + (vector ‖ bm25) + fusion: its own parts are named when one dominates.
  const retrievalRest = Math.max(0, val(t, 'retrieval_ms') - val(t, 'embed_ms'));
  const parts: Array<[string, number]> = [
    ['queue', val(t, 'queue_ms')],
    ['embed', val(t, 'embed_ms')],
    ['search', retrievalRest || Math.max(val(t, 'vector_ms'), val(t, 'bm25_ms'))],
    ['rerank', val(t, 'rerank_ms')],
    ['prompt_assemble', val(t, 'prompt_assemble_ms')],
    ['tokenize', val(t, 'tokenize_ms')],
    ['prefill', val(t, 'prefill_ms')],
    ['first_decode', val(t, 'first_decode_ms')],
  ];
  let [stage, ms] = parts[0];
  for (const [s, m] of parts) if (m > ms) [stage, ms] = [s, m];
  if (!ms) return undefined;
  const share = Math.min(1, ms / ttft);
  const pct = fmtPct(share);
  // Fast: still where the time went (a cause, not the TTFT again), with nothing worth tuning.
  if (ttft < FAST_MS) return { stage, share, text: `${PHRASES[stage] ?? stageLabel(`${stage}_ms`)} ${pct} of TTFT`, knob: '' };
  const prompt = t.prompt_tokens ?? 0;
  const evald = t.eval_tokens ?? 0;
  switch (stage) {
    case 'prefill': {
      const what = prompt > 0 ? `: ${fmtInt(evald)} of ${fmtInt(prompt)} prompt tokens were new` : '';
      const knob = prompt > 0 && evald < prompt / 4
        ? 'most of the prompt came from the cache; the rest is the chat model\'s speed (a smaller model helps)'
        : fewerPassages(t);
      return { stage, share, text: `prefill ${pct} of TTFT${what}`, knob };
    }
    case 'queue':
      return { stage, share, text: `waiting for the model ${pct} of TTFT (${fmtMs(ms)}): it was answering another question`, knob: 'shorter answers finish sooner: lower Max answer tokens in Settings' };
    case 'rerank':
      return { stage, share, text: `rerank ${pct} of TTFT`, knob: 'lower Rerank K or the Rerank budget in Settings, or a smaller rerank model' };
    case 'embed':
      return { stage, share, text: `embedding the question ${pct} of TTFT`, knob: 'a smaller embedding model (Models)' };
    case 'search':
      return { stage, share, text: `searching the library ${pct} of TTFT`, knob: 'lower ef_search in Settings' };
    case 'first_decode':
      return { stage, share, text: `the first token itself ${pct} of TTFT (${fmtMs(ms)})`, knob: 'a smaller or better-quantised chat model' };
    default:
      return { stage, share, text: `${stageLabel(`${stage}_ms`)} ${pct} of TTFT`, knob: '' };
  }
}

/** "prefill 87% of TTFT: 645 of 731 prompt tokens were new — fewer passages in the prompt: …". */
export function causeText(t: Trace): string {
  const c = ttftCause(t);
  if (!c) return '';
  return c.knob ? `${c.text} — ${c.knob}` : c.text;
}

/** Prefill speed in tokens per ms from a finished trace (0 when it read too little to tell). */
export function prefillRate(t: Trace): number {
  const ms = val(t, 'prefill_ms');
  const n = t.eval_tokens ?? 0;
  return ms > 0 && n >= 16 ? n / ms : 0;
}
