// A stand-in for `lore serve` that follows docs/api.md closely enough to drive the built UI in a browser:
// /?token= → /#token= (bearer tokens only, no cookie), Host/Origin/Sec-Fetch-Site checks, SSE ask stream with stages/sources/tokens/done, progress
// stream, traces, stats, models, settings. It serves ../dist. Used only by e2e/smoke.mjs; the real e2e runs
// against `lore serve`. Every answer's body is the real server's, recorded by e2e/real.mjs into
// e2e/fixtures/real-server.json (see e2e/fixtures.mjs); the mock only paces the streams (a slow prefill, tokens
// of a hostile answer) and keeps what the page sent.
//
//   node e2e/mock-server.mjs [port]      (prints http://127.0.0.1:PORT/#token=…)
import { randomBytes } from 'node:crypto';
import { readFileSync, existsSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, normalize } from 'node:path';
import { loadFixtures } from './fixtures.mjs';

const DIST = new URL('../dist/', import.meta.url).pathname;
const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml', '.png': 'image/png' };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export const HOSTILE_ANSWER =
  'Lore keeps an index in **SQLite** [1] and streams tokens [2].\n\n' +
  'Echoed document text: <img src=/leak?via=html onerror="window.__pwned=1"> ' +
  '![chart](/leak?via=md&d=secret) ![ref][r] [click me](javascript:window.__pwned=2) ' +
  '<svg onload="window.__pwned=3"></svg> <script>window.__pwned=4</script>\n\n' +
  '[r]: /leak?via=ref\n\n' +
  '- step one [1]\n- step two `lore serve` [2]\n';

/** The recorded answers of `lore serve` (e2e/fixtures/real-server.json). */
export const FX = loadFixtures();
const clone = (v) => structuredClone(v);

