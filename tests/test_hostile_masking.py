"""An attacker hides a key from the masker: invisible characters inside it
(zero-width space, soft hyphen, word joiner, BOM, direction marks, tags…), so
the text reads, is spoken and pastes as the key but does not match its shape
or value; or a hidden block (thinking, a tool call) between its halves, so
each text block holds half. Every output masks it all the same: a stream (what is spoken, shown
and sent), ``redact`` (events, logs, messages), and ``voice-membrane run`` end
to end — the voice, stdout, the events file. Text with no key passes
unchanged, invisible characters and all."""

from __future__ import annotations

import json
import os
import string
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from serve_helpers import GUARD_S, read_turn, send, start
from websockets.asyncio.client import connect

from voice_membrane.infra.invisible import without_invisible
from voice_membrane.infra.redact import MASK, forget_all, redact, remember
from voice_membrane.infra.secret_shapes import SecretPattern
from voice_membrane.parse import XmlStreamParser
from voice_membrane.parse.secret_filter import SecretFilter
from voice_membrane.parse.secret_stream import SecretStream
from voice_membrane.server import Server
from voice_membrane.server.log import JsonLog
from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.testing.fake_openai_speech import FakeOpenAISpeech
from voice_membrane.testing.script import ScriptedReply, thinking
from voice_membrane.vocab.events import Block, BlockComplete, BlockStart, Chunk, ChunkMeta, Event

ROOT = Path(__file__).resolve().parent.parent
B64URL = string.ascii_letters + string.digits + "-_"
INVISIBLE = [
    "\u200b",  # zero-width space
    "\u00ad",  # soft hyphen
    "\u2060",  # word joiner
    "\u200c",  # zero-width non-joiner
    "\u200d",  # zero-width joiner
    "\ufeff",  # BOM / zero-width no-break space
    "\u200e",  # left-to-right mark
    "\u202e",  # right-to-left override
    "\u2066",  # left-to-right isolate
    "\u180e",  # Mongolian vowel separator
    "\u034f",  # combining grapheme joiner
    "\ufe0f",  # variation selector
    "\U000e0041",  # tag A
]
KNOWN = "PLANTEDownKEY0123456789abcdef"  # a key known by value only (no shape)
KEYS = st.one_of(
    st.sampled_from(
        [
            "sk-ant-api03-" + ("Zx9_" * 24)[:93] + "AA",
            "sk-proj-" + ("Qw7eRt5-yU_i" * 6),
            "sk_" + ("0f9e8d7c6b5a4" * 4)[:48],
            "AIzaSy" + ("Dq5-Ws_7Ex" * 4)[:33],
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fw",
            KNOWN,
        ]
    ),
    st.text(B64URL, min_size=20, max_size=60).map(lambda body: "sk-proj-Z9" + body),
)
SPLITS = st.lists(st.integers(1, 12), min_size=1, max_size=8)


@st.composite
def broken(draw: st.DrawFn) -> tuple[str, str]:
    """A key and the key with invisible characters inserted anywhere in it."""
    key = draw(KEYS)
    chars = list(key)
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, len(chars)))
        chars.insert(
            at, "".join(draw(st.lists(st.sampled_from(INVISIBLE), min_size=1, max_size=3)))
        )
    return key, "".join(chars)


def stream(text: str, pieces: list[int], pattern: SecretPattern, replacement: str) -> str:
    s = SecretStream(pattern, replacement)
    out, i, n = [], 0, 0
    while i < len(text):
        size = pieces[n % len(pieces)]
        out.append(s.feed(text[i : i + size]))
        i, n = i + size, n + 1
    out.append(s.flush())
    return "".join(out)


def leaked(key: str, out: str) -> bool:
    """Any 12 characters of ``key`` in ``out`` read without its invisible characters."""
    seen = without_invisible(out)
    return any(key[i : i + 12] in seen for i in range(len(key) - 11))


