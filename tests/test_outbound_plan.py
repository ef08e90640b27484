"""What ``voice-membrane call`` checks before any request (``outbound_plan``), and
how the SDK's failures become one line (``twilio_rest``), without a network."""

from __future__ import annotations

import re

import pytest

from voice_membrane.cli import outbound_plan, twilio_rest
from voice_membrane.cli.outbound_plan import (
    PlanError,
    credentials_from,
    outbound_call,
    phone_number,
    serve_base,
)
from voice_membrane.server.twilio_status_route import STATUS_PATH
from voice_membrane.server.twiml_route import TWIML_PATH

TwilioRestException = pytest.importorskip("twilio.base.exceptions").TwilioRestException
ACCOUNT = "AC" + "a" * 32
KEY = "SK" + "b" * 32


def test_the_paths_are_serves_own() -> None:
    assert outbound_plan.TWIML_PATH == TWIML_PATH
    assert outbound_plan.STATUS_PATH == STATUS_PATH


@pytest.mark.parametrize("number", ["+14155550123", "+442071838750", "+12", "+" + "9" * 15])
def test_e164_numbers_pass(number: str) -> None:
    assert phone_number(number, "--from") == number


@pytest.mark.parametrize(
    "number",
    ["14155550123", "+1 415 555 0123", "+1-415-555-0123", "+0123", "+1", "+" + "9" * 16, "+1٣"],
)
def test_anything_else_is_not_a_number(number: str) -> None:
    with pytest.raises(PlanError, match=r"not a phone number in E\.164 form"):
        phone_number(number, "--from")


def test_the_call_points_twilio_at_serves_own_routes() -> None:
    call = outbound_call("+14155550123", "+15005550006", "https://h.example/voice/", "local-voice")
    assert call.twiml_url == "https://h.example/voice/v1/twilio/twiml?pipeline=local-voice"
    assert call.status_url == "https://h.example/voice/v1/twilio/status"
    assert call.ready_url == "https://h.example/voice/readyz"
    assert "?" not in outbound_call("+12", "+13", "https://h.example", None).twiml_url


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("wss://h.example/v1/twilio", "not the stream's wss:// URL"),
        ("http://h.example", "Twilio reaches serve over https://"),
        ("https://h.example?x=1", "no query"),
        ("https://user:pw@h.example", "no query, fragment or user"),
        ("h.example", "expected serve's address"),
        ("https://h.example:99999", "is not a URL"),
    ],
)
def test_a_url_twilio_cannot_use_is_refused(url: str, said: str) -> None:
    with pytest.raises(PlanError, match=re.escape(said)):
        serve_base(url)


def test_http_is_for_a_serve_on_this_machine() -> None:
    assert serve_base("http://127.0.0.1:8765/") == "http://127.0.0.1:8765"
    assert serve_base("http://localhost:8765") == "http://localhost:8765"


def test_credentials_are_the_account_token_or_an_api_key() -> None:
    token = credentials_from({"TWILIO_ACCOUNT_SID": ACCOUNT, "TWILIO_AUTH_TOKEN": "t" * 32})
    assert (token.account_sid, token.username, token.password) == (ACCOUNT, ACCOUNT, "t" * 32)
    keyed = credentials_from(
        {"TWILIO_ACCOUNT_SID": ACCOUNT, "TWILIO_API_KEY": KEY, "TWILIO_API_SECRET": "s" * 32}
    )
    assert (keyed.account_sid, keyed.username, keyed.password) == (ACCOUNT, KEY, "s" * 32)


@pytest.mark.parametrize(
    ("environ", "said"),
    [
        ({}, "no Twilio credentials"),
        ({"TWILIO_ACCOUNT_SID": ACCOUNT}, "no Twilio auth token"),
        ({"TWILIO_ACCOUNT_SID": ACCOUNT, "TWILIO_AUTH_TOKEN": "tok\n"}, "line break"),
        ({"TWILIO_ACCOUNT_SID": ACCOUNT, "TWILIO_API_KEY": KEY}, "go together"),
        (
            {
                "TWILIO_ACCOUNT_SID": ACCOUNT,
                "TWILIO_API_KEY": "k" * 34,
                "TWILIO_API_SECRET": "s" * 9,
            },
            "not an API key SID",
        ),
        ({"TWILIO_ACCOUNT_SID": "t" * 32, "TWILIO_AUTH_TOKEN": "t" * 32}, "not an Account SID"),
    ],
)
def test_missing_or_unusable_credentials_are_one_line_without_them(
    environ: dict[str, str], said: str
) -> None:
    with pytest.raises(PlanError, match=re.escape(said)) as raised:
        credentials_from(environ)
    assert "\n" not in str(raised.value)
    assert all(v not in str(raised.value) for k, v in environ.items() if k != "TWILIO_ACCOUNT_SID")


def test_twilio_refusals_keep_its_code_and_message_on_one_line() -> None:
    refused = TwilioRestException(
        400,
        f"https://api.twilio.com/2010-04-01/Accounts/{ACCOUNT}/Calls.json",
        "Unable to create record: The 'To' number\n+1555 is not a valid phone number.",
        21211,
        "POST",
    )
    line = twilio_rest.failure_line(refused, None)
    assert line == (
        "Twilio refused: The 'To' number +1555 is not a valid phone number. (error 21211, "
        "https://www.twilio.com/docs/errors/21211): the number to call is not one Twilio can dial"
    )
    assert twilio_rest.failure_line(ValueError("a bug"), None) is None  # its traceback shows


def test_the_sdks_requests_go_to_the_base_url_when_given() -> None:
    url = f"https://api.twilio.com/2010-04-01/Accounts/{ACCOUNT}/Calls.json?x=1"
    moved = f"http://127.0.0.1:9/prefix/2010-04-01/Accounts/{ACCOUNT}/Calls.json?x=1"
    assert twilio_rest._moved(url, "http://127.0.0.1:9/prefix/") == moved
    assert twilio_rest._moved(url, None) == url
