"""Fetching a listed model from the Hugging Face hub (``voice-membrane models pull``)
through ``huggingface_hub``, which honours ``HF_ENDPOINT`` and draws the progress bar.

Each file of the pinned revision is written to ``NAME/FILE.incomplete`` and renamed
into place only once its checksum is right (a wrong one deletes it). A connection
that drops is resumed by huggingface_hub's ``http_get`` (a Range request for the
rest); a pull that is interrupted (Ctrl-C, a crash, a full disk) keeps its partial
file and the next pull asks for the rest the same way. ``hf_hub_download`` is not
used for this: in huggingface_hub 2.4 it writes to a temporary file unique to each
call and deletes it on failure, so an interrupted download starts over."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..storage.model_store import PARTIAL_SUFFIX, CatalogModel, HubFile, model_folder


class PullError(Exception):
    """One line for the user; what was downloaded so far is kept (resumable)."""


def pull(model: CatalogModel, say: Callable[[str], None]) -> Path:
    """Fetch every file of ``model`` not already here; its folder."""
    _quiet_hub_logging()
    folder = model_folder(model)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PullError(f"cannot make {folder}: {exc.strerror or exc}") from None
    with _one_pull_at_a_time(folder):
        for file in model.files:
            target = folder / file.name
            if target.is_file():
                say(f"{file.name}: already here")
                continue
            _fetch(model, file, target, say)
    return folder


@contextlib.contextmanager
def _one_pull_at_a_time(folder: Path) -> Iterator[None]:
    """Two pulls of one model would append to the same partial file."""
    with (folder / ".pull-lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PullError(f"another pull of {folder.name} is running (into {folder})") from None
        yield


def _fetch(model: CatalogModel, file: HubFile, target: Path, say: Callable[[str], None]) -> None:
    from huggingface_hub.file_download import get_hf_file_metadata, hf_hub_url, http_get

    url = hf_hub_url(model.repo, file.name, revision=model.revision)
    try:
        meta = get_hf_file_metadata(url)
    except Exception as exc:
        raise PullError(_hub_error(exc, model, file)) from None
    expected = file.sha256 or meta.etag
    partial = target.with_name(target.name + PARTIAL_SUFFIX)
    have = partial.stat().st_size if partial.is_file() else 0
    if meta.size is not None and have > meta.size:  # not this revision's file
        partial.unlink()
        have = 0
    if meta.size is not None:
        _check_space(target.parent, meta.size - have, file.name)
        if have:
            say(f"{file.name}: resuming at {_mb(have)} of {_mb(meta.size)}")
    try:
        with partial.open("ab") as out:
            http_get(
                meta.location,
                out,
                resume_size=have,
                expected_size=meta.size,
                displayed_filename=file.name,
            )
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise PullError(f"no disk left in {target.parent}: {file.name} ({_again()})") from None
        if exc.errno is not None:
            raise PullError(f"cannot write {partial}: {exc.strerror}") from None
        # huggingface_hub's size check: the body ended short
        raise PullError(f"{file.name}: the download ended early ({_again()})") from None
    except Exception as exc:
        raise PullError(_hub_error(exc, model, file)) from None
    _verify(partial, expected, file.name)
    os.replace(partial, target)


def _verify(path: Path, expected: str | None, name: str) -> None:
    """The file against its pinned SHA-256, else the hub's checksum: an LFS file's
    SHA-256 (64 hex digits) or a small file's git blob id (40); a mismatch deletes it."""
    if expected is None or len(expected) not in (40, 64):
        path.unlink()
        raise PullError(f"{name}: the hub gave no checksum to check it against; deleted it")
    with path.open("rb") as source:
        if len(expected) == 64:
            digest = hashlib.file_digest(source, "sha256").hexdigest()
        else:
            blob = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
            digest = hashlib.file_digest(source, lambda: blob).hexdigest()
    if digest != expected.lower():
        path.unlink()
        raise PullError(
            f"{name}: checksum mismatch (expected {expected[:12]}…, got {digest[:12]}…); "
            "deleted the download"
        )


def _check_space(folder: Path, needed: int, name: str) -> None:
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise PullError(f"no disk: {name} needs {_mb(needed)}, {folder} has {_mb(free)} free")


def _hub_error(exc: Exception, model: CatalogModel, file: HubFile) -> str:
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub.errors import HfHubHTTPError

    where = f"{model.repo}@{model.revision[:12]}/{file.name}"
    if isinstance(exc, httpx2.TransportError):
        return (
            f"cannot reach the model hub at {constants.ENDPOINT} "
            f"({type(exc).__name__}): no network? (HF_ENDPOINT moves it)"
        )
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else "?"
        return f"the model hub answered HTTP {status} for {where}"
    return f"{where}: {type(exc).__name__}"


def _quiet_hub_logging() -> None:
    """huggingface_hub's own warnings are multi-line and carry download URLs (a
    CDN's are signed): our one-line messages say what happened instead."""
    # (its module sets the level as it is first imported: so, after that)
    from huggingface_hub.utils import logging as hub_logging

    hub_logging.get_logger().setLevel(logging.ERROR)


def _again() -> str:
    return "run the same pull again to resume"


def _mb(size: Any) -> str:
    return f"{size / 1e6:.1f} MB"
