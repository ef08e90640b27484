"""serve never sends an event a client cannot take: each is valid JSON of at most
``MAX_EVENT_BYTES`` (a quarter of the 1 MiB a websockets client accepts by
default), a longer one cut with a marker and ``"truncated": true``; and the
events queued for one client are bounded in size, not only in number. End to
end: an MCP server's 3 MB result and a model's 600,000-character thinking reach
a client with the default frame limit, which stays connected."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect

from tests.serve_helpers import GUARD_S, read_turn, send, start
from voice_membrane.server import Server
from voice_membrane.server.outbox import Outbox
from voice_membrane.server.protocol import MAX_EVENT_BYTES, bounded_event, event

ROOT = Path(__file__).resolve().parent.parent
CUT = re.compile(r"… \[([\d,]+) characters not sent\]$")


def size(text: str) -> int:
    return len(text.encode())


# ------------------------------------------------------------ one event

strings = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=400)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | strings,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(strings, inner, max_size=6),
    max_leaves=40,
)


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from(["text", "meta", "block", "x"]), json_values), st.data())
def test_any_event_fits_the_limit_and_stays_valid_json(
    fields: dict[str, Any], data: st.DataObject
) -> None:
    limit = data.draw(st.integers(200, 3000))
    fields = {"turn": 3, **fields}
    whole = json.dumps({"type": "log", **fields}, ensure_ascii=False, separators=(",", ":"))
    sent = bounded_event(whole, "log", fields, limit)
    assert size(sent) <= limit
    out = json.loads(sent)
    assert out["type"] == "log" and out["turn"] == 3
    if size(whole) <= limit:
        assert sent == whole
    else:
        assert out["truncated"] is True


def test_a_long_string_is_cut_with_how_much_is_missing() -> None:
    text = "é" * 300_000 + "\u0001" * 100_000  # 2 bytes each, then 6 escaped
    sent = event("log", turn=1, text=text, meta={"type": "thinking", "visible": False})
    assert size(sent) <= MAX_EVENT_BYTES
    out = json.loads(sent)
    assert out["truncated"] is True and out["meta"] == {"type": "thinking", "visible": False}
    found = CUT.search(out["text"])
    assert found is not None
    kept = out["text"][: found.start()]
    assert text.startswith(kept) and int(found.group(1).replace(",", "")) == len(text) - len(kept)


def test_a_great_many_short_strings_are_replaced_whole() -> None:
    block = {"type": "tool_call", "input": {f"k{n}": "v" * 20 for n in range(40_000)}}
    sent = event("block", turn=2, event="complete", block=block)
    out = json.loads(sent)
    assert size(sent) <= MAX_EVENT_BYTES and out["truncated"] is True
    assert out["turn"] == 2 and out["event"] == "complete"
    assert re.fullmatch(r"\[not sent: [\d,]+ bytes\]", out["block"])


def test_an_event_within_the_limit_is_unchanged() -> None:
    assert json.loads(event("transcript.delta", turn=1, text="Hi.")) == {
        "type": "transcript.delta",
        "turn": 1,
        "text": "Hi.",
    }


def test_the_queue_of_events_is_bounded_in_size() -> None:
    outbox = Outbox(max_audio=10, max_events=1000, max_event_chars=1_000_000)
    big = event("log", turn=1, text="x" * 200_000)
    assert all(outbox.put(big) for _ in range(4))
    assert not outbox.put(big) and outbox.overflowed  # 5 x 200 KB > 1 MB


# ------------------------------------------------------------ end to end


def write_pipeline(folder: Path) -> Path:
    """Chat-mode recording: 600,000 characters of thinking, a JSON call of the MCP
    server's ``big`` tool (3 MB), then the answer."""
    call = {"name": "big", "arguments": {"chars": 3_000_000}}
    lines = [
        {"format": "voice-membrane-replay", "version": 1, "mode": "chat"},
        {"t_ms": 0, "text": "<thinking>" + "hmm " * 150_000 + "</thinking>Let me look. "},
        {"t_ms": 1, "text": f"<tool_call>{json.dumps(call)}</tool_call>"},
        {"reply": 2},
        {"t_ms": 0, "text": "Done."},
    ]
    recording = folder / "big.jsonl"
    recording.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    command = [sys.executable, "-m", "voice_membrane.testing.mcp_weather"]
    path = folder / "big.toml"
    path.write_text(
        f'[llm]\nspec = "replay:{recording}"\nreplay_speed = 0\ntool_syntax = "json"\n'
        '[tts]\nspec = "espeak"\n[sink]\nkind = "null"\n'
        # The result is let through whole here: the event limit alone must hold.
        "[tools]\nmax_result_chars = 5000000\nmax_reply_result_chars = 5000000\n"
        f"[[tools.mcp]]\ncommand = {json.dumps(command)}\n"
        f"env = {{ PYTHONPATH = {json.dumps(str(ROOT))} }}\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.anyio
async def test_a_client_with_the_default_frame_limit_gets_the_whole_turn(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path)
    async with (
        Server([pipeline], port=0, preload=False, log=lambda *a, **k: None) as server,
        connect(server.ws_url) as ws,  # max_size: the default 1 MiB
    ):
        assert ws.protocol.max_message_size == 2**20
        await start(ws)
        await send(ws, type="user.message", text="Go.")
        with anyio.fail_after(GUARD_S * 2):
            log = await read_turn(ws)
        assert ws.close_code is None
    assert log.end["error"] is None and log.end["heard"] == "Let me look. Done."
    sizes = [size(json.dumps(e, ensure_ascii=False, separators=(",", ":"))) for e in log.events]
    assert max(sizes) <= MAX_EVENT_BYTES
    truncated = [e for e in log.events if e.get("truncated")]
    kinds = {
        (e["type"], (e.get("meta") or {}).get("type") or e.get("block_type")) for e in truncated
    }
    assert ("log", "thinking") in kinds and ("log", "tool_result") in kinds
    assert ("block", "thinking") in kinds and ("block", "tool_result") in kinds
