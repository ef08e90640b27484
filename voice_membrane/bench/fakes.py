"""Fake vendor servers (``voice_membrane.testing``) in a process of their own, so
their work does not share the benchmark's interpreter (its lock and its event
loop): ``--scripted``'s, and those of the measurements made against the fakes
(``membrane_cost``, ``tts_overhead``, ``serve_load``).

``python -m voice_membrane.bench.fakes MODULE:FUNCTION ARGS`` calls the function
(a *recipe*: its JSON arguments → the fake servers, by name), starts the servers,
prints one JSON line with their base URLs by name once they listen, and serves
until its stdin closes, so it ends with the benchmark, even one that dies. The
servers are not stopped one by one: their threads are daemons and end with the
process."""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..testing.child import Child
from .child import bench_child
from .scripted_script import KEY, SCRIPTS, reply, speech

if TYPE_CHECKING:
    from ..testing.fake_server import FakeServer

Recipe = Callable[[Any], Mapping[str, "FakeServer"]]


class FakesProcess:
    """The fakes' process, started: its pid, and (once they listen) their URLs."""

    def __init__(self, child: Child) -> None:
        self._child = child

    @property
    def pid(self) -> int:
        return self._child.process.pid

    def urls(self) -> dict[str, str]:
        """Their base URLs by name (waits until they listen)."""
        urls: dict[str, str] = json.loads(self._child.line)
        return urls


@contextlib.contextmanager
def fakes_process(recipe: Recipe, args: Any = None) -> Iterator[FakesProcess]:
    """The fakes ``recipe(args)`` makes, in their own process, stopped on leaving."""
    if recipe.__module__ == "__main__":  # the child could not import it by that name
        raise ValueError(f"recipe {recipe.__qualname__} must live in an importable module")
    name = f"{recipe.__module__}:{recipe.__qualname__}"
    with bench_child("voice_membrane.bench.fakes", [name, json.dumps(args)]) as child:
        yield FakesProcess(child)


def scripted_fakes(_: object) -> dict[str, FakeServer]:
    """``--scripted``'s: the OpenAI chat model and both kinds of speech service."""
    from ..testing.fake_elevenlabs import FakeElevenLabs
    from ..testing.fake_openai import FakeOpenAI
    from ..testing.fake_openai_speech import FakeOpenAISpeech

    return {
        "chat": FakeOpenAI(*[reply()] * SCRIPTS),
        "openai": FakeOpenAISpeech(*[speech()] * SCRIPTS, api_key=KEY),
        "elevenlabs": FakeElevenLabs(*[speech()] * SCRIPTS, api_key=KEY),
    }


@contextlib.contextmanager
def fake_servers() -> Iterator[dict[str, str]]:
    """``--scripted``'s fakes' process, started; their base URLs by name."""
    with fakes_process(scripted_fakes) as fakes:
        yield fakes.urls()


def serve(recipe: str, args: str) -> None:
    module, _, name = recipe.partition(":")
    make: Recipe = getattr(importlib.import_module(module), name)
    servers = {key: server.start() for key, server in make(json.loads(args)).items()}
    print(json.dumps({key: server.base_url for key, server in servers.items()}), flush=True)
    sys.stdin.read()  # until the parent closes it


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
