"""A reply cut by the token limit ends honestly (issue 24): its speech ends on a
sentence end, or a sentence begun aloud is finished by a short cue; a reply that
ended on its own is untouched; run, the report and bench say "cut off
(max_tokens)"; the conversation keeps what was heard."""

from __future__ import annotations

import io
import json
from itertools import pairwise
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from voice_membrane.chunking import SpeechChunk, SpeechChunker
from voice_membrane.chunking.cut_off import CUT_OFF_TEXT, ends_sentence
from voice_membrane.cli.main import main
from voice_membrane.cli.run import resolve_config, run_assistant
from voice_membrane.pipeline.metrics import LatencyReport
from voice_membrane.pipeline.session import Session
from voice_membrane.providers.replay import RecordingError, ReplaySource, load_recording
from voice_membrane.sinks.null import NullSink
from voice_membrane.testing.silent_engine import SilentEngine

CUE = f" {CUT_OFF_TEXT}"


def pieces(parts: list[str], *, cut_off: bool, **options: object) -> list[SpeechChunk]:
    chunker = SpeechChunker(**options)  # type: ignore[arg-type]
    out: list[SpeechChunk] = []
    for part in parts:
        out += chunker.feed(part)
    return out + chunker.flush(cut_off=cut_off)


def said(parts: list[str], *, cut_off: bool = True, **options: object) -> str:
    return "".join(p.text for p in pieces(parts, cut_off=cut_off, **options))


@pytest.mark.parametrize(
    ("text", "heard"),
    [
        # The unfinished sentence was all held: it is dropped, the speech ends on a sentence.
        (
            "Hello there. I can help with that. So, if you need help with a specific topic,",
            "Hello there. I can help with that.",
        ),
        # Begun aloud (the first piece went at "So,"): finished at its last whole word.
        (
            "So, if you need help with a specific topic, I can",
            "So, if you need help with a specific topic, I" + CUE,
        ),
        ("So, if you need help with a specific topi", "So, if you need help with a specific" + CUE),
        # It ended on a sentence after all: nothing changes.
        ("The sky is blue. It is.", "The sky is blue. It is."),
        (
            "Visit us at 10 a.m. tomorrow. We open at nine.",
            "Visit us at 10 a.m. tomorrow. We open at nine.",
        ),
        # The chunker's own rules judge the end: "Dr." ends no sentence.
        ("You should ask Dr.", "You should ask Dr." + CUE),
        # A list's lead-in is no sentence end; its items are.
        (
            "Here are the steps:\n1. Open the lid.\n2. Pour the",
            "Here are the steps:\n1. Open the lid.",
        ),
        ("Here is how", "Here is" + CUE),
        ("", ""),
        ("Hello", ""),  # one word, perhaps cut: nothing whole to say
    ],
)
def test_a_cut_off_stream_ends_on_a_sentence_or_the_cue(text: str, heard: str) -> None:
    assert said([text]) == heard


def test_the_cue_is_configurable_and_can_be_off() -> None:
    text = "So, if you need help with a specific topic, I can"
    assert said([text], cut_off_text="…and so on.").endswith(" …and so on.")
    assert said([text], cut_off_text="") == "So, if you need help with a specific topic, I"
    # Off, a held unfinished sentence is still dropped.
    assert said(["It works. And then"], cut_off_text="") == "It works."


def test_a_sentence_already_said_in_part_gets_the_cue_even_with_nothing_left() -> None:
    chunker = SpeechChunker()
    first = chunker.feed("So, if you ")
    assert [p.text for p in first] == ["So,"]  # said before the limit was known
    assert [(p.text, p.kind) for p in chunker.flush(cut_off=True)] == [
        (" if you", "final"),
        (CUE, "cue"),
    ]


def test_the_pieces_still_tile_the_raw_text() -> None:
    text = "So, **if** you need help with a specific topic, I can"
    out = pieces([text], cut_off=True)
    assert out[0].start == 0 and out[-1].end == len(text)
    assert all(a.end == b.start for a, b in pairwise(out))


# Replies made of the hazards a cut may fall among: abbreviations, numbers, lists,
# quotes, markdown, URLs, hidden-looking tags, clause marks, newlines.
FRAGMENTS = st.sampled_from(
    [
        "Hello",
        " there",
        ".",
        " ",
        ",",
        " so",
        " if you need",
        " help",
        "!",
        "?",
        "\n",
        " Dr.",
        " Smith",
        " 1.",
        " 2.",
        " e.g.",
        " etc.",
        " a.m.",
        " The",
        " It",
        " 3.14",
        ' "Stop."',
        " (see",
        ")",
        " **bold**",
        " https://example.com/a/b",
        " —",
        " and",
        " <thinking>",
        " 🎉",
        " ...",
        " U.S.",
        " I",
        " can",
        " :",
        ";",
        " word",
        "s",
    ]
)
REPLIES = st.lists(FRAGMENTS, max_size=40).map("".join)