@pytest.fixture(autouse=True)
def known_key(monkeypatch: pytest.MonkeyPatch) -> object:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    forget_all()
    remember(KNOWN)
    yield
    forget_all()


@settings(max_examples=300, deadline=None)
@given(
    key_and_text=broken(),
    glue=st.sampled_from([" ", ": ", " (", ' "', "\n", "="]),
    splits=SPLITS,
)
def test_a_key_with_invisible_characters_is_masked_in_every_output(
    key_and_text: tuple[str, str], glue: str, splits: list[int]
) -> None:
    key, hidden = key_and_text
    text = f"Here it is{glue}{hidden}{glue[::-1]}and that is all."
    pattern = SecretPattern((KNOWN,))
    spoken = stream(text, splits, pattern, "a key")  # what is spoken, shown and sent
    assert not leaked(key, spoken) and "a key" in spoken, repr(spoken)
    assert spoken == pattern.sub(text, "a key")  # the stream is its batch twin
    logged = redact(text)  # events, logs, messages
    assert not leaked(key, logged) and MASK in logged, repr(logged)
    assert logged.startswith("Here it is") and logged.endswith("and that is all.")


ORDINARY = st.lists(
    st.one_of(
        st.sampled_from(INVISIBLE),
        st.sampled_from(["the ", "key ", "ask ", "s", "k", "-", "sk-", "AIza", "eyJ", " ", "."]),
        st.sampled_from(
            [
                "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 ",  # Persian, with a ZWNJ
                "क्\u200dष ",
                "👨\u200d👩\u200d👧 ",
                "co\u00adoperate ",
            ]
        ),
        st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=ORDINARY, splits=SPLITS)
def test_ordinary_text_with_invisible_characters_is_unchanged(text: str, splits: list[int]) -> None:
    pattern = SecretPattern((KNOWN,))
    if pattern.search(without_invisible(text)) is not None:
        return  # (the alphabet spelt a key by chance)
    assert stream(text, splits, pattern, "a key") == text
    assert redact(text) == text


def test_a_known_key_broken_by_a_soft_hyphen_is_masked_by_value() -> None:
    assert redact(f"mine is {KNOWN[:9]}\u00ad{KNOWN[9:]}, keep it") == f"mine is {MASK}, keep it"


# -------------------------------------------------- a key split by a hidden block

HIDDEN_BLOCKS = [
    "<thinking>let me see</thinking>",
    "<thinking></thinking>",
    '<function_calls><invoke name="f"><parameter name="x">1</parameter></invoke></function_calls>',
]


def filtered(reply: str, sizes: list[int]) -> list[Event]:
    parser, secrets = XmlStreamParser(), SecretFilter(SecretPattern((KNOWN,)))
    events: list[Event] = []
    i = n = 0
    while i < len(reply):
        size = sizes[n % len(sizes)]
        events += secrets.feed(parser.feed(reply[i : i + size]))
        i, n = i + size, n + 1
    return events + secrets.feed(parser.flush()) + secrets.flush()


def shown(events: list[Event]) -> tuple[str, str]:
    """The visible chunks joined, and the text blocks' contents joined."""
    chunks = "".join(e.text for e in events if isinstance(e, Chunk) and e.meta.visible)
    blocks = "".join(
        e.block.content or ""
        for e in events
        if isinstance(e, BlockComplete) and e.block.type == "text"
    )
    return chunks, blocks


@settings(max_examples=300, deadline=None)
@given(
    key=KEYS,
    cuts=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=3),
    hidden=st.sampled_from(HIDDEN_BLOCKS),
    splits=SPLITS,
)
def test_a_key_split_by_hidden_blocks_is_masked(
    key: str, cuts: list[float], hidden: str, splits: list[int]
) -> None:
    """The model writes part of a key, a hidden block (thinking, a tool call),
    the rest (or more parts, more blocks): each text block holds too little to
    be a key, read together (by a listener, a client joining the blocks) they
    are one."""
    at = sorted({max(1, min(len(key) - 1, round(len(key) * cut))) for cut in cuts})
    pieces = [key[a:b] for a, b in zip([0, *at], [*at, len(key)], strict=True)]
    reply = f"Here: {hidden.join(pieces)}. Done."
    events = filtered(reply, splits)
    chunks, blocks = shown(events)
    for out in (chunks, blocks):
        assert not leaked(key, out), out
        # (a JWT's shape takes the full stop after it: "a key Done.")
        assert out.startswith("Here: ") and out.endswith(" Done."), out
    assert "a key" in chunks and chunks == blocks  # what was shown is what is kept
    indices = [e.index for e in events if isinstance(e, BlockStart | BlockComplete)]
    assert indices == sorted(indices)  # every block's events in order, none lost


