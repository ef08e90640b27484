"""The ``[vad]`` settings: what the detector and the endpointer are tuned by.

Plain pydantic models with defaults and bounds; docs/listening.md says why each
default is what it is (a measurement here or a peer's default).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

BACKCHANNELS = ("mm-hm", "mhm", "mm", "uh-huh", "okay", "ok", "yeah", "yep", "right", "sure")
CONTINUATIONS = (
    "and", "or", "but", "so", "because", "the", "a", "an", "to", "of", "with", "is", "my",
    "your", "um", "uh", "er", "like", "then", "if", "than", "at", "in", "on", "for",
)  # fmt: skip


class VadSettings(BaseModel):
    """Voice activity detection: when speech starts and stops (sample counts)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: Literal["silero", "webrtc"] = "silero"
    activate: float = Field(0.5, gt=0.0, lt=1.0)
    deactivate: float = Field(0.35, gt=0.0, lt=1.0)
    smoothing: float = Field(0.5, gt=0.0, le=1.0)  # weight of the newest window
    min_speech_s: float = Field(0.2, ge=0.0, le=2.0)
    min_silence_s: float = Field(0.2, ge=0.0, le=2.0)
    min_level_dbfs: float = Field(-50.0, ge=-120.0, le=0.0)
    gate: Literal["adaptive", "fixed"] = "adaptive"  # fixed: min_level_dbfs alone
    gate_margin_db: float = Field(6.0, ge=0.0, le=40.0)  # above the background's speech
    # speech already going as listening begins: someone else's (a TV left on)
    # or the user's (a recording's first words); auto: the user's in a recording
    # (run --input), someone else's on a live microphone or call
    already_talking: Literal["auto", "background", "user"] = "auto"
    preroll_s: float = Field(0.5, ge=0.0, le=2.0)
    # a level rise (level.py): this far over the running floor, for this long
    rise_db: float = Field(12.0, ge=3.0, le=60.0)
    rise_s: float = Field(0.012, ge=0.004, le=0.2)
    webrtc_aggressiveness: int = Field(3, ge=0, le=3)
    webrtc_frame_ms: Literal[10, 20, 30] = 30

    @model_validator(mode="after")
    def _hysteresis(self) -> VadSettings:
        if self.deactivate > self.activate:
            raise ValueError(
                f"vad.deactivate ({self.deactivate}) must not exceed vad.activate ({self.activate})"
            )
        return self


class EndpointSettings(BaseModel):
    """Turn-taking: when the user is done, and when speech over the assistant
    pauses, interrupts or resumes it (seconds of input audio)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    end_silence_s: float = Field(0.6, ge=0.0, le=10.0)
    unfinished_silence_s: float = Field(1.5, ge=0.0, le=10.0)
    final_wait_s: float = Field(1.0, ge=0.0, le=10.0)
    max_delay_s: float = Field(3.0, gt=0.0, le=30.0)
    # An end-of-turn model judges each pause from its audio (docs/listening.md,
    # "The end of a turn by model"): judged done, the turn ends after
    # turn_done_silence_s; judged not done, after turn_wait_s.
    turn_model: Literal["smart-turn", "none"] = "none"
    turn_threshold: float = Field(0.5, gt=0.0, lt=1.0)
    turn_done_silence_s: float = Field(0.2, ge=0.0, le=10.0)
    turn_wait_s: float = Field(2.0, ge=0.0, le=30.0)
    # Unfinished-sounding words (a trailing "and", a number) keep the longer silence.
    transcript_shape: bool = True
    # One stretch of speech is ended here (its STT stream settles, its words are
    # the turn): a detector that never hears a pause (noise, music) must not keep
    # a billed stream open. 0: no cap (docs/listening.md, "The longest utterance").
    max_utterance_s: float = Field(30.0, ge=0.0, le=3600.0)
    # Start the reply at a tentative end, held unheard until the turn is decided
    # (docs/listening.md, "Preemptive replies").
    preemptive: bool = True
    continuations: tuple[str, ...] = CONTINUATIONS
    pause_min_speech_s: float = Field(0.06, ge=0.0, le=5.0)
    false_interruption_s: float = Field(2.0, gt=0.0, le=10.0)
    backchannels: tuple[str, ...] = BACKCHANNELS
    echo: Literal["level", "aec", "half_duplex"] = "level"
    echo_margin_db: float = Field(10.0, ge=0.0, le=60.0)
    echo_warmup_s: float = Field(3.0, ge=0.0, le=30.0)
    # Pause on a level rise over the playout, before the model hears speech
    # (docs/listening.md, "Level pause"); auto: on at 8 kHz (a phone call)
    level_pause: Literal["auto", "on", "off"] = "auto"
    level_confirm_s: float = Field(0.3, gt=0.0, le=2.0)  # for the model to confirm it

    @model_validator(mode="after")
    def _order(self) -> EndpointSettings:
        if not self.end_silence_s <= self.unfinished_silence_s <= self.max_delay_s:
            raise ValueError(
                "endpoint: end_silence_s <= unfinished_silence_s <= max_delay_s must hold"
            )
        if max(self.turn_done_silence_s, self.turn_wait_s) > self.max_delay_s:
            raise ValueError(
                "endpoint: turn_done_silence_s and turn_wait_s must not exceed max_delay_s"
            )
        if 0 < self.max_utterance_s < 1:  # every utterance would be cut at its start
            raise ValueError("endpoint.max_utterance_s: 0 (no cap) or at least 1 s")
        return self
