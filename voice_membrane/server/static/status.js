// Read-only status of the page for tests and the curious (window.voiceMembrane).
import { peak } from "./audio.js";

export function exposeStatus(app, playback, listening) {
  const status = {};
  const getters = {
    state: () => app.state,
    transport: () => (app.ws && app.ws.transport) || "websocket",
    audioContextState: () => (playback.ctx ? playback.ctx.state : null),
    sampleRate: () => (playback.ctx ? playback.ctx.sampleRate : null),
    player: () => (playback.player ? playback.player.kind : null),
    playing: () => (playback.player ? playback.player.playing : false),
    framesScheduled: () => playback.framesScheduled,
    samplesScheduled: () => playback.samplesScheduled,
    samplesPlayed: () => (playback.player ? playback.player.playedSamples : 0),
    framesDropped: () => playback.framesDropped,
    framesLost: () => playback.framesLost,
    underruns: () => (playback.player ? playback.player.underruns : 0),
    session: () => (app.session ? app.session.session : null),
    resumes: () => app.resumes,
    lastTurn: () => (app.lastTurn ? snapshot(app.lastTurn) : null),
    gain: () => (playback.chain ? playback.chain.gain.gain.value : null),
    meterLevel: () => playback.meter.value,
    mic: () => listening.status(),
    paused: () => Boolean(playback.player && playback.player.status && playback.player.status.paused),
  };
  for (const [name, get] of Object.entries(getters)) {
    Object.defineProperty(status, name, { get, enumerable: true });
  }
  status.playedSeconds = () =>
    playback.player && playback.ctx ? playback.player.playedSamples / playback.ctx.sampleRate : 0;
  // The loudest sample of the last ~40 ms that reached the speakers (after the
  // volume), and that the player gave out (before it), 0 to 1.
  status.outputPeak = () => peak(playback.chain && playback.chain.output);
  status.voicePeak = () => peak(playback.chain && playback.chain.level);
  status.rtcAudio = () => (app.ws && app.ws.audioStats ? app.ws.audioStats() : null);
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
    endpointReason: record.report?.endpoint_reason ?? null,
    bargeIn: record.report?.barge_in ?? null,
  };
}
