"""FileBlobStore follows nothing below its root, and never keeps a damaged blob.

The members: a shard directory that is a symbolic link (to a directory outside
the store, or dangling), a blob that is a link (to a file with the right bytes,
with other bytes, or dangling), a shard that is a file, a blob that is a
directory or a FIFO; a blob of the right size and wrong bytes, or of the wrong
size. The root itself may be a link, or lie under one: it is the operator's.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import anyio
import pytest

from voice_membrane.storage.blobs import BlobError, FileBlobStore

pytestmark = pytest.mark.anyio
DATA = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
BLOB_ID = hashlib.sha256(DATA).hexdigest()
GUARD_S = 10  # against a hang only (a FIFO opened for reading blocks without O_NONBLOCK)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the store, with a copy of the blob in it."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / BLOB_ID).write_bytes(DATA)
    return path


@pytest.fixture
def store(tmp_path: Path) -> FileBlobStore:
    (tmp_path / "store").mkdir()
    return FileBlobStore(tmp_path / "store")


def listing(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


async def every_call_is_refused(store: FileBlobStore, match: str) -> None:
    with anyio.fail_after(GUARD_S):
        with pytest.raises(BlobError, match=match):
            await store.store(DATA, "image/png")
        with pytest.raises(BlobError, match=match):
            await store.load(BLOB_ID)
        with pytest.raises(BlobError, match=match):
            await store.exists(BLOB_ID)


async def test_a_linked_shard_directory_is_refused_and_nothing_lands_outside(
    store: FileBlobStore, outside: Path
) -> None:
    (outside / BLOB_ID).unlink()
    (store.root / BLOB_ID[:2]).symlink_to(outside, target_is_directory=True)
    await every_call_is_refused(store, "is a symbolic link")
    assert listing(outside) == []  # no blob, no temporary file


async def test_a_linked_shard_holding_the_right_bytes_is_still_not_read(
    store: FileBlobStore, outside: Path
) -> None:
    (store.root / BLOB_ID[:2]).symlink_to(outside, target_is_directory=True)
    await every_call_is_refused(store, "is a symbolic link")
    assert listing(outside) == [BLOB_ID]


async def test_a_dangling_shard_link_is_refused(store: FileBlobStore, tmp_path: Path) -> None:
    (store.root / BLOB_ID[:2]).symlink_to(tmp_path / "nowhere", target_is_directory=True)
    await every_call_is_refused(store, "is a symbolic link")
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("target", ["right bytes", "other bytes", "dangling"])
async def test_a_linked_blob_is_refused_and_its_target_never_written(
    store: FileBlobStore, outside: Path, target: str
) -> None:
    file = outside / BLOB_ID
    if target == "other bytes":
        file.write_bytes(b"the operator's file")
    elif target == "dangling":
        file.unlink()
    (store.root / BLOB_ID[:2]).mkdir()
    store.path_of(BLOB_ID).symlink_to(file)
    await every_call_is_refused(store, "is a symbolic link")
    if target == "other bytes":
        assert file.read_bytes() == b"the operator's file"
    assert listing(outside) == ([] if target == "dangling" else [BLOB_ID])
    assert listing(store.root / BLOB_ID[:2]) == [BLOB_ID]  # the link only, no temporary file


async def test_a_shard_that_is_a_file_is_refused(store: FileBlobStore) -> None:
    (store.root / BLOB_ID[:2]).write_bytes(b"")
    await every_call_is_refused(store, "is not a directory")


async def test_a_blob_that_is_a_directory_is_refused(store: FileBlobStore) -> None:
    store.path_of(BLOB_ID).mkdir(parents=True)
    await every_call_is_refused(store, "is not a regular file")


async def test_a_fifo_under_a_blobs_name_is_refused_at_once(store: FileBlobStore) -> None:
    store.path_of(BLOB_ID).parent.mkdir()
    os.mkfifo(store.path_of(BLOB_ID))
    await every_call_is_refused(store, "is not a regular file")


@pytest.mark.parametrize("layout", ["root is a link", "root under a link"])
async def test_the_root_may_be_or_lie_under_a_link(tmp_path: Path, layout: str) -> None:
    real = tmp_path / "disk" / "media"
    real.mkdir(parents=True)
    if layout == "root is a link":
        (tmp_path / "media").symlink_to(real, target_is_directory=True)
        root = tmp_path / "media"
    else:
        (tmp_path / "mnt").symlink_to(tmp_path / "disk", target_is_directory=True)
        root = tmp_path / "mnt" / "media"
    store = FileBlobStore(root)
    assert await store.store(DATA, "image/png") == BLOB_ID
    assert await store.load(BLOB_ID) == DATA and await store.exists(BLOB_ID)
    assert (real / BLOB_ID[:2] / BLOB_ID).read_bytes() == DATA


@pytest.mark.parametrize(
    "damage",
    [
        bytes(len(DATA)),  # the right size, other bytes
        DATA[:-1] + b"\x00",  # one byte off
        DATA[:10],  # cut short
        DATA + b"tail",  # too long
        b"",
    ],
    ids=["zeros", "one-byte", "short", "long", "empty"],
)
async def test_a_damaged_blob_is_written_anew_by_store(store: FileBlobStore, damage: bytes) -> None:
    await store.store(DATA, "image/png")
    store.path_of(BLOB_ID).write_bytes(damage)
    with pytest.raises(BlobError, match="damaged"):
        await store.load(BLOB_ID)
    assert await store.store(DATA, "image/png") == BLOB_ID
    assert await store.load(BLOB_ID) == DATA
    assert listing(store.root / BLOB_ID[:2]) == [BLOB_ID]


async def test_a_whole_blob_is_not_written_again(store: FileBlobStore) -> None:
    await store.store(DATA, "image/png")
    before = os.stat(store.path_of(BLOB_ID))
    await store.store(DATA, "image/png")
    assert os.stat(store.path_of(BLOB_ID)).st_ino == before.st_ino  # not replaced
