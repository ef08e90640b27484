// The hidden-blocks panel: thinking, tool calls, tool results and generated
// images of the session's turns, never spoken. Model output is untrusted: only
// textContent, and an image only from a data:image/ URL.

export class HiddenBlocks {
  constructor(list, count) {
    this.list = list;
    this.count = count;
    this.clear();
  }

  clear() {
    this.entries = new Map(); // "turn:block" → entry
    this.list.replaceChildren();
    this.count.textContent = "0";
  }

  entry(turn, index, type, meta) {
    const key = `${turn}:${index}`;
    let entry = this.entries.get(key);
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
    this.list.append(li);
    entry = { li, tag, body, type, part: null };
    if (meta && meta.tool_name) tag.textContent = `${type} · ${meta.tool_name}`;
    this.entries.set(key, entry);
    this.count.textContent = String(this.entries.size);
    return entry;
  }

  onLog(message) {
    const meta = message.meta || {};
    const type = meta.type || "hidden";
    const entry = this.entry(message.turn, meta.block_index ?? "?", type, meta);
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

  onBlock(message) {
    if (message.event !== "complete" || !message.block) return;
    const block = message.block;
    if (message.block_type !== "tool_call" || block.input == null) return;
    // The complete call: its name and parsed input, clearer than the streamed parts.
    const entry = this.entry(message.turn, message.index, "tool_call", block);
    entry.body.textContent = `${block.tool_name || "?"}(${JSON.stringify(block.input)})`;
  }
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
    entry.li.append(img);
  } else if (image.blob_id) {
    entry.body.textContent += `\n(blob ${image.blob_id})`;
  }
}
