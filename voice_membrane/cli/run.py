"""`voice-membrane run`: a spoken assistant on a pipeline file.

With ``--prompt`` it answers once; without, it is an interactive loop: type a
line, hear the answer; Ctrl-C interrupts the speech, Ctrl-D quits. A generated
image is never spoken: it is saved in the pipeline's ``images.folder`` (by
default ``voice-membrane-images/`` in the working directory) and the path
printed.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskStatus

from ..infra.heap import settle_heap
from ..infra.redact import redact
from ..infra.surrogates import replace_surrogates
from ..membrane.reply import Retrying
from ..pipeline.build import build_parts, output_path_problem, session_for
from ..pipeline.config import DEFAULT_PIPELINE, ConfigError, PipelineConfig, load_pipeline
from ..pipeline.debug_dir import DebugDir
from ..pipeline.event_log import HiddenBlockPrinter, JsonlEventLog, OutputFileError
from ..pipeline.images import ImageFolder
from ..pipeline.metrics import LatencyReport
from ..pipeline.session import Session
from ..pipeline.turn import Turn, TurnResult
from ..providers.text_source import TextSourceProvider
from ..sinks.speaker import speaker_available
from ..storage.blobs import sniff_image_type
from ..vocab.messages import ContentBlock


def resolve_config(
    pipeline: Path | None,
    *,
    llm: str | None = None,
    formatter: str | None = None,
    tts: str | None = None,
    out: str | None = None,
    debug_dir: str | Path | None = None,
    stt: str | None = None,
) -> PipelineConfig:
    """The pipeline file with command-line flags applied (flags win)."""
    config = load_pipeline(pipeline or DEFAULT_PIPELINE)
    sink: dict[str, Any] = {}
    if out is not None:  # a WAV file, even where the file names a real-time null sink
        sink = {"kind": "wav", "path": out, "realtime": False}
    debug = {"dir": str(Path(debug_dir).resolve())} if debug_dir is not None else {}
    return config.with_overrides(
        {
            "llm": {"spec": llm, "formatter": formatter},
            "tts": {"spec": tts},
            "sink": sink,
            "debug": debug,
            "stt": {"spec": stt},
        }
    )


async def run_assistant(
    config: PipelineConfig,
    *,
    prompt: str | None,
    metrics_json: Path | None = None,
    events_jsonl: Path | None = None,
    show_hidden: bool = False,
    images: Sequence[Path] = (),
    out: Callable[[str], None] = lambda text: print(replace_surrogates(text), end="", flush=True),
) -> list[TurnResult]:
    """``images`` go with the first turn (kept in the pipeline's blob store and
    sent by reference). ``config.debug.dir``: every provider call written there
    (``pipeline/debug_dir.py``).

    Raises ``ConfigError`` before anything starts for a bad configuration,
    output path or image, and ``OutputFileError`` (one line) if an output file
    cannot be written (the turns have run and been spoken by then).

    Everything said through ``out`` is redacted there, whatever says it."""
    out = redacting(out)
    check_output_paths(metrics_json, events_jsonl)
    check_speaker(config)
    pictures = [_read_image(path) for path in images]
    debug = None
    if config.debug.dir is not None:
        debug = DebugDir(config.debug.dir)
        try:
            debug.open()
        except OSError as exc:
            raise ConfigError(f"debug dir {config.debug.dir}: {exc.strerror or exc}") from None
    parts = build_parts(config)
    provider = parts.membrane.provider
    if pictures and isinstance(provider, TextSourceProvider):
        # Its requests are text only: the image would be dropped, and the model would
        # describe one it never saw.
        raise ConfigError(
            f"--image: {provider.name} reads text only and would never see the image; "
            "use a model that takes images (--llm anthropic:…, openai:…, gemini:…)"
        )
    if parts.notice:
        out(f"{parts.notice}\n")
    loggers: list[Callable[[dict[str, Any]], None]] = []
    jsonl = JsonlEventLog(events_jsonl) if events_jsonl else None
    if jsonl:
        loggers.append(jsonl)
    if show_hidden:
        loggers.append(HiddenBlockPrinter())
    loggers.append(lambda record: _say_image(record, out))

    def log(record: dict[str, Any]) -> None:
        for logger in loggers:
            logger(record)

    def on_turn_start(turn: Turn) -> None:
        if jsonl:
            jsonl.start_turn(turn.metrics.started_ns)

    session = session_for(
        config,
        parts,
        log=log,
        on_piece_start=out,
        on_turn_start=on_turn_start,
        on_retry=lambda retrying: out(retry_line(retrying)),
        images=ImageFolder(Path(config.images.folder)),
        debug=debug,
    )
    results: list[TurnResult] = []
    out(f"loading {parts.membrane.provider.name} and {parts.engine.name} …\n")
    if parts.toolbox is not None:
        names = ", ".join(server.name for server in parts.toolbox.servers)
        out(f"starting MCP servers: {names} …\n")
    try:
        async with session, anyio.create_task_group() as tg:
            settle_heap()  # the engines are loaded: keep them out of every full collection
            stop_loop = tg.cancel_scope
            tg.start_soon(interrupt_on_sigint, session, stop_loop)
            attached = tuple([await session.attach_image(*picture) for picture in pictures])
            if prompt is not None:
                results.append(await _one_turn(session, prompt, out, attached))
            else:
                out("type a line and press Enter; Ctrl-C interrupts the speech, Ctrl-D quits\n")
                while (line := await _read_line(out)) is not None:
                    if line:
                        results.append(await _one_turn(session, line, out, attached))
                        attached = ()
                        if metrics_json is not None:
                            _write_metrics(metrics_json, [r.report for r in results], False)
            tg.cancel_scope.cancel()
    except BaseException:
        if jsonl:
            with contextlib.suppress(OSError):  # the error in flight says more
                jsonl.close()
        raise
    if parts.wav_path is not None:
        if any(result.report.audio_seconds > 0 for result in results):
            out(f"audio written to {parts.wav_path}\n")
        else:
            out(f"no audio was produced: {parts.wav_path} holds no sound\n")
    # Each output file is attempted even if another failed; then one line for all.
    failures: list[str] = []
    if jsonl:
        try:
            jsonl.close()
        except OutputFileError as exc:
            failures.append(str(exc))
    if metrics_json is not None and prompt is not None and results:
        try:
            _write_metrics(metrics_json, [results[0].report], True)
        except OutputFileError as exc:
            failures.append(str(exc))
    if debug is not None:
        problem = debug.problem()
        if problem is None:
            out(f"provider calls written to {debug.root}\n")
        else:  # said once, on stderr: no claim on stdout that is not true
            failures.append(problem)
    if failures:
        raise OutputFileError("; ".join(failures))
    return results


def check_output_paths(metrics_json: Path | None, events_jsonl: Path | None) -> None:
    """A metrics or events file that could not be written: said before anything runs."""
    for flag, path in (("--metrics-json", metrics_json), ("--events-jsonl", events_jsonl)):
        problem = path and output_path_problem(path)
        if problem:
            raise ConfigError(f"{flag} {path}: {problem}")


def check_speaker(config: PipelineConfig) -> None:
    """A speaker sink with no output device: said now, not after loading the model.
    (A named device is checked when it is opened.)"""
    if config.sink.kind != "speaker":
        return
    reason = speaker_available(config.sink.backend)
    if reason is not None:
        raise ConfigError(
            f"{reason}: write the audio to a file with --out FILE.wav "
            '(or set [sink] kind = "null" in the pipeline)'
        )


def redacting(out: Callable[[str], None]) -> Callable[[str], None]:
    return lambda text: out(redact(text))


def _say_image(record: dict[str, Any], out: Callable[[str], None]) -> None:
    """A generated image, said where it went (it is never spoken)."""
    if record.get("event") != "image":
        return
    prompt = record.get("prompt") or record.get("revised_prompt")
    about = f" ({prompt})" if prompt else ""
    if record.get("where"):
        out(redact(f"\nimage saved to {record['where']}{about}\n"))
    else:
        out(redact(f"\nimage{about} {record.get('error') or 'not saved'}\n"))


def _read_image(path: Path) -> tuple[bytes, str]:
    """An ``--image`` file's bytes and media type; ``ConfigError`` (one line) if it
    cannot be read or is no PNG, JPEG, GIF or WebP image."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"--image {path}: {exc.strerror or exc}") from None
    media_type = sniff_image_type(data)
    if media_type is None:
        raise ConfigError(f"--image {path}: not a PNG, JPEG, GIF or WebP image")
    return data, media_type


