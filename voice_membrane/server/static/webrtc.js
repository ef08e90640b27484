// The page's session over WebRTC (docs/webrtc.md), behind the WebSocket's own
// interface so app.js drives either alike: readyState, send, close, onopen,
// onmessage, onclose. The offer is POSTed to /v1/webrtc/offer (WHIP style);
// the session protocol runs on the "session" data channel, the reply plays
// from the audio track through the page's output chain (volume, meter), and
// the microphone goes out on the track (its worklet's frames are not sent).
// Before the channel opens, a server without WebRTC (404), a failed offer or
// ICE that does not complete falls back to the WebSocket, for this page load.

const OFFER_PATH = "/v1/webrtc/offer";
const OPEN_TIMEOUT_MS = 4000; // the offer answered, ICE and DTLS done, the channel open (a LAN: ~0.3 s)
const GATHER_TIMEOUT_MS = 2000; // host candidates come at once; STUN ones may not
const [CONNECTING, OPEN, CLOSED] = [0, 1, 3];
let unavailable = false; // this server said no once: the WebSocket from then on

/** A session's socket: WebRTC when the browser and the server can, else a WebSocket. */
export function openSession(host, token) {
  const wanted = new URLSearchParams(location.search).get("transport");
  const tryRtc = typeof RTCPeerConnection !== "undefined" && wanted !== "websocket" && !unavailable;
  return tryRtc ? new RtcSession(host, token) : webSocket(host);
}

function webSocket(host) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${scheme}//${host}/v1/session`);
  ws.binaryType = "arraybuffer";
  return ws;
}

class RtcSession {
  constructor(host, token) {
    this.host = host;
    this.transport = "webrtc";
    this.onopen = this.onmessage = this.onclose = null;
    this.state = CONNECTING;
    this.closedCode = null; // the server's session.closed
    this.fallback = null; // the WebSocket taken instead
    this.stream = null; // the reply's audio
    this.nodes = [];
    this.micTrack = null;
    this.micOpen = true;
    this.pc = new RTCPeerConnection();
    this.sender = this.pc.addTransceiver("audio", { direction: "sendrecv" }).sender;
    this.channel = this.pc.createDataChannel("session");
    this.pc.ontrack = (event) => {
      this.stream = event.streams[0] || new MediaStream([event.track]);
      if (this.playback) this.attachPlayback(this.playback);
    };
    this.start(token).catch((err) => this.failed(err));
  }

  get readyState() {
    return this.fallback ? this.fallback.readyState : this.state;
  }

  async start(token) {
    const channel = this.channel;
    channel.onmessage = (event) => this.message(event.data);
    channel.onclose = () => this.ended();
    const opened = new Promise((resolve) => (channel.onopen = resolve));
    await this.pc.setLocalDescription(await this.pc.createOffer());
    await gathered(this.pc);
    const headers = { "Content-Type": "application/sdp" };
    if (token) headers.Authorization = `Bearer ${token}`;
    const reply = await fetch(OFFER_PATH, { method: "POST", headers, body: this.pc.localDescription.sdp });
    if (reply.status === 401) return this.refused(4401); // as the WebSocket is: the token prompt
    if (reply.status === 503) return this.refused(1013); // draining or full: try again
    if (reply.status === 404) unavailable = true;
    if (reply.status !== 201) throw new Error(`offer answered ${reply.status}`);
    await this.pc.setRemoteDescription({ type: "answer", sdp: await reply.text() });
    const late = new Promise((_, reject) => setTimeout(() => reject(new Error("ICE timeout")), OPEN_TIMEOUT_MS));
    await Promise.race([opened, late]);
    if (this.state !== CONNECTING) return; // closed by the page meanwhile
    this.state = OPEN;
    this.pc.onconnectionstatechange = () => {
      if (["failed", "closed"].includes(this.pc.connectionState)) this.ended();
    };
    if (this.onopen) this.onopen();
  }

