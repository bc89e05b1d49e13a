// End-to-end test of the built UI against the real `lore serve` (not the mock): synthetic tiny models
// (`lore synth-model`), a generated library with one hostile document, `lore index`, `lore serve` on a free
// loopback port, and Debian's chromium driving the page.
//
// Checked: login through #token= (sessionStorage, no cookie; another loopback port gets no credential and is
// refused); an answer shows a live stage in its placeholder, then its sources, then
// streamed tokens; the latency panel draws every waterfall stage; the UI's own TTFT reaches the stored trace;
// history lists and reopens the chat; Stop cancels a long generation on the server; the hostile document's
// XSS and exfiltration payloads reach the DOM (question, passage view, and — with a second server that has no
// chat model, so the answer quotes the passages — the rendered Markdown answer) without running anything or
// reaching a canary HTTP server on loopback; adding a folder in the Library shows the progress bar to the end.
// And what a new user trips over (issue 35): a page without its token shows only the guidance; the chat follows a
// streaming answer unless the user scrolls up ("Jump to latest"); a row of Recent requests brings "This answer"
// into view; Remove asks first; add-folder errors in plain words; the read-ahead line never goes backwards; a chat
// reopened from History shows its sources, TTFT line and Latency link; Stop then Retry stays one chat, the stopped
// answer marked stopped.
//
//   node e2e/real.mjs        (make test-e2e; needs `make ui build` first)
//
// Env: LORE_BIN (default ../bin/lore), LORE_E2E_SCREENSHOTS (artefacts: screenshots, server logs; default
// ../test-artifacts/e2e), LORE_E2E_KEEP=1 keeps the temporary folder. Prints `N passed, N failed`.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { launch, watchPage } from './browser.mjs';
import { steps } from './steps.mjs';
import { checkFixtures, parseSSE } from './fixtures.mjs';
import { emptyChat, groupedTables, libraryIdle, screenshotViews, settingsRoundTrip } from './views.mjs';

const repo = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const LORE = resolve(process.env.LORE_BIN ?? join(repo, 'bin/lore'));
const ART = resolve(process.env.LORE_E2E_SCREENSHOTS ?? join(repo, 'test-artifacts/e2e'));
process.env.LORE_E2E_SCREENSHOTS = ART; // browser.mjs saves screenshots there
mkdirSync(ART, { recursive: true });
ignoreArtifacts(ART);

for (const [f, hint] of [[LORE, 'make build'], [join(repo, 'frontend/dist/index.html'), 'make ui']]) {
  if (!existsSync(f)) {
    console.error(`${f} is missing: run \`${hint}\` first`);
    process.exit(2);
  }
}

const ANSWER_TOKENS = 40; // max_tokens for ordinary answers: enough to see streaming, quick on 2 cores
const LONG_TOKENS = 2500; // for the Stop test: far more than the test waits for (prompt + this must fit the 4096 context)
const ADDED_FILES = 150; // the folder added through the UI: enough files for the progress bar to move
const T_ANSWER = 120_000;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls fn until it returns something other than undefined, for at most timeoutMs. */
async function until(fn, timeoutMs) {
  for (const end = Date.now() + timeoutMs; Date.now() < end; await sleep(100)) {
    const v = await fn();
    if (v !== undefined) return v;
  }
  throw new Error(`nothing after ${timeoutMs} ms`);
}
const started = Date.now();
const { step, finish, failures } = steps();

// ---------------------------------------------------------------------------------------------- fixtures

/** A loopback HTTP server that records every request: nothing in the page may ever reach it. */
function startCanary() {
  const hits = [];
  const srv = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'image/png', 'access-control-allow-origin': '*' });
    res.end();
  });
  return new Promise((r) => srv.listen(0, '127.0.0.1', () => r({ port: srv.address().port, hits, close: () => srv.close() })));
}

/**
 * A page on another loopback port, as any other local service would be: it records the headers the browser
 * sends it and offers `__tryLore()`, which calls Lore's API from that origin with credentials.
 */
function startRecorder(loreBase) {
  const hits = [];
  const page = `<!doctype html><script>window.__tryLore = async () => {
    try { const r = await fetch(${JSON.stringify(loreBase)} + '/api/workspaces', { credentials: 'include' }); return r.status; }
    catch { return 'blocked'; }
  };</script>`;
  const srv = createServer((req, res) => {
    hits.push({ url: req.url, cookie: req.headers.cookie, authorization: req.headers.authorization });
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(page);
  });
  return new Promise((r) => srv.listen(0, '127.0.0.1', () => r({ base: `http://127.0.0.1:${srv.address().port}`, hits, close: () => srv.close() })));
}

const TOPICS = {
  'volcanoes.md': ['Volcanoes', 'A volcano erupts when magma rises through cracks in the crust. Basaltic lava flows reach about 1200 degrees Celsius and cool into black rock. Ash clouds from explosive eruptions can ground aircraft for days.'],
  'sourdough.md': ['Sourdough', 'Sourdough bread rises with a wild yeast starter fed with flour and water. The starter also holds lactic acid bacteria, which give the crumb its sour taste. Bakers proof the dough overnight in a cool room.'],
  'honeybees.md': ['Honeybees', 'A honeybee colony has one queen, thousands of workers and a few hundred drones. Foragers perform a waggle dance to tell their sisters the direction and distance of flowers. Honey is nectar dried by fanning wings.'],
  'lighthouses.txt': ['Lighthouses', 'The lighthouse keeper trimmed the wick every night and wound the clockwork that turned the lens. A Fresnel lens bends the lamp light into a narrow beam visible thirty kilometres out to sea.'],
  'chess.md': ['Chess openings', 'The Sicilian Defence answers the king pawn opening with the c-pawn. The Queen Gambit offers a pawn to gain the centre. Opening theory fills whole libraries, but principles matter more: develop, castle, control the centre.'],
  'tides.md': ['Tides', 'Tides rise and fall twice a day because the moon pulls the oceans into two bulges. Spring tides follow the full and new moon; neap tides come at the quarter moons, when sun and moon pull at right angles.'],
  'glaciers.md': ['Glaciers', 'A glacier forms where snow piles up faster than it melts and compacts into ice. Glaciers carve U-shaped valleys and leave moraines of rubble. Many alpine glaciers have lost half their volume in a century.'],
  'violins.txt': ['Violin making', 'A luthier carves the violin top from spruce and the back from maple. The sound post, a small dowel inside the body, carries vibration from the top to the back. Varnish recipes were closely guarded secrets.'],
  'coral.md': ['Coral reefs', 'Coral reefs are built by tiny polyps that live with algae inside their tissue. When the water gets too warm the polyps expel the algae and the coral bleaches white. Reefs shelter a quarter of all marine species.'],
  'espresso.md': ['Espresso', 'An espresso machine forces water at nine bars of pressure through finely ground coffee. A good shot takes about twenty-five seconds and carries a layer of golden crema. Grind size is the first thing baristas adjust.'],
  'bicycles.md': ['Bicycle gears', 'A derailleur moves the chain between sprockets to change the gear ratio. Low gears make hills easier; high gears give speed on the flat. Hub gears hide the mechanism inside the rear wheel and need little care.'],
  'aurora.txt': ['Northern lights', 'The aurora borealis glows when charged particles from the solar wind hit oxygen and nitrogen high in the atmosphere. Green light comes from oxygen at about one hundred kilometres; rare red auroras glow higher up.'],
};

/** The hostile document: script, event handlers, markdown and reference-style image exfiltration, javascript: links. */
function hostileDoc(port) {
  const leak = (d) => `http://127.0.0.1:${port}/leak?d=${d}`;
  return [
    '# Zanzibar ledger memo',
    '',
    `[exfil]: ${leak('reference-image')}`,
    '',
    `The zanzibar ledger lists quarterly figures. <script>window.__pwned='script';alert('script')</script>`,
    `<img src=x onerror="window.__pwned='img';alert('img')"> <svg onload="window.__pwned='svg'"></svg>`,
    `![chart](${leak('inline-image')}) ![logo][exfil] <img src="${leak('html-image')}">`,
    `[Open the ledger](javascript:window.__pwned='link') <a href="javascript:window.__pwned='a'">ledger</a> [mirror](${leak('link')})`,
    `<iframe src="javascript:parent.__pwned='iframe'"></iframe> <div style="background:url(${leak('css')})">x</div>`,
    '',
  ].join('\n');
}

