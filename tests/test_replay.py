"""Recorded streams: loading, validation errors, and timed replay."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from voice_membrane.providers.base import ChatMessage
from voice_membrane.providers.replay import (
    Delta,
    Recording,
    RecordingError,
    ReplaySource,
    load_recording,
    replay,
)

HEADER = json.dumps({"format": "voice-membrane-replay", "version": 1, "mode": "prefill"})
FIXTURES = Path(__file__).resolve().parent.parent / "audio_fixtures" / "streams"


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "rec.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_loads_the_shipped_recordings() -> None:
    paths = sorted(FIXTURES.glob("*.jsonl"))
    assert paths
    for path in paths:
        recording = load_recording(path)
        assert recording.deltas
        assert "<thinking>" in recording.text or recording.mode == "chat"


def test_loads_deltas_in_order(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER, '{"t_ms": 5, "text": "Hi"}', "", '{"t_ms": 7.5, "text": "!"}')
    recording = load_recording(path)
    assert recording.deltas == (Delta(5.0, "Hi"), Delta(7.5, "!"))
    assert recording.text == "Hi!"


DEEP = "[" * 100_000 + "]" * 100_000  # JSON nested far past Python's recursion limit


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ((), "empty file"),
        (('{"t_ms": 1, "text": "x"}',), "not a recording"),
        ((HEADER, "{not json"), ":2: invalid JSON"),
        ((HEADER, "[1, 2]"), ":2: expected a JSON object"),
        ((HEADER, '{"t_ms": -1, "text": "x"}'), ":2: t_ms must be a finite number"),
        ((HEADER, '{"t_ms": true, "text": "x"}'), ":2: t_ms must be a finite number"),
        # json reads these; a replay would sleep until NaN or forever
        ((HEADER, '{"t_ms": NaN, "text": "x"}'), ":2: t_ms must be a finite number ≥ 0, got nan"),
        ((HEADER, '{"t_ms": Infinity, "text": "x"}'), ":2: t_ms must be a finite number"),
        (
            (HEADER, '{"t_ms": 1, "text": "x"}', '{"t_ms": -Infinity, "text": "x"}'),
            ":3: t_ms must be a finite number",
        ),
        ((HEADER, '{"t_ms": 1, "text": ' + DEEP + "}"), ":2: invalid JSON: nested too deeply"),
        ((HEADER, '{"t_ms": ' + "7" * 5000 + ', "text": "x"}'), ":2: invalid JSON: Exceeds"),
        ((HEADER, '{"t_ms": 1, "text": 3}'), ":2: text must be a string"),
        ((HEADER, '{"t_ms": 5, "text": "a"}', '{"t_ms": 4, "text": "b"}'), ":3: t_ms 4"),
        ((HEADER.replace("prefill", "voice"),), "mode must be prefill or chat"),
    ],
)
def test_bad_recordings_say_what_and_where(
    tmp_path: Path, lines: tuple[str, ...], message: str
) -> None:
    path = write(tmp_path, *lines)
    with pytest.raises(RecordingError) as excinfo:
        load_recording(path)
    assert str(path) in str(excinfo.value)
    assert message in str(excinfo.value)


def test_a_huge_bad_value_is_not_echoed_whole(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER, '{"t_ms": 1, "text": ["' + "x" * 1_000_000 + '"]}')
    with pytest.raises(RecordingError) as excinfo:
        load_recording(path)
    message = str(excinfo.value)
    assert ":2: text must be a string, got ['xxxx" in message
    assert len(message) < len(str(path)) + 200 and "(1,000,004 characters)" in message


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="no such recording file"):
        load_recording(tmp_path / "nope.jsonl")


def test_replay_keeps_the_recorded_offsets_scaled_by_speed() -> None:
    recording = Recording(
        Path("x"), "prefill", "", ((Delta(0, "a"), Delta(100, "b"), Delta(200, "c")),)
    )

    async def collect(speed: float) -> list[tuple[str, float]]:
        start = anyio.current_time()
        deltas = replay(recording, speed=speed)
        return [(d.text, anyio.current_time() - start) async for d in deltas]

    timed = anyio.run(collect, 4.0)  # 200 ms of recording in ~50 ms
    assert [text for text, _ in timed] == ["a", "b", "c"]
    # sleep_until never wakes early: each delta is released no sooner than its offset
    assert timed[1][1] >= 0.024 and timed[2][1] >= 0.049
    assert [text for text, _ in anyio.run(collect, 0.0)] == ["a", "b", "c"]


def test_a_recording_holds_the_replies_of_a_tool_loop(tmp_path: Path) -> None:
    path = tmp_path / "loop.jsonl"
    path.write_text(
        '{"format": "voice-membrane-replay", "version": 1, "mode": "chat"}\n'
        '{"t_ms": 0, "text": "Checking. <tool_call>{}</tool_call>"}\n'
        '{"reply": 2}\n'
        '{"t_ms": 0, "text": "Done."}\n',
        encoding="utf-8",
    )
    source = ReplaySource(path, speed=0)
    asked = [ChatMessage("user", "Weather?")]
    after_tools = [
        *asked,
        ChatMessage("assistant", "Checking. <tool_call>{}</tool_call>"),
        ChatMessage("user", "<tool_result>sunny</tool_result>"),
    ]

    async def said(messages: list[ChatMessage]) -> str:
        return "".join([text async for text in source.stream(messages)])

    assert anyio.run(said, asked).startswith("Checking.")
    assert anyio.run(said, after_tools) == "Done."
    # Past the last reply: the last again.
    twice = [*after_tools, ChatMessage("assistant", "x"), ChatMessage("user", "<tool_result>y")]
    assert anyio.run(said, twice) == "Done."
    path.write_text(path.read_text().replace('{"reply": 2}', '{"reply": 3}'), encoding="utf-8")
    with pytest.raises(RecordingError, match=r'expected \{"reply": 2\}'):
        load_recording(path)
