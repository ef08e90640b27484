"""The TwiML helper and ``voice-membrane twiml``: a <Connect><Stream> document
whose URL and parameters survive any characters; URLs Twilio refuses are one line."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voice_membrane.cli import main
from voice_membrane.server.twiml import stream_twiml

URL = "wss://voice.example.com/v1/twilio"


def test_the_cli_prints_a_connect_stream_naming_the_pipeline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["twiml", "--url", URL, "--pipeline", "local-voice"])
    out = capsys.readouterr().out
    assert out == (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<Response><Connect><Stream url="wss://voice.example.com/v1/twilio">'
        '<Parameter name="pipeline" value="local-voice"/></Stream></Connect></Response>\n'
    )


def test_without_a_pipeline_the_stream_has_no_parameter(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["twiml", "--url", URL])
    root = ET.fromstring(capsys.readouterr().out.split("\n", 1)[1])
    stream = root.find("Connect/Stream")
    assert stream is not None and stream.get("url") == URL and list(stream) == []


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://voice.example.com/v1/twilio", "must start with wss://"),
        ("ws://voice.example.com/v1/twilio", "must start with wss://"),
        ("wss:///v1/twilio", "has no host"),
        ("wss://voice.example.com/v1/twilio?pipeline=x", "cannot have a query string"),
    ],
)
def test_a_url_twilio_cannot_use_is_one_line(
    url: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as excinfo:
        main(["twiml", "--url", url])
    message = str(excinfo.value.code)
    assert message.startswith("voice-membrane twiml: ") and expected in message
    assert "\n" not in message and capsys.readouterr().out == ""


_XML_TEXT = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufffe\uffff"),
    max_size=40,
)


@given(pipeline=_XML_TEXT, path=_XML_TEXT)
def test_any_pipeline_name_and_path_survive_escaping(pipeline: str, path: str) -> None:
    url = URL + "/" + path.replace("?", "").replace("#", "")
    root = ET.fromstring(stream_twiml(url, pipeline).split("\n", 1)[1])
    stream = root.find("Connect/Stream")
    assert stream is not None and stream.get("url") == url
    parameter = stream.find("Parameter")
    assert parameter is not None
    assert (parameter.get("name"), parameter.get("value")) == ("pipeline", pipeline)


def test_call_sid_adds_the_call_token_serve_takes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from voice_membrane.server.twilio_call_token import CallTokens

    monkeypatch.setenv("TWILIO_AUTH_TOKEN", "an-auth-token")
    main(["twiml", "--url", URL, "--call-sid", "CA1"])
    stream = ET.fromstring(capsys.readouterr().out.split("\n", 1)[1]).find("Connect/Stream")
    assert stream is not None
    (parameter,) = list(stream)
    assert parameter.get("name") == "call_token"
    token = parameter.get("value")
    assert CallTokens("an-auth-token").redeem("CA1", token, time.time()) is None
    monkeypatch.delenv("TWILIO_AUTH_TOKEN")
    with pytest.raises(SystemExit) as excinfo:
        main(["twiml", "--url", URL, "--call-sid", "CA1"])
    assert str(excinfo.value.code) == "voice-membrane twiml: --call-sid needs $TWILIO_AUTH_TOKEN"
