"""Scripted replies for the fake provider servers.

A ``ScriptedReply`` is vendor-neutral: the blocks of one reply (text, thinking,
tool use), how fast they stream, and what goes wrong where. Each fake server
(``fake_anthropic``, ``fake_openai``, ``fake_gemini``) writes the same script in
its vendor's real wire protocol, so one logical reply can be played through
every provider::

    reply = ScriptedReply.of(
        thinking("The user wants weather."),
        text("Let me check."),
        tool_use("get_weather", {"city": "Paris"}),
        delta_chars=4, delta_delay_s=0.01,
    )
    error = ScriptedReply.http_error(429, retry_after=0.2)

Pacing: ``ttft_s`` before the first content delta, ``delta_delay_s`` between
deltas, and ``pauses`` at chosen points: ``Pause(after_deltas=3, seconds=2.0)``
holds the stream 2 s before its fourth delta; ``stall(after_deltas=3)`` holds it
longer than any client waits (until the client gives up), optionally sending the
vendor's keep-alives meanwhile (``keepalive_s``): bytes that reset an HTTP read
timeout but carry nothing.

Prefill mode is a script of one text block holding the raw XML the model
writes. Faults: ``http_error`` (a status before any stream), ``error_event``
(the vendor's in-stream error after ``after_deltas`` content deltas),
``malformed`` (a line that is not valid SSE JSON), ``drop`` (the connection
closes mid-stream), ``hang`` (the request is accepted and never answered, until
the client gives up). ``raw`` events go out as they are, in the vendor's own
format, after a number of content deltas: what a script cannot say (an event
type the reader does not know, a field of the wrong JSON type) for testing a
reader's robustness through the real SDK.

``image(…)`` is a generated image (a real PNG made in code, ``testing/png.py``):
Gemini sends it as an ``inlineData`` part of the reply; the OpenAI fake serves
it from the Images API (``/v1/images/generations``), with partial images first
when the request asks for them. Chat Completions have no image output: the
OpenAI chat stream leaves image blocks out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from .png import solid_png

FINAL_RGB = (200, 40, 40)  # the default final image's colour (partial images are grey)

BlockKind = Literal["text", "thinking", "redacted_thinking", "tool_use", "image"]
ScriptStop = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]
FaultKind = Literal["http_error", "error_event", "malformed", "drop", "hang"]


@dataclass(frozen=True, slots=True)
class ScriptBlock:
    type: BlockKind
    text: str = ""  # text / thinking
    name: str = ""  # tool_use
    id: str | None = None  # tool_use id; the fake generates one when None
    input: dict[str, Any] = field(default_factory=dict)
    signature: str = ""  # thinking signature; redacted_thinking data
    image: bytes = b""  # image: the PNG (text: the revised prompt the fake reports)


def text(value: str) -> ScriptBlock:
    return ScriptBlock("text", text=value)


def thinking(value: str, signature: str = "sig-fake") -> ScriptBlock:
    return ScriptBlock("thinking", text=value, signature=signature)


def redacted_thinking(data: str) -> ScriptBlock:
    return ScriptBlock("redacted_thinking", signature=data)


def tool_use(name: str, input: dict[str, Any], id: str | None = None) -> ScriptBlock:
    return ScriptBlock("tool_use", name=name, id=id, input=dict(input))


def image(png: bytes | None = None, revised_prompt: str = "") -> ScriptBlock:
    """A generated image: ``png`` (by default a 16x16 red PNG made in code)."""
    if png is None:
        png = solid_png(16, 16, FINAL_RGB)
    return ScriptBlock("image", text=revised_prompt, image=png)


@dataclass(frozen=True, slots=True)
class Fault:
    kind: FaultKind
    after_deltas: int = 0  # content deltas sent before a mid-stream fault
    status: int = 500  # http_error status (error_event: the vendor's error code)
    retry_after: float | None = None  # http_error: the retry-after header, seconds
    message: str = "scripted failure"


STALL_S = 600.0  # a stall: longer than any client waits; it ends when the client goes


@dataclass(frozen=True, slots=True)
class Pause:
    """The stream holds ``seconds`` (beyond its pacing) before content delta
    number ``after_deltas`` (0 is the first, as a fault's ``after_deltas``).
    ``keepalive_s``: meanwhile the vendor's keep-alive goes out this often —
    Anthropic a ``ping`` event, OpenAI a chunk with empty content, Gemini a
    chunk with an empty text part."""

    after_deltas: int
    seconds: float = STALL_S
    keepalive_s: float | None = None


def stall(after_deltas: int, *, keepalive_s: float | None = None) -> Pause:
    """The stream stops after ``after_deltas`` content deltas, its connection
    open, until the client gives up (keep-alives still sent if asked)."""
    return Pause(after_deltas, STALL_S, keepalive_s)


@dataclass(frozen=True, slots=True)
class RawEvent:
    """A wire event sent as is after ``after_deltas`` content deltas (or at the
    end, before the final events, when the reply has fewer). ``data`` is the
    event's JSON in the vendor's format; ``event`` its SSE event name, for the
    vendors that name events (Anthropic)."""

    data: Any
    after_deltas: int = 0
    event: str | None = None


@dataclass(frozen=True, slots=True)
class ScriptedReply:
    blocks: tuple[ScriptBlock, ...] = ()
    stop_reason: ScriptStop | None = None  # None: tool_use if a tool is used, else end_turn
    stop_sequence: str | None = None  # with stop_reason "stop_sequence": the one matched
    ttft_s: float = 0.0  # delay before the first content delta
    delta_delay_s: float = 0.0  # delay between content deltas
    delta_chars: int = 8  # streamed text is cut into pieces of this many characters
    input_tokens: int = 12
    output_tokens: int | None = None  # None: one per streamed delta
    fault: Fault | None = None
    raw: tuple[RawEvent, ...] = ()
    pauses: tuple[Pause, ...] = ()

    @classmethod
    def of(cls, *blocks: ScriptBlock | str, **options: Any) -> ScriptedReply:
        """A reply of these blocks (a plain string is a text block)."""
        return cls(tuple(text(b) if isinstance(b, str) else b for b in blocks), **options)

    @classmethod
    def http_error(
        cls, status: int, *, retry_after: float | None = None, message: str = "scripted error"
    ) -> ScriptedReply:
        return cls(
            fault=Fault("http_error", status=status, retry_after=retry_after, message=message)
        )

    @classmethod
    def hang(cls) -> ScriptedReply:
        """Accept the request and never answer it (no status, no headers)."""
        return cls(fault=Fault("hang"))

    @property
    def final_stop(self) -> ScriptStop:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(b.type == "tool_use" for b in self.blocks) else "end_turn"

    def raw_due(self, sent: int, *, end: bool = False) -> list[RawEvent]:
        """The raw events to send once ``sent`` content deltas are out (at the
        end: every one not sent yet)."""
        return [e for e in self.raw if e.after_deltas == sent or (end and e.after_deltas > sent)]

    def pauses_at(self, sent: int) -> list[Pause]:
        """The pauses before content delta number ``sent``."""
        return [p for p in self.pauses if p.after_deltas == sent]

    def pieces(self, value: str) -> Iterator[str]:
        """``value`` cut into streamed deltas."""
        step = max(1, self.delta_chars)
        for start in range(0, len(value), step):
            yield value[start : start + step]

    def usage_out(self) -> int:
        if self.output_tokens is not None:
            return self.output_tokens
        count = 0
        for block in self.blocks:
            if block.type == "image":
                count += 1
            else:
                count += len(list(self.pieces(block.text))) if block.type != "tool_use" else 1
        return count
