// What the mock server (e2e/mock-server.mjs) and the unit tests answer with comes from the real `lore serve`:
// e2e/real.mjs records every JSON endpoint the UI reads, one ask stream and one indexing run's progress
// stream from its server, at the end of its session. With LORE_E2E_RECORD=1 it writes them to
// e2e/fixtures/real-server.json; otherwise it compares their shape with the committed file and fails when
// they differ (a drifted fixture cannot pass unnoticed). Re-record with:
//
//   LORE_E2E_RECORD=1 node e2e/real.mjs
import { readFileSync, readdirSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where the recording lives (a function: under a test runner's module URLs it is never needed). */
export function fixtureFile() {
  return fileURLToPath(new URL('./fixtures/real-server.json', import.meta.url));
}

/**
 * The recorded answers: { "GET /api/…": body, "GET /api/chunks/{id}": {id: body}, ask: [{event, data}],
 * progress: [{event, data}] }.
 */
export function loadFixtures() {
  return JSON.parse(readFileSync(fixtureFile(), 'utf8'));
}

export function writeFixtures(fx) {
  mkdirSync(dirname(fixtureFile()), { recursive: true });
  writeFileSync(fixtureFile(), JSON.stringify(fx, null, 1) + '\n');
}

/**
 * The JSON fields the server's Go types tag `omitempty` (app/ and its packages): whether one is in an
 * answer depends on the run (a prefetch that left passages out, say), so one recording may lack it.
 */
export function omitEmpty(appDir = fileURLToPath(new URL('../../app', import.meta.url))) {
  const names = new Set();
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const f = join(dir, e.name);
      if (e.isDirectory()) walk(f);
      else if (e.name.endsWith('.go') && !e.name.endsWith('_test.go')) {
        for (const m of readFileSync(f, 'utf8').matchAll(/json:"([A-Za-z0-9_]+),[^"]*omitempty/g)) names.add(m[1]);
      }
    }
  };
  walk(appDir);
  return names;
}

/** Parses a text/event-stream body into [{event, data}] (data JSON-decoded). */
export function parseSSE(body) {
  return body.split(/\r?\n\r?\n/).flatMap((block) => {
    const event = /^event: ?(.*)$/m.exec(block)?.[1];
    const data = [...block.matchAll(/^data: ?(.*)$/gm)].map((m) => m[1]).join('\n');
    return event && data ? [{ event, data: JSON.parse(data) }] : [];
  });
}

/**
 * Records the server's answers. `api(method, path, body)` returns parsed JSON; `raw(method, path, body)`
 * returns the response text. Arrays are cut to a few entries; `replace` maps machine-specific strings
 * (temporary folders) to stable ones.
 */
export async function recordFixtures({ api, raw, workspace, question, progress, replace = [] }) {
  const fx = {};
  const get = async (path, key = path) => (fx[`GET ${key}`] = await api('GET', path));
  const ws = encodeURIComponent(workspace);
  await get('/api/workspaces');
  await get(`/api/workspaces/${ws}/documents`, '/api/workspaces/{ws}/documents');
  const chats = await get(`/api/chats?workspace=${ws}`, '/api/chats');
  if (chats.length) await get(`/api/chats/${chats[0].id}`, '/api/chats/{id}');
  await get('/api/models');
  await get('/api/system');
  await get('/api/prefetch');
  await get('/api/settings');
  await get('/api/bench/hnsw');
  // One answer's stream, as the page reads it.
  fx.ask = parseSSE(await raw('POST', '/api/ask', { question, workspace }));
  // The passages of its sources, by chunk id (the passage view fetches them).
  const chunks = {};
  for (const s of fx.ask.find((e) => e.event === 'sources')?.data ?? []) chunks[s.chunk_id] = await api('GET', `/api/chunks/${s.chunk_id}`);
  fx['GET /api/chunks/{id}'] = chunks;
  const traces = await get('/api/traces?limit=50', '/api/traces');
  if (traces.length) await get(`/api/traces/${encodeURIComponent(traces[0].request_id)}`, '/api/traces/{id}');
  await get('/api/traces/stats?window=1h', '/api/traces/stats');
  fx.progress = progress ?? [];
  // Keep the file small: a few entries of each list.
  for (const k of ['GET /api/workspaces/{ws}/documents', 'GET /api/traces', 'GET /api/chats']) fx[k] = fx[k].slice(0, 6);
  fx.progress = thin(fx.progress);
  let text = JSON.stringify(fx);
  for (const [from, to] of replace) text = text.split(JSON.stringify(from).slice(1, -1)).join(JSON.stringify(to).slice(1, -1));
  return JSON.parse(text);
}

/** Progress events thinned to at most 12 (first, last and evenly spaced ones), `done` kept. */
function thin(events) {
  const progress = events.filter((e) => e.event === 'progress');
  const rest = events.filter((e) => e.event !== 'progress');
  if (progress.length <= 12) return events;
  const keep = new Set([0, progress.length - 1]);
  for (let i = 1; i < 11; i++) keep.add(Math.round((i * (progress.length - 1)) / 11));
  return [...progress.filter((_, i) => keep.has(i)), ...rest];
}

// ------------------------------------------------------------------------------------------------- shape

const FIELD = /^[a-z_][a-z0-9_]*$/;
/** Objects whose keys are data, not fields (stage names vary by request, groups by run). */
const MAPS = new Set(['stages', 'stage_starts', 'by_bucket', 'by_fallback', 'by_prefetch', 'by_route']);

/**
 * The shape of a JSON value: primitives by type, objects by field, arrays by the union of their items'
 * shapes; objects keyed by data (non-identifier keys, or `stages`) by the union of their values.
 */
