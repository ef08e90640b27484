"""Tool results are cut before the model, the history or any event sees them:
each to ``max_tool_result_chars``, and one reply's results together to
``max_reply_tool_result_chars``, ending with a marker the model reads that says
how much was cut. For every source of results (Python functions, MCP servers),
text and JSON, one huge result and many medium ones, through each vendor's
fake server in chat mode and the XML prefill loop."""

from __future__ import annotations

import itertools
import json
import re
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from vendors import VENDORS, Vendor

from voice_membrane.membrane.membrane import Membrane
from voice_membrane.membrane.tool_limits import ResultBudget
from voice_membrane.membrane.tools import tool_handler
from voice_membrane.membrane.tools_mcp import McpServer, McpToolbox
from voice_membrane.pipeline.tools_config import ToolsConfig
from voice_membrane.providers.anthropic import AnthropicProvider
from voice_membrane.testing.fake_anthropic import FakeAnthropic
from voice_membrane.testing.script import ScriptedReply, text, tool_use
from voice_membrane.vocab.events import Block, Chunk
from voice_membrane.vocab.messages import (
    Base64Source,
    ImageContent,
    Message,
    ModelConfig,
    Request,
    TextContent,
    ToolDefinition,
    ToolResultContent,
)

MARKER = re.compile(
    r"\n\[tool result cut here: ([\d,]+) of its ([\d,]+) characters are not shown\]"
)
HUGE = 3_000_000
PER_RESULT, PER_REPLY = 20_000, 100_000
TOOLS = [
    ToolDefinition(name=name, input_schema={"type": "object", "properties": {}})
    for name in ("big", "rows", "medium")
]


def split(text: str) -> tuple[str, int | None, int | None]:
    """(the kept text, characters cut, the original's length) of a result's text."""
    found = MARKER.search(text)
    if found is None:
        return text, None, None
    assert found.end() == len(text), "the marker ends the result"
    cut, total = (int(group.replace(",", "")) for group in found.groups())
    return text[: found.start()], cut, total


# ------------------------------------------------------------ the budget alone

PIXEL = ImageContent(source=Base64Source(media_type="image/png", data="iVBORw0KGgo="))
texts = st.text(st.sampled_from("ab \n<é😀"), max_size=300)
contents = st.one_of(
    texts,
    st.lists(st.one_of(texts.map(lambda t: TextContent(text=t)), st.just(PIXEL)), max_size=4),
)
results = st.lists(
    st.builds(
        ToolResultContent, tool_use_id=st.just("t"), content=contents, is_error=st.booleans()
    ),
    max_size=8,
)


def text_of(content: Any) -> str:
    return ToolResultContent(tool_use_id="t", content=content).text()


@given(results, st.integers(1, 400), st.integers(1, 1200), st.data())
def test_each_result_and_the_reply_stay_within_their_limits(
    given_results: list[ToolResultContent], per_result: int, per_reply: int, data: st.DataObject
) -> None:
    budget = ResultBudget(per_result, per_reply)
    # However the reply's results fall into rounds, the same is kept.
    rounds = data.draw(st.lists(st.integers(0, len(given_results)), max_size=3)).copy()
    bounds = sorted({0, len(given_results), *rounds})
    capped = [
        out
        for start, end in itertools.pairwise(bounds)
        for out in budget.cap(given_results[start:end])
    ]
    assert capped == ResultBudget(per_result, per_reply).cap(given_results)
    kept_total = 0
    for original, out in zip(given_results, capped, strict=True):
        assert (out.tool_use_id, out.is_error) == (original.tool_use_id, original.is_error)
        whole = text_of(original.content)
        kept, cut, total = split(out.text())
        assert whole.startswith(kept) and len(kept) <= per_result
        if cut is None:
            assert out == original  # a result within the limits is not touched
        else:
            assert (cut, total) == (len(whole) - len(kept), len(whole)) and cut > 0
        if isinstance(original.content, list):  # images are no text: they stay
            assert [p for p in out.content if p == PIXEL] == [  # type: ignore[union-attr]
                p for p in original.content if p == PIXEL
            ]
        kept_total += len(kept)
    assert kept_total <= per_reply


def test_the_limits_are_checked_and_configurable() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ResultBudget(0, 10)
    with pytest.raises(ValueError, match="at least 1"):
        Membrane(object(), max_tool_result_chars=0)  # type: ignore[arg-type]
    tools = ToolsConfig.model_validate({"max_result_chars": 500, "max_reply_result_chars": 900})
    assert (tools.max_result_chars, tools.max_reply_result_chars) == (500, 900)
    assert ToolsConfig().max_result_chars == PER_RESULT
    assert ToolsConfig().max_reply_result_chars == PER_REPLY


# ------------------------------------------------------------ through the tool loop


def request() -> Request:
    return Request(
        messages=[Message(participant="User", content="Go.")],
        config=ModelConfig(model="m", max_tokens=100),
        tools=TOOLS,
    )


