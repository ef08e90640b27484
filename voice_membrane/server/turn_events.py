"""What the pipeline's log reports during a turn, as the client's events:
hidden chunks as ``log``, generated images, block starts and ends; and what
is told of a turn as it ends (its ``metrics`` and ``turn.end`` events, its
``turn_end`` log line). Sans-I/O: a record in, events (JSON text) out."""

from __future__ import annotations

from typing import Any

from ..pipeline.turn import TurnResult
from . import protocol as p


def log_event(turn: int, record: dict[str, Any]) -> str | None:
    """The event for one record of the pipeline's log, None for a record the
    client is not sent (visible chunks: they arrive as ``transcript.delta``)."""
    kind = record.get("event")
    if kind == "chunk" and not record["meta"].get("visible"):
        return p.event("log", turn=turn, text=record["text"], meta=record["meta"])
    if kind == "image":
        return image_event(turn, record)
    if kind == "block_start":
        return p.event(
            "block", turn=turn, event="start", index=record["index"], block_type=record["type"]
        )
    if kind == "block_complete":
        block = record["block"]
        return p.event(
            "block",
            turn=turn,
            event="complete",
            index=record["index"],
            block_type=block["type"],
            block=block,
        )
    return None


def image_event(turn: int, record: dict[str, Any]) -> str:
    """A generated image's ``log`` event: hidden, never spoken; ``image.url`` is
    a ``data:`` URL the page shows, or null when the image is held in a blob
    store (``image.blob_id``)."""
    where = record.get("where") or ""
    image = {key: value for key, value in record.items() if key not in ("event", "index", "where")}
    image["url"] = None if where.startswith("blob:") or not where else where
    meta = {"type": "image", "visible": False, "block_index": record["index"]}
    text = f"[image] {record.get('prompt') or record.get('revised_prompt') or ''}".rstrip()
    return p.event("log", turn=turn, text=text, meta=meta, image=image)


def turn_end_events(n: int, result: TurnResult, report_dict: dict[str, Any]) -> tuple[str, str]:
    """Turn ``n``'s ``metrics`` event (``report_dict``: its report as sent) and
    its ``turn.end``."""
    return (
        p.event("metrics", turn=n, report=report_dict),
        p.event(
            "turn.end",
            turn=n,
            heard=result.spoken_text,
            visible=result.visible_text,
            interrupted=result.interrupted,
            error=result.error,
            terminated=result.terminated,
        ),
    )


def turn_end_log(
    n: int,
    result: TurnResult,
    report_dict: dict[str, Any],
    voice_to_voice: dict[str, Any] | None,
) -> dict[str, Any]:
    """The fields of turn ``n``'s ``turn_end`` log line. The stages' stamps too:
    a phone call takes no metrics event, so its log is where they are read."""
    report = result.report
    first_audio = report.first_audio_ms
    fields: dict[str, Any] = {
        "turn": n,
        "first_audio_ms": None if first_audio is None else round(first_audio, 1),
        "audio_seconds": round(report.audio_seconds, 3),
        "interrupted": result.interrupted,
        "error": result.error,
        "stamps_ms": report_dict.get("stamps_ms"),
    }
    if voice_to_voice is not None:
        fields["voice_to_voice"] = voice_to_voice
    if report.end is not None:  # why the user's turn ended (a call's only record of it)
        fields |= report.end.to_dict()
    return fields
