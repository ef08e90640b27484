"""`voice-membrane run --debug-dir`: every provider call of a turn written down,
images moved to blobs, no key of any vendor anywhere; and `run --image`: a blob
image in the conversation reaches the provider as its real bytes."""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from vendors import VENDORS, Vendor

from voice_membrane.infra.redact import MASK
from voice_membrane.pipeline.debug_dir import DebugDir, scrub
from voice_membrane.storage.blobs import FileBlobStore, MemoryBlobStore
from voice_membrane.storage.debug_sanitize import REF, restore_from_storage
from voice_membrane.testing.fake_elevenlabs import FakeElevenLabs
from voice_membrane.testing.script import ScriptedReply, text, thinking
from voice_membrane.vocab.provider_output import StopInfo, TextDelta

CLI = [sys.executable, "-m", "voice_membrane.cli"]
ANSWER = "It is a square of grey noise."
BASE_VARS = (
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "ELEVENLABS_BASE_URL",
)
PLANTED = {
    "ANTHROPIC_API_KEY": "sk-ant-PLANTED-anthropic-4f1c9e",
    "OPENAI_API_KEY": "sk-PLANTED-openai-7d2b8a",
    "GEMINI_API_KEY": "AIzaPLANTED-gemini-3e5f6a",
    "ELEVENLABS_API_KEY": "xiPLANTED-elevenlabs-9c0d1b",
}


def noise_png(side: int = 128) -> bytes:
    """A real PNG that does not compress: its base64 is over the 10 KiB threshold."""
    rng = random.Random(7)
    rows = b"".join(b"\x00" + bytes(rng.randrange(256) for _ in range(side)) for _ in range(side))
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **env}
    for name in BASE_VARS:
        if name not in env:
            full_env.pop(name, None)
    return subprocess.run(
        [*CLI, "run", *args], env=full_env, capture_output=True, text=True, timeout=120
    )


def sent_image(vendor: str, body: dict[str, Any]) -> bytes:
    """The image bytes a fake server received, from its vendor's wire shape."""
    if vendor == "anthropic":
        return base64.b64decode(body["messages"][0]["content"][0]["source"]["data"])
    if vendor == "openai":
        url = body["messages"][1]["content"][0]["image_url"]["url"]
        assert url.startswith("data:image/png;base64,")
        return base64.b64decode(url.partition(",")[2])
    part = body["contents"][0]["parts"][0]
    data = (part.get("inlineData") or part["inline_data"])["data"]
    return base64.urlsafe_b64decode(data)  # google-genai sends bytes URL-safe


@pytest.mark.parametrize("vendor", VENDORS, ids=[v.name for v in VENDORS])
def test_run_sends_a_blob_image_and_writes_calls_without_any_key(
    tmp_path: Path, vendor: Vendor
) -> None:
    image = noise_png()
    (tmp_path / "noise.png").write_bytes(image)
    secrets = " ".join(PLANTED.values())  # in the request (the system prompt) and the reply
    pipeline = tmp_path / "p.toml"
    pipeline.write_text(
        f'[llm]\nspec = "{vendor.name}:{vendor.model}"\nformatter = "native"\n'
        f'system_prompt = "Describe images. {secrets}"\n'
        '[tts]\nspec = "elevenlabs-http:fake-voice"\n'
        f'[sink]\nkind = "wav"\npath = "{tmp_path / "a.wav"}"\n'
        '[blobs]\ndir = "media"\n',
        encoding="utf-8",
    )
    reply = ScriptedReply.of(thinking(f"The key is {secrets}."), text(ANSWER), delta_chars=8)
    with vendor.server(reply) as llm, FakeElevenLabs(api_key=PLANTED["ELEVENLABS_API_KEY"]) as tts:
        env = {**llm.env(), **tts.env(), **PLANTED}
        if vendor.name == "gemini":
            env["GOOGLE_API_KEY"] = PLANTED["GEMINI_API_KEY"]
        done = run_cli(
            [
                "--pipeline",
                str(pipeline),
                "--image",
                str(tmp_path / "noise.png"),
                "--debug-dir",
                str(tmp_path / "debug"),
                "--events-jsonl",
                str(tmp_path / "e.jsonl"),
                "--metrics-json",
                str(tmp_path / "m.json"),
                "--show-hidden",
                "--prompt",
                "What is in this picture?",
            ],
            env,
        )
        assert done.returncode == 0, done.stderr
        [request] = llm.requests
    # The provider received the real bytes of the blob image.
    assert sent_image(vendor.name, request.body) == image
    media = FileBlobStore(tmp_path / "media")
    [kept] = [p for p in (tmp_path / "media").rglob("*") if p.is_file()]
    assert kept.read_bytes() == image and media.path_of(kept.name) == kept
    # The keys were in what went over the wire, so redaction had work to do.
    assert PLANTED["OPENAI_API_KEY"] in json.dumps(request.body)
    # One file per call, the turn's report beside it.
    debug = tmp_path / "debug"
    names = sorted(p.name for p in debug.iterdir() if p.is_file())
    assert names == ["turn-001-call-01.json", "turn-001-report.json"]
    call = json.loads((debug / "turn-001-call-01.json").read_text(encoding="utf-8"))
    assert call["provider"] == vendor.name and call["response"]["ended"] == "complete"
    assert any(o["type"] == "StopInfo" for o in call["response"]["outputs"])
    report = json.loads((debug / "turn-001-report.json").read_text(encoding="utf-8"))
    assert report == json.loads((tmp_path / "m.json").read_text(encoding="utf-8"))
    # The image is a blob reference in the file, and restores to the bytes sent.
    refs = _refs(call["request"])
    assert len(refs) == 1 and refs[0]["mediaType"] == "image/png"
    restored = anyio.run(restore_from_storage, call["request"], FileBlobStore(debug / "blobs"))
    assert _contains_bytes(restored, image)
    # No planted value in any file written or any output.
    inputs = {pipeline, tmp_path / "noise.png"}  # what the test wrote (keys in the prompt)
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p not in inputs]
    for path in [*written, None]:
        content = done.stdout + done.stderr if path is None else path.read_bytes().decode("latin-1")
        for name, value in PLANTED.items():
            assert value not in content, f"{name} in {path or 'the output'}"
    assert MASK in json.dumps(call)


