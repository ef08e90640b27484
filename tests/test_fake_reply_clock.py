"""The LLM fakes time a streamed reply from the request's arrival: their own
handling after it (here a slow ``take_reply``, as a busy fake's loop would be)
is inside the scripted TTFT, not added to it, so a benchmark against a fake
under load does not count the fake's slowness as the client's."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest

from voice_membrane.testing import fake_anthropic, fake_gemini, fake_openai
from voice_membrane.testing.fake_server import FakeServer, ReplyClock
from voice_membrane.testing.script import ScriptedReply

HANDLING_S = 0.3  # the fake's own work between the request's arrival and its stream


def openai_call(server: Any) -> tuple[str, dict[str, str], dict[str, Any]]:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    return server.base_url + "/chat/completions", {"authorization": "Bearer k"}, body


def anthropic_call(server: Any) -> tuple[str, dict[str, str], dict[str, Any]]:
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    }
    return server.origin + "/v1/messages", {"x-api-key": "k"}, body


def gemini_call(server: Any) -> tuple[str, dict[str, str], dict[str, Any]]:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    url = server.origin + "/v1beta/models/m:streamGenerateContent?alt=sse"
    return url, {"x-goog-api-key": "k"}, body


CASES = [
    (fake_openai, fake_openai.FakeOpenAI, openai_call),
    (fake_anthropic, fake_anthropic.FakeAnthropic, anthropic_call),
    (fake_gemini, fake_gemini.FakeGemini, gemini_call),
]


@pytest.mark.parametrize(("module", "fake", "call"), CASES, ids=["openai", "anthropic", "gemini"])
def test_the_ttft_counts_from_the_requests_arrival(
    module: ModuleType, fake: type[FakeServer], call: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    arrivals: list[float] = []
    handled: list[float] = []

    class Recorded(ReplyClock):
        def __init__(self, arrived: float) -> None:
            arrivals.append(arrived)
            super().__init__(arrived)

    original = FakeServer.take_reply

    async def slow_take_reply(self: FakeServer, *args: Any) -> Any:
        await anyio.sleep(HANDLING_S)
        handled.append(anyio.current_time())
        return await original(self, *args)

    monkeypatch.setattr(module, "ReplyClock", Recorded)
    monkeypatch.setattr(FakeServer, "take_reply", slow_take_reply)
    with fake(ScriptedReply.of("Hello there.", ttft_s=0.5)) as server:
        url, headers, body = call(server)
        with httpx.stream("POST", url, headers=headers, json=body, timeout=10) as response:
            assert response.status_code == 200
            text = "".join(response.iter_text())
    assert "Hello" in text
    # The clock was set before the fake's own handling, not when its stream began.
    assert len(arrivals) == len(handled) == 1
    assert handled[0] - arrivals[0] >= HANDLING_S
