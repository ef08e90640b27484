// A turn's latency waterfall (one linear time axis, with its ticks) and the
// stage that made its first audio late. Pure functions of the metrics report's
// stamps (docs/metrics.md); server text only ever goes in with textContent.

export const WATERFALL = [
  ["request_sent", "request"],
  ["first_token", "first token"],
  ["first_visible", "first visible"],
  ["first_chunk", "first chunk"],
  ["tts_first_byte", "TTS first byte"],
  ["first_audio", "first audio"],
  ["last_audio", "last audio"],
];

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

/** The longest stage on the way to the first audio: {stage, ms, total} or null. */
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

// A round step for about four intervals: 1, 2 or 5 times a power of ten.
function tickStep(max) {
  const raw = max / 4;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * magnitude >= raw) return m * magnitude;
  return 10 * magnitude;
}

function tickLabel(ms) {
  return ms >= 1000 ? `${+(ms / 1000).toFixed(2)} s` : `${+ms.toFixed(1)} ms`;
}

/** The turn's figure: caption, one row per stamp on one axis, the axis, a summary. */
export function waterfallFigure(turn, report) {
  const stamps = report.stamps_ms || {};
  const known = WATERFALL.map(([key]) => stamps[key]).filter((v) => typeof v === "number");
  const step = tickStep(Math.max(1, ...known));
  const axis = step * Math.ceil(Math.max(1, ...known) / step);

  const figure = document.createElement("figure");
  figure.className = "waterfall";
  figure.dataset.turn = String(turn);
  figure.dataset.axisMs = String(axis);
  const caption = document.createElement("figcaption");
  const cause = dominantStage(stamps);
  caption.textContent =
    `Turn ${turn}` +
    (cause ? ` — first audio ${fmt(cause.total)}, mostly ${describeCause(cause)}` : "") +
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
      const start = Math.min(previous, value);
      const bar = document.createElement("div");
      bar.className = "bar";
      bar.style.left = `${(100 * start) / axis}%`;
      bar.style.width = `${(100 * (value - start)) / axis}%`;
      bar.title = `${name}: ${fmt(value)} (+${fmt(value - start)})`;
      track.append(bar);
      ms.textContent = fmt(value);
      previous = value;
    } else {
      ms.textContent = "—";
    }
  }
  table.append(axisRow(axis, step));
  figure.append(table);

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

function axisRow(axis, step) {
  const row = document.createElement("tr");
  row.className = "axis";
  row.setAttribute("aria-hidden", "true"); // the numbers are in the rows
  row.append(document.createElement("th"));
  const cell = document.createElement("td");
  cell.className = "track";
  for (let at = 0; at <= axis + step / 1000; at += step) {
    const tick = document.createElement("span");
    tick.className = "tick";
    tick.style.left = `${(100 * at) / axis}%`;
    tick.textContent = tickLabel(at);
    cell.append(tick);
  }
  row.append(cell, document.createElement("td"));
  return row;
}

// What the turn's report says of the reply: cut by the token budget, and why
// its first audio was slow.
export function showReport(waterfalls, transcript, record, turn, report) {
  if (report.stop_reason === "max_tokens") transcript.badge(record, "cut-off", "cut off (max_tokens)");
  const cause = dominantStage(report.stamps_ms || {});
  if (cause && cause.total > SLOW_FIRST_AUDIO_MS) {
    transcript.badge(record, "slow", `first audio after ${(cause.total / 1000).toFixed(1)} s — ${describeCause(cause)}`);
  }
  if (!waterfalls.querySelector("figure")) waterfalls.replaceChildren();
  waterfalls.prepend(waterfallFigure(turn, report));
  while (waterfalls.children.length > 5) waterfalls.lastElementChild.remove();
}
