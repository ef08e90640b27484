// The browser page of `voice-membrane serve`: one WebSocket session
// (docs/websocket-protocol.md, version 1), its audio played gaplessly, its
// transcript, hidden blocks and latency waterfall. Plain JS, no build step.
// Server text is only ever set with textContent (model output is untrusted).
"use strict";

(() => {
  const PROTOCOL = 1;
  const PCM_RATES = [16000, 22050, 24000, 48000];
  const DEFAULT_RATE = 24000;
  const BUFFER_MARGIN_SECONDS = 0.05; // AudioBuffer fallback: jitter margin before a turn's audio
  const WATERFALL = [
    ["request_sent", "request"],
    ["first_token", "first token"],
    ["first_visible", "first visible"],
    ["first_chunk", "first chunk"],
    ["tts_first_byte", "TTS first byte"],
    ["first_audio", "first audio"],
    ["last_audio", "last audio"],
  ];
  const CLOSE_REASONS = {
    1001: "The server is shutting down.",
    1008: "The server closed the session (too many messages, or audio not taken fast enough).",
    1009: "The server refused a message that was too large.",
    1011: "The server hit an internal error.",
    1013: "The server is draining or full: try again in a moment.",
    4401: "The server needs a token, or this one is wrong: enter it and press Connect.",
    4408: "The session was idle too long and was closed.",
  };
  const WAITING_TURN = Symbol("waiting"); // sent a message, no turn.started yet

  const $ = (id) => document.getElementById(id);
  const ui = {
    state: $("state"),
    sessionInfo: $("session-info"),
    pipeline: $("pipeline"),
    connect: $("connect"),
    connectButton: $("connect-button"),
    token: $("token"),
    error: $("error"),
    transcript: $("transcript"),
    composer: $("composer"),
    message: $("message"),
    send: $("send"),
    interrupt: $("interrupt"),
    audioInfo: $("audio-info"),
    hiddenCount: $("hidden-count"),
    hiddenBlocks: $("hidden-blocks"),
    waterfalls: $("waterfalls"),
  };

  const waterfallHint = ui.waterfalls.firstElementChild;

  // --- state ---------------------------------------------------------------
  const app = {
    ws: null,
    state: "connecting", // connecting | idle | responding | interrupting | closed
    audioContext: null,
    analyser: null, // between the player and the speakers
    player: null,
    format: null, // session.started's audio
    session: null,
    turn: null, // the running turn's number, WAITING_TURN, or null
    interruptPending: false, // interrupted while WAITING_TURN
    droppedUpTo: 0, // frames of turns up to this one are dropped (interrupted or ended)
    lastSeq: -1,
    framesScheduled: 0,
    samplesScheduled: 0,
    framesDropped: 0,
    framesLost: 0,
    turns: new Map(), // turn → {userEl, replyEl, frames, samples, ...}
    lastTurn: null,
    hiddenEntries: new Map(), // "turn:block" → entry element
    hiddenCount: 0,
  };

  // --- audio ---------------------------------------------------------------
  // AudioWorklet where the page is a secure context; else AudioBuffers
  // scheduled back to back on the context's clock.
  class WorkletPlayer {
    static async create(ctx, output) {
      await ctx.audioWorklet.addModule("/static/player-worklet.js");
      return new WorkletPlayer(ctx, output);
    }
    constructor(ctx, output) {
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
        if (this.status.playing !== was) render(); // the Interrupt button follows the sound
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

  class BufferPlayer {
    constructor(ctx, output) {
      this.kind = "AudioBuffer";
      this.ctx = ctx;
      this.output = output;
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
          if (this.segments.length === 0) render();
        }
      };
      source.start(this.next);
      this.segments.push(segment);
      this.next += samples.length / ctx.sampleRate;
    }
    end() {
      this.ended = true;
    }
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

  function wantedRate() {
    // The context's own rate when the protocol allows it; the browser resamples otherwise.
    const rate = app.audioContext ? app.audioContext.sampleRate : DEFAULT_RATE;
    return PCM_RATES.includes(rate) ? rate : DEFAULT_RATE;
  }

  async function setUpAudio(rate) {
    const usable = app.audioContext && app.audioContext.sampleRate === rate && app.player;
    if (usable) return;
    if (app.audioContext) await app.audioContext.close();
    app.player = null;
    // A context at the stream's rate: frames go in as they are, the browser resamples.
    app.audioContext = new AudioContext({ sampleRate: rate, latencyHint: "interactive" });
    // Both players go out through an analyser: what reaches the speakers can be checked.
    app.analyser = new AnalyserNode(app.audioContext, { fftSize: 1024 });
    app.analyser.connect(app.audioContext.destination);
    const forceBuffers = new URLSearchParams(location.search).get("player") === "buffers";
    app.player =
      app.audioContext.audioWorklet && !forceBuffers
        ? await WorkletPlayer.create(app.audioContext, app.analyser)
        : new BufferPlayer(app.audioContext, app.analyser);
    app.audioContext.onstatechange = render;
  }

  function resumeAudio() {
    // Browsers start audio only after a user gesture: call from event handlers.
    if (app.audioContext && app.audioContext.state === "suspended") {
      app.audioContext.resume().then(render, () => {});
    }
  }

  function decodeFrame(buffer) {
    const view = new DataView(buffer);
    const turn = view.getUint32(0, true);
    const seq = view.getUint32(4, true);
    let samples;
    if (app.format.encoding === "mulaw") {
      const bytes = new Uint8Array(buffer, 8);
      samples = new Float32Array(bytes.length);
      for (let i = 0; i < bytes.length; i++) samples[i] = mulaw(bytes[i]) / 32768;
    } else {
      const n = (buffer.byteLength - 8) >> 1;
      samples = new Float32Array(n);
      for (let i = 0; i < n; i++) samples[i] = view.getInt16(8 + 2 * i, true) / 32768;
    }
    return { turn, seq, samples };
  }

  function mulaw(byte) {
    const u = ~byte & 0xff;
    const magnitude = (((u & 0x0f) << 3) + 0x84) << ((u & 0x70) >> 4);
    return u & 0x80 ? 0x84 - magnitude : magnitude - 0x84;
  }

  function onAudio(buffer) {
    if (!app.format || !app.player || buffer.byteLength < 8) return;
    const { turn, seq, samples } = decodeFrame(buffer);
    if (app.lastSeq >= 0 && seq > app.lastSeq + 1) app.framesLost += seq - app.lastSeq - 1;
    app.lastSeq = seq;
    if (turn <= app.droppedUpTo) {
      app.framesDropped += 1; // a turn interrupted or over: its late frames are not played
      return;
    }
    const record = turnRecord(turn);
    record.frames += 1;
    record.samples += samples.length;
    app.framesScheduled += 1;
    app.samplesScheduled += samples.length;
    app.player.push(samples);
  }

  // --- connection ------------------------------------------------------------
  function connect() {
    if (app.ws) {
      app.ws.onclose = null;
      app.ws.close(1000);
    }
    hideError();
    setState("connecting");
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${scheme}//${location.host}/v1/session`);
    ws.binaryType = "arraybuffer";
    app.ws = ws;
    ws.onopen = () => {
      const start = {
        type: "session.start",
        v: PROTOCOL,
        audio: { encoding: "pcm16", sample_rate: wantedRate() },
      };
      const token = ui.token.value.trim();
      if (token) start.token = token;
      // A pipeline other than the server's first: ?pipeline=NAME in the page's address.
      const pipeline = new URLSearchParams(location.search).get("pipeline");
      if (pipeline) start.pipeline = pipeline;
      ws.send(JSON.stringify(start));
    };
    ws.onmessage = (event) => {
      if (typeof event.data === "string") {
        let message;
        try {
          message = JSON.parse(event.data);
        } catch {
          showError("The server sent a message that is not JSON.");
          return;
        }
        onEvent(message).catch((err) => showError(`Page error: ${err.message}`));
      } else {
        onAudio(event.data);
      }
    };
    ws.onclose = (event) => {
      if (app.ws !== ws) return;
      app.ws = null;
      stopAudio();
      app.turn = null;
      app.interruptPending = false;
      setState("closed");
      if (event.code !== 1000) {
        const why = CLOSE_REASONS[event.code] || "The connection was lost.";
        // The server's error event (slow_client, rate_limited, …) says more: keep it.
        const said = ui.error.hidden ? "" : `${ui.error.textContent} — `;
        showError(`${said}${why} (close code ${event.code})`);
      }
      if (event.code === 4401) ui.token.focus();
    };
  }

  function send(message) {
    if (app.ws && app.ws.readyState === WebSocket.OPEN) app.ws.send(JSON.stringify(message));
  }

  async function onEvent(message) {
    switch (message.type) {
      case "session.started":
        await onSessionStarted(message);
        break;
      case "turn.started":
        onTurnStarted(message);
        break;
      case "transcript.delta":
        if (message.turn > app.droppedUpTo) {
          turnRecord(message.turn).replyText.textContent += message.text;
          scrollTranscript();
        }
        break;
      case "log":
        onLog(message);
        break;
      case "block":
        onBlock(message);
        break;
      case "metrics":
        onMetrics(message);
        break;
      case "turn.end":
        onTurnEnd(message);
        break;
      case "error":
        onError(message);
        break;
      default:
        break; // a newer server's event: ignored
    }
    render();
  }

  async function onSessionStarted(message) {
    // A new session is a new conversation (turns count from 1 again): start clean.
    app.session = message;
    app.format = message.audio;
    app.lastSeq = -1;
    app.droppedUpTo = 0;
    app.turns = new Map();
    app.lastTurn = null;
    app.hiddenEntries = new Map();
    app.hiddenCount = 0;
    ui.hiddenCount.textContent = "0";
    ui.transcript.replaceChildren();
    ui.hiddenBlocks.replaceChildren();
    ui.waterfalls.replaceChildren(waterfallHint);
    await setUpAudio(message.audio.sample_rate);
    ui.sessionInfo.textContent = `${message.pipeline} · ${message.llm} → ${message.tts}`;
    showPipelines(message.pipelines || [], message.pipeline);
    ui.audioInfo.textContent =
      `${message.audio.encoding} ${message.audio.sample_rate} Hz, ` +
      `${message.audio.frame_ms} ms frames, ${app.player.kind}`;
    setState("idle");
    ui.message.focus();
  }

  function onTurnStarted(message) {
    app.turn = message.turn;
    const record = turnRecord(message.turn);
    record.userText.textContent = message.text;
    if (app.interruptPending) {
      // Interrupted before the server named the turn: none of its audio plays.
      app.interruptPending = false;
      app.droppedUpTo = Math.max(app.droppedUpTo, message.turn);
      setState("interrupting");
    } else {
      setState("responding");
    }
    scrollTranscript();
  }

  function onTurnEnd(message) {
    const record = turnRecord(message.turn);
    record.ended = true;
    record.heard = message.heard;
    record.interrupted = message.interrupted;
    if (message.interrupted) {
      record.replyEl.classList.add("interrupted");
      record.replyText.textContent = message.heard;
      record.note.textContent = " (interrupted)";
    }
    if (message.error) {
      record.note.textContent = ` (error: ${message.error})`;
      showError(`Turn ${message.turn} failed: ${message.error}`);
    }
    if (!record.replyText.textContent && !message.interrupted) {
      record.replyText.textContent = message.heard || "";
    }
    app.lastTurn = record;
    if (message.turn === app.turn) {
      app.player.end();
      app.turn = null;
      app.droppedUpTo = Math.max(app.droppedUpTo, message.turn);
      setState("idle");
    }
  }

  function onError(message) {
    if (app.turn === WAITING_TURN) {
      // The message was refused: no turn runs.
      app.turn = null;
      app.interruptPending = false;
      setState("idle");
    }
    showError(`${message.code}: ${message.message}`);
  }

  // --- transcript ------------------------------------------------------------
  function turnRecord(turn) {
    let record = app.turns.get(turn);
    if (record) return record;
    const userEl = document.createElement("li");
    userEl.className = "user";
    const userText = document.createElement("span");
    userEl.append(label("You"), userText);
    const replyEl = document.createElement("li");
    replyEl.className = "reply";
    replyEl.dataset.turn = String(turn);
    const replyText = document.createElement("span");
    replyText.className = "text";
    const note = document.createElement("span");
    note.className = "note";
    replyEl.append(label("Assistant"), replyText, note);
    ui.transcript.append(userEl, replyEl);
    record = {
      turn,
      userEl,
      userText,
      replyEl,
      replyText,
      note,
      frames: 0,
      samples: 0,
      ended: false,
      heard: null,
      interrupted: false,
      report: null,
    };
    app.turns.set(turn, record);
    return record;
  }

  function label(text) {
    const el = document.createElement("span");
    el.className = "who";
    el.textContent = `${text}: `;
    return el;
  }

  function scrollTranscript() {
    ui.transcript.lastElementChild?.scrollIntoView({ block: "nearest" });
  }

  // --- hidden blocks -----------------------------------------------------------
  function hiddenEntry(turn, index, type, meta) {
    const key = `${turn}:${index}`;
    let entry = app.hiddenEntries.get(key);
    if (entry) return entry;
    const li = document.createElement("li");
    li.className = `hidden-block ${type}`;
    li.dataset.type = type;
    const head = document.createElement("div");
    head.className = "block-head";
    const tag = document.createElement("span");
    tag.className = "tag";
    tag.textContent = type;
    const where = document.createElement("span");
    where.className = "muted";
    where.textContent = ` turn ${turn}, block ${index}`;
    head.append(tag, where);
    const body = document.createElement("pre");
    li.append(head, body);
    ui.hiddenBlocks.append(li);
    entry = { li, tag, body, type, part: null };
    if (meta && meta.tool_name) tag.textContent = `${type} · ${meta.tool_name}`;
    app.hiddenEntries.set(key, entry);
    app.hiddenCount += 1;
    ui.hiddenCount.textContent = String(app.hiddenCount);
    return entry;
  }

  function onLog(message) {
    const meta = message.meta || {};
    const type = meta.type || "hidden";
    const entry = hiddenEntry(message.turn, meta.block_index ?? "?", type, meta);
    if (meta.tool_name && !entry.tag.textContent.includes("·")) {
      entry.tag.textContent = `${type} · ${meta.tool_name}`;
    }
    // A tool call's parts (name, id, each parameter) on their own lines.
    const part = meta.tool_call_part ?? null;
    if (entry.part !== null && part !== entry.part && entry.body.textContent) {
      entry.body.textContent += "\n";
    }
    entry.part = part;
    entry.body.textContent += message.text;
    if (type === "image") showImage(entry, message.image || {});
  }

  // A generated image (never spoken): shown under its prompt when it comes as a
  // data: URL; an image held in a blob store is named by its id.
  function showImage(entry, image) {
    const url = typeof image.url === "string" ? image.url : "";
    if (url.startsWith("data:image/")) {
      const img = document.createElement("img");
      img.className = "generated-image";
      img.alt = image.revised_prompt || image.prompt || "generated image";
      img.src = url;
      img.style.maxWidth = "100%";
      img.style.display = "block";
      entry.li.append(img);
    } else if (image.blob_id) {
      entry.body.textContent += `\n(blob ${image.blob_id})`;
    }
  }

  function onBlock(message) {
    if (message.event !== "complete" || !message.block) return;
    const block = message.block;
    if (message.block_type !== "tool_call" || block.input == null) return;
    // The complete call: its name and parsed input, clearer than the streamed parts.
    const entry = hiddenEntry(message.turn, message.index, "tool_call", block);
    entry.body.textContent = `${block.tool_name || "?"}(${JSON.stringify(block.input)})`;
  }

  // --- latency waterfall ---------------------------------------------------------
  function onMetrics(message) {
    const report = message.report || {};
    const stamps = report.stamps_ms || {};
    const record = turnRecord(message.turn);
    record.report = report;
    const known = WATERFALL.map(([key]) => stamps[key]).filter((v) => typeof v === "number");
    // Seconds of speech would flatten the first-audio path into slivers: when the
    // last audio is far out, the scale ends past the first audio and its bar is cut.
    const early = WATERFALL.slice(0, -1)
      .map(([key]) => stamps[key])
      .filter((v) => typeof v === "number");
    const last = stamps.last_audio;
    const earlyMax = Math.max(1, ...early);
    const scale =
      typeof last === "number" && last > 4 * earlyMax ? 1.25 * earlyMax : Math.max(1, ...known);

    const figure = document.createElement("figure");
    figure.className = "waterfall";
    figure.dataset.turn = String(message.turn);
    const caption = document.createElement("figcaption");
    const firstAudio = stamps.first_audio;
    caption.textContent =
      `Turn ${message.turn}` +
      (typeof firstAudio === "number" ? ` — first audio ${fmt(firstAudio)}` : "") +
      (report.interrupted ? " (interrupted)" : "");
    figure.append(caption);

    const table = document.createElement("table");
    let previous = 0;
    for (const [key, name] of WATERFALL) {
      const value = stamps[key];
      const row = table.insertRow();
      row.dataset.stamp = key;
      const th = document.createElement("th");
      th.scope = "row";
      th.textContent = name;
      row.append(th);
      const track = row.insertCell();
      track.className = "track";
      const ms = row.insertCell();
      ms.className = "ms";
      if (typeof value === "number") {
        const bar = document.createElement("div");
        bar.className = "bar";
        const start = Math.min(previous, value);
        const left = (100 * start) / scale;
        bar.style.marginLeft = `${left}%`;
        if (value > scale) {
          bar.classList.add("cut"); // not to scale: runs off the edge
          bar.style.width = `${100 - left}%`;
        } else {
          bar.style.width = `max(2px, ${(100 * (value - start)) / scale}%)`;
        }
        bar.title = `${name}: ${fmt(value)} (+${fmt(value - start)})`;
        track.append(bar);
        ms.textContent = fmt(value);
        previous = value;
      } else {
        ms.textContent = "—";
      }
    }
    figure.append(table);
    const counts = report.counts || {};
    if (typeof counts.audio_seconds === "number") {
      const summary = document.createElement("p");
      summary.className = "muted";
      summary.textContent =
        `${report.llm || "?"} → ${report.tts || "?"}: ` +
        `${counts.audio_seconds.toFixed(2)} s of audio, ${counts.tokens ?? "?"} tokens`;
      figure.append(summary);
    }
    if (!ui.waterfalls.querySelector("figure")) ui.waterfalls.replaceChildren();
    ui.waterfalls.prepend(figure);
    while (ui.waterfalls.children.length > 5) ui.waterfalls.lastElementChild.remove();
  }

  function fmt(ms) {
    return `${Math.round(ms)} ms`;
  }

  // --- actions -------------------------------------------------------------------
  function sendMessage() {
    const text = ui.message.value.trim();
    if (!text || app.state !== "idle") return;
    resumeAudio();
    hideError();
    stopAudio(); // the tail of the last reply gives way to the new one
    send({ type: "user.message", text });
    ui.message.value = "";
    app.turn = WAITING_TURN;
    setState("responding");
  }

  function interrupt() {
    if (app.turn === null) {
      stopAudio();
      return;
    }
    send({ type: "interrupt" });
    stopAudio();
    if (typeof app.turn === "number") app.droppedUpTo = Math.max(app.droppedUpTo, app.turn);
    else app.interruptPending = true;
    setState("interrupting");
  }

  function stopAudio() {
    if (app.player) app.player.clear();
  }

  // --- rendering -------------------------------------------------------------------
  function setState(state) {
    app.state = state;
    render();
  }

  function render() {
    ui.state.textContent = app.state;
    ui.state.dataset.state = app.state;
    ui.connectButton.textContent = app.ws ? "Reconnect" : "Connect";
    ui.connectButton.classList.toggle("primary", !app.ws);
    const open = app.ws !== null && app.state !== "connecting";
    ui.message.disabled = !open;
    ui.send.disabled = !open || app.state !== "idle";
    ui.interrupt.disabled = !open || (app.state !== "responding" && !(app.player && app.player.playing));
    if (app.audioContext && app.audioContext.state === "suspended" && open) {
      ui.audioInfo.dataset.suspended = "true";
    } else {
      delete ui.audioInfo.dataset.suspended;
    }
  }

  function showError(text) {
    ui.error.textContent = text;
    ui.error.hidden = false;
  }

  function hideError() {
    ui.error.hidden = true;
    ui.error.textContent = "";
  }

  // A picker when the server allows more than one pipeline; the choice lives in the
  // page's address (?pipeline=NAME), so a reload keeps it.
  function showPipelines(names, current) {
    ui.pipeline.hidden = names.length < 2;
    ui.pipeline.replaceChildren(
      ...names.map((name) => {
        const option = document.createElement("option");
        option.value = option.textContent = name;
        option.selected = name === current;
        return option;
      }),
    );
  }

  // --- wiring ----------------------------------------------------------------------
  ui.composer.addEventListener("submit", (event) => {
    event.preventDefault();
    sendMessage();
  });
  ui.interrupt.addEventListener("click", () => {
    resumeAudio();
    interrupt();
  });
  ui.pipeline.addEventListener("change", () => {
    const url = new URL(location.href);
    url.searchParams.set("pipeline", ui.pipeline.value);
    history.replaceState(null, "", url);
    resumeAudio();
    connect();
  });
  ui.connect.addEventListener("submit", (event) => {
    event.preventDefault();
    resumeAudio();
    connect();
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !ui.interrupt.disabled) {
      event.preventDefault();
      interrupt();
    }
  });
  document.addEventListener("pointerdown", resumeAudio);
  setInterval(render, 250); // playback ends on the audio thread: keep the buttons true

  // Read-only status for tests and the curious (window.voiceMembrane).
  const status = {};
  const getters = {
    state: () => app.state,
    audioContextState: () => (app.audioContext ? app.audioContext.state : null),
    sampleRate: () => (app.audioContext ? app.audioContext.sampleRate : null),
    player: () => (app.player ? app.player.kind : null),
    playing: () => (app.player ? app.player.playing : false),
    framesScheduled: () => app.framesScheduled,
    samplesScheduled: () => app.samplesScheduled,
    samplesPlayed: () => (app.player ? app.player.playedSamples : 0),
    framesDropped: () => app.framesDropped,
    framesLost: () => app.framesLost,
    underruns: () => (app.player ? app.player.underruns : 0),
    session: () => (app.session ? app.session.session : null),
    lastTurn: () => (app.lastTurn ? snapshot(app.lastTurn) : null),
  };
  for (const [name, get] of Object.entries(getters)) {
    Object.defineProperty(status, name, { get, enumerable: true });
  }
  status.playedSeconds = () =>
    app.player && app.audioContext ? app.player.playedSamples / app.audioContext.sampleRate : 0;
  // The loudest sample of the last ~40 ms that reached the speakers (0 to 1).
  status.outputPeak = () => {
    if (!app.analyser) return 0;
    const samples = new Float32Array(app.analyser.fftSize);
    app.analyser.getFloatTimeDomainData(samples);
    return samples.reduce((peak, x) => Math.max(peak, Math.abs(x)), 0);
  };
  status.turn = (n) => (app.turns.has(n) ? snapshot(app.turns.get(n)) : null);
  Object.freeze(status);
  window.voiceMembrane = status;

  function snapshot(record) {
    return {
      turn: record.turn,
      frames: record.frames,
      samples: record.samples,
      ended: record.ended,
      heard: record.heard,
      interrupted: record.interrupted,
      audioSeconds: record.report?.counts?.audio_seconds ?? null,
    };
  }

  // Audio starts on the first gesture; the context's rate is known before it.
  try {
    app.audioContext = new AudioContext();
  } catch (err) {
    showError(`This browser cannot play audio here: ${err.message}`);
  }
  render();
  connect();
})();
