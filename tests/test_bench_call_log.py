"""A phone call's server figures come from the serve log: its questions and
its turns matched in order, a call whose counts differ left out whole."""

from __future__ import annotations

import json
from typing import Any

from voice_membrane.bench.call_log import fill_from_log, turns_by_call
from voice_membrane.bench.voice_caller import REPLY_STAMPS, SERVER_FIGURES, VoiceTurnRecord


def line(event: str, **fields: Any) -> str:
    return json.dumps({"ts": 1.0, "event": event, **fields})


def turn_end(session: str, turn: int, v2v: float) -> str:
    figures = {"endpointing_ms": 601.0, "transcript_final_ms": 390.0, "request_ms": 602.0}
    stamps = {name: 10.0 * i for i, name in enumerate(REPLY_STAMPS)}
    return line(
        "turn_end",
        session=session,
        turn=turn,
        stamps_ms=stamps,
        voice_to_voice={**figures, "voice_to_voice_ms": v2v},
    )


LOG = [
    "12:00:00 listening port=1",  # a text line, and a JSON line of another kind
    line("session_start", session="s-web", pipeline="p"),
    line("session_start", session="s-a", pipeline="p", call=True, call_sid="CA-a"),
    line("session_start", session="s-b", pipeline="p", call=True, call_sid="CA-b"),
    turn_end("s-a", 2, 1120.0),  # (logged out of order: matched by turn number)
    turn_end("s-web", 1, 900.0),
    turn_end("s-a", 1, 1110.0),
    turn_end("s-b", 1, 1130.0),
    turn_end("s-b", 2, 1140.0),  # a turn call b's caller did not ask for
    "not json {",
    "[1, 2]",
]


def test_the_log_gives_each_call_its_turns_in_order() -> None:
    calls = turns_by_call(LOG)
    assert set(calls) == {"CA-a", "CA-b"}  # the web session names no call
    assert [t["turn"] for t in calls["CA-a"]] == [1, 2]


def test_a_call_s_questions_get_their_turns_figures_and_a_mismatch_gets_none() -> None:
    a = [VoiceTurnRecord(2, call="CA-a"), VoiceTurnRecord(1, call="CA-a")]
    b = [VoiceTurnRecord(1, call="CA-b")]
    web = VoiceTurnRecord(1)
    assert fill_from_log([*a, *b, web], LOG) == 1  # call b: 1 question, 2 turns
    first, second = sorted(a, key=lambda r: r.number)
    assert (first.turn, second.turn) == (1, 2)
    assert first.server["voice_to_voice_ms"] == 1110.0
    assert second.server["voice_to_voice_ms"] == 1120.0
    assert set(first.server) == {*SERVER_FIGURES, *REPLY_STAMPS}
    assert first.server["first_audio"] == 10.0 * REPLY_STAMPS.index("first_audio")
    assert b[0].server == {} and b[0].turn is None
    assert web.server == {}
