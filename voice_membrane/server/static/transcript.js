// The conversation on screen: a user line and a reply line per turn, marks on a
// reply (cut off, slow start), and dividers between sessions. The lines of
// earlier sessions stay; a session's turns are found by its records.

export class Transcript {
  constructor(list) {
    this.list = list;
    this.liveEl = null; // the line of the words being heard, last in the list
  }

  /** A new turn's two lines; its record holds the elements a reply fills in. */
  add(turn, session) {
    const userEl = item("user", turn, session);
    const userText = document.createElement("span");
    userEl.append(label("You"), userText);
    const replyEl = item("reply", turn, session);
    const replyText = document.createElement("span");
    replyText.className = "text";
    const note = document.createElement("span");
    note.className = "note";
    const badges = document.createElement("span");
    badges.className = "badges";
    replyEl.append(label("Assistant"), replyText, note, badges);
    // Above the words still being heard, which stay last.
    if (this.liveEl) this.list.insertBefore(userEl, this.liveEl);
    else this.list.append(userEl);
    userEl.after(replyEl);
    return { turn, userEl, userText, replyEl, replyText, note, badges };
  }

  /** The user's words as they are recognized: final text solid, the partial dimmed. */
  live(finalText, partial) {
    if (!this.liveEl) {
      this.liveEl = item("user", "", "");
      this.liveEl.classList.add("live");
      this.liveFinal = document.createElement("span");
      this.livePartial = document.createElement("span");
      this.livePartial.className = "partial";
      this.liveEl.append(label("You"), this.liveFinal, this.livePartial);
      this.list.append(this.liveEl);
    }
    this.liveFinal.textContent = finalText;
    this.livePartial.textContent = finalText && partial ? ` ${partial}` : partial;
    this.scroll();
  }

  clearLive() {
    if (this.liveEl) this.liveEl.remove();
    this.liveEl = null;
  }

  get hasTurns() {
    return this.list.querySelector("li.user:not(.live)") !== null;
  }

  badge(record, kind, text) {
    const el = document.createElement("span");
    el.className = `badge ${kind}`;
    el.textContent = text;
    record.badges.append(el);
    return el;
  }

  /** A dimmed line of what the listening noticed (speech with no words in it),
   * above the words still being heard. */
  notice(kind, text) {
    const li = document.createElement("li");
    li.className = `notice ${kind}`;
    li.textContent = text;
    if (this.liveEl) this.list.insertBefore(li, this.liveEl);
    else this.list.append(li);
    this.scroll();
    return li;
  }

  divider(text) {
    const li = document.createElement("li");
    li.className = "divider";
    li.textContent = text;
    this.list.append(li);
  }

  scroll() {
    this.list.lastElementChild?.scrollIntoView({ block: "nearest" });
  }
}

function item(kind, turn, session) {
  const li = document.createElement("li");
  li.className = kind;
  li.dataset.turn = String(turn);
  li.dataset.session = session;
  return li;
}

function label(text) {
  const el = document.createElement("span");
  el.className = "who";
  el.textContent = `${text}: `;
  return el;
}
