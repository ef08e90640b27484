"""Untrusted text written so that it changes no structure: control tokens and turn lines.

Two things in text from users, other participants and tools can pass for
structure in a prompt, whatever the format:

- **Control tokens** of the model families. A server that parses special
  tokens in the prompt text (llama.cpp, some OpenAI-compatible servers) turns a
  typed ``<|im_end|>`` into the real end of a turn. ``neutralise_tokens``
  covers the families, not a list of names: any ``<|word|>`` or DeepSeek's
  full-width ``<｜word｜>`` (ChatML, Llama 3, GPT, Phi, …), Llama 2's
  ``<<SYS>>`` / ``<</SYS>>``, the angle-bracket words tokenizers reserve
  (``<s>``, ``</s>``, ``<unk>``, ``<pad>``, ``<bos>``, ``<eos>``, ``<think>``,
  and any lower-case word joined by ``_`` such as Gemma's ``<start_of_turn>``
  or Qwen's ``<tool_response>``) and any upper-case word in square brackets
  (Mistral's ``[INST]``, ``[/INST]``, ``[SYSTEM_PROMPT]``, ``[TOOL_CALLS]``).
  ``neutralise_tool_tags`` does the same for the ``<tool_call>`` /
  ``<tool_result>`` tags of the text-only JSON tool path (a tag the embedded
  model's path writes itself, so it is kept apart).
  A token is written with ``‹ ›`` for its angle brackets (``‹|im_end|›``, read
  as the same words, never the token) or, with none, a word joiner after its
  first character (``[⁠INST]``, invisible).
- **Turn lines.** A line that starts with a speaker's name and the format's
  separator (``Claude:``) reads as that speaker's turn. Every Unicode line break
  starts a line (``\\n``, ``\\r``, ``\\v``, ``\\f``, ``\\x1c``–``\\x1e``,
  U+0085, U+2028, U+2029: what ``str.splitlines`` breaks on), names are compared
  as ``vocab.names`` folds them (case, spaces, dots, look-alike letters, full
  width, invisible characters), a full-width ``：`` counts as ``:``, and the
  role names every format's model knows (``Human``, ``User``, ``Assistant``,
  ``System``, …) are speakers too. ``TurnLines`` writes such a line's separator
  ``∶`` (U+2236, which reads as a colon and is not one; another separator gets
  a word joiner before it).
"""

# ruff: noqa: RUF001, RUF002, RUF003 (full-width look-alikes of tokens and separators)

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from typing import Final

from ..vocab.messages import Request
from ..vocab.names import ROLE_NAMES, fold_keys, keys_of

INERT_OPEN, INERT_CLOSE = "\u2039", "\u203a"  # ‹ ›
WORD_JOINER: Final = "\u2060"  # invisible: splits a token with no bracket in it
INERT_SEPARATOR: Final = "\u2236"  # ∶ reads as a colon, is not one

# Every character str.splitlines() breaks on.
LINE_BREAKS: Final = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"

_BRACKET_TOKEN: Final = r"\[/?[A-Z][A-Z0-9_]{2,40}\]"  # [INST], [/INST], [SYSTEM_PROMPT]
_CONTROL_TOKEN: Final = re.compile(
    r"<[|｜][^<>|｜\s]{0,64}[|｜]>"  # <|im_end|>, <|eot_id|>, <|end|>, <｜User｜>
    r"|<</?SYS>>"  # Llama 2
    r"|</?(?:s|unk|pad|bos|eos|mask|sep|cls|think|eot|filename|reponame)>"
    r"|</?(?!tool_(?:call|result)>)[a-z]+(?:_[a-z0-9]+)+>"  # <start_of_turn>, <fim_prefix>
    r"|" + _BRACKET_TOKEN
)
_BRACKET_ONLY: Final = re.compile(_BRACKET_TOKEN)
_TOOL_TAG: Final = re.compile(r"</?tool_(?:call|result)\b[^<>]{0,64}>?", re.IGNORECASE)


