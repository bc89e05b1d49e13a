// Desktop app smoke test: starts the real Wails binary (bin/lore-desktop, `make app`) under Xvfb with a
// throwaway data folder, waits for its window, screenshots it and fails if the app exited, the window never
// appeared, or the screenshot is blank (nearly every pixel one colour: the webview never painted the UI,
// which the page itself builds with JavaScript — index.html has only an empty root).
//
// Then, through the real bindings: it types a question into the window (xdotool), and checks with
// `lore traces` that the answer's trace was stored together with the UI's own TTFT — JS → window.go.main.App.Ask →
// app.Ask → events back to the page → ReportUI. With no model configured the answer is extractive. The Chat and
// Latency views are then checked by their pixels (the webview's DOM is out of reach): the question's bubble and
// the cause line's view, then the answer's waterfall bars in their stage colours (src/styles.css).
//
//   node e2e/desktop-app.mjs [path/to/lore-desktop]      (make test-app)
//
// Env: LORE_E2E_SCREENSHOTS (folder for the screenshots and the app's log; default ../test-artifacts/app),
// LORE_BIN (default ../bin/lore), LORE_APP_SETTLE_MS (wait after the window appears, default 6000).
// Needs Xvfb, xwininfo (x11-utils), ImageMagick's `import` and xdotool.
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync, createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { steps } from './steps.mjs';

const repo = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const bin = resolve(process.argv[2] ?? join(repo, 'bin/lore-desktop'));
const out = resolve(process.env.LORE_E2E_SCREENSHOTS ?? join(repo, 'test-artifacts/app'));
const lore = resolve(process.env.LORE_BIN ?? join(repo, 'bin/lore'));
const settleMs = Number(process.env.LORE_APP_SETTLE_MS ?? 6000);
mkdirSync(out, { recursive: true });
ignoreArtifacts(out);

