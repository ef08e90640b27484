// What the page says of a close code and of its state.

export const CLOSE_REASONS = {
  1001: "The server is shutting down.",
  1008: "The server closed the session (too many messages, or audio not taken fast enough).",
  1009: "The server refused a message that was too large.",
  1011: "The server hit an internal error.",
  1013: "The server is draining or full, or cannot reach its session store: try again in a moment.",
  4401: "The server refused this token: check it and press Connect.",
  4408: "The session was idle too long and was closed.",
  4409: "This session was resumed in another tab or on another device.",
  4410: "The session could not be resumed: press Connect for a new one.",
};
export const STATE_LABELS = {
  connecting: "connecting…",
  token: "token needed",
  idle: "ready",
  responding: "replying…",
  interrupting: "stopping…",
  reconnecting: "reconnecting…",
  closed: "disconnected",
};
