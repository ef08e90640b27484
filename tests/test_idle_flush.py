"""The timed flush: a held piece never waits on a silent stream for longer than
``idle_flush_s``. The chunker lets go of what it holds (``flush_held``) without
changing what the rest of the stream says — only where it is cut — and without
letting out anything it would not have said; the turn's chunk stage asks for it
when no text has come for ``idle_flush_s``."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_chunker_properties import OPTIONS, TEXT, split
from vendors import VENDORS, Vendor

from voice_membrane.chunking import PhraseGuard, SpeechChunk, SpeechChunker
from voice_membrane.membrane.membrane import Membrane
from voice_membrane.parse.xml_stream import XmlStreamParser
from voice_membrane.pipeline.config import ConfigError, PipelineConfig
from voice_membrane.pipeline.metrics import TurnMetrics
from voice_membrane.pipeline.reply_stages import ChunkStage
from voice_membrane.pipeline.scheduling import FirstAudioPriority
from voice_membrane.pipeline.session import Session
from voice_membrane.pipeline.stream_items import Piece, Visible
from voice_membrane.sinks.null import NullSink
from voice_membrane.testing.script import Pause, ScriptedReply
from voice_membrane.testing.silent_engine import SilentEngine
from voice_membrane.vocab.events import Chunk

GUARD_S = 20


def run(pieces: list[str], options: dict[str, Any], pauses: set[int]) -> list[SpeechChunk]:
    """Every piece; after the text pieces numbered in ``pauses`` the stream pauses."""
    chunker = SpeechChunker(**options)
    out: list[SpeechChunk] = []
    for n, piece in enumerate(pieces):
        out += chunker.feed(piece)
        if n in pauses:
            out += chunker.flush_held()
    return out + chunker.flush()


def said(chunks: list[SpeechChunk]) -> str:
    return "".join(c.text for c in chunks)


# ------------------------------------------------------------------ the chunker


def test_a_pause_lets_the_held_piece_go() -> None:
    chunker = SpeechChunker()
    assert chunker.feed("Hello there, my friend") == []  # a first piece not yet decided
    (piece,) = chunker.flush_held()
    assert (piece.text, piece.kind, piece.start, piece.end) == (
        "Hello there, my friend",
        "first",
        0,
        22,
    )
    assert chunker.flush_held() == []  # nothing more held
    rest = chunker.feed(" and you. Then") + chunker.flush()
    assert [c.text for c in rest] == [" and you.", " Then"]
    assert rest[0].start == 22 and rest[-1].end == 36


def test_a_word_the_pause_cut_is_said_whole_in_the_text() -> None:
    # Let out at a pause mid-word, the rest of the word follows with the rest.
    chunks = run(["Good mor", "ning to you."], {}, {0})
    assert [c.text for c in chunks] == ["Good mor", "ning to you."]


@pytest.mark.parametrize(
    ("pieces", "held"),
    [
        (["See example.com/re", "set now."], "See "),  # a URL's path is never said
        (["Mail anna@exa", "mple.com now."], "Mail "),  # an address's "@" is said "at"
        (["Open https", "://help.example.com/x now."], "Open "),  # nor a scheme
        (["Go to www", ".example.org/x now."], "Go to "),
        (["Go to <https://x.example.com", "> now."], "Go to "),  # an autolink's bracket
        (["Read **bo", "ld** text."], "Read bo"),  # markup still being decided
        (["thew", "ww.example.org/d now."], "thew"),  # a host is said as written
    ],
)
def test_what_may_yet_be_said_otherwise_stays_held(pieces: list[str], held: str) -> None:
    chunks = run(pieces, {}, {0})
    assert chunks[0].text == held
    assert said(chunks) == said(run(pieces, {}, set()))


def test_a_url_begun_before_the_pause_is_said_as_its_host() -> None:
    # "example" is said either way, so it goes; the host follows, the path never.
    chunks = run(["Visit example", ".com/reset today."], {}, {0})
    assert [c.text for c in chunks] == ["Visit example", ".com today."]
    assert chunks[1].end == len("Visit example.com/reset today.")


def test_a_pause_never_lets_a_banned_phrase_out() -> None:
    # The phrase guard judges what a pause lets go like any text: it keeps holding
    # the end a phrase may be forming in, and cuts the phrase when it completes.
    options: dict[str, Any] = {"phrase_guard": GUARD}
    for pieces in (["Our secret", " plan is out. Fine."], ["Our secr", "et plan is out. Fine."]):
        chunks = run(pieces, options, {0})
        assert "secret" not in said(chunks) and said(chunks) == said(run(pieces, options, set()))
    assert said(run(["Our secret", " plan is out. Fine."], options, {0})).startswith("Our")


def test_a_lone_punctuation_piece_waits_for_the_next() -> None:
    # A pause just before a sentence's period: the period is not sent alone.
    chunks = run(["Hello there, friend", ". And more. Yes", "."], {}, {0})
    assert [c.text for c in chunks] == ["Hello there, friend", ". And more.", " Yes."]


def test_a_blank_remainder_is_not_a_piece() -> None:
    chunker = SpeechChunker()
    assert chunker.feed("One. ") == []  # (a sentence end waits for the next letter)
    assert [c.text for c in chunker.flush_held()] == ["One. "]
    assert chunker.feed("  ") == [] and chunker.flush_held() == []
    rest = chunker.feed("\nTwo. Three") + chunker.flush()
    assert [c.text for c in rest] == ["  \nTwo.", " Three"]  # the blanks lead the next


def test_idle_flush_s_is_carried_for_the_driver_and_checked() -> None:
    assert SpeechChunker().idle_flush_s == 1.0
    assert SpeechChunker(idle_flush_s=None).idle_flush_s is None
    with pytest.raises(ValueError, match="idle_flush_s must be positive"):
        SpeechChunker(idle_flush_s=0)
    with pytest.raises(ConfigError, match=r"chunker\.idle_flush_s: Input should be greater"):
        PipelineConfig().with_overrides({"chunker": {"idle_flush_s": 0}})


# URL-, address- and markup-shaped words, built from parts with no space between.
_PARTS = [
    "example", ".com", ".org", "/", "/reset", "@", "www.", "w", "http", "s", "://",
    "mailto", ":", "(", "<", ">", ")", ".", ",", "8080", "anna", "_", "-", " ", " ",
    "\n", "?", "#", "🎉", "é", "*", "`", "[", "](u)", "the",
]  # fmt: skip
WORDY = st.lists(st.sampled_from(_PARTS), max_size=40).map("".join)


GUARD = PhraseGuard(["secret plan", "example"], replacement="[no].")
GUARDED = [*OPTIONS, {"phrase_guard": GUARD}, {"phrase_guard": GUARD, "max_chars": 20}]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), text=st.one_of(TEXT, WORDY), options=st.sampled_from(GUARDED))
def test_pauses_anywhere_change_only_where_the_text_is_cut(
    data: st.DataObject, text: str, options: dict[str, Any]
) -> None:
    pieces = data.draw(split(text))
    pauses = data.draw(st.sets(st.integers(0, max(0, len(pieces) - 1))))
    plain = run(pieces, options, set())
    paused = run(pieces, options, pauses)
    # The same words are said (nothing hidden, no markup, no URL path let out)...
    assert said(paused).rstrip() == said(plain).rstrip()
    # ... in pieces that each say something and still tile the raw input.
    assert all(c.text.strip() for c in paused)
    end = 0
    for chunk in paused:
        assert chunk.start == end
        end = chunk.end


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    parts=st.lists(
        st.sampled_from(
            [
                "Sure, let me see",
                " what I can do",
                "<thinking>secret plan",
                "</thinking>",
                '<function_calls><invoke name="get_weather"><parameter name="city">Paris',
                "</parameter></invoke></function_calls>",
                " It is sunny.",
                " Visit example.com/private?token=abc",
                " **really**",
            ]
        ),
        max_size=12,
    ),
)
def test_nothing_hidden_is_let_out_by_a_pause(data: st.DataObject, parts: list[str]) -> None:
    # Model output through the parser, its visible text to the chunker, with pauses.
    raw = "".join(parts)
    pieces = data.draw(split(raw))
    pauses = data.draw(st.sets(st.integers(0, max(0, len(pieces) - 1))))
    spoken: list[str] = []
    for flushing in (set(), pauses):
        parser, chunker = XmlStreamParser(), SpeechChunker(phrase_guard=GUARD)
        out: list[SpeechChunk] = []
        for n, piece in enumerate(pieces):
            for event in parser.feed(piece):
                if isinstance(event, Chunk) and event.meta.visible:
                    out += chunker.feed(event.text)
            if n in flushing:
                out += chunker.flush_held()
        for event in parser.flush():
            if isinstance(event, Chunk) and event.meta.visible:
                out += chunker.feed(event.text)
        spoken.append(said(out + chunker.flush()))
    assert spoken[1].rstrip() == spoken[0].rstrip()
    for secret in ("secret", "Paris", "private", "token", "*", "<", "get_weather", "example"):
        assert secret not in spoken[1]


# ------------------------------------------------------------------ the turn


@pytest.mark.anyio
@pytest.mark.parametrize("vendor", VENDORS, ids=lambda v: v.name)
async def test_a_paused_stream_is_heard_before_it_goes_on(vendor: Vendor) -> None:
    # "Hello there, my friend" then 3 s of nothing, then the rest: the held piece
    # goes to the voice during the pause, before the next delta arrives.
    reply = ScriptedReply.of(
        "Hello there, my friend and the rest of it.",
        delta_chars=11,
        pauses=(Pause(2, 3.0),),
    )
    records: list[dict[str, Any]] = []
    with vendor.server(reply) as server:
        provider = vendor.provider(server)
        voice = Session(Membrane(provider), SilentEngine(), NullSink(), log=records.append)
        async with voice:
            with anyio.fail_after(GUARD_S):
                result = await voice.turn("Hi!")
    assert (
        result.error is None and result.spoken_text == "Hello there, my friend and the rest of it."
    )
    order = [
        (r["event"], r["text"])
        for r in records
        if r["event"] == "tts_input" or (r["event"] == "chunk" and r["meta"]["visible"])
    ]
    heard = order.index(("tts_input", "Hello there, my friend"))
    # (the deltas after the pause arrive together: they may come as one chunk)
    after_pause = next(
        n for n, (event, text) in enumerate(order) if event == "chunk" and " and" in text
    )
    assert heard < after_pause


@pytest.mark.anyio
async def test_the_llm_held_for_first_audio_is_no_pause_of_the_stream() -> None:
    # First-audio priority holds the LLM: that silence is the pipeline's own, so
    # nothing is flushed while it lasts; once the hold ends the count starts again.
    chunker = SpeechChunker(idle_flush_s=0.05)
    priority = FirstAudioPriority(True)
    priority.piece_pushed(0)  # holding the LLM for piece 0's first audio
    stage = ChunkStage(chunker, TurnMetrics(), priority)
    text_in, text_out = anyio.create_memory_object_stream[Visible](8)
    pieces_in, pieces_out = anyio.create_memory_object_stream[Piece](8)
    async with anyio.create_task_group() as tg:
        tg.start_soon(stage.run, text_out, pieces_in)
        await text_in.send(Visible("Hello there, my friend", 1))
        await anyio.sleep(0.5)  # ten idle periods, all while held
        assert pieces_out.statistics().current_buffer_used == 0
        priority.release()
        with anyio.fail_after(GUARD_S):
            piece = await pieces_out.receive()
        assert piece.chunk.text == "Hello there, my friend" and piece.chunk.kind == "first"
        await text_in.aclose()
        assert [p async for p in pieces_out] == []
