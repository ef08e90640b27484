// A dropped connection: reconnect by itself, with backoff, and resume the session
// with its token (docs/websocket-protocol.md, "Resuming a dropped session"). The
// token is kept in memory only: a reloaded page starts a new session.

// Closes after which the page does not come back by itself: the user or server
// ended the session (1000), a token is needed (4401), idle (4408), another tab
// took the session (4409), it cannot be resumed (4410).
const FINAL = new Set([1000, 4401, 4408, 4409, 4410]);
const BACKOFF_MS = [200, 500, 1000, 2000, 4000];
const MAX_DELAY_MS = 5000;

export class Reconnector {
  constructor(connect) {
    this.connect = connect; // opens a socket; its onopen asks resumeMessage() what to send
    this.forget();
  }

  // session.started / session.resumed: the token to come back with.
  remember(message) {
    this.session = message.session;
    this.token = message.resume_token || null;
    this.graceMs = (message.resume_grace_s || 0) * 1000;
    this.attempt = 0;
    this.droppedAt = 0;
    this.resuming = false;
  }

  // A new session is wanted (Connect, another pipeline, other listening settings).
  forget() {
    clearTimeout(this.timer);
    this.session = this.token = null;
    this.graceMs = this.attempt = this.droppedAt = 0;
    this.resuming = false;
  }

  // What the next socket sends first instead of session.start, or null.
  resumeMessage(serverToken) {
    if (!this.resuming || !this.session || !this.token) return null;
    const message = { type: "session.resume", v: 1, session: this.session, resume_token: this.token };
    if (serverToken) message.token = serverToken;
    return message;
  }

  // After a close: true when the page tries again (the attempt is scheduled).
  onClosed(code) {
    if (!this.token || FINAL.has(code)) return false;
    const now = Date.now();
    if (!this.droppedAt) this.droppedAt = now;
    if (now - this.droppedAt > this.graceMs) {
      this.forget(); // the server no longer keeps it
      return false;
    }
    const base = BACKOFF_MS[this.attempt] ?? MAX_DELAY_MS;
    const delay = Math.min(base, MAX_DELAY_MS) * (0.8 + Math.random() * 0.4); // jittered
    this.attempt += 1;
    this.resuming = true;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay);
    return true;
  }
}
