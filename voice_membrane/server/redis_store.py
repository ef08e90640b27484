"""The session store in Redis (``redis://HOST:PORT/DB``), with the official asyncio
client: every process and replica sharing it can resume every session.

Each session is two keys in one hash slot (``vm:{ID}:record``, the JSON record,
and ``vm:{ID}:claim``, a hash of ``token`` and ``owner``), changed together by
Lua scripts so a claim and a write are atomic, on one Redis or a Redis Cluster.
Both expire ``grace_s`` after the last write.

A call that Redis does not answer raises ``StoreUnavailable``; what a server
does then (hold its writes, try again) is ``reconnecting_store.py``.
"""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ..infra.redact import remember
from .session_store import (
    DEFAULT_GRACE_S,
    DEFAULT_MAX_BYTES,
    SessionRecord,
    SessionStore,
    StoreUnavailable,
    parse_record,
    stored_json,
)

# A store that does not answer within this is taken as lost: a write waits no
# longer, a resume is refused rather than hang.
TIMEOUT_S = 1.0

# KEYS: record, claim. ARGV: owner, token hash, record JSON, ttl (s).
_SAVE = """
local owner = redis.call('HGET', KEYS[2], 'owner')
if owner and owner ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[4])
redis.call('HSET', KEYS[2], 'owner', ARGV[1], 'token', ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[4])
return 1
"""
# KEYS: record, claim. ARGV: token hash, new token hash, new owner, ttl (s).
# (A plain comparison: what is compared is a SHA-256, whose preimage a timing
# difference would not reveal.)
_CLAIM = """
local token = redis.call('HGET', KEYS[2], 'token')
if not token or token ~= ARGV[1] then return false end
local record = redis.call('GET', KEYS[1])
if not record then return false end
redis.call('HSET', KEYS[2], 'owner', ARGV[3], 'token', ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return record
"""
# KEYS: record, claim. ARGV: owner.
_FORGET = """
if redis.call('HGET', KEYS[2], 'owner') == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
end
return 1
"""


def safe_url(url: str) -> str:
    """The URL without its user and password, for logs and messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # (not a URL check_store passed: say nothing of it)
        return f"{parts.scheme}://…"
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _keys(session: str) -> list[str]:
    return [f"vm:{{{session}}}:record", f"vm:{{{session}}}:claim"]


class RedisStore(SessionStore):
    def __init__(
        self, url: str, grace_s: float = DEFAULT_GRACE_S, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        super().__init__(grace_s, max_bytes)
        self.name = safe_url(url)
        password = urlsplit(url).password
        remember(password, password and unquote(password))  # masked in any output
        self.client: Any = aioredis.Redis.from_url(
            url,
            socket_timeout=TIMEOUT_S,
            socket_connect_timeout=TIMEOUT_S,
            retry=Retry(NoBackoff(), 1),  # one quick retry, then the store is lost
            decode_responses=True,
        )
        self._save = self.client.register_script(_SAVE)
        self._claim = self.client.register_script(_CLAIM)
        self._forget = self.client.register_script(_FORGET)

    async def _call(self, script: Any, session: str, *args: Any) -> Any:
        try:
            return await script(keys=_keys(session), args=list(args))
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise StoreUnavailable(f"{self.name}: {_reason(exc)}") from None

    async def ping(self) -> None:
        """``StoreUnavailable`` unless Redis answers now."""
        try:
            await self.client.ping()
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"session store {self.name}: {_reason(exc)}") from None

    async def open(self) -> None:
        try:
            await self.ping()
        except StoreUnavailable:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        with contextlib.suppress(RedisError, OSError):
            await self.client.aclose()

    async def save(
        self, record: SessionRecord, token_hash: str, owner: str, ttl_s: float | None = None
    ) -> bool:
        """``ttl_s``: how long it is kept (``grace_s`` unless told: a write held
        through an outage keeps what is left of its grace period)."""
        text = stored_json(record, self.max_bytes)
        ttl = _ttl(self.grace_s if ttl_s is None else ttl_s)
        done = await self._call(self._save, record.session, owner, token_hash, text, ttl)
        return bool(done)

    async def claim(
        self, session: str, token_hash: str, new_token_hash: str, new_owner: str
    ) -> SessionRecord | None:
        text = await self._call(
            self._claim, session, token_hash, new_token_hash, new_owner, _ttl(self.grace_s)
        )
        return parse_record(text) if isinstance(text, str) else None

    async def forget(self, session: str, owner: str) -> None:
        await self._call(self._forget, session, owner)


def _ttl(seconds: float) -> int:
    return max(1, round(seconds))


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]
