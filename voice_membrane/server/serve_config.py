"""``serve --config FILE``: the server's settings in TOML, checked whole before
anything starts (unknown keys refused), a bad file one line naming it and the key.

::

    [sessions]
    store = "redis://127.0.0.1:6379/0"   # or "memory" (the default: one process)
    grace_s = 120                         # how long a dropped session waits for its client
    max_bytes = 262144                    # one session's record at most: oldest turns dropped

The store's URL may hold a password: ``check_store`` never quotes it, and the
workers of ``serve --workers N`` get it in their environment (``STORE_VARIABLE``),
never on a command line.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..pipeline.config import ConfigError
from .session_store import DEFAULT_GRACE_S, DEFAULT_MAX_BYTES, MIN_MAX_BYTES

STORE_SCHEMES = ("redis", "rediss", "unix")
# The store's URL, for a password kept off the command line (``ps`` shows it to
# every user): under ``--session-store``, over the config file's.
STORE_VARIABLE = "VOICE_MEMBRANE_SESSION_STORE"
_ENCODE = "percent-encode / # ? @ : in the user and password (%2F %23 %3F %40 %3A)"


class SessionSettings(BaseModel):
    # (a bad value's error never shows it: a store's URL may hold a password)
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

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
    """``memory`` or a Redis URL that parses as one; else ``ValueError`` in one line
    that never quotes the URL (its password may be the part that broke it)."""
    if value == "memory":
        return value
    parts = urlsplit(value)
    if parts.scheme not in STORE_SCHEMES:
        raise ValueError('"memory" or a Redis URL (redis://HOST:PORT/DB, rediss://, unix://)')
    # A password's unencoded "/", "#" or "?" ends the host part early: the rest
    # of the password and the host land in the path, query or fragment.
    try:
        parts.port  # noqa: B018 (parsed: raises on a port that is not a number)
    except ValueError:
        raise ValueError(f"the Redis URL does not parse: {_ENCODE}") from None
    if parts.fragment or "@" in parts.path or "@" in parts.query.partition("password=")[0]:
        raise ValueError(f"the Redis URL does not parse: {_ENCODE}")
    if parts.scheme != "unix" and not parts.hostname:
        raise ValueError(f"the Redis URL names no host: {_ENCODE}")
    if parts.scheme == "unix" and not parts.path:
        raise ValueError("the Redis URL names no socket (unix:///path/to/redis.sock)")
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