HANDLER = tool_handler(
    {
        "big": lambda: "x" * HUGE,
        "rows": lambda: {"rows": ["r" * 98] * (HUGE // 100)},  # sent as JSON
        "medium": lambda: "m" * 15_000,
    }
)


def result_blocks(items: list[Any]) -> list[Block]:
    return [
        i.block
        for i in items
        if hasattr(i, "block") and isinstance(i.block, Block) and i.block.type == "tool_result"
    ]


def second_request_results(vendor: str, body: Any) -> list[str]:
    """The tool results the model was sent back, from each vendor's wire shape."""
    if vendor == "anthropic":
        return [
            b["content"] if isinstance(b["content"], str) else b["content"][0]["text"]
            for m in body["messages"]
            for b in (m["content"] if isinstance(m["content"], list) else [])
            if b.get("type") == "tool_result"
        ]
    if vendor == "openai":
        return [m["content"] for m in body["messages"] if m["role"] == "tool"]
    return [
        json.dumps(p["functionResponse"]["response"])
        for c in body["contents"]
        for p in c["parts"]
        if "functionResponse" in p
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("vendor", VENDORS, ids=lambda v: v.name)
async def test_huge_text_and_json_results_are_cut_before_the_model_sees_them(
    vendor: Vendor,
) -> None:
    first = ScriptedReply.of(
        text("Looking."), tool_use("big", {}, id="c1"), tool_use("rows", {}, id="c2")
    )
    with vendor.server(first, ScriptedReply.of("Done.")) as server:
        provider = vendor.provider(server)
        membrane = Membrane(provider, "native")
        items = [item async for item in membrane.stream(request(), on_tool_calls=HANDLER)]
        await provider.aclose()
        bodies = [r.body for r in server.requests]
    blocks = result_blocks(items)
    assert len(blocks) == 2
    for block in blocks:
        kept, cut, total = split(block.content or "")
        assert len(kept) == PER_RESULT and cut is not None and total is not None
        assert cut == total - PER_RESULT and total >= HUGE
    # What the model reads: the cut results with their markers, nothing more.
    sent = second_request_results(vendor.name, bodies[1])
    assert len(sent) == 2 and all("characters are not shown]" in s for s in sent)
    assert len(json.dumps(bodies[1])) < 3 * PER_RESULT + 10_000
    # The events carry no more than the history holds.
    chunks = [i for i in items if isinstance(i, Chunk) and i.meta.type == "tool_result"]
    assert sum(len(c.text) for c in chunks) < 2 * (PER_RESULT + 200)


@pytest.mark.anyio
async def test_many_medium_results_share_the_replys_budget_in_the_prefill_loop() -> None:
    calls = "".join('<invoke name="medium"></invoke>\n' for _ in range(12))
    first = ScriptedReply.of(
        f"On it.\n<function_calls>\n{calls}",
        stop_reason="stop_sequence",
        stop_sequence="</function_calls>",
        delta_chars=50,
    )
    with FakeAnthropic(first, ScriptedReply.of("\nDone.")) as server:
        provider = AnthropicProvider(api_key="k", base_url=server.base_url)
        membrane = Membrane(provider, "anthropic-xml")
        items = [item async for item in membrane.stream(request(), on_tool_calls=HANDLER)]
        await provider.aclose()
        bodies = [r.body for r in server.requests]
    blocks = result_blocks(items)
    assert len(blocks) == 12
    kept = [split(b.content or "")[0] for b in blocks]
    assert sum(map(len, kept)) == PER_REPLY  # 6 whole and a part; the rest only a marker
    assert [len(k) for k in kept[:6]] == [15_000] * 6 and kept[-1] == ""
    assert all(split(b.content or "")[1] is None for b in blocks[:6])
    # The continued prefill (the results inside it) is bounded the same way.
    assert len(json.dumps(bodies[1])) < PER_REPLY + 12 * 200 + 10_000


@pytest.mark.anyio
async def test_an_mcp_servers_huge_result_is_cut() -> None:
    server = McpServer(
        "weather", command=(sys.executable, "-m", "voice_membrane.testing.mcp_weather")
    )
    first = ScriptedReply.of(
        tool_use("big", {"chars": HUGE}, id="c1"),
        tool_use("big", {"chars": HUGE, "json_lines": True}, id="c2"),
    )
    async with McpToolbox([server], timeout_s=60) as toolbox:
        with FakeAnthropic(first, ScriptedReply.of("Done.")) as fake:
            provider = AnthropicProvider(api_key="k", base_url=fake.base_url)
            membrane = Membrane(provider, "native", max_tool_result_chars=5_000)
            request_ = request().model_copy(update={"tools": toolbox.definitions})
            items = [item async for item in membrane.stream(request_, on_tool_calls=toolbox)]
            await provider.aclose()
            bodies = [r.body for r in fake.requests]
    blocks = result_blocks(items)
    assert [b.is_error for b in blocks] == [False, False]
    for block in blocks:
        kept, cut, total = split(block.content or "")
        assert len(kept) == 5_000 and cut is not None and total is not None and total >= HUGE - 100
    assert len(json.dumps(bodies[1])) < 2 * 5_000 + 20_000