def splits(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True) if b > a]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(REPLIES, st.lists(st.integers(0, 400), max_size=12))
def test_rechunking_a_cut_off_reply_never_changes_what_is_said(text: str, cuts: list[int]) -> None:
    whole = [(p.text, p.kind) for p in pieces([text], cut_off=True)]
    split = [(p.text, p.kind) for p in pieces(splits(text, cuts), cut_off=True)]
    assert split == whole


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(REPLIES, st.lists(st.integers(0, 400), max_size=12))
def test_a_cut_off_reply_never_ends_mid_sentence_without_the_cue(
    text: str, cuts: list[int]
) -> None:
    out = pieces(splits(text, cuts), cut_off=True)
    if out:
        assert out[-1].kind == "cue" or ends_sentence(out[-1].text), out
    normal = "".join(p.text for p in pieces([text], cut_off=False))
    cut = "".join(p.text for p in out if p.kind != "cue")
    # Nothing is said that the whole reply would not say (nothing hidden, no markup):
    # only an end is taken away, and the cue is the one thing added.
    assert normal.startswith(cut)
    assert [p.kind for p in out].count("cue") <= 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(REPLIES, st.lists(st.integers(0, 400), max_size=12))
def test_a_reply_that_ended_on_its_own_is_untouched(text: str, cuts: list[int]) -> None:
    """``flush()`` is unchanged whatever was fed; and a cut-off reply whose text
    ends on a sentence end says the same as if it had ended on its own."""
    normal = pieces(splits(text, cuts), cut_off=False)
    assert "cue" not in [p.kind for p in normal]
    assert normal == pieces([text], cut_off=False)
    # (Without quotes or brackets: inside an open one no sentence ends.)
    ended = text.translate(str.maketrans("", "", '"()')).rstrip() + " The end."
    assert pieces([ended], cut_off=True) == pieces([ended], cut_off=False)


# — a recording whose model hit the token limit, through run —

CUT_REPLY = (
    "The sky looks blue because air scatters blue light more than red. "
    "So, if you need help with a specific topic,"
)


def cut_recording(tmp_path: Path, text: str = CUT_REPLY, stop: str = "max_tokens") -> Path:
    path = tmp_path / "cut.jsonl"
    header = {"format": "voice-membrane-replay", "version": 1, "mode": "chat"}
    lines = [{**header, "stop_reason": stop}]
    lines += [{"t_ms": 0, "text": text[i : i + 5]} for i in range(0, len(text), 5)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_recording_says_how_it_ended(tmp_path: Path) -> None:
    assert load_recording(cut_recording(tmp_path)).stop_reason == "max_tokens"
    assert load_recording(cut_recording(tmp_path, stop="end_turn")).stop_reason == "end_turn"
    with pytest.raises(RecordingError, match=r"cut.jsonl:1: stop_reason must be end_turn or"):
        load_recording(cut_recording(tmp_path, stop="length"))


@pytest.mark.parametrize("stop", ["max_tokens", "end_turn"])
def test_run_says_cut_off_and_speaks_whole_sentences(tmp_path: Path, stop: str) -> None:
    config = resolve_config(
        None,
        llm=f"replay:{cut_recording(tmp_path, stop=stop)}",
        tts="espeak",
        out=str(tmp_path / "r.wav"),
    ).with_overrides({"llm": {"replay_speed": 0}})
    printed = io.StringIO()
    metrics = tmp_path / "m.json"
    events = tmp_path / "e.jsonl"
    [result] = anyio.run(
        lambda: run_assistant(
            config,
            prompt="why blue?",
            metrics_json=metrics,
            events_jsonl=events,
            out=printed.write,
        )
    )
    text = printed.getvalue()
    data = json.loads(metrics.read_text(encoding="utf-8"))
    assert data["stop_reason"] == stop
    said_aloud = "".join(
        json.loads(line)["text"]
        for line in events.read_text(encoding="utf-8").splitlines()
        if json.loads(line).get("event") == "tts_input"
    )
    if stop == "max_tokens":
        assert "[cut off (max_tokens)]" in text
        assert (
            result.spoken_text
            == "The sky looks blue because air scatters blue light more than red."
        )
        assert "if you need" not in said_aloud
        assert result.visible_text == CUT_REPLY  # the transcript keeps what the model wrote
    else:
        assert "cut off" not in text
        assert result.spoken_text == CUT_REPLY  # byte for byte
    assert LatencyReport.from_dict(data).cut_off == (stop == "max_tokens")


@pytest.mark.anyio
async def test_the_history_keeps_what_was_heard_with_the_cue(tmp_path: Path) -> None:
    reply = "So, if you need help with a specific topic, I can"
    source = ReplaySource(cut_recording(tmp_path, reply), speed=0)
    session = Session(source, SilentEngine(), NullSink())
    async with session:
        result = await session.turn("help?")
    assert result.report.stop_reason == "max_tokens"
    assert result.spoken_text == "So, if you need help with a specific topic, I" + CUE
    assert session.history[0].heard == result.spoken_text


def test_demo_shows_the_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["demo", str(cut_recording(tmp_path)), "--speed", "0"])
    out = capsys.readouterr().out
    assert "cut off (max_tokens)" in out
    assert "if you need" not in "".join(line for line in out.splitlines() if "▶ speak" in line)


def test_the_report_marks_a_cut_off_turn() -> None:
    report = LatencyReport.from_dict(
        {
            "llm": "l",
            "tts": "t",
            "sink": "s",
            "interrupted": False,
            "stamps_ms": {},
            "stages": {},
            "counts": {
                "tokens": 1,
                "visible_chars": 1,
                "chunks": 1,
                "chars_spoken": 1,
                "audio_seconds": 0.1,
            },
            "tts_rtf": None,
            "tts_first_byte_ms_median": None,
            "first_chunk_token_ms": None,
            "tts_stream": {},
            "stop_reason": "max_tokens",
        }
    )
    assert "[cut off (max_tokens)]" in report.table().splitlines()[0]
