// Browser smoke test of the built UI against e2e/mock-server.mjs (not the real backend):
// login via ?token= → #token= (bearer token), ask → placeholder/stages → sources before tokens → streamed Markdown with
// citations; hostile output stays inert (no request to /leak, nothing executed); the UI reports its TTFT;
// latency waterfall, history, export; library progress and errors; models; settings. Fails on any CSP
// violation or page error. Needs `npm run build` first.
//
//   LORE_E2E_SCREENSHOTS=/tmp/shots node e2e/smoke.mjs
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { launch, watchPage } from './browser.mjs';
import { FX, startMockServer } from './mock-server.mjs';
import { steps } from './steps.mjs';

if (!existsSync(new URL('../dist/index.html', import.meta.url))) {
  console.error('dist/ is missing: run `npm run build` first');
  process.exit(2);
}
const server = await startMockServer({ prefillMs: 1500 });
// What the mock answers is lore serve's recorded answers (e2e/fixtures): the checks below read them too.
const WS = FX['GET /api/workspaces'][0].name;
const SOURCES = FX.ask.find((e) => e.event === 'sources').data;
const PREFILL = FX.ask.find((e) => e.event === 'stage' && e.data.name === 'prefill' && e.data.state === 'start').data.detail;
const FIT = FX.ask.find((e) => e.event === 'stage' && e.data.name === 'prompt_assemble' && e.data.state === 'done').data.detail;
const fmt = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
const browser = await launch();
const { step, finish } = steps();

