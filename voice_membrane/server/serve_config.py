"""``serve --config FILE``: the server's settings in TOML, checked whole before
anything starts (unknown keys refused), a bad file one line naming it and the key.

::

    [sessions]
    store = "redis://127.0.0.1:6379/0"   # or "memory" (the default: one process)
    grace_s = 120                         # how long a dropped session waits for its client
    max_bytes = 262144                    # one session's record at most: oldest turns dropped
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..pipeline.config import ConfigError
from .session_store import DEFAULT_GRACE_S, DEFAULT_MAX_BYTES, MIN_MAX_BYTES

STORE_SCHEMES = ("redis", "rediss", "unix")


class SessionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    store: str = "memory"
    # At least a few seconds (a reconnect takes a round trip or two); at most a day.
    grace_s: float = Field(DEFAULT_GRACE_S, ge=5, le=86400)
    max_bytes: int = Field(DEFAULT_MAX_BYTES, ge=MIN_MAX_BYTES, le=64 * 1024 * 1024)

    @field_validator("store")
    @classmethod
    def _known_store(cls, value: str) -> str:
        return check_store(value)


class ServeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sessions: SessionSettings = Field(default_factory=SessionSettings)


def check_store(value: str) -> str:
    if value == "memory":
        return value
    if urlsplit(value).scheme not in STORE_SCHEMES:
        raise ValueError('"memory" or a Redis URL (redis://HOST:PORT/DB, rediss://, unix://)')
    return value


def load_serve_config(path: Path) -> ServeConfig:
    """The file's settings, or ``ConfigError``: ``FILE: sessions.grace_s: …``."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not TOML ({exc})") from None
    try:
        return ServeConfig.model_validate(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in error["loc"]) or "file"
        message = error["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{path}: {where}: {message}") from None
