"""Blob stores (content-addressed, atomic, no path traversal) and lazy resolution:
blob images are read when a request is built, only for the turns still kept,
concurrently within a bound, and a missing one is one error naming it and its
message, before any network call."""

from __future__ import annotations

import base64
import hashlib
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import anyio
import pytest

from voice_membrane.formats import get_formatter
from voice_membrane.membrane.membrane import Membrane
from voice_membrane.pipeline.build import build_parts
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.pipeline.history import EstimatedTokens
from voice_membrane.pipeline.session import Session
from voice_membrane.providers.anthropic import AnthropicProvider
from voice_membrane.providers.anthropic_request import request_params
from voice_membrane.sinks.null import NullSink
from voice_membrane.storage.blob_resolve import resolve_blobs
from voice_membrane.storage.blobs import (
    BlobError,
    BlobNotFound,
    BlobStore,
    FileBlobStore,
    MemoryBlobStore,
    sniff_image_type,
)
from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.testing.script import ScriptedReply
from voice_membrane.testing.silent_engine import SilentEngine
from voice_membrane.vocab.blob_source import BlobSource
from voice_membrane.vocab.messages import (
    Base64Source,
    GeneratedImageContent,
    ImageContent,
    Message,
    ModelConfig,
    Request,
    RequestError,
    ToolResultContent,
    ToolUseContent,
)

pytestmark = pytest.mark.anyio


