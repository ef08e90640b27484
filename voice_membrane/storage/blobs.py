"""Blob stores: where the media that messages reference by id lives.

A message may carry an image as a ``BlobSource`` (``vocab.blob_source``: an id,
a media type, a size) instead of its base64 text; the bytes live in a
``BlobStore`` and are read only when a provider request is built
(``blob_resolve.py``). Stores are
content-addressed: a blob's id is the SHA-256 of its bytes in hex, so storing
the same bytes twice gives the same id and one copy.

The media type belongs to the reference (``BlobSource.media_type``, a debug
file's ``mediaType``), not to the store: the same bytes are the same blob
whatever a caller calls them. ``store`` takes it so that a store which needs it
(an object store's content type) can have it; the stores here check it and
keep only the bytes.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable

import anyio

from ..vocab.blob_source import BLOB_ID, MEDIA_TYPE


class BlobError(Exception):
    """A blob that cannot be stored or read: a malformed id, a missing or corrupt blob."""


class BlobNotFound(BlobError):
    """No blob with this id in the store."""

    def __init__(self, blob_id: str, where: str) -> None:
        super().__init__(f"blob {blob_id} not found in {where}")
        self.blob_id = blob_id


@runtime_checkable
class BlobStore(Protocol):
    """Where blobs live. Every method is async: a store may be a disk, a database
    or a network service."""

    async def store(self, data: bytes, media_type: str) -> str:
        """Keep ``data``; its id (the same bytes always give the same id)."""
        ...

    async def load(self, blob_id: str) -> bytes:
        """The bytes of ``blob_id``; ``BlobNotFound`` if there are none."""
        ...

    async def exists(self, blob_id: str) -> bool: ...


def blob_id_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_blob_id(blob_id: str) -> str:
    """``blob_id`` if it is well formed (64 lowercase hex digits), else ``BlobError``:
    an id becomes a file name, so nothing else (``../``, a separator) may pass."""
    if not isinstance(blob_id, str) or not BLOB_ID.fullmatch(blob_id):
        shown = repr(blob_id)[:80]
        raise BlobError(f"not a blob id (64 lowercase hex digits): {shown}")
    return blob_id


def _check_media_type(media_type: str) -> None:
    if not isinstance(media_type, str) or not MEDIA_TYPE.fullmatch(media_type):
        raise BlobError(f"not a media type (type/subtype): {repr(media_type)[:80]}")


class MemoryBlobStore:
    """Blobs in a dict, for one process (tests, a session that keeps nothing)."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}
        self.loads = 0  # how many times a blob was read (tests of lazy loading)

    def __repr__(self) -> str:
        return f"MemoryBlobStore({len(self._blobs)} blobs)"

    async def store(self, data: bytes, media_type: str) -> str:
        _check_media_type(media_type)
        blob_id = blob_id_of(bytes(data))
        self._blobs.setdefault(blob_id, bytes(data))
        return blob_id

    async def load(self, blob_id: str) -> bytes:
        check_blob_id(blob_id)
        self.loads += 1
        try:
            return self._blobs[blob_id]
        except KeyError:
            raise BlobNotFound(blob_id, "the memory blob store") from None

    async def exists(self, blob_id: str) -> bool:
        return check_blob_id(blob_id) in self._blobs

    def retain(self, blob_ids: Collection[str]) -> int:
        """Forget every blob but ``blob_ids`` (memory is the session's to bound:
        ``Session`` keeps what its turns still refer to); how many were forgotten."""
        gone = [blob_id for blob_id in self._blobs if blob_id not in blob_ids]
        for blob_id in gone:
            del self._blobs[blob_id]
        return len(gone)

    def __len__(self) -> int:
        return len(self._blobs)


