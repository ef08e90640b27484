"""A conversation by voice: what the listener hears becomes the session's turns.

``converse`` runs a ``Listener`` over the audio frames and, for each user turn
it decides, a turn of the ``Session`` (the speaking half, unchanged). Speech
over the assistant pauses its audio at once (``Session.pause_playout``: nothing
discarded); when the endpointer judges it real, it interrupts the turn through
the same path as Ctrl-C (``Session.interrupt``: LLM, voice and sink stop
together; the history keeps what was heard), and noise, a cough or "mm-hm"
resumes it from the same sample. A new user turn while the last
reply still plays interrupts it first. When the input ends, the reply being
spoken is let finish.

Preemptive replies: when the listener says the user has probably finished
(``TentativeTurn``, while the end silence still runs) and the sink can hold
(``Session.hold_playout``: real time), the turn starts at once with its audio
held; the ``UserTurn`` with the same words resumes it (heard at once), other
words or a ``TentativeDropped`` throw it away unheard and take it out of the
history (``Session.forget_turn``), and the new words get a fresh turn.

Each answered turn comes with its voice-to-voice latency — the end of the
user's speech to the reply's first audio — split into its parts
(``VoiceToVoice``), and its report says why the turn ended (``TurnEnd``: the
endpointer's reason, the end-of-turn model's time, and whether the words
interrupted the assistant: an ``Interrupt`` came before them).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from ..listening.decisions import Interrupt, PausePlayout
from ..sources.base import Frame
from .latency_report import TurnEnd, endpoint_reason
from .listening import (
    BargeIn,
    FrameInlet,
    Listener,
    ListenItem,
    NoWordsHeard,
    TentativeDropped,
    TentativeTurn,
    UserTurn,
)
from .session import Session
from .turn import Turn, TurnResult


@dataclass(frozen=True, slots=True)
class VoiceToVoice:
    """Milliseconds from the end of the user's speech (``speech_end``):

    - ``endpointing_ms``: until the endpointer ended the turn (the silence it
      waits for, and the final transcript's settling);
    - ``transcript_final_ms``: until the last final transcript came (None: none
      came, the turn ended on the wait);
    - ``request_ms``: until the reply's request was sent;
    - ``voice_to_voice_ms``: until the reply's first audio (None: no audio).

    ``preemptive``: the reply started at a tentative end, held until the turn
    was decided (then ``request_ms`` < ``endpointing_ms``).
    """

    endpointing_ms: float
    transcript_final_ms: float | None
    request_ms: float
    voice_to_voice_ms: float | None
    preemptive: bool = False

    def to_dict(self) -> dict[str, float | bool | None]:
        return {
            "endpointing_ms": self.endpointing_ms,
            "transcript_final_ms": self.transcript_final_ms,
            "request_ms": self.request_ms,
            "voice_to_voice_ms": self.voice_to_voice_ms,
            "preemptive": self.preemptive,
        }

    def line(self, end: TurnEnd | None = None) -> str:
        """One line for the terminal, under the latency table; ``end``: why the
        turn ended, said after the endpointing time."""
        total = "—" if self.voice_to_voice_ms is None else f"{self.voice_to_voice_ms:.0f} ms"
        final = (
            ""
            if self.transcript_final_ms is None
            else f", final transcript {self.transcript_final_ms:.0f} ms"
        )
        held = ", held from a tentative end" if self.preemptive else ""
        by = "" if end is None else f" by {end.line()}"
        return (
            f"  voice to voice  {total} (end of speech → turn {self.endpointing_ms:.0f} ms{by}"
            f"{final}, → request {self.request_ms:.0f} ms{held})"
        )


@dataclass(frozen=True, slots=True)
class PlayoutPause:
    """The reply's audio held while the user seemed to speak over it, from
    ``paused_ns`` to ``ended_ns`` (``time.perf_counter_ns``; None: the turn
    ended first). ``outcome``: ``resumed`` (it was nothing real) or
    ``interrupted``."""

    paused_ns: int
    ended_ns: int | None
    outcome: str | None

    def to_dict(self, origin_ns: int) -> dict[str, float | str | None]:
        def ms(ns: int | None) -> float | None:
            return None if ns is None else round((ns - origin_ns) / 1e6, 3)

        return {
            "paused_ms": ms(self.paused_ns),
            "ended_ms": ms(self.ended_ns),
            "outcome": self.outcome,
        }


@dataclass(frozen=True, slots=True)
class VoiceTurn:
    """A turn the user spoke: what was heard, the reply, the latency, and the
    pauses of its audio (speech over it). ``discarded``: held replies thrown
    away in the conversation so far, and their LLM deltas (the cost of
    preemptive replies)."""

    heard: UserTurn
    result: TurnResult
    latency: VoiceToVoice
    pauses: tuple[PlayoutPause, ...] = ()
    discarded: Discarded = field(default_factory=lambda: Discarded())


@dataclass(frozen=True, slots=True)
class Discarded:
    replies: int = 0
    tokens: int = 0


@dataclass(slots=True)
class _Held:
    """A reply started at a tentative end, its audio held until it is decided."""

    heard: UserTurn
    done: anyio.Event = field(default_factory=anyio.Event)  # its task ended
    decided: anyio.Event = field(default_factory=anyio.Event)
    committed: UserTurn | None = None  # the turn it is the reply to, once decided
    end: TurnEnd | None = None  # why that turn ended
    turn: Turn | None = None


def turn_end(heard: UserTurn, barge_in: bool) -> TurnEnd:
    """Why ``heard`` ended, for its turn's report; ``barge_in``: it interrupted
    the assistant."""
    return TurnEnd(endpoint_reason(heard.reason), barge_in, heard.turn_model_ms)


def voice_to_voice(
    heard: UserTurn, request_ns: int, result: TurnResult, preemptive: bool = False
) -> VoiceToVoice:
    def ms(ns: int) -> float:
        return round((ns - heard.speech_end_ns) / 1e6, 3)

    first_audio = result.report.stamps_ms.get("first_audio")
    return VoiceToVoice(
        endpointing_ms=ms(heard.decided_ns),
        transcript_final_ms=None if heard.final_ns is None else ms(heard.final_ns),
        request_ms=ms(request_ns),
        voice_to_voice_ms=None if first_audio is None else round(ms(request_ns) + first_audio, 3),
        preemptive=preemptive,
    )


async def converse(
    session: Session,
    listener: Listener,
    frames: AsyncIterator[Frame] | FrameInlet,
    *,
    on_item: Callable[[ListenItem], None] = lambda item: None,
    on_turn_start: Callable[[UserTurn], None] = lambda heard: None,
    on_turn: Callable[[VoiceTurn], None] = lambda turn: None,
    on_discarded: Callable[[], None] = lambda: None,
    wait_idle: Callable[[], Awaitable[None]] | None = None,
) -> list[VoiceTurn]:
    """Hold the conversation until the frames end; the turns answered, in order.
    ``on_turn_start``: a turn the user spoke begins its reply (for a held reply:
    when it is decided theirs); ``on_discarded``: a held reply that had started
    was thrown away unheard; ``wait_idle``: awaited before a spoken turn starts,
    while the session may run turns of its own (a server's typed turns)."""
    turns: list[VoiceTurn] = []
    started: list[int] = []  # the request time of the turn running
    previous = session.on_turn_start
    held: _Held | None = None  # a reply held for a tentative end, not yet decided
    starting: _Held | None = None  # the held reply whose turn is being set up
    ending: TurnEnd | None = None  # why the user's turn being set up ended
    barged = False  # an Interrupt came: the next user turn is what interrupted
    discarded = Discarded()

    def note_start(turn: Turn) -> None:
        nonlocal starting, ending
        started.append(turn.metrics.started_ns)
        if starting is not None:
            hold, starting = starting, None
            hold.turn = turn
            if hold.decided.is_set() and hold.committed is None:  # thrown away meanwhile
                turn.interrupt()
            # Until it is decided, a held reply's is the tentative end's (``tentative``).
            turn.metrics.end = hold.end or turn_end(hold.heard, barge_in=False)
        elif ending is not None:  # (else a typed turn of the session's own)
            turn.metrics.end, ending = ending, None
        previous(turn)

    session.on_turn_start = note_start
    send, receive = anyio.create_memory_object_stream[ListenItem](64)
    running: anyio.Event | None = None
    pauses: list[PlayoutPause] = []  # the running turn's

    def end_pause(outcome: str) -> None:
        if pauses and pauses[-1].ended_ns is None:
            pauses[-1] = PlayoutPause(pauses[-1].paused_ns, time.perf_counter_ns(), outcome)

    async def answer(
        heard: UserTurn, done: anyio.Event, hold: _Held | None = None, end: TurnEnd | None = None
    ) -> None:
        """``end``: why ``heard`` ended (a held reply's: known once it is decided)."""
        nonlocal starting, ending, discarded
        if hold is None:
            if wait_idle is not None:
                await wait_idle()
            listener.assistant_speaking(True)
        pauses.clear()
        try:
            if hold is None:
                on_turn_start(heard)
            elif hold.decided.is_set() and hold.committed is None:
                return  # thrown away before it began
            started.clear()
            starting, ending = hold, end
            result = await session.turn(heard.text)
            if hold is not None:
                await hold.decided.wait()
                if hold.committed is None:  # never heard: as if never asked
                    session.forget_turn(result)
                    discarded = Discarded(
                        discarded.replies + 1, discarded.tokens + result.report.tokens
                    )
                    on_discarded()
                    return
                heard, end = hold.committed, hold.end
            if end is not None and result.report.end != end:  # (ended before it was decided)
                result = replace(result, report=replace(result.report, end=end))
            request_ns = started[0] if started else time.perf_counter_ns()
            latency = voice_to_voice(heard, request_ns, result, preemptive=hold is not None)
            voice = VoiceTurn(heard, result, latency, tuple(pauses), discarded)
            turns.append(voice)
            on_turn(voice)
        finally:
            if ending is end:  # (not taken: the turn never started)
                ending = None
            if hold is not None and hold.committed is None:
                session.resume_playout()  # (a stop already ended the hold: nothing then)
            listener.assistant_speaking(False)
            done.set()

    async def answer_after(before: anyio.Event, hold: _Held) -> None:
        """The held reply of a tentative end that came while the last reply (a
        thrown-away one, still winding down: llama.cpp finishes reading its
        prompt) had not ended: started once it has."""
        await before.wait()
        if not hold.decided.is_set() and not session.hold_playout():
            await hold.decided.wait()  # cannot hold after all: start once decided
        await answer(hold.heard, hold.done, hold)

    def throw_away() -> None:
        nonlocal held
        if held is not None:
            hold, held = held, None
            if hold.turn is not None:
                hold.turn.interrupt()  # silences a sink that played nothing
            hold.decided.set()

    def commit(heard: UserTurn) -> None:
        nonlocal held, barged
        assert held is not None
        hold, held = held, None
        hold.committed, hold.end, barged = heard, turn_end(heard, barged), False
        if hold.turn is not None:
            hold.turn.metrics.end = hold.end
        listener.assistant_speaking(True)
        session.resume_playout()  # heard from now on
        on_turn_start(heard)
        hold.decided.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.run, frames, send)
            async with receive:
                async for item in receive:
                    on_item(item)
                    if isinstance(item, BargeIn):
                        decision = item.decision
                        if isinstance(decision, Interrupt):
                            barged = True
                            end_pause("interrupted")
                            session.interrupt()
                        elif isinstance(decision, PausePlayout):
                            if session.pause_playout():
                                pauses.append(PlayoutPause(time.perf_counter_ns(), None, None))
                        else:
                            session.resume_playout()
                            end_pause("resumed")
                    elif isinstance(item, TentativeTurn) and held is None:
                        if running is None or running.is_set():
                            if session.hold_playout():
                                held = _Held(item.turn)
                                running = held.done
                                tg.start_soon(answer, item.turn, held.done, held)
                        else:  # (never over a reply being heard: the endpointer)
                            held = _Held(item.turn)
                            previous_done, running = running, held.done
                            tg.start_soon(answer_after, previous_done, held)
                    elif isinstance(item, TentativeDropped):
                        throw_away()
                    elif isinstance(item, NoWordsHeard):
                        # The speech that interrupted settled with no words: no turn.
                        # (Not on a ListenError: after an STT failure the user says
                        # again what interrupted the reply; and a failed end-of-turn
                        # model is one too.)
                        barged = False
                    elif isinstance(item, UserTurn):
                        if held is not None and item.tentative:
                            commit(item)
                            continue
                        throw_away()
                        if running is not None and not running.is_set():
                            session.interrupt()  # the user moved on: stop the last reply
                            await running.wait()
                        running = anyio.Event()
                        tg.start_soon(answer, item, running, None, turn_end(item, barged))
                        barged = False
                throw_away()  # (the listener decides every tentative turn)
            # The input ended: the reply being spoken is let finish.
    finally:
        session.on_turn_start = previous
    return turns


def turn_record(turn: VoiceTurn) -> dict[str, Any]:
    """The turn's latency report with what was heard and voice-to-voice."""
    record = turn.result.report.to_dict()
    record["heard"] = {"text": turn.heard.text, "reason": turn.heard.reason}
    record["voice_to_voice"] = turn.latency.to_dict()
    # Times from the end of the user's speech, as voice_to_voice's.
    record["playout_pauses"] = [p.to_dict(turn.heard.speech_end_ns) for p in turn.pauses]
    record["preemptive"] = turn.latency.preemptive
    # Held replies thrown away in the session so far: what preemption cost.
    record["held_discarded"] = {
        "replies": turn.discarded.replies,
        "llm_tokens": turn.discarded.tokens,
    }
    return record