def png(width: int = 2, height: int = 2, shade: int = 0) -> bytes:
    """A real PNG (8-bit grey), made here."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + bytes([shade] * width) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def stores(tmp_path: Path) -> list[BlobStore]:
    return [FileBlobStore(tmp_path / "blobs"), MemoryBlobStore()]


# ------------------------------------------------------------------ stores


@pytest.mark.parametrize("kind", ["file", "memory"])
async def test_a_store_keeps_bytes_under_their_hash(tmp_path: Path, kind: str) -> None:
    store = stores(tmp_path)[kind == "memory"]
    data = png()
    blob_id = await store.store(data, "image/png")
    assert blob_id == hashlib.sha256(data).hexdigest()
    assert await store.store(data, "image/png") == blob_id  # the same bytes: the same id
    assert await store.exists(blob_id)
    assert await store.load(blob_id) == data
    other = hashlib.sha256(b"other").hexdigest()
    assert not await store.exists(other)
    with pytest.raises(BlobNotFound, match=other):
        await store.load(other)


@pytest.mark.parametrize("kind", ["file", "memory"])
@pytest.mark.parametrize(
    "bad", ["../../etc/passwd", "A" * 64, "a" * 63, "a" * 65, "", "/" + "a" * 63, "a" * 62 + "/."]
)
async def test_a_malformed_id_is_refused(tmp_path: Path, kind: str, bad: str) -> None:
    store = stores(tmp_path)[kind == "memory"]
    with pytest.raises(BlobError, match="not a blob id"):
        await store.load(bad)
    with pytest.raises(BlobError, match="not a blob id"):
        await store.exists(bad)


@pytest.mark.parametrize("kind", ["file", "memory"])
async def test_a_bad_media_type_is_refused(tmp_path: Path, kind: str) -> None:
    store = stores(tmp_path)[kind == "memory"]
    with pytest.raises(BlobError, match="media type"):
        await store.store(b"x", "png")


async def test_the_file_store_lays_blobs_out_by_hash_and_leaves_no_temp_files(
    tmp_path: Path,
) -> None:
    store = FileBlobStore(tmp_path)
    data = png()
    blob_id = await store.store(data, "image/png")
    assert (tmp_path / blob_id[:2] / blob_id).read_bytes() == data
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [blob_id]


async def test_concurrent_stores_of_the_same_bytes_give_one_whole_blob(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path)
    data = os.urandom(256 * 1024)
    ids: list[str] = []

    async def put() -> None:
        ids.append(await store.store(data, "application/octet-stream"))

    async with anyio.create_task_group() as tg:
        for _ in range(16):
            tg.start_soon(put)
    assert len(set(ids)) == 1
    assert await store.load(ids[0]) == data
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [ids[0]]


async def test_a_write_that_fails_leaves_no_blob_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileBlobStore(tmp_path)

    def crash(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="No space"):
        await store.store(png(), "image/png")
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


async def test_a_damaged_blob_is_an_error_not_wrong_bytes(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path)
    blob_id = await store.store(png(), "image/png")
    store.path_of(blob_id).write_bytes(b"not the image")
    with pytest.raises(BlobError, match="damaged"):
        await store.load(blob_id)


def test_image_types_are_sniffed() -> None:
    assert sniff_image_type(png()) == "image/png"
    assert sniff_image_type(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert sniff_image_type(b"GIF89a...") == "image/gif"
    assert sniff_image_type(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff_image_type(b"hello") is None


def test_a_blob_source_is_a_third_image_source() -> None:
    blob_id = hashlib.sha256(b"x").hexdigest()
    image = ImageContent.model_validate(
        {"source": {"type": "blob", "blob_id": blob_id, "media_type": "image/png"}}
    )
    assert isinstance(image.source, BlobSource)
    with pytest.raises(ValueError, match="image/"):
        ImageContent(source=BlobSource(blob_id=blob_id, media_type="audio/wav"))
    with pytest.raises(ValueError, match="blob_id"):
        BlobSource(blob_id="../x", media_type="image/png")


# ------------------------------------------------------------------ resolution


def blob_image(blob_id: str, size: int | None = None) -> ImageContent:
    return ImageContent(source=BlobSource(blob_id=blob_id, media_type="image/png", size_bytes=size))


def request_of(*messages: Message) -> Request:
    return Request(messages=list(messages), config=ModelConfig(model="m"))


async def test_blob_images_are_read_into_the_request() -> None:
    store = MemoryBlobStore()
    data = png()
    blob_id = await store.store(data, "image/png")
    request = request_of(
        Message(
            participant="User",
            content=[blob_image(blob_id, len(data)), {"type": "text", "text": "what?"}],
        ),
        Message(participant="Assistant", content=[ToolUseContent(id="t1", name="look")]),
        Message(
            participant="User",
            content=[ToolResultContent(tool_use_id="t1", content=[blob_image(blob_id)])],
        ),
    )
    resolved = await resolve_blobs(request, store)
    first = resolved.messages[0].content[0]
    assert isinstance(first, ImageContent) and isinstance(first.source, Base64Source)
    assert base64.b64decode(first.source.data) == data
    result = resolved.messages[2].content[0]
    assert isinstance(result, ToolResultContent) and not isinstance(result.content, str)
    part = result.content[0]
    assert isinstance(part, ImageContent) and isinstance(part.source, Base64Source)
    assert store.loads == 1  # one blob used twice is read once
    assert isinstance(request.messages[0].content[0].source, BlobSource)  # type: ignore[union-attr]
    assert resolved.messages[1] is request.messages[1]


async def test_a_generated_image_kept_by_id_is_read_back_for_the_next_request() -> None:
    # The history keeps a generated image by its blob id (docs/images.md); the next
    # request carries its bytes.
    store = MemoryBlobStore()
    data = png()
    blob_id = await store.store(data, "image/png")
    request = request_of(
        Message(participant="User", content="draw a dot"),
        Message(participant="Assistant", content=[GeneratedImageContent(blob_id=blob_id)]),
        Message(participant="User", content="thanks"),
    )
    resolved = await resolve_blobs(request, store)
    image = resolved.messages[1].content[0]
    assert isinstance(image, GeneratedImageContent) and image.blob_id == blob_id
    assert image.data is not None and base64.b64decode(image.data) == data
    gone = request_of(
        Message(participant="Assistant", content=[GeneratedImageContent(blob_id="0" * 64)])
    )
    with pytest.raises(RequestError, match=r"messages\[0\].*content\[0\]"):
        await resolve_blobs(gone, store)


async def test_a_request_without_blobs_is_passed_as_is() -> None:
    request = request_of(Message(participant="User", content="hi"))
    assert await resolve_blobs(request, None) is request


async def test_a_missing_blob_names_its_id_and_message() -> None:
    store = MemoryBlobStore()
    missing = hashlib.sha256(b"gone").hexdigest()
    request = request_of(
        Message(participant="User", content="hi"),
        Message(participant="Assistant", content="hello"),
        Message(participant="Ann", content=[blob_image(missing)]),
    )
    with pytest.raises(RequestError) as caught:
        await resolve_blobs(request, store)
    message = str(caught.value)
    assert missing in message and "messages[2] (from 'Ann').content[0]" in message
    with pytest.raises(RequestError, match="no blob store"):
        await resolve_blobs(request, None)


async def test_a_size_that_does_not_match_is_refused() -> None:
    store = MemoryBlobStore()
    blob_id = await store.store(b"abc", "image/png")
    request = request_of(Message(participant="User", content=[blob_image(blob_id, 4)]))
    with pytest.raises(RequestError, match="holds 3 bytes, its reference says 4"):
        await resolve_blobs(request, store)


class CountingStore(MemoryBlobStore):
    """Counts how many loads run at once."""

    def __init__(self) -> None:
        super().__init__()
        self.running = self.most = 0

    async def load(self, blob_id: str) -> bytes:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            for _ in range(5):
                await anyio.sleep(0)
            return await super().load(blob_id)
        finally:
            self.running -= 1


async def test_blobs_are_read_concurrently_within_the_bound() -> None:
    store = CountingStore()
    ids = [await store.store(png(shade=n), "image/png") for n in range(7)]
    request = request_of(Message(participant="User", content=[blob_image(i) for i in ids]))
    await resolve_blobs(request, store, limit=3)
    assert store.most == 3 and store.loads == 7


def test_a_request_mapping_refuses_a_blob_never_read() -> None:
    blob_id = hashlib.sha256(b"x").hexdigest()
    request = request_of(Message(participant="User", content=[blob_image(blob_id)]))
    built = get_formatter("native").build(request)
    with pytest.raises(RequestError, match="was not read"):
        request_params(built, request.config)


async def test_a_missing_blob_fails_the_turn_with_one_line_before_any_call(
    tmp_path: Path,
) -> None:
    store = MemoryBlobStore()
    missing = hashlib.sha256(b"gone").hexdigest()
    with FakeAnthropic(ScriptedReply.of("Hi.")) as server:
        provider = AnthropicProvider(api_key="test-key-123", base_url=server.base_url)
        session = Session(Membrane(provider, blob_store=store), SilentEngine(), NullSink())
        async with session:
            result = await session.turn("look", attachments=(blob_image(missing),))
        assert server.requests == []
    assert result.error is not None and missing in result.error
    assert "messages[0] (from 'User').content[0]" in result.error
    assert "\n" not in result.error


# ------------------------------------------------------------------ sessions


async def test_a_sessions_images_go_to_the_provider_and_stay_in_its_history(
    tmp_path: Path,
) -> None:
    data = png(3, 2, shade=200)
    replies = [ScriptedReply.of("A grey square."), ScriptedReply.of("Still grey.")]
    with FakeAnthropic(*replies) as server:
        provider = AnthropicProvider(api_key="test-key-123", base_url=server.base_url)
        store = FileBlobStore(tmp_path / "blobs")
        session = Session(Membrane(provider), SilentEngine(), NullSink(), blob_store=store)
        assert session.membrane.blob_store is store
        async with session:
            image = await session.attach_image(data)
            first = await session.turn("What is this?", attachments=(image,))
            second = await session.turn("And now?")
        assert first.error is None and second.error is None
        sent = [request.body["messages"] for request in server.requests]
    for messages in sent:  # the image, in the first user message of both requests
        source = messages[0]["content"][0]["source"]
        assert source["media_type"] == "image/png"
        assert base64.b64decode(source["data"]) == data
    assert isinstance(image.source, BlobSource) and image.source.size_bytes == len(data)
    assert store.loads == 2  # read for each request, never kept in the history


async def test_only_the_turns_kept_after_trimming_have_their_blobs_read(tmp_path: Path) -> None:
    store = MemoryBlobStore()
    replies = [ScriptedReply.of("Noted.") for _ in range(7)]
    with FakeAnthropic(*replies) as server:
        provider = AnthropicProvider(api_key="test-key-123", base_url=server.base_url)
        session = Session(
            Membrane(provider),
            SilentEngine(),
            NullSink(),
            blob_store=store,
            context=EstimatedTokens(120),
        )
        async with session:
            images = [await session.attach_image(png(shade=n)) for n in range(6)]
            for n, image in enumerate(images):
                before = store.loads
                result = await session.turn(f"Picture {n}: " + "words " * 20, attachments=(image,))
                assert result.error is None
                fitted = result.report.context
                assert fitted is not None
                # Read: the blobs of the turns sent, not those of the turns dropped.
                assert store.loads - before == fitted.kept + 1
            assert fitted.dropped > 0
            # A dropped turn's blob is released from memory: it is never read again.
            assert not await store.exists(images[0].source.blob_id)  # type: ignore[union-attr]
            result = await session.turn("last")
        assert result.error is None
        assert len(server.requests) == 7


async def test_a_pipeline_file_names_its_blob_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-123")
    path = tmp_path / "p.toml"
    path.write_text('[llm]\nspec = "anthropic:claude-x"\n[blobs]\ndir = "media"\n')
    parts = build_parts(load_pipeline(path))
    assert isinstance(parts.blob_store, FileBlobStore)
    assert parts.blob_store.root == tmp_path / "media"
    assert parts.membrane.blob_store is parts.blob_store
    path.write_text('[llm]\nspec = "anthropic:claude-x"\n')
    assert isinstance(build_parts(load_pipeline(path)).membrane.blob_store, MemoryBlobStore)
