// The listening half of the page (protocol v1.1): the microphone sent as binary
// frames once the session accepts input audio and the user clicked Start talking,
// hands-free or push-to-talk, the mic mute and meter, the user's words as they
// are recognized, and barge-in.
//
// The microphone opens only on a click in this page, every time it loads: a
// choice remembered in storage would let any site that opens the page start it
// listening unseen (the opened page is of this origin: it reads the same
// storage). Once clicked, the page keeps listening across its reconnects and
// new sessions until it is closed.
import { LevelMeter } from "./audio.js";
import { Microphone, describeMicError, micUnavailable } from "./mic.js";
import { stored } from "./stored.js";

// What the page asks for: 16 kHz pcm16 in 20 ms frames, what the engines take.
const INPUT_AUDIO = { encoding: "pcm16", sample_rate: 16000, frame_ms: 20 };
const TALK_KEY = "voice-membrane.turn-taking";
const MIC_MUTED_KEY = "voice-membrane.mic-muted";
const TURN_TAKING = ["vad", "push_to_talk"];

export class Listening {
  /**
   * `ui`: the page's elements; `hooks`: send(message), sendAudio(buffer),
   * reconnect() (a new session), retry() (a new session if none is coming),
   * dropTurn(turn) (its audio is not played), player() and changed() (render).
   */
  constructor(ui, transcript, hooks) {
    this.ui = ui;
    this.transcript = transcript;
    this.hooks = hooks;
    this.mic = new Microphone(
      (frame) => this.onFrame(frame),
      () => this.fail(`The microphone stopped (unplugged?): press Reconnect. Typing still works.`),
    );
    this.meter = new LevelMeter(ui.micLevel, () => {});
    this.accepted = null; // session.started's input_audio
    this.turnTaking = null;
    this.state = "off"; // off | ready (waits for the click) | asking | on | failed | unavailable
    this.wanted = false; // the user clicked Start talking (or Reconnect) in this page
    this.ctx = null; // the audio context the microphone is captured in
    this.attempt = 0; // counts the asks for the microphone: a stop makes the last one stale
    this.muted = stored.get(localStorage, MIC_MUTED_KEY) === "true";
    this.held = false; // the talk button or Space is down
    this.framesSent = 0;
    this.speech = false; // between vad.speech_start and vad.speech_end
    this.paused = false; // the reply's playout, paused by barge_in
    this.bargeIns = []; // the session's barge_in actions, for tests and the curious
    this.partials = 0;
    this.finals = [];
    this.wiring();
  }

  /** The fields of session.start that ask to listen (none where the page cannot). */
  startFields() {
    if (micUnavailable()) return {};
    return { input_audio: { ...INPUT_AUDIO }, turn_taking: this.wantedTurnTaking() };
  }

  wantedTurnTaking() {
    const asked = new URLSearchParams(location.search).get("turn_taking");
    if (TURN_TAKING.includes(asked)) return asked;
    const saved = stored.get(localStorage, TALK_KEY);
    return TURN_TAKING.includes(saved) ? saved : "vad";
  }

  /** A new session: listen when it accepted input audio and the user asked to. */
  onSessionStarted(message, ctx) {
    this.ctx = ctx;
    this.held = false; // a hold of the last session ends with it
    this.stopMic();
    this.accepted = message.input_audio || null;
    this.turnTaking = message.turn_taking || null;
    this.framesSent = 0;
    this.bargeIns = [];
    this.partials = 0;
    this.speech = this.paused = false;
    this.clearHeard();
    const listens = Boolean(message.listening && message.listening[message.pipeline]);
    const why = micUnavailable();
    if (!this.accepted) {
      // The pipeline does not listen, or the page did not ask: typing only.
      this.state = listens && why ? "unavailable" : "off";
      this.note(this.state === "unavailable" ? why : "");
      this.changed();
      return;
    }
    this.note("");
    if (this.wanted) {
      this.startMic();
    } else {
      this.state = "ready"; // the Start talking button
      this.changed();
    }
  }

