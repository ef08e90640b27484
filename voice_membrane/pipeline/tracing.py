"""A turn's trace: the report's figures as the turn span's attributes, its stamps
as the turn span's events, and a stage's span around its ``run``.

Only figures, counts, names and times go in (docs/telemetry.md): never the text
of the reply or the user, never an error's message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVarTuple

from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from ..telemetry.spans import epoch_ns, stage_span
from .metrics import STAMPS, LatencyReport, StageTimer, TurnMetrics

Ts = TypeVarTuple("Ts")


async def traced_stage(
    name: str,
    timer: StageTimer,
    run: Callable[[*Ts], Awaitable[None]],
    *args: *Ts,
) -> None:
    """``run(*args)`` inside the span ``name`` (a child of the turn's span: the
    task that runs this inherits its context), with the stage's busy time."""
    with stage_span(name) as span:
        try:
            await run(*args)
        finally:
            span.set_attributes(
                {
                    "voice.stage.busy_ms": round(timer.busy_ns / 1e6, 3),
                    "voice.stage.items": timer.items,
                }
            )


def add_stamps(span: Span, m: TurnMetrics) -> None:
    """Each stamp the turn reached, as an event at the moment it was taken."""
    for name in STAMPS:
        at = m.stamps.get(name)
        if at is not None:
            span.add_event(name, timestamp=epoch_ns(at))


def report_attributes(report: LatencyReport) -> dict[str, AttributeValue]:
    """The report's figures (milliseconds since the request was sent) and counts."""
    stamps = report.stamps_ms
    figures: dict[str, float | None] = {
        "voice.first_audio_ms": report.first_audio_ms,
        "voice.pipeline_added_ms": report.pipeline_added_ms,
        "voice.first_chunk_token_ms": report.first_chunk_token_ms,
        "voice.tts.first_byte_ms": _difference(stamps["tts_first_byte"], stamps["tts_request"]),
        "voice.tts.first_byte_ms_median": report.tts_first_byte_ms_median,
        "voice.tts.rtf": report.tts_rtf,
    }
    figures |= {f"voice.stamp.{name}_ms": stamps[name] for name in STAMPS}
    attributes: dict[str, AttributeValue] = {k: v for k, v in figures.items() if v is not None}
    attributes |= {
        "voice.interrupted": report.interrupted,
        "voice.tokens": report.tokens,
        "voice.visible_chars": report.visible_chars,
        "voice.chunks": report.chunks,
        "voice.chars_spoken": report.chars_spoken,
        "voice.audio_seconds": report.audio_seconds,
        "voice.llm.retries": len(report.retries),
    }
    for stage, busy in report.stages.items():
        attributes[f"voice.stage.{stage}.busy_ms"] = busy["busy_ms"]
    for name, tokens in report.usage.items():  # over every call of the reply
        prefix = "gen_ai.usage" if name in ("input_tokens", "output_tokens") else "voice.usage"
        attributes[f"{prefix}.{name}"] = tokens
    if report.stop_reason is not None:
        attributes["gen_ai.response.finish_reasons"] = [report.stop_reason]
    return attributes


def _difference(later: float | None, earlier: float | None) -> float | None:
    if later is None or earlier is None:
        return None
    return round(later - earlier, 3)
