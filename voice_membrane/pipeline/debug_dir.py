"""The debug folder: every provider call of a session written down, safe to keep.

``voice-membrane run --debug-dir DIR`` (or a pipeline's ``[debug] dir``) writes,
for each turn ``T`` and each provider call ``C`` in it (a retry is a call, so
is each round of a tool loop)::

    DIR/turn-T-call-C.json   the request (the SDK call's arguments, as the adapter
                             passes them) and the response (every item the
                             provider's stream yielded, or its error)
    DIR/turn-T-report.json   the turn's latency report
    DIR/blobs/               large base64 strings moved out of those files

The seam is ``RecordingProvider``, a ``Provider`` around the session's own: it
asks the adapter for the arguments of the call it is about to make
(``request_body``, the function the adapter's ``stream`` itself calls) and keeps
each output as it passes. A call's file is written when the call ends, however
it ends (an error, an interrupt).

Nothing secret is written: values under credential-like keys (``api_key``,
``authorization``, ``xi-api-key``…) are masked by name, every string goes
through ``redact.redact`` (known keys by value and by shape, bearer tokens,
URL credentials), and the file's text once more as a whole. A key split over
several deltas is masked too: each run of text deltas goes through one
``SecretStream`` (``mask_split_secrets``). Large base64 (images)
is externalized with ``debug_sanitize.sanitize_for_storage``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio

from ..infra.redact import MASK, redact, secret_pattern
from ..parse.secret_stream import SecretStream
from ..storage.blobs import BlobError, BlobStore, FileBlobStore
from ..storage.debug_sanitize import DEFAULT_THRESHOLD, sanitize_for_storage
from ..vocab.provider_output import ProviderOutput
from .metrics import LatencyReport

if TYPE_CHECKING:
    from ..formats.base import BuiltRequest
    from ..providers.base import Provider
    from ..vocab.messages import ModelConfig

_log = logging.getLogger(__name__)

# Keys whose values are credentials whatever they hold (compared without case,
# "-" and "_": "X-Api-Key", "api_key" and "apiKey" are one name).
SECRET_KEYS: Final = frozenset(
    {
        "apikey",
        "xapikey",
        "xiapikey",
        "xgoogapikey",
        "authorization",
        "proxyauthorization",
        "accesstoken",
        "authtoken",
        "secret",
        "clientsecret",
        "password",
    }
)


def scrub(value: Any) -> Any:
    """``value`` (JSON-like) with credentials masked: by key name, and by value in
    every string. A new value; the input is not changed."""
    if isinstance(value, dict):
        return {
            key: MASK if _secret_key(key) and value[key] not in (None, "") else scrub(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [scrub(item) for item in value]
    if isinstance(value, str):
        return redact(value)
    return value


def _secret_key(key: object) -> bool:
    return isinstance(key, str) and re.sub(r"[-_\s]", "", key).lower() in SECRET_KEYS


def output_record(output: ProviderOutput) -> dict[str, Any]:
    """One provider output item as JSON: its type and fields."""
    return {"type": type(output).__name__, **dataclasses.asdict(output)}


_TEXT_DELTAS: Final = ("TextDelta", "NativeDelta", "StrayDelta")


def mask_split_secrets(outputs: list[dict[str, Any]]) -> None:
    """Mask secrets that span deltas, in place: each run of deltas of one kind
    (the raw text, one native block's) is read as one text. A run in which
    nothing was masked is left as it came, deltas and all."""
    pattern = secret_pattern()
    run: list[dict[str, Any]] = []

    def end() -> None:
        if not run:
            return
        stream = SecretStream(pattern, MASK)
        texts = [stream.feed(record["text"]) for record in run]
        texts[-1] += stream.flush()
        if stream.masked:
            for record, text in zip(run, texts, strict=True):
                record["text"] = text
        run.clear()

    for record in outputs:
        kind = record.get("type")
        if kind in _TEXT_DELTAS and isinstance(record.get("text"), str):
            if run and run[0]["type"] != kind:
                end()
            run.append(record)
        elif kind in ("NativeStart", "NativeStop"):  # a block's text ends here
            end()
    end()


class DebugDir:
    """Writes a session's provider calls and turn reports under ``root``."""

    def __init__(
        self,
        root: str | Path,
        store: BlobStore | None = None,
        threshold: int = DEFAULT_THRESHOLD,
    ) -> None:
        self.root = Path(root)
        self.store = store if store is not None else FileBlobStore(self.root / "blobs")
        self.threshold = threshold
        self.turn = 0
        self._calls = 0
        self.written = 0  # files written
        self.failures: list[str] = []  # files that could not be written, each with why
        self._reasons: dict[str, None] = {}  # why, each reason once

    def open(self) -> None:
        """Make the folder; ``OSError`` if it cannot be."""
        self.root.mkdir(parents=True, exist_ok=True)

    def wrap(self, provider: Provider) -> RecordingProvider:
        return RecordingProvider(provider, self)

    def start_turn(self) -> None:
        self.turn += 1
        self._calls = 0

    def next_call(self) -> tuple[int, int]:
        self._calls += 1
        return self.turn, self._calls

    async def write_call(self, turn: int, call: int, record: dict[str, Any]) -> None:
        await self._write(f"turn-{turn:03d}-call-{call:02d}.json", record)

    async def write_report(self, report: LatencyReport) -> None:
        await self._write(f"turn-{self.turn:03d}-report.json", report.to_dict())

    def problem(self) -> str | None:
        """One line saying what could not be written and why, or None if every
        file was: said once, at the end (``run`` prints it instead of claiming the
        calls were written)."""
        if not self.failures:
            return None
        total = self.written + len(self.failures)
        why = "; ".join(self._reasons)
        return f"cannot write {len(self.failures)} of {total} debug files in {self.root}: {why}"

    async def _write(self, name: str, record: dict[str, Any]) -> None:
        path = self.root / name
        try:
            sanitized = await sanitize_for_storage(scrub(record), self.store, self.threshold)
            text = redact(json.dumps(sanitized, indent=2, ensure_ascii=False)) + "\n"
            await anyio.to_thread.run_sync(path.write_text, text, "utf-8")
        except (OSError, ValueError, BlobError) as exc:
            # A debug record must not end the turn. Not logged as a warning: the face
            # says it once, at the end (``problem``), not once here and once there.
            reason = redact(str(getattr(exc, "strerror", None) or exc))
            _log.debug("cannot write %s: %s", path, reason)
            self.failures.append(redact(f"cannot write {path}: {reason}"))
            self._reasons[" ".join(reason.split())[:200]] = None
            with contextlib.suppress(OSError):  # no half-written file left behind
                path.unlink(missing_ok=True)
        else:
            self.written += 1


class RecordingProvider:
    """A ``Provider`` that records each call of the one it wraps in a ``DebugDir``."""

    def __init__(self, inner: Provider, debug: DebugDir) -> None:
        self.inner, self.debug = inner, debug
        self.name = inner.name

    async def start(self) -> None:
        await self.inner.start()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def stream(
        self, built: BuiltRequest, config: ModelConfig, *, streaming: bool = True
    ) -> AsyncGenerator[ProviderOutput, None]:
        turn, call = self.debug.next_call()
        record: dict[str, Any] = {
            "turn": turn,
            "call": call,
            "provider": self.name,
            "started_at": time.time(),
            "request": self._request(built, config, streaming),
        }
        outputs: list[dict[str, Any]] = []
        ended = "complete"
        try:
            async with aclosing(self.inner.stream(built, config, streaming=streaming)) as items:
                async for item in items:
                    outputs.append(output_record(item))
                    yield item
        except BaseException as exc:
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class() | GeneratorExit)
            ended = "closed" if cancelled else f"error: {type(exc).__name__}: {exc}"
            raise
        finally:
            mask_split_secrets(outputs)
            record["response"] = {"outputs": outputs, "ended": ended}
            record["seconds"] = round(time.time() - record["started_at"], 3)
            with anyio.CancelScope(shield=True):
                await self.debug.write_call(turn, call, record)

    def _request(self, built: BuiltRequest, config: ModelConfig, streaming: bool) -> Any:
        body = getattr(self.inner, "request_body", None)
        if body is None:  # a provider that cannot say: the normalized request instead
            return {"built": _built_record(built), "config": config.model_dump(mode="json")}
        try:
            return body(built, config, streaming=streaming)
        except Exception as exc:  # the call itself will fail the same way, and say so
            return {"unavailable": f"{type(exc).__name__}: {exc}"}


def _built_record(built: BuiltRequest) -> dict[str, Any]:
    return {
        "mode": built.mode,
        "system": built.system,
        "prefill": built.prefill,
        "messages": [
            {"role": m.role, "content": [block.model_dump(mode="json") for block in m.content]}
            for m in built.messages
        ],
    }


__all__ = ["DebugDir", "RecordingProvider", "mask_split_secrets", "output_record", "scrub"]
