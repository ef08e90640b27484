// The page's microphone: getUserMedia with the browser's echo cancellation,
// noise suppression and auto gain, captured in an AudioWorklet (mic-worklet.js)
// that hands back frames ready to send, and an analyser for the mic meter.

const CONSTRAINTS = {
  audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
};
const TYPING = "Typing still works.";

/** Why this page cannot listen here, or null when it can. */
export function micUnavailable() {
  if (!window.isSecureContext) {
    // getUserMedia exists only in a secure context: https, or this machine by name.
    return `The microphone needs a secure page: open it over https, or as http://localhost or http://127.0.0.1 on this machine. ${TYPING}`;
  }
  if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
    return `This browser cannot use a microphone here (no getUserMedia). ${TYPING}`;
  }
  if (typeof AudioWorkletNode === "undefined") {
    return `This browser cannot process microphone audio (no AudioWorklet). ${TYPING}`;
  }
  return null;
}

/** One line for a getUserMedia failure. */
export function describeMicError(err) {
  switch (err && err.name) {
    case "NotAllowedError":
    case "SecurityError":
      return `The microphone is blocked for this page: allow it in the browser (the icon in the address bar), then press Reconnect. ${TYPING}`;
    case "NotFoundError":
    case "OverconstrainedError":
      return `No microphone was found: connect one, then press Reconnect. ${TYPING}`;
    case "NotReadableError":
    case "AbortError":
      return `The microphone could not be opened (another application may hold it). ${TYPING}`;
    default:
      return `The microphone could not start (${(err && (err.name || err.message)) || err}). ${TYPING}`;
  }
}

export class Microphone {
  constructor(onFrame, onEnded) {
    this.onFrame = onFrame; // an ArrayBuffer: one frame in the session's encoding
    this.onEnded = onEnded; // the device went away
    this.stream = null;
    this.nodes = [];
    this.node = null;
    this.analyser = null;
    this.open = true;
  }

  get live() {
    return Boolean(this.stream && this.stream.getAudioTracks().some((t) => t.readyState === "live"));
  }

  /** Asks for the microphone (the browser prompts once) and captures it in `ctx`. */
  async start(ctx, format) {
    if (!this.live) {
      const stream = await navigator.mediaDevices.getUserMedia(CONSTRAINTS);
      if (this.live) {
        // Another start (a new session's) got one meanwhile: one device in use, not two.
        for (const track of stream.getTracks()) track.stop();
      } else {
        this.stream = stream;
        for (const track of stream.getAudioTracks()) track.onended = () => this.onEnded();
      }
    }
    this.detach();
    await ctx.audioWorklet.addModule("/static/mic-worklet.js");
    const source = new MediaStreamAudioSourceNode(ctx, { mediaStream: this.stream });
    const node = new AudioWorkletNode(ctx, "voice-membrane-mic", {
      numberOfInputs: 1,
      numberOfOutputs: 1,
      outputChannelCount: [1],
      channelCount: 1,
      channelCountMode: "explicit", // a stereo device is mixed down to one channel
      processorOptions: {
        encoding: format.encoding,
        rate: format.sample_rate,
        frameMs: format.frame_ms,
        open: this.open,
      },
    });
    node.port.onmessage = (event) => this.onFrame(event.data);
    const analyser = new AnalyserNode(ctx, { fftSize: 1024 });
    source.connect(node);
    source.connect(analyser);
    // The graph runs a node only when something pulls it: its output (silence)
    // goes to the speakers.
    node.connect(ctx.destination);
    this.nodes = [source, node, analyser];
    this.node = node;
    this.analyser = analyser;
    this.setOpen(this.open);
  }

  /** Closed: frames of silence go on (the server counts time in samples). */
  setOpen(open) {
    this.open = open;
    if (this.node) this.node.port.postMessage({ type: "gate", open });
  }

  detach() {
    for (const node of this.nodes) node.disconnect();
    if (this.node) this.node.port.onmessage = null;
    this.nodes = [];
    this.node = null;
    this.analyser = null;
  }

  /** Lets the device go: the browser's recording indicator goes off. */
  stop() {
    this.detach();
    if (this.stream) for (const track of this.stream.getTracks()) {
      track.onended = null;
      track.stop();
    }
    this.stream = null;
  }
}
