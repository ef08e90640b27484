"""Provider outputs → events and blocks, through ``NativeBlockAssembler``."""

from __future__ import annotations

from collections.abc import Iterable

from voice_membrane.parse import NativeBlockAssembler
from voice_membrane.vocab.events import Block, BlockComplete, Event
from voice_membrane.vocab.provider_output import ProviderOutput


def assemble(items: Iterable[ProviderOutput]) -> list[Event]:
    assembler = NativeBlockAssembler()
    events = [event for item in items for event in assembler.feed(item)]
    return events + assembler.flush()


def blocks(items: Iterable[ProviderOutput]) -> list[Block]:
    return [event.block for event in assemble(items) if isinstance(event, BlockComplete)]
