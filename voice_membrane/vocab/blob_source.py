"""A blob reference: media a message holds by id rather than inline.

A message may carry an image as a ``BlobSource`` (an id, a media type, a size)
instead of its base64 text. The reference is vocabulary; where the bytes live
(``storage.blobs``) and when they are read (``storage.blob_resolve``) are not.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

BLOB_ID: Final = re.compile(r"^[0-9a-f]{64}$")


MEDIA_TYPE: Final = re.compile(r"^[a-z]+/[a-z0-9.+-]+$")


class BlobSource(BaseModel):
    """Media held in a blob store: the third source beside base64 and URL."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["blob"] = "blob"
    blob_id: str = Field(pattern=BLOB_ID.pattern)
    media_type: str = Field(pattern=MEDIA_TYPE.pattern)
    size_bytes: int | None = Field(None, ge=0)  # checked against the bytes when loaded
