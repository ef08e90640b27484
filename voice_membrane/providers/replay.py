"""Recorded provider streams, replayed with their original timing.

A recording is a JSON Lines file. The first line is a header::

    {"format": "voice-membrane-replay", "version": 1, "mode": "prefill", "description": "…"}

and every further line is one text delta as the provider streamed it, with its
time offset from the request in milliseconds::

    {"t_ms": 320, "text": "Sure"}

Offsets never decrease. Blank lines are ignored. A lone surrogate in the text
(``"\ud83d"``: half an emoji) is read as U+FFFD.

The header may say how the recorded reply ended, ``"stop_reason": "max_tokens"``
(the model's token limit cut it) or ``"end_turn"`` (the default); it is the
last reply's: the replies before it in a tool loop end on their calls.

A recording may hold the replies of a tool loop: a line ``{"reply": 2}`` starts
the second reply (offsets start again from 0), ``{"reply": 3}`` the third, and
so on. A chat-mode source is given the reply for the round it is in: the first
for a user's message, the second once the conversation ends with one round of
tool results (``<tool_result>`` written back after its calls), and so on; past
the last reply, the last again.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio

from ..infra.redact import quote
from ..infra.surrogates import replace_surrogates
from .base import ChatMessage

FORMAT = "voice-membrane-replay"
VERSION = 1


class RecordingError(ValueError):
    """A recording file that cannot be read; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class Delta:
    """One streamed piece of text and when it arrived."""

    t_ms: float
    text: str


@dataclass(frozen=True, slots=True)
class Recording:
    path: Path
    mode: Literal["prefill", "chat"]
    description: str
    replies: tuple[tuple[Delta, ...], ...]  # one per call of a tool loop; the first always
    # How the recorded model wrote its tool calls: "xml" (tags the parser reads) or
    # "json" (``<tool_call>{…}</tool_call>`` in its text, read by the JSON tool reader).
    tool_syntax: Literal["xml", "json"] = "xml"
    # How the last reply ended: on its own, or cut by the recorded model's token limit.
    stop_reason: Literal["end_turn", "max_tokens"] = "end_turn"

    @property
    def deltas(self) -> tuple[Delta, ...]:
        """The first reply's deltas."""
        return self.replies[0]

    @property
    def text(self) -> str:
        return "".join(d.text for d in self.deltas)


def load_recording(path: str | Path) -> Recording:
    """Read and validate a recording; raise ``RecordingError`` saying what is wrong where."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise RecordingError(f"{path}: no such recording file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordingError(f"{path}: cannot read: {exc}") from None
    records = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
    if not records:
        raise RecordingError(f"{path}: empty file, expected a {FORMAT} header line")
    header = _object(path, *records[0])
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise RecordingError(
            f"{path}:{records[0][0]}: not a recording: the first line must be "
            f'{{"format": "{FORMAT}", "version": {VERSION}, ...}}'
        )
    mode = header.get("mode", "prefill")
    if mode not in ("prefill", "chat"):
        raise RecordingError(
            f"{path}:{records[0][0]}: mode must be prefill or chat, not {quote(mode)}"
        )
    replies: list[list[Delta]] = [[]]
    for n, line in records[1:]:
        record = _object(path, n, line)
        if "reply" in record:
            if record["reply"] != len(replies) + 1 or len(record) != 1:
                raise RecordingError(
                    f'{path}:{n}: expected {{"reply": {len(replies) + 1}}} to start the '
                    f"next reply, got {quote(line.strip())}"
                )
            replies.append([])
            continue
        deltas = replies[-1]
        t_ms, text = record.get("t_ms"), record.get("text")
        if (
            not isinstance(t_ms, int | float)
            or isinstance(t_ms, bool)
            or not math.isfinite(t_ms)  # json reads NaN and Infinity
            or t_ms < 0
        ):
            raise RecordingError(f"{path}:{n}: t_ms must be a finite number ≥ 0, got {quote(t_ms)}")
        if not isinstance(text, str):
            raise RecordingError(f"{path}:{n}: text must be a string, got {quote(text)}")
        if deltas and t_ms < deltas[-1].t_ms:
            raise RecordingError(f"{path}:{n}: t_ms {t_ms} is earlier than the line before")
        # A recording is model output: a lone surrogate ("\ud83d") becomes U+FFFD.
        deltas.append(Delta(float(t_ms), replace_surrogates(text)))
    description = replace_surrogates(str(header.get("description", "")))
    tool_syntax = header.get("tool_syntax", "xml")
    if tool_syntax not in ("xml", "json"):
        raise RecordingError(
            f"{path}:{records[0][0]}: tool_syntax must be xml or json, not {quote(tool_syntax)}"
        )
    stop_reason = header.get("stop_reason", "end_turn")
    if stop_reason not in ("end_turn", "max_tokens"):
        raise RecordingError(
            f"{path}:{records[0][0]}: stop_reason must be end_turn or max_tokens, "
            f"not {quote(stop_reason)}"
        )
    return Recording(
        path, mode, description, tuple(tuple(r) for r in replies), tool_syntax, stop_reason
    )


def _object(path: Path, n: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise RecordingError(f"{path}:{n}: invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise RecordingError(f"{path}:{n}: invalid JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer longer than Python converts (4300 digits)
        raise RecordingError(f"{path}:{n}: invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise RecordingError(f"{path}:{n}: expected a JSON object")
    return value


async def replay(
    recording: Recording, *, speed: float = 1.0, reply: int = 0
) -> AsyncIterator[Delta]:
    """Yield reply ``reply``'s deltas (the first by default) at their recorded
    offsets (scaled by ``1/speed``; ``speed=0`` means as fast as possible)."""
    start = anyio.current_time()
    for delta in recording.replies[min(reply, len(recording.replies) - 1)]:
        if speed > 0:
            await anyio.sleep_until(start + delta.t_ms / 1000 / speed)
        yield delta


class ReplaySource:
    """An ``LlmSource`` that replays a recording, whatever the conversation: the
    parser's hidden blocks can be seen and heard about without any model."""

    def __init__(self, path: str | Path, *, speed: float = 1.0) -> None:
        self.recording = load_recording(path)
        self.speed = speed
        self.name = f"replay:{self.recording.path.name}"
        self.mode = self.recording.mode
        self.stop_reason = "end_turn"  # why the last stream ended (TextSourceProvider reads it)

    async def start(self) -> None:
        return None

    async def stream(self, messages: Sequence[ChatMessage]) -> AsyncGenerator[str, None]:
        reply = tool_rounds(messages) if self.mode == "chat" else 0
        self.stop_reason = "end_turn"
        async for delta in replay(self.recording, speed=self.speed, reply=reply):
            yield delta.text
        if reply >= len(self.recording.replies) - 1:  # the last reply: the header's stop
            self.stop_reason = self.recording.stop_reason

    async def aclose(self) -> None:
        return None


def tool_rounds(messages: Sequence[ChatMessage]) -> int:
    """How many rounds of tool results end the conversation (each an assistant
    message followed by the results written back as ``<tool_result…>``)."""
    rounds, at = 0, len(messages)
    while (
        at >= 2
        and messages[at - 1].role == "user"
        and messages[at - 1].content.startswith("<tool_result")
        and messages[at - 2].role == "assistant"
    ):
        rounds += 1
        at -= 2
    return rounds
