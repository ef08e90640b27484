"""The per-call token of the phone route: made for one callSid, for a minute,
taken once; nothing of it says the auth token."""

from __future__ import annotations

from voice_membrane.server.twilio_call_token import REMEMBER_S, TTL_S, CallTokens

NOW = 1_800_000_000.0


def test_a_token_starts_its_own_call_once() -> None:
    tokens = CallTokens("auth")
    token = tokens.issue("CA1", NOW)
    assert "auth" not in token
    assert tokens.redeem("CA2", token, NOW) == "the call token is not this call's"
    assert tokens.redeem("CA1", token, NOW + 1) is None
    assert tokens.redeem("CA1", token, NOW + 2) == "this call has been taken already"
    # A fresh token for a call taken (a replayed voice webhook) does not start it again.
    again = tokens.issue("CA1", NOW + 3)
    assert tokens.redeem("CA1", again, NOW + 4) == "this call has been taken already"
    # Another server with the same auth token (a worker, a replica) knows the token.
    assert CallTokens("auth").redeem("CA3", tokens.issue("CA3", NOW), NOW) is None
    assert CallTokens("other").redeem("CA3", tokens.issue("CA3", NOW), NOW) is not None


def test_expired_malformed_and_missing_tokens_are_refused() -> None:
    tokens = CallTokens("auth")
    assert tokens.redeem("CA1", tokens.issue("CA1", NOW), NOW + TTL_S + 1) == (
        "the call token has expired"
    )
    assert tokens.redeem("CA1", tokens.issue("CA1", NOW + 3600), NOW) == (
        "the call token has expired"
    )
    for bad in ["", None, "x", "1.", ".abc", "9" * 20 + ".abc", "1.2.3"]:
        assert tokens.redeem("CA1", bad, NOW) is not None
    assert tokens.redeem(None, tokens.issue("", NOW), NOW) == "start has no callSid"


def test_a_call_taken_is_remembered_for_a_day_then_forgotten() -> None:
    tokens = CallTokens("auth")
    assert tokens.redeem("CA1", tokens.issue("CA1", NOW), NOW) is None
    later = NOW + REMEMBER_S - 10
    assert tokens.redeem("CA1", tokens.issue("CA1", later), later) is not None
    much_later = NOW + REMEMBER_S + 10
    assert tokens.redeem("CA1", tokens.issue("CA1", much_later), much_later) is None
