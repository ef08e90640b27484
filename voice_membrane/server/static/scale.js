// The waterfall's time axis. Linear while it fits; when the last audio lies far
// past the first (a 21 s reply after a 280 ms start), the axis breaks at the
// first audio: linear up to it over most of the width, the rest on a log scale,
// so the sub-second stages stay readable beside the long tail. Pure functions.

export const BREAK_AT = 0.7; // the share of the width the linear part keeps
export const BREAK_RATIO = 2; // the axis breaks once the end is past twice the knee
const MIDDLE = BREAK_AT + (1 - BREAK_AT) / 2;

// A round step for about `parts` intervals: 1, 2 or 5 times a power of ten.
export function tickStep(max, parts = 4) {
  const raw = max / parts;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * magnitude >= raw) return m * magnitude;
  return 10 * magnitude;
}

/**
 * The axis for times up to `end` ms with the first audio at `knee` ms (null:
 * none). Returns {at(ms) → 0..1, ticks: [ms], end, breakMs (null: linear)}.
 */
export function timeScale(knee, end) {
  const last = Math.max(1, end);
  if (typeof knee !== "number" || knee <= 0 || last <= BREAK_RATIO * knee) {
    const step = tickStep(last);
    const axis = step * Math.ceil(last / step);
    const ticks = [];
    for (let at = 0; at <= axis + step / 1000; at += step) ticks.push(at);
    return { at: (ms) => clamp(ms / axis), ticks, end: axis, breakMs: null };
  }
  // The linear part ends on a round tick at or past the knee, the log part at `last`.
  const step = tickStep(knee, 3);
  const linear = step * Math.ceil(knee / step);
  const span = Math.log(last / linear);
  const at = (ms) =>
    ms <= linear
      ? clamp((BREAK_AT * ms) / linear)
      : clamp(BREAK_AT + ((1 - BREAK_AT) * Math.log(ms / linear)) / span);
  const ticks = [];
  for (let ms = 0; ms <= linear + step / 1000; ms += step) ticks.push(ms);
  // Past the break: a round time near the middle of the log part where its label
  // clears the break's and the end's, then the end.
  const middle = roundTimes(linear, last)
    .filter((ms) => at(ms) - BREAK_AT > 0.1 && 1 - at(ms) > 0.13)
    .sort((a, b) => Math.abs(at(a) - MIDDLE) - Math.abs(at(b) - MIDDLE))[0];
  if (middle !== undefined) ticks.push(middle);
  ticks.push(last);
  return { at, ticks, end: last, breakMs: linear };
}

// 1, 2 and 5 times the powers of ten strictly between `from` and `to`.
function roundTimes(from, to) {
  const times = [];
  for (let magnitude = 10 ** Math.floor(Math.log10(from)); magnitude < to; magnitude *= 10) {
    for (const m of [1, 2, 5]) if (m * magnitude > from && m * magnitude < to) times.push(m * magnitude);
  }
  return times;
}

const clamp = (x) => Math.min(1, Math.max(0, x));

export function tickLabel(ms) {
  return ms >= 1000 ? `${+(ms / 1000).toFixed(2)} s` : `${+ms.toFixed(1)} ms`;
}
