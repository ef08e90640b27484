"""The request formatters: golden requests, and the rules each format keeps.

Goldens live in tests/golden/formats/; regenerate them with ``UPDATE_GOLDEN=1``
after a deliberate change, and read the diff.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from tests.parser_helpers import completed, parse, split_at
from voice_membrane.formats import (
    AnthropicXmlFormatter,
    BuiltRequest,
    ChatMLFormatter,
    CompletionsFormatter,
    Formatter,
    GeminiPrefillFormatter,
    NativeFormatter,
    get_formatter,
)
from voice_membrane.formats._transcript import PLACEHOLDER_USER_TEXT
from voice_membrane.formats._xml import result_writer
from voice_membrane.vocab.messages import (
    ImageContent,
    Request,
    RequestError,
    TextContent,
    ThinkingContent,
    ToolResultContent,
    make_request,
)

GOLDEN = Path(__file__).parent / "golden" / "formats"

IMAGE = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
}
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
}


def conversation(
    *, tools: bool = True, image: bool = True, thinking: bool = True, **options: Any
) -> Request:
    """Alice and Bob talk with Claude: an image, a cache breakpoint, thinking, a
    tool call and its result."""
    bob: list[dict[str, Any]] = [{"type": "text", "text": "And look at my cat:"}]
    if image:
        bob.append(IMAGE)
    options = {
        "assistant_participant": "Claude",
        "participant_mode": "multiuser",
        "max_participants_for_stop": 1,
        "provider_params": {"top_k": 5},
        **options,
    }
    config: dict[str, Any] = {"model": "m", "max_tokens": 4096}
    if thinking:
        config["thinking_budget"] = 2048
    return make_request(
        {
            "messages": [
                {"participant": "Alice", "content": "Hi Claude, what's the weather in Paris?"},
                {"participant": "Bob", "content": bob, "cache_control": {"type": "ephemeral"}},
                {
                    "participant": "Claude",
                    "content": [
                        {"type": "thinking", "thinking": "Weather first.", "signature": "sig-1"},
                        {"type": "text", "text": "Let me look."},
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "get_weather",
                            "input": {"city": "Paris", "days": 2},
                        },
                    ],
                },
                {
                    "participant": "Alice",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18°C & <sun>"}
                    ],
                },
                {"participant": "Claude", "content": "18°C and sunny. Cute cat, Bob!"},
                {"participant": "Bob", "content": "Thanks!"},
            ],
            "config": config,
            "system_prompt": "Speak briefly.",
            "tools": [WEATHER_TOOL] if tools else [],
            "stop_sequences": ["###"],
            "options": options,
        }
    )


def jsonable(built: BuiltRequest) -> Any:
    def plain(value: Any) -> Any:
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json")
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        if isinstance(value, list):
            return [plain(item) for item in value]
        return value

    return plain(dataclasses.asdict(built))


def check_golden(name: str, built: BuiltRequest) -> None:
    data = jsonable(built)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    assert path.exists(), f"{path} missing: run with UPDATE_GOLDEN=1"
    assert data == json.loads(path.read_text(encoding="utf-8"))


def texts(built: BuiltRequest, role: str) -> list[str]:
    return [
        block.text
        for message in built.messages
        if message.role == role
        for block in message.content
        if isinstance(block, TextContent)
    ]


# ------------------------------------------------------------------ goldens


def test_golden_anthropic_xml() -> None:
    built = AnthropicXmlFormatter().build(conversation())
    check_golden("anthropic_xml", built)
    assert built.prefill is not None
    assert built.prefill.startswith("\n\nClaude: <thinking>Weather first.</thinking>\n")
    assert '<invoke name="get_weather">' in built.prefill
    assert '<result tool_use_id="toolu_1">18°C &amp; &lt;sun&gt;</result>' in built.prefill
    assert built.prefill.endswith("Bob: Thanks!\n\nClaude: <thinking>")
    assert built.stop_sequences == ["</function_calls>", "\nBob:", "###"]
    assert built.tools is None and built.params == {"top_k": 5}


def test_golden_anthropic_xml_native_tools_simple() -> None:
    request = conversation(
        thinking=False,
        participant_mode="simple",
        human_participant="Human",
        prompt_caching=False,
        context_prefix="A chat in a café.",
    )
    built = AnthropicXmlFormatter(tool_mode="native").build(request)
    check_golden("anthropic_xml_native_simple", built)
    assert built.messages[0].content == [TextContent(text="A chat in a café.")]
    assert built.tools is not None and [t.name for t in built.tools] == ["get_weather"]
    assert built.system == "Speak briefly."
    assert built.stop_sequences == ["\nHuman:", "###"]
    assert built.prefill is not None and built.prefill.endswith("Human: Thanks!\n\nClaude:")
    assert not built.system_cache


def test_golden_native() -> None:
    built = NativeFormatter().build(conversation())
    check_golden("native", built)
    assert [m.role for m in built.messages] == ["user", "assistant", "user", "assistant", "user"]
    first = built.messages[0].content
    assert first[0] == TextContent(text="Alice: Hi Claude, what's the weather in Paris?")
    # Two user messages merged into one turn: a blank line keeps them apart.
    assert first[1] == TextContent(
        text="\n\nBob: And look at my cat:", cache_control={"type": "ephemeral"}
    )
    assert built.stop_sequences == ["###"] and built.tools is not None


def test_golden_chatml() -> None:
    with pytest.warns(UserWarning, match=r"messages\[1\]\.content\[1\]"):
        built = ChatMLFormatter().build(conversation(unsupported_media="strip"))
    check_golden("chatml", built)
    assert built.prefill is not None
    assert built.prefill.startswith("<|im_start|>user\nAlice: Hi Claude")
    assert built.prefill.endswith(
        "<|im_start|>user\nBob: Thanks!<|im_end|>\n<|im_start|>assistant\n<thinking>"
    )
    assert built.prompt is not None and built.prompt.startswith(
        "<|im_start|>system\nSpeak briefly."
    )
    assert "<functions>" in built.prompt
    assert built.stop_sequences == ["<|im_end|>", "</function_calls>", "<|im_start|>", "###"]


def test_golden_completions() -> None:
    with pytest.warns(UserWarning):
        built = CompletionsFormatter().build(conversation(tools=False, unsupported_media="strip"))
    check_golden("completions", built)
    assert built.prefill is not None
    assert built.prefill.startswith("Alice: Hi Claude, what's the weather in Paris?<|eot|>\n\nBob:")
    assert built.prefill.endswith("Bob: Thanks!<|eot|>\n\nClaude: <thinking>")
    assert built.stop_sequences == ["<|eot|>", "\nBob:", "###"]
    assert built.end_of_turn is None


def test_golden_gemini_prefill() -> None:
    with pytest.warns(UserWarning):
        built = GeminiPrefillFormatter().build(conversation(tools=False, unsupported_media="strip"))
    check_golden("gemini_prefill", built)
    assert built.prefill is not None and built.prefill.endswith(
        "<|eot|>Bob: Thanks!<|eot|>Claude: <thinking>"
    )
    assert built.end_of_turn == "<|eot|>"


def test_gemini_prefill_example_from_the_proposal() -> None:
    request = make_request(
        {
            "messages": [
                {"participant": "Alice", "content": "Hello"},
                {"participant": "Bob", "content": "Hi there"},
            ],
            "config": {"model": "gemini"},
            "options": {"assistant_participant": "Claude", "participant_mode": "multiuser"},
        }
    )
    built = GeminiPrefillFormatter().build(request)
    assert built.prefill == "Alice: Hello<|eot|>Bob: Hi there<|eot|>Claude:"
    assert built.stop_sequences == ["<|eot|>", "\nBob:", "\nAlice:"]


# ------------------------------------------------------------------ anthropic-xml


def test_prefill_starts_with_a_placeholder_user_message() -> None:
    built = AnthropicXmlFormatter().build(conversation())
    assert built.messages[0].role == "user"
    assert built.messages[0].content == [TextContent(text=PLACEHOLDER_USER_TEXT)]
    custom = AnthropicXmlFormatter(placeholder="<cmd>cat log</cmd>").build(conversation())
    assert custom.messages[0].content == [TextContent(text="<cmd>cat log</cmd>")]


def test_image_goes_in_a_user_message_between_assistant_parts() -> None:
    built = AnthropicXmlFormatter().build(conversation())
    roles = [m.role for m in built.messages]
    assert roles == ["user", "assistant", "user"]
    before = built.messages[1].content
    assert before == [
        TextContent(
            text="Alice: Hi Claude, what's the weather in Paris?\n\nBob: And look at my cat:",
            cache_control={"type": "ephemeral"},  # Bob's breakpoint, moved before the image
        )
    ]
    image = built.messages[2].content
    assert len(image) == 1 and isinstance(image[0], ImageContent)


def test_image_first_joins_the_placeholder_message() -> None:
    request = make_request(
        {
            "messages": [
                {"participant": "Alice", "content": [IMAGE, {"type": "text", "text": "?"}]}
            ],
            "config": {"model": "m"},
            "options": {"participant_rules": {"always_suppress": ["Alice"]}},
        }
    )
    built = AnthropicXmlFormatter().build(request)
    assert [m.role for m in built.messages] == ["user"]
    assert isinstance(built.messages[0].content[1], ImageContent)
    assert built.prefill == "?\n\nAssistant:"


def test_cache_breakpoints_split_the_transcript_losslessly() -> None:
    def request(caching: bool) -> Request:
        return make_request(
            {
                "messages": [
                    {
                        "participant": "A",
                        "content": "one  ",
                        "cache_control": {"type": "ephemeral"},
                    },
                    {
                        "participant": "B",
                        "content": [
                            {"type": "text", "text": "two", "cache_control": {"type": "ephemeral"}},
                            {"type": "text", "text": " three"},
                        ],
                    },
                ],
                "config": {"model": "m"},
                "system_prompt": "sys",
                "options": {"participant_mode": "multiuser", "prompt_caching": caching},
            }
        )

    whole = AnthropicXmlFormatter().build(request(False))
    assert len(whole.messages) == 1 and not whole.system_cache
    split = AnthropicXmlFormatter().build(request(True))
    assert split.system_cache
    blocks = split.messages[1].content
    assert [b.text for b in blocks if isinstance(b, TextContent)] == ["A: one", "  \n\nB: two"]
    assert all(isinstance(b, TextContent) and b.cache_control is not None for b in blocks)
    assert "".join(texts(split, "assistant")) + (split.prefill or "") == whole.prefill


@pytest.mark.parametrize(
    "formatter", [AnthropicXmlFormatter(), CompletionsFormatter(), GeminiPrefillFormatter()]
)
@pytest.mark.parametrize("last", ["trailing space   ", "tabs\t\n", "  ", ""])
def test_prefill_has_no_trailing_whitespace(formatter: Formatter, last: str) -> None:
    request = make_request(
        {
            "messages": [
                {"participant": "User", "content": "hi \n", "cache_control": {"type": "ephemeral"}},
                {"participant": "Assistant", "content": last},
            ],
            "config": {"model": "m"},
            "options": {
                "participant_rules": {"suppress_empty_names": True, "always_suppress": ["User"]}
            },
        }
    )
    built = formatter.build(request)
    assert built.prefill is not None and built.prefill == built.prefill.rstrip()
    assert built.prefill.endswith("Assistant:")
    for text in texts(built, "assistant"):
        assert text == text.rstrip()


def test_xml_tools_go_in_the_system_prompt_and_stop_on_function_calls() -> None:
    built = AnthropicXmlFormatter().build(conversation())
    assert built.system is not None and built.system.startswith("Speak briefly.\n\n")
    assert "<functions>" in built.system and "</functions>" in built.system
    assert '"name": "get_weather"' in built.system
    assert '"required": ["city"]' in built.system
    assert "<parameter name=" in built.system  # how to call
    assert built.stop_sequences[0] == "</function_calls>"
    assert built.tools is None


def test_xml_tools_without_system_prompt() -> None:
    request = conversation().model_copy(update={"system_prompt": None})
    built = AnthropicXmlFormatter().build(request)
    assert built.system is not None and built.system.startswith("In this environment")


def test_no_tools_no_function_calls_stop() -> None:
    built = AnthropicXmlFormatter().build(conversation(tools=False))
    assert "</function_calls>" not in built.stop_sequences
    assert built.system == "Speak briefly."


def test_native_tool_mode_passes_tools_and_no_xml_stop() -> None:
    built = AnthropicXmlFormatter(tool_mode="native").build(conversation())
    assert built.tools is not None and built.tools[0].name == "get_weather"
    assert "</function_calls>" not in built.stop_sequences
    assert built.system == "Speak briefly."


def test_thinking_opens_the_prefill_and_the_parser_knows() -> None:
    fmt = AnthropicXmlFormatter()
    built = fmt.build(conversation())
    assert built.prefill is not None and built.prefill.endswith("Claude: <thinking>")
    parser = fmt.create_parser(built.prefill)
    assert parser.inside_hidden
    events = parser.feed("Keep it short.</thinking> Sunny!") + parser.flush()
    blocks = [e.block for e in completed(events)]
    assert [(b.type, b.content) for b in blocks] == [
        ("thinking", "Keep it short."),
        ("text", " Sunny!"),
    ]
    no_thinking = fmt.build(conversation(thinking=False))
    assert no_thinking.prefill is not None and no_thinking.prefill.endswith("Claude:")
    gemini = GeminiPrefillFormatter().build(conversation(tools=False, image=False))
    assert gemini.prefill is not None and gemini.prefill.endswith("<|eot|>Claude: <thinking>")


def test_transcript_ending_in_results_continues_the_assistant_turn() -> None:
    request = make_request(
        {
            "messages": [
                {"participant": "User", "content": "weather?"},
                {
                    "participant": "Assistant",
                    "content": [
                        {"type": "text", "text": "Checking."},
                        {"type": "tool_use", "id": "t1", "name": "w", "input": {"q": "x"}},
                    ],
                },
                {
                    "participant": "User",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sun"}],
                },
            ],
            "config": {"model": "m", "max_tokens": 4096, "thinking_budget": 2048},
        }
    )
    built = AnthropicXmlFormatter().build(request)
    assert built.prefill == (
        "User: weather?\n\nAssistant: Checking.\n<function_calls>\n"
        '<invoke name="w">\n<parameter name="q">x</parameter>\n</invoke>\n</function_calls>\n'
        '<function_results>\n<result tool_use_id="t1">sun</result>\n</function_results>'
    )


def test_error_results_and_redacted_thinking() -> None:
    request = make_request(
        {
            "messages": [
                {"participant": "User", "content": "go"},
                {
                    "participant": "Assistant",
                    "content": [
                        {"type": "redacted_thinking", "data": "opaque"},
                        {"type": "tool_use", "id": "t1", "name": "w", "input": {}},
                    ],
                },
                {
                    "participant": "User",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": "boom",
                            "is_error": True,
                        }
                    ],
                },
                {"participant": "Assistant", "content": "It failed."},
            ],
            "config": {"model": "m"},
        }
    )
    built = AnthropicXmlFormatter().build(request)
    assert built.prefill is not None
    assert '<error tool_use_id="t1">boom</error>' in built.prefill
    assert "opaque" not in built.prefill
    assert "</function_results>\nIt failed.\n\nAssistant:" in built.prefill


def test_tool_name_that_cannot_be_an_attribute_is_refused() -> None:
    request = make_request(
        {
            "messages": [
                {"participant": "User", "content": "go"},
                {
                    "participant": "Assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": 'a"b', "input": {}}],
                },
            ],
            "config": {"model": "m"},
        }
    )
    with pytest.raises(RequestError, match=r"messages\[1\]\.content\[0\]\.name"):
        AnthropicXmlFormatter().build(request)


def test_prompt_is_system_then_context_then_transcript() -> None:
    built = CompletionsFormatter().build(
        conversation(tools=False, image=False, context_prefix="Scene: a café.")
    )
    assert built.prompt is not None and built.prefill is not None
    assert built.prompt == "Speak briefly.\n\nScene: a café.\n\n" + built.prefill
    assert built.messages[0].content == [TextContent(text="Scene: a café.")]


# ------------------------------------------------------------------ round trips


@settings(max_examples=200)
@given(
    text=st.lists(
        st.one_of(st.sampled_from([*"<>&;/]!\"'#x \n", "]]>", "&amp;", "</result>"]), st.text()),
        max_size=8,
    ).map("".join),
    is_error=st.booleans(),
    cuts=st.lists(st.integers(0, 400), max_size=6),
)
def test_format_tool_results_round_trips(text: str, is_error: bool, cuts: list[int]) -> None:
    fmt = AnthropicXmlFormatter()
    results = [
        ToolResultContent(tool_use_id="toolu_xml_1", content=text, is_error=is_error),
        ToolResultContent(tool_use_id="toolu_xml_2", content=[TextContent(text="second")]),
    ]
    wire = fmt.format_tool_results(results)
    assert wire == wire.rstrip()
    blocks = [e.block for e in completed(parse(split_at(wire, cuts)))]
    # The text as written: turn lines and bracket tokens inert (none, mostly).
    assert [(b.type, b.tool_id, b.content, b.is_error) for b in blocks] == [
        ("tool_result", "toolu_xml_1", result_writer(None)(text), is_error),
        ("tool_result", "toolu_xml_2", "second", False),
    ]


def test_format_tool_results_shape() -> None:
    wire = ChatMLFormatter().format_tool_results(
        [ToolResultContent(tool_use_id="a", content="x < y && ]]>", is_error=True)]
    )
    assert wire == (
        '<function_results>\n<error tool_use_id="a">x &lt; y &amp;&amp; ]]&gt;</error>\n'
        "</function_results>"
    )
    assert NativeFormatter().format_tool_results([]) == ""
    assert AnthropicXmlFormatter().format_tool_results([]) == ""


_JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**14), 10**14),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
_JSON = st.recursive(
    _JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=200)
@given(
    st.dictionaries(
        st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8),
        st.one_of(
            _JSON, st.sampled_from(["42", '"q"', "</parameter>", "NaN", "12345678901234567"])
        ),
        max_size=4,
    )
)
def test_past_tool_calls_parse_back_to_their_input(tool_input: dict[str, Any]) -> None:
    request = make_request(
        {
            "messages": [
                {"participant": "User", "content": "go"},
                {
                    "participant": "Assistant",
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "tool", "input": tool_input}
                    ],
                },
            ],
            "config": {"model": "m"},
        }
    )
    built = AnthropicXmlFormatter().build(request)
    assert built.prefill is not None
    calls = [e.block for e in completed(parse([built.prefill])) if e.block.type == "tool_call"]
    assert len(calls) == 1
    assert calls[0].tool_name == "tool" and calls[0].input == tool_input


# ------------------------------------------------------------------ media


@pytest.mark.parametrize(
    "fmt", [ChatMLFormatter(), CompletionsFormatter(), GeminiPrefillFormatter()]
)
def test_text_formats_refuse_images_naming_the_field(fmt: Formatter) -> None:
    with pytest.raises(RequestError, match=r"^messages\[1\]\.content\[1\]: .*unsupported_media"):
        fmt.build(conversation(tools=False))


@pytest.mark.parametrize(
    "fmt", [ChatMLFormatter(), CompletionsFormatter(), GeminiPrefillFormatter()]
)
def test_text_formats_strip_images_with_a_warning(fmt: Formatter) -> None:
    with pytest.warns(UserWarning, match=rf"{fmt.name}: left out the image at messages\[1\]"):
        built = fmt.build(conversation(tools=False, unsupported_media="strip"))
    assert built.prefill is not None and "And look at my cat:" in built.prefill


def test_image_in_a_tool_result_is_refused_by_text_formats() -> None:
    request = make_request(
        {
            "messages": [
                {"participant": "User", "content": "snap"},
                {
                    "participant": "Assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "cam", "input": {}}],
                },
                {
                    "participant": "User",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [IMAGE]}],
                },
            ],
            "config": {"model": "m"},
        }
    )
    with pytest.raises(RequestError, match=r"messages\[2\]\.content\[0\]\.content\[0\]"):
        CompletionsFormatter().build(request)
    built = AnthropicXmlFormatter().build(request)
    assert [m.role for m in built.messages] == ["user", "assistant", "user"]
    assert isinstance(built.messages[2].content[0], ImageContent)


def test_anthropic_xml_never_refuses_images() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        AnthropicXmlFormatter().build(conversation())


# ------------------------------------------------------------------ native


def _unsigned(convert: bool) -> Request:
    return make_request(
        {
            "messages": [
                {"participant": "User", "content": "hm?"},
                {
                    "participant": "Assistant",
                    "content": [
                        {"type": "text", "text": "Well"},
                        {"type": "thinking", "thinking": "imported", "signature": None},
                    ],
                },
                {"participant": "User", "content": "go on"},
            ],
            "config": {"model": "m"},
            "options": {"convert_unsigned_thinking_to_text": convert},
        }
    )


def test_native_refuses_unsigned_thinking_naming_the_field() -> None:
    with pytest.raises(RequestError, match=r"^messages\[1\]\.content\[1\]: unsigned thinking"):
        NativeFormatter().build(_unsigned(False))


def test_native_converts_unsigned_thinking_when_asked() -> None:
    built = NativeFormatter().build(_unsigned(True))
    assert built.messages[1].content == [
        TextContent(text="Well"),
        TextContent(text="<thinking>imported</thinking>"),
    ]


def test_native_keeps_signed_thinking_and_merges_roles() -> None:
    built = NativeFormatter().build(conversation(participant_mode="simple"))
    assistant = built.messages[1].content
    assert assistant[0] == ThinkingContent(thinking="Weather first.", signature="sig-1")
    # simple mode: no names written
    assert built.messages[0].content[0] == TextContent(
        text="Hi Claude, what's the weather in Paris?"
    )
    assert built.mode == "chat" and built.prefill is None and built.prompt is None
    fmt = NativeFormatter()
    assert fmt.create_parser() is None


def test_native_cache_control_off_without_prompt_caching() -> None:
    built = NativeFormatter().build(conversation(prompt_caching=False))
    for message in built.messages:
        for block in message.content:
            assert not (isinstance(block, TextContent) and block.cache_control is not None)
    assert not built.system_cache


# ------------------------------------------------------------------ others


def test_completions_refuses_tools() -> None:
    with pytest.raises(RequestError, match=r"^tools: "):
        CompletionsFormatter().build(conversation(image=False))


def test_chatml_tokens_and_role_names_are_configurable() -> None:
    fmt = ChatMLFormatter(
        start_token="<|start_header_id|>",
        end_token="<|eot_id|>",
        role_names={"system": "system", "user": "user", "assistant": "model"},
    )
    built = fmt.build(conversation(tools=False, image=False, thinking=False))
    assert built.prefill is not None and built.prefill.endswith("<|start_header_id|>model\n")
    assert built.stop_sequences[:2] == ["<|eot_id|>", "<|start_header_id|>"]
    with pytest.raises(ValueError, match="assistant"):
        ChatMLFormatter(role_names={"system": "s", "user": "u"})


def test_completions_options() -> None:
    fmt = CompletionsFormatter(eot_token="</s>", name_format="[{name}] ", message_separator="\n")
    built = fmt.build(conversation(tools=False, image=False, thinking=False))
    assert built.prefill is not None
    assert built.prefill.startswith("[Alice] Hi Claude, what's the weather in Paris?</s>\n[Bob]")
    assert built.prefill.endswith("[Bob] Thanks!</s>\n[Claude]")
    assert built.stop_sequences[0] == "</s>"


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("anthropic-xml", AnthropicXmlFormatter),
        ("native", NativeFormatter),
        ("chatml", ChatMLFormatter),
        ("completions", CompletionsFormatter),
        ("gemini-prefill", GeminiPrefillFormatter),
    ],
)
def test_get_formatter(name: str, cls: type) -> None:
    fmt = get_formatter(name)
    assert isinstance(fmt, cls) and fmt.name == name


def test_get_formatter_options_and_unknown_name() -> None:
    fmt = get_formatter("anthropic-xml", tool_mode="native")
    assert isinstance(fmt, AnthropicXmlFormatter) and fmt.tool_mode == "native"
    with pytest.raises(ValueError, match="known formatters: anthropic-xml, native, chatml"):
        get_formatter("llama")


@pytest.mark.parametrize(
    "fmt",
    [
        AnthropicXmlFormatter(),
        NativeFormatter(),
        ChatMLFormatter(),
        CompletionsFormatter(),
        GeminiPrefillFormatter(),
    ],
)
def test_build_copies_provider_params(fmt: Formatter) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        request = conversation(tools=False, unsupported_media="strip")
        built = fmt.build(request)
    assert built.params == {"top_k": 5}
    built.params["x"] = 1
    assert request.options.provider_params == {"top_k": 5}
