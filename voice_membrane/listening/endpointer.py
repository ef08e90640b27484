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

from collections import deque

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
    PausePlayout,
    ResumePlayout,
    TentativeCancelled,
    TentativeEnd,
)
from .echo import EchoLevel
from .end_rule import EndRule
from .settings import EndpointSettings
from .utterance import Closed, ClosedUtterances, Utterance
from .vad import LevelRise, SpeechEnd, SpeechStart, VadEvent, VadWindow
from .words import WordJudge

_SPEECH_P = 0.5  # a window this probable is speech, for the echo judgement
_ACCEPT_S = 0.2  # user-loud speech that makes an utterance over playout the user's
_LEARN_S = 0.5  # echo heard before its level is trusted
_BLIP_QUIET_S = 0.25  # after a pause on speech the detector never confirmed: resume
PHONE_RATE = 8000  # level_pause "auto": on at this rate and below (a phone call)


class Endpointer:
    def __init__(self, settings: EndpointSettings | None = None, sample_rate: int = 16_000) -> None:
        self.settings = settings = settings or EndpointSettings()
        self.sample_rate = sample_rate
        self._words = WordJudge(settings.backchannels, settings.continuations)
        self._end = EndRule(settings, sample_rate, self._words)
        self._echo = EchoLevel(
            settings.echo_margin_db, self._n(settings.echo_warmup_s), self._n(_LEARN_S)
        )
        mode = settings.level_pause
        self._level_pause = mode == "on" or (mode == "auto" and sample_rate <= PHONE_RATE)
        self.reset()

    @property
    def level_pause(self) -> bool:
        """Whether a ``LevelRise`` can pause the playout (the detector need not
        watch for rises otherwise)."""
        return self._level_pause

    def _n(self, seconds: float) -> int:
        return round(seconds * self.sample_rate)

    def reset(self) -> None:
        """A new session."""
        self._now = 0
        self._u: Utterance | None = None
        self._starts = 0  # speech starts heard (the n-th: the listener's STT stream n)
        self._closed = ClosedUtterances()
        self._playing_since: int | None = None  # the assistant's audio plays (or is paused)
        self._paused_at: int | None = None
        self._loud: deque[tuple[int, int]] = deque()  # user-loud windows not yet in an utterance
        # the current stretch of speech windows over the playout judged the user's
        self._run: tuple[int, int] | None = None  # (start, end)
        self._run_paused = False  # the current stretch has paused the playout once
        self._run_end = 0  # the end of the last such window
        # a pause on a level rise, until the model confirms speech (or resume then)
        self._level_until: int | None = None
        self._not_before = 0  # a speech pause is not dated before the last level resume
        self._echo.reset()

    # inputs

    def assistant_speaking(self, speaking: bool, at_sample: int) -> list[Decision]:
        out = self.advance(at_sample)
        if speaking and self._playing_since is None:
            self._playing_since = self._now
            if self._u is not None:  # now over the assistant: no reply held for it
                out.extend(self._cancel_tentative(self._u))
        elif not speaking:
            self._playing_since = self._paused_at = self._level_until = None
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
            self._window(event)
            return out + self._tick()
        out = self.advance(event.confirmed_at)
        if isinstance(event, LevelRise):
            return out + self._level_rise(event) + self._tick()
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
                self._closed.unheard = None
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
            if real and self._playing_since is not None and not u.interrupted:
                u.interrupted = True
                self._playing_since = self._paused_at = self._level_until = None
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
        if (unheard := self._closed.unheard) is not None:
            self._closed.unheard = None
            out.append(NoWords(self._now, *unheard))
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
        if self._paused_at is not None and self._level_until is None:
            # (a level pause's resume waits for the input up to its deadline:
            # the windows that would confirm it may still be on their way)
            due.append(self._resume_deadline(u))
        later = [at for at in due if at > self._now]
        return min(later) if later else None

    # the machinery

    def _playout(self) -> bool:
        return self._playing_since is not None and self._paused_at is None

    def _window(self, w: VadWindow) -> None:
        if w.probability < _SPEECH_P:
            self._run = None
            return
        u = self._u
        if u is not None and u.speaking:
            u.voiced_end = w.at_sample + w.samples
        if self._playing_since is None:
            return
        if u is not None and u.accepted:
            self._note_run(w)
            return  # the user's own speech teaches nothing about the echo
        if self._paused_at is not None and self._level_until is None:
            loud = True  # the assistant is silent: what is heard is the user
        elif self.settings.echo == "aec":
            loud = True
        elif self.settings.echo == "half_duplex":
            loud = False
        else:
            loud = self._echo.judge(w.level_dbfs, w.samples, w.at_sample - self._playing_since)
        if not loud:
            self._run = None
            return
        self._note_run(w)
        if u is None:
            self._loud.append((w.at_sample, w.samples))
            while self._loud and self._loud[0][0] < w.at_sample - self._n(2.0):
                self._loud.popleft()
        else:
            u.loud += w.samples
            if u.loud_from is None:
                u.loud_from = w.at_sample
            if not u.accepted and u.loud >= self._n(_ACCEPT_S):
                u.accepted, u.accepted_at = True, w.at_sample + w.samples

    def _note_run(self, w: VadWindow) -> None:
        end = w.at_sample + w.samples
        run = self._run
        if run is None or w.at_sample > run[1]:
            run, self._run_paused = (w.at_sample, end), False
        self._run = (run[0], end)
        self._run_end = end
        until = self._level_until
        if (
            until is not None
            and end < until  # (one ending at the deadline comes after its resume)
            and end - run[0] >= self._n(self.settings.pause_min_speech_s)
        ):
            self._confirm_level()

    def _level_rise(self, e: LevelRise) -> list[Decision]:
        """A level rise over the playout pauses it at once, for the model to
        confirm within ``level_confirm_s``: past the echo warm-up, and in
        ``"level"`` echo mode only when it is louder than the echo by the
        margin (the front's gate has kept the room's background out)."""
        s, u = self.settings, self._u
        if not self._level_pause or not self._playout() or s.echo == "half_duplex":
            return []
        if u is not None and (u.paused or u.interrupted):
            return []  # an utterance pauses the playout once
        assert self._playing_since is not None
        heard = e.confirmed_at - self._playing_since
        if heard < self._n(s.echo_warmup_s):
            return []
        if s.echo == "level" and not self._echo.louder(e.level_dbfs, heard):
            return []
        self._paused_at = e.confirmed_at
        self._level_until = e.confirmed_at + self._n(s.level_confirm_s)
        return [PausePlayout(e.confirmed_at)]

    def _confirm_level(self) -> None:
        """The model heard speech: the level pause is a speech pause now."""
        self._level_until = None
        self._run_paused = True
        if self._u is not None:
            self._u.paused = True

    def _speech_start(self, e: SpeechStart) -> None:
        u = self._u
        if u is not None:  # speech resumed before the turn was decided: one utterance
            u.speaking, u.end_at, u.finalize_at, u.final_at = True, None, None, None
            u.done_probability = u.judged_at = None
            u.tentative_sent = False
            u.run_start = u.voiced_end = e.at_sample
            u.stream_from = e.audio_from
            return
        during = self._playing_since is not None
        loud_windows = [(at, n) for at, n in self._loud if at >= e.at_sample]
        loud = sum(n for _, n in loud_windows)
        self._loud.clear()
        accepted = not during or self.settings.echo == "aec" or loud >= self._n(_ACCEPT_S)
        if self.settings.echo == "half_duplex" and during:
            accepted = False
        self._u = Utterance(
            e.at_sample, during, accepted, e.confirmed_at, e.at_sample, e.confirmed_at, loud=loud
        )
        self._u.loud_from = loud_windows[0][0] if loud_windows else None
        # its start paused the playout (a level pause counts once confirmed)
        self._u.paused = self._paused_at is not None and self._level_until is None
        self._u.stream_from = e.audio_from
        self._u.first_start = self._starts

    def _tick(self) -> list[Decision]:
        out: list[Decision] = []
        u = self._u
        if self._playout() and not (u is not None and u.interrupted):
            pause_at = self._pause_at(u)
            if pause_at is not None:
                self._paused_at = pause_at
                self._run_paused = True
                if u is not None:
                    u.paused = True
                out.append(PausePlayout(pause_at))
        if self._level_until is not None and u is not None and u.accepted and u.real:
            self._confirm_level()
        if self._level_until is not None:
            if self._now >= self._level_until:  # the model heard no speech in time
                out.append(ResumePlayout(self._level_until))
                self._not_before = self._level_until
                self._paused_at = self._level_until = None
        elif self._paused_at is not None and not (u is not None and u.real):
            resume_at = self._resume_at(u)
            if resume_at is not None:
                out.append(ResumePlayout(resume_at))
                self._paused_at = None
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
            or self._playing_since is not None
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

    def _pause_at(self, u: Utterance | None) -> int | None:
        """Where the playout should pause, if it should: real words at once;
        ``pause_min_speech_s`` of speech windows judged the user's, after the
        echo warm-up, dated where that much had been heard (not when this call
        came), whether or not the detector has confirmed a start yet."""
        s, now = self.settings, self._now
        assert self._playing_since is not None
        if u is not None and u.accepted and u.real:
            return now
        warm = self._playing_since + self._n(s.echo_warmup_s)
        need = self._n(s.pause_min_speech_s)
        if self._run is not None and not self._run_paused and not (u is not None and u.paused):
            start, end = self._run
            at = max(start + need, warm, self._not_before)
            if end >= at:
                return at
        if u is not None and u.accepted and u.speaking and not u.paused:
            # speech heard up to the mark: a stop the detector has not confirmed
            # yet must not count as speech
            at = max(u.run_start + need, u.accepted_at, warm, self._not_before)
            if u.voiced_end >= at:
                return at
        return None

    def _resume_at(self, u: Utterance | None) -> int | None:
        """Where a pause that found nothing real ends: the speech it paused for
        was never confirmed and ``_BLIP_QUIET_S`` passed; or its utterance is
        over and settled with no real words (a cough, "mm-hm"); or
        ``false_interruption_s`` passed (noise that goes on)."""
        now = self._now
        if u is not None and not u.speaking and u.final_at is not None:
            return now
        resume_at = self._resume_deadline(u)
        return min(now, resume_at) if now >= resume_at else None

    def _resume_deadline(self, u: Utterance | None) -> int:
        """When a pause resumes by time alone: ``_BLIP_QUIET_S`` after the
        speech that caused it, or ``false_interruption_s`` into an utterance."""
        assert self._paused_at is not None
        if u is None:
            return max(self._paused_at, self._run_end + self._n(_BLIP_QUIET_S))
        return self._paused_at + self._n(self.settings.false_interruption_s)

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
                    self._closed.unheard = (u.start, u.end_at)
        else:
            closed = "turn"
            if self._playing_since is not None and not u.interrupted:
                self._playing_since = self._paused_at = self._level_until = None
                out.append(Interrupt(text, at))
            out.append(EndOfTurn(text, reason, at, u.end_at, tentative == text))
            tentative = None
        self._closed.add(u.first_start, closed)
        if tentative is not None:  # no turn: the held reply is nobody's
            out.append(TentativeCancelled(at))
        if self._paused_at is not None:
            out.append(ResumePlayout(at))
            self._paused_at = self._level_until = None
        return out
