"""``voice-membrane bench --twilio URL``: a running ``serve``'s phone route
measured as a phone call sees it, with the fake Twilio caller (the calls in
this process): each of ``calls`` calls says the question ``turns`` times and,
``barge_after_s`` into each answer, "stop" over it. Per question: *voice to
voice* and *barge-in* (docs/bench.md), whole waits, the engines' included.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import soundfile as sf  # type: ignore[import-untyped]

from ..pipeline.config import ConfigError
from .stats import nearest_rank
from .voice_caller import CallerPlan, CallerResult, VoiceTurnRecord
from .voice_callers import run_callers

LISTENING = Path(__file__).resolve().parents[2] / "audio_fixtures" / "listening"
QUESTION = LISTENING / "weather.wav"
INTERRUPT = LISTENING / "stop.wav"
TURN_TIMEOUT_S = 60.0  # against a hung server only
TWILIO_TOKEN_VARIABLE = "TWILIO_AUTH_TOKEN"  # as serve reads it
QUESTIONS = 3  # per call, unless --turns says otherwise


@dataclass(frozen=True, slots=True)
class PhoneBenchOptions:
    url: str
    calls: int = 1
    turns: int = QUESTIONS
    question: Path = QUESTION
    barge_after_s: float = 3.5  # past the endpointer's 3 s echo warm-up
    sign_url: str | None = None  # the public URL the calls are signed for (serve's --twilio-url)

    def plan(self) -> CallerPlan:
        """The callers' plan (``ConfigError``, one line, for options that cannot run)."""
        from .voice_serve import voiced_span

        if not self.url.startswith(("ws://", "wss://")):
            raise ConfigError(f"--twilio {self.url}: a ws:// or wss:// address (…/v1/twilio)")
        if self.sign_url is not None:
            _check_sign_url(self.sign_url)
        if self.turns < 1 or self.calls < 1:
            raise ConfigError("--turns and --concurrency must be ≥ 1")
        rate = _mono_rate(self.question)
        interrupt = None
        onset = 0
        if self.barge_after_s > 0:
            interrupt = str(INTERRUPT)
            if _mono_rate(INTERRUPT) != rate:  # both are said at one rate
                raise ConfigError(f"--input {self.question}: a {_mono_rate(INTERRUPT)} Hz WAV")
            onset = voiced_span(interrupt, rate)[0]
        return CallerPlan(
            question=str(self.question),
            voiced_end=voiced_span(str(self.question), rate)[1],
            sample_rate=rate,
            frame_ms=20,
            output_rate=8000,
            turns=self.turns,
            ramp_s=0.0 if self.calls == 1 else 1.0,
            think_s=0.5,
            turn_timeout_s=TURN_TIMEOUT_S,
            route="twilio",
            interrupt=interrupt,
            interrupt_onset=onset,
            interrupt_after_s=self.barge_after_s,
            sign_url=self.sign_url,
        )


def _check_sign_url(url: str) -> None:
    """``--twilio-sign-url``: serve's ``--twilio-url`` (wss://, as Twilio calls), and
    the auth token to sign with."""
    parts = urlsplit(url)
    if parts.scheme != "wss" or not parts.hostname or parts.query:
        raise ConfigError(
            f"--twilio-sign-url {url}: the public wss:// URL serve's --twilio-url names "
            "(wss://HOST/…/v1/twilio, no query)"
        )
    if not os.environ.get(TWILIO_TOKEN_VARIABLE):
        raise ConfigError(
            f"--twilio-sign-url signs with the auth token: set ${TWILIO_TOKEN_VARIABLE}"
        )


def _mono_rate(path: Path | str) -> int:
    try:
        info = sf.info(str(path))
    except (RuntimeError, OSError) as exc:
        raise ConfigError(f"{path}: not a sound file ({exc})") from None
    if info.channels != 1:
        raise ConfigError(f"{path}: a mono recording is needed")
    return int(info.samplerate)


async def run_phone_bench(
    options: PhoneBenchOptions, on_turn: Callable[[VoiceTurnRecord], None] | None = None
) -> CallerResult:
    """The calls, with the route appended to ``url`` by the caller; ``on_turn``
    told of each question once it is done."""
    plan = options.plan()
    url = options.url.removesuffix("/").removesuffix("/v1/twilio")

    async def go() -> None:
        pass

    return await run_callers(url, plan, options.calls, 0, go, on_turn)


class Progress:
    """Each question's line as it is done (calls numbered as they first answer):
    a run of several calls takes minutes, and says where it is meanwhile."""

    def __init__(self, options: PhoneBenchOptions, say: Callable[[str], None]) -> None:
        self.options, self.say = options, say
        self._calls: dict[str | None, int] = {}

    def __call__(self, turn: VoiceTurnRecord) -> None:
        call = self._calls.setdefault(turn.call, len(self._calls) + 1)
        self.say(question_line(call, turn, self.options))


def question_line(call: int, turn: VoiceTurnRecord, options: PhoneBenchOptions) -> str:
    figures = [f"voice to voice {_ms(turn.voice_to_voice_ms)}"]
    if options.barge_after_s > 0:
        figures.append(f"barge-in (onset → clear) {_ms(turn.barge_in_ms)}")
    errors = f" — {', '.join(turn.errors)}" if turn.errors else ""
    return f"call {call}, question {turn.number}: {', '.join(figures)}{errors}"


def phone_lines(result: CallerResult, options: PhoneBenchOptions) -> list[str]:
    """The errors and the spreads, after the questions' lines: the end of ``bench --twilio``."""
    lines = [f"error: {error}" for error in result.errors]
    v2v = [t.voice_to_voice_ms for t in result.turns if t.voice_to_voice_ms is not None]
    barge = [t.barge_in_ms for t in result.turns if t.barge_in_ms is not None]
    lines.append(f"voice to voice, ms: {_spread(v2v)}")
    if options.barge_after_s > 0:
        lines.append(f"barge-in, onset → clear, ms: {_spread(barge)}")
    return lines


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"


def _ms(value: float | None) -> str:
    # (not a dash: a question's errors follow one, "— no answer in time")
    return "none" if value is None else f"{value:.0f} ms"


def _spread(values: list[float]) -> str:
    if not values:
        return "none measured"
    p50, p95 = nearest_rank(values, 0.5), nearest_rank(values, 0.95)
    return f"p50 {p50:.0f} / p95 {p95:.0f} / max {max(values):.0f} over {len(values)}"


def phone_bench_main(args: Any, user_error: Callable[[str, Exception], None]) -> None:
    """The CLI's ``bench --twilio``: prints a line per question and the spreads;
    exits 1 when nothing was measured."""
    question = args.input[0] if args.input else QUESTION
    turns = QUESTIONS if args.turns is None else args.turns  # (not bench's 20 prompts)
    options = PhoneBenchOptions(
        args.twilio, args.concurrency, turns, Path(question), sign_url=args.twilio_sign_url
    )
    say = partial(print, flush=True)
    try:
        options.plan()
        calls = _count(options.calls, "call")
        say(
            f"calling {options.url}: {calls}, {_count(turns, 'question')} each, a line per question"
        )
        result = anyio.run(run_phone_bench, options, Progress(options, say))
    except Exception as exc:
        user_error("bench", exc)  # a ConfigError or a refused call: one line, exit 2
        raise
    for line in phone_lines(result, options):
        say(line)
    if not any(t.voice_to_voice_ms is not None for t in result.turns):
        sys.exit(1)
