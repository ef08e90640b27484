"""``voice-membrane call +NUMBER``, run as users run it (a subprocess) against the
fake Twilio REST API, with a real ``serve`` behind a (pretend) TLS proxy: the
call as Twilio receives it, Twilio fetching serve's TwiML and posting the
call's progress to serve's status route (both signed for the public URL),
``--wait`` to the end, Ctrl-C hanging up; and each failure in one line, with
no call placed and no secret shown. No timing assertions."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from serve_helpers import SHORT_REPLY, write_pipeline

from voice_membrane.bench.child import library_env
from voice_membrane.bench.serve_process import serve_process
from voice_membrane.testing.fake_twilio_rest import AUTH_TOKEN, FROM_NUMBER, FakeTwilioRest

pytest.importorskip("twilio")

PUBLIC_STREAM = "wss://voice.example.com/v1/twilio"
PUBLIC_ORIGIN = "https://voice.example.com"
SESSION_TOKEN = "a-serve-token-for-the-outbound-tests"
CALLEE = "+14155550123"
GUARD_S = 120  # against a hang only


class Serve:
    def __init__(self, url: str, log: Path) -> None:
        self.url, self.log = url, log

    def lines(self, event: str) -> list[dict[str, Any]]:
        records = [
            json.loads(line)
            for line in self.log.read_text(errors="replace").splitlines()
            if line.startswith("{")
        ]
        return [r for r in records if r.get("event") == event]


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """serve as in production (the account's auth token, a public --twilio-url),
    on loopback: what Twilio requests through the proxy arrives here."""
    folder = tmp_path_factory.mktemp("serve")
    pipeline = write_pipeline(folder, "short", SHORT_REPLY)
    env = library_env()
    env.update(TWILIO_AUTH_TOKEN=AUTH_TOKEN, VOICE_MEMBRANE_TOKEN=SESSION_TOKEN)
    log_path = folder / "serve.log"
    with (
        open(log_path, "w+", encoding="utf-8") as log,
        serve_process(pipeline, env, log, options=["--twilio-url", PUBLIC_STREAM]) as (url, _),
    ):
        yield Serve(url.replace("ws://", "http://"), log_path)


def public(serve: Serve) -> Any:
    """What the proxy does: Twilio requests (and signs) the public URL, which
    arrives at serve's loopback address."""
    return lambda url: url.replace(serve.url, PUBLIC_ORIGIN, 1)


def call(*args: str, env: dict[str, str], **options: Any) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in library_env().items() if not k.startswith("TWILIO_")}
    return subprocess.run(
        [sys.executable, "-m", "voice_membrane.cli", "call", *args],
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=GUARD_S,
        **options,
    )


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_call_reaches_serve_and_its_progress_is_logged(serve: Serve) -> None:
    with FakeTwilioRest(sign_as=public(serve), talk_s=1.5) as twilio:
        done = call(
            CALLEE, "--from", FROM_NUMBER, "--url", serve.url, "--pipeline", "short", "--wait",
            env=twilio.env(),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        [placed] = twilio.requests[:1]
        sid = next(iter(twilio.calls))
        ended = twilio.wait_ended(sid)
    # The call as Twilio received it: serve's webhook (GET, the pipeline in its
    # query) and status route (GET, every progress event).
    form = dict(placed.form)
    assert placed.method == "POST" and placed.username == twilio.account_sid
    assert (form["To"], form["From"]) == (CALLEE, FROM_NUMBER)
    assert (form["Url"], form["Method"]) == (f"{serve.url}/v1/twilio/twiml?pipeline=short", "GET")
    assert (form["StatusCallback"], form["StatusCallbackMethod"]) == (
        f"{serve.url}/v1/twilio/status",
        "GET",
    )
    events = [v for n, v in placed.form if n == "StatusCallbackEvent"]
    assert events == ["initiated", "ringing", "answered", "completed"]
    # What it printed: the SID and each status it saw, the last the end.
    lines = done.stdout.splitlines()
    assert lines[0] == f"call {sid}: queued"
    assert lines[-1].startswith(f"call {sid}: completed after ")
    assert all(line.startswith(f"call {sid}: ") for line in lines)
    # serve answered the signed webhook with the call's TwiML and its token...
    assert ended.twiml is not None and ended.twiml[0] == 200
    stream = ElementTree.fromstring(ended.twiml[1]).find("Connect/Stream")
    assert stream is not None and stream.get("url") == PUBLIC_STREAM
    parameters = {p.get("name"): p.get("value") for p in stream}
    assert parameters["pipeline"] == "short" and parameters["call_token"]
    # ...and took every signed callback, each a call_status line.
    assert [d.http_status for d in ended.delivered] == [200] * 4
    logged = [line for line in serve.lines("call_status") if line["call_sid"] == sid]
    assert [line["call_status"] for line in logged] == [
        "initiated",
        "ringing",
        "in-progress",
        "completed",
    ]
    assert {line["direction"] for line in logged} == {"outbound-api"}
    assert logged[-1]["duration_s"] == ended.duration_s
    seen = done.stdout + done.stderr + serve.log.read_text()
    assert AUTH_TOKEN not in seen and CALLEE not in serve.log.read_text()


def test_without_wait_it_prints_the_call_and_leaves_it(serve: Serve) -> None:
    api_key, secret = "SK" + "1" * 32, "an-api-key-secret-for-the-test"
    with FakeTwilioRest(sign_as=public(serve), api_keys={api_key: secret}, talk_s=0) as twilio:
        env = {k: v for k, v in twilio.env().items() if k != "TWILIO_AUTH_TOKEN"}
        env.update(TWILIO_API_KEY=api_key, TWILIO_API_SECRET=secret, TWILIO_FROM_NUMBER=FROM_NUMBER)
        done = call(CALLEE, "--url", serve.url, env=env)
        assert done.returncode == 0, done.stderr
        sid = next(iter(twilio.calls))
        assert done.stdout == f"call {sid}: queued\n"
        assert twilio.requests[0].username == api_key  # the API key, not the account's token
        assert dict(twilio.requests[0].form)["From"] == FROM_NUMBER
        assert "Url" in dict(twilio.requests[0].form)
        assert "pipeline" not in dict(twilio.requests[0].form)["Url"]  # serve's default


def test_wait_reports_a_busy_callee_and_exits_1(serve: Serve) -> None:
    with FakeTwilioRest(sign_as=public(serve), outcomes={CALLEE: "busy"}) as twilio:
        done = call(CALLEE, "--from", FROM_NUMBER, "--url", serve.url, "--wait", env=twilio.env())
        sid = next(iter(twilio.calls))
        ended = twilio.wait_ended(sid)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[-1] == f"call {sid}: busy"
    logged = [line for line in serve.lines("call_status") if line["call_sid"] == sid]
    assert logged[-1]["call_status"] == "busy" and logged[-1]["sip_response_code"] == 486
    assert ended.twiml is None  # never answered: no TwiML fetched


def test_ctrl_c_hangs_the_call_up(serve: Serve) -> None:
    with FakeTwilioRest(sign_as=public(serve), talk_s=GUARD_S) as twilio:
        env = {k: v for k, v in library_env().items() if not k.startswith("TWILIO_")}
        process = subprocess.Popen(
            [sys.executable, "-m", "voice_membrane.cli", "call", CALLEE, "--from", FROM_NUMBER,
             "--url", serve.url, "--wait"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**env, **twilio.env()},
        )  # fmt: skip
        try:
            assert process.stdout is not None
            seen = []
            for line in process.stdout:  # until the callee has answered
                seen.append(line)
                if line.rstrip().endswith(": in-progress"):
                    break
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=GUARD_S)
        finally:
            if process.poll() is None:
                process.kill()
        sid = next(iter(twilio.calls))
        ended = twilio.wait_ended(sid)
        hang_ups = [r for r in twilio.requests if r.path.endswith(f"/Calls/{sid}.json")]
    assert process.returncode == 130, err
    assert err == f"voice-membrane call: interrupted: hung up call {sid}\n"
    assert ("Status", "completed") in [pair for r in hang_ups for pair in r.form]
    assert ended.status == "completed" and out.splitlines()[-1].startswith(f"call {sid}: completed")


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (
            ["4155550123"],
            {},
            "the number to call, '4155550123' is not a phone number in E.164 form",
        ),
        (["+1 415 555 0123"], {}, "is not a phone number in E.164 form"),
        (["+14155550123", "--from", "+0123"], {}, "--from '+0123' is not a phone number"),
        (["+14155550123", "--url", "wss://voice.example.com/v1/twilio"], {}, "not the stream's"),
        (["+14155550123", "--url", "http://voice.example.com"], {}, "reaches serve over https"),
        (["+14155550123", "--pipeline", "pipelines/x.toml"], {}, "--pipeline 'pipelines/x.toml'"),
        (["+14155550123"], {"TWILIO_ACCOUNT_SID": ""}, "no Twilio credentials: set"),
        (["+14155550123"], {"TWILIO_AUTH_TOKEN": ""}, "no Twilio auth token: set"),
        (["+14155550123"], {"TWILIO_ACCOUNT_SID": AUTH_TOKEN}, "is not an Account SID"),
        (["+14155550123"], {"TWILIO_BASE_URL": "ftp://x"}, "TWILIO_BASE_URL 'ftp://x'"),
    ],
)
def test_what_is_checked_before_any_request_is_one_line(
    args: list[str], env: dict[str, str], said: str
) -> None:
    with FakeTwilioRest() as twilio:
        options = ["--from", FROM_NUMBER, "--url", "http://127.0.0.1:9"]
        done = call(*options, *args, env={**twilio.env(), **env})  # (args' options win)
        assert twilio.requests == []
    _one_line(done, said)


