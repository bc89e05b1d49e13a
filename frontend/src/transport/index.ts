import { HttpTransport } from './http';
import type { Transport } from './types';
import { WailsTransport, type WailsWindow } from './wails';

export * from './types';
export { HttpTransport } from './http';
export { WailsTransport } from './wails';

/**
 * Picks the transport at start: the Wails bindings when `window.go` exists (desktop app), HTTP otherwise.
 * The HTTP transport authenticates with the bearer token from `takeToken` (no cookies: a cookie for
 * 127.0.0.1 would be sent to every other port of it).
 */
export function pickTransport(w: Window = window): Transport {
  const ww = w as unknown as WailsWindow;
  if (ww.go && typeof ww.go === 'object') return new WailsTransport(ww);
  return new HttpTransport({ token: takeToken(w) });
}

/**
 * Like pickTransport, but if the page is inside Wails and its runtime has not yet created `window.go`
 * (bindings are set up by injected scripts), waits for it briefly first.
 */
export async function pickTransportWhenReady(w: Window = window, timeoutMs = 2000): Promise<Transport> {
  const inWails = () => 'WailsInvoke' in w || 'wailsbindings' in w || 'runtime' in w;
  if (!(w as unknown as WailsWindow).go && inWails()) {
    const until = Date.now() + timeoutMs;
    while (!(w as unknown as WailsWindow).go && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  }
  return pickTransport(w);
}

/** Where the tab keeps its token: sessionStorage is per origin (port included) and per tab. */
export const TOKEN_KEY = 'lore_token';

/**
 * The token for this tab. `lore serve` prints `/#token=…` (a fragment never reaches the server); the token
 * is taken from the fragment (or a leftover `?token=`), removed from the address bar and history, and kept
 * in sessionStorage so a reload of this tab still works. Without one in the URL, the stored one is used.
 */
export function takeToken(w: Window): string | undefined {
  let url: URL;
  try {
    url = new URL(w.location.href);
  } catch {
    return undefined;
  }
  const hash = new URLSearchParams(url.hash.replace(/^#/, ''));
  const inHash = hash.has('token');
  const inQuery = url.searchParams.has('token');
  const token = hash.get('token') || url.searchParams.get('token') || undefined;
  if (inHash || inQuery) {
    let rest = url.hash;
    if (inHash) {
      hash.delete('token');
      rest = hash.toString() ? `#${hash.toString()}` : '';
    }
    url.searchParams.delete('token');
    try {
      w.history.replaceState(w.history.state, '', url.pathname + url.search + rest);
    } catch {
      /* opaque origins: ignore */
    }
  }
  let store: Storage | undefined;
  try {
    store = w.sessionStorage;
  } catch {
    store = undefined; // storage disabled: the token lives in memory for this page only
  }
  if (token) {
    try {
      store?.setItem(TOKEN_KEY, token);
    } catch {
      /* quota or privacy mode: memory only */
    }
    return token;
  }
  try {
    return store?.getItem(TOKEN_KEY) || undefined;
  } catch {
    return undefined;
  }
}
