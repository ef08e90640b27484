// The browser page of `voice-membrane serve`: one session, over WebRTC or the
// WebSocket (webrtc.js; docs/websocket-protocol.md) and its events, the reply's audio
// (playback.js), its transcript, hidden blocks and latency (waterfall.js); the
// microphone (listen.js).
// Plain ES modules, no build step. Server text is only ever set with
// textContent (model output is untrusted).
import { HiddenBlocks } from "./blocks.js";
import { CLOSE_REASONS, STATE_LABELS } from "./labels.js";
import { Listening } from "./listen.js";
import { showPipelines } from "./picker.js";
import { Playback } from "./playback.js";
import { Reconnector } from "./reconnect.js";
import { stored } from "./stored.js";
import { exposeStatus } from "./status.js";
import { Transcript } from "./transcript.js";
import { showReport } from "./waterfall.js";
import { openSession, wireMicrophone } from "./webrtc.js";

const PROTOCOL = 1;
const FRAME_MS = 60; // the reply's frames, as session.start asks for them
// The token is kept for this tab only (sessionStorage): never in the address or localStorage.
const TOKEN_KEY = "voice-membrane.token";
const DETAILS_KEY = "voice-membrane.details";
const VOLUME_KEY = "voice-membrane.volume";
const WAITING_TURN = Symbol("waiting"); // sent a message, no turn.started yet

const $ = (id) => document.getElementById(id);
const ui = Object.fromEntries(
  [
    "state", "voice", "level", "pipeline", "pipeline-field", "mute", "volume", "connect",
    "connect-button", "token-prompt", "token-field", "token", "error", "transcript",
    "composer", "message", "send", "interrupt", "details", "session-info", "audio-info",
    "session-id", "hidden-count", "hidden-blocks", "waterfalls", "mic", "mic-level", "mic-note",
    "talk-field", "talk", "mic-mute", "talk-mode", "talk-hint", "start-mic", "mic-retry",
  ].map((id) => [id.replace(/-(\w)/g, (_, c) => c.toUpperCase()), $(id)]),
);
const waterfallHint = ui.waterfalls.firstElementChild;
const hidden = new HiddenBlocks(ui.hiddenBlocks, ui.hiddenCount);
const transcript = new Transcript(ui.transcript);

const app = {
  ws: null,
  state: "connecting", // connecting | token | idle | responding | interrupting | closed
  session: null,
  tokenSent: "", // the token of the current attempt ("" when none)
  turn: null, // the running turn's number, WAITING_TURN, or null
  interruptPending: false, // interrupted while WAITING_TURN
  droppedUpTo: 0, // frames of turns up to this one are dropped (interrupted or ended)
  turns: new Map(), // this session's turn → record
  lastTurn: null,
  resumes: 0, // sessions resumed after a dropped connection
};
const playback = new Playback(ui.level, () => render(), () => listening.onContextRunning());
const listening = new Listening(ui, transcript, {
  send,
  sendAudio: (frame) => {
    if (!app.ws || app.ws.readyState !== WebSocket.OPEN || !app.session) return false;
    app.ws.send(frame); // raw input audio: a binary frame, no header
    return true;
  },
  reconnect: () => newSession(),
  retry: () => app.state === "closed" && newSession(), // else one is coming (resume, token)
  dropTurn: (turn) => dropTurn(turn),
  player: () => playback.player,
  changed: () => render(),
});
wireMicrophone(listening.mic, () => app.ws); // over WebRTC the voice goes on the track

// --- audio ---------------------------------------------------------------------
const resumeAudio = () => playback.resume();

// A frame of a turn interrupted or over is not played.
function onAudio(buffer) {
  playback.onFrame(buffer, (turn) => (turn <= app.droppedUpTo ? null : turnRecord(turn)));
}

function setVolume(volume, muted) {
  playback.setVolume(volume, muted);
  ui.volume.value = String(volume);
  ui.mute.setAttribute("aria-pressed", String(muted));
  ui.mute.textContent = muted ? "Unmute" : "Mute";
  stored.set(localStorage, VOLUME_KEY, JSON.stringify({ volume, muted }));
  render();
}

// --- connection ------------------------------------------------------------------
const reconnector = new Reconnector(() => connect());

function newSession() {
  reconnector.forget();
  connect();
}

