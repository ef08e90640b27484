"""The assistant's playout as the endpointer follows it, sans-I/O: whether it
plays, whether speech over it paused it, and when such a pause resumes.

Speech windows over the playout are judged the user's or the echo's
(``echo``: by level, ``echo.py``; all the user's when the device cancels the
echo; none in half duplex). ``pause_min_speech_s`` of the user's pauses the
playout, dated where that much had been heard; real words pause it at once. A
level rise (a phone call's quick pause, ``level_pause``) pauses it before the
model hears speech, for ``level_confirm_s``. A pause that finds nothing real
resumes: its speech was never confirmed (``_BLIP_QUIET_S`` later), its
utterance settled with no real words, or ``false_interruption_s`` passed.
"""

from __future__ import annotations

from collections import deque

from .decisions import Decision, PausePlayout, ResumePlayout
from .echo import EchoLevel
from .settings import EndpointSettings
from .utterance import Utterance
from .vad import LevelRise, VadWindow

_SPEECH_P = 0.5  # a window this probable is speech, for the echo judgement
_ACCEPT_S = 0.2  # user-loud speech that makes an utterance over playout the user's
_LEARN_S = 0.5  # echo heard before its level is trusted
_BLIP_QUIET_S = 0.25  # after a pause on speech the detector never confirmed: resume
PHONE_RATE = 8000  # level_pause "auto": on at this rate and below (a phone call)


