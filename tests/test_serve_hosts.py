"""The Host names a listener answers to (``server/hosts.py``), as properties: no
name outside the listener's own and the configured ones ever passes, whatever
the spelling; the spellings of one name (case, one trailing dot, an IPv6
address's forms) get one verdict."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from voice_membrane.server.hosts import HostRules, parse_authority

PORT = 8765
RULES = HostRules.for_listener("127.0.0.1", PORT, ["voice.example.com"], loopback=True)
LOCAL = "127.0.0.1"
# Everything the rules may answer to: the loopback names, the listener's, the configured.
KNOWN = {"localhost", "127.0.0.1", "[::1]", "voice.example.com"} | set(RULES.names)

labels = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9-]{0,10}", fullmatch=True)
names = st.one_of(
    st.lists(labels, min_size=1, max_size=4).map(".".join),
    st.sampled_from(sorted(KNOWN | {"LocalHost", "VOICE.example.COM", "evil.example"})),
)
ports = st.one_of(st.none(), st.integers(0, 70000), st.just(PORT))


def authority(name: str, port: int | None) -> str:
    return name if port is None else f"{name}:{port}"


@given(st.text(max_size=60))
def test_any_text_is_parsed_or_refused_never_raises(value: str) -> None:
    parsed = parse_authority(value)
    if parsed is not None:
        assert parsed.host == parsed.host.lower() and not parsed.host.endswith(".")
    RULES.allows_host(value, LOCAL)
    RULES.allows_origin(value, LOCAL)


@given(names, ports, st.sampled_from([LOCAL, "::1", "10.0.0.5", None]))
def test_nothing_outside_the_known_names_passes(
    name: str, port: int | None, local: str | None
) -> None:
    value = authority(name, port)
    if RULES.allows_host(value, local):
        parsed = parse_authority(value)
        assert parsed is not None
        assert parsed.host in KNOWN or parsed.host == local
        if parsed.host != "voice.example.com":  # configured with any port
            assert parsed.port == PORT


@given(names, ports, st.booleans(), st.booleans())
def test_spellings_of_one_name_get_one_verdict(
    name: str, port: int | None, upper: bool, dot: bool
) -> None:
    dot = dot and not name.startswith("[")  # a name's trailing dot; an IP literal has none
    spelled = (name.upper() if upper else name.lower()) + ("." if dot else "")
    assert RULES.allows_host(authority(spelled, port), LOCAL) == RULES.allows_host(
        authority(name, port), LOCAL
    )


@given(st.ip_addresses(v=6))
def test_an_ipv6_literal_is_compared_as_an_address(address: ipaddress.IPv6Address) -> None:
    exploded = RULES.allows_host(f"[{address.exploded}]:{PORT}", LOCAL)
    compressed = RULES.allows_host(f"[{address.compressed}]:{PORT}", LOCAL)
    assert exploded == compressed == (address == ipaddress.IPv6Address("::1"))


def test_a_wildcard_listener_names_the_machine_not_the_wildcard() -> None:
    import socket

    rules = HostRules.for_listener("0.0.0.0", PORT, loopback=False)
    assert "0.0.0.0" not in rules.names
    assert socket.gethostname().lower() in rules.names
    assert rules.allows_host(f"10.0.0.5:{PORT}", "10.0.0.5")  # the address reached
    assert not rules.allows_host(f"localhost:{PORT}", "10.0.0.5")  # not over loopback
    assert rules.allows_host(f"localhost:{PORT}", "::ffff:127.0.0.1")  # dual stack