function run(cmd, args, opts = {}) {
  return new Promise((res, rej) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    p.on('error', rej);
    p.on('exit', (code) => (code === 0 ? res(out) : rej(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${err.slice(-2000)}`))));
  });
}

/** Starts `lore serve`; resolves with its URL (first stdout line), token and an API helper. */
function startServe(name, args) {
  return new Promise((res, rej) => {
    const log = createWriteStream(join(ART, `${name}.log`));
    const p = spawn(LORE, ['serve', '--addr', '127.0.0.1:0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    p.stderr.pipe(log);
    const timer = setTimeout(() => rej(new Error(`${name}: no URL within 60 s`)), 60_000);
    p.on('exit', (code) => rej(new Error(`${name} exited (${code}) before printing its URL; see ${name}.log`)));
    const lines = createInterface({ input: p.stdout });
    lines.once('line', (line) => {
      clearTimeout(timer);
      p.stdout.pipe(log);
      const url = new URL(line.trim());
      const token = new URLSearchParams(url.hash.slice(1)).get('token');
      if (!token) {
        rej(new Error(`${name}: no #token= in the printed URL ${line}`));
        return;
      }
      const base = url.origin;
      const api = async (method, path, body) => {
        const r = await fetch(base + path, {
          method,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await r.text();
        if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
        return text ? JSON.parse(text) : undefined;
      };
      const stop = async () => {
        if (p.exitCode !== null) return;
        p.kill('SIGTERM');
        for (let i = 0; i < 100 && p.exitCode === null; i++) await sleep(100);
        if (p.exitCode === null) p.kill('SIGKILL');
      };
      res({ url: line.trim(), base, token, api, stop, proc: p });
    });
  });
}

// ----------------------------------------------------------------------------------------- page helpers

/** Installed before any page script: records what the page shows over time and what must never happen. */
function pageProbe() {
  window.__csp = [];
  document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
  // The bodies of the progress streams the page reads, as the server sent them (filled in when each ends).
  window.__progressStreams = [];
  const realFetch = window.fetch;
  window.fetch = async (input, init) => {
    const res = await realFetch(input, init);
    const url = new URL(input instanceof Request ? input.url : String(input), location.href);
    if (/^\/api\/workspaces\/[^/]+\/progress$/.test(url.pathname)) {
      // Read chunk by chunk: the page aborts a stream once it has what it needs, and the copy with it.
      const rec = { text: '', ended: false };
      window.__progressStreams.push(rec);
      const rd = res.clone().body.getReader();
      const dec = new TextDecoder();
      (async () => {
        try {
          for (let r = await rd.read(); !r.done; r = await rd.read()) rec.text += dec.decode(r.value, { stream: true });
        } catch { /* aborted: keep what arrived */ }
        rec.ended = true;
      })();
    }
    return res;
  };
  // One snapshot per change of the newest answer: stage shown, sources shown, answer length.
  window.__tl = [];
  // Every text the read-ahead line under the box showed ('' while hidden), in order.
  window.__ra = [];
  const snap = () => {
    const ra = document.querySelector('[data-testid="read-ahead"]');
    const raText = ra && !ra.hidden ? ra.textContent : '';
    if (window.__ra[window.__ra.length - 1] !== raText) window.__ra.push(raText);
    const turns = document.querySelectorAll('[data-testid="turn"]');
    const turn = turns[turns.length - 1];
    if (turn) {
      const ph = turn.querySelector('[data-testid="answer-placeholder"]');
      const s = {
        turn: turns.length,
        stage: ph && !ph.hidden ? ph.getAttribute('data-stage') || '' : null,
        label: turn.querySelector('[data-testid="answer-stage"]')?.textContent ?? '',
        sources: !turn.querySelector('[data-testid="sources"]')?.hidden,
        answer: (turn.querySelector('[data-testid="answer"]')?.textContent ?? '').trim().length,
        t: performance.now(),
      };
      const last = window.__tl[window.__tl.length - 1];
      if (!last || last.turn !== s.turn || last.stage !== s.stage || last.label !== s.label || last.sources !== s.sources || last.answer !== s.answer) {
        window.__tl.push(s);
      }
    }
  };
  new MutationObserver(snap).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
}

/** Console errors and page errors, apart from failed same-origin API calls (listed separately). */
function watch(page, origin) {
  const problems = watchPage(page);
  const apiFailures = [];
  const dialogs = [];
  page.on('dialog', (d) => {
    dialogs.push(`${d.type()}: ${d.message()}`);
    void d.dismiss().catch(() => undefined);
  });
  page.on('requestfailed', (r) => {
    if (!r.url().startsWith(origin)) problems.push(`request to ${r.url()} failed: ${r.failure()?.errorText}`);
  });
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(origin) && !u.startsWith('data:')) problems.push(`request to another origin: ${u}`);
  });
  page.on('console', (m) => {
    // "Failed to load resource: 404" for an API call is the page's own error handling, not injected code.
    if (/^Failed to load resource/.test(m.text()) && (m.location()?.url ?? '').startsWith(origin + '/api/')) {
      apiFailures.push(`${m.text()} ${m.location().url}`);
      const i = problems.findIndex((p) => p.includes(m.text()));
      if (i >= 0) problems.splice(i, 1);
    }
  });
  return { problems, apiFailures, dialogs };
}

async function timeline(page, turn) {
  return (await page.evaluate(() => window.__tl)).filter((s) => s.turn === turn);
}

/** Asks a question in the chat view and waits until the answer is finished (or failed). */
async function ask(page, question, { wait = true } = {}) {
  const tid = (id) => page.getByTestId(id);
  const turns = await tid('turn').count();
  await page.evaluate(() => (window.__tl = []));
  await tid('question-input').fill(question);
  await tid('submit').click();
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid="turn"]').length > n, turns).catch(async (e) => {
    const st = await page.evaluate(() => ({
      input: document.querySelector('[data-testid="question-input"]')?.value,
      submitDisabled: document.querySelector('[data-testid="submit"]')?.disabled,
      hint: document.querySelector('[data-testid="chat-hint"]')?.textContent,
      readAhead: document.querySelector('[data-testid="read-ahead"]')?.textContent,
      turns: document.querySelectorAll('[data-testid="turn"]').length,
    }));
    throw new Error(`no new turn after Ask: ${JSON.stringify(st)}\n${e.message}`);
  });
  const turn = turns + 1;
  if (wait) await waitAnswer(page, turn);
  return turn;
}

async function waitAnswer(page, turn) {
  await page.waitForFunction(
    (n) => {
      const t = document.querySelectorAll('[data-testid="turn"]')[n - 1];
      return t && t.classList.contains('done');
    },
    turn,
    { timeout: T_ANSWER },
  );
  const err = await page.getByTestId('turn').nth(turn - 1).getByTestId('answer-error');
  if (await err.isVisible()) throw new Error(`the answer failed: ${await err.textContent()}`);
}

/** Runs fn with these settings changed on the server, and puts the earlier ones back whatever happens. */
async function withSettings(server, patch, fn) {
  const before = await server.api('GET', '/api/settings');
  await server.api('PUT', '/api/settings', { ...before, ...patch });
  try {
    return await fn();
  } finally {
    await server.api('PUT', '/api/settings', before);
  }
}

/** The stored trace of the newest request with this question. */
async function traceOf(server, question, pred = () => true, timeoutMs = 15_000) {
  let last;
  try {
    return await until(async () => {
      last = (await server.api('GET', '/api/traces?limit=20')).find((t) => t.question === question.trim());
      return last && pred(last) ? last : undefined;
    }, timeoutMs);
  } catch {
    throw new Error(`no matching trace for ${JSON.stringify(question)}; last seen ${JSON.stringify(last)?.slice(0, 400)}`);
  }
}

