"""The XML wire format of prefill transcripts, written exactly as ``XmlStreamParser`` reads it.

Tool calls (``<function_calls><invoke name=…><parameter name=…>``), tool results
(``<function_results><result|error tool_use_id=…>``, XML-escaped), thinking
(``<thinking>``) and the tool definitions described in a system prompt. Shared by
every prefill formatter, so a past turn looks the same as the model's own output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

from ..parse.tags import TAG_ATTRIBUTE
from ..parse.tool_input import parse_parameter_value
from ..vocab.messages import (
    Request,
    RequestError,
    ToolDefinition,
    ToolResultContent,
    ToolUseContent,
)
from .inert import (
    INERT_CLOSE,
    INERT_OPEN,
    WORD_JOINER,
    TurnLines,
    inert_token,
    neutralise_bracket_tokens,
    neutralise_control,
    request_speakers,
)

__all__ = ["INERT_CLOSE", "INERT_OPEN", "WORD_JOINER", "inert_token"]  # kept where they were

FUNCTION_CALLS_END: Final = "</function_calls>"
"""The stop sequence of xml tool mode: the model stops after its calls, the
membrane writes it back, runs the tools and continues the turn."""

_ESCAPES: Final = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def escape(text: str) -> str:
    """``&``, ``<`` and ``>`` as entities: the parser unescapes them, so any text
    (``</result>``, ``]]>``, ``&amp;`` included) comes back unchanged."""
    return text.translate(_ESCAPES)


# Anything that reads as a membrane tag (or the tool list's <functions>/<function>),
# opener or closer, namespaced or not, any case, up to its ">" if it has one.
_TAG_TEXT: Final = re.compile(
    r"<(/?(?:antml:)?(?:" + "|".join(TAG_ATTRIBUTE) + r"|functions?)(?![a-z_])[^<>]{0,256})(>?)",
    re.IGNORECASE,
)
# Brackets that read as brackets but open no tag. Entities (&lt;) would do for the
# parser, but a model that quotes the user copies them, and a voice then reads
# "&lt;" out as "and L T"; "‹thinking›" is spoken as "thinking".


def neutralise(text: str, tokens: Sequence[str] = (), *, tags: bool = True) -> str:
    """Non-assistant text with its tag text made inert: every membrane tag's
    brackets become ``‹ ›`` (``<thinking>`` → ``‹thinking›``, still read as the
    tag's name, never parsed as one), and so do the control tokens of every model
    family and the format's own ``tokens`` (``<|im_end|>`` → ``‹|im_end|›``;
    ``inert.py``). Nothing a user writes can then open a block, forge a tool call
    or end a turn; the rest of the text (``a < b``, ``<b>``, ``&``) is left
    exactly as written. ``tags=False`` leaves membrane tags (the assistant's own
    turns, written as said)."""
    if tags and "<" in text:
        text = _TAG_TEXT.sub(
            lambda m: INERT_OPEN + m.group(1) + (INERT_CLOSE if m.group(2) else ""), text
        )
    text = neutralise_control(text)
    for token in tokens:
        if token and token in text:
            text = text.replace(token, inert_token(token))
    return text


def check_attribute(value: str, where: str) -> str:
    """``value`` if it can stand in a tag's quoted attribute (the parser's tags have
    no escapes there), else ``RequestError`` naming ``where``."""
    if '"' in value or ">" in value:
        raise RequestError(f'{where}: {value!r} cannot contain " or > in the XML format')
    return value


def parameter_text(value: Any) -> str:
    """A parameter value as the parser reads it back: a string as it is unless it
    would read as other JSON (``"42"``) or holds ``</``; everything else as JSON,
    with ``</`` written ``<\\/`` (valid JSON) so no closing tag ends it early."""
    if isinstance(value, str) and "</" not in value and parse_parameter_value(value) == value:
        return value
    return json.dumps(value, ensure_ascii=False, default=str).replace("</", "<\\/")


def tool_calls(calls: Sequence[tuple[ToolUseContent, str]]) -> str:
    """One ``<function_calls>`` block for consecutive calls (each with its field path)."""
    lines = ["<function_calls>"]
    for call, where in calls:
        lines.append(f'<invoke name="{check_attribute(call.name, f"{where}.name")}">')
        for key, value in call.input.items():
            name = check_attribute(key, f"{where}.input")
            lines.append(f'<parameter name="{name}">{parameter_text(value)}</parameter>')
        lines.append("</invoke>")
    lines.append(FUNCTION_CALLS_END)
    return "\n".join(lines)


def tool_results(
    results: Sequence[tuple[ToolResultContent, str]], written: Callable[[str], str]
) -> str:
    """One ``<function_results>`` block; ``<error>`` for failed calls. Images in a
    result are left out here (formats that carry images place them after it).
    Each result's text is ``written`` (its turn lines and bracket tokens made
    inert), then XML-escaped."""
    lines = ["<function_results>"]
    for result, where in results:
        tag = "error" if result.is_error else "result"
        tool_id = check_attribute(result.tool_use_id, f"{where}.tool_use_id")
        text = escape(written(result.text()))
        lines.append(f'<{tag} tool_use_id="{tool_id}">{text}</{tag}>')
    lines.append("</function_results>")
    return "\n".join(lines)


def result_writer(
    request: Request | None, name_format: str = "{name}: ", tokens: Sequence[str] = ()
) -> Callable[[str], str]:
    """How a tool result's text is written in a transcript: escaping makes its tag
    text and angle-bracket tokens inert, so only what escaping leaves is done here:
    lines that start like a turn of one of ``request``'s speakers or a role, the
    square-bracket tokens and the format's own ``tokens``."""
    turn_lines = TurnLines(request_speakers(request) if request else (), name_format)

    def written(text: str) -> str:
        text = neutralise_bracket_tokens(text)
        for token in tokens:
            if token and token in text:
                text = text.replace(token, inert_token(token))
        return turn_lines(text)

    return written


