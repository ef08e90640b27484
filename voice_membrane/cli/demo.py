"""`voice-membrane demo`: replay a recorded LLM stream through the parser and the
speech chunker and show, on a timeline, which blocks were hidden and which
pieces would be handed to the voice.

The timeline is built by ``DemoTimeline``, a plain class fed one delta at a time;
``run_demo`` only adds the clock and the printing.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import TextIO

from ..chunking import SpeechChunk, SpeechChunker
from ..infra.surrogates import replace_surrogates
from ..parse import XmlStreamParser
from ..parse.json_tools import JsonToolInterceptor, JsonToolsInText
from ..providers.replay import Recording, replay
from ..vocab.events import BlockComplete, BlockStart, Chunk, Event

_PREVIEW = 70


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) > _PREVIEW:
        flat = flat[: _PREVIEW - 1] + "…"
    return json.dumps(flat, ensure_ascii=False)


@dataclass
class DemoTimeline:
    """Feeds deltas through parser → visible text → chunker and describes each step."""

    parser: XmlStreamParser = field(default_factory=XmlStreamParser)
    chunker: SpeechChunker = field(default_factory=SpeechChunker)
    # A recording whose model wrote its tool calls as JSON in its text: the JSON tool
    # reader takes them out of the visible text, as the pipeline does.
    json_tools: JsonToolsInText | None = None
    deltas: int = 0
    spoken: list[str] = field(default_factory=list)
    hidden_text: list[str] = field(default_factory=list)
    block_types: Counter[str] = field(default_factory=Counter)
    first_visible: tuple[int, float] | None = None
    first_piece: tuple[int, float] | None = None
    cut_off = False  # the stream ended at the token limit (set by ``finish``)

    def feed(self, t_ms: float, text: str) -> list[str]:
        self.deltas += 1
        events = self.parser.feed(text)
        if self.json_tools is not None:
            events = self.json_tools.feed(events)
        return self._events(t_ms, events)

    def finish(self, t_ms: float, *, cut_off: bool = False) -> list[str]:
        """The stream's end; ``cut_off``: at the model's token limit, so a text
        block still open ends as the pipeline ends it (``chunking/cut_off.py``)."""
        self.cut_off = cut_off
        events = self.parser.flush()
        if self.json_tools is not None:
            events = self.json_tools.feed(events) + self.json_tools.flush()
        return self._events(t_ms, events)

    def _events(self, t_ms: float, events: list[Event]) -> list[str]:
        lines: list[str] = []
        for event in events:
            if isinstance(event, BlockStart):
                hidden = "" if event.type == "text" else "  (hidden)"
                lines.append(_line(t_ms, f"┌ block {event.index} {event.type}{hidden}"))
            elif isinstance(event, Chunk):
                if event.meta.visible:
                    if self.first_visible is None:
                        self.first_visible = (self.deltas, t_ms)
                    lines += self._pieces(t_ms, self.chunker.feed(event.text))
                else:
                    self.hidden_text.append(event.text)
            else:
                if event.block.type == "text":
                    # A visible block ends where a hidden one (a tool call, say) begins:
                    # speak what is pending now rather than after the pause.
                    lines += self._pieces(t_ms, self.chunker.flush(cut_off=self.cut_off))
                lines.append(_line(t_ms, _describe_complete(event)))
                self.block_types[event.block.type] += 1
        return lines

    def _pieces(self, t_ms: float, pieces: list[SpeechChunk]) -> list[str]:
        lines = []
        for piece in pieces:
            if self.first_piece is None:
                self.first_piece = (self.deltas, t_ms)
            self.spoken.append(piece.text)
            lines.append(_line(t_ms, f"▶ speak [{piece.kind}] {_preview(piece.text)}"))
        return lines

    def summary(self) -> list[str]:
        blocks = ", ".join(f"{n} {kind}" for kind, n in sorted(self.block_types.items()))
        lines = [
            f"blocks: {blocks or 'none'}",
            f"speakable pieces: {len(self.spoken)}, {sum(len(s) for s in self.spoken)} chars",
            f"hidden (never spoken): {sum(len(s) for s in self.hidden_text)} chars",
        ]
        if self.cut_off:
            lines.append("cut off (max_tokens): the reply hit the token limit")
        if self.first_visible is not None:
            n, t = self.first_visible
            lines.append(f"first visible text: delta {n} at {t:.0f} ms")
        if self.first_piece is not None:
            n, t = self.first_piece
            lines.append(f"first speakable piece: delta {n} at {t:.0f} ms")
        return lines


def _line(t_ms: float, what: str) -> str:
    return f"{t_ms:7.0f} ms │ {what}"


def _describe_complete(event: BlockComplete) -> str:
    block = event.block
    if block.type == "tool_call":
        args = json.dumps(block.input, ensure_ascii=False)
        return f"└ block {event.index} tool_call {block.tool_name}({args}) id={block.tool_id}"
    detail = _preview(block.content or "")
    if block.type == "tool_result":
        detail = f"for {block.tool_id}: {detail}"
    return f"└ block {event.index} {block.type} complete: {detail}"


async def run_demo(recording: Recording, *, speed: float, out: TextIO | None = None) -> None:
    stream = out or sys.stdout

    def say(line: str = "", flush: bool = False) -> None:
        # The console takes bytes: a lone surrogate (a path from argv) must not crash it.
        print(replace_surrogates(line), file=stream, flush=flush)

    json_tools = None
    if recording.tool_syntax == "json":
        json_tools = JsonToolsInText(JsonToolInterceptor())
    timeline = DemoTimeline(json_tools=json_tools)
    say(f"replaying {recording.path} ({recording.mode} mode, {len(recording.deltas)} deltas)")
    if recording.description:
        say(f"  {recording.description}")
    say()
    last_t = 0.0
    async for delta in replay(recording, speed=speed):
        last_t = delta.t_ms
        for line in timeline.feed(delta.t_ms, delta.text):
            say(line, flush=True)
    # (The header's stop is the last reply's; the demo plays the first.)
    cut_off = recording.stop_reason == "max_tokens" and len(recording.replies) == 1
    for line in timeline.finish(last_t, cut_off=cut_off):
        say(line)
    say()
    for line in timeline.summary():
        say(line)
