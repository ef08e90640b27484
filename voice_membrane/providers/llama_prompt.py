"""A prompt's tokens as llama.cpp's ``create_chat_completion`` makes them: the GGUF's
chat template rendered, then tokenized with special tokens. Used to count a request
against the context (``pipeline/history.py``) and to line the prompt up with the KV
cache (``llama_kv``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Protocol

# Per message of a model without a chat template (llama.cpp then falls back to a
# generic format): role markers and separators, counted generously.
FALLBACK_MESSAGE_TOKENS = 8

_Key = tuple[tuple[str, str], ...]


class Tokenizing(Protocol):
    """The part of ``llama_cpp.Llama`` that counting a prompt's tokens needs."""

    metadata: dict[str, str]
    chat_format: str | None

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]: ...

    def detokenize(
        self, tokens: list[int], prev_tokens: list[int] | None = None, special: bool = False
    ) -> bytes: ...

    def token_bos(self) -> int: ...

    def token_eos(self) -> int: ...


class PromptTokens:
    """A model's prompts tokenized as llama.cpp will. Blocking: call it on the model's
    thread."""

    def __init__(self, llama: Tokenizing) -> None:
        self.llama = llama
        self._formatter: Callable[..., Any] | None = None
        self._formatter_made = False
        # The last prompt is kept: a session counts its request (history fitting) just
        # before the trim check tokenizes it again (~4-7 ms for 1,700 tokens).
        self._last: tuple[_Key, tuple[int, ...]] | None = None

    def count(self, messages: list[dict[str, str]]) -> int:
        """How many tokens llama.cpp evaluates for this conversation."""
        tokens = self.ids(messages)
        if tokens is None:  # no template in the file: estimated, generously
            return 1 + sum(
                len(self.llama.tokenize(m["content"].encode(), add_bos=False))
                + FALLBACK_MESSAGE_TOKENS
                for m in messages
            )
        return len(tokens)

    def ids(self, messages: list[dict[str, str]]) -> list[int] | None:
        """The prompt's tokens, or None when the model file has no chat template."""
        key = tuple((m["role"], m["content"]) for m in messages)
        if self._last is not None and self._last[0] == key:
            return list(self._last[1])
        formatter = self._chat_formatter()
        if formatter is None:
            return None
        result = formatter(messages=messages)
        prompt = result.prompt.encode("utf-8")
        tokens = self.llama.tokenize(prompt, add_bos=not result.added_special, special=True)
        self._last = (key, tuple(tokens))
        return tokens

    def _chat_formatter(self) -> Callable[..., Any] | None:
        """The Jinja chat formatter llama.cpp built from the GGUF's template (it keeps
        only a completion handler made from it, so an equal one is made here, once).
        When llama.cpp recognised the template as a named format (chatml, …) that
        format is the same template."""
        if self._formatter_made:
            return self._formatter
        self._formatter_made = True
        chat_format = self.llama.chat_format or ""
        key = "tokenizer.chat_template"
        if chat_format.startswith("chat_template.") and chat_format != "chat_template.default":
            key = f"tokenizer.{chat_format}"
        template = self.llama.metadata.get(key)
        if not template:
            return None
        chat_format_module = importlib.import_module("llama_cpp.llama_chat_format")

        def text(token: int) -> str:
            if token == -1:
                return ""
            return self.llama.detokenize([token], special=True).decode("utf-8", "replace")

        self._formatter = chat_format_module.Jinja2ChatFormatter(
            template=template,
            eos_token=text(self.llama.token_eos()),
            bos_token=text(self.llama.token_bos()),
        )
        return self._formatter