class Playout:
    def __init__(self, settings: EndpointSettings, sample_rate: int) -> None:
        self.settings, self.sample_rate = settings, sample_rate
        self._echo = EchoLevel(
            settings.echo_margin_db, self._n(settings.echo_warmup_s), self._n(_LEARN_S)
        )
        mode = settings.level_pause
        self.level_pause = mode == "on" or (mode == "auto" and sample_rate <= PHONE_RATE)
        self.reset()

    def _n(self, seconds: float) -> int:
        return round(seconds * self.sample_rate)

    def reset(self) -> None:
        self.playing_since: int | None = None  # the assistant's audio plays (or is paused)
        self.paused_at: int | None = None
        self._loud: deque[tuple[int, int]] = deque()  # user-loud windows not yet in an utterance
        # the current stretch of speech windows over the playout judged the user's
        self._run: tuple[int, int] | None = None  # (start, end)
        self._run_paused = False  # the current stretch has paused the playout once
        self._run_end = 0  # the end of the last such window
        # a pause on a level rise, until the model confirms speech (or resume then)
        self.level_until: int | None = None
        self._not_before = 0  # a speech pause is not dated before the last level resume
        self._echo.reset()

    @property
    def playing(self) -> bool:
        return self.playing_since is not None

    @property
    def sounding(self) -> bool:
        """Playing and not paused."""
        return self.playing_since is not None and self.paused_at is None

    @property
    def speech_paused(self) -> bool:
        """Paused by speech (not by a level rise the model has yet to confirm)."""
        return self.paused_at is not None and self.level_until is None

    def start(self, now: int) -> None:
        if self.playing_since is None:
            self.playing_since = now

    def stop(self) -> None:
        """The playout ended, or was interrupted."""
        self.playing_since = self.paused_at = self.level_until = None

    def window(self, w: VadWindow, u: Utterance | None) -> None:
        """A detector window: over the playout, whose speech it is."""
        if w.probability < _SPEECH_P:
            self._run = None
            return
        if u is not None and u.speaking:
            u.voiced_end = w.at_sample + w.samples
        if self.playing_since is None:
            return
        if u is not None and u.accepted:
            self._note_run(w, u)
            return  # the user's own speech teaches nothing about the echo
        if self.speech_paused:
            loud = True  # the assistant is silent: what is heard is the user
        elif self.settings.echo == "aec":
            loud = True
        elif self.settings.echo == "half_duplex":
            loud = False
        else:
            loud = self._echo.judge(w.level_dbfs, w.samples, w.at_sample - self.playing_since)
        if not loud:
            self._run = None
            return
        self._note_run(w, u)
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

    def _note_run(self, w: VadWindow, u: Utterance | None) -> None:
        end = w.at_sample + w.samples
        run = self._run
        if run is None or w.at_sample > run[1]:
            run, self._run_paused = (w.at_sample, end), False
        self._run = (run[0], end)
        self._run_end = end
        until = self.level_until
        if (
            until is not None
            and end < until  # (one ending at the deadline comes after its resume)
            and end - run[0] >= self._n(self.settings.pause_min_speech_s)
        ):
            self._confirm_level(u)

    def take_loud(self, from_sample: int) -> tuple[int, int | None]:
        """The user-loud samples heard since ``from_sample`` (a speech start's),
        and where the first of them began; forgotten after."""
        windows = [(at, n) for at, n in self._loud if at >= from_sample]
        self._loud.clear()
        return sum(n for _, n in windows), (windows[0][0] if windows else None)

    def level_rise(self, e: LevelRise, u: Utterance | None) -> list[Decision]:
        """A level rise over the playout pauses it at once, for the model to
        confirm within ``level_confirm_s``: past the echo warm-up, and in
        ``"level"`` echo mode only when it is louder than the echo by the
        margin (the front's gate has kept the room's background out)."""
        s = self.settings
        if not self.level_pause or not self.sounding or s.echo == "half_duplex":
            return []
        if u is not None and (u.paused or u.interrupted):
            return []  # an utterance pauses the playout once
        assert self.playing_since is not None
        heard = e.confirmed_at - self.playing_since
        if heard < self._n(s.echo_warmup_s):
            return []
        if s.echo == "level" and not self._echo.louder(e.level_dbfs, heard):
            return []
        self.paused_at = e.confirmed_at
        self.level_until = e.confirmed_at + self._n(s.level_confirm_s)
        return [PausePlayout(e.confirmed_at)]

    def _confirm_level(self, u: Utterance | None) -> None:
        """The model heard speech: the level pause is a speech pause now."""
        self.level_until = None
        self._run_paused = True
        if u is not None:
            u.paused = True

    def tick(self, u: Utterance | None, now: int) -> list[Decision]:
        """What the passage of time and the utterance decide for the playout."""
        out: list[Decision] = []
        if self.sounding and not (u is not None and u.interrupted):
            pause_at = self._pause_at(u, now)
            if pause_at is not None:
                self.paused_at = pause_at
                self._run_paused = True
                if u is not None:
                    u.paused = True
                out.append(PausePlayout(pause_at))
        if self.level_until is not None and u is not None and u.accepted and u.real:
            self._confirm_level(u)
        if self.level_until is not None:
            if now >= self.level_until:  # the model heard no speech in time
                out.append(ResumePlayout(self.level_until))
                self._not_before = self.level_until
                self.paused_at = self.level_until = None
        elif self.paused_at is not None and not (u is not None and u.real):
            resume_at = self._resume_at(u, now)
            if resume_at is not None:
                out.append(ResumePlayout(resume_at))
                self.paused_at = None
        return out

    def _pause_at(self, u: Utterance | None, now: int) -> int | None:
        """Where the playout should pause, if it should: real words at once;
        ``pause_min_speech_s`` of speech windows judged the user's, after the
        echo warm-up, dated where that much had been heard (not when this call
        came), whether or not the detector has confirmed a start yet."""
        s = self.settings
        assert self.playing_since is not None
        if u is not None and u.accepted and u.real:
            return now
        warm = self.playing_since + self._n(s.echo_warmup_s)
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

    def _resume_at(self, u: Utterance | None, now: int) -> int | None:
        """Where a pause that found nothing real ends: the speech it paused for
        was never confirmed and ``_BLIP_QUIET_S`` passed; or its utterance is
        over and settled with no real words (a cough, "mm-hm"); or
        ``false_interruption_s`` passed (noise that goes on)."""
        if u is not None and not u.speaking and u.final_at is not None:
            return now
        resume_at = self.resume_deadline(u)
        return min(now, resume_at) if now >= resume_at else None

    def resume_deadline(self, u: Utterance | None) -> int:
        """When a pause resumes by time alone: ``_BLIP_QUIET_S`` after the
        speech that caused it, or ``false_interruption_s`` into an utterance."""
        assert self.paused_at is not None
        if u is None:
            return max(self.paused_at, self._run_end + self._n(_BLIP_QUIET_S))
        return self.paused_at + self._n(self.settings.false_interruption_s)

    def accepts(self, loud: int) -> bool:
        """Whether an utterance starting now, with ``loud`` user-loud samples
        heard, is the user's (over the playout, by the echo mode)."""
        if not self.playing:
            return True
        if self.settings.echo == "half_duplex":
            return False
        return self.settings.echo == "aec" or loud >= self._n(_ACCEPT_S)