def retry_line(retrying: Retrying) -> str:
    """A retry, said as it happens (the turn's report lists it again at the end)."""
    attempt = retrying.attempt + 1  # the first retry is the second attempt
    return f"retrying in {retrying.delay_s:.1f} s (attempt {attempt}): {retrying.error}\n"


async def _one_turn(
    session: Session,
    text: str,
    out: Callable[[str], None],
    attachments: tuple[ContentBlock, ...] = (),
) -> TurnResult:
    result = await session.turn(text, attachments=attachments)
    say_result(result, out)
    return result


def say_result(result: TurnResult, out: Callable[[str], None]) -> None:
    """What follows a turn's spoken text: how it ended, and its latency table."""
    if result.report.cut_off and not result.interrupted:
        out(" [cut off (max_tokens)]")  # the limit, not the model, ended the answer
    out(" [interrupted]\n" if result.interrupted else "\n")
    if result.error:  # redacted again here: a second net under ProviderError's own
        out(f"error: {redact(result.error)}\n")
    if result.terminated:
        out(f"ended by a policy: {redact(result.terminated)}\n")
    if said_nothing(result):
        out(
            "no speech: the reply had nothing to say\n"
            if not result.visible_text.strip()
            else "no speech: nothing in the reply's text could be said aloud\n"
        )
    out(redact(result.report.table()) + "\n")


