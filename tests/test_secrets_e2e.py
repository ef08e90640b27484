"""No secret leaves the process, end to end: a model (the fake Anthropic server)
that repeats the server's own key, the serve token, the TTS key, a bearer token
from a tool's result (the MCP test server's ``whoami``) and keys of every vendor's
shape and a JWT — all split over many deltas, in its thinking, its text, after
a tool call — gets none of them to a client event, the server's log, the voice
(the fake OpenAI speech server's input), the events file, the debug folder, or
``run``'s stdout and stderr. What was said in their place is "a key"."""

from __future__ import annotations

import json
import random
import string
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from serve_helpers import GUARD_S, read_turn, send, start
from websockets.asyncio.client import connect

from voice_membrane.cli.main import main
from voice_membrane.infra.redact import KEY_VARIABLES, forget_all
from voice_membrane.server import Server
from voice_membrane.server.log import JsonLog
from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.testing.fake_openai_speech import FakeOpenAISpeech
from voice_membrane.testing.script import ScriptedReply, thinking, tool_use

_R = random.Random(23)


def _chars(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(_R.choice(alphabet) for _ in range(n))


SERVER_KEY = "srv-own-llm-key-" + _chars(20)  # the server's LLM key, no known shape
TTS_KEY = "tts-own-key-" + _chars(20)  # the voice's key (OPENAI_API_KEY), no shape
SERVE_TOKEN = "serve-token-" + _chars(20)
TOOL_TOKEN = "opaque" + _chars(26)  # after "Authorization: Bearer" in a tool's result
BASIC = "dXNlcjpwYXNzd29yZDEyMw=="  # after "Basic": user:password123
SHAPED = {
    "anthropic": "sk-ant-api03-" + _chars(93, string.ascii_letters + string.digits + "-_") + "AA",
    "anthropic admin": "sk-ant-admin01-" + _chars(93, string.ascii_letters + "-_") + "AA",
    "openai project": "sk-proj-" + _chars(156, string.ascii_letters + string.digits + "-_"),
    "openai service": "sk-svcacct-" + _chars(120),
    "openai legacy": "sk-" + _chars(48),
    "gemini": "AIzaSy" + _chars(33, string.ascii_letters + string.digits + "-_"),
    "elevenlabs": "sk_" + _chars(48, "0123456789abcdef"),
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6Ikpv"
    "aG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
}
SECRETS = [SERVER_KEY, TTS_KEY, SERVE_TOKEN, TOOL_TOKEN, BASIC, *SHAPED.values()]
STDIO = f'command = ["{sys.executable}", "-m", "voice_membrane.testing.mcp_weather"]'


def replies() -> tuple[ScriptedReply, ScriptedReply]:
    shaped = " ".join(SHAPED.values())
    first = ScriptedReply.of(
        thinking(f"I hold {SERVER_KEY} and {SERVE_TOKEN}; also {shaped}."),
        f"Keys: {shaped}. {SERVER_KEY}, {SERVE_TOKEN}.",
        tool_use("whoami", {}),
        tool_use("get_weather", {"city": f"Paris {SERVER_KEY} {SHAPED['openai project']}"}),
        delta_chars=5,  # every key arrives in pieces
    )
    second = ScriptedReply.of(
        f"It said Authorization: Bearer {TOOL_TOKEN}. Basic {BASIC}, {TTS_KEY}.",
        delta_chars=3,
    )
    return first, second


def leaks(text: str) -> list[str]:
    """Which secrets show in ``text`` — any 12 characters of one."""
    return [s for s in SECRETS if any(s[i : i + 12] in text for i in range(len(s) - 11))]


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MY_ANTHROPIC_KEY", SERVER_KEY)
    forget_all()
    yield
    forget_all()


def pipeline(folder: Path, llm: FakeAnthropic) -> Path:
    path = folder / "leaky.toml"
    path.write_text(
        f"""[llm]
spec = "anthropic:claude-test"
formatter = "native"
api_key_env = "MY_ANTHROPIC_KEY"
base_url = "{llm.base_url}"
[tts]
spec = "openai:alloy"
[sink]
kind = "null"
[[tools.mcp]]
name = "who"
{STDIO}
env = {{MCP_WEATHER_WHO = "Authorization: Bearer {TOOL_TOKEN}"}}
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.anyio
async def test_serve_sends_no_secret_to_the_client_the_voice_or_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[str] = []
    frames: list[str] = []
    with FakeAnthropic(*replies()) as llm, FakeOpenAISpeech(api_key=TTS_KEY) as voice:
        for name, value in voice.env().items():
            monkeypatch.setenv(name, value)
        server = Server(
            [pipeline(tmp_path, llm)], port=0, token=SERVE_TOKEN, log=JsonLog(lines.append)
        )
        async with server, connect(server.ws_url) as ws:
            await start(ws, token=SERVE_TOKEN)
            await send(ws, type="user.message", text=f"Say every key. Mine is {SERVE_TOKEN}.")
            turn = await read_turn(ws)
            frames = [json.dumps(event, ensure_ascii=False) for event in turn.events]
            await send(ws, type="session.end")
            with anyio.fail_after(GUARD_S):
                async for _ in ws:
                    pass
        spoken = voice.text_received()
        sent = [request.body for request in llm.requests]
    assert len(sent) == 2, "the tool ran and its result went back"
    end = turn.end
    assert end["error"] is None, end
    for where, text in [("events", "\n".join(frames)), ("voice", spoken), ("log", "".join(lines))]:
        assert leaks(text) == [], f"{where}: {leaks(text)}"
    # The voice said "a key" where a key was, and the client heard and saw the same.
    assert spoken.count("a key") == len(SHAPED) + 5
    assert "a key" in end["heard"] and end["heard"].split() == end["visible"].split()
    tool_result = next(
        e["block"]
        for e in turn.of("block")
        if e["event"] == "complete" and e["block_type"] == "tool_result"
    )
    assert tool_result["content"] == "Authorization: Bearer ***"
    # The tools were handed no key; the model is sent a tool's result as the tool
    # wrote it (it may need it; it is not spoken).
    results = [
        block["content"][0]["text"] if isinstance(block["content"], list) else block["content"]
        for message in sent[1]["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert results == [f"Authorization: Bearer {TOOL_TOKEN}", "Paris *** ***: sunny, high of 21 °C"]


def test_run_writes_no_secret_to_stdout_stderr_the_events_file_or_the_debug_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    events, debug, metrics = tmp_path / "events.jsonl", tmp_path / "debug", tmp_path / "m.json"
    monkeypatch.setenv("VOICE_MEMBRANE_TOKEN", SERVE_TOKEN)  # serve's token, by its variable
    with FakeAnthropic(*replies()) as llm, FakeOpenAISpeech(api_key=TTS_KEY) as voice:
        for name, value in voice.env().items():
            monkeypatch.setenv(name, value)
        main(
            [
                "run",
                "--pipeline",
                str(pipeline(tmp_path, llm)),
                "--prompt",
                "Say every key.",
                "--events-jsonl",
                str(events),
                "--debug-dir",
                str(debug),
                "--metrics-json",
                str(metrics),
                "--show-hidden",
            ]
        )
        spoken = voice.text_received()
    said = capsys.readouterr()
    files = sorted(p for p in debug.rglob("*") if p.is_file())
    assert len([p for p in files if "call" in p.name]) == 2
    outputs = {
        "stdout": said.out,
        "stderr": said.err,
        "voice": spoken,
        "events file": events.read_text(encoding="utf-8"),
        "metrics": metrics.read_text(encoding="utf-8"),
        **{f"debug {p.name}": p.read_text(encoding="utf-8", errors="replace") for p in files},
    }
    for path in files:  # a reply's deltas, each too short to hold a key, joined
        if "call" in path.name:
            record = json.loads(path.read_text(encoding="utf-8"))
            deltas = record["response"]["outputs"]
            outputs[f"deltas of {path.name}"] = "".join(d.get("text") or "" for d in deltas)
    for where, text in outputs.items():
        assert leaks(text) == [], f"{where}: {leaks(text)}"
    assert "a key" in said.out and "[tool_result] Authorization: Bearer ***" in said.out
