// The reply's audio on the page: the audio context at the stream's rate, the
// output chain and its level meter, the player, and the binary frames decoded,
// counted and queued — or dropped when their turn is over.
import { BufferPlayer, LevelMeter, OutputChain, WorkletPlayer, decodeFrame } from "./audio.js";

const PCM_RATES = [16000, 22050, 24000, 48000];
const DEFAULT_RATE = 24000;

export class Playback {
  /** `level`: the meter's bar; `changed()`: render; `running()`: the context runs. */
  constructor(level, changed, running) {
    this.changed = changed;
    this.running = running;
    this.meter = new LevelMeter(level, () => changed());
    this.ctx = null;
    this.chain = null; // OutputChain: level analyser, volume, output analyser
    this.player = null;
    this.format = null; // session.started's audio
    this.lastSeq = -1;
    this.framesScheduled = 0;
    this.samplesScheduled = 0;
    this.framesDropped = 0;
    this.framesLost = 0;
    this.volume = 1;
    this.muted = false;
  }

  /** A context before any stream: its rate is the one to ask for. */
  open() {
    this.ctx = new AudioContext();
  }

  /** The rate to ask for: the context's own when the protocol allows it. */
  wantedRate() {
    const rate = this.ctx ? this.ctx.sampleRate : DEFAULT_RATE;
    return PCM_RATES.includes(rate) ? rate : DEFAULT_RATE;
  }

  /** A session's stream: a context at its rate (frames go in as they are, the
   * browser resamples), the chain and the player. */
  async start(format) {
    this.format = format;
    this.lastSeq = -1;
    const rate = format.sample_rate;
    if (this.ctx && this.ctx.sampleRate === rate && this.player) return;
    if (this.ctx) await this.ctx.close();
    this.player = null;
    const ctx = new AudioContext({ sampleRate: rate, latencyHint: "interactive" });
    this.ctx = ctx;
    this.chain = new OutputChain(ctx);
    this.chain.setVolume(this.volume, this.muted);
    const forceBuffers = new URLSearchParams(location.search).get("player") === "buffers";
    this.player =
      ctx.audioWorklet && !forceBuffers
        ? await WorkletPlayer.create(ctx, this.chain.input, this.changed)
        : new BufferPlayer(ctx, this.chain.input, this.changed);
    this.meter.attach(this.chain.level);
    ctx.onstatechange = () => {
      if (ctx.state === "running") this.running();
      this.changed();
    };
  }

  /** Browsers start audio only after a user gesture: call from event handlers. */
  resume() {
    if (this.ctx && this.ctx.state === "suspended") this.ctx.resume().then(this.changed, () => {});
  }

  get suspended() {
    return Boolean(this.ctx && this.ctx.state === "suspended");
  }

  get playing() {
    return Boolean(this.player && this.player.playing);
  }

  /** A binary frame: `accept(turn)` is its turn's record, or null when the turn
   * is over (its late frames are not played). */
  onFrame(buffer, accept) {
    if (!this.format || !this.player || buffer.byteLength < 8) return;
    const { turn, seq, samples } = decodeFrame(buffer, this.format.encoding);
    if (this.lastSeq >= 0 && seq > this.lastSeq + 1) this.framesLost += seq - this.lastSeq - 1;
    this.lastSeq = seq;
    const record = accept(turn);
    if (!record) {
      this.framesDropped += 1;
      return;
    }
    record.frames += 1;
    record.samples += samples.length;
    this.framesScheduled += 1;
    this.samplesScheduled += samples.length;
    this.player.push(samples);
    this.meter.wake();
  }

  setVolume(volume, muted) {
    this.volume = volume;
    this.muted = muted;
    if (this.chain) this.chain.setVolume(volume, muted);
  }

  /** What is queued is not played. */
  stop() {
    if (this.player) this.player.clear();
  }

  /** The turn's audio is all sent. */
  end() {
    if (this.player) this.player.end();
  }
}
