"""The endpointer, sans-I/O: when the user is done, and what speech over the
assistant does to its audio.

Fed, in order of the input audio (every call carries the input's sample
position; nothing reads a clock):

- the detector's events (``vad``): windows, speech starts and ends;
- the STT's transcripts as they arrive (``transcript``) and the end of an STT
  stream (``transcripts_done``);
- whether the assistant's audio is playing (``assistant_speaking``);
- the passage of audio with nothing else to say (``advance``).

It answers with decisions (``decisions.py``). One utterance is open at a time:
from a speech start until its turn is decided; speech that resumes before then
belongs to the same utterance (a pause mid-sentence keeps one turn), and the
turn never ends while the detector says the user speaks.

The end of a turn, after the detector's speech end: ``end_silence_s`` of
silence (``unfinished_silence_s`` when the words so far sound unfinished: a
trailing "and", a number being read out) and a final transcript that came after
the STT was asked to settle (or the STT stream ended); or, when the STT is slow,
``final_wait_s`` after asking it, with the finals so far; at the latest
``max_delay_s`` after the speech end. With an end-of-turn model, each speech
end asks it (``JudgeTurn``) and its answer (``turn_judged``) shortens or
lengthens that silence (``end_rule.py``). A final that comes after the turn
closed is a ``LateTranscript``.

Before that, once the speech stopped and a final with words came after the
STT was asked to settle, a ``TentativeEnd`` (``preemptive``): the reply may
start, held unheard, while the end silence runs. At most one per stretch of
speech; speech that resumes into the utterance cancels it
(``TentativeCancelled``), and the ``EndOfTurn`` says whether its text is the
tentative one. Never while the assistant's audio plays, nor for an utterance
that began over it (barge-in has its own path).
"""

from __future__ import annotations

from ..vocab.spacing import join_words
from ..vocab.transcripts import Transcript
from .decisions import (
    NO_WORDS_MIN_S,
    Decision,
    EndOfTurn,
    EndReason,
    FinalizeStt,
    Interrupt,
    JudgeTurn,
    LateTranscript,
    NoWords,
    ResumePlayout,
    TentativeCancelled,
    TentativeEnd,
)
from .end_rule import EndRule
from .playout import Playout
from .settings import EndpointSettings
from .utterance import Closed, ClosedUtterances, Utterance
from .vad import LevelRise, SpeechEnd, SpeechStart, VadEvent, VadWindow
from .words import WordJudge