ORDINARY_SPLIT = st.tuples(
    st.sampled_from(["Plan A", "the sk-", "see", "x sk-proj-ab", "eyJ", "AIza", "a s", "ok."]),
    st.sampled_from(HIDDEN_BLOCKS),
    st.sampled_from(["Izard.", "learn it", "", "cd ef", " then.", "X.eyJ", "!"]),
)


@settings(max_examples=300, deadline=None)
@given(parts=ORDINARY_SPLIT, splits=SPLITS)
def test_text_around_a_hidden_block_is_unchanged(
    parts: tuple[str, str, str], splits: list[int]
) -> None:
    before, hidden, after = parts
    if SecretPattern((KNOWN,)).search(before + after) is not None:
        return  # (a key by chance: masked, as it should be)
    chunks, blocks = shown(filtered(f"{before}{hidden}{after}", splits))
    assert chunks == blocks == before + after


# ------------------------------------------------------------------ end to end

SHAPED = "sk-proj-" + "Qw7eRt5yUi0pAs9dFg8hJk7lZx6cVb5nM4" * 3
GOOGLE = "AIzaSyDq5Ws7ExDq5Ws7ExDq5Ws7ExDq5Ws"
SPLIT = "sk-ant-api03-" + "Zx9Yw8Vu7Ts6" * 4  # in two text blocks, a thinking one between


def _break(key: str, invisible: str) -> str:
    """``key`` with ``invisible`` after every fifth character."""
    return invisible.join(key[i : i + 5] for i in range(0, len(key), 5))


def test_run_speaks_shows_and_logs_no_key_hidden_by_invisible_characters(tmp_path: Path) -> None:
    """``voice-membrane run`` as a user runs it, on a model (the fake Anthropic
    server) that writes keys broken by a zero-width space, a soft hyphen and a
    word joiner, in its text and its thinking, and one split by a thinking
    block, over small deltas."""
    reply = ScriptedReply.of(
        thinking(f"I will say {_break(SHAPED, chr(0x2060))} now."),
        f"One: {_break(SHAPED, chr(0x200B))}. Two: {_break(GOOGLE, chr(0xAD))}. "
        f"Three: {_break(KNOWN, chr(0x2060) + chr(0x200B))}. Four: {SPLIT[:14]}",
        thinking("Where was I?"),
        f"{SPLIT[14:]}. Done.",
        delta_chars=3,
    )
    events = tmp_path / "events.jsonl"
    with FakeAnthropic(reply) as llm, FakeOpenAISpeech(api_key="tts-key") as voice:
        path = tmp_path / "leaky.toml"
        path.write_text(
            f'[llm]\nspec = "anthropic:claude-test"\nformatter = "native"\n'
            f'api_key_env = "MY_KEY"\nbase_url = "{llm.base_url}"\n'
            '[tts]\nspec = "openai:alloy"\n[sink]\nkind = "null"\n',
            encoding="utf-8",
        )
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.endswith("_API_KEY") and "BASE_URL" not in k
        }
        env.update(voice.env(), MY_KEY="llm-key-0123456789", VOICE_MEMBRANE_TOKEN=KNOWN)
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "voice_membrane.cli", "run", "--pipeline", str(path)),
                *("--prompt", "Say the keys.", "--events-jsonl", str(events), "--show-hidden"),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        spoken = voice.text_received()
    assert proc.returncode == 0, proc.stderr
    outputs = {
        "voice": spoken,
        "stdout": proc.stdout,
        "stderr": proc.stderr,
        "events": events.read_text(encoding="utf-8"),
    }
    for where, text in outputs.items():
        for key in (SHAPED, GOOGLE, KNOWN, SPLIT):
            assert not leaked(key, text), f"{where} holds {key[:12]}…"
    assert spoken.count("a key") == 4, spoken
    assert "Done." in spoken


