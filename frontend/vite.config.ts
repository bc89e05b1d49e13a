/// <reference types="vitest/config" />
import { defineConfig } from 'vite';

// `npm run dev` can talk to a running `lore serve`: LORE_URL=http://127.0.0.1:8765 LORE_TOKEN=… npm run dev,
// with the same LORE_TOKEN pinned for the server (`LORE_TOKEN=… lore serve`; it rotates at each start otherwise).
// The server checks Host and Origin (DNS-rebinding defence), so the proxy rewrites Host (changeOrigin) and
// drops Origin, and adds the bearer token, which the dev page's URL does not carry.
const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env ?? {};
const loreURL = env.LORE_URL ?? 'http://127.0.0.1:8765';
const loreToken = env.LORE_TOKEN ?? '';

const proxy = {
  target: loreURL,
  changeOrigin: true,
  headers: loreToken ? { authorization: `Bearer ${loreToken}` } : undefined,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  configure(p: any) {
    p.on('proxyReq', (req: { removeHeader(n: string): void }) => req.removeHeader('origin'));
  },
};

// Vite's dev server injects CSS as <style> elements, which the strict CSP forbids; in `vite` (serve) only,
// allow inline styles. `vite build` keeps the CSP exactly as written (scripts/check-dist.mjs verifies it).
const devCSP = {
  name: 'lore-dev-csp',
  apply: 'serve' as const,
  transformIndexHtml(html: string) {
    return html.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'");
  },
};

export default defineConfig({
  plugins: [devCSP],
  // Relative asset URLs: the same dist works embedded in `lore serve` (served at /) and in Wails.
  base: './',
  build: {
    outDir: 'dist',
    target: 'es2022',
    sourcemap: false,
    // Never inline assets as data: URIs; every file is bundled next to index.html.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
  },
  server: { proxy: { '/api': proxy, '/v1': proxy } },
  test: {
    environment: 'jsdom',
    include: ['test/**/*.test.ts'],
    pool: 'threads',
    maxWorkers: 2,
    // test/styles.test.ts reads the stylesheet (?raw): without this, Vitest hands every CSS file over empty.
    css: { include: [/styles\.css/] },
  },
});
