"""``voice-membrane bench --twilio URL``: a running serve's phone route called
by the fake Twilio caller, the question answered and "stop" over the answer
cleared; and a wrong address refused in one line. No timing assertions."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.voice_serve import voice_serve_setup
from voice_membrane.bench import phone_command
from voice_membrane.bench.child import library_env
from voice_membrane.bench.phone_command import PhoneBenchOptions, Progress, question_line
from voice_membrane.bench.serve_process import serve_process
from voice_membrane.bench.voice_caller import CallerResult, VoiceTurnRecord
from voice_membrane.bench.voice_serve import voice_fakes
from voice_membrane.cli.main import main
from voice_membrane.pipeline.config import ConfigError

pytest.importorskip("deepgram")
pytest.importorskip("onnxruntime")


AUTH_TOKEN = "a-twilio-auth-token-for-the-rehearsal"
SERVE_TOKEN = "a-serve-token-for-the-rehearsal-test"


def _bench(*args: str, auth_token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = library_env()
    env.pop("TWILIO_AUTH_TOKEN", None)
    if auth_token is not None:
        env["TWILIO_AUTH_TOKEN"] = auth_token
    return subprocess.run(
        [sys.executable, "-m", "voice_membrane.cli", "bench", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )


def test_a_call_measures_voice_to_voice_and_the_clear_of_a_barge_in(tmp_path: Path) -> None:
    """What the call is, then each question on its own line as it is done, then
    the spreads."""
    with (
        voice_fakes(voice_serve_setup()) as fakes,
        open(tmp_path / "serve.log", "w+", encoding="utf-8") as log,
        serve_process(fakes.pipeline, fakes.env, log) as (url, _),
    ):
        done = _bench("--twilio", f"{url}/v1/twilio", "--turns", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"calling {url}/v1/twilio: 1 call, 1 question each, a line per question"
    assert re.fullmatch(
        r"call 1, question 1: voice to voice \d+ ms, barge-in \(onset → clear\) \d+ ms", lines[1]
    ), lines
    assert re.fullmatch(r"voice to voice, ms: p50 \d+ / p95 \d+ / max \d+ over 1", lines[2])
    assert re.fullmatch(
        r"barge-in, onset → clear, ms: p50 \d+ / p95 \d+ / max \d+ over 1", lines[3]
    )
    assert len(lines) == 4


def test_the_default_is_the_documented_three_questions_a_call(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not bench's 20 prompts (``--turns``' default elsewhere): 3 questions,
    as docs/bench.md says; the calls themselves are the test above's."""
    asked: list[int] = []

    async def calls(options: PhoneBenchOptions, on_turn: object) -> CallerResult:
        asked.append(options.turns)
        return CallerResult()

    monkeypatch.setattr(phone_command, "run_phone_bench", calls)
    with pytest.raises(SystemExit):  # (nothing measured: exit 1)
        main(["bench", "--twilio", "ws://127.0.0.1:9/v1/twilio"])
    assert asked == [3]
    assert "1 call, 3 questions each" in capsys.readouterr().out


def test_a_question_without_a_figure_has_one_dash_before_its_error() -> None:
    turn = VoiceTurnRecord(2, errors=["no answer in time"])
    line = question_line(1, turn, PhoneBenchOptions("ws://h/v1/twilio"))
    assert line == (
        "call 1, question 2: voice to voice none, barge-in (onset → clear) none — no answer in time"
    )
    assert "— —" not in line


def test_progress_numbers_the_calls_as_they_first_answer() -> None:
    said: list[str] = []
    progress = Progress(PhoneBenchOptions("ws://h/v1/twilio", barge_after_s=0), said.append)
    for sid, number in (("CA2", 1), ("CA1", 1), ("CA2", 2)):
        progress(VoiceTurnRecord(number, voice_to_voice_ms=812.4, call=sid))
    assert said == [
        "call 1, question 1: voice to voice 812 ms",
        "call 2, question 1: voice to voice 812 ms",
        "call 1, question 2: voice to voice 812 ms",
    ]


def test_a_rehearsal_signs_for_the_public_url_serve_checks(tmp_path: Path) -> None:
    # serve as behind a TLS proxy: it checks signatures for its public wss:// URL,
    # and the bench calls it on loopback, signing for that URL.
    public = "wss://voice.example.com/v1/twilio"
    with voice_fakes(voice_serve_setup()) as fakes:
        env = {**fakes.env, "TWILIO_AUTH_TOKEN": AUTH_TOKEN, "VOICE_MEMBRANE_TOKEN": SERVE_TOKEN}
        with (
            open(tmp_path / "serve.log", "w+", encoding="utf-8") as log,
            serve_process(fakes.pipeline, env, log, options=["--twilio-url", public]) as (url, _),
        ):
            signed = _bench(
                "--twilio", f"{url}/v1/twilio", "--turns", "1", "--twilio-sign-url", public,
                auth_token=AUTH_TOKEN,
            )  # fmt: skip
            wrong = _bench(
                "--twilio", f"{url}/v1/twilio", "--turns", "1",
                "--twilio-sign-url", "wss://other.example.com/v1/twilio", auth_token=AUTH_TOKEN,
            )  # fmt: skip
            log.seek(0)
            served = log.read()
    assert signed.returncode == 0, signed.stderr
    assert re.search(r"^call 1, question 1: voice to voice \d+ ms", signed.stdout, re.M), (
        signed.stdout
    )
    # Signed for another URL: the call is refused (HTTP 403), said in one line.
    assert wrong.returncode == 1 and "Traceback" not in wrong.stderr
    assert "error: connect: the server refused the call with HTTP 403" in wrong.stdout
    assert AUTH_TOKEN not in served + signed.stdout + signed.stderr + wrong.stdout + wrong.stderr


def test_a_sign_url_serve_cannot_have_or_no_auth_token_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = "ws://127.0.0.1:9/v1/twilio"
    done = _bench("--twilio", url, "--twilio-sign-url", "ws://voice.example.com/v1/twilio")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "voice-membrane bench: --twilio-sign-url ws://voice.example.com/v1/twilio: the public "
        "wss:// URL serve's --twilio-url names (wss://HOST/…/v1/twilio, no query)"
    ]
    monkeypatch.delenv("TWILIO_AUTH_TOKEN", raising=False)
    options = PhoneBenchOptions(url, sign_url="wss://voice.example.com/v1/twilio")
    with pytest.raises(ConfigError, match=r"signs with the auth token: set \$TWILIO_AUTH_TOKEN"):
        options.plan()


def test_a_wrong_address_is_one_line() -> None:
    done = _bench("--twilio", "http://127.0.0.1:9/v1/twilio")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "voice-membrane bench: --twilio http://127.0.0.1:9/v1/twilio: a ws:// or wss:// "
        "address (…/v1/twilio)"
    ]
