"""A provider that says one fixed text: a greeting said as written.

It answers every request with its text, as one native text block, so the text
is never read as markup (a ``<`` in it is spoken, not parsed) and goes through
the rest of a turn — chunker, voice, sink, interruption, metrics — as any
reply does.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from ..vocab.provider_output import NativeDelta, NativeStart, NativeStop, ProviderOutput, StopInfo

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest
    from ..vocab.messages import ModelConfig


class SaidText:
    name = "said"
    local = False  # nothing computed: it never competes with a local voice

    def __init__(self, text: str) -> None:
        self.text = text

    async def start(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    def request_body(
        self, built: BuiltRequest, config: ModelConfig, *, streaming: bool = True
    ) -> dict[str, Any]:
        return {"text": self.text}

    async def stream(
        self, built: BuiltRequest, config: ModelConfig, *, streaming: bool = True
    ) -> AsyncGenerator[ProviderOutput, None]:
        yield NativeStart("text")
        yield NativeDelta(self.text)
        yield NativeStop()
        yield StopInfo("end_turn")