def format_tool_results(
    results: Sequence[ToolResultContent],
    request: Request | None = None,
    name_format: str = "{name}: ",
    tokens: Sequence[str] = (),
) -> str:
    """The results appended to an assistant turn right after its ``</function_calls>``
    (which the membrane writes back), ending on the closing tag: a prefill must not
    end in whitespace. Their text is written as in the transcript of ``request``
    (``result_writer``)."""
    if not results:
        return ""
    written = result_writer(request, name_format, tokens)
    return tool_results([(r, f"results[{n}]") for n, r in enumerate(results)], written)


def thinking(text: str) -> str:
    return f"<thinking>{text}</thinking>"


TOOLS_PREAMBLE: Final = """\
In this environment you have access to a set of tools you can use to answer.
You can invoke functions by writing a "<function_calls>" block like the following as \
part of your reply:
<function_calls>
<invoke name="$FUNCTION_NAME">
<parameter name="$PARAMETER_NAME">$PARAMETER_VALUE</parameter>
...
</invoke>
</function_calls>

String and scalar parameters should be specified as is, while lists and objects \
should use JSON format. The results will follow in a "<function_results>" block; \
continue your reply after it.

Here are the functions available in JSONSchema format:"""


def describe_tools(tools: Sequence[ToolDefinition]) -> str:
    """The tool definitions as a system-prompt section: how to call, then a
    ``<functions>`` list (one JSON object per tool: name, description, parameters)."""
    lines = [TOOLS_PREAMBLE, "<functions>"]
    for tool in tools:
        spec = {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}
        lines.append(f"<function>{json.dumps(spec, ensure_ascii=False)}</function>")
    lines.append("</functions>")
    return "\n".join(lines)


def system_with_tools(system: str | None, tools: Sequence[ToolDefinition]) -> str | None:
    """The system prompt with the tools described after it (xml tool mode)."""
    if not tools:
        return system
    return "\n\n".join(part for part in (system, describe_tools(tools)) if part)