class FileBlobStore:
    """Blobs as files under ``root``: ``root/ab/abcd…`` (the first two hex digits
    as a directory, so no directory grows to millions of entries).

    A blob is written to a temporary file in its own directory and renamed into
    place (``os.replace``, atomic on one file system): a crash leaves at most a
    stray ``.tmp-*`` file, never a half blob under a blob's name, and two stores
    of the same bytes at once both rename a whole copy of the same content.

    Nothing below ``root`` is followed: a shard directory or a blob that is a
    symbolic link (or not a directory, not a regular file) is a ``BlobError``,
    so no write lands outside the store and no read comes from outside it. Each
    step opens the next name relative to the directory already opened, with
    ``O_NOFOLLOW`` (no window between a check and its use). ``root`` itself is
    the operator's path and may be, or lie under, a symbolic link.

    ``store`` skips a blob already there only when its bytes hash to its id; a
    damaged one is written anew. ``load`` checks the bytes against the id, so a
    file damaged on disk is an error, not wrong media sent to a model (SHA-256,
    about 1 ms per MB). File I/O runs in worker threads.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.loads = 0

    def __repr__(self) -> str:
        return f"FileBlobStore({str(self.root)!r})"

    def path_of(self, blob_id: str) -> Path:
        check_blob_id(blob_id)
        return self.root / blob_id[:2] / blob_id

    async def store(self, data: bytes, media_type: str) -> str:
        _check_media_type(media_type)
        return await anyio.to_thread.run_sync(self._store, bytes(data))

    def _store(self, data: bytes) -> str:
        blob_id = blob_id_of(data)
        self.root.mkdir(parents=True, exist_ok=True)
        with self._shard(blob_id, create=True) as shard:
            assert shard is not None  # made, or an error
            existing = self._read(shard, blob_id, size=len(data))
            if existing is not None and blob_id_of(existing) == blob_id:
                return blob_id  # content-addressed: the same id holds the same bytes
            temp = f".tmp-{secrets.token_hex(8)}"
            fd = os.open(temp, _NEW_FILE, 0o600, dir_fd=shard)
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(data)
                    file.flush()
                    os.fsync(file.fileno())
                os.replace(temp, blob_id, src_dir_fd=shard, dst_dir_fd=shard)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=shard)
                raise
        return blob_id

    async def load(self, blob_id: str) -> bytes:
        check_blob_id(blob_id)
        self.loads += 1
        data = await anyio.to_thread.run_sync(self._load, blob_id)
        if data is None:
            raise BlobNotFound(blob_id, f"{self.root}")
        if blob_id_of(data) != blob_id:
            raise BlobError(f"blob {blob_id} in {self.root} is damaged (its bytes do not match)")
        return data

    def _load(self, blob_id: str) -> bytes | None:
        with self._shard(blob_id, create=False) as shard:
            return None if shard is None else self._read(shard, blob_id)

    async def exists(self, blob_id: str) -> bool:
        check_blob_id(blob_id)
        return await anyio.to_thread.run_sync(self._exists, blob_id)

    def _exists(self, blob_id: str) -> bool:
        with self._shard(blob_id, create=False) as shard:
            if shard is None:
                return False
            try:
                info = os.stat(blob_id, dir_fd=shard, follow_symlinks=False)
            except FileNotFoundError:
                return False
            self._check_file(info.st_mode, blob_id)
            return True

    @contextlib.contextmanager
    def _shard(self, blob_id: str, *, create: bool) -> Iterator[int | None]:
        """The open directory of ``blob_id``'s shard (made when ``create``), None
        when there is none; ``BlobError`` when it is a link or no directory."""
        name = blob_id[:2]
        try:
            root = os.open(self.root, _DIRECTORY)
        except FileNotFoundError:
            if create:
                raise
            yield None
            return
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=root)
            try:
                shard = os.open(name, _DIRECTORY | os.O_NOFOLLOW, dir_fd=root)
            except FileNotFoundError:
                if create:
                    raise
                shard = None
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                # Linux says ENOTDIR for a link opened with O_DIRECTORY: ask what it is.
                mode = os.stat(name, dir_fd=root, follow_symlinks=False).st_mode
                raise _not_followed(self.root / name, "a directory", mode) from None
        finally:
            os.close(root)
        try:
            yield shard
        finally:
            if shard is not None:
                os.close(shard)

    def _read(self, shard: int, blob_id: str, size: int | None = None) -> bytes | None:
        """The bytes of ``blob_id`` in ``shard``, None when there is none (or, with
        ``size``, when it holds another number of bytes: not worth reading)."""
        try:
            # O_NONBLOCK: a FIFO under a blob's name opens at once (and is refused).
            fd = os.open(blob_id, _READ_FILE, dir_fd=shard)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise _not_followed(self.path_of(blob_id), "a regular file", stat.S_IFLNK) from None
        try:
            info = os.fstat(fd)  # before fdopen, which refuses a directory with its own error
            self._check_file(info.st_mode, blob_id)
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as file:
            if size is not None and info.st_size != size:
                return None
            return file.read()

    def _check_file(self, mode: int, blob_id: str) -> None:
        if not stat.S_ISREG(mode):
            raise _not_followed(self.path_of(blob_id), "a regular file", mode)


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_READ_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _not_followed(path: Path, kind: str, mode: int) -> BlobError:
    """A link, or another kind of file (``mode``), where ``kind`` belongs."""
    what = "a symbolic link" if stat.S_ISLNK(mode) else f"not {kind}"
    return BlobError(f"{path} is {what}: the blob store follows no link below its root")


def sniff_image_type(data: bytes) -> str | None:
    """The media type of an image file from its first bytes (PNG, JPEG, GIF, WebP)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


__all__ = [
    "BlobError",
    "BlobNotFound",
    "BlobStore",
    "FileBlobStore",
    "MemoryBlobStore",
    "blob_id_of",
    "check_blob_id",
    "sniff_image_type",
]
