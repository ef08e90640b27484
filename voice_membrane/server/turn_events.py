"""What the pipeline's log reports during a turn, as the client's events:
hidden chunks as ``log``, generated images, block starts and ends. Sans-I/O:
a record in, an event (JSON text) or nothing out."""

from __future__ import annotations

from typing import Any

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