function connect() {
  if (app.ws) {
    app.ws.onclose = null;
    app.ws.close(1000);
  }
  hideError();
  setState("connecting");
  app.tokenSent = ui.token.value.trim() || stored.get(sessionStorage, TOKEN_KEY) || "";
  const ws = (app.ws = openSession(location.host, app.tokenSent));
  ws.onopen = () => {
    const start = { type: "session.start", v: PROTOCOL };
    // 60 ms frames (protocol 1.2): a third of the server's per-frame work of 20 ms
    // ones; the player's lead is the server's pacing, not the frame size (and at a
    // turn's start the server sends shorter frames rather than hold audio back).
    start.audio = { encoding: "pcm16", sample_rate: playback.wantedRate(), frame_ms: FRAME_MS };
    Object.assign(start, listening.startFields()); // input_audio and turn_taking
    if (app.tokenSent) start.token = app.tokenSent;
    // A pipeline other than the server's first: ?pipeline=NAME in the page's address.
    const pipeline = new URLSearchParams(location.search).get("pipeline");
    if (pipeline) start.pipeline = pipeline;
    ws.send(JSON.stringify(reconnector.resumeMessage(app.tokenSent) || start));
  };
  ws.onmessage = (event) => {
    if (typeof event.data !== "string") return onAudio(event.data);
    let message;
    try {
      message = JSON.parse(event.data);
    } catch {
      showError("The server sent a message that is not JSON.");
      return;
    }
    onEvent(message).catch((err) => showError(`Page error: ${err.message}`));
  };
  ws.onclose = (event) => {
    if (app.ws !== ws) return;
    app.ws = null;
    listening.onClosed();
    stopAudio();
    app.turn = null;
    app.interruptPending = false;
    if (event.code === 4401) return askForToken();
    if (event.code === 4410 && reconnector.resuming) {
      transcript.divider("The session could not be resumed (it expired): a new one starts");
      return newSession();
    }
    if (reconnector.onClosed(event.code)) return setState("reconnecting");
    setState("closed");
    if (event.code !== 1000) {
      const why = CLOSE_REASONS[event.code] || "The connection was lost.";
      // The server's error event (slow_client, rate_limited, …) says more: keep it.
      const said = ui.error.hidden ? "" : `${ui.error.textContent} — `;
      showError(`${said}${why} (close code ${event.code})`);
    }
  };
}

// A 4401 on a first attempt without a token is how the page learns that the
// server needs one: a prompt, not an error. An error only for a token refused.
function askForToken() {
  ui.tokenField.hidden = ui.tokenPrompt.hidden = false;
  if (app.tokenSent) {
    stored.set(sessionStorage, TOKEN_KEY, null);
    showError(`${CLOSE_REASONS[4401]} (close code 4401)`);
  }
  setState("token");
  ui.token.select();
  ui.token.focus();
}

function send(message) {
  if (app.ws && app.ws.readyState === WebSocket.OPEN) app.ws.send(JSON.stringify(message));
}

async function onEvent(message) {
  switch (message.type) {
    case "session.started":
      await onSessionStarted(message);
      break;
    case "session.resumed":
      await onSessionResumed(message);
      break;
    case "turn.started":
      onTurnStarted(message);
      break;
    case "transcript.delta":
      if (message.turn > app.droppedUpTo) {
        turnRecord(message.turn).replyText.textContent += message.text;
        transcript.scroll();
      }
      break;
    case "log":
      hidden.onLog(message);
      break;
    case "block":
      hidden.onBlock(message);
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
      listening.onEvent(message); // the user's side; a newer server's event: ignored
      break;
  }
  render();
}

async function onSessionStarted(message) {
  // A new session counts turns from 1 and remembers nothing of the last one: the
  // conversation so far stays on screen above a divider that says so.
  if (app.session && transcript.hasTurns) {
    transcript.divider(`New session on “${message.pipeline}”: it does not remember the conversation above`);
  }
  reconnector.remember(message);
  if (app.tokenSent) stored.set(sessionStorage, TOKEN_KEY, app.tokenSent);
  ui.token.value = "";
  ui.tokenField.hidden = ui.tokenPrompt.hidden = true;
  app.session = message;
  app.droppedUpTo = 0;
  app.turns = new Map();
  app.lastTurn = null;
  hidden.clear();
  ui.waterfalls.replaceChildren(waterfallHint);
  await playback.start(message.audio);
  app.ws?.attachPlayback?.(playback); // (over WebRTC: the reply's track)
  listening.onSessionStarted(message, playback.ctx); // the microphone, once asked for: not awaited
  ui.sessionInfo.textContent = `${message.llm} → ${message.tts} (pipeline ${message.pipeline})`;
  ui.sessionId.textContent = message.session;
  showPipelines(ui.pipeline, ui.pipelineField, message);
  ui.audioInfo.textContent =
    `${message.audio.encoding} ${message.audio.sample_rate} Hz, ` +
    `${message.audio.frame_ms} ms frames, ${playback.player.kind}`;
  setState("idle");
  ui.message.focus();
}

// The same session on a new connection: the transcript stays, the turn cut by
// the drop shows what was heard of it, a turn lost with its server says so.
async function onSessionResumed(message) {
  reconnector.remember(message);
  app.session = message;
  app.resumes += 1;
  const last = message.last_turn;
  const cut = last && app.turns.get(last.turn);
  if (cut && !cut.ended) {
    Object.assign(cut, { ended: true, heard: last.heard, interrupted: last.fate !== "complete" });
    cut.replyText.textContent = last.heard;
    cut.note.textContent = last.fate === "cancelled" ? " (lost: send it again)" : " (cut by the drop)";
  }
  if (last) app.droppedUpTo = Math.max(app.droppedUpTo, last.turn);
  await playback.start(message.audio);
  app.ws?.attachPlayback?.(playback);
  listening.onSessionStarted(message, playback.ctx);
  ui.sessionId.textContent = message.session;
  transcript.divider("Reconnected: the conversation goes on");
  hideError();
  setState("idle");
}