def _refs(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return ([value] if REF in value else []) + [r for v in value.values() for r in _refs(v)]
    if isinstance(value, list):
        return [r for v in value for r in _refs(v)]
    return []


def _contains_bytes(value: Any, data: bytes) -> bool:
    text = json.dumps(value)
    return any(
        encode(data).decode() in text for encode in (base64.b64encode, base64.urlsafe_b64encode)
    )


def test_secrets_are_masked_by_key_name_and_by_value(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in PLANTED.items():
        monkeypatch.setenv(name, value)
    record = {
        "headers": {
            "Authorization": "Bearer abc.def.ghi",
            "x-api-key": "short",
            "xi-api-key": "x",
            "X-Goog-Api-Key": "y",
        },
        "api_key": "anything",
        "apiKey": "anything",
        "note": f"keys {' '.join(PLANTED.values())} and Authorization: Bearer tok-123456789",
        "url": "https://user:pw@example.com/v1?key=abc123",
        "max_tokens": 10,
        "list": [{"access_token": "t"}],
    }
    scrubbed = scrub(record)
    text = json.dumps(scrubbed)
    for value in [*PLANTED.values(), "abc.def.ghi", "short", "tok-123456789", "pw@", "abc123"]:
        assert value not in text
    assert scrubbed["headers"]["xi-api-key"] == MASK and scrubbed["api_key"] == MASK
    assert scrubbed["max_tokens"] == 10 and scrubbed["list"][0]["access_token"] == MASK
    assert record["api_key"] == "anything"  # the input is not changed


@pytest.mark.anyio
async def test_a_call_that_fails_or_is_closed_is_still_written(tmp_path: Path) -> None:
    from voice_membrane.formats import get_formatter
    from voice_membrane.vendors.errors import ProviderError
    from voice_membrane.vocab.messages import Message, ModelConfig, Request

    class Failing:
        name = "failing"

        async def start(self) -> None: ...

        async def aclose(self) -> None: ...

        async def stream(self, built: Any, config: Any, *, streaming: bool = True) -> Any:
            yield TextDelta("Hel")
            raise ProviderError("failing", "connection", "dropped")

    debug = DebugDir(tmp_path, MemoryBlobStore())
    debug.open()
    debug.start_turn()
    provider = debug.wrap(Failing())  # type: ignore[arg-type]
    request = Request(
        messages=[Message(participant="User", content="hi")], config=ModelConfig(model="m")
    )
    built = get_formatter("native").build(request)
    with pytest.raises(ProviderError):
        async for _ in provider.stream(built, request.config):
            pass
    stream = provider.stream(built, request.config)
    assert await anext(stream) == TextDelta("Hel")
    await stream.aclose()
    first = json.loads((tmp_path / "turn-001-call-01.json").read_text())
    second = json.loads((tmp_path / "turn-001-call-02.json").read_text())
    assert first["response"]["ended"].startswith("error: ProviderError: failing: connection")
    assert first["response"]["outputs"] == [{"type": "TextDelta", "text": "Hel"}]
    assert second["response"]["ended"] == "closed"
    assert first["request"]["built"]["messages"][0]["role"] == "user"  # no request_body
    assert StopInfo  # (imported for the reader: a complete call ends with one)


def test_a_bad_image_or_debug_folder_stops_run_before_anything(tmp_path: Path) -> None:
    from functools import partial

    from voice_membrane.cli.run import resolve_config, run_assistant
    from voice_membrane.pipeline.config import SHIPPED_PIPELINES as PIPELINES
    from voice_membrane.pipeline.config import ConfigError

    config = resolve_config(PIPELINES / "replay.toml", out=str(tmp_path / "a.wav"))
    (tmp_path / "x.txt").write_text("not an image")
    lines: list[str] = []
    for images, problem in (
        ([tmp_path / "x.txt"], r"x\.txt: not a PNG, JPEG, GIF or WebP image"),
        ([tmp_path / "missing.png"], "missing.png: No such file or directory"),
    ):
        with pytest.raises(ConfigError, match=problem):
            anyio.run(partial(run_assistant, config, prompt="hi", images=images, out=lines.append))
    (tmp_path / "file").write_text("")
    blocked = config.with_overrides({"debug": {"dir": str(tmp_path / "file" / "debug")}})
    with pytest.raises(ConfigError, match=r"debug dir .*: Not a directory"):
        anyio.run(partial(run_assistant, blocked, prompt="hi", out=lines.append))
    assert lines == []  # nothing started


def test_the_debug_folder_of_a_pipeline_file_is_relative_to_it(tmp_path: Path) -> None:
    from voice_membrane.cli.run import resolve_config
    from voice_membrane.pipeline.config import load_pipeline

    path = tmp_path / "p.toml"
    path.write_text('[debug]\ndir = "calls"\n[blobs]\ndir = "../media"\n')
    config = load_pipeline(path)
    assert config.debug.dir == str(tmp_path / "calls")
    assert config.blobs.dir == str((tmp_path / ".." / "media").resolve())
    flagged = resolve_config(path, debug_dir="elsewhere")
    assert flagged.debug.dir == str(Path("elsewhere").resolve())
