"""Session ids are unique across processes and replicas: 80 random bits each, not
a per-process counter that two replicas (or a quick restart) would both issue."""

from __future__ import annotations

import base64
import re

from voice_membrane.server.state import SESSION_ID_BYTES, SESSION_ID_PATTERN, ServerState


def _state() -> ServerState:
    return ServerState({}, log=lambda *args, **fields: None)


def test_an_id_is_short_log_friendly_and_carries_80_random_bits() -> None:
    session_id = _state().session_id()
    assert re.fullmatch(SESSION_ID_PATTERN, session_id), session_id
    assert len(session_id) <= 20
    raw = base64.b32decode(session_id[1:].upper())
    assert len(raw) == SESSION_ID_BYTES >= 10  # 80 bits: no coordination needed


def test_two_states_do_not_issue_the_same_ids() -> None:
    # Two processes used to issue s{epoch}-1, s{epoch}-2, … in the same second.
    a, b = _state(), _state()
    ids_a = [a.session_id() for _ in range(200)]
    ids_b = [b.session_id() for _ in range(200)]
    assert not set(ids_a) & set(ids_b)
    assert len(set(ids_a)) == 200
    # Not derived from a clock or a counter: consecutive ids share no long prefix.
    assert len({i[:6] for i in ids_a}) > 150