class Endpointer:
    def __init__(self, settings: EndpointSettings | None = None, sample_rate: int = 16_000) -> None:
        self.settings = settings = settings or EndpointSettings()
        self.sample_rate = sample_rate
        self._words = WordJudge(settings.backchannels, settings.continuations)
        self._end = EndRule(settings, sample_rate, self._words)
        self._play = Playout(settings, sample_rate)
        self.reset()

    @property
    def level_pause(self) -> bool:
        """Whether a ``LevelRise`` can pause the playout (the detector need not
        watch for rises otherwise)."""
        return self._play.level_pause

    def _n(self, seconds: float) -> int:
        return round(seconds * self.sample_rate)

    def reset(self) -> None:
        """A new session."""
        self._now = 0
        self._u: Utterance | None = None
        self._starts = 0  # speech starts heard (the n-th: the listener's STT stream n)
        self._closed = ClosedUtterances()
        self._play.reset()

    # inputs

    def assistant_speaking(self, speaking: bool, at_sample: int) -> list[Decision]:
        out = self.advance(at_sample)
        if speaking and not self._play.playing:
            self._play.start(self._now)
            if self._u is not None:  # now over the assistant: no reply held for it
                out.extend(self._cancel_tentative(self._u))
        elif not speaking:
            self._play.stop()
        return out + self._tick()

    def advance(self, at_sample: int) -> list[Decision]:
        """Audio up to ``at_sample`` passed. Every input first advances to its
        own sample: what fell due by then (a turn's end silence, a pause's
        resume) is decided before the input's effect, so a coarse feed decides
        as a feed advanced one sample at a time would."""
        self._now = max(self._now, at_sample)
        return self._tick()

    def vad(self, event: VadEvent) -> list[Decision]:
        if isinstance(event, VadWindow):
            out = self.advance(event.at_sample + event.samples)
            self._play.window(event, self._u)
            return out + self._tick()
        out = self.advance(event.confirmed_at)
        if isinstance(event, LevelRise):
            return out + self._play.level_rise(event, self._u) + self._tick()
        if isinstance(event, SpeechStart):
            self._starts += 1
            if self._u is not None:  # the user went on: the held reply is not theirs
                out.extend(self._cancel_tentative(self._u))
            self._speech_start(event)
        elif isinstance(event, SpeechEnd) and self._u is not None and self._u.speaking:
            u = self._u
            u.speaking, u.end_at, u.finalize_at, u.final_at = (
                False,
                event.at_sample,
                self._now,
                None,
            )
            out.append(FinalizeStt(self._now))
            u.done_probability = u.judged_at = None  # a new pause, judged anew
            if self._end.judges and u.accepted:
                out.append(JudgeTurn(self._now, u.start, event.at_sample))
        return out + self._tick()

    def transcript(
        self, t: Transcript, at_sample: int, *, start: int | None = None, settles: bool = True
    ) -> list[Decision]:
        """``start``: the number of the speech start whose audio it is (the
        n-th given to ``vad``; None: the last): one of an utterance already
        closed, decoded late, is never the open one's. ``settles``: a final of
        the stream that settles the speech so far (False: an earlier stretch's
        stream's, decoded late; its words count, but the turn still waits)."""
        out = self.advance(at_sample)
        text = t.text.strip()
        u = self._u
        if u is not None and start is not None and start < u.first_start:
            u = None
        if u is None:
            closed = self._closed.how(start)
            if t.final and text and closed in ("turn", "empty"):
                out.append(LateTranscript(text, self._now, closed == "turn"))
                self._closed.heard(start)
            return out + self._tick()
        aec = self.settings.echo == "aec"
        text = u.users_words(t, self.sample_rate, aec) if u.accepted else ""  # not: echo
        real = self._words.is_real(text)
        u.real = u.real or real
        if not t.final:
            u.partial = text
        else:
            if text:
                u.finals.append(text)
            u.partial = ""
            if u.finalize_at is not None and settles:
                u.final_at = self._now
            if real and self._play.playing and not u.interrupted:
                u.interrupted = True
                self._play.stop()
                out.append(Interrupt(join_words(u.finals), self._now))
        return out + self._tick()

    def turn_judged(
        self, probability: float | None, at_sample: int, *, speech_end: int
    ) -> list[Decision]:
        """The end-of-turn model's answer to the ``JudgeTurn`` of the speech that
        stopped at ``speech_end``: how likely the user is done (None: it could
        not judge; the silence rule alone decides). An answer for a pause the
        user has since spoken through is stale and ignored."""
        out = self.advance(at_sample)
        u = self._u
        if u is not None and not u.speaking and u.end_at == speech_end:
            u.done_probability, u.judged_at = probability, self._now
        return out + self._tick()

    def transcripts_done(self, at_sample: int) -> list[Decision]:
        """The STT stream ended: every final of the speech so far is in."""
        out = self.advance(at_sample)
        u = self._u
        if u is not None and u.finalize_at is not None and u.final_at is None:
            u.final_at = self._now
        for first in sorted(self._closed.unheard):
            out.append(NoWords(self._now, *self._closed.unheard[first]))
        self._closed.unheard.clear()
        return out + self._tick()

    def next_deadline(self) -> int | None:
        """The next sample past the latest input at which ``advance`` alone may
        decide something (an end of turn, a resume of the playout), or None when
        only new input can. A caller whose audio comes in frames calls
        ``advance`` then instead of at the next frame, so no decision waits
        for a frame's length (docs/listening.md says what that costs)."""
        u = self._u
        due: list[int] = []
        if u is not None and not u.speaking and u.end_at is not None:
            d = self._end.deadlines(u)
            due += [d.quiet_until, max(d.quiet_until, d.wait_until), d.cap]
        if self._play.speech_paused:
            # (a level pause's resume waits for the input up to its deadline:
            # the windows that would confirm it may still be on their way)
            due.append(self._play.resume_deadline(u))
        later = [at for at in due if at > self._now]
        return min(later) if later else None

    # the machinery

    def _speech_start(self, e: SpeechStart) -> None:
        u = self._u
        if u is not None:  # speech resumed before the turn was decided: one utterance
            u.speaking, u.end_at, u.finalize_at, u.final_at = True, None, None, None
            u.done_probability = u.judged_at = None
            u.tentative_sent = False
            u.run_start = u.voiced_end = e.at_sample
            u.stream_from = e.audio_from
            return
        during = self._play.playing
        loud, loud_from = self._play.take_loud(e.at_sample)
        accepted = self._play.accepts(loud)
        self._u = Utterance(
            e.at_sample, during, accepted, e.confirmed_at, e.at_sample, e.confirmed_at, loud=loud
        )
        self._u.loud_from = loud_from
        # its start paused the playout (a level pause counts once confirmed)
        self._u.paused = self._play.speech_paused
        self._u.stream_from = e.audio_from
        self._u.first_start = self._starts

    def _tick(self) -> list[Decision]:
        u = self._u
        out = self._play.tick(u, self._now)
        if u is not None and not u.speaking and u.end_at is not None:
            ended = self._maybe_end(u)
            out.extend(ended if ended else self._maybe_tentative(u))
        return out

    def _maybe_tentative(self, u: Utterance) -> list[Decision]:
        """A tentative end: the speech stopped, a final with words came after the
        STT was asked to settle, nothing of the assistant's plays or played under
        this utterance. Every condition changes only on an input, never as time
        passes, so it is dated by that input whatever the advance rate."""
        text = join_words(u.finals)
        if (
            not self.settings.preemptive
            or u.tentative_sent
            or u.final_at is None
            or not text
            or u.during_assistant
            or not u.accepted
            or self._play.playing
        ):
            return []
        assert u.end_at is not None
        u.tentative, u.tentative_sent = text, True
        return [TentativeEnd(text, self._now, u.end_at)]

    def _cancel_tentative(self, u: Utterance) -> list[Decision]:
        if u.tentative is None:
            return []
        u.tentative = None
        return [TentativeCancelled(self._now)]

    def _maybe_end(self, u: Utterance) -> list[Decision]:
        ended = self._end.decide(u, self._now)
        if ended is None:
            return []
        reason, at = ended
        return self._close(u, join_words(u.finals), reason, at)

    def _close(self, u: Utterance, text: str, reason: EndReason, at: int) -> list[Decision]:
        self._u = None
        out: list[Decision] = []
        assert u.end_at is not None
        tentative, u.tentative = u.tentative, None
        closed: Closed
        if not u.accepted or (u.during_assistant and not self._words.is_real(text)):
            closed = "dropped"  # echo, or a backchannel over the assistant
        elif not text:
            closed = "empty"
            if u.end_at - u.start >= self._n(NO_WORDS_MIN_S):  # (shorter: a cough)
                if u.final_at is not None:  # it settled empty: say so once
                    out.append(NoWords(at, u.start, u.end_at))
                else:  # still decoding: said if it ends with no words
                    self._closed.unheard[u.first_start] = (u.start, u.end_at)
        else:
            closed = "turn"
            if self._play.playing and not u.interrupted:
                self._play.stop()
                out.append(Interrupt(text, at))
            out.append(EndOfTurn(text, reason, at, u.end_at, tentative == text))
            tentative = None
        self._closed.add(u.first_start, closed)
        if tentative is not None:  # no turn: the held reply is nobody's
            out.append(TentativeCancelled(at))
        if self._play.paused_at is not None:
            out.append(ResumePlayout(at))
            self._play.paused_at = self._play.level_until = None
        return out
