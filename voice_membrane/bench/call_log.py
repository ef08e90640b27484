"""A phone call's server figures, read from the serve log.

Twilio takes no events, so what a ``/v1/session`` client reads from each turn's
``metrics`` event (the voice-to-voice stages, the reply's stamps) is, for a
call, in the log: ``session_start`` names the call (``call_sid``), and each
``turn_end`` carries the turn's ``voice_to_voice`` and ``stamps_ms``. A call's
questions and its turns are matched in order, and only when they are as many
(a turn the caller did not ask for, or one it asked that never became a turn,
leaves the call's records without server figures rather than paired wrong).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .voice_caller import VoiceTurnRecord, server_figures


def turns_by_call(lines: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """Each call's ``turn_end`` records, in turn order, by its ``call_sid``."""
    calls: dict[str, str] = {}  # session → call
    turns: dict[str, list[dict[str, Any]]] = {}  # session → its turn_end records
    for line in lines:
        if not line.startswith("{"):
            continue  # (a text-format line, or a traceback's)
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        session, event = record.get("session"), record.get("event")
        if not isinstance(session, str):
            continue
        if event == "session_start" and isinstance(record.get("call_sid"), str):
            calls[session] = record["call_sid"]
        elif event == "turn_end" and isinstance(record.get("turn"), int):
            turns.setdefault(session, []).append(record)
    return {
        call: sorted(turns.get(session, []), key=lambda r: r["turn"])
        for session, call in calls.items()
    }


def fill_from_log(records: list[VoiceTurnRecord], lines: Iterable[str]) -> int:
    """Give each phone turn record (``call`` set) its server figures from the
    log; the number of records left without them."""
    logged = turns_by_call(lines)
    asked: dict[str, list[VoiceTurnRecord]] = {}
    for record in records:
        if record.call is not None:
            asked.setdefault(record.call, []).append(record)
    left = 0
    for call, questions in asked.items():
        turns = logged.get(call, [])
        if len(turns) != len(questions):
            left += len(questions)
            continue
        for record, turn in zip(sorted(questions, key=lambda r: r.number), turns, strict=True):
            record.turn = turn["turn"]
            record.server = server_figures(turn.get("voice_to_voice"), turn.get("stamps_ms"))
    return left
