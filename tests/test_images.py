"""Generated images through the Membrane against the fakes: Gemini image parts and
the OpenAI Images API behind the image tool. Partial images come in order before
the final one, the metadata is kept, the image is never a chunk (never spoken),
a configured store gets the final image and the history keeps its id."""

from __future__ import annotations

import base64
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from voice_membrane.formats import get_formatter
from voice_membrane.membrane.images import ImageTool
from voice_membrane.membrane.membrane import Membrane
from voice_membrane.membrane.reply import ImagePreview, MembraneItem, ReplyResult
from voice_membrane.parse.native import NativeBlockAssembler
from voice_membrane.providers.anthropic_request import request_params
from voice_membrane.providers.gemini import GeminiProvider
from voice_membrane.providers.openai import OpenAIProvider
from voice_membrane.providers.openai_images import OpenAIImages, image_event
from voice_membrane.testing.fake_gemini import FakeGemini
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.png import read_png, solid_png
from voice_membrane.testing.script import FINAL_RGB, ScriptedReply, image, text, tool_use
from voice_membrane.vendors.errors import ProviderError
from voice_membrane.vocab.events import Block, BlockComplete, BlockStart, Chunk
from voice_membrane.vocab.messages import (
    GeneratedImageContent,
    GenerationInfo,
    Message,
    ModelConfig,
    Request,
    RequestOptions,
)
from voice_membrane.vocab.provider_output import NativeDelta, NativeImage, NativeStart, NativeStop

pytestmark = pytest.mark.anyio
DRAW = tool_use("generate_image", {"prompt": "a red square", "size": "1024x1024"}, id="call_1")


def request(model: str, **options: Any) -> Request:
    return Request(
        messages=[{"participant": "User", "content": "Draw a red square."}],
        config=ModelConfig(model=model, max_tokens=200),
        options=RequestOptions(**options),
    )


class MemoryStore:
    """A blob store's ``store`` as the membrane's image store sees it."""

    def __init__(self) -> None:
        self.blobs: dict[str, tuple[bytes, str]] = {}

    async def store(self, data: bytes, media_type: str) -> str:
        blob_id = f"blob-{len(self.blobs) + 1}"
        self.blobs[blob_id] = (data, media_type)
        return blob_id