@pytest.mark.anyio
async def test_serve_sends_and_logs_no_key_hidden_by_invisible_characters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve`` on the same model: the client's events (text, hidden ``log``
    events, ``turn.end``), the server's log and the voice hold no key; the
    user's own key, broken by a zero-width space, is masked in ``turn.started``."""
    reply = ScriptedReply.of(
        thinking(f"They sent {_break(SHAPED, chr(0x200B))}."),
        f"One: {_break(SHAPED, chr(0xAD))}. Two: {SPLIT[:20]}",
        thinking("hmm"),
        f"{SPLIT[20:]}. Done.",
        delta_chars=4,
    )
    lines: list[str] = []
    with FakeAnthropic(reply) as llm, FakeOpenAISpeech(api_key="tts-key") as voice:
        for name, value in voice.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("MY_KEY", "llm-key-0123456789")
        path = tmp_path / "leaky.toml"
        path.write_text(
            f'[llm]\nspec = "anthropic:claude-test"\nformatter = "native"\n'
            f'api_key_env = "MY_KEY"\nbase_url = "{llm.base_url}"\n'
            '[tts]\nspec = "openai:alloy"\n[sink]\nkind = "null"\n',
            encoding="utf-8",
        )
        server = Server([path], port=0, token="serve-token-0123456789", log=JsonLog(lines.append))
        async with server, connect(server.ws_url) as ws:
            await start(ws, token="serve-token-0123456789")
            mine = _break(GOOGLE, chr(0x2060))
            await send(ws, type="user.message", text=f"Say the keys. Mine is {mine}.")
            turn = await read_turn(ws)
            frames = "\n".join(json.dumps(e, ensure_ascii=False) for e in turn.events)
            await send(ws, type="session.end")
            with anyio.fail_after(GUARD_S):
                async for _ in ws:
                    pass
        spoken = voice.text_received()
    assert turn.end["error"] is None, turn.end
    for where, text in (("events", frames), ("log", "".join(lines)), ("voice", spoken)):
        for key in (SHAPED, GOOGLE, SPLIT):
            assert not leaked(key, text), f"{where} holds {key[:12]}…"
    assert spoken.count("a key") == 2 and "Done." in spoken, spoken


def test_a_reply_ending_in_hidden_text_after_a_carried_end_loses_nothing() -> None:
    """A text block ends where a key may begin, a thinking block follows and the
    call ends inside it: everything comes out, in order."""
    text, hidden = ChunkMeta("text", True, 0), ChunkMeta("thinking", False, 1)
    secrets = SecretFilter(SecretPattern(()))
    events: list[Event] = []
    for event in [
        BlockStart(0, "text"),
        Chunk("see sk-pro", text),
        BlockComplete(0, Block("text", content="see sk-pro")),
        BlockStart(1, "thinking"),
        Chunk("hmm sk-", hidden),
    ]:
        events += secrets.feed([event])
    events += secrets.flush()
    assert [(type(e).__name__, e.text if isinstance(e, Chunk) else e.index) for e in events] == [
        ("BlockStart", 0),
        ("Chunk", "see "),
        ("Chunk", "sk-pro"),
        ("BlockComplete", 0),
        ("BlockStart", 1),
        ("Chunk", "hmm "),
        ("Chunk", "sk-"),
    ]
