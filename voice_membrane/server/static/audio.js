// The page's audio: the players (an AudioWorklet where the page is a secure
// context, else AudioBuffers scheduled back to back on the context's clock), the
// output chain (player → level analyser → volume → output analyser → speakers)
// and the level meter. Muting sets the volume to 0 and nothing else: the stream
// keeps playing, so what the server counts as heard stays true.

const BUFFER_MARGIN_SECONDS = 0.05; // AudioBuffer fallback: jitter margin before a turn's audio
const METER_FLOOR_DB = -60; // the meter's empty end; its full end is 0 dBFS
const METER_RELEASE = 0.8; // per animation frame: the bar falls back smoothly, rises at once

export class WorkletPlayer {
  static async create(ctx, output, onChange) {
    await ctx.audioWorklet.addModule("/static/player-worklet.js");
    return new WorkletPlayer(ctx, output, onChange);
  }
  constructor(ctx, output, onChange) {
    this.kind = "AudioWorklet";
    this.node = new AudioWorkletNode(ctx, "voice-membrane-player", {
      numberOfInputs: 0,
      outputChannelCount: [1],
    });
    this.node.connect(output);
    this.status = { played: 0, queued: 0, playing: false, underruns: 0 };
    this.node.port.onmessage = (event) => {
      const was = this.status.playing;
      this.status = event.data;
      if (this.status.playing !== was) onChange(); // the Interrupt button follows the sound
    };
  }
  push(samples) {
    this.node.port.postMessage({ type: "push", samples }, [samples.buffer]);
  }
  end() {
    this.node.port.postMessage({ type: "end" });
  }
  clear() {
    this.node.port.postMessage({ type: "clear" });
  }
  pause() {
    this.node.port.postMessage({ type: "pause" });
  }
  resume() {
    this.node.port.postMessage({ type: "resume" });
  }
  get playedSamples() {
    return this.status.played;
  }
  get playing() {
    return this.status.playing;
  }
  get underruns() {
    return this.status.underruns;
  }
}

export class BufferPlayer {
  constructor(ctx, output, onChange) {
    this.kind = "AudioBuffer";
    this.ctx = ctx;
    this.output = output;
    this.onChange = onChange;
    this.next = 0; // context time where the next frame starts
    this.segments = []; // {source, start, length}
    this.finished = 0; // samples of segments played to the end
    this.ended = true;
    this.underruns = 0;
  }
  push(samples) {
    const ctx = this.ctx;
    const now = ctx.currentTime;
    if (this.next < now + 0.005) {
      if (!this.ended && this.segments.length === 0) this.underruns += 1;
      this.next = now + BUFFER_MARGIN_SECONDS;
    }
    this.ended = false;
    const buffer = ctx.createBuffer(1, samples.length, ctx.sampleRate);
    buffer.copyToChannel(samples, 0);
    const source = ctx.createBufferSource();
    source.buffer = buffer;
    source.connect(this.output);
    const segment = { source, start: this.next, length: samples.length };
    source.onended = () => {
      const i = this.segments.indexOf(segment);
      if (i >= 0) {
        this.segments.splice(i, 1);
        this.finished += segment.length;
        if (this.segments.length === 0) this.onChange();
      }
    };
    source.start(this.next);
    this.segments.push(segment);
    this.next += samples.length / ctx.sampleRate;
  }
  end() {
    this.ended = true;
  }
  // Scheduled buffers cannot be held: this player (no AudioWorklet, so no
  // microphone either, but for ?player=buffers) plays through a barge-in pause.
  pause() {}
  resume() {}
  clear() {
    this.finished = this.playedSamples;
    for (const segment of this.segments) {
      segment.source.onended = null;
      segment.source.stop();
    }
    this.segments = [];
    this.next = 0;
    this.ended = true;
  }
  get playedSamples() {
    const now = this.ctx.currentTime;
    let played = this.finished;
    for (const s of this.segments) {
      const seconds = Math.min(Math.max(now - s.start, 0), s.length / this.ctx.sampleRate);
      played += Math.round(seconds * this.ctx.sampleRate);
    }
    return played;
  }
  get playing() {
    return this.segments.some((s) => s.start <= this.ctx.currentTime);
  }
}

