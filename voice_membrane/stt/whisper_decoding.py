"""The blocking half of the whisper engine: what runs on its worker thread.

``load_model`` opens a CTranslate2 Whisper folder with faster-whisper (CPU,
int8) and never downloads anything; ``decode`` transcribes a whole stretch of
audio and drops the segments whisper made up. Whisper's known failure is text
on silence or noise ("Thank you.", " ."), or a fluent sentence over a hum: a
segment is kept only when whisper itself thinks it is speech
(``no_speech_prob``, unless it is sure of the words: ``SURE_LOGPROB``), is
confident in its tokens (``avg_logprob``), is not a
repetition loop (``compression_ratio``) and has a word in it. On the shipped
fixtures the real speech scored ``no_speech_prob`` ≤ 0.30 and ``avg_logprob`` ≥
-0.81, silence and noise ≥ 0.82 and ≤ -0.99, a hallucinated sentence over
"mm-hm" -1.29: the defaults (0.6, -1.0) sit between (docs/stt.md).

A partial is the cheap decode: the encoder hears a window of
``window_frames`` (the audio and 2 s more, at least 10 s) instead of the
padded 30 s (a quarter of a final's CPU on the questions), and at most
``partial_tokens`` come out. A short window costs a little accuracy and makes
whisper prone to repeat itself instead of ending ("Play some music Play some
music …"), hence the cap and ``drop_repeats``. A final hears ``final_window_s``
(15 s by default) and stands if whisper is sure of it; else the full 30 s
decides (docs/stt.md has the trade).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..vocab.audio import Samples
from ..vocab.spacing import join_words
from ..vocab.transcripts import Transcript, Word
from .base import SttError

RATE = 16000
WINDOW_S = 30.0
# A final's encoder window: 15 s costs half the 30 s one (the questions' final 253
# against 502 ms p50 on 2 idle cores; 20 s: 309), with the same words on the questions,
# their phone copies and the real recordings; 10 s misheard "capital of France"
# (docs/stt.md, "The quick final"). But over "mm-hm" tiny.en then makes up "And then
# make them." (avg_logprob -0.90) where the full window hears nothing: so a quick
# final stands only when whisper is sure of all it wrote (QUICK_SURE_LOGPROB); else the
# full window decides (short words such as "Stop." -0.79 do).
FINAL_WINDOW_S = 15.0
QUICK_SURE_LOGPROB = -0.6  # the questions at 15 s: romeo_juliet -0.73 (redone), the rest >= -0.61
_HAS_WORD = re.compile(r"[^\W_]")
FRAMES_PER_S = 100  # whisper's mel frames (10 ms hop)
FULL_FRAMES = round(WINDOW_S * FRAMES_PER_S)
PARTIAL_WINDOW_S = 10.0  # shorter windows looped on the fixtures (docs/stt.md)
MARGIN_FRAMES = 200  # 2 s of padding after the audio, in a shortened window
_window = threading.local()  # .frames: the encoder's window for this thread's decode


@dataclass(frozen=True, slots=True)
class DecodeOptions:
    language: str
    beam_size: int
    hotwords: str | None
    no_speech_threshold: float
    log_prob_threshold: float
    compression_ratio_threshold: float
    final_window_s: float = FINAL_WINDOW_S  # the encoder's window for a final (at least)


def check_folder(path: str) -> None:
    """``SttError`` (one line) unless ``path`` holds a converted model: without
    ``tokenizer.json`` faster-whisper would fetch one from the Hub."""
    folder = Path(path)
    if not folder.is_dir():
        raise SttError(f"whisper: no model folder at {path}")
    for name in ("model.bin", "tokenizer.json"):
        if not (folder / name).is_file():
            raise SttError(
                f"whisper: {path} has no {name} (a CTranslate2 Whisper folder, "
                "as faster-whisper's models are)"
            )


def load_model(path: str, cpu_threads: int, language: str) -> Any:
    """A ``faster_whisper.WhisperModel``; ``SttError`` (one line) when the folder
    is not a loadable model or the model cannot hear ``language``."""
    check_folder(path)
    from faster_whisper import WhisperModel  # type: ignore[import-untyped]

    try:
        model = _windowed(WhisperModel)(
            path,
            device="cpu",
            compute_type="int8",
            cpu_threads=cpu_threads,
            local_files_only=True,
        )
    except Exception as exc:  # (CTranslate2 raises bare RuntimeErrors and more)
        raise SttError(f"whisper: cannot load the model at {path}: {_first_line(exc)}") from None
    check_language(model.supported_languages, path, language)
    return model


def check_language(languages: list[str], path: str, language: str) -> None:
    """``SttError`` (one line) unless the model (of ``languages``) hears ``language``."""
    if language not in languages:
        only = "English only" if languages == ["en"] else f"not {language!r}"
        raise SttError(f"whisper: the model at {path} hears {only} (language {language!r})")


def decode(
    model: Any,
    samples: Samples,
    options: DecodeOptions,
    *,
    final: bool,
    stale: Callable[[], bool] = lambda: False,
) -> Transcript | None:
    """The transcript of ``samples`` (one utterance so far), or None when nothing
    believable was said. A final carries word times; a partial skips that pass
    (it is the cheaper decode, repeated while the user speaks). A final heard
    through a window shorter than 30 s is kept only when whisper is sure of
    every segment it wrote (``QUICK_SURE_LOGPROB``); else the full window
    decides, unless ``stale()`` says by then that nobody will read it (the user
    spoke again after the pause it was for: the next pause decodes anew)."""
    if not final:
        return _decode(model, samples, options, PARTIAL_WINDOW_S, final=False)[0]
    if options.final_window_s < WINDOW_S:
        quick, sure = _decode(model, samples, options, options.final_window_s, final=True)
        if sure or stale():
            return quick
    return _decode(model, samples, options, WINDOW_S, final=True)[0]


def _decode(
    model: Any, samples: Samples, options: DecodeOptions, window_s: float, *, final: bool
) -> tuple[Transcript | None, bool]:
    """``decode`` through an encoder window of at least ``window_s``, and
    whether whisper was sure of every segment (none: sure)."""
    audio = samples.astype(np.float32) / 32768.0
    _window.frames = window_frames(len(samples), window_s)
    try:
        segments, _ = model.transcribe(
            audio,
            language=options.language,
            beam_size=options.beam_size,
            temperature=0.0,  # no fallback re-decodes: latency, and no random text
            word_timestamps=final,
            without_timestamps=not final,
            vad_filter=False,  # our VAD already cut the utterance
            condition_on_previous_text=False,
            hotwords=options.hotwords,
            # whisper's own skip needs both signals; ours (below) takes either
            no_speech_threshold=None,
            log_prob_threshold=None,
            compression_ratio_threshold=None,
            max_new_tokens=None if final else partial_tokens(len(samples)),
        )
        heard = list(segments)
        kept = [s for s in heard if _believable(s, options)]
    except SttError:
        raise
    except Exception as exc:  # (anything the native decoder raises)
        raise SttError(f"whisper: decoding failed: {_first_line(exc)}") from None
    finally:
        _window.frames = None
    sure = all(s.avg_logprob >= QUICK_SURE_LOGPROB for s in heard)
    return _transcript(kept, samples, final), sure


def _transcript(kept: list[Any], samples: Samples, final: bool) -> Transcript | None:
    text = join_words(s.text.strip() for s in kept).strip()
    if not text:
        return None
    duration = len(samples) / RATE
    if not final:
        return Transcript(drop_repeats(text), final=False, start_s=0.0, end_s=duration)
    words = tuple(_words(kept, duration))
    confidence = sum(w.confidence or 0.0 for w in words) / len(words) if words else None
    return Transcript(
        text,
        final=True,
        words=words,
        start_s=words[0].start_s if words else 0.0,
        end_s=words[-1].end_s if words else duration,
        confidence=confidence,
    )


# ``no_speech_prob`` alone drops a segment only when whisper is also unsure of its
# words: on a window dense with speech tiny.en gives it 0.57-0.88 for fluent, sure
# text (avg_logprob -0.17 to -0.25: 20-30 s of talk without a pause, where the
# guard threw the whole window away and a monologue's turn was its last words);
# its made-up text on silence and noise scored avg_logprob <= -0.99 (docs/stt.md).
SURE_LOGPROB = -0.5


def window_frames(samples: int, at_least_s: float) -> int:
    """The encoder's window for a decode of ``samples`` (16 kHz): ``at_least_s``,
    or the audio and ``MARGIN_FRAMES`` when longer, at most 30 s; even (the
    encoder halves it)."""
    heard = samples // (RATE // FRAMES_PER_S)
    frames = max(heard + MARGIN_FRAMES, round(at_least_s * FRAMES_PER_S))
    return min(frames + frames % 2, FULL_FRAMES)


def partial_tokens(samples: int) -> int:
    """A partial's token cap: more than anyone says in that long (~3 words a
    second, ~1.3 tokens a word), so only a loop reaches it."""
    return 10 + round(6 * samples / RATE)


def drop_repeats(text: str) -> str:
    """``text`` without a phrase of two or more words said again and again at
    its end (a short window's loop): "What time is it? What time is it? What"
    is "What time is it?". A word said twice stays ("five five five")."""
    words = text.split()
    n = len(words)
    for start in range(n):
        for period in range(2, (n - start) // 2 + 1):
            if all(words[i] == words[i + period] for i in range(start, n - period)):
                return " ".join(words[: start + period])
    return text


@functools.cache
def _windowed(base: type) -> type:
    """``base`` (faster-whisper's ``WhisperModel``) whose encoder hears
    ``_window.frames`` of the padded 30 s (this thread's decode's window)."""

    class WindowedModel(base):  # type: ignore[misc]
        def encode(self, features: Any) -> Any:
            frames = getattr(_window, "frames", None)
            if frames is not None:
                features = features[..., :frames]
            return super().encode(features)

    return WindowedModel


def _believable(segment: Any, options: DecodeOptions) -> bool:
    speech = (
        segment.no_speech_prob <= options.no_speech_threshold or segment.avg_logprob >= SURE_LOGPROB
    )
    return bool(
        speech
        and segment.avg_logprob >= options.log_prob_threshold
        and segment.compression_ratio <= options.compression_ratio_threshold
        and _HAS_WORD.search(segment.text)
    )


def _words(segments: list[Any], duration: float) -> list[Word]:
    out: list[Word] = []
    for segment in segments:
        for w in segment.words or ():
            text = w.word.strip()
            if not text:
                continue
            start = min(max(float(w.start), 0.0), duration)
            end = min(max(float(w.end), start), duration)
            out.append(Word(text, start, end, min(max(float(w.probability), 0.0), 1.0)))
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
