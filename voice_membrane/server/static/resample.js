// The microphone's conversion to what the server accepted: a windowed-sinc
// resampler (the AudioContext's rate to the session's), pcm16 or μ-law
// encoding, and frames of a fixed length. Sans-I/O: fed blocks of samples, it
// keeps no clock, so how the input is cut never changes what comes out. Used on
// the audio thread by mic-worklet.js; a plain module, testable in the page.

const ZERO_CROSSINGS = 12; // per side, at the cutoff: the kernel's length
const TABLE_STEPS = 512; // kernel values per input sample, interpolated between
const CUTOFF = 0.92; // of the lower Nyquist: the transition band ends before it

/** Rate conversion by band-limited interpolation (Smith's method), one channel. */
export class Resampler {
  constructor(inRate, outRate) {
    this.inRate = inRate;
    this.outRate = outRate;
    this.passthrough = inRate === outRate;
    // The cutoff in cycles per input sample: below both rates' Nyquist.
    const fc = (CUTOFF * Math.min(inRate, outRate)) / 2 / inRate;
    this.half = Math.ceil(ZERO_CROSSINGS / (2 * fc)); // kernel half-width, input samples
    this.table = kernel(fc, this.half);
    // Zeros before the first sample, so that the first output is dated at input 0.
    this.buffer = new Float32Array(this.half);
    this.dropped = -this.half; // input index of buffer[0]
    this.produced = 0; // outputs so far
  }

  /** Samples of one block in; the output samples they complete out. */
  push(block) {
    if (this.passthrough) return Float32Array.from(block);
    const joined = new Float32Array(this.buffer.length + block.length);
    joined.set(this.buffer);
    joined.set(block, this.buffer.length);
    const out = [];
    const { half, table, inRate, outRate } = this;
    for (;;) {
      // Output n sits at input n * inRate / outRate: integer arithmetic, so the
      // positions (and so the output) do not depend on how the input was cut.
      const scaled = this.produced * inRate;
      const whole = Math.floor(scaled / outRate);
      const frac = (scaled - whole * outRate) / outRate;
      const base = whole - this.dropped; // index in joined
      if (base + half >= joined.length) break;
      let sum = 0;
      for (let j = -half + 1; j <= half; j++) {
        // the kernel at distance |frac - j|, from the table, linearly interpolated
        const pos = Math.abs(frac - j) * TABLE_STEPS;
        const i = Math.floor(pos);
        sum += joined[base + j] * (table[i] + (pos - i) * (table[i + 1] - table[i]));
      }
      out.push(sum);
      this.produced += 1;
    }
    // Keep what the next outputs still reach back to.
    const next = Math.floor((this.produced * inRate) / outRate) - this.dropped;
    const keep = Math.max(0, Math.min(joined.length, next - half + 1));
    this.buffer = joined.slice(keep);
    this.dropped += keep;
    return Float32Array.from(out);
  }
}

// The low-pass kernel h(d) = 2 fc sinc(2 fc d), Blackman-windowed over ±half,
// tabulated for d = 0 … half (it is even) with one spare entry past the end.
function kernel(fc, half) {
  const n = half * TABLE_STEPS + 2;
  const table = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const d = i / TABLE_STEPS;
    if (d >= half) continue;
    const x = 2 * fc * d;
    const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
    const r = d / half; // 0 … 1 from the centre to the edge
    const window = 0.42 + 0.5 * Math.cos(Math.PI * r) + 0.08 * Math.cos(2 * Math.PI * r);
    table[i] = 2 * fc * sinc * window;
  }
  return table;
}

/** Float samples (-1 to 1) to pcm16 little-endian bytes. */
export function encodePcm16(samples) {
  const bytes = new ArrayBuffer(samples.length * 2);
  const view = new DataView(bytes);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    view.setInt16(2 * i, Math.round(s < 0 ? s * 32768 : s * 32767), true);
  }
  return bytes;
}

/** Float samples (-1 to 1) to G.711 μ-law bytes. */
export function encodeMulaw(samples) {
  const bytes = new Uint8Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    let s = Math.round(Math.max(-1, Math.min(1, samples[i])) * 32767);
    const sign = s < 0 ? 0x80 : 0;
    if (s < 0) s = -s;
    s = Math.min(s, 32635) + 0x84;
    let exponent = 7;
    for (let mask = 0x4000; (s & mask) === 0 && exponent > 0; mask >>= 1) exponent--;
    const mantissa = (s >> (exponent + 3)) & 0x0f;
    bytes[i] = ~(sign | (exponent << 4) | mantissa) & 0xff;
  }
  return bytes.buffer;
}

/** Cuts a stream of samples into frames of `size` samples, encoded. */
export class Framer {
  constructor(size, encoding) {
    this.size = size;
    this.encode = encoding === "mulaw" ? encodeMulaw : encodePcm16;
    this.pending = new Float32Array(size);
    this.filled = 0;
  }

  /** Samples in; the whole frames they complete out (ArrayBuffers). */
  push(samples) {
    const frames = [];
    let i = 0;
    while (i < samples.length) {
      const n = Math.min(this.size - this.filled, samples.length - i);
      this.pending.set(samples.subarray(i, i + n), this.filled);
      this.filled += n;
      i += n;
      if (this.filled === this.size) {
        frames.push(this.encode(this.pending));
        this.filled = 0;
      }
    }
    return frames;
  }
}

/** Root mean square of samples (0 to 1). */
export function rms(samples) {
  let sum = 0;
  for (const x of samples) sum += x * x;
  return samples.length ? Math.sqrt(sum / samples.length) : 0;
}