try {
  const page = await browser.newPage();
  const problems = watchPage(page);
  await page.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  const tid = (id) => page.getByTestId(id);

  await step('login with ?token= redirects to #token=, the token leaves the URL and loads the app', async () => {
    await page.goto(server.loginURL);
    assert.equal(new URL(page.url()).search, '');
    assert.equal(new URL(page.url()).hash, '');
    await tid('workspace-select').locator(`option[value="${WS}"]`).waitFor({ state: 'attached' });
    assert.equal(await page.locator('.app').getAttribute('data-transport'), 'http');
    assert.equal(await tid('transport-kind').count(), 0, 'no transport badge in the header');
  });

  await step('ask: placeholder, live stage, sources before the first token, prefill indicator', async () => {
    await tid('question-input').fill('How is the index stored?');
    await tid('submit').click();
    await tid('answer-placeholder').waitFor({ state: 'visible', timeout: 2000 });
    await tid('sources').waitFor({ state: 'visible' });
    assert.equal((await tid('answer').textContent()).trim(), '', 'sources must show before any token');
    assert.equal(await tid('source').count(), SOURCES.length);
    assert.equal(await tid('answer-fit').textContent(), `${FIT.sources} of ${FIT.candidates} candidates fit the prompt`);
    await tid('prefill-progress').waitFor({ state: 'visible' });
    assert.ok((await tid('prefill-text').textContent()).startsWith(
      `${fmt(PREFILL.prompt_tokens)} prompt tokens · ${fmt(PREFILL.cached_tokens)} from cache · ${fmt(PREFILL.eval_tokens)} to read · about `));
    assert.equal(await tid('answer-stage').textContent(), `Reading ${fmt(PREFILL.prompt_tokens)} prompt tokens…`);
    await browser.screenshot(page, '01-prefill');
    await tid('stop').waitFor({ state: 'visible' });
  });

  await step('answer streams as Markdown with citation links; hostile parts inert', async () => {
    await page.waitForFunction(() => document.querySelector('[data-testid="answer-meta"]')?.textContent?.includes('TTFT'), null, { timeout: 15000 });
    const answer = tid('answer');
    assert.equal(await answer.locator('strong').first().textContent(), 'SQLite');
    assert.ok((await answer.locator('a.cite').count()) >= 4);
    assert.equal(await answer.locator('img').count(), 0);
    assert.equal(await answer.locator('svg, script').count(), 0);
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    assert.deepEqual(server.state.leaks, [], 'no request may reach /leak');
    assert.ok(await tid('stop').isHidden());
    // How well the cited passages support it: the recorded trace's figure (app.CheckSupport), the check in its title.
    const traced = FX.ask.find((e) => e.event === 'done').data;
    if (traced.support === undefined) assert.equal(await tid('answer-support').count(), 0, 'no figure without a checked sentence');
    else {
      const checked = traced.checked_sentences ?? 0;
      assert.equal(await tid('answer-support').textContent(),
        `supported ${Math.round(traced.support * 100)}% (${traced.supported_sentences ?? 0}/${checked} sentence${checked === 1 ? '' : 's'})`);
      assert.match(await tid('answer-support').getAttribute('title'), /passages they cite/);
    }
    await browser.screenshot(page, '02-answer');
  });

  await step('the UI reported its own TTFT for the request', async () => {
    await page.waitForTimeout(200);
    assert.equal(server.state.uiReports.length, 1);
    const r = server.state.uiReports[0];
    assert.equal(r.id, 'req-1');
    assert.ok(r.ui_ttft_ms > 1500 && r.ui_ttft_ms < 10000, `ui_ttft_ms ${r.ui_ttft_ms}`);
    assert.ok(r.paint_ms >= 0 && r.paint_ms < r.ui_ttft_ms, `paint_ms ${r.paint_ms}`);
  });

  await step('citation opens the passage (as text)', async () => {
    await tid('answer').locator('a.cite[data-cite="1"]').first().click();
    await tid('source-passage').waitFor({ state: 'visible' });
    await page.waitForFunction((t) => document.querySelector('[data-testid="passage-text"]')?.textContent === t,
      FX['GET /api/chunks/{id}'][SOURCES[0].chunk_id].text); // the full passage, from the chunk endpoint
    assert.equal(await tid('source-passage').locator('img').count(), 0);
    assert.equal(await tid('open-source').count(), 0, 'no Open file in the browser');
    await browser.screenshot(page, '03-passage');
  });

  await step('latency panel: waterfall of this answer, details, history, stats, export', async () => {
    await tid('show-latency').click();
    await tid('waterfall').waitFor({ state: 'visible' });
    const done = FX.ask.find((e) => e.event === 'done').data;
    for (const s of ['retrieval', 'embed', 'vector', 'bm25', 'prompt_assemble', 'queue', 'prefill', 'first_decode', 'paint', 'decode']) {
      assert.equal(await tid(`waterfall-row-${s}`).count(), 1, s);
    }
    assert.equal(await tid('waterfall-row-rerank').count(), 'rerank_ms' in done.stages ? 1 : 0, 'a rerank row only when rerank ran');
    assert.match(await tid('waterfall-row-embed').getAttribute('class'), /child/);
    assert.ok((await tid('detail-tokens').textContent()).includes(`${fmt(done.cached_tokens)} cached`));
    assert.equal(await tid('detail-version').textContent(), done.version_id);
    await tid('stats-table').waitFor();
    const stats = FX['GET /api/traces/stats'];
    assert.equal(await tid('ttft-histogram').locator('rect').count(), stats.ttft_histogram.length);
    assert.equal(await tid('bucket-table').locator('tbody tr').count(), Object.keys(stats.by_bucket).length);
    assert.equal(await tid('fallback-table').locator('tbody tr').count(), Object.keys(stats.by_fallback).length);
    assert.match(await tid('support-stats').textContent(), stats.support?.n ? /^mean \d+% over \d+ answers? · \d+ \(\d+%\) under 50%$/ : /^no checked answers$/);
    assert.match(await tid('detail-support').textContent(), done.support === undefined ? /^— / : /^supported \d+% \(\d+\/\d+ sentences?\)/);
    await tid('history-item').first().waitFor();
    const [dl] = await Promise.all([page.waitForEvent('download'), tid('export-trace').click()]);
    assert.equal(dl.suggestedFilename(), 'lore-trace-req-1.json');
    await browser.screenshot(page, '04-latency', { fullPage: true });
    await tid('history-item').first().click();
    await page.waitForFunction(() => document.querySelector('[data-testid="trace-id"]')?.textContent?.includes('req-1'));
  });

  await step('stop aborts a running answer', async () => {
    await tid('nav-chat').click();
    await tid('question-input').fill('second question');
    await tid('submit').click();
    await tid('sources').last().waitFor({ state: 'visible' });
    await tid('stop').click();
    assert.equal(await tid('answer-error').last().textContent(), 'Stopped.');
    await page.waitForTimeout(1200);
    assert.ok(server.state.cancels.length >= 1, 'the server saw the cancel/disconnect');
  });

  await step('library: idle at once, re-index shows the run with files/s and ETA to the end', async () => {
    await tid('nav-library').click();
    await page.waitForFunction(() => document.querySelector('[data-testid="library-progress-text"]')?.textContent === 'Up to date');
    assert.equal(await tid('document').count(), FX['GET /api/workspaces/{ws}/documents'].length);
    assert.equal(await tid('folder').count(), FX['GET /api/workspaces'][0].folders.length);
    await tid('reindex').click();
    await page.waitForFunction(() => /files\/s/.test(document.querySelector('[data-testid="library-progress-text"]')?.textContent ?? ''));
    await browser.screenshot(page, '05-library-indexing');
    await page.waitForFunction(() => document.querySelector('[data-testid="library-progress-text"]')?.textContent === 'Up to date', null, { timeout: 5000 });
    const errors = FX.progress.filter((e) => e.data.error?.path).length;
    assert.equal(await tid('library-error').count(), errors);
  });

  await step('models and settings', async () => {
    await tid('nav-models').click();
    await tid('model-row').first().waitFor();
    const sys = FX['GET /api/system'];
    const settings = FX['GET /api/settings'];
    assert.equal(await tid('model-row').count(), FX['GET /api/models'].length);
    assert.equal(await tid('select-chat-model').inputValue(), settings.chat_model);
    assert.ok((await tid('runner-variant').textContent()).includes(`the ${sys.cpu.variant} build`));
    const chat = sys.loaded.find((m) => m.role === 'chat');
    if (chat?.runner.weight_buffers?.length) {
      assert.ok((await page.locator('[data-testid="loaded-model"][data-role="chat"]').textContent()).includes(chat.runner.weight_buffers[0]));
    }
    await browser.screenshot(page, '06-models');
    await tid('nav-settings').click();
    await page.waitForFunction((v) => document.querySelector('[data-testid="setting-top_k"]')?.value === String(v), settings.top_k);
    await tid('save-settings').click(); // unchanged, 0 = auto included
    await page.waitForFunction(() => document.querySelector('[data-testid="settings-status"]')?.textContent === 'Saved.');
    assert.deepEqual(server.state.settings, settings);
    await tid('setting-top_k').fill('8');
    await tid('save-settings').click();
    await page.waitForFunction(() => document.querySelector('[data-testid="settings-status"]')?.textContent === 'Saved.');
    assert.equal(server.state.settings.top_k, 8);
    await browser.screenshot(page, '07-settings');
  });

  await step('no CSP violations, page errors or console errors', async () => {
    const csp = await page.evaluate(() => window.__csp);
    assert.deepEqual(csp, []);
    assert.deepEqual(problems, []);
  });

  // The desktop path: the same build with stubbed Wails bindings (window.go + window.runtime), events
  // emitted on ask:<request_id> only after Ask() resolved, as docs/api.md describes.
  const desk = await browser.context.newPage();
  const deskProblems = watchPage(desk);
  await desk.addInitScript((fx) => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
    const subs = new Map();
    const emit = (name, payload) => (subs.get(name) ?? []).slice().forEach((f) => f(payload));
    window.__calls = [];
    window.runtime = {
      EventsOn(name, cb) {
        subs.set(name, [...(subs.get(name) ?? []), cb]);
        return () => subs.set(name, (subs.get(name) ?? []).filter((f) => f !== cb));
      },
      EventsOff(name) { subs.delete(name); },
    };
    const later = (ms, f) => new Promise((r) => setTimeout(() => r(f()), ms));
    window.go = { main: { App: {
      Workspaces: async () => [{ id: 1, name: 'desk', folders: ['/home/u/notes'], documents: 1, chunks: 3 }],
      Chats: async () => [], Documents: async () => [], Traces: async () => [], TraceStats: async () => fx.stats,
      Models: async () => [], Settings: async () => fx.settings, // the same app types as over HTTP (recorded)
      Chunk: async () => ({ text: 'full passage from Go' }),
      OpenSource: async (id) => window.__calls.push(['OpenSource', id]),
      AddFolder: async (ws) => { window.__calls.push(['AddFolder', ws]); return ''; },
      ReportUI: async (...a) => window.__calls.push(['ReportUI', ...a]),
      Cancel: async (id) => window.__calls.push(['Cancel', id]),
      Ask: async (req) => {
        window.__calls.push(['Ask', req.question]);
        const ch = 'ask:w-1';
        later(30, () => emit(ch, { type: 'trace', data: { request_id: 'w-1', chat_id: 1 } }))
          .then(() => later(20, () => emit(ch, { type: 'stage', data: { name: 'retrieval', state: 'start' } })))
          .then(() => later(20, () => emit(ch, { type: 'sources', data: [{ n: 1, chunk_id: 5, document: 'a.md', path: '/home/u/notes/a.md', text: 'snippet' }] })))
          .then(() => later(50, () => emit(ch, { type: 'token', data: { text: 'From the desktop [1]' } })))
          .then(() => later(20, () => emit(ch, { type: 'done', data: { request_id: 'w-1', stages: { ttft_ms: 120 }, stage_starts: {} } })));
        return 'w-1';
      },
    } } };
  }, { stats: FX['GET /api/traces/stats'], settings: FX['GET /api/settings'] });
  const dt = (id) => desk.getByTestId(id);

  await step('desktop (Wails stub): ask over events, Open file, native folder picker', async () => {
    await desk.goto(server.url + '/');
    await desk.locator('.app[data-transport="wails"]').waitFor();
    await dt('workspace-select').locator('option[value="desk"]').waitFor({ state: 'attached' });
    await dt('question-input').fill('desktop question');
    await dt('submit').click();
    await desk.waitForFunction(() => document.querySelector('[data-testid="answer-meta"]')?.textContent?.includes('TTFT'));
    assert.equal(await dt('answer').locator('a.cite').count(), 1);
    await dt('answer').locator('a.cite').click();
    await dt('open-source').click();
    await dt('nav-library').click();
    assert.equal(await dt('folder-path-input').count(), 0, 'no path input on the desktop');
    await dt('add-folder').click();
    await desk.waitForTimeout(100);
    const calls = await desk.evaluate(() => window.__calls);
    assert.deepEqual(calls.find((c) => c[0] === 'OpenSource'), ['OpenSource', 5]);
    assert.deepEqual(calls.find((c) => c[0] === 'AddFolder'), ['AddFolder', 'desk']);
    const rep = calls.find((c) => c[0] === 'ReportUI');
    assert.ok(rep && rep[1] === 'w-1' && rep[2] > 0 && rep[3] >= 0, JSON.stringify(rep));
    assert.deepEqual(await desk.evaluate(() => window.__csp), []);
    assert.deepEqual(deskProblems, []);
    await browser.screenshot(desk, '08-desktop-library');
  });
} finally {
  await browser.close();
  await server.close();
}
finish();
