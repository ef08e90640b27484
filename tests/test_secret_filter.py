"""``SecretFilter`` over a reply's events (what every reply goes through), and the
places that mask what the events do not carry: the debug folder's deltas,
serve's events and log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from serve_helpers import write_pipeline
from vendors import VENDORS, Vendor

from voice_membrane.cli.run import run_assistant
from voice_membrane.infra.redact import MASK, remember
from voice_membrane.infra.secret_shapes import SHAPES, SecretPattern
from voice_membrane.membrane.membrane import Membrane
from voice_membrane.parse import XmlStreamParser
from voice_membrane.parse.secret_filter import SPOKEN, SecretFilter
from voice_membrane.pipeline.config import PipelineConfig, load_pipeline
from voice_membrane.pipeline.debug_dir import mask_split_secrets, output_record
from voice_membrane.server import Server
from voice_membrane.server import protocol as p
from voice_membrane.server.log import JsonLog
from voice_membrane.testing.script import ScriptedReply, thinking
from voice_membrane.vocab.events import Block, BlockComplete, BlockStart, Chunk, ChunkMeta, Event
from voice_membrane.vocab.messages import Message, ModelConfig, Request
from voice_membrane.vocab.provider_output import NativeDelta, NativeStart, NativeStop, TextDelta

KEY = "sk-proj-Qw7eRt5yUiOp3AsDfGh1JkLz"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.SflKxwRJSMeKKF2QT4fwpMeJ"
KNOWN = "my-own-known-secret-42"


# No vendor key in the environment: the only keys a test masks are its own.
pytestmark = pytest.mark.usefixtures("no_key_variables")


def leaked(text: str, *secrets: str) -> bool:
    return any(s[i : i + 12] in text for s in secrets for i in range(len(s) - 11))


def filtered(reply: str, sizes: list[int]) -> list[Event]:
    parser, secrets = XmlStreamParser(), SecretFilter(SecretPattern((KNOWN,)))
    events: list[Event] = []
    i = n = 0
    while i < len(reply):
        size = sizes[n % len(sizes)]
        events += secrets.feed(parser.feed(reply[i : i + size]))
        i, n = i + size, n + 1
    return events + secrets.feed(parser.flush()) + secrets.flush()


REPLY = (
    f"<thinking>I hold {KEY} and {KNOWN}.</thinking>Your key is {KEY}, the token "
    f'{JWT}; mine is {KNOWN}. <function_calls><invoke name="fetch">'
    f'<parameter name="auth">Bearer 9f8e7d6c5b4a39281706</parameter></invoke>'
    f'</function_calls><function_results><result tool_use_id="toolu_xml_1">'
    f"Authorization: Bearer 9f8e7d6c5b4a39281706 {KEY}</result></function_results>Done."
)


@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.integers(1, 9), min_size=1, max_size=6))
def test_no_event_holds_a_key_however_the_reply_is_split(sizes: list[int]) -> None:
    events = filtered(REPLY, sizes)
    chunks = [e for e in events if isinstance(e, Chunk)]
    for chunk in chunks:
        assert not leaked(chunk.text, KEY, JWT, KNOWN, "9f8e7d6c5b4a39281706"), chunk
    visible = "".join(c.text for c in chunks if c.meta.visible)
    assert visible == f"Your key is {SPOKEN}, the token {SPOKEN}; mine is {SPOKEN}. Done."
    # Every block's content is its chunks joined, masked alike (a signed thinking
    # block aside: this one, from XML, has no signature).
    for event in events:
        if isinstance(event, BlockComplete) and event.block.type != "tool_call":
            joined = "".join(c.text for c in chunks if c.meta.block_index == event.index)
            assert event.block.content == joined
    (call,) = [
        e.block for e in events if isinstance(e, BlockComplete) and e.block.type == "tool_call"
    ]
    assert call.input == {"auth": f"Bearer {MASK}"}  # no key is handed to a tool
    (result,) = [e.block for e in events if isinstance(e, BlockComplete) and e.index == 3]
    assert result.content == f"Authorization: Bearer {MASK} {MASK}"


def test_a_signed_thinking_block_keeps_its_text_for_the_model() -> None:
    meta = ChunkMeta("thinking", False, 0)
    secrets = SecretFilter(SecretPattern())
    signed = Block("thinking", f"key {KEY}", signature="sig")
    out = secrets.feed(
        [BlockStart(0, "thinking"), Chunk(f"key {KEY}", meta), BlockComplete(0, signed)]
    )
    shown = "".join(e.text for e in out if isinstance(e, Chunk))
    assert shown == f"key {MASK}"  # what is shown is masked
    assert out[-1] == BlockComplete(0, signed)  # what goes back to the model is as signed


def test_tool_call_names_and_ids_pass_and_ordinary_text_passes_at_once() -> None:
    secrets = SecretFilter(SecretPattern())
    name = ChunkMeta("tool_call", False, 0, tool_call_part="name")
    events: list[Event] = [BlockStart(0, "tool_call"), Chunk("sk-ant-api03-tool", name)]
    assert secrets.feed(events) == events
    text = ChunkMeta("text", True, 1)
    # Whole words pass in the feed they arrive in; only a tail that may begin a
    # key ("s", "sk-…") waits.
    assert secrets.feed([Chunk("Hello there, ", text)]) == [Chunk("Hello there, ", text)]
    assert secrets.feed([Chunk("ask s", text)]) == [Chunk("ask ", text)]
    assert secrets.feed([Chunk("o", text)]) == [Chunk("so", text)]


@pytest.mark.anyio
@pytest.mark.parametrize("vendor", VENDORS, ids=lambda v: v.name)
async def test_every_reply_of_a_membrane_is_filtered_without_policies(vendor: Vendor) -> None:
    remember(KNOWN)
    reply = ScriptedReply.of(
        thinking(f"I see {KEY}."), f"Say {KNOWN} and {KEY} now.", delta_chars=3
    )
    with vendor.server(reply) as server:
        membrane = Membrane(vendor.provider(server), "native")
        request = Request(
            messages=[Message(participant="User", content="hi")],
            config=ModelConfig(model="m", max_tokens=100),
        )
        items = [item async for item in membrane.stream(request)]
    chunks = [item for item in items if isinstance(item, Chunk)]
    assert "".join(c.text for c in chunks if c.meta.visible) == f"Say {SPOKEN} and {SPOKEN} now."
    assert not any(leaked(c.text, KEY, KNOWN) for c in chunks)


def test_the_debug_folder_masks_a_key_split_over_deltas() -> None:
    outputs = [
        output_record(item)
        for item in (
            TextDelta("key sk-proj-Qw7e"),
            TextDelta("Rt5yUiOp3AsDfGh1JkLz and"),
            TextDelta(" more"),
            NativeStart("thinking"),
            NativeDelta("eyJhbGciOiJIUzI1NiJ9.ey"),
            NativeDelta("JzdWIiOiIxMjM0In0.Sfl"),
            NativeStop(),
        )
    ]
    mask_split_secrets(outputs)
    text = json.dumps(outputs)
    assert not leaked(text, KEY, JWT) and text.count(MASK) == 2
    untouched = [output_record(TextDelta("plain s")), output_record(TextDelta("k text"))]
    mask_split_secrets(untouched)
    assert [o["text"] for o in untouched] == ["plain s", "k text"]  # deltas as they came


def test_every_serve_event_is_redacted_where_it_is_made() -> None:
    remember(KNOWN)
    nested = {"block": {"input": {"a": [KEY]}, "content": JWT}, "who": KNOWN}
    sent = p.event("any.new.event", turn=1, **nested)
    assert not leaked(sent, KEY, JWT, KNOWN) and json.loads(sent)["type"] == "any.new.event"


def test_serve_remembers_its_token_and_its_log_masks_nested_values() -> None:
    token = "serve-token-remembered-0123"
    Server({"x": PipelineConfig()}, token=token)
    lines: list[str] = []
    JsonLog(lines.append)("turn_end", details={"said": f"{token} {KEY}"}, error=JWT)
    assert not leaked(lines[0], token, KEY, JWT)
    assert SHAPES.sub(f"a {KEY}", "K") == "a K"


@pytest.mark.anyio
async def test_everything_run_prints_is_redacted(tmp_path: Path) -> None:
    # A credential header's value with no key shape is not the stream's to find
    # (it is spoken); what run prints is redacted as a whole all the same.
    path = write_pipeline(tmp_path, "header", "Send x-api-key: opaqueValue123456 now.")
    printed: list[str] = []
    (result,) = await run_assistant(load_pipeline(path), prompt="hi", out=printed.append)
    assert "opaqueValue123456" in result.visible_text
    assert "x-api-key: ***" in "".join(printed) and "opaqueValue" not in "".join(printed)


def test_an_event_cut_to_its_size_limit_is_redacted_before_the_cut() -> None:
    # A cut that fell inside a key would leave a piece too short for its shape.
    for kept in range(10, 30, 3):  # how much of the key comes before the cut
        at = p.MAX_EVENT_BYTES - 95 - kept
        sent = p.event("log", turn=1, text="x" * at + f" {KEY} " + "y" * 1000)
        assert json.loads(sent)["truncated"] is True and not leaked(sent, KEY), kept