def test_a_serve_that_is_not_there_gets_no_call() -> None:
    with FakeTwilioRest() as twilio:
        url = f"http://127.0.0.1:{closed_port()}"
        done = call(CALLEE, "--from", FROM_NUMBER, "--url", url, env=twilio.env())
        assert twilio.requests == []
    _one_line(done, f"serve does not answer at {url}/readyz (Connection refused)")
    assert done.stderr.rstrip().endswith("; no call placed")


def test_twilio_unreachable_is_one_line(serve: Serve) -> None:
    with FakeTwilioRest() as twilio:
        api = f"http://127.0.0.1:{closed_port()}"
        env = {**twilio.env(), "TWILIO_BASE_URL": api}
        done = call(CALLEE, "--from", FROM_NUMBER, "--url", serve.url, env=env)
    _one_line(done, f"cannot reach Twilio's API at {api}: Connection refused; no call placed")


@pytest.mark.parametrize(
    ("env", "to", "said"),
    [
        (
            {"TWILIO_AUTH_TOKEN": "not-the-account-token"},
            CALLEE,
            "Twilio refused: Authenticate (error 20003, https://www.twilio.com/docs/errors/20003)"
            ": check TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN",
        ),
        ({}, "+15005550002", "'To' phone number cannot be reached (error 21214"),
        (
            {},
            "+15005550001",
            "The 'To' number +15005550001 is not a valid phone number. (error 21211",
        ),
    ],
)
def test_what_twilio_refuses_is_one_line_with_its_code(
    serve: Serve, env: dict[str, str], to: str, said: str
) -> None:
    refusals = {
        "+15005550001": (21211, "The 'To' number +15005550001 is not a valid phone number."),
        "+15005550002": (21214, "'To' phone number cannot be reached"),
    }
    with FakeTwilioRest(refusals=refusals) as twilio:
        done = call(to, "--from", FROM_NUMBER, "--url", serve.url, env={**twilio.env(), **env})
        assert twilio.calls == {}
    _one_line(done, said)
    assert "not-the-account-token" not in done.stderr


def _one_line(done: subprocess.CompletedProcess[str], said: str) -> None:
    assert done.returncode == 1, done.stdout
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("voice-membrane call: "), done.stderr
    assert said in lines[0], lines[0]
    assert AUTH_TOKEN not in done.stderr