  /** Start talking, or Reconnect: the microphone, or a new connection first. */
  ask() {
    this.wanted = true;
    if (!this.accepted) {
      this.hooks.retry(); // no session: the next one listens
      return;
    }
    if (this.state === "asking" || this.state === "on") return;
    this.note("");
    this.startMic();
  }

  startMic() {
    const ctx = this.ctx;
    const attempt = ++this.attempt;
    this.state = "asking";
    this.changed();
    this.mic.start(ctx, this.accepted).then(
      () => {
        if (attempt !== this.attempt) {
          // Stopped meanwhile (the session ended): let go, unless asked again.
          if (this.state !== "asking") this.mic.stop();
          return;
        }
        this.state = "on";
        this.meter.attach(this.mic.analyser);
        this.gate();
        if (ctx.state !== "running") {
          // A browser may start sound only after a gesture: say so until then.
          this.note("Click anywhere to start listening (the browser waits for a click).", "hint");
          ctx.resume().then(() => this.onContextRunning(), () => {});
        }
        this.changed();
      },
      (err) => {
        if (attempt === this.attempt) this.fail(describeMicError(err));
      },
    );
  }

  /** The context resumed (a gesture): the click hint is done. */
  onContextRunning() {
    if (this.ui.micNote.dataset.kind === "hint") this.note("");
  }

  fail(text) {
    this.stopMic();
    this.state = "failed";
    this.note(text);
    this.changed();
  }

  stopMic() {
    this.attempt += 1;
    this.mic.stop();
    this.meter.analyser = null;
    this.ui.micLevel.style.transform = "scaleX(0)";
    if (this.held) this.release();
  }

  /** The connection closed: the microphone is let go. */
  onClosed() {
    this.stopMic();
    this.accepted = null;
    if (this.state !== "failed" && this.state !== "unavailable") this.state = "off";
    this.changed();
  }

  onFrame(frame) {
    if (!this.accepted || this.state !== "on") return;
    if (this.hooks.sendAudio(frame)) this.framesSent += 1;
  }

  // --- events ----------------------------------------------------------------
  /** A v1.1 event of the user's side; false for any other. */
  onEvent(message) {
    switch (message.type) {
      case "vad.speech_start":
      case "vad.speech_end":
        this.speech = message.type === "vad.speech_start";
        break;
      case "transcript.partial":
        this.partials += 1;
        this.transcript.live(this.finals.join(" "), message.text);
        break;
      case "transcript.final":
        if (message.text) this.finals.push(message.text);
        this.transcript.live(this.finals.join(" "), "");
        break;
      case "barge_in":
        this.onBargeIn(message);
        break;
      case "no_words":
        // Sound the recognizer made no words of: no turn, said once (as the CLI does).
        this.transcript.notice(
          "no-words",
          `${(message.speech_ms / 1000).toFixed(1)} s of sound had no words in it ` +
            "(music, noise, or a language the recognizer does not know): no turn",
        );
        break;
      default:
        return false;
    }
    this.changed();
    return true;
  }

  /** A turn started: a voice turn takes the words heard so far off the live line. */
  onTurnStarted(message) {
    if (message.source === "voice") this.clearHeard();
  }

  /** The words on the live line are no turn (or are one now): off the screen. */
  clearHeard() {
    this.finals = [];
    this.transcript.clearLive();
  }

  onBargeIn(message) {
    const player = this.hooks.player();
    // What had been played when it came: a pause holds that still until the resume.
    this.bargeIns.push({ action: message.action, played: player ? player.playedSamples : 0 });
    if (message.action === "pause") {
      // Held where it is: a cough resumes it, words interrupt it.
      this.paused = true;
      if (player) player.pause();
    } else if (message.action === "resume") {
      // Nothing real was said (a cough, "mm-hm"): its words go.
      this.paused = false;
      if (player) player.resume();
      this.clearHeard();
    } else if (message.action === "interrupt") {
      this.paused = false;
      this.hooks.dropTurn(message.turn);
    }
  }

  // --- controls --------------------------------------------------------------
  /** The microphone is (being) opened: the talk controls work. */
  get listening() {
    return Boolean(this.accepted) && (this.state === "on" || this.state === "asking");
  }

