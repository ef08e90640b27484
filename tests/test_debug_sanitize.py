"""Debug externalization: large base64 strings out to a blob store and back,
exactly, without touching the input."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_blobs import png

from voice_membrane.storage.blobs import MemoryBlobStore
from voice_membrane.storage.debug_sanitize import (
    ESCAPE,
    REF,
    restore_from_storage,
    sanitize_for_storage,
)

THRESHOLD = 64  # small, so that generated values cross it often


def round_trip(value: Any, **options: Any) -> tuple[Any, Any, MemoryBlobStore]:
    store = MemoryBlobStore()

    async def go() -> tuple[Any, Any]:
        sanitized = await sanitize_for_storage(value, store, **options)
        return sanitized, await restore_from_storage(sanitized, store)

    sanitized, restored = anyio.run(go)
    return sanitized, restored, store


def refs(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        if set(value) == {ESCAPE}:  # an input dict with our keys, not a reference
            return [r for v in value[ESCAPE].values() for r in refs(v)]
        found = [value] if REF in value else []
        return found + [r for v in value.values() for r in refs(v)]
    if isinstance(value, list | tuple):
        return [r for v in value for r in refs(v)]
    return []


big_base64 = st.binary(min_size=40, max_size=400).flatmap(
    lambda b: st.sampled_from([base64.b64encode(b).decode(), base64.urlsafe_b64encode(b).decode()])
)
data_urls = big_base64.map(lambda s: f"data:image/png;base64,{s}")
keys = st.one_of(
    st.text(max_size=8),
    st.sampled_from([REF, ESCAPE, "media_type", "mime_type", "data", "originalSize"]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=100),  # lone surrogates included
    big_base64,
    data_urls,
    st.sampled_from(["image/png", "text/plain", "=" * 80, "A" * 81]),
)
json_like = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5), st.dictionaries(keys, children, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_like, st.lists(st.sampled_from(["*", "data", "0", "a"]), max_size=3))
def test_restore_undoes_sanitize_exactly(value: Any, path: list[str]) -> None:
    before = copy.deepcopy(value)
    always = [".".join(path)] if path else []
    sanitized, restored, _ = round_trip(value, threshold=THRESHOLD, always_paths=always)
    assert restored == value
    assert value == before  # the input is not changed
    json.dumps(sanitized)  # still JSON
    for ref in refs(sanitized):
        assert set(ref) <= {REF, "originalSize", "mediaType", "prefix", "encoding"}


def test_an_image_in_a_request_becomes_a_reference() -> None:
    image = png(64, 64)
    data = base64.b64encode(image).decode()
    request = {
        "model": "claude-x",
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": data},
                    },
                    {"type": "text", "text": "words and spaces " * 1000},
                ],
            }
        ],
    }
    sanitized, restored, store = round_trip(request, threshold=100)
    source = sanitized["messages"][0]["content"][0]["source"]
    assert source["data"] == {
        REF: source["data"][REF],
        "originalSize": len(data),
        "mediaType": "image/png",
    }
    assert anyio.run(store.load, source["data"][REF]) == image  # the image file itself
    assert (
        sanitized["messages"][0]["content"][1]["text"] == "words and spaces " * 1000
    )  # not base64 text
    assert restored == request


def test_the_default_threshold_is_10_kib() -> None:
    small = base64.b64encode(b"\x00" * 7000).decode()  # 9,336 characters
    large = base64.b64encode(b"\x00" * 7800).decode()  # 10,400 characters
    sanitized, _, _ = round_trip({"a": small, "b": large, "c": f"data:image/gif;base64,{large}"})
    assert sanitized["a"] == small
    assert sanitized["b"][REF] and sanitized["b"]["mediaType"] == "application/octet-stream"
    assert sanitized["c"]["mediaType"] == "image/gif"
    assert sanitized["c"]["prefix"] == "data:image/gif;base64,"


def test_always_paths_take_strings_of_any_size_and_shape() -> None:
    value = {"parts": [{"inline_data": {"mime_type": "image/jpeg", "data": "AAAA"}}], "x": "hi"}
    sanitized, restored, _ = round_trip(value, always_paths=["parts.*.inline_data.data", "x"])
    assert sanitized["parts"][0]["inline_data"]["data"]["mediaType"] == "image/jpeg"
    assert sanitized["x"]["encoding"] == "utf-8"
    assert restored == value


def test_a_dict_that_looks_like_a_reference_is_escaped() -> None:
    value = {REF: "not ours", "originalSize": 3}
    sanitized, restored, _ = round_trip(value)
    assert sanitized == {ESCAPE: value}
    assert restored == value


@pytest.mark.parametrize("shape", ["not base64!" * 2000, "QUJD=" * 3000])
def test_text_that_is_not_canonical_base64_stays(shape: str) -> None:
    sanitized, _, _ = round_trip({"t": shape})
    assert sanitized == {"t": shape}