class Seen:
    """The image callbacks, in the order they were called."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def options(self) -> dict[str, Any]:
        return {
            "on_image_start": lambda index, prompt: self.calls.append(("start", prompt)),
            "on_image_preview": lambda img: self.calls.append(("preview", img)),
            "on_image": lambda img: self.calls.append(("image", img)),
        }


async def run(membrane: Membrane, req: Request, **options: Any) -> list[MembraneItem]:
    items: list[MembraneItem] = []
    with anyio.fail_after(30):
        async with aclosing(membrane.stream(req, **options)) as stream:
            async for item in stream:
                items.append(item)
    return items


def pixel(img: GeneratedImageContent) -> tuple[int, int, int]:
    return read_png(img.decoded())[2]


def spoken(items: list[MembraneItem]) -> str:
    return "".join(i.text for i in items if isinstance(i, Chunk) and i.meta.visible)


# ---------------------------------------------------------------- Gemini


async def test_gemini_image_part_is_an_image_block_never_spoken() -> None:
    png = solid_png(24, 12, FINAL_RGB)
    reply = ScriptedReply.of(text("Here is a red square."), image(png), text(" Enjoy."))
    store, seen = MemoryStore(), Seen()
    with FakeGemini(reply) as server:
        provider = GeminiProvider(api_key="fake-key", base_url=server.base_url)
        membrane = Membrane(provider, image_store=store.store)
        modalities = {"response_modalities": ["TEXT", "IMAGE"]}
        items = await run(
            membrane, request("gemini-test", provider_params=modalities), **seen.options()
        )
        await provider.aclose()
        sent = server.requests[0].body
    assert sent["generationConfig"]["responseModalities"] == ["TEXT", "IMAGE"]
    starts = [i.type for i in items if isinstance(i, BlockStart)]
    assert starts == ["text", "image", "text"]
    assert spoken(items) == "Here is a red square. Enjoy."
    assert all(not isinstance(i, Chunk) or i.meta.type != "image" for i in items)
    final = next(i.block.image for i in items if isinstance(i, BlockComplete) and i.block.image)
    assert read_png(final.decoded()) == (24, 12, FINAL_RGB)
    assert final.generation is not None and final.generation.model == "gemini-test"
    assert not final.is_preview
    # Stored: the callbacks get the bytes and the id; the history the id alone.
    assert store.blobs == {"blob-1": (png, "image/png")}
    assert final.blob_id == "blob-1"
    assert [kind for kind, _ in seen.calls] == ["start", "image"]
    result = items[-1]
    assert isinstance(result, ReplyResult)
    kept = [c for m in result.messages for c in m.content if isinstance(c, GeneratedImageContent)]
    assert kept == [GeneratedImageContent(blob_id="blob-1", generation=final.generation)]


async def test_gemini_image_without_a_store_stays_inline() -> None:
    reply = ScriptedReply.of(image(), text("Done."))
    with FakeGemini(reply) as server:
        provider = GeminiProvider(api_key="fake-key", base_url=server.base_url)
        items = await run(Membrane(provider), request("gemini-test"))
        await provider.aclose()
    result = items[-1]
    assert isinstance(result, ReplyResult) and result.text == "Done."
    (kept,) = [
        c for m in result.messages for c in m.content if isinstance(c, GeneratedImageContent)
    ]
    assert kept.blob_id is None and pixel(kept) == FINAL_RGB


# ---------------------------------------------------------------- OpenAI


def openai_membrane(server: FakeOpenAI, partials: int = 2, **options: Any) -> Membrane:
    images = OpenAIImages(api_key="fake-key", base_url=server.base_url, partial_images=partials)
    provider = OpenAIProvider(api_key="fake-key", base_url=server.base_url)
    return Membrane(provider, image_tool=ImageTool(images), **options)


async def test_openai_image_tool_streams_partials_in_order_then_the_final_image() -> None:
    replies = (
        ScriptedReply.of(text("Let me draw it."), DRAW),
        ScriptedReply.of(image(revised_prompt="A flat red square."), delta_delay_s=0.01),
        ScriptedReply.of(text("Here is your red square.")),
    )
    seen = Seen()
    with FakeOpenAI(*replies) as server:
        membrane = openai_membrane(server)
        items = await run(membrane, request("gpt-test"), **seen.options())
        await membrane.provider.aclose()
        assert membrane.image_tool is not None
        await membrane.image_tool.generator.aclose()
        first, generation, second = (r.body for r in server.requests)
    # The tool is offered to the chat model; the Images API is asked to stream.
    assert [t["function"]["name"] for t in first["tools"]] == ["generate_image"]
    assert generation["model"] == "gpt-image-1" and generation["stream"] is True
    assert generation["partial_images"] == 2 and generation["prompt"] == "a red square"
    # The model reads a line of text back, never the image.
    (tool_message,) = [m for m in second["messages"] if m["role"] == "tool"]
    assert "revised prompt: A flat red square." in tool_message["content"]
    assert "base64" not in str(second["messages"]) and len(str(second)) < 4000

    start, p1, p2, done = [i for i in items if _is_image_item(i)]
    assert isinstance(start, BlockStart) and start.prompt == "a red square"
    assert isinstance(p1, ImagePreview) and isinstance(p2, ImagePreview)
    assert p1.index == p2.index == start.index
    assert [pixel(p.image) for p in (p1, p2)] == [(60, 60, 60), (100, 100, 100)]
    assert p1.image.is_preview and p2.image.is_preview
    assert isinstance(done, BlockComplete) and done.block.image is not None
    final = done.block.image
    assert pixel(final) == FINAL_RGB and not final.is_preview
    assert final.generation is not None
    assert final.generation.model_dump() == {
        "prompt": "a red square",
        "revised_prompt": "A flat red square.",
        "model": "gpt-image-1",
        "size": "1024x1024",
        "quality": "medium",
    }
    assert [kind for kind, _ in seen.calls] == ["start", "preview", "preview", "image"]
    assert seen.calls[0] == ("start", "a red square")
    assert spoken(items) == "Let me draw it.Here is your red square."
    result = items[-1]
    assert isinstance(result, ReplyResult) and result.tool_rounds == 1


async def test_openai_image_failure_is_the_calls_error_and_the_reply_goes_on() -> None:
    replies = (
        ScriptedReply.of(DRAW),
        ScriptedReply.http_error(400, message="Your request was rejected by the safety system."),
        ScriptedReply.of(text("I could not draw that.")),
    )
    with FakeOpenAI(*replies) as server:
        membrane = openai_membrane(server)
        items = await run(membrane, request("gpt-test"))
        await membrane.provider.aclose()
        last = server.requests[-1].body
    (tool_message,) = [m for m in last["messages"] if m["role"] == "tool"]
    assert "image generation failed" in tool_message["content"]
    assert "safety system" in tool_message["content"]
    assert not any(isinstance(i, ImagePreview) for i in items)
    assert spoken(items) == "I could not draw that."


async def test_openai_images_generate_alone_and_errors() -> None:
    with FakeOpenAI(ScriptedReply.of(image()), ScriptedReply.http_error(401)) as server:
        images = OpenAIImages(api_key="fake-key", base_url=server.base_url, partial_images=1)
        outputs = [o async for o in images.generate("a cat", quality="low")]
        with pytest.raises(ProviderError) as caught:
            async for _ in images.generate("a dog"):
                pass
        await images.aclose()
        assert server.requests[0].body["quality"] == "low"
    kinds = [type(o).__name__ for o in outputs]
    assert kinds == ["NativeStart", "NativeImage", "NativeImage", "NativeStop"]
    assert caught.value.kind == "auth" and "fake-key" not in str(caught.value)
    with pytest.raises(ValueError, match="partial_images"):
        OpenAIImages(partial_images=4)


def test_image_event_drops_what_is_not_an_image() -> None:
    good = {"type": "image_generation.completed", "b64_json": base64.b64encode(b"x").decode()}
    assert image_event(good, "p", "m") is not None
    assert image_event({**good, "b64_json": "not base64!"}, "p", "m") is None
    assert image_event({**good, "type": "image_generation.other"}, "p", "m") is None
    assert image_event({**good, "b64_json": 7}, "p", "m") is None


# ---------------------------------------------------------------- the assembler


def test_an_image_block_has_no_chunks_and_text_in_it_is_stray() -> None:
    png = base64.b64encode(solid_png(2, 2, (1, 2, 3))).decode()
    preview = GeneratedImageContent(data=png, is_preview=True)
    final = GeneratedImageContent(data=png)
    assembler = NativeBlockAssembler()
    events = []
    for item in (
        NativeImage(preview),  # no start: the image opens its block
        NativeDelta("secret base64 text"),
        NativeImage(final),
        NativeStop(),
        NativeStart("text"),
        NativeDelta("Said."),
        NativeStop(),
    ):
        events += assembler.feed(item)
    events += assembler.flush()
    assert events[0] == BlockStart(0, "image")
    assert events[1] == BlockComplete(0, _image_block(final))
    visible = [e.text for e in events if isinstance(e, Chunk) and e.meta.visible]
    assert visible == ["Said."]
    hidden = [e for e in events if isinstance(e, Chunk) and not e.meta.visible]
    assert [e.text for e in hidden] == ["secret base64 text"]


def _image_block(img: GeneratedImageContent) -> Block:
    return Block("image", image=img)


def _is_image_item(item: MembraneItem) -> bool:
    if isinstance(item, BlockStart):
        return item.type == "image"
    if isinstance(item, BlockComplete):
        return item.block.type == "image"
    return isinstance(item, ImagePreview)


def test_generated_image_needs_data_or_a_blob() -> None:
    with pytest.raises(ValueError, match="data or a blob_id"):
        GeneratedImageContent()
    ref = GeneratedImageContent(blob_id="b1")
    with pytest.raises(ValueError, match="b1"):
        ref.base64_data("messages[0].content[0]")


def test_anthropic_is_told_in_words_of_an_image_the_assistant_generated() -> None:
    # The Messages API takes images only from the user: a generated image in the
    # assistant's turn (the history after the image tool ran) is said in words.
    image = GeneratedImageContent(
        data="iVBORw0KGgo=", generation=GenerationInfo(prompt="a red kite")
    )
    request = Request(
        messages=[
            Message(participant="User", content="Draw a kite."),
            Message(participant="Assistant", content=[image]),
            Message(participant="User", content="Nice."),
        ],
        config=ModelConfig(model="m"),
    )
    params = request_params(get_formatter("native").build(request), request.config)
    assistant = params["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == [{"type": "text", "text": "(image generated: a red kite)"}]
