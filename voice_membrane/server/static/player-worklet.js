// The page's audio player: frames pushed from the page are played back to back,
// with no gap between them (a frame starts on the sample after the last one ended).
// Runs on the audio thread; reports what it has played to the page.

const PREBUFFER_SECONDS = 0.04; // held before a turn starts: jitter margin (a frame is 20-60 ms)
const REPORT_EVERY = 8; // render quanta (128 samples each) between reports while playing

class VoiceMembranePlayer extends AudioWorkletProcessor {
  constructor() {
    super();
    this.queue = [];
    this.offset = 0; // read position in queue[0]
    this.queued = 0; // samples waiting
    this.played = 0; // samples played, all turns
    this.playing = false;
    this.ended = true; // no more audio is coming for now (turn over, or nothing started)
    this.starved = false; // in an underrun episode
    this.paused = false; // held where it is (barge-in): the queue is kept
    this.underruns = 0;
    this.prebuffer = Math.round(sampleRate * PREBUFFER_SECONDS);
    this.quanta = 0;
    this.port.onmessage = (event) => this.receive(event.data);
  }

  receive(message) {
    if (message.type === "push") {
      // Audio of a turn that ran dry arrives: the listener heard a gap.
      if (this.starved) {
        this.starved = false;
        this.underruns += 1;
      }
      this.queue.push(message.samples);
      this.queued += message.samples.length;
      this.ended = false;
    } else if (message.type === "end") {
      this.ended = true;
      this.starved = false;
    } else if (message.type === "pause" || message.type === "resume") {
      this.paused = message.type === "pause";
      this.report();
    } else if (message.type === "clear") {
      this.queue = [];
      this.offset = 0;
      this.queued = 0;
      this.playing = false;
      this.ended = true;
      this.starved = false;
      this.paused = false;
      this.report();
    }
  }

  report() {
    this.port.postMessage({
      played: this.played,
      queued: this.queued,
      playing: this.playing && !this.paused,
      paused: this.paused,
      underruns: this.underruns,
    });
  }

  process(_inputs, outputs) {
    const channels = outputs[0];
    const out = channels[0];
    const wasPlaying = this.playing;
    if (!this.playing && this.queued > 0 && (this.queued >= this.prebuffer || this.ended)) {
      this.playing = true;
    }
    let written = 0;
    if (this.playing && !this.paused) {
      while (written < out.length && this.queue.length > 0) {
        const head = this.queue[0];
        const n = Math.min(out.length - written, head.length - this.offset);
        out.set(head.subarray(this.offset, this.offset + n), written);
        written += n;
        this.offset += n;
        this.queued -= n;
        this.played += n;
        if (this.offset >= head.length) {
          this.queue.shift();
          this.offset = 0;
        }
      }
      if (this.queued === 0) {
        this.playing = false;
        // Ran dry before the turn's end: a gap, if more audio follows.
        if (!this.ended) this.starved = true;
      }
    }
    out.fill(0, written);
    for (let c = 1; c < channels.length; c++) channels[c].set(out);
    this.quanta += 1;
    if (this.playing !== wasPlaying || (this.playing && this.quanta % REPORT_EVERY === 0)) {
      this.report();
    }
    return true;
  }
}

registerProcessor("voice-membrane-player", VoiceMembranePlayer);
