"""A fake Hugging Face hub on 127.0.0.1 for ``voice-membrane models pull`` tests.

It speaks what huggingface_hub's downloads call: ``HEAD`` and ``GET
/{repo}/resolve/{revision}/{file}``, the HEAD answering with ``X-Repo-Commit``,
``ETag`` (a small file's git blob id) or, for a large ("LFS") file,
``X-Linked-Etag`` (its SHA-256) and ``X-Linked-Size``; a GET honours ``Range:
bytes=N-`` with a 206. Point a client at it with ``HF_ENDPOINT=hub.base_url``.

Faults, for the next GET of a file: ``drop_after(n)`` closes the connection after
``n`` bytes of the body (once), ``stall_after(n)`` sends ``n`` bytes and then
holds the connection until ``release()``, and ``wrong_bytes()`` serves the right
size with one byte changed (the checksum headers stay those of the real file)."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .fake_server import DropConnection
from .loopback import LoopbackApp

FAKE_COMMIT = "c0ffee" + "0" * 34  # the commit a branch name resolves to
_RANGE = re.compile(r"bytes=(\d+)-$")
_PIECE = 64 * 1024


@dataclass(frozen=True, slots=True)
class HubRequest:
    method: str
    path: str
    range: str | None


class FakeHfHub(LoopbackApp):
    def __init__(self) -> None:
        self._files: dict[str, tuple[bytes, bool]] = {}  # "repo/file" → (bytes, lfs)
        self._lock = threading.Lock()
        self._fault: tuple[str, int] | None = None
        self._released = threading.Event()
        self.requests: list[HubRequest] = []
        self.body_bytes_sent = 0  # GET body bytes, over all requests
        super().__init__("fake-hf-hub")

    # ------------------------------------------------------------ scripting

    def add(self, repo: str, name: str, data: bytes, *, lfs: bool = True) -> None:
        self._files[f"{repo}/{name}"] = (data, lfs)

    def drop_after(self, size: int) -> None:
        self._fault = ("drop", size)

    def stall_after(self, size: int) -> None:
        self._released.clear()
        self._fault = ("stall", size)

    def wrong_bytes(self) -> None:
        self._fault = ("wrong", 0)

    def release(self) -> None:
        self._released.set()

    def gets(self) -> list[HubRequest]:
        with self._lock:
            return [r for r in self.requests if r.method == "GET"]

    # ------------------------------------------------------------ serving

    async def _resolve(self, request: Request) -> Response:
        params = request.path_params
        key = f"{params['owner']}/{params['repo']}/{params['file']}"
        with self._lock:
            self.requests.append(
                HubRequest(request.method, request.url.path, request.headers.get("range"))
            )
        revision = params["revision"]
        commit = revision if re.fullmatch(r"[0-9a-f]{40}", revision) else FAKE_COMMIT
        if key not in self._files:
            return Response(
                status_code=404,
                headers={"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit},
            )
        data, lfs = self._files[key]
        headers = {"X-Repo-Commit": commit, "Accept-Ranges": "bytes"}
        if lfs:
            headers["ETag"] = f'"{_git_blob_id(data[:10])}"'  # a pointer's, as the hub's
            headers["X-Linked-Etag"] = f'"{hashlib.sha256(data).hexdigest()}"'
            headers["X-Linked-Size"] = str(len(data))
        else:
            headers["ETag"] = f'"{_git_blob_id(data)}"'
        if request.method == "HEAD":
            headers["Content-Length"] = str(len(data))
            return Response(status_code=200, headers=headers)
        return self._body(data, request.headers.get("range"), headers)

    def _body(self, data: bytes, range_: str | None, headers: dict[str, str]) -> Response:
        start, status = 0, 200
        match = _RANGE.match(range_ or "")
        if match:
            start, status = int(match.group(1)), 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        fault, self._fault = self._fault, None
        body = bytearray(data[start:])
        if fault is not None and fault[0] == "wrong" and body:
            body[-1] ^= 0xFF
        headers["Content-Length"] = str(len(body))
        return StreamingResponse(
            self._pieces(bytes(body), fault), status_code=status, headers=headers
        )

    async def _pieces(self, body: bytes, fault: tuple[str, int] | None) -> AsyncIterator[bytes]:
        cut = fault[1] if fault is not None and fault[0] in ("drop", "stall") else len(body)
        for offset in range(0, min(cut, len(body)), _PIECE):
            piece = body[offset : min(offset + _PIECE, cut)]
            self.body_bytes_sent += len(piece)
            yield piece
        if fault is not None and fault[0] == "drop":
            raise DropConnection
        if fault is not None and fault[0] == "stall":
            while not self._released.is_set():
                await anyio.sleep(0.02)
            raise DropConnection
        for offset in range(cut, len(body), _PIECE):
            piece = body[offset : offset + _PIECE]
            self.body_bytes_sent += len(piece)
            yield piece

    # ------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def app(self) -> Starlette:
        route = Route(
            "/{owner}/{repo}/resolve/{revision}/{file:path}",
            self._resolve,
            methods=["GET", "HEAD"],
        )
        return Starlette(routes=[route])

    def stop(self) -> None:
        self._released.set()
        super().stop()


def _git_blob_id(data: bytes) -> str:
    """What the hub sends as a small file's ETag: its git blob SHA-1."""
    header = f"blob {len(data)}\0".encode()
    return hashlib.sha1(header + data, usedforsecurity=False).hexdigest()
