"""The Membrane-cost measurement's reply (``membrane_cost``): one long scripted
reply (thinking, text, a tool call) as the vendors' fakes play it and as
prefill-mode XML, the check that a consumer read exactly it, and the fakes' recipe."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..testing.script import ScriptedReply, text, thinking, tool_use
from ..vocab.events import Block

if TYPE_CHECKING:
    from ..testing.fake_server import FakeServer

FUNCTION_CALLS_END = "</function_calls>"
TOOL_NAME = "get_weather"
TOOL_INPUT: dict[str, Any] = {
    "city": "Paris",
    "units": "metric",
    "days": 3,
    "details": "hourly temperature, wind and the chance of rain",
}
Mode = Literal["chat", "prefill"]


class MembraneOutputError(RuntimeError):
    """A consumer's output does not match the scripted reply; its timing is void."""


@dataclass(frozen=True, slots=True)
class LongReply:
    """The reply, streamed in ``delta_chars``-character deltas in either mode."""

    thinking: str
    text: str
    tool_input: dict[str, Any]
    delta_chars: int

    def script(self, mode: Mode) -> ScriptedReply:
        if mode == "chat":
            blocks = (
                thinking(self.thinking),
                text(self.text),
                tool_use(TOOL_NAME, self.tool_input),
            )
            return ScriptedReply.of(*blocks, delta_chars=self.delta_chars)
        # The API stops at the stop sequence and does not send it; Membrane writes it back.
        return ScriptedReply.of(
            self.xml,
            stop_reason="stop_sequence",
            stop_sequence=FUNCTION_CALLS_END,
            delta_chars=self.delta_chars,
        )

    @property
    def xml(self) -> str:
        """As a model writes it in prefill mode, up to the ``</function_calls>`` stop."""
        parameters = "\n".join(
            f'<parameter name="{name}">{value}</parameter>'
            for name, value in self.tool_input.items()
        )
        return (
            f"<thinking>\n{self.thinking}\n</thinking>\n\n{self.text}\n\n"
            f'<function_calls>\n<invoke name="{TOOL_NAME}">\n{parameters}\n</invoke>\n'
        )

    def xml_pieces(self) -> list[str]:
        wire, step = self.xml, self.delta_chars
        return [wire[i : i + step] for i in range(0, len(wire), step)]


def _prose(target: int, texts: Sequence[str]) -> str:
    """The first of ``texts`` until ``target`` characters are reached."""
    taken: list[str] = []
    size = 0
    for piece in texts:
        if size >= target:
            break
        taken.append(piece)
        size += len(piece) + 1
    return " ".join(taken)


def build_reply(
    corpus: Sequence[str], text_chars: int, thinking_chars: int, delta_chars: int
) -> LongReply:
    """Visible text from ``corpus`` in order, thinking from it backwards (a corpus
    without ``<`` or ``&`` makes an XML form that needs no escaping)."""
    texts = list(corpus)
    while sum(len(t) + 1 for t in texts) < text_chars + thinking_chars:
        texts += texts
    return LongReply(
        thinking=_prose(thinking_chars, texts[::-1]),
        text=_prose(text_chars, texts),
        tool_input=dict(TOOL_INPUT),
        delta_chars=delta_chars,
    )


def _words(value: str | None) -> str:
    # Whitespace at block edges is layout either side may trim; words may not move.
    return " ".join((value or "").split())


def check_blocks(blocks: Sequence[Block], reply: LongReply, where: str) -> None:
    """Raise ``MembraneOutputError`` unless ``blocks`` are the reply's thinking, text, call."""
    said = [b for b in blocks if b.type != "text" or _words(b.content)]
    kinds = [b.type for b in said]
    if kinds != ["thinking", "text", "tool_call"]:
        raise MembraneOutputError(f"{where}: blocks {kinds}, not thinking, text, tool_call")
    thought, spoken, call = said
    if _words(thought.content) != _words(reply.thinking):
        raise MembraneOutputError(f"{where}: the thinking differs from the script")
    if _words(spoken.content) != _words(reply.text):
        raise MembraneOutputError(f"{where}: the text differs from the script")
    if call.tool_name != TOOL_NAME or dict(call.input or {}) != reply.tool_input:
        raise MembraneOutputError(f"{where}: the tool call is {call.tool_name} {call.input}")


def membrane_fakes(spec: dict[str, Any]) -> dict[str, FakeServer]:
    """The fakes' recipe (``fakes``): one server per case (vendor, mode), in order,
    each queued with every reply the measurement will ask for."""
    from ..testing.fake_anthropic import FakeAnthropic
    from ..testing.fake_gemini import FakeGemini
    from ..testing.fake_openai import FakeOpenAI

    kinds = {"anthropic": FakeAnthropic, "openai": FakeOpenAI, "gemini": FakeGemini}
    reply = LongReply(**spec["reply"])
    return {
        str(index): kinds[vendor](*[reply.script(mode)] * spec["replies"])
        for index, (vendor, mode) in enumerate(spec["cases"])
    }