for (const [f, hint] of [[bin, 'make app'], [lore, 'make build']]) {
  if (!existsSync(f)) {
    console.error(`${f} is missing: run \`${hint}\` first`);
    process.exit(2);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const { step, finish } = steps();

const data = mkdtempSync(join(tmpdir(), 'lore-app-data-'));
let xvfb, appProc, display, windowId;
let appExit = null;
const logPath = join(out, 'desktop-app.log');

try {
  await step('Xvfb starts', async () => {
    display = await startXvfb();
  });

  const env = {
    ...process.env,
    DISPLAY: display,
    LORE_DATA: data,
    // A C locale makes the webview's Intl throw (the UI guards it); run the way users do.
    LANG: 'en_US.UTF-8',
    LC_ALL: 'en_US.UTF-8',
    NO_AT_BRIDGE: '1',
    XDG_RUNTIME_DIR: data,
  };
  delete env.WAYLAND_DISPLAY;

  await step('the app opens its window', async () => {
    assert.ok(display, 'no display');
    const log = createWriteStream(logPath);
    appProc = spawn(bin, [], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    appProc.stdout.pipe(log);
    appProc.stderr.pipe(log);
    appProc.on('exit', (code, sig) => (appExit = { code, sig }));
    const until = Date.now() + 45_000;
    while (!windowId && Date.now() < until) {
      if (appExit) throw new Error(`the app exited early (${JSON.stringify(appExit)}); see ${logPath}`);
      windowId = findWindow(display, 'Lore');
      if (!windowId) await sleep(250);
    }
    assert.ok(windowId, `no "Lore" window within 45 s; see ${logPath}`);
  });

  await step(`the app is still running ${settleMs / 1000} s later`, async () => {
    assert.ok(windowId, 'no window');
    await sleep(settleMs);
    assert.equal(appExit, null, `the app exited: ${JSON.stringify(appExit)}; see ${logPath}`);
  });

  await step('the window is painted (screenshot not blank)', async () => {
    assert.ok(windowId && !appExit, 'no running window');
    const png = join(out, 'desktop-app.png');
    execFileSync('import', ['-display', display, '-window', 'root', png]);
    const ppm = execFileSync('import', ['-display', display, '-window', windowId, '-depth', '8', 'ppm:-'], { maxBuffer: 64 << 20 });
    const img = parsePPM(ppm);
    const s = colourStats(img);
    console.log(`     window ${img.width}×${img.height}: ${s.colours} colours, the most common covers ${(s.top * 100).toFixed(1)} %; ${png}`);
    assert.ok(img.width >= 400 && img.height >= 300, `window is ${img.width}×${img.height}`);
    assert.ok(s.top < 0.97, `blank: ${(s.top * 100).toFixed(1)} % of the pixels are one colour`);
    assert.ok(s.colours >= 16, `blank: only ${s.colours} colours`);
  });

  const question = 'Which notes mention the harbour timetable?';
  await step('ask through the Wails bindings: the answer and the UI TTFT are stored', async () => {
    assert.ok(windowId && !appExit, 'no running window');
    const geo = execFileSync('xwininfo', ['-display', display, '-id', windowId], { encoding: 'utf8' });
    const w = Number(geo.match(/Width: (\d+)/)[1]);
    const h = Number(geo.match(/Height: (\d+)/)[1]);
    const xdo = (...args) => execFileSync('xdotool', args, { env: { ...process.env, DISPLAY: display } });
    // The question box spans the bottom of the chat view.
    xdo('mousemove', '--window', windowId, String(Math.round(w / 2)), String(h - 50), 'click', '1');
    await sleep(300);
    xdo('type', '--delay', '25', question);
    xdo('key', 'Return');
    let trace;
    const until = Date.now() + 30_000;
    while (!trace && Date.now() < until) {
      await sleep(500);
      const listed = execFileSync(lore, ['traces', '--data', data, '--json', '--limit', '5'], { encoding: 'utf8' });
      trace = (JSON.parse(listed).recent ?? []).find((t) => t.question === question && t.stages?.ui_ttft_ms > 0);
    }
    execFileSync('import', ['-display', display, '-window', 'root', join(out, 'desktop-app-answer.png')]);
    assert.ok(trace, 'no stored trace with the UI TTFT for the question typed into the window');
    console.log(`     trace ${trace.request_id}: route ${trace.route}, TTFT ${trace.stages.ttft_ms} ms, on screen ${trace.stages.ui_ttft_ms} ms`);
  });

  await step('chat and latency views in the window: the question on screen, then its waterfall drawn', async () => {
    assert.ok(windowId && !appExit, 'no running window');
    const shot = (name) => {
      execFileSync('import', ['-display', display, '-window', 'root', join(out, name)]);
      return parsePPM(execFileSync('import', ['-display', display, '-window', windowId, '-depth', '8', 'ppm:-'], { maxBuffer: 64 << 20 }));
    };
    const chat = shot('desktop-app-chat.png');
    const bubble = countColour(chat, [0xe8, 0xee, 0xfc]); // --user-bg
    console.log(`     chat: ${bubble} px of the question's bubble`);
    assert.ok(bubble > 2000, `the question's bubble is not on screen (${bubble} px)`);
    // The nav's Latency button, where the page lays it out at any width over 640 px (see the e2e screenshots).
    execFileSync('xdotool', ['mousemove', '--window', windowId, '251', '24', 'click', '1'], { env: { ...process.env, DISPLAY: display } });
    await sleep(1000);
    const lat = shot('desktop-app-latency.png');
    const bars = { retrieve: countColour(lat, [0x1e, 0x88, 0xe5]), prompt: countColour(lat, [0x8d, 0x6e, 0x63]) };
    console.log(`     latency: bar pixels ${JSON.stringify(bars)}`);
    assert.ok(bars.retrieve >= 20, `no retrieval bars in the waterfall: ${JSON.stringify(bars)}`);
    assert.ok(bars.prompt >= 10, `no prompt-assembly bar in the waterfall: ${JSON.stringify(bars)}`);
  });

  await step('the app exits on SIGTERM', async () => {
    assert.ok(appProc && !appExit, 'not running');
    appProc.kill('SIGTERM');
    const until = Date.now() + 10_000;
    while (!appExit && Date.now() < until) await sleep(100);
    assert.ok(appExit, 'still running 10 s after SIGTERM');
  });
} finally {
  if (appProc && !appExit) appProc.kill('SIGKILL');
  if (xvfb) xvfb.kill('SIGTERM');
  await sleep(200);
  rmSync(data, { recursive: true, force: true });
}
finish();

/** Starts Xvfb on a free display (-displayfd) and returns ":N". */
function startXvfb() {
  return new Promise((resolveDisplay, reject) => {
    xvfb = spawn('Xvfb', ['-displayfd', '3', '-screen', '0', '1366x900x24', '-nolisten', 'tcp', '-noreset'], {
      stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
    });
    let buf = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`Xvfb did not start: ${err}`)), 15_000);
    xvfb.stderr.on('data', (d) => (err += d));
    xvfb.stdio[3].on('data', (d) => {
      buf += d;
      const m = buf.match(/^(\d+)\s/);
      if (m) {
        clearTimeout(timer);
        resolveDisplay(`:${m[1]}`);
      }
    });
    xvfb.on('exit', (code) => reject(new Error(`Xvfb exited (${code}): ${err}`)));
    xvfb.on('error', reject);
  });
}