function onTurnStarted(message) {
  app.turn = message.turn;
  const record = turnRecord(message.turn);
  record.userText.textContent = message.text;
  record.userEl.dataset.source = message.source || "text";
  record.userEl.hidden = message.source === "greeting"; // the assistant spoke first
  listening.onTurnStarted(message);
  if (app.interruptPending) {
    // Interrupted before the server named the turn: none of its audio plays.
    app.interruptPending = false;
    app.droppedUpTo = Math.max(app.droppedUpTo, message.turn);
    setState("interrupting");
  } else {
    setState("responding");
  }
  transcript.scroll();
}

function onTurnEnd(message) {
  const record = turnRecord(message.turn);
  Object.assign(record, { ended: true, heard: message.heard, interrupted: message.interrupted });
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
    playback.end();
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
  if (message.code === "stt_error") listening.clearHeard(); // that utterance is dropped
  showError(`${message.code}: ${message.message}`);
}

function onMetrics(message) {
  const record = turnRecord(message.turn);
  record.report = message.report || {};
  showReport(ui.waterfalls, transcript, record, message.turn, record.report);
}

// --- transcript ------------------------------------------------------------------
function turnRecord(turn) {
  let record = app.turns.get(turn);
  if (record) return record;
  record = transcript.add(turn, app.session ? app.session.session : "");
  Object.assign(record, { frames: 0, samples: 0, ended: false, heard: null, interrupted: false });
  record.report = null;
  app.turns.set(turn, record);
  return record;
}

// --- actions ---------------------------------------------------------------------
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
  stopAudio();
  if (app.turn === null) return;
  send({ type: "interrupt" });
  dropTurn(null);
}

// A turn's audio is not played any more (barge-in, push-to-talk): null is the
// running turn, or the next one when it is not named yet.
function dropTurn(turn) {
  stopAudio();
  const current = turn ?? app.turn;
  if (current === null) return;
  if (typeof current === "number") app.droppedUpTo = Math.max(app.droppedUpTo, current);
  else app.interruptPending = true;
  setState("interrupting");
}

const stopAudio = () => playback.stop();

// --- rendering -------------------------------------------------------------------
function setState(state) {
  app.state = state;
  render();
}

function render() {
  const speaking = playback.playing || playback.meter.value > 0;
  let text = STATE_LABELS[app.state];
  if (speaking && app.ws) text = playback.muted ? "speaking (muted)" : "speaking";
  if (ui.state.textContent !== text) ui.state.textContent = text; // aria-live: only changes
  ui.state.dataset.state = app.state;
  ui.voice.dataset.speaking = String(speaking);
  const open = app.ws !== null && app.state !== "connecting";
  ui.connect.hidden = app.state !== "closed" && app.state !== "token";
  ui.connectButton.textContent = app.state === "token" || !app.session ? "Connect" : "Reconnect";
  ui.message.disabled = !open || app.state === "token";
  ui.send.disabled = !open || app.state !== "idle";
  ui.interrupt.disabled = !open || (app.state !== "responding" && !playback.playing);
  if (playback.suspended && open) ui.audioInfo.dataset.suspended = "true";
  else delete ui.audioInfo.dataset.suspended;
  playback.meter.wake();
  listening.render();
}

function showError(text) {
  ui.error.textContent = text;
  ui.error.hidden = false;
}

function hideError() {
  ui.error.hidden = true;
  ui.error.textContent = "";
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
  newSession();
});
ui.connect.addEventListener("submit", (event) => {
  event.preventDefault();
  resumeAudio();
  newSession();
});
ui.mute.addEventListener("click", () => setVolume(playback.volume, !playback.muted));
ui.volume.addEventListener("input", () => setVolume(Number(ui.volume.value), false));
ui.details.addEventListener("toggle", () => {
  stored.set(localStorage, DETAILS_KEY, ui.details.open ? "open" : "closed");
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && !ui.interrupt.disabled) {
    event.preventDefault();
    interrupt();
  }
});
document.addEventListener("pointerdown", resumeAudio);
document.addEventListener("keydown", resumeAudio);
setInterval(render, 250); // playback ends on the audio thread: keep the buttons true

window.voiceMembrane = exposeStatus(app, playback, listening);

// Remembered choices: the details panel (closed unless opened before), the volume.
ui.details.open = stored.get(localStorage, DETAILS_KEY) === "open";
try {
  const saved = JSON.parse(stored.get(localStorage, VOLUME_KEY) || "null");
  if (saved && typeof saved.volume === "number" && saved.volume >= 0 && saved.volume <= 1) {
    setVolume(saved.volume, saved.muted === true);
  }
} catch {}

// Audio starts on the first gesture; the context's rate is known before it.
try {
  playback.open();
} catch (err) {
  showError(`This browser cannot play audio here: ${err.message}`);
}
render();
connect();
