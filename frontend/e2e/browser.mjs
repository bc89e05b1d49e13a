// Launch helper for end-to-end tests: Debian's chromium driven by playwright-core (no browser download).
//
//   import { launch } from './browser.mjs';
//   const b = await launch();                 // fresh profile, headless
//   const page = await b.newPage();
//   await page.goto(url);
//   await b.screenshot(page, 'chat');        // → $LORE_E2E_SCREENSHOTS/chat.png (if set)
//   await b.close();                          // also deletes the profile
//
// Env: CHROMIUM_PATH (default /usr/bin/chromium), LORE_E2E_SCREENSHOTS (folder; screenshots are skipped
// when unset), LORE_E2E_HEADFUL=1 to watch under a display.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

export const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function screenshotDir() {
  const d = process.env.LORE_E2E_SCREENSHOTS;
  if (!d) return undefined;
  mkdirSync(d, { recursive: true });
  return d;
}

export async function launch(opts = {}) {
  const headful = process.env.LORE_E2E_HEADFUL === '1';
  const profile = mkdtempSync(join(tmpdir(), 'lore-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    headless: !headful,
    args: headful ? CHROMIUM_FLAGS.filter((f) => f !== '--headless') : CHROMIUM_FLAGS,
    viewport: opts.viewport ?? { width: 1280, height: 860 },
    locale: 'en-US',
    colorScheme: opts.colorScheme ?? 'light',
    acceptDownloads: true,
    // A C locale breaks Intl in the page (see shared notes); the app guards it, tests run realistic.
    env: { ...process.env, LANG: 'en_US.UTF-8', LC_ALL: 'en_US.UTF-8' },
    timeout: 60_000,
  });
  const dir = screenshotDir();
  return {
    context,
    async newPage() {
      const existing = context.pages();
      return existing.length === 1 && existing[0].url() === 'about:blank' ? existing[0] : context.newPage();
    },
    /** Saves <dir>/<name>.png when LORE_E2E_SCREENSHOTS is set; returns the path or undefined. */
    async screenshot(page, name, o = {}) {
      if (!dir) return undefined;
      const path = join(dir, `${name.replace(/[^a-z0-9_.-]+/gi, '_')}.png`);
      await page.screenshot({ path, fullPage: o.fullPage ?? false });
      return path;
    },
    async close() {
      try {
        await context.close();
      } finally {
        rmSync(profile, { recursive: true, force: true });
      }
    },
  };
}

/**
 * Collects what must never happen on a page: CSP violations, uncaught errors, console errors (including
 * "frame-ancestors is ignored in a <meta> CSP": the policy's frame-ancestors is sent as a header only).
 */
export function watchPage(page) {
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    const t = m.text();
    if (m.type() === 'error' || /Content Security Policy/i.test(t)) problems.push(`console.${m.type()}: ${t}`);
  });
  return problems;
}
