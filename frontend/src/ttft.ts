// The UI's own time-to-first-token: from submit (performance.now()) to the first visible token painted.
// "Painted" is taken as the task right after the next animation frame (rAF runs just before the frame is
// rendered; a message posted from it is handled after). A hidden page gets no frames, so it falls back to a
// timer there.

export type AfterPaint = (cb: () => void) => void;

export const afterPaint: AfterPaint = (cb) => {
  if (typeof document !== 'undefined' && document.visibilityState === 'hidden') {
    setTimeout(cb, 0);
    return;
  }
  requestAnimationFrame(() => {
    const ch = new MessageChannel();
    ch.port1.onmessage = () => {
      ch.port1.close();
      cb();
    };
    ch.port2.postMessage(0);
  });
};

export interface TTFTResult {
  uiTTFTms: number;
  /** From the token's arrival to its paint: the UI's own share. */
  paintMs: number;
}

export class TTFTMeter {
  private t0 = 0;
  private fired = false;

  constructor(
    private readonly now: () => number = () => performance.now(),
    private readonly paint: AfterPaint = afterPaint,
  ) {}

  /** Call on submit. */
  start(): void {
    this.t0 = this.now();
    this.fired = false;
  }

  get started(): boolean {
    return this.t0 !== 0 || this.fired;
  }

  /**
   * Call for every token, *after* inserting it into the DOM. The first token with visible text resolves
   * `done` once painted; later calls return false.
   */
  token(text: string, arrivedAt: number, done: (r: TTFTResult) => void): boolean {
    if (this.fired || !text || !text.trim()) return false;
    this.fired = true;
    const t0 = this.t0;
    this.paint(() => {
      const t1 = this.now();
      done({ uiTTFTms: round(t1 - t0), paintMs: round(t1 - arrivedAt) });
    });
    return true;
  }
}

function round(x: number): number {
  return Math.round(x * 10) / 10;
}