  /** Before the channel opened: the WebSocket instead, its events passed on. */
  failed(err) {
    if (this.state !== CONNECTING) return;
    unavailable = true;
    console.info(`WebRTC unavailable (${err.message}): using the WebSocket`);
    this.teardown();
    const ws = webSocket(this.host);
    this.fallback = ws;
    this.transport = "websocket";
    ws.onopen = (event) => this.onopen && this.onopen(event);
    ws.onmessage = (event) => this.onmessage && this.onmessage(event);
    ws.onclose = (event) => this.onclose && this.onclose(event);
  }

  refused(code) {
    this.closedCode = code;
    this.ended();
  }

  message(data) {
    if (typeof data !== "string") return;
    try {
      const event = JSON.parse(data);
      if (event.type === "session.closed") {
        this.closedCode = event.code; // (the channel closes next)
        return;
      }
    } catch {}
    if (this.onmessage) this.onmessage({ data });
  }

  ended() {
    if (this.state === CLOSED) return;
    this.state = CLOSED;
    this.teardown();
    if (this.onclose) this.onclose({ code: this.closedCode ?? 1006 });
  }

  send(data) {
    if (this.fallback) return this.fallback.send(data);
    // Binary: the microphone's frames, which go on the audio track instead.
    if (typeof data === "string" && this.channel.readyState === "open") this.channel.send(data);
  }

  close(code = 1000) {
    if (this.fallback) return this.fallback.close(code);
    this.closedCode = code;
    this.ended();
  }

  teardown() {
    for (const node of this.nodes) node.disconnect();
    this.nodes = [];
    if (this.audio) this.audio.srcObject = null;
    if (this.micTrack) this.micTrack.stop();
    this.channel.onclose = this.channel.onmessage = this.pc.onconnectionstatechange = null;
    this.channel.close();
    this.pc.close();
  }

  /** The reply through the page's output chain (volume, meter); Chrome plays a
   * remote stream into Web Audio only while a media element holds it too. */
  attachPlayback(playback) {
    this.playback = playback;
    if (!this.stream || !playback.ctx || !playback.chain || this.state === CLOSED) return;
    for (const node of this.nodes) node.disconnect();
    this.audio = this.audio || new Audio();
    this.audio.muted = true;
    this.audio.srcObject = this.stream;
    const source = playback.ctx.createMediaStreamSource(this.stream);
    source.connect(playback.chain.input);
    this.nodes = [source];
  }

  /** The microphone's stream: a copy of its track goes out on the audio track. */
  useMicrophone(stream) {
    const track = stream && stream.getAudioTracks()[0];
    if (!track || this.state === CLOSED || this.fallback) return;
    if (this.micTrack) this.micTrack.stop();
    this.micTrack = track.clone();
    this.micTrack.enabled = this.micOpen;
    this.sender.replaceTrack(this.micTrack).catch(() => {});
  }

  /** Muted (or push to talk released): the track sends silence. */
  setMicOpen(open) {
    this.micOpen = open;
    if (this.micTrack) this.micTrack.enabled = open;
  }

  /** For the status: the reply's received and concealed samples. */
  async audioStats() {
    const stats = { received: 0, concealed: 0 };
    if (this.fallback) return stats;
    for (const report of (await this.pc.getStats()).values()) {
      if (report.type === "inbound-rtp" && report.kind === "audio") {
        stats.received = report.totalSamplesReceived || 0;
        stats.concealed = report.concealedSamples || 0;
      }
    }
    return stats;
  }
}

function gathered(pc) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => pc.iceGatheringState === "complete" && resolve();
    pc.addEventListener("icegatheringstatechange", done);
    setTimeout(resolve, GATHER_TIMEOUT_MS);
  });
}

/** The page's microphone feeds the session's track, whichever session is current. */
export function wireMicrophone(mic, current) {
  const start = mic.start.bind(mic);
  const setOpen = mic.setOpen.bind(mic);
  mic.start = async (ctx, format) => {
    await start(ctx, format);
    const socket = current();
    if (socket && socket.useMicrophone) socket.useMicrophone(mic.stream);
  };
  mic.setOpen = (open) => {
    setOpen(open);
    const socket = current();
    if (socket && socket.setMicOpen) socket.setMicOpen(open);
  };
}
