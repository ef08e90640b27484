// The microphone on the audio thread: each render quantum of the capture is
// resampled to the rate the server accepted, encoded (pcm16 or μ-law) and cut
// into frame_ms frames, posted to the page, which sends them as they are.
// While the gate is closed (muted, or push-to-talk not held) the frames carry
// silence: the server's listener counts time in samples, so it must keep
// receiving audio for its end-of-turn timer to run.
import { Framer, Resampler } from "./resample.js";

class VoiceMembraneMic extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const { encoding, rate, frameMs, open } = options.processorOptions;
    this.resampler = new Resampler(sampleRate, rate);
    this.framer = new Framer(Math.round((rate * frameMs) / 1000), encoding);
    this.open = open !== false; // given at creation: a muted mic never sends a first word
    this.port.onmessage = (event) => {
      if (event.data.type === "gate") this.open = event.data.open;
    };
  }

  process(inputs) {
    const input = inputs[0];
    // No channel: the track is not delivering (yet); no time has passed for it.
    if (!input || input.length === 0) return true;
    const mono = input[0]; // channelCount 1 was asked for; the first channel otherwise
    const block = this.open ? mono : new Float32Array(mono.length);
    for (const frame of this.framer.push(this.resampler.push(block))) {
      this.port.postMessage(frame, [frame]);
    }
    return true;
  }
}

registerProcessor("voice-membrane-mic", VoiceMembraneMic);
