"""``python -m voice_membrane.bench.fakes``: ``--scripted``'s fake servers in a
process of their own, so their work does not share the benchmark's interpreter
(its lock and its event loop) and the excess over the ideal is the pipeline's.

It prints one JSON line with their base URLs once they listen, and serves until
its stdin closes, so it ends with the benchmark, even one that dies."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from ..testing.child import child_process
from .scripted_script import KEY, SCRIPTS, reply, speech


def serve() -> None:
    from ..testing.fake_elevenlabs import FakeElevenLabs
    from ..testing.fake_openai import FakeOpenAI
    from ..testing.fake_openai_speech import FakeOpenAISpeech

    with (
        FakeOpenAI(*[reply()] * SCRIPTS) as chat,
        FakeOpenAISpeech(*[speech()] * SCRIPTS, api_key=KEY) as openai_speech,
        FakeElevenLabs(*[speech()] * SCRIPTS, api_key=KEY) as elevenlabs,
    ):
        urls = {
            "chat": chat.base_url,
            "openai": openai_speech.base_url,
            "elevenlabs": elevenlabs.base_url,
        }
        print(json.dumps(urls), flush=True)
        sys.stdin.read()  # until the parent closes it


@contextlib.contextmanager
def fake_servers() -> Iterator[dict[str, str]]:
    """The fakes' process, started; its base URLs by name. It is stopped on leaving."""
    # The same voice_membrane as this process's, even a checkout not installed.
    root = str(Path(__file__).resolve().parent.parent.parent)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    with child_process("voice_membrane.bench.fakes", [], env) as child:
        yield json.loads(child.line)


if __name__ == "__main__":
    serve()