export function startMockServer({ port = 0, prefillMs = 600, tokenDelayMs = 25 } = {}) {
  const token = randomBytes(12).toString('hex');
  const state = { uiReports: [], leaks: [], asks: [], cancels: [], traces: [] };
  let seq = 0;
  let addr = '';

  const json = (res, status, body, headers = {}) => {
    res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', ...headers });
    res.end(body === undefined ? '' : JSON.stringify(body));
  };
  const readBody = (req) =>
    new Promise((resolve, reject) => {
      let b = '';
      req.on('data', (c) => {
        b += c;
        if (b.length > 1 << 20) reject(new Error('too big'));
      });
      req.on('end', () => resolve(b ? JSON.parse(b) : undefined));
      req.on('error', reject);
    });
  const authed = (req) => req.headers.authorization === `Bearer ${token}`; // like lore serve: never a cookie
  const sse = (res) => {
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', Connection: 'keep-alive' });
    return (event, data) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  };

  // The recorded ask stream, replayed: its events as lore serve sent them, with this request's id, a prefill
  // of prefillMs and the hostile answer's words as tokens.
  async function ask(req, res, body) {
    const rid = `req-${++seq}`;
    state.asks.push(body);
    let closed = false;
    res.on('close', () => (closed = true));
    const send = sse(res);
    let tokensSent = false;
    for (const { event, data } of clone(FX.ask)) {
      if (closed) return state.cancels.push(rid);
      if (event === 'trace') send('trace', { ...data, request_id: rid, chat_id: body.chat_id ?? data.chat_id });
      else if (event === 'token') {
        if (tokensSent) continue;
        tokensSent = true;
        for (const w of HOSTILE_ANSWER.match(/\S+\s*|\s+/g)) {
          if (closed) return state.cancels.push(rid);
          send('token', { text: w });
          await sleep(tokenDelayMs);
        }
      } else if (event === 'done') {
        const trace = { ...data, request_id: rid, question: body.question, chat_id: body.chat_id ?? data.chat_id, first_token_at: new Date().toISOString() };
        state.traces.unshift(trace);
        send('done', trace);
      } else {
        send(event, data);
        if (event === 'sources') await sleep(150); // sources visibly before the first token
        if (event === 'stage' && data.name === 'prefill' && data.state === 'start') await sleep(prefillMs);
      }
    }
    res.end();
  }

  // Like lore serve: `done` with the last summary at once when idle; a run (asked by POST …/index or
  // …/folders) replays the recorded run's events.
  const lastDone = () => clone(FX.progress.find((e) => e.event === 'done')?.data ?? {});
  async function progress(res) {
    const send = sse(res);
    if (!state.run) {
      send('done', lastDone());
      return res.end();
    }
    for (const { event, data } of clone(FX.progress)) {
      send(event, data);
      if (event === 'progress') await sleep(120);
    }
    state.run = false;
    res.end();
  }

  const server = createServer(async (req, res) => {
    try {
      const url = new URL(req.url, 'http://x');
      const host = req.headers.host;
      if (host !== addr.replace('http://', '') && host !== addr.replace('http://127.0.0.1', 'localhost').replace('http://', '')) {
        return json(res, 403, { error: 'bad host' });
      }
      if (req.headers.origin && req.headers.origin !== addr) return json(res, 403, { error: 'bad origin' });
      if (!['', 'same-origin', 'none'].includes(req.headers['sec-fetch-site'] ?? '')) return json(res, 403, { error: 'another site or port' });
      if (url.pathname === '/leak') {
        state.leaks.push(req.url);
        res.writeHead(204);
        return res.end();
      }
      if (url.pathname === '/' && url.searchParams.has('token')) {
        if (url.searchParams.get('token') !== token) return json(res, 401, { error: 'bad token' });
        res.writeHead(303, { Location: `/#token=${token}`, 'Cache-Control': 'no-store' });
        return res.end();
      }
      if (url.pathname.startsWith('/api/')) {
        if (!authed(req)) return json(res, 401, { error: 'unauthorized' });
        const m = req.method;
        const p = url.pathname;
        const body = m === 'POST' || m === 'PUT' ? await readBody(req) : undefined;
        if (m === 'POST' && p === '/api/ask') return ask(req, res, body);
        if (m === 'POST' && p === '/api/prefetch') return json(res, 202, { started: false, reason: 'mock', passages: 0 });
        if (m === 'GET' && p === '/api/prefetch') return json(res, 200, FX['GET /api/prefetch']);
        if (m === 'GET' && p === '/api/prefetch/events') {
          // The status now; the stream stays open as the real one does.
          res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store' });
          return res.write(`event: status\ndata: ${JSON.stringify(FX['GET /api/prefetch'])}\n\n`);
        }
        if (m === 'POST' && /^\/api\/ask\/[^/]+\/cancel$/.test(p)) { state.cancels.push(p); return json(res, 204); }
        if (m === 'POST' && /^\/api\/traces\/[^/]+\/ui$/.test(p)) { state.uiReports.push({ id: decodeURIComponent(p.split('/')[3]), ...body }); return json(res, 204); }
        if (m === 'GET' && p === '/api/workspaces') return json(res, 200, FX['GET /api/workspaces']);
        if (m === 'POST' && p === '/api/workspaces') return json(res, 204);
        if (/^\/api\/workspaces\/[^/]+\/folders$/.test(p)) {
          if (m === 'POST') state.run = true;
          return json(res, 204);
        }
        if (m === 'POST' && /^\/api\/workspaces\/[^/]+\/index$/.test(p)) {
          state.run = true;
          return json(res, 202, { started: true });
        }
        if (m === 'GET' && /^\/api\/workspaces\/[^/]+\/progress$/.test(p)) return progress(res);
        if (m === 'GET' && /^\/api\/workspaces\/[^/]+\/documents$/.test(p)) return json(res, 200, FX['GET /api/workspaces/{ws}/documents']);
        if (m === 'GET' && p === '/api/chats') return json(res, 200, FX['GET /api/chats']);
        if (m === 'GET' && /^\/api\/chats\/\d+$/.test(p)) {
          const c = FX['GET /api/chats/{id}'];
          return c && String(c.id) === p.split('/')[3] ? json(res, 200, c) : json(res, 404, { error: 'no such chat' });
        }
        if (m === 'GET' && /^\/api\/chunks\/\d+$/.test(p)) {
          const c = FX['GET /api/chunks/{id}'][p.split('/')[3]];
          return c ? json(res, 200, c) : json(res, 404, { error: 'no such chunk' });
        }
        if (m === 'GET' && p === '/api/traces/stats') return json(res, 200, FX['GET /api/traces/stats']);
        if (m === 'GET' && p === '/api/traces') return json(res, 200, [...state.traces, ...FX['GET /api/traces']].slice(0, Number(url.searchParams.get('limit') ?? 50)));
        if (m === 'GET' && /^\/api\/traces\/[^/]+$/.test(p)) {
          const id = decodeURIComponent(p.split('/')[3]);
          const t = [...state.traces, FX['GET /api/traces/{id}']].find((x) => x.request_id === id);
          if (!t) return json(res, 404, { error: 'no such trace' });
          const ui = state.uiReports.find((r) => r.id === id);
          return json(res, 200, ui ? { ...t, stages: { ...t.stages, ui_ttft_ms: ui.ui_ttft_ms, paint_ms: ui.paint_ms } } : t);
        }
        if (m === 'GET' && p === '/api/models') return json(res, 200, FX['GET /api/models']);
        if (m === 'GET' && p === '/api/system') return json(res, 200, FX['GET /api/system']);
        if (m === 'GET' && p === '/api/bench/hnsw') return json(res, 200, FX['GET /api/bench/hnsw']);
        if (p === '/api/settings') {
          if (m === 'PUT') { state.settings = body; return json(res, 204); }
          return json(res, 200, state.settings ?? FX['GET /api/settings']);
        }
        return json(res, 404, { error: 'not found' });
      }
      // static files from dist/
      let file = normalize(join(DIST, url.pathname === '/' ? 'index.html' : decodeURIComponent(url.pathname)));
      if (!file.startsWith(DIST) || !existsSync(file) || statSync(file).isDirectory()) file = join(DIST, 'index.html');
      res.writeHead(200, { 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream', 'Cache-Control': 'no-store' });
      res.end(readFileSync(file));
    } catch (e) {
      if (!res.headersSent) json(res, 500, { error: String(e?.message ?? e) });
      else res.end();
    }
  });

  return new Promise((resolve) => {
    server.listen(port, '127.0.0.1', () => {
      addr = `http://127.0.0.1:${server.address().port}`;
      resolve({ url: addr, loginURL: `${addr}/?token=${token}`, token, state, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }) });
    });
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const s = await startMockServer({ port: Number(process.argv[2] ?? 0) });
  console.log(s.loginURL);
}
