"""Keeping a long conversation within the model's context.

Each turn's request holds the system prompt, the conversation so far and the new
user text, so a long session outgrows any context: the embedded SmolLM2 has
2048 tokens, of which the reply needs ``max_tokens``. Before each turn the
oldest turns (a user text and the assistant's heard reply) are dropped, whole,
until the request fits its budget; the system prompt and the new user text are
always kept. A dropped turn stays dropped (the kept conversation's start only
moves forward).

Dropping changes the start of the conversation, and with it the position of
every token after the system prompt. A prefix cache reuses only the prefix a
prompt shares with the last one, so it would evaluate the whole prompt again
(8.6 s for 1,837 SmolLM2 tokens on two quiet cores). The embedded model does
not: it cuts the dropped turns out of llama.cpp's KV cache in place and shifts
what follows (``providers/llama_kv.py``), so a trimmed turn evaluates only its
new text, as an untrimmed one does; when the cache is not the session's own
(another session ran on the shared model since) or its tokens do not line up,
the prompt is read again. Cloud prompt caches are prefix caches: for them a trim
still means a full read. So a request over budget drops enough turns to fit
``TRIM_TO`` of the budget, and the turns after it grow again on an unchanged
prefix until the next trim, instead of changing the prompt's start on every turn.

The budget and the count depend on the model:

- an embedded model that counts (``TokenCountingSource``): its own chat template
  and tokenizer over the request exactly as it will receive it, against its
  context less ``max_tokens`` (``SourceTokens``);
- any other model: an estimate, one token per ``CHARS_PER_TOKEN`` characters plus
  ``MESSAGE_TOKENS`` per message, against a configured budget
  (``EstimatedTokens``; cloud models, ``llm.context_tokens``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from ..formats import Formatter
from ..membrane.membrane import Membrane
from ..providers.base import TokenCountingSource
from ..providers.text_source import TextSourceProvider, chat_messages
from ..vocab.messages import Message, Request, TextContent
from .metrics import ContextFit

# English runs ~4 characters per token with the cloud vendors' tokenizers; 3 keeps
# the estimate on the safe side for other languages and for code.
CHARS_PER_TOKEN = 3
MESSAGE_TOKENS = 4  # role markers and separators around each message
TRIM_TO = 0.75  # when over budget, drop turns until the request fits this share of it


class RequestCounter(Protocol):
    """Counts a request's tokens against the most it may hold."""

    budget: int
    exact: bool

    async def count(self, request: Request) -> int: ...


class EstimatedTokens:
    """An estimate from the request's characters, for models whose tokenizer is not
    at hand (the cloud): see the module's notes."""

    exact = False

    def __init__(self, budget: int) -> None:
        if budget < 1:
            raise ValueError(f"the context budget must be at least 1 token, got {budget}")
        self.budget = budget

    async def count(self, request: Request) -> int:
        return estimate_tokens(request)


def estimate_tokens(request: Request) -> int:
    chars = len(request.system_prompt or "")
    chars += sum(len(tool.model_dump_json()) for tool in request.tools)
    chars += sum(_message_chars(message) for message in request.messages)
    return math.ceil(chars / CHARS_PER_TOKEN) + MESSAGE_TOKENS * (len(request.messages) + 1)


def _message_chars(message: Message) -> int:
    return sum(
        len(block.text) if isinstance(block, TextContent) else len(block.model_dump_json())
        for block in message.content
    )


class SourceTokens:
    """An embedded model's own count: the request formatted as the membrane will
    format it, as the plain chat messages the source receives, through the model's
    chat template and tokenizer."""

    exact = True

    def __init__(
        self, source: TokenCountingSource, formatter: Formatter, budget: int | None = None
    ) -> None:
        self.source, self.formatter = source, formatter
        limit = source.context_tokens
        self.budget = limit if budget is None else min(limit, budget)

    async def count(self, request: Request) -> int:
        return await self.source.count_tokens(chat_messages(self.formatter.build(request)))


def counter_for(membrane: Membrane, budget: int | None) -> RequestCounter | None:
    """The embedded model's exact count when it has one (capped by ``budget``), else
    an estimate against ``budget``; None (no trimming) when there is neither."""
    provider = membrane.provider
    if isinstance(provider, TextSourceProvider) and isinstance(
        provider.source, TokenCountingSource
    ):
        return SourceTokens(provider.source, membrane.formatter, budget)
    return None if budget is None else EstimatedTokens(budget)


async def fit(
    first: int,
    turns: int,
    build: Callable[[int], Request],
    counter: RequestCounter,
    trim_to: float = TRIM_TO,
) -> tuple[Request, ContextFit]:
    """The request built from turn ``first`` of ``turns`` on; when it is over budget,
    the oldest turns are dropped until it fits ``trim_to`` of the budget (or no
    history is left). ``build(first)`` makes the request that starts at turn
    ``first``."""
    request = build(first)
    tokens = await counter.count(request)
    if tokens > counter.budget:
        target = int(counter.budget * trim_to)
        while tokens > target and first < turns:
            first += 1
            request = build(first)
            tokens = await counter.count(request)
    return request, ContextFit(first, turns - first, tokens, counter.budget, counter.exact)