/** What hostile content must never achieve in the page. */
async function assertInert(page, canary, { dialogs, problems }) {
  await page.waitForTimeout(1500); // let any image/frame load or handler fire
  const state = await page.evaluate(() => ({
    pwned: window.__pwned,
    csp: window.__csp,
    imgs: [...document.images].map((i) => i.src),
    frames: document.querySelectorAll('iframe, frame, object, embed').length,
    scripts: [...document.scripts].map((s) => s.src || `inline:${s.textContent.slice(0, 40)}`),
    // (an empty style="" is what Playwright's fill() leaves on the textarea)
    handlers: [...document.querySelectorAll('[onerror], [onload], [onclick], [onmouseover], [style]:not([style=""])')].map((e) => e.outerHTML.replace(/>[^]*/, ">").slice(0, 300)),
    hrefs: [...document.querySelectorAll('[href], [src], [action], [formaction]')]
      .map((e) => e.getAttribute('href') ?? e.getAttribute('src') ?? e.getAttribute('action') ?? e.getAttribute('formaction'))
      .filter((u) => u && !u.startsWith('#') && !u.startsWith('./') && !u.startsWith('/') && !u.startsWith(location.origin) && !u.startsWith('data:')),
  }));
  assert.equal(state.pwned, undefined, `injected code ran: window.__pwned = ${state.pwned}`);
  assert.deepEqual(dialogs, [], 'a dialog opened');
  assert.deepEqual(canary.hits, [], 'the canary server on loopback was contacted');
  assert.deepEqual(state.imgs, [], 'an image element reached the page');
  assert.equal(state.frames, 0, 'a frame/object reached the page');
  assert.ok(state.scripts.every((s) => s.startsWith(new URL(page.url()).origin)), `foreign script: ${state.scripts}`);
  assert.deepEqual(state.handlers, [], 'an element with an inline handler or style reached the page');
  assert.deepEqual(state.hrefs, [], 'a foreign or javascript: URL reached the page');
  assert.deepEqual(state.csp, [], 'CSP violations (something tried to load or run)');
  assert.deepEqual(problems, [], 'console/page errors');
}

// ------------------------------------------------------------------------------------------------ setup

const tmp = mkdtempSync(join(tmpdir(), 'lore-e2e-'));
const canary = await startCanary();
const M = { chat: join(tmp, 'chat.gguf'), fast: join(tmp, 'fast.gguf'), embed: join(tmp, 'embed.gguf') };
const LIB = join(tmp, 'library');
const ADDED = join(tmp, 'added folder');
const LIB2 = join(tmp, 'library2');
const HOSTILE = 'zanzibar-ledger.md';
let server;
let server2;
let browser;