# ``run --prompt``'s exit code when the turn ended normally but said nothing.
NO_SPEECH_EXIT = 3


def said_nothing(result: TurnResult) -> bool:
    """A turn that ended on its own (no error, interruption or policy) and spoke
    nothing, with no tool call or image to show for it: a reply that was only a
    tool call, or an image, is not silent for nothing."""
    if result.interrupted or result.error or result.terminated or result.spoken_text:
        return False
    return not any(block.type in ("tool_call", "image") for block in result.blocks)


async def _read_line(out: Callable[[str], None]) -> str | None:
    """The next line typed, stripped; None at end of input (Ctrl-D). A line that
    is not UTF-8 is refused with one line, and the loop goes on."""
    while True:
        out("> ")
        raw = await anyio.to_thread.run_sync(_read_raw_line, abandon_on_cancel=True)
        if not raw:
            out("\n")
            return None
        try:
            return raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            out(f"that line is not UTF-8 text (byte {exc.start + 1}), type it again\n")


def _read_raw_line() -> bytes:
    buffer = getattr(sys.stdin, "buffer", None)  # the bytes, decoded by _read_line
    if buffer is not None:
        return bytes(buffer.readline())
    return str(sys.stdin.readline()).encode("utf-8", "surrogateescape")


async def interrupt_on_sigint(
    session: Session,
    stop_loop: anyio.CancelScope,
    on_quit: Callable[[], None] = lambda: None,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Ctrl-C interrupts the turn being spoken; with no turn running it quits
    (``on_quit``, then the loop is cancelled). Started (``tg.start``) once
    Ctrl-C is its own."""
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        task_status.started()
        async for _ in signals:
            if not session.interrupt():
                on_quit()
                stop_loop.cancel()
                return


def _write_metrics(path: Path, reports: list[LatencyReport], single: bool) -> None:
    """One turn (``--prompt``): its report object; interactive: a list of reports."""
    data: Any = reports[0].to_dict() if single else [r.to_dict() for r in reports]
    try:
        path.write_text(redact(json.dumps(data, indent=2)) + "\n", encoding="utf-8")
    except OSError as exc:  # a full disk, after the turn was spoken
        raise OutputFileError(f"cannot write {path}: {exc.strerror or exc}") from exc


__all__ = [
    "NO_SPEECH_EXIT",
    "ConfigError",
    "OutputFileError",
    "resolve_config",
    "run_assistant",
    "said_nothing",
]
