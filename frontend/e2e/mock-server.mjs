// A stand-in for `lore serve` that follows docs/api.md closely enough to drive the built UI in a browser:
// /?token= → /#token= (bearer tokens only, no cookie), Host/Origin/Sec-Fetch-Site checks, SSE ask stream with stages/sources/tokens/done, progress
// stream, traces, stats, models, settings. It serves ../dist. Used only by e2e/smoke.mjs; the real e2e runs
// against `lore serve`.
//
//   node e2e/mock-server.mjs [port]      (prints http://127.0.0.1:PORT/#token=…)
import { randomBytes } from 'node:crypto';
import { readFileSync, existsSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, normalize } from 'node:path';

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

function sources() {
  return [
    { n: 1, chunk_id: 5, document: 'notes/setup.md', path: '/abs/notes/setup.md', page: 0, heading: 'Intro > Setup', line_start: 3, line_end: 20,
      text: 'Lore stores chunks in SQLite with FTS5 and an HNSW index.\n<img src=/leak?via=passage>', scores: { bm25: 1.2, vector: 0.8, rerank: 0, fused: 0.03 } },
    { n: 2, chunk_id: 6, document: 'notes/stream.md', path: '/abs/notes/stream.md', page: 0, heading: 'Streaming', line_start: 1, line_end: 9,
      text: 'Tokens are flushed as server-sent events.', scores: { bm25: 0.9, vector: 0.7, rerank: 0, fused: 0.02 } },
  ];
}

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

  async function ask(req, res, body) {
    const rid = `req-${++seq}`;
    state.asks.push(body);
    const t0 = performance.now();
    const at = () => Math.round((performance.now() - t0) * 10) / 10;
    let closed = false;
    res.on('close', () => (closed = true));
    const send = sse(res);
    const starts = {};
    const stages = {};
    const stage = async (name, ms, detail, key = `${name}_ms`) => {
      if (closed) return;
      starts[key] = at();
      send('stage', { name, state: 'start', ...(detail ? { detail } : {}) });
      await sleep(ms);
      stages[key] = Math.round((at() - starts[key]) * 10) / 10;
      send('stage', { name, state: 'done', ms: stages[key], ...(name === 'retrieval' ? { detail: { sources: 2 } } : {}) });
    };
    send('trace', { request_id: rid, chat_id: body.chat_id ?? 12 });
    await stage('queue', 5);
    await stage('embed', 20);
    starts.retrieval_ms = at();
    send('stage', { name: 'retrieval', state: 'start' });
    await Promise.all([stage('vector', 15), stage('bm25', 25)]);
    stages.retrieval_ms = at() - starts.retrieval_ms;
    send('stage', { name: 'retrieval', state: 'done', ms: stages.retrieval_ms, detail: { sources: 2 } });
    send('sources', sources());
    await sleep(150); // sources visibly before the first token
    await stage('rerank', 10);
    await stage('prompt_assemble', 5);
    await stage('prefill', prefillMs, { prompt_tokens: 900, cached_tokens: 310, eval_tokens: 590, expected_ms: prefillMs });
    if (closed) return state.cancels.push(rid);
    starts.generate_ms = at();
    send('stage', { name: 'generate', state: 'start' });
    starts.first_decode_ms = at();
    const words = HOSTILE_ANSWER.match(/\S+\s*|\s+/g);
    let first = true;
    for (const w of words) {
      if (closed) return state.cancels.push(rid);
      send('token', { text: w });
      if (first) {
        stages.first_decode_ms = at() - starts.first_decode_ms;
        stages.ttft_ms = at();
        first = false;
      }
      await sleep(tokenDelayMs);
    }
    stages.decode_ms = at() - starts.first_decode_ms;
    stages.total_ms = at();
    const trace = {
      request_id: rid, workspace_id: 1, chat_id: body.chat_id ?? 12, question: body.question,
      version_id: 'model-ab12cd34+embed-ef56ab78+prompt-v1', route: 'qwen2.5-0.5b-q4_0.gguf', fallback_level: 0, fallback_reason: '',
      prompt_tokens: 900, cached_tokens: 310, eval_tokens: 590, context_chunks: 2, embed_cache_hit: false, retrieval_cache_hit: false,
      first_token_at: new Date().toISOString(), stages, stage_starts: starts, decode_tokens: words.length,
      decode_tok_s: Math.round((words.length / (stages.decode_ms / 1000)) * 10) / 10,
    };
    state.traces.unshift(trace);
    send('done', trace);
    res.end();
  }

  async function progress(res) {
    const send = sse(res);
    const total = 6;
    for (let i = 1; i <= total; i++) {
      send('progress', { phase: 'indexing', files_done: i, files_total: total, chunks: i * 7, files_per_s: 4.2, eta_s: (total - i) / 4.2,
        current: `/abs/notes/file${i}.md`, ...(i === 3 ? { error: { path: '/abs/notes/broken.pdf', reason: 'encrypted PDF' } } : {}) });
      await sleep(120);
    }
    send('done', { files: total, chunks: total * 7, errors: 1 });
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
        if (m === 'POST' && /^\/api\/ask\/[^/]+\/cancel$/.test(p)) { state.cancels.push(p); return json(res, 204); }
        if (m === 'POST' && /^\/api\/traces\/[^/]+\/ui$/.test(p)) { state.uiReports.push({ id: decodeURIComponent(p.split('/')[3]), ...body }); return json(res, 204); }
        if (m === 'GET' && p === '/api/workspaces') return json(res, 200, [{ id: 1, name: 'notes', folders: ['/abs/notes'], documents: 6, chunks: 42 }]);
        if (m === 'POST' && p === '/api/workspaces') return json(res, 204);
        if (/^\/api\/workspaces\/[^/]+\/folders$/.test(p)) return json(res, 204);
        if (m === 'POST' && /^\/api\/workspaces\/[^/]+\/index$/.test(p)) return json(res, 204);
        if (m === 'GET' && /^\/api\/workspaces\/[^/]+\/progress$/.test(p)) return progress(res);
        if (m === 'GET' && /^\/api\/workspaces\/[^/]+\/documents$/.test(p)) {
          return json(res, 200, [
            { id: 1, path: '/abs/notes/setup.md', status: 'indexed', error: '', chunks: 12 },
            { id: 2, path: '/abs/notes/broken.pdf', status: 'error', error: 'encrypted PDF', chunks: 0 },
          ]);
        }
        if (m === 'GET' && p === '/api/chats') return json(res, 200, [{ id: 12, title: 'How is the index stored?', created: new Date().toISOString() }]);
        if (m === 'GET' && /^\/api\/chats\/\d+$/.test(p)) {
          return json(res, 200, { id: 12, messages: [{ role: 'user', content: 'How is the index stored?', created: '' }, { role: 'assistant', content: 'In SQLite [1].', request_id: 'req-1', created: '' }] });
        }
        if (m === 'GET' && /^\/api\/chunks\/\d+$/.test(p)) {
          const s = sources().find((x) => x.chunk_id === Number(p.split('/')[3]));
          return s ? json(res, 200, s) : json(res, 404, { error: 'no such chunk' });
        }
        if (m === 'GET' && p === '/api/traces/stats') {
          const st = (p50) => ({ p50, p95: p50 * 1.8, p99: p50 * 2.5, n: 40 });
          return json(res, 200, {
            stages: { ttft_ms: st(760), ui_ttft_ms: st(790), queue_ms: st(0.2), embed_ms: st(9), vector_ms: st(2), bm25_ms: st(3), rerank_ms: st(40), prompt_assemble_ms: st(4), prefill_ms: st(700), first_decode_ms: st(20), paint_ms: st(3) },
            by_bucket: { '0-512': st(300), '512-2048': st(800), '2048+': st(2400) },
            by_fallback: { 0: st(760), 1: st(400) },
            ttft_histogram: [{ le: 250, count: 3 }, { le: 500, count: 9 }, { le: 1000, count: 17 }, { le: 2000, count: 8 }, { le: 4000, count: 2 }, { le: null, count: 1 }],
          });
        }
        if (m === 'GET' && p === '/api/traces') return json(res, 200, state.traces.slice(0, Number(url.searchParams.get('limit') ?? 50)));
        if (m === 'GET' && /^\/api\/traces\/[^/]+$/.test(p)) {
          const id = decodeURIComponent(p.split('/')[3]);
          const t = state.traces.find((x) => x.request_id === id);
          if (!t) return json(res, 404, { error: 'no such trace' });
          const ui = state.uiReports.find((r) => r.id === id);
          return json(res, 200, ui ? { ...t, stages: { ...t.stages, ui_ttft_ms: ui.ui_ttft_ms, paint_ms: ui.paint_ms } } : t);
        }
        if (m === 'GET' && p === '/api/models') {
          return json(res, 200, [
            { path: '/m/qwen2.5-0.5b-q4_0.gguf', name: 'qwen2.5-0.5b', source: 'ollama', architecture: 'qwen2', params: 494032768, quantization: 'Q4_0', size: 352 * 2 ** 20, context_length: 32768, ram_estimate: 600 * 2 ** 20, fits_in_ram: true, kind: 'chat' },
            { path: '/m/llama-70b-q4_k.gguf', name: 'llama-3.1-70b', source: 'file', architecture: 'llama', params: 70.6e9, quantization: 'Q4_K_M', size: 40 * 2 ** 30, context_length: 131072, ram_estimate: 44 * 2 ** 30, fits_in_ram: false, kind: 'chat' },
            { path: '/m/minilm.gguf', name: 'all-MiniLM-L6-v2', source: 'huggingface', architecture: 'bert', params: 22.7e6, quantization: 'F16', size: 45 * 2 ** 20, context_length: 512, ram_estimate: 60 * 2 ** 20, fits_in_ram: true, kind: 'embedding' },
          ]);
        }
        if (m === 'GET' && p === '/api/system') {
          // Shape and values as `lore serve` answered on an AMD EPYC (AVX-512) with the avx512 and avx2 runners built.
          const v = (name, about, opt_in, supported, installed) => ({ name, about, opt_in, supported, installed });
          return json(res, 200, {
            cpu: {
              features: 'avx avx2 avx512bf16 avx512bw avx512cd avx512dq avx512f avx512vbmi avx512vl avx512vnni bmi1 bmi2 cx16 f16c fma lzcnt movbe osxsave popcnt sse3 sse4.1 sse4.2 ssse3',
              variants: [
                v('amx', 'AVX-512 + AMX tiles (Intel Sapphire Rapids and later); ggml uses AMX only for matrices whose input width is a multiple of 2,048', true, false, false),
                v('avx512', 'AVX-512 with VNNI and VBMI (Intel Ice Lake and later, AMD Zen 4 and later)', false, true, true),
                v('avx2', 'x86-64-v3: AVX2, FMA, F16C (Intel Haswell 2013+, AMD Zen)', false, true, true),
                v('sse4', 'x86-64-v2: SSE4.2 (any 64-bit PC of the last 15 years); slow', false, true, false),
              ],
              best: 'avx512', runner: '/opt/lore/bin/lore-runner-avx512', variant: 'avx512',
            },
            loaded: [{ role: 'chat', path: '/m/qwen2.5-0.5b-q4_0.gguf', cpu_variant: 'avx512', runner: { system: 'CPU.0.SSE3=1 CPU.0.SSSE3=1 CPU.0.AVX=1 CPU.0.AVX2=1 CPU.0.F16C=1 CPU.0.FMA=1 CPU.0.BMI2=1 CPU.0.AVX512=1 CPU.0.AVX512_VBMI=1 CPU.0.AVX512_VNNI=1 CPU.0.LLAMAFILE=1 CPU.0.REPACK=1 compiler=cgo(gcc)', weight_buffers: ['CPU_Mapped 207.50 MiB', 'CPU_REPACK 207.33 MiB'] } }],
          });
        }
        if (p === '/api/settings') {
          if (m === 'PUT') { state.settings = body; return json(res, 204); }
          return json(res, 200, state.settings ?? { chat_model: '/m/qwen2.5-0.5b-q4_0.gguf', embed_model: '/m/minilm.gguf', rerank_model: '', top_k: 5, rerank_k: 20, ef_search: 64, context_tokens: 2048, threads: 0, gpu_layers: 0 });
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