try {
  await step('fixtures: synthetic models, library, index, lore serve', async () => {
    await run(LORE, ['synth-model', '--shape', 'tiny', '--out', M.chat]);
    await run(LORE, ['synth-model', '--shape', 'tiny', '--embedding', '--seed', '2', '--out', M.embed]);
    await run(LORE, ['synth-model', '--shape', 'tiny', '--seed', '4', '--out', M.fast]);
    for (const d of [LIB, ADDED, LIB2]) mkdirSync(d, { recursive: true });
    for (const [name, [title, body]] of Object.entries(TOPICS)) {
      writeFileSync(join(LIB, name), name.endsWith('.md') ? `# ${title}\n\n${body}\n` : `${title}\n\n${body}\n`);
    }
    writeFileSync(join(LIB, HOSTILE), hostileDoc(canary.port));
    const fruit = ['apple', 'pear', 'plum', 'cherry', 'quince', 'apricot', 'medlar', 'damson'];
    for (let i = 0; i < ADDED_FILES; i++) {
      const f = fruit[i % fruit.length];
      writeFileSync(join(ADDED, `orchard-${String(i).padStart(3, '0')}.md`),
        `# Orchard row ${i}\n\nRow ${i} of the orchard holds ${f} trees pruned in late winter. ` +
        `The ${f} harvest of row ${i} is logged by weight, with notes on frost, pests and the pickers on duty.\n`);
    }
    writeFileSync(join(LIB2, HOSTILE), hostileDoc(canary.port));
    writeFileSync(join(LIB2, 'weather.md'), '# Weather\n\nThe weather station logs rain, wind and temperature every hour.\n');
    writeFileSync(join(LIB2, 'broken.pdf'), '%PDF-1.4\nnot really a PDF\n'); // a per-file error for the Library
    // A Word file cut short and bytes that are no document at all: listed, never silently left out (issue 35, 15).
    writeFileSync(join(LIB2, 'broken.docx'), Buffer.concat([Buffer.from('PK\x03\x04\x14\x00\x00\x00'), randomBytes(2000)]));
    writeFileSync(join(LIB2, 'blob.bin'), randomBytes(4096));
    const data = join(tmp, 'data');
    const out = await run(LORE, ['index', '--data', data, '--embed-model', M.embed, LIB]);
    assert.match(out, /13 indexed/, out);
    server = await startServe('serve', ['--data', data, '--model', M.chat, '--fast-model', M.fast, '--embed-model', M.embed]);
    await server.api('PUT', '/api/settings', { max_tokens: ANSWER_TOKENS });
    const ws = await server.api('GET', '/api/workspaces');
    assert.equal(ws.find((w) => w.name === 'default')?.documents, 13, JSON.stringify(ws));
  });
  if (!server) throw new Error('no server: cannot go on');

  browser = await launch();
  const page = await browser.newPage();
  const watched = watch(page, server.base);
  await page.addInitScript(pageProbe);
  const tid = (id) => page.getByTestId(id);
  const lastTurn = () => tid('turn').last();

  await step('login: #token= goes to sessionStorage, leaves the address bar, sets no cookie', async () => {
    await page.goto(server.url);
    assert.equal(new URL(page.url()).search, '');
    assert.equal(new URL(page.url()).hash, '');
    await tid('workspace-select').locator('option[value="default"]').waitFor({ state: 'attached' });
    // The transport is the page's business, not the user's: no "browser" badge in the header (issue 35, 16).
    assert.equal(await tid('transport-kind').count(), 0);
    assert.equal(await page.locator('.app').getAttribute('data-transport'), 'http');
    assert.doesNotMatch(await page.locator('header').textContent(), /browser/);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('lore_token')), server.token);
    assert.deepEqual(await browser.context.cookies(), [], 'the server or page set a cookie');
    // A reload of the tab keeps working with the stored token.
    await page.reload();
    await tid('workspace-select').locator('option[value="default"]').waitFor({ state: 'attached' });
  });

  await step('the credential stays on its port: another loopback port gets nothing and cannot use the API', async () => {
    const other = await startRecorder(server.base);
    try {
      const p2 = await browser.newPage();
      await p2.goto(`${other.base}/`);
      // The page on the other port tries the API: no cookie rides along, and it cannot read the token.
      const probe = await p2.evaluate(async () => ({
        stored: sessionStorage.getItem('lore_token'),
        status: await window.__tryLore(),
      }));
      await p2.close();
      assert.equal(probe.stored, null, 'the other origin can read the token');
      assert.ok(probe.status === 'blocked' || probe.status >= 400, `the other port's fetch got ${probe.status}`);
      assert.ok(other.hits.length > 0, 'the other port was not visited');
      for (const h of other.hits) {
        assert.ok(!(h.cookie ?? '').includes(server.token) && !(h.authorization ?? '').includes(server.token),
          `the other port received the token: ${JSON.stringify(h)}`);
      }
    } finally {
      other.close();
    }
  });

  await step('without its token the page shows only the guidance: no views, no "create a workspace", no "none" (issue 35, 13)', async () => {
    const p2 = await browser.context.newPage(); // a new tab: no token in its sessionStorage
    try {
      await p2.goto(`${server.base}/`);
      await p2.getByTestId('global-error').waitFor({ state: 'visible' });
      const text = await p2.getByTestId('global-error-text').textContent();
      console.log(`     ${text}`);
      assert.match(text, /access token.*lore serve.*#token=/);
      assert.doesNotMatch(text, /`/);
      assert.equal(await p2.locator('main').isVisible(), false, 'the views show beside the guidance');
      assert.equal(await p2.getByTestId('workspace-select').isVisible(), false, 'the workspace menu shows');
      assert.equal(await p2.getByText(/Create a workspace/).count(), 0);
      assert.equal(await p2.locator('option').filter({ hasText: /^none$/ }).count(), 0);
      await browser.screenshot(p2, 'e2e-no-token');
    } finally {
      await p2.close();
    }
  });

  const Q1 = 'How hot is the lava when a volcano erupts?';
  const QTYPED = 'How long does a good espresso shot take?';
  let turn1 = 0;
  await step('ask: live stage in the placeholder → sources → streamed tokens', async () => {
    turn1 = await ask(page, Q1);
    const tl = await timeline(page, turn1);
    const iStage = tl.findIndex((s) => s.stage);
    const iSources = tl.findIndex((s) => s.sources);
    const iToken = tl.findIndex((s) => s.answer > 0);
    const lengths = new Set(tl.filter((s) => s.answer > 0).map((s) => s.answer));
    const stages = [...new Set(tl.map((s) => s.stage).filter(Boolean))];
    console.log(`     answer: ${JSON.stringify(((await lastTurn().getByTestId('answer').textContent()) ?? '').slice(0, 200))}`);
    console.log(`     stages shown: ${stages.join(' → ')}; ${lengths.size} answer updates; labels: ${[...new Set(tl.map((s) => s.label))].join(' | ')}`);
    assert.ok(iStage >= 0, 'the placeholder never showed a stage');
    assert.ok(stages.some((s) => ['queue', 'embed', 'retrieval', 'vector', 'bm25', 'prompt_assemble', 'prefill'].includes(s)), `stages ${stages}`);
    // The page is sampled once a frame: a fast retrieval can land in the same frame as the stage
    // that follows it, and a prompt read while typing can bring the first token in the frame that
    // shows the sources; what must never be seen is a token before the sources.
    assert.ok(iStage < iToken, `no stage shown before the first token (${iStage}, ${iToken})`);
    assert.ok(iSources >= 0 && iSources <= iToken, `the first token (${iToken}) came before the sources (${iSources})`);
    assert.ok(lengths.size >= 3, `the answer did not stream (${lengths.size} updates)`);
    const docs = await lastTurn().getByTestId('source').locator('.source-doc').allTextContents();
    assert.ok(docs.includes('volcanoes.md'), `sources: ${docs}`);
    assert.match(await lastTurn().getByTestId('answer-meta').textContent(), /TTFT/);
    await browser.screenshot(page, 'e2e-chat');
  });

  await step('the UI reported its own TTFT and the server stored it', async () => {
    const t = await traceOf(server, Q1, (x) => x.stages?.ui_ttft_ms > 0, 8000).catch((e) => {
      throw new Error(`${e.message}\n     API calls that failed in the page: ${watched.apiFailures.join('; ') || 'none'}`);
    });
    assert.ok(t.stages.ui_ttft_ms >= t.stages.ttft_ms - 50, `ui_ttft_ms ${t.stages.ui_ttft_ms} < ttft_ms ${t.stages.ttft_ms}`);
  });

  await step('models view: the runner build in use and where the chat model\'s weights went', async () => {
    const sys = await server.api('GET', '/api/system');
    assert.ok(sys.cpu.variant && !sys.cpu.error, JSON.stringify(sys.cpu));
    const chat = sys.loaded.find((m) => m.role === 'chat');
    assert.ok(chat?.runner.weight_buffers?.length, `chat model has answered, so its runner reported buffers: ${JSON.stringify(sys.loaded)}`);
    assert.equal(sys.local, true);
    assert.equal(await tid('privacy').textContent(), 'On this machine');
    await tid('nav-models').click();
    await page.waitForFunction((v) => document.querySelector('[data-testid="runner-variant"]')?.textContent?.includes(`the ${v} build`), sys.cpu.variant);
    const line = await page.locator('[data-testid="loaded-model"][data-role="chat"]').textContent();
    assert.ok(line.includes(chat.runner.weight_buffers[0]), line);
    await tid('nav-chat').click();
  });

  await step('latency panel: a waterfall row with a bar for every stage', async () => {
    await lastTurn().getByTestId('show-latency').click();
    await tid('waterfall').waitFor({ state: 'visible' });
    const want = ['retrieval', 'embed', 'vector', 'bm25', 'prompt_assemble', 'queue', 'prefill', 'first_decode', 'paint', 'decode'];
    const rows = await tid('waterfall').locator('[data-testid^="waterfall-row-"]').evaluateAll((els) =>
      els.map((e) => ({ stage: e.getAttribute('data-stage'), ms: e.getAttribute('data-ms'), start: e.getAttribute('data-start-ms'), bar: !!e.querySelector('rect.wf-bar') })));
    console.log(`     rows: ${rows.map((r) => `${r.stage} ${r.ms}ms@${r.start}`).join(', ')}`);
    for (const s of want) {
      const r = rows.find((x) => x.stage === s);
      assert.ok(r, `no ${s} row`);
      assert.ok(r.bar && r.ms !== '' && r.start !== '', `${s} row has no bar/timing: ${JSON.stringify(r)}`);
    }
    assert.match(await tid('trace-question').textContent(), /volcano/);
    // No rerank model: the row stays, without a bar, saying skipped and why (the server's skipped_stages).
    const rerank = rows.find((r) => r.stage === 'rerank');
    assert.ok(rerank && !rerank.bar, `no rerank model: want a rerank row without a bar, got ${JSON.stringify(rerank)}`);
    const why = tid('waterfall-row-rerank').locator('.wf-ms');
    assert.equal(await why.textContent(), 'skipped');
    assert.equal(await why.getAttribute('title'), 'no rerank model');
    await tid('stats-table').waitFor();
    await tid('history-item').first().waitFor();
    await browser.screenshot(page, 'e2e-latency', { fullPage: true });
  });

  await step('latency history: TTFT by prompt length and by fallback level show the server\'s groups', () => groupedTables(page, server));

  await step('settings: the server\'s values (0 = auto) save back unchanged; a change is stored', () => settingsRoundTrip(page, server));

  await step('history: the chat is listed and reopens', async () => {
    await tid('nav-chat').click();
    await tid('new-chat').click();
    assert.equal(await tid('turn').count(), 0);
    const item = tid('chat-item').filter({ hasText: 'volcano' }).first();
    await item.waitFor();
    await item.click();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="turn"]').length === 1);
    assert.equal(await tid('question').first().textContent(), Q1);
    assert.ok(((await tid('answer').first().textContent()) ?? '').trim().length > 0, 'the reopened answer is empty');
    assert.ok(await tid('chat-item').filter({ hasText: 'volcano' }).first().evaluate((e) => e.classList.contains('active')));
    await browser.screenshot(page, 'e2e-history');
    await tid('new-chat').click();
  });

  await step('history: a reopened chat shows its sources, TTFT line and Latency link, as it did live (issue 35, 1)', async () => {
    await tid('nav-chat').click();
    await tid('new-chat').click();
    const live = await traceOf(server, Q1);
    await tid('chat-item').filter({ hasText: 'volcano' }).first().click();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="turn"]').length === 1);
    const turn = tid('turn').first();
    const docs = await turn.getByTestId('source').locator('.source-doc').allTextContents();
    console.log(`     reopened: sources ${docs.join(', ')}; ${await turn.getByTestId('answer-meta').textContent()}`);
    assert.ok(docs.includes('volcanoes.md'), `the reopened answer lost its sources: ${docs}`);
    assert.equal(await turn.getByTestId('sources').isVisible(), true);
    const meta = await turn.getByTestId('answer-meta').textContent();
    assert.match(meta, /TTFT \d[\d.,]* m?s \(server\)/, 'the reopened answer lost its TTFT line');
    assert.match(meta, /on screen \d[\d.,]* m?s \(browser\)/, 'the reopened answer lost the UI\'s own TTFT');
    // A citation opens its passage, with the text the prompt held.
    await turn.getByTestId('source').first().locator('button').click();
    await turn.getByTestId('passage-text').waitFor({ state: 'visible' });
    assert.ok(((await turn.getByTestId('passage-text').textContent()) ?? '').length > 20);
    await turn.getByTestId('show-latency').click();
    await page.waitForFunction((id) => document.querySelector('[data-testid="trace-id"]')?.textContent?.includes(id), live.request_id);
    await browser.screenshot(page, 'e2e-history-reopened');
    await tid('nav-chat').click();
    await tid('new-chat').click();
  });

  await step('empty chat: library and model status, questions from the library, the last chat reopens', () => emptyChat(page, server, browser));

  await step('Settings shows the efSearch curve lore bench retrieval --sweep measured, the current setting marked', async () => {
    await tid('nav-settings').click();
    await tid('sweep-none').waitFor();
    await run(LORE, ['bench', 'retrieval', '--sweep', '--sweep-sizes', '2000', '--sweep-ef', '16,96', '--data', join(tmp, 'data')]);
    const sw = await server.api('GET', '/api/bench/hnsw');
    assert.equal(sw.sizes.length, 1);
    await tid('nav-chat').click();
    await tid('nav-settings').click();
    await tid('sweep-table').waitFor();
    const row = await tid('sweep-row-96').textContent();
    console.log(`     ${row}`);
    assert.match(row, /^96 \(current/);
    assert.ok(row.includes(sw.sizes[0].points.find((p) => p.ef_search === 96).recall_at_10.toFixed(3)), row);
    await tid('setting-ef_search').fill('16');
    assert.match(await tid('sweep-row-16').textContent(), /^16 \(current/);
    await tid('setting-ef_search').fill(String((await server.api('GET', '/api/settings')).ef_search));
  });

  await step('passage KV: switched on in Settings, a question asked again places its saved passages; the panel says approximate', () =>
    // No first-token budget: on a slow machine the router would send these questions to the fast model.
    withSettings(server, { route_ttft_ms: 0 }, async () => {
    await tid('nav-settings').click();
    await tid('setting-passage_kv').check();
    await tid('save-settings').click();
    await page.waitForFunction(() => document.querySelector('[data-testid="settings-status"]')?.textContent === 'Saved.');
    const saved = await server.api('GET', '/api/settings');
    assert.equal(saved.passage_kv, true);
    assert.equal(saved.route_ttft_ms, 0, 'the Settings form saved back a value it was not given');
    await tid('nav-chat').click();
    // The first ask queues its passages; another question moves the answer's cache elsewhere;
    // asked again, the first question's passages come from their saved KV.
    const QS = 'Why do the northern lights glow green?';
    for (const q of [QS, Q1]) {
      await tid('new-chat').click();
      await ask(page, q);
      // The passages are saved in the background: wait until it is done, however long that takes here.
      await until(async () => ((await server.api('GET', '/api/system')).passage_kv.saving ? undefined : true), T_ANSWER);
    }
    await tid('new-chat').click();
    await ask(page, QS);
    const t = await traceOf(server, QS, (x) => x.stitched_passages > 0);
    console.log(`     stitch ${t.stitch}: ${t.stitched_passages} passages, ${t.stitched_tokens} of ${t.prompt_tokens} tokens placed, ${t.repaired_tokens} repaired, ${t.eval_tokens} read (${t.stitch_note || 'no note'})`);
    assert.equal(t.stitch, 'on');
    assert.match(await lastTurn().getByTestId('answer-meta').textContent(), /\d+ passages from saved KV \(approximate\)/);
    await lastTurn().getByTestId('show-latency').click();
    await page.waitForFunction(() => /^approximate · \d+ passages placed/.test(document.querySelector('[data-testid="detail-stitch"]')?.textContent ?? ''));
    assert.match(await tid('token-split-text').textContent(), /\d+ stitched/);
    await tid('nav-chat').click();
  }));

  await step('routing: a short question goes to the fast model, the answer says so, "Ask the main model" re-asks it', () =>
    withSettings(server, { route_short_words: 4 }, async () => {
    await tid('nav-chat').click();
    await tid('new-chat').click();
    const QR = 'Why do volcanoes erupt?';
    const n = await ask(page, QR);
    const fast = await traceOf(server, QR, (x) => x.route_role === 'fast');
    console.log(`     ${fast.route} (${fast.route_role}): ${fast.route_reason}`);
    assert.match(fast.route_reason, /short question \(4 words/);
    assert.match(await lastTurn().getByTestId('answer-meta').textContent(), /fast model fast@/);
    await lastTurn().getByTestId('reask-main').click();
    await page.waitForFunction((k) => document.querySelectorAll('[data-testid="turn"]').length > k, n);
    await waitAnswer(page, n + 1);
    const main = await traceOf(server, QR, (x) => x.route_role === 'main');
    console.log(`     re-asked: ${main.route} (${main.route_role}): ${main.route_reason}`);
    assert.match(main.route_reason, /main model was asked for/);
    assert.doesNotMatch(await lastTurn().getByTestId('answer-meta').textContent(), /fast model/);
    assert.equal(await lastTurn().getByTestId('reask-main').isVisible(), false);
    await lastTurn().getByTestId('show-latency').click();
    await page.waitForFunction(() => /\(main model: the main model was asked for\)/.test(document.querySelector('[data-testid="detail-route"]')?.textContent ?? ''));
    await tid('nav-chat').click();
  }));

  await step('speculative decoding: the latency details say how the drafts went', () =>
    withSettings(server, { speculate: 4, spec_floor_pct: 0 }, async () => {
    await tid('nav-chat').click();
    await tid('new-chat').click();
    const QD = 'What does the river market sell?';
    await ask(page, QD);
    const t = await traceOf(server, QD, (x) => x.spec_note !== undefined);
    console.log(`     ${t.spec_note}: ${t.accepted ?? 0} of ${t.drafted ?? 0} drafted tokens kept, route's acceptance ${t.draft_accept_rate ?? 'not yet measured'}`);
    assert.match(t.spec_note, /^on: prompt lookup/);
    await lastTurn().getByTestId('show-latency').click();
    await page.waitForFunction(() => /^on: prompt lookup, up to 4 drafted tokens a step/.test(document.querySelector('[data-testid="detail-spec"]')?.textContent ?? ''));
    await tid('nav-chat').click();
  }));

  const QX = `What does the zanzibar ledger memo say? <img src=x onerror="window.__pwned='question'"> ![q](http://127.0.0.1:${canary.port}/leak?d=question)`;
  await step('typed question: its prompt is prefilled while typing and adopted on Enter', async () => {
    await tid('nav-chat').click();
    await tid('new-chat').click();
    const turns = await tid('turn').count();
    // A question left in the box by an earlier step must not run into this one.
    await tid('question-input').fill('');
    await tid('question-input').click();
    await page.evaluate(() => (window.__ra = []));
    // The status is pushed on one event stream per question, not polled (issue 33).
    const statusCalls = [];
    const onRequest = (r) => /\/api\/prefetch(\/events)?$/.test(new URL(r.url()).pathname) && r.method() === 'GET' && statusCalls.push(new URL(r.url()).pathname);
    page.on('request', onRequest);
    const askAt = await tid('submit').boundingBox();
    // 5 characters a second, the UI's own debounce; the last character sends the whole question as a draft.
    const last = page.waitForResponse((r) => r.url().endsWith('/api/prefetch') && r.request().method() === 'POST'
      && JSON.parse(r.request().postData() ?? '{}').draft === QTYPED.trim(), { timeout: T_ANSWER });
    await page.keyboard.type(QTYPED, { delay: 200 });
    await last;
    // The user waits for the line under the box to say the prompt is read (how long that takes depends on
    // the machine; whether Enter then adopts it does not).
    const ready = await until(async () => {
      const st = await server.api('GET', '/api/prefetch');
      return st.state === 'ready' ? st : st.state === 'reading' ? undefined : assert.fail(`read-ahead ${JSON.stringify(st)}`);
    }, T_ANSWER);
    const line = `Prepared while you type: ${ready.passages} passage${ready.passages === 1 ? '' : 's'}, ${ready.tokens.toLocaleString('en-US')} tokens read ahead`;
    // Settled: no "…" once typing stopped and the read is done (issue 35, 9).
    const shown = await page.waitForFunction(() => {
      const t = document.querySelector('[data-testid="read-ahead"]')?.textContent ?? '';
      return /^Prepared while you type: /.test(t) ? t : undefined;
    }, undefined, { timeout: 10_000 }).then((h) => h.jsonValue());
    page.off('request', onRequest);
    assert.deepEqual(statusCalls, ['/api/prefetch/events'], `the page asked for the read-ahead status ${statusCalls.length} times`);
    console.log(`     the line under the box: ${shown} (server: ${line})`);
    // Within one question the line never goes backwards: each text read at least as many passages as the one before.
    const texts = (await page.evaluate(() => window.__ra)).filter((t, i, a) => t || i < a.length - 1);
    console.log(`     the line while typing: ${texts.join(' → ')}`);
    const readOf = (t) => {
      const m = /^(?:Preparing the answer while you type|Prepared while you type): (\d+)(?: of \d+)? passages?/.exec(t);
      assert.ok(m, `not a read-ahead line that says what it is for: ${JSON.stringify(t)}`);
      return Number(m[1]);
    };
    const first = texts.findIndex(Boolean);
    assert.ok(first >= 0, 'the line never showed');
    assert.ok(texts.slice(first).every(Boolean), `the line vanished and came back while typing one question: ${texts}`);
    const counts = texts.slice(first).map(readOf);
    assert.ok(counts.every((c, i) => i === 0 || c >= counts[i - 1]), `the line went backwards: ${texts.join(' → ')}`);
    assert.ok(shown === line || readOf(shown) >= ready.passages, `the line says ${shown}, the server ${line}`);
    // The line appears as the user reaches for the button: it must not move it (a click would miss).
    const askNow = await tid('submit').boundingBox();
    assert.deepEqual(askNow, askAt, `the read-ahead line moved the Ask button: ${JSON.stringify(askAt)} → ${JSON.stringify(askNow)}`);
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('[data-testid="read-ahead"]')?.hidden);
    await page.waitForFunction((n) => document.querySelectorAll('[data-testid="turn"]').length > n, turns);
    await waitAnswer(page, turns + 1);
    const t = await traceOf(server, QTYPED, (x) => x.prefetch !== undefined);
    console.log(`     prefetch ${t.prefetch} (${t.prefetch_miss || 'no miss'}): ${t.prefetched_tokens} of ${t.prompt_tokens} tokens prefilled while typing, ${t.eval_tokens} evaluated after Enter`);
    assert.equal(t.prefetch, 'hit', `prefetch ${t.prefetch}: ${t.prefetch_miss}`);
    assert.ok(t.prefetched_tokens > 0 && t.eval_tokens < t.prompt_tokens - t.prefetched_tokens + 1, JSON.stringify(t));
    assert.match(await lastTurn().getByTestId('answer-meta').textContent(), /\d+ tokens prefilled while you typed/);
    await lastTurn().getByTestId('show-latency').click();
    await page.waitForFunction((n) => document.querySelector('[data-testid="token-split-text"]')?.textContent?.includes(`${n} prefilled while you typed`), t.prefetched_tokens);
    assert.match(await tid('detail-prefetch').textContent(), new RegExp(`^hit · ${t.prefetched_tokens} tokens read while you typed`));
    await tid('nav-chat').click();
  });

  await step('hostile document: payloads reach the DOM as text (question, passage, answer); nothing runs or leaks', async () => {
    const turn = await ask(page, QX);
    const t = tid('turn').nth(turn - 1);
    assert.equal(await t.getByTestId('question').textContent(), QX, 'the question is shown verbatim');
    const src = t.getByTestId('source').filter({ hasText: HOSTILE });
    assert.equal(await src.count(), 1, `the hostile document was not retrieved: ${await t.getByTestId('source').allTextContents()}`);
    await src.locator('button').click();
    const passage = t.getByTestId('passage-text');
    await passage.waitFor({ state: 'visible' });
    const text = await passage.textContent();
    for (const s of ['<script>', 'onerror=', '![logo][exfil]', 'javascript:', `127.0.0.1:${canary.port}/leak`]) {
      assert.ok(text.includes(s), `the passage does not show ${s} literally: ${text.slice(0, 200)}`);
    }
    await browser.screenshot(page, 'e2e-xss-passage');
    await assertInert(page, canary, watched);
  });

  const QS = 'Tell me everything about tides, glaciers and coral reefs.';
  await step('stop: cancels a long generation, in the page and on the server', async () => {
    await server.api('PUT', '/api/settings', { max_tokens: LONG_TOKENS });
    try {
      const turn = await ask(page, QS, { wait: false });
      await page.waitForFunction(
        (n) => (window.__tl.filter((s) => s.turn === n && s.answer > 0).length >= 3),
        turn,
        { timeout: T_ANSWER },
      );
      await tid('stop').click();
      const t = tid('turn').nth(turn - 1);
      assert.equal(await t.getByTestId('answer-error').textContent(), 'Stopped.');
      assert.ok(await tid('stop').isHidden());
      const tr = await traceOf(server, QS, (x) => x.stop_reason !== undefined || x.decode_tokens > 0, 30_000);
      assert.equal(tr.stop_reason, 'cancel', `stop_reason ${tr.stop_reason}`);
      assert.ok(tr.decode_tokens < LONG_TOKENS, `decoded ${tr.decode_tokens} tokens`);
      console.log(`     stopped after ${tr.decode_tokens} tokens, ${Math.round(tr.stages.total_ms)} ms`);
      await browser.screenshot(page, 'e2e-stopped');
    } finally {
      await server.api('PUT', '/api/settings', { max_tokens: ANSWER_TOKENS });
    }
    // The engine is free again: the next question is answered.
    const turn = await ask(page, 'How does a sourdough starter work?');
    assert.ok(((await tid('turn').nth(turn - 1).getByTestId('answer').textContent()) ?? '').trim().length > 0);
  });

  await step('Stop, then Retry: one chat; the stopped answer is kept marked stopped, not with "[stopped]" (issue 35, 2)', async () => {
    await tid('nav-chat').click();
    await tid('new-chat').click();
    const QSTOP = 'Describe the honeybee waggle dance and the forager sisters, at length.';
    await withSettings(server, { max_tokens: LONG_TOKENS }, async () => {
      const turn = await ask(page, QSTOP, { wait: false });
      await page.waitForFunction((n) => (window.__tl.filter((s) => s.turn === n && s.answer > 0).length >= 3), turn, { timeout: T_ANSWER });
      await tid('stop').click();
      assert.equal(await tid('turn').nth(turn - 1).getByTestId('answer-error').textContent(), 'Stopped.');
      await traceOf(server, QSTOP, (x) => x.stop_reason === 'cancel', 30_000);
    });
    // The chat is listed at once, and Retry continues it.
    await tid('chat-item').filter({ hasText: 'waggle' }).first().waitFor();
    await lastTurn().getByTestId('retry').click();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="turn"]').length === 2);
    await waitAnswer(page, 2);
    const chats = (await server.api('GET', '/api/chats?workspace=default')).filter((c) => c.title === QSTOP);
    assert.equal(chats.length, 1, `History has ${chats.length} chats titled ${JSON.stringify(QSTOP)}: ${JSON.stringify(chats)}`);
    const chat = await server.api('GET', `/api/chats/${chats[0].id}`);
    console.log(`     ${chat.messages.map((m) => `${m.role}${m.stopped ? ' (stopped)' : ''}: ${JSON.stringify(m.content.slice(0, 40))}`).join(' | ')}`);
    assert.deepEqual(chat.messages.map((m) => m.role), ['user', 'assistant', 'user', 'assistant']);
    assert.equal(chat.messages[1].stopped, true, 'the stopped answer is not marked stopped');
    assert.equal(chat.messages[3].stopped ?? false, false);
    assert.ok(!chat.messages.some((m) => m.content.includes('[stopped]')), 'a literal "[stopped]" was saved');
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="chat-item"].active').length === 1);
    assert.match(await tid('chat-item').filter({ hasText: 'waggle' }).first().getAttribute('class'), /active/);
    // Reopened, it reads as it did: the first answer stopped, the retry whole.
    await tid('new-chat').click();
    await tid('chat-item').filter({ hasText: 'waggle' }).first().click();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="turn"]').length === 2);
    assert.equal(await tid('turn').nth(0).getByTestId('answer-error').textContent(), 'Stopped.');
    assert.doesNotMatch(await tid('turn').nth(0).getByTestId('answer').textContent(), /\[stopped\]/);
    assert.equal(await tid('turn').nth(1).getByTestId('answer-error').isVisible(), false);
    await browser.screenshot(page, 'e2e-stop-retry');
  });

  await step('a streaming answer is followed to its end; scrolled up, the view stays and "Jump to latest" returns; Stop does not narrow the box (issue 35: 3, 23)', async () => {
    await withSettings(server, { max_tokens: LONG_TOKENS }, async () => {
    const size = page.viewportSize();
    // Narrow and short: a few lines of answer run past the bottom of the list.
    await page.setViewportSize({ width: 420, height: 600 });
    try {
      await tid('nav-chat').click();
      await tid('new-chat').click();
      const boxBefore = await tid('question-input').boundingBox();
      const turn = await ask(page, 'Tell me about volcanoes, glaciers, tides and honeybees, at length.', { wait: false });
      await tid('stop').waitFor({ state: 'visible' });
      const boxDuring = await tid('question-input').boundingBox();
      assert.equal(boxDuring.width, boxBefore.width, `the question box narrowed when Stop appeared: ${boxBefore.width} → ${boxDuring.width}`);
      const list = () => page.evaluate((n) => {
        const m = document.querySelector('[data-testid="messages"]');
        const t = document.querySelectorAll('[data-testid="turn"]')[n - 1];
        return {
          gap: Math.round(m.scrollHeight - m.scrollTop - m.clientHeight), top: m.scrollTop, over: m.scrollHeight - m.clientHeight,
          answer: (t?.querySelector('[data-testid="answer"]')?.textContent ?? '').length, done: !!t?.classList.contains('done'),
          jump: !(document.querySelector('[data-testid="jump-latest"]')?.hidden ?? true),
        };
      }, turn);
      const grown = async (from, what) => until(async () => {
        const l = await list();
        if (l.done) assert.fail(`the answer ended before ${what}: ${JSON.stringify(l)}`);
        return l.answer >= from + 40 ? l : undefined;
      }, T_ANSWER);
      // The answer runs past the bottom of the list...
      await until(async () => ((await list()).over > 120 ? true : undefined), T_ANSWER);
      // ...and the list follows it, while it streams.
      let l = await list();
      for (let i = 0; i < 4; i++) {
        l = await grown(l.answer, 'it was followed');
        assert.ok(l.gap <= 40, `the list does not follow the streaming answer: ${JSON.stringify(l)}`);
        assert.equal(l.jump, false);
      }
      // The user scrolls up to read: the view stays where they put it, and offers the way back.
      await tid('messages').hover();
      await page.mouse.wheel(0, -400);
      await page.waitForFunction(() => !document.querySelector('[data-testid="jump-latest"]')?.hidden);
      const held = await list();
      l = await grown(held.answer, 'the held view was checked');
      assert.ok(Math.abs(l.top - held.top) <= 1, `the view moved while the user read above: ${JSON.stringify(held)} → ${JSON.stringify(l)}`);
      assert.ok(l.gap > 40 && l.jump, JSON.stringify(l));
      await browser.screenshot(page, 'e2e-chat-jump-latest-420');
      await tid('jump-latest').click();
      l = await until(async () => { const x = await list(); return x.gap <= 40 && !x.jump ? x : undefined; }, T_ANSWER)
        .catch(async () => assert.fail(`Jump to latest did not return to the end: ${JSON.stringify(await list())}`));
      l = await grown(l.answer, 'following resumed');
      assert.ok(l.gap <= 40, `following did not resume after Jump to latest: ${JSON.stringify(l)}`);
      await tid('stop').click();
      // The stopped answer's buttons come into view, inside the list (the view follows them a frame after
      // they are drawn: wait for it rather than look once).
      const retryInView = () => lastTurn().getByTestId('retry').evaluate((b) => {
        const m = document.querySelector('[data-testid="messages"]').getBoundingClientRect();
        const r = b.getBoundingClientRect();
        return r.top >= m.top && r.bottom <= m.bottom + 1 ? true : undefined;
      }).catch(() => undefined);
      await until(retryInView, T_ANSWER).catch(() => assert.fail('Retry under the stopped answer is out of view'));
      const boxAfter = await tid('question-input').boundingBox();
      assert.equal(boxAfter.width, boxBefore.width);
    } finally {
      await page.setViewportSize(size);
    }
    });
    // The chat the later steps look at ends with a whole answer (its sources, its cause line), as before this step.
    await tid('new-chat').click();
    await ask(page, 'How does a sourdough starter work?');
  });

  await step('latency: a click on a recent request brings "This answer" into view (issue 35, 4)', async () => {
    await tid('nav-latency').click();
    await tid('history-item').nth(2).waitFor();
    const row = tid('history-item').nth(2);
    const id = await row.getAttribute('data-request-id');
    await row.scrollIntoViewIfNeeded();
    const vh = page.viewportSize().height;
    const before = await tid('latency-current').boundingBox();
    assert.ok(before.y + 40 < 0, `the card is not above the screen before the click, nothing to check: ${JSON.stringify(before)}`);
    await row.click();
    await page.waitForFunction((r) => document.querySelector('[data-testid="trace-id"]')?.textContent?.includes(r), id);
    const after = await until(async () => {
      const b = await tid('latency-current').boundingBox();
      return b.y >= 0 && b.y < vh / 3 ? b : undefined;
    }, 3000).catch(async () => assert.fail(`"This answer" stayed off-screen after the click: ${JSON.stringify(await tid('latency-current').boundingBox())}`));
    console.log(`     card top ${Math.round(before.y)} → ${Math.round(after.y)} px`);
    assert.equal(await row.getAttribute('aria-current'), 'true');
    await tid('nav-chat').click();
  });

  await step('library: idle, it asks for little (no reload loop) and the table holds still', () => libraryIdle(page));

  let recordedProgress = [];
  await step('library: add a folder by path, the progress bar runs to the end', async () => {
    await tid('nav-library').click();
    await tid('folder').first().waitFor();
    // A wrong path first: plain words, a hint, a close button (issue 35, 8); a relative one never leaves the page.
    await tid('folder-path-input').fill(join(tmp, 'does', 'not', 'exist'));
    await tid('add-folder').click();
    await tid('folder-error').waitFor({ state: 'visible' });
    assert.equal(await tid('folder-error-text').textContent(), `That folder does not exist: ${join(tmp, 'does', 'not', 'exist')}`);
    assert.match(await tid('folder-error-hint').textContent(), /full path/);
    assert.equal(await tid('global-error').isVisible(), false);
    await tid('dismiss-folder-error').click();
    assert.equal(await tid('folder-error').isVisible(), false);
    const posts = [];
    const onReq = (r) => r.method() === 'POST' && r.url().includes('/folders') && posts.push(r.url());
    page.on('request', onReq);
    await tid('folder-path-input').fill('added folder');
    await tid('add-folder').click();
    await tid('folder-error').waitFor({ state: 'visible' });
    page.off('request', onReq);
    assert.match(await tid('folder-error-text').textContent(), /^That is not a full path: added folder/);
    assert.deepEqual(posts, [], 'a relative path was sent to the server');
    await page.evaluate(() => (window.__progressStreams = []));
    await tid('folder-path-input').fill(ADDED);
    await tid('add-folder').click();
    await tid('folder-error').waitFor({ state: 'hidden' }); // the later success clears it
    await page.waitForFunction(() => document.querySelector('[data-testid="library-progress-text"]')?.textContent === 'Up to date'
      && document.querySelectorAll('[data-testid="document"]').length > 13, undefined, { timeout: T_ANSWER });
    // What the server sent on the progress streams the page read (each ends with "done").
    await page.waitForFunction(() => window.__progressStreams.length > 0 && window.__progressStreams.every((b) => b.ended), undefined, { timeout: 10000 });
    const bodies = await page.evaluate(() => window.__progressStreams.map((b) => b.text));
    const events = bodies.flatMap((body) => body.split('\n\n').flatMap((block) => {
      const ev = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      return ev && data ? [{ event: ev, ...JSON.parse(data) }] : [];
    }));
    recordedProgress = bodies.map(parseSSE).find((evs) => evs.some((e) => e.event === 'progress')) ?? [];
    const parse = events.filter((e) => e.event === 'progress' && e.phase === 'parse');
    const embed = events.filter((e) => e.event === 'progress' && e.phase === 'embed');
    console.log(`     server events: ${events.length} (${parse.length} parse, ${embed.length} embed); last parse ${JSON.stringify(parse.at(-1))}`);
    assert.ok(parse.some((e) => e.files_total === ADDED_FILES && e.files_done === ADDED_FILES), `no parse event reached ${ADDED_FILES} / ${ADDED_FILES} files: ${JSON.stringify(parse)}`);
    assert.ok(embed.length > 0 && embed.every((e) => e.files_total >= ADDED_FILES), `embed events must carry the file count: ${JSON.stringify(embed)}`);
    assert.ok(events.some((e) => e.event === 'done'), 'the progress stream did not end with done');
    // And what the page shows at the end.
    assert.equal(await tid('library-progress-text').textContent(), 'Up to date', 'indexing did not finish');
    assert.equal(await tid('library-progress').evaluate((e) => e.value === e.max), true, 'the bar is not full');
    await page.waitForFunction((n) => document.querySelectorAll('[data-testid="document"]').length >= n, 13 + ADDED_FILES);
    assert.equal(await tid('folder').count(), 2);
    assert.ok((await tid('folder').allTextContents()).some((s) => s.includes(ADDED)));
    const ws = await server.api('GET', '/api/workspaces');
    assert.equal(ws[0].documents, 13 + ADDED_FILES, JSON.stringify(ws));
    await browser.screenshot(page, 'e2e-library-done', { fullPage: true });
  });

  await step('library: Remove asks first, in the page; Cancel keeps the folder; confirmed, it goes (issue 35, 5)', async () => {
    await tid('nav-library').click();
    const row = tid('folder').filter({ hasText: ADDED });
    await row.getByTestId('remove-folder').click();
    await sleep(500);
    assert.equal(await tid('folder').count(), 2, 'one click on Remove removed the folder');
    assert.ok((await server.api('GET', '/api/workspaces'))[0].folders.includes(ADDED), 'one click on Remove removed the folder on the server');
    await tid('remove-confirm').waitFor({ state: 'visible' });
    assert.equal(await tid('remove-confirm-text').textContent(),
      `Remove this folder from default? Its ${ADDED_FILES} indexed documents leave the index; the files stay on disk.`);
    await browser.screenshot(page, 'e2e-library-remove-confirm');
    await tid('cancel-remove').click();
    assert.equal(await tid('remove-confirm').count(), 0);
    await sleep(300);
    assert.equal(await tid('folder').count(), 2);
    await row.getByTestId('remove-folder').click();
    await tid('confirm-remove').click();
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="folder"]').length === 1);
    const ws = await server.api('GET', '/api/workspaces');
    assert.deepEqual(ws[0].folders, [LIB]);
    await page.waitForFunction(() => document.querySelectorAll('[data-testid="document"]').length === 13);
  });

  await step('every view at 1280 and 420 px: header controls on screen, no sideways scroll, chips readable', async () => {
    await tid('nav-chat').click();
    await screenshotViews(page, browser);
  });

  await step('workspaces: an empty, invalid or taken name says why; create, rename and delete (asking first) work (issue 35, 12)', async () => {
    await tid('nav-library').click();
    await tid('new-workspace-input').scrollIntoViewIfNeeded();
    const create = async (name) => {
      await tid('new-workspace-input').fill(name);
      await tid('create-workspace').click();
    };
    for (const [name, want] of [['', /^Type a name/], ['My Notes!', /cannot be a workspace name\. Use 1–64 letters, digits, spaces/], ['default', /^A workspace called “default” already exists\.$/]]) {
      await create(name);
      await tid('workspace-error').waitFor({ state: 'visible' });
      assert.match(await tid('workspace-error-text').textContent(), want, name);
    }
    assert.deepEqual((await server.api('GET', '/api/workspaces')).map((w) => w.name), ['default'], 'a refused name made a workspace');
    await create('scratch');
    await page.waitForFunction(() => document.querySelector('[data-testid="workspace-select"]')?.value === 'scratch');
    assert.equal(await tid('workspace-error').isVisible(), false);
    await tid('rename-workspace').click();
    await tid('rename-workspace-input').fill('scratch 2');
    await tid('confirm-rename-workspace').click();
    await page.waitForFunction(() => document.querySelector('[data-testid="workspace-name"]')?.textContent === 'scratch 2');
    assert.equal(await tid('workspace-select').inputValue(), 'scratch 2');
    await tid('delete-workspace').click();
    await tid('delete-workspace-confirm').waitFor();
    assert.match(await tid('delete-workspace-text').textContent(), /^Delete the workspace “scratch 2”\? .*the files stay on disk\.$/);
    await tid('workspace-manage').scrollIntoViewIfNeeded();
    await browser.screenshot(page, 'e2e-workspace-delete-confirm');
    assert.deepEqual((await server.api('GET', '/api/workspaces')).map((w) => w.name).sort(), ['default', 'scratch 2'], 'one click on Delete deleted it');
    await tid('confirm-delete-workspace').click();
    await page.waitForFunction(() => document.querySelector('[data-testid="workspace-select"]')?.value === 'default');
    assert.deepEqual((await server.api('GET', '/api/workspaces')).map((w) => w.name), ['default']);
    // The manage row is drawn again a moment after the select changes: wait for it rather than look once.
    await page.waitForFunction(() => !document.querySelector('[data-testid="rename-workspace"]'), null, { timeout: 10_000 })
      .catch(() => assert.fail('the default workspace offers Rename'));
    await tid('nav-chat').click();
  });

  await step('the mock server\'s fixtures are what lore serve answers (LORE_E2E_RECORD=1 re-records them)', async () => {
    const r = await checkFixtures(server, { workspace: 'default', question: Q1, progress: recordedProgress, replace: [[tmp, '/home/user/lore-e2e']] });
    if (r.written) console.log(`     wrote ${r.written}`);
    if (r.added.length) console.log(`     the server now also sends: ${r.added.join(', ')} (re-record to include them)`);
  });

  await step('no CSP violations, page errors or console errors in the whole session', async () => {
    assert.deepEqual(await page.evaluate(() => window.__csp), []);
    assert.deepEqual(watched.problems, []);
    assert.deepEqual(watched.dialogs, []);
    if (watched.apiFailures.length) console.log(`     API calls answered with an error: ${watched.apiFailures.join('; ')}`);
  });

  // A second server with no chat model: the answer quotes the passages (extractive fallback), so the hostile
  // Markdown goes through the answer renderer (marked + DOMPurify) for real.
  await step('hostile Markdown rendered as the answer (extractive fallback): inert, nothing leaks', async () => {
    const data2 = join(tmp, 'data2');
    await run(LORE, ['index', '--data', data2, LIB2]);
    server2 = await startServe('serve-extractive', ['--data', data2]);
    const p2 = await browser.context.newPage();
    const w2 = watch(p2, server2.base);
    await p2.addInitScript(pageProbe);
    await p2.goto(server2.url);
    await p2.getByTestId('workspace-select').locator('option[value="default"]').waitFor({ state: 'attached' });
    const turn = await ask(p2, 'zanzibar ledger quarterly figures');
    const answer = p2.getByTestId('turn').nth(turn - 1).getByTestId('answer');
    const text = (await answer.textContent()) ?? '';
    assert.match(text, /Extractive answer/);
    assert.ok(text.includes('onerror') && text.includes('<script>'), `raw HTML is not shown as text: ${text.slice(0, 300)}`);
    const blocked = await answer.locator('.md-img-blocked').allTextContents();
    assert.ok(blocked.length >= 2, `inline and reference images should become placeholders: ${blocked}`);
    assert.ok(blocked.some((b) => b.includes('logo')), `the reference-style image was not neutralised: ${blocked}`);
    await p2.getByTestId('turn').nth(turn - 1).getByTestId('source').first().locator('button').click();
    await p2.getByTestId('passage-text').waitFor({ state: 'visible' });
    await browser.screenshot(p2, 'e2e-xss-answer');
    await assertInert(p2, canary, w2);
    await p2.close();
  });

  await step('library: every file is listed: one that cannot be read with the server\'s reason, a binary one skipped with why (issue 35, 15)', async () => {
    const docs = await server2.api('GET', '/api/workspaces/default/documents');
    const byName = Object.fromEntries(docs.map((d) => [d.rel, d]));
    console.log(`     ${docs.map((d) => `${d.rel}: ${d.status}${d.error ? ` (${d.error.slice(0, 60)})` : ''}`).join('; ')}`);
    const bad = byName['broken.pdf'];
    assert.equal(bad?.status, 'error', JSON.stringify(docs));
    assert.ok(bad.error);
    assert.equal(byName['broken.docx']?.status, 'error', `the corrupt .docx is not a problem: ${JSON.stringify(docs)}`);
    assert.match(byName['broken.docx'].error, /corrupt or unreadable/);
    assert.equal(byName['blob.bin']?.status, 'skipped', `the binary file is not listed as skipped: ${JSON.stringify(docs)}`);
    assert.match(byName['blob.bin'].error, /binary/);
    const p3 = await browser.context.newPage();
    await p3.goto(server2.url);
    await p3.getByTestId('nav-library').click();
    await p3.getByTestId('library-error').first().waitFor();
    const problems = await p3.getByTestId('library-errors').textContent();
    assert.ok(problems.includes(`${bad.path} — ${bad.error}`), problems);
    assert.ok(problems.includes(`${byName['broken.docx'].path} — ${byName['broken.docx'].error}`), problems);
    assert.equal(await p3.locator('[data-testid="document"][data-status="error"]').filter({ hasText: 'broken.pdf' }).getByTestId('document-error').textContent(), ` — ${bad.error}`);
    assert.equal(await p3.locator('[data-testid="document"][data-status="skipped"]').filter({ hasText: 'blob.bin' }).getByTestId('document-error').textContent(),
      ` — ${byName['blob.bin'].error}`);
    await browser.screenshot(p3, 'e2e-library-errors', { fullPage: true });
    await p3.close();
  });
} catch (e) {
  failures.push(`setup: ${e.message}`);
  console.log(`FAIL ${e.stack ?? e}`);
} finally {
  await browser?.close().catch(() => undefined);
  await server?.stop();
  await server2?.stop();
  canary.close();
  if (process.env.LORE_E2E_KEEP === '1') console.log(`kept ${tmp}`);
  else rmSync(tmp, { recursive: true, force: true });
}
console.log(`artefacts in ${ART}; ${((Date.now() - started) / 1000).toFixed(0)} s`);
finish();

/** Keeps a repository-local test-artifacts/ folder out of git without touching the repository's .gitignore. */
function ignoreArtifacts(dir) {
  const i = dir.indexOf('/test-artifacts');
  if (!dir.startsWith(repo + '/') || i < 0) return;
  const root = dir.slice(0, i + '/test-artifacts'.length);
  mkdirSync(root, { recursive: true });
  if (!existsSync(join(root, '.gitignore'))) writeFileSync(join(root, '.gitignore'), '*\n');
}
