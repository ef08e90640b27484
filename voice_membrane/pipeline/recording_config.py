"""The ``[recording]`` section of a pipeline file: each served session or
phone call written as a stereo WAV (the user left, the assistant right, as
heard) with its transcript beside it. Off unless ``dir`` is given."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RecordingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # Where the recordings go (relative to the pipeline file); None: not recorded.
    dir: str | None = Field(None, min_length=1)
    # Recordings older than this are deleted when a new one starts; None: kept.
    keep_days: float | None = Field(None, gt=0)
