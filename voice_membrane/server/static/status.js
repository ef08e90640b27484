// Read-only status of the page for tests and the curious (window.voiceMembrane).
import { peak } from "./audio.js";

export function exposeStatus(app, meter, listening) {
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
    resumes: () => app.resumes,
    lastTurn: () => (app.lastTurn ? snapshot(app.lastTurn) : null),
    gain: () => (app.chain ? app.chain.gain.gain.value : null),
    meterLevel: () => meter.value,
    mic: () => listening.status(),
    paused: () => Boolean(app.player && app.player.status && app.player.status.paused),
  };
  for (const [name, get] of Object.entries(getters)) {
    Object.defineProperty(status, name, { get, enumerable: true });
  }
  status.playedSeconds = () =>
    app.player && app.audioContext ? app.player.playedSamples / app.audioContext.sampleRate : 0;
  // The loudest sample of the last ~40 ms that reached the speakers (after the
  // volume), and that the player gave out (before it), 0 to 1.
  status.outputPeak = () => peak(app.chain && app.chain.output);
  status.voicePeak = () => peak(app.chain && app.chain.level);
  status.turn = (n) => (app.turns.has(n) ? snapshot(app.turns.get(n)) : null);
  return Object.freeze(status);
}

function snapshot(record) {
  return {
    turn: record.turn,
    frames: record.frames,
    samples: record.samples,
    ended: record.ended,
    heard: record.heard,
    interrupted: record.interrupted,
    audioSeconds: record.report?.counts?.audio_seconds ?? null,
    stamps: record.report?.stamps_ms ?? null,
    stopReason: record.report?.stop_reason ?? null,
  };
}
