// The step runner the end-to-end scripts share: each step runs on after another fails, and
// `finish` prints `N passed, N failed` and exits non-zero on any failure.

export function steps() {
  let passed = 0;
  const failures = [];
  return {
    failures,
    /** Runs one named step, logging ok/FAIL with its time and the first lines of the error. */
    async step(name, fn) {
      const t = Date.now();
      const secs = () => ((Date.now() - t) / 1000).toFixed(1);
      try {
        await fn();
        passed++;
        console.log(`ok   ${name} (${secs()} s)`);
      } catch (e) {
        failures.push(name);
        console.log(`FAIL ${name} (${secs()} s)\n     ${String(e?.stack ?? e).split('\n').slice(0, 5).join('\n     ')}`);
      }
    },
    finish() {
      console.log(`${passed} passed, ${failures.length} failed`);
      process.exit(failures.length ? 1 : 0);
    },
  };
}
