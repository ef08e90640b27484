// A turn's latency waterfall and the stage that made its first audio late. A
// spoken turn's axis starts at the end of the user's speech: its first stage is
// the end-of-speech wait (endpointing), and its headline is voice to voice.
// Pure functions of the metrics report (docs/metrics.md); server text only ever
// goes in with textContent.
import { tickLabel, timeScale } from "./scale.js";

export const WATERFALL = [
  ["request_sent", "request"],
  ["first_token", "first token"],
  ["first_visible", "first visible"],
  ["first_chunk", "first chunk"],
  ["tts_first_byte", "TTS first byte"],
  ["first_audio", "first audio"],
  ["last_audio", "last audio"],
];
const ENDPOINTING = ["endpointing", "end-of-speech wait"];

// What the time up to each stamp (from the stamp before it) was spent on.
const STAGE_BEFORE = {
  first_token: "waiting for the model",
  first_visible: "thinking and tool calls (not spoken)",
  first_chunk: "waiting for a whole phrase to speak",
  tts_request: "waiting for the voice",
  tts_first_byte: "speech synthesis",
  first_audio: "sending and starting playback",
};
const FIRST_AUDIO_PATH = [
  "request_sent",
  "first_token",
  "first_visible",
  "first_chunk",
  "tts_request",
  "tts_first_byte",
  "first_audio",
];
export const SLOW_FIRST_AUDIO_MS = 1000; // past this, the turn itself says why

export const fmt = (ms) => `${Math.round(ms)} ms`;

/** A spoken turn's voice_to_voice (docs/metrics.md), or null for a typed one. */
export function spoken(report) {
  const v = report.voice_to_voice;
  return v && typeof v.request_ms === "number" && typeof v.endpointing_ms === "number" ? v : null;
}

/** The longest stage on the way to the first audio: {stage, ms, total} or null
 * (`total`: the first audio from the request). */
export function dominantStage(stamps) {
  const total = stamps.first_audio;
  if (typeof total !== "number") return null;
  let best = null;
  let previous = 0;
  for (const key of FIRST_AUDIO_PATH) {
    const at = stamps[key];
    if (typeof at !== "number") continue; // a stage not stamped joins the next one
    const ms = at - previous;
    if (key in STAGE_BEFORE && (best === null || ms > best.ms)) {
      best = { stage: STAGE_BEFORE[key], ms, total };
    }
    previous = Math.max(previous, at);
  }
  return best;
}

export const describeCause = (cause) => `${cause.stage}: ${fmt(cause.ms)}`;

// Why the user's turn ended (the report's endpoint_reason, docs/metrics.md).
const ENDED_BY = new Map([
  ["model", "the end-of-turn model judged you done"],
  ["silence", "the end silence ran out"],
  ["max_wait", "the wait for the transcript ran out"],
  ["late", "a late transcript"],
]);

/** A spoken turn's "why it ended" line, or null (a typed turn, an older server). */
export function endedBy(report) {
  const said = ENDED_BY.get(report.endpoint_reason);
  if (!said) return null;
  const ms = report.turn_model_ms;
  const model = typeof ms === "number" ? `, ${report.endpoint_reason === "model" ? "" : "model "}${fmt(ms)}` : "";
  return `Turn ended: ${said} (${report.endpoint_reason}${model})` +
    (report.barge_in === true ? "; your words interrupted the answer (barge-in)" : "");
}

/** The figure's rows: [key, name, ms on the axis or null]. A spoken turn's
 * stamps move by its request's time from the end of speech. */
export function waterfallRows(report) {
  const stamps = report.stamps_ms || {};
  const voice = spoken(report);
  const offset = voice ? voice.request_ms : 0;
  const rows = voice ? [[...ENDPOINTING, voice.endpointing_ms]] : [];
  for (const [key, name] of WATERFALL) {
    const value = stamps[key];
    rows.push([key, name, typeof value === "number" ? value + offset : null]);
  }
  // The server's own sum (it rounds it), not one that may round the other way.
  const firstAudio = rows.find(([key]) => key === "first_audio");
  if (voice && typeof voice.voice_to_voice_ms === "number") firstAudio[2] = voice.voice_to_voice_ms;
  return rows;
}

function caption(turn, report) {
  const cause = dominantStage(report.stamps_ms || {});
  const voice = spoken(report);
  let text = `Turn ${turn}`;
  if (voice && typeof voice.voice_to_voice_ms === "number") {
    text +=
      ` — voice to voice ${fmt(voice.voice_to_voice_ms)}: end-of-speech wait ${fmt(voice.endpointing_ms)}` +
      (cause ? `, then first audio ${fmt(cause.total)}, mostly ${describeCause(cause)}` : "");
  } else if (cause) {
    text += ` — first audio ${fmt(cause.total)}, mostly ${describeCause(cause)}`;
  }
  return text + (report.interrupted ? " (interrupted)" : "");
}