// What the players feed. The level analyser hears the voice before the volume
// (the meter moves while muted: the reply is still being played); the output
// analyser hears what reaches the speakers.
export class OutputChain {
  constructor(ctx) {
    this.level = new AnalyserNode(ctx, { fftSize: 1024 });
    this.gain = new GainNode(ctx, { gain: 1 });
    this.output = new AnalyserNode(ctx, { fftSize: 1024 });
    this.level.connect(this.gain).connect(this.output).connect(ctx.destination);
    this.input = this.level;
  }
  setVolume(volume, muted) {
    // At once: a mute should not fade out over the next syllable.
    this.gain.gain.value = muted ? 0 : volume;
  }
}

function peakOf(analyser) {
  const samples = new Float32Array(analyser.fftSize);
  analyser.getFloatTimeDomainData(samples);
  let peak = 0;
  for (const x of samples) peak = Math.max(peak, Math.abs(x));
  return peak;
}

function rmsOf(analyser) {
  const samples = new Float32Array(analyser.fftSize);
  analyser.getFloatTimeDomainData(samples);
  let sum = 0;
  for (const x of samples) sum += x * x;
  return Math.sqrt(sum / samples.length);
}

/** The loudest sample of the last ~40 ms that an analyser heard (0 to 1). */
export const peak = (analyser) => (analyser ? peakOf(analyser) : 0);

// The level bar: the voice's loudness on a dB scale, drawn on animation frames
// while there is sound or the bar is still falling, and at rest otherwise.
export class LevelMeter {
  constructor(bar, onSpeaking) {
    this.bar = bar;
    this.onSpeaking = onSpeaking;
    this.analyser = null;
    this.value = 0; // what the bar shows, 0 to 1
    this.frame = null;
  }
  attach(analyser) {
    this.analyser = analyser;
    this.wake();
  }
  wake() {
    if (this.frame === null && this.analyser) this.frame = requestAnimationFrame(() => this.tick());
  }
  tick() {
    this.frame = null;
    if (!this.analyser) return; // detached (the microphone let go)
    const rms = rmsOf(this.analyser);
    const db = rms > 0 ? 20 * Math.log10(rms) : -Infinity;
    const target = Math.min(1, Math.max(0, (db - METER_FLOOR_DB) / -METER_FLOOR_DB));
    const was = this.value > 0;
    this.value = target >= this.value ? target : this.value * METER_RELEASE;
    if (this.value < 0.02) this.value = 0;
    this.bar.style.transform = `scaleX(${this.value.toFixed(3)})`;
    if (was !== this.value > 0) this.onSpeaking(this.value > 0);
    if (this.value > 0 || rms > 0) this.wake(); // else at rest until the next wake()
  }
}

/** A binary frame: its turn, sequence number and samples (-1 to 1). */
export function decodeFrame(buffer, encoding) {
  const view = new DataView(buffer);
  let samples;
  if (encoding === "mulaw") {
    const bytes = new Uint8Array(buffer, 8);
    samples = new Float32Array(bytes.length);
    for (let i = 0; i < bytes.length; i++) samples[i] = mulaw(bytes[i]) / 32768;
  } else {
    samples = new Float32Array((buffer.byteLength - 8) >> 1);
    for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(8 + 2 * i, true) / 32768;
  }
  return { turn: view.getUint32(0, true), seq: view.getUint32(4, true), samples };
}

function mulaw(byte) {
  const u = ~byte & 0xff;
  const magnitude = (((u & 0x0f) << 3) + 0x84) << ((u & 0x70) >> 4);
  return u & 0x80 ? 0x84 - magnitude : magnitude - 0x84;
}
