"""The page reconnects by itself when its socket drops: Debian's chromium against
an in-process server on the fake OpenAI API; the server cuts the connection
after a turn, the page says "reconnecting…", resumes the session with its token,
and the next turn's request carries the first turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.resume_helpers import KEY_ENV, serving, texts
from tests.test_browser_page import page, status, wait_for  # noqa: F401 (page: a fixture)
from voice_membrane.testing.script import ScriptedReply

pytestmark = pytest.mark.anyio
_TURN_OVER = "window.voiceMembrane.lastTurn?.turn === {n} && window.voiceMembrane.state === 'idle'"


async def test_the_page_resumes_after_the_server_cuts_its_connection(
    tmp_path: Path,
    page: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEY_ENV, "k")
    replies = (ScriptedReply.of("Hello, Ada."), ScriptedReply.of("You live in Paris."))
    async with serving(tmp_path, *replies) as (llm, server):
        with anyio.fail_after(60):  # a guard against a hang, not a timing check
            await page.goto(server.url + "/")
            await wait_for(page, "window.voiceMembrane.state === 'idle'")
            first = (await status(page))["session"]
            await page.fill("#message", "I live in Paris.")
            await page.press("#message", "Enter")
            await wait_for(page, _TURN_OVER.format(n=1))
            assert server._ws is not None
            for connection in list(server._ws.connections):
                connection.transport.abort()  # no closing handshake: a network drop
            await wait_for(page, "window.voiceMembrane.state === 'reconnecting'")
            assert await page.inner_text("#state") == "reconnecting…"
            await wait_for(
                page,
                "window.voiceMembrane.resumes === 1 && window.voiceMembrane.state === 'idle'",
            )
            assert (await status(page))["session"] == first
            assert "Reconnected" in await page.inner_text("#transcript")
            await page.fill("#message", "Where do I live?")
            await page.press("#message", "Enter")
            await wait_for(page, _TURN_OVER.format(n=2))
            reply = await page.inner_text('#transcript li.reply[data-turn="2"] .text')
            assert "Paris" in reply
    assert texts(llm.requests[1].body) == [
        ("user", "I live in Paris."),
        ("assistant", "Hello, Ada."),
        ("user", "Where do I live?"),
    ]
