"""A voice turn that generates an image, end to end through ``run_assistant``
(what ``voice-membrane run`` runs) against the fakes: only the reply's text is
spoken, the image is saved to the pipeline's folder and its path printed, the
events log says where it went and never holds its data. And ``serve``'s side:
the image's ``log`` event."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import anyio
import pytest

from voice_membrane.cli.run import run_assistant
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.pipeline.images import ImageFolder, inline_url, save_image
from voice_membrane.server.turn_events import image_event
from voice_membrane.testing.fake_gemini import FakeGemini
from voice_membrane.testing.fake_openai import FakeOpenAI
from voice_membrane.testing.png import read_png, solid_png
from voice_membrane.testing.script import FINAL_RGB, ScriptedReply, image, text, tool_use
from voice_membrane.vocab.messages import GeneratedImageContent, GenerationInfo

pytestmark = pytest.mark.anyio
GUARD_S = 60
SAID = "Here is a red square. I hope you like it."


def pipeline(tmp_path: Path, llm: str, base_url: str, images: str) -> Path:
    path = tmp_path / "images.toml"
    path.write_text(
        f"""[llm]
spec = "{llm}"
base_url = "{base_url}"
api_key_env = "MY_KEY"
[tts]
spec = "espeak"
[sink]
kind = "null"
[images]
folder = "{tmp_path / "pictures"}"
{images}
""",
        encoding="utf-8",
    )
    return path


async def speak(config_path: Path, events: Path) -> tuple[str, list[dict[str, object]], str]:
    printed: list[str] = []
    with anyio.fail_after(GUARD_S):
        (result,) = await run_assistant(
            load_pipeline(config_path),
            prompt="Draw a red square.",
            events_jsonl=events,
            out=printed.append,
        )
    assert result.error is None
    spoken = " ".join(
        str(r["text"])
        for r in map(json.loads, events.read_text().splitlines())
        if r["event"] == "tts_input"
    )
    records = [json.loads(line) for line in events.read_text().splitlines()]
    assert spoken.split() == result.visible_text.split()
    return result.visible_text, records, "".join(printed)


def saved_image(printed: str, tmp_path: Path) -> Path:
    (line,) = [line for line in printed.splitlines() if line.startswith("image saved to ")]
    path = Path(line.removeprefix("image saved to ").split(" (")[0])
    assert path.parent == tmp_path / "pictures"
    return path


async def test_gemini_reply_with_an_image_speaks_only_its_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "fake-key")
    png = solid_png(20, 10, FINAL_RGB)
    reply = ScriptedReply.of(
        text("Here is a red square."), image(png), text(" I hope you like it.")
    )
    events = tmp_path / "events.jsonl"
    with FakeGemini(reply) as server:
        config = pipeline(tmp_path, "gemini:gemini-test", server.base_url, "model_output = true")
        visible, records, printed = await speak(config, events)
        asked = server.requests[0].body["generationConfig"]
    assert asked["responseModalities"] == ["TEXT", "IMAGE"]
    assert visible == SAID
    path = saved_image(printed, tmp_path)
    assert path.read_bytes() == png and read_png(path.read_bytes()) == (20, 10, FINAL_RGB)
    (record,) = [r for r in records if r["event"] == "image"]
    assert record["where"] == str(path) and record["mime_type"] == "image/png"
    assert record["bytes"] == len(png) and record["model"] == "gemini-test"
    encoded = base64.b64encode(png).decode()
    assert encoded not in events.read_text()  # the log says where, never holds the data
    assert not any(r["event"] == "tts_input" and "image" in str(r["text"]) for r in records)


async def test_openai_image_tool_in_a_voice_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "fake-key")
    replies = (
        ScriptedReply.of(
            text("Here is a red square."), tool_use("generate_image", {"prompt": "a red square"})
        ),
        ScriptedReply.of(image(revised_prompt="A flat red square.")),
        ScriptedReply.of(text(" I hope you like it.")),
    )
    events = tmp_path / "events.jsonl"
    with FakeOpenAI(*replies) as server:
        images = "\n".join(
            (
                'tool = "openai:gpt-image-1"',
                f'base_url = "{server.base_url}"',
                'api_key_env = "MY_KEY"',
                "partial_images = 1",
            )
        )
        config = pipeline(tmp_path, "openai:gpt-test", server.base_url, images)
        visible, records, printed = await speak(config, events)
        generation = server.requests[1].body
    assert generation["partial_images"] == 1 and generation["model"] == "gpt-image-1"
    assert visible == SAID
    path = saved_image(printed, tmp_path)
    assert read_png(path.read_bytes())[2] == FINAL_RGB  # the final image, not the partial
    assert "(a red square)" in printed
    (record,) = [r for r in records if r["event"] == "image"]
    assert record["revised_prompt"] == "A flat red square."
    assert [p.name for p in path.parent.iterdir()] == [path.name]


async def test_an_image_that_cannot_be_saved_is_said_and_the_turn_goes_on(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    data = base64.b64encode(solid_png(2, 2, (0, 0, 0))).decode()
    img = GeneratedImageContent(data=data, generation=GenerationInfo(prompt="p"))
    record = await save_image(ImageFolder(blocker / "sub"), 3, img)
    assert record["where"] is None and record["error"].startswith("not saved:")
    saved = await save_image(ImageFolder(tmp_path / "ok"), 4, img)
    again = await save_image(ImageFolder(tmp_path / "ok"), 5, img)
    assert saved["where"] != again["where"]  # never overwritten


async def test_serve_sends_an_image_as_a_log_event() -> None:
    data = base64.b64encode(solid_png(2, 2, (0, 0, 0))).decode()
    img = GeneratedImageContent(data=data, generation=GenerationInfo(prompt="a dot"))
    record = await save_image(inline_url, 2, img)
    event = json.loads(image_event(7, record))
    assert event["type"] == "log" and event["turn"] == 7
    assert event["meta"] == {"type": "image", "visible": False, "block_index": 2}
    assert event["image"]["url"] == f"data:image/png;base64,{data}"
    assert event["text"] == "[image] a dot"
    # Freshly stored, its bytes still at hand: the page shows it, and learns its id.
    stored = img.model_copy(update={"blob_id": "b-1"})
    event = json.loads(image_event(7, await save_image(inline_url, 2, stored)))
    assert event["image"]["url"] == f"data:image/png;base64,{data}"
    assert event["image"]["blob_id"] == "b-1"
    # Held by its id alone: the id only.
    by_id = GeneratedImageContent(blob_id="b-1", generation=GenerationInfo(prompt="a dot"))
    event = json.loads(image_event(7, await save_image(inline_url, 2, by_id)))
    assert event["image"]["url"] is None and event["image"]["blob_id"] == "b-1"