/** The turn's figure: caption, one row per stage on one axis, the axis, a summary. */
export function waterfallFigure(turn, report) {
  const rows = waterfallRows(report);
  const known = rows.map(([, , v]) => v).filter((v) => v !== null);
  const firstAudio = rows.find(([key]) => key === "first_audio")[2];
  const scale = timeScale(firstAudio, Math.max(1, ...known));

  const figure = document.createElement("figure");
  figure.className = "waterfall";
  figure.dataset.turn = String(turn);
  figure.dataset.axisMs = String(scale.end);
  if (scale.breakMs !== null) figure.dataset.breakMs = String(scale.breakMs);
  const title = document.createElement("figcaption");
  title.textContent = caption(turn, report);
  figure.append(title);

  const table = document.createElement("table");
  let previous = 0;
  for (const [key, name, value] of rows) {
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
    if (value !== null) {
      const start = Math.min(previous, value);
      const bar = document.createElement("div");
      bar.className = "bar";
      bar.style.left = `${100 * scale.at(start)}%`;
      bar.style.width = `${100 * (scale.at(value) - scale.at(start))}%`;
      bar.title = `${name}: ${fmt(value)} (+${fmt(value - start)})`;
      track.append(bar);
      breakMark(track, scale);
      ms.textContent = fmt(value);
      previous = value;
    } else {
      ms.textContent = "—";
    }
  }
  table.append(axisRow(scale));
  figure.append(table);

  const ended = endedBy(report);
  if (ended) {
    const line = document.createElement("p");
    line.className = "muted ended";
    line.dataset.reason = report.endpoint_reason;
    line.dataset.bargeIn = String(report.barge_in === true);
    line.textContent = ended;
    figure.append(line);
  }
  const counts = report.counts || {};
  if (typeof counts.audio_seconds === "number") {
    const summary = document.createElement("p");
    summary.className = "muted";
    summary.textContent =
      `${report.llm || "?"} → ${report.tts || "?"}: ` +
      `${counts.audio_seconds.toFixed(2)} s of audio, ${counts.tokens ?? "?"} tokens` +
      (report.stop_reason ? `, stop ${report.stop_reason}` : "");
    figure.append(summary);
  }
  return figure;
}

// Where the axis turns from linear to log: a gap across the track.
function breakMark(track, scale) {
  if (scale.breakMs === null) return;
  const mark = document.createElement("div"); // not a span: the ticks are the cell's spans
  mark.className = "break";
  mark.style.left = `${100 * scale.at(scale.breakMs)}%`;
  track.append(mark);
}

function axisRow(scale) {
  const row = document.createElement("tr");
  row.className = "axis";
  row.setAttribute("aria-hidden", "true"); // the numbers are in the rows
  row.append(document.createElement("th"));
  const cell = document.createElement("td");
  cell.className = "track";
  for (const at of scale.ticks) {
    const tick = document.createElement("span");
    tick.className = "tick";
    tick.style.left = `${100 * scale.at(at)}%`;
    tick.textContent = tickLabel(at);
    cell.append(tick);
  }
  breakMark(cell, scale);
  row.append(cell, document.createElement("td"));
  return row;
}

// What the turn's report says of the reply: voice to voice for a spoken turn,
// cut by the token budget, and why its first audio was slow.
export function showReport(waterfalls, transcript, record, turn, report) {
  const voice = spoken(report);
  if (voice && typeof voice.voice_to_voice_ms === "number") {
    const badge = transcript.badge(record, "v2v", `voice to voice ${fmt(voice.voice_to_voice_ms)}`);
    badge.dataset.ms = String(voice.voice_to_voice_ms);
    badge.title = `From the end of your speech to the answer's first audio (end-of-speech wait ${fmt(voice.endpointing_ms)})`;
  }
  if (report.stop_reason === "max_tokens") transcript.badge(record, "cut-off", "cut off (max_tokens)");
  const cause = dominantStage(report.stamps_ms || {});
  if (cause && cause.total > SLOW_FIRST_AUDIO_MS) {
    transcript.badge(record, "slow", `first audio after ${(cause.total / 1000).toFixed(1)} s — ${describeCause(cause)}`);
  }
  if (!waterfalls.querySelector("figure")) waterfalls.replaceChildren();
  waterfalls.prepend(waterfallFigure(turn, report));
  while (waterfalls.children.length > 5) waterfalls.lastElementChild.remove();
}