/** The id of the top-level window titled `title`, or undefined. */
function findWindow(display, title) {
  let tree = '';
  try {
    tree = execFileSync('xwininfo', ['-display', display, '-root', '-children'], { encoding: 'utf8' });
  } catch {
    return undefined;
  }
  for (const line of tree.split('\n')) {
    const m = line.match(/^\s+(0x[0-9a-f]+) "([^"]*)": .*?(\d+)x(\d+)\+/);
    if (m && m[2] === title && Number(m[3]) > 50 && Number(m[4]) > 50) return m[1];
  }
  return undefined;
}

/** Binary PPM (P6, maxval 255) → {width, height, rgb}. */
function parsePPM(buf) {
  let pos = 0;
  const fields = [];
  while (fields.length < 4) {
    while (pos < buf.length && /\s/.test(String.fromCharCode(buf[pos]))) pos++;
    if (buf[pos] === 0x23) {
      while (pos < buf.length && buf[pos] !== 0x0a) pos++;
      continue;
    }
    let s = '';
    while (pos < buf.length && !/\s/.test(String.fromCharCode(buf[pos]))) s += String.fromCharCode(buf[pos++]);
    fields.push(s);
  }
  pos++; // the single whitespace after maxval
  const [magic, w, h, max] = fields;
  if (magic !== 'P6' || Number(max) !== 255) throw new Error(`unexpected image format ${magic} ${max}`);
  const width = Number(w);
  const height = Number(h);
  const rgb = buf.subarray(pos, pos + width * height * 3);
  if (rgb.length !== width * height * 3) throw new Error('truncated image');
  return { width, height, rgb };
}

/** Pixels of exactly this colour. */
function countColour({ rgb }, [r, g, b]) {
  let n = 0;
  for (let i = 0; i < rgb.length; i += 3) if (rgb[i] === r && rgb[i + 1] === g && rgb[i + 2] === b) n++;
  return n;
}

/** Share of the most common colour and the number of distinct colours. */
function colourStats({ rgb }) {
  const counts = new Map();
  for (let i = 0; i < rgb.length; i += 3) {
    const c = (rgb[i] << 16) | (rgb[i + 1] << 8) | rgb[i + 2];
    counts.set(c, (counts.get(c) ?? 0) + 1);
  }
  let top = 0;
  for (const n of counts.values()) top = Math.max(top, n);
  return { top: top / (rgb.length / 3), colours: counts.size };
}

/** Keeps a repository-local test-artifacts/ folder out of git without touching the repository's .gitignore. */
function ignoreArtifacts(dir) {
  const i = dir.indexOf('/test-artifacts');
  if (!dir.startsWith(repo + '/') || i < 0) return;
  const root = dir.slice(0, i + '/test-artifacts'.length);
  if (!existsSync(join(root, '.gitignore'))) writeFileSync(join(root, '.gitignore'), '*\n');
}