export function shapeOf(v, key = '') {
  if (v === null) return 'null';
  if (Array.isArray(v)) return { '[]': v.map((x) => shapeOf(x)).reduce(union, undefined) ?? 'any' };
  if (typeof v === 'object') {
    const keys = Object.keys(v);
    if (MAPS.has(key) || keys.some((k) => !FIELD.test(k))) {
      return { '{}': keys.map((k) => shapeOf(v[k], k)).reduce(union, undefined) ?? 'any' };
    }
    return Object.fromEntries(keys.sort().map((k) => [k, shapeOf(v[k], k)]));
  }
  return typeof v;
}

function kinds(s) {
  return typeof s === 'string' ? s.split('|') : [];
}

function union(a, b) {
  if (a === undefined || a === 'any') return b;
  if (b === undefined || b === 'any') return a;
  if (typeof a === 'string' && typeof b === 'string') return [...new Set([...kinds(a), ...kinds(b)])].sort().join('|');
  if (typeof a === 'string' || typeof b === 'string') {
    // null next to an object/array: keep the structure, note the null
    const [s, o] = typeof a === 'string' ? [a, b] : [b, a];
    return s === 'null' ? { ...o, '?null': true } : 'mixed';
  }
  if ('[]' in a && '[]' in b) return { '[]': union(a['[]'], b['[]']) };
  if ('{}' in a && '{}' in b) return { '{}': union(a['{}'], b['{}']) };
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = k in out ? union(out[k], v) : v;
  return out;
}

/**
 * Where the fixture's shape is not the server's: fields the fixture has that the server's answer lacks,
 * and type differences. Fields only the server sends are listed in `added` (new fields are no drift of
 * the mock, but worth re-recording). Fields named in `optional` (the server omits them when empty) may be
 * missing from one answer.
 */
export function shapeDiff(fixture, live, path = '$', optional = new Set()) {
  const problems = [];
  const added = [];
  const walk = (a, b, p) => {
    if (a === 'any' || b === 'any' || a === undefined || b === undefined) return;
    if (typeof a === 'string' || typeof b === 'string') {
      if (typeof a !== typeof b) problems.push(`${p}: fixture ${brief(a)}, server ${brief(b)}`);
      else if (!kinds(b).some((k) => kinds(a).includes(k))) problems.push(`${p}: fixture ${a}, server ${b}`);
      return;
    }
    if ('[]' in a || '[]' in b) {
      if (!('[]' in a && '[]' in b)) problems.push(`${p}: fixture ${brief(a)}, server ${brief(b)}`);
      else walk(a['[]'], b['[]'], `${p}[]`);
      return;
    }
    if ('{}' in a || '{}' in b) {
      if (!('{}' in a && '{}' in b)) problems.push(`${p}: fixture ${brief(a)}, server ${brief(b)}`);
      else walk(a['{}'], b['{}'], `${p}{}`);
      return;
    }
    for (const k of Object.keys(a)) {
      if (k === '?null') continue;
      if (!(k in b)) {
        if (!optional.has(k)) problems.push(`${p}.${k}: in the fixture, not in the server's answer`);
      }
      else walk(a[k], b[k], `${p}.${k}`);
    }
    for (const k of Object.keys(b)) if (k !== '?null' && !(k in a)) added.push(`${p}.${k}`);
  };
  walk(fixture, live, path);
  return { problems, added };
}

function brief(s) {
  if (typeof s === 'string') return s;
  if ('[]' in s) return 'array';
  return 'object';
}

/** Compares two recordings entry by entry; the ask and progress streams by event type. */
export function compareRecordings(fixture, live, optional = new Set()) {
  const problems = [];
  const added = [];
  const byEvent = (events) => {
    const out = {};
    for (const e of events ?? []) {
      const k = e.event === 'stage' ? `stage ${e.data.name} ${e.data.state}` : e.event;
      out[k] = union(out[k], shapeOf(e.data));
    }
    return out;
  };
  for (const key of Object.keys(fixture)) {
    if (!(key in live)) {
      problems.push(`${key}: not recorded from the server`);
      continue;
    }
    const [a, b] = key === 'ask' || key === 'progress' ? [byEvent(fixture[key]), byEvent(live[key])] : [shapeOf(fixture[key]), shapeOf(live[key])];
    const d = shapeDiff(a, b, key, optional);
    problems.push(...d.problems);
    added.push(...d.added);
  }
  return { problems, added };
}

/**
 * Records the fixtures from a running `lore serve` ({base, token}) and writes them (LORE_E2E_RECORD=1) or
 * checks the committed ones against them. Throws on drift, with what differs.
 */
export async function checkFixtures(server, opts) {
  const call = async (method, path, body) => {
    const r = await fetch(server.base + path, {
      method,
      headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
    return text;
  };
  const live = await recordFixtures({
    ...opts,
    api: async (m, p, b) => {
      const t = await call(m, p, b);
      return t ? JSON.parse(t) : undefined;
    },
    raw: call,
  });
  if (process.env.LORE_E2E_RECORD === '1') {
    writeFixtures(live);
    return { written: fixtureFile(), problems: [], added: [] };
  }
  let fixture;
  try {
    fixture = loadFixtures();
  } catch (e) {
    throw new Error(`no fixtures (${e.message}): record them with LORE_E2E_RECORD=1 node e2e/real.mjs`);
  }
  const d = compareRecordings(fixture, live, omitEmpty());
  if (d.problems.length) {
    throw new Error(`the mock's fixtures no longer match lore serve (re-record: LORE_E2E_RECORD=1 node e2e/real.mjs):\n  ${d.problems.join('\n  ')}`);
  }
  return d;
}