  press() {
    if (this.held || !this.listening) return;
    this.held = true;
    if (this.turnTaking === "push_to_talk") {
      // The server interrupts a reply at once; its audio here stops with it.
      this.hooks.send({ type: "input.start" });
      this.hooks.dropTurn(null);
    }
    this.gate();
  }

  release() {
    if (!this.held) return;
    this.held = false;
    if (this.turnTaking === "push_to_talk" && this.accepted) this.hooks.send({ type: "input.end" });
    this.gate();
  }

  /** Hands-free: open unless muted, or while held. Push-to-talk: only while held. */
  gate() {
    const open = this.turnTaking === "push_to_talk" ? this.held : this.held || !this.muted;
    this.mic.setOpen(open);
    this.changed();
  }

  setMuted(muted) {
    this.muted = muted;
    stored.set(localStorage, MIC_MUTED_KEY, String(muted));
    this.gate();
  }

  wiring() {
    const ui = this.ui;
    ui.startMic.addEventListener("click", () => this.ask());
    ui.micRetry.addEventListener("click", () => this.ask());
    ui.micMute.addEventListener("click", () => this.setMuted(!this.muted));
    ui.talk.addEventListener("pointerdown", (event) => {
      ui.talk.setPointerCapture(event.pointerId);
      this.press();
    });
    for (const name of ["pointerup", "pointercancel", "lostpointercapture"]) {
      ui.talk.addEventListener(name, () => this.release());
    }
    ui.talkMode.addEventListener("change", () => {
      stored.set(localStorage, TALK_KEY, ui.talkMode.value);
      const url = new URL(location.href);
      url.searchParams.delete("turn_taking");
      history.replaceState(null, "", url);
      this.hooks.reconnect(); // turn-taking is fixed for a session
    });
    // Hold Space to talk, except where Space types or picks.
    const typing = (el) => el && el.matches("input, textarea, select, [contenteditable]");
    document.addEventListener("keydown", (event) => {
      if (event.code !== "Space" || typing(event.target) || !this.listening) return;
      event.preventDefault();
      if (!event.repeat) this.press();
    });
    document.addEventListener("keyup", (event) => {
      if (event.code === "Space" && this.held) {
        event.preventDefault();
        this.release();
      }
    });
    window.addEventListener("blur", () => this.release());
  }

  // --- rendering -------------------------------------------------------------
  note(text, kind = "error") {
    this.ui.micNote.textContent = text;
    this.ui.micNote.hidden = !text;
    this.ui.micNote.dataset.kind = kind;
  }

  changed() {
    this.hooks.changed();
  }

  render() {
    const ui = this.ui;
    const on = this.state === "on" || this.state === "asking";
    ui.mic.hidden = ui.talkHint.hidden = ui.talk.hidden = ui.micMute.hidden = !on;
    ui.startMic.hidden = this.state !== "ready";
    ui.talkField.hidden = !on && this.state !== "ready";
    ui.micRetry.hidden = this.state !== "failed";
    ui.mic.dataset.speech = String(this.speech);
    ui.mic.dataset.open = String(this.mic.open);
    ui.voice.dataset.paused = String(this.paused);
    ui.micMute.setAttribute("aria-pressed", String(this.muted));
    ui.micMute.textContent = this.muted ? "Unmute mic" : "Mute mic";
    ui.micMute.disabled = this.turnTaking === "push_to_talk";
    ui.talk.setAttribute("aria-pressed", String(this.held));
    ui.talkMode.value = this.turnTaking || this.wantedTurnTaking();
    if (this.mic.analyser) this.meter.wake();
  }

  status() {
    return {
      state: this.state,
      turnTaking: this.turnTaking,
      inputAudio: this.accepted,
      open: this.mic.open && this.state === "on",
      muted: this.muted,
      held: this.held,
      framesSent: this.framesSent,
      level: this.meter.value,
      speech: this.speech,
      paused: this.paused,
      bargeIns: this.bargeIns.map((b) => ({ ...b })),
      partials: this.partials,
      note: this.ui.micNote.hidden ? "" : this.ui.micNote.textContent,
    };
  }
}