def inert_token(token: str) -> str:
    """``token`` (``<|im_end|>``) spelled so that it no longer is that token."""
    if "<" in token or ">" in token:
        return token.replace("<", INERT_OPEN).replace(">", INERT_CLOSE)
    return token[0] + WORD_JOINER + token[1:]


def _inert_match(match: re.Match[str]) -> str:
    return inert_token(match.group())


def neutralise_tokens(text: str) -> str:
    """``text`` with every control token of the known families made inert."""
    if "<" in text or "[" in text:
        return _CONTROL_TOKEN.sub(_inert_match, text)
    return text


def neutralise_bracket_tokens(text: str) -> str:
    """Only the square-bracket tokens made inert: for text whose ``<`` and ``>``
    are escaped anyway (a prefill transcript's tool results)."""
    return _BRACKET_ONLY.sub(_inert_match, text) if "[" in text else text


def neutralise_tool_tags(text: str) -> str:
    """``text`` with the JSON tool path's ``<tool_call>`` / ``<tool_result>`` tags
    (opener or closer, any case, complete or not) made inert."""
    if "<" in text:
        return _TOOL_TAG.sub(_inert_match, text)
    return text


def neutralise_control(text: str) -> str:
    """Control tokens and the JSON tool tags both made inert."""
    return neutralise_tool_tags(neutralise_tokens(text))


@lru_cache(maxsize=16)
def _separators(separator: str) -> str:
    """``separator`` and the characters NFKC makes it (``：`` and ``﹕`` for ``:``)."""
    forms = [separator]
    for code in [*range(0xFE10, 0xFE20), *range(0xFE50, 0xFE70), *range(0xFF01, 0xFF5F)]:
        if unicodedata.normalize("NFKC", chr(code)) == separator:
            forms.append(chr(code))
    return "".join(forms)


# How far into a line a name may end: a name is at most ~100 characters, with
# room for spaces, markup and a format's prefix around it.
_MAX_HEAD = 160


class TurnLines:
    """Writes lines that start like a turn of one of ``speakers`` inert.

    Args:
        speakers: the names written as turns (the role names are added).
        name_format: the prefix format (``"{name}: "``): what stands before a
            name, and the separator after it.
    """

    def __init__(self, speakers: Iterable[str], name_format: str = "{name}: ") -> None:
        head, _, tail = name_format.partition("{name}")
        separator = tail.strip()[:1]
        self._separators = _separators(separator) if separator else ""
        self._run = re.compile(f"[{re.escape(self._separators)}]+") if separator else None
        # A format's head (``[`` of ``"[{name}]"``) is part of what a line's head is
        # folded from, so it is folded into the names' keys the same way.
        self._keys = keys_of(head.strip() + name for name in {*speakers, *ROLE_NAMES})

    def __call__(self, text: str) -> str:
        if not any(separator in text for separator in self._separators):
            return text  # most text: no separator, nothing to look at
        lines = text.splitlines(keepends=True)
        for n, line in enumerate(lines):
            lines[n] = self._line(line)
        return "".join(lines)

    def _line(self, line: str) -> str:
        """Each run of separators whose head (the line before it) reads as a
        speaker's name, written inert: the next too, as in "Claude: *: hi" the
        first written inert leaves "Claude∶ *", still a speaker's head."""
        at = 0
        while self._run is not None and (run := self._run.search(line, at, _MAX_HEAD)):
            if fold_keys(line[: run.start()]).isdisjoint(self._keys):
                break
            inert = "".join(
                INERT_SEPARATOR if unicodedata.normalize("NFKC", ch) == ":" else WORD_JOINER + ch
                for ch in run.group()
            )
            line = line[: run.start()] + inert + line[run.end() :]
            at = run.start() + len(inert)
        return line


def request_speakers(request: Request) -> set[str]:
    """Every name a request may write as a turn: the assistant's, the human's and
    each message's participant."""
    options = request.options
    return {
        options.assistant_participant,
        options.human_participant,
        *(message.participant for message in request.messages),
    }
