"""One provider call of a reply: its attempts, retries and deadlines.

``ProviderCall.run`` streams the call, retrying while nothing has arrived, and
fills a ``CallRound`` with what the call produced — or the error that ended it:
it never raises ``ProviderError``. Two deadlines bound the waits on the stream,
whatever the provider (an SDK's or the embedded model's): the first-token
deadline until the call's first progress, then the stall deadline between one
progress and the next (``vendors/retry.py``). Each call is one OpenTelemetry ``chat
{model}`` span with its retries as events. What an output becomes (events, a
stored image) is the caller's ``take``: this module only decides when to ask
the provider again, so the retry and deadline rules live apart from reading.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Literal, Protocol

import anyio
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from ..formats.base import BuiltRequest
from ..providers.base import Provider
from ..telemetry.spans import genai_provider, mark_error, tracer
from ..vendors.errors import LlmError, ProviderError
from ..vendors.retry import FirstTokenDeadline, RetryPolicy, StallDeadline
from ..vocab.events import Block
from ..vocab.messages import ModelConfig
from ..vocab.provider_output import ProviderOutput, StopInfo, Usage
from .call_stream import CallStream, DeadlinePassed, Stalled
from .reply import MembraneItem, Retrying


@dataclass
class CallRound:
    """What one provider call produced."""

    raw: list[str] = field(default_factory=list)  # prefill: the text as written
    blocks: list[Block] = field(default_factory=list)
    native_calls: list[Block] = field(default_factory=list)  # prefill: calls made natively
    stop: StopInfo | None = None
    usage: Usage = field(default_factory=Usage)
    error: ProviderError | None = None
    produced: bool = False
    written_back: str = ""  # prefill: a stop sequence put back after the raw text


class CallSettings(Protocol):
    """What a call runs with (a ``ReplySettings`` is one)."""

    provider: Provider
    retry: RetryPolicy
    streaming: bool
    first_token_deadline_s: float | None
    stall_timeout_s: float | None


@dataclass(frozen=True)
class ProviderCall:
    """One call: ``take`` turns each output into items (it marks the round
    ``produced``, which ends retrying); ``ended`` says a policy ended the reply,
    which closes the call at once."""

    settings: CallSettings
    built: BuiltRequest
    config: ModelConfig
    mode: Literal["prefill", "chat"]
    arrived: Callable[[ProviderOutput], ProviderOutput]  # each output as it comes
    take: Callable[[ProviderOutput, CallRound], Awaitable[Sequence[MembraneItem]]]
    ended: Callable[[], bool] | None  # (None: no policy runs, none can end it)

    async def run(self, round_: CallRound) -> AsyncGenerator[MembraneItem, None]:
        """The call with retries; fills ``round_``, never raises ProviderError.
        Until the call's first progress the first-token deadline runs, over every
        attempt and the waits between them; after it, the stall deadline. Each
        retry is an event of the call's span."""
        # Not made current: this generator yields to its consumer, which runs in
        # another context, so the span is ended here, by hand.
        span = self._span()
        try:
            settings = self.settings
            deadline = FirstTokenDeadline.starting(
                settings.first_token_deadline_s, anyio.current_time()
            )
            retry = 0
            error: ProviderError | None = None
            while True:
                stall = StallDeadline(settings.stall_timeout_s)
                try:
                    async with aclosing(
                        settings.provider.stream(
                            self.built, self.config, streaming=settings.streaming
                        )
                    ) as outputs:
                        # (a policy judges each delta as it came: call_stream)
                        stream = CallStream(
                            outputs,
                            deadline,
                            stall,
                            self.arrived,
                            one_at_a_time=self.ended is not None,
                        )
                        try:
                            while (output := await stream.next()) is not None:
                                for item in await self.take(output, round_):
                                    yield item
                                if self.ended is not None and self.ended():
                                    return  # a policy ended the reply: the call is closed now
                            return
                        finally:
                            await stream.abandon()
                except ProviderError as exc:
                    error = exc
                except LlmError as exc:  # a local source's failure: not retryable
                    name = settings.provider.name  # named once, not in both error and message
                    error = ProviderError(name, "stream", str(exc).removeprefix(f"{name}: "))
                except DeadlinePassed:
                    round_.error = deadline.error(settings.provider.name, retry + 1, error)
                    return
                except Stalled:
                    if round_.stop is not None:
                        return  # the stop had come: the call was whole, only its close was late
                    error = stall.error(settings.provider.name)
                delay = self._retry_delay(round_, retry, error, deadline)
                if delay is None:
                    return
                retry += 1
                span.add_event(
                    "gen_ai.retry",
                    {"attempt": retry, "delay_s": delay, "error.type": error.kind}
                    | ({} if error.status is None else {"http.response.status_code": error.status}),
                )
                yield Retrying(retry, delay, str(error))
                await anyio.sleep(delay)
        finally:
            _end_span(span, round_)

    def _retry_delay(
        self,
        round_: CallRound,
        retry: int,
        error: ProviderError,
        deadline: FirstTokenDeadline,
    ) -> float | None:
        """How long to wait before the next attempt; None: the call ends, with
        ``round_.error`` set here."""
        settings = self.settings
        now = anyio.current_time()
        if not round_.produced and deadline.passed(now):
            round_.error = deadline.error(settings.provider.name, retry + 1, error)
            return None
        if round_.produced or not settings.retry.should_retry(retry, error):
            round_.error = error
            return None
        delay = settings.retry.delay_s(retry, error)
        if not deadline.allows_wait(delay, now):
            round_.error = deadline.error(settings.provider.name, retry + 1, error)
            return None
        return delay

    def _span(self) -> Span:
        config = self.config
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": genai_provider(self.settings.provider.name),
            "gen_ai.request.model": config.model,
            "gen_ai.request.max_tokens": config.max_tokens,
            "voice.llm.source": self.settings.provider.name,
            "voice.llm.mode": self.mode,
        }
        if config.temperature is not None:
            attributes["gen_ai.request.temperature"] = config.temperature
        return tracer().start_span(f"chat {config.model}", attributes=attributes)


def _end_span(span: Span, round_: CallRound) -> None:
    usage = round_.usage
    span.set_attributes(
        {
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "voice.llm.produced": round_.produced,
        }
    )
    if round_.stop is not None:
        span.set_attribute("gen_ai.response.finish_reasons", [round_.stop.reason])
    if round_.error is not None:
        mark_error(span, round_.error.kind)
    span.end()
