"""Which ``Host`` (and browser ``Origin``) names the server answers to.

A DNS-rebinding page reaches the port under a name its attacker controls, and
its browser sends that name as ``Host``; refusing every name that is not the
listener's own (or configured) keeps such a page from reading anything. The
listener's names, each with the listening port:

- the address the request arrived on (an IP literal no rebinding can forge),
  and ``localhost``, ``127.0.0.1``, ``[::1]`` when that address is loopback;
- the ``--host`` given, when it is a name, and the machine's host name when
  the server listens beyond loopback;
- and, with any port unless one is given, each ``--allow-host`` (a proxy's or
  domain's name).

Names compare without case and without one trailing dot; IP literals compare
as addresses (``[0:0::1]`` is ``[::1]``). Sans-I/O: strings in, verdicts out.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
_WILDCARDS = frozenset({"", "0.0.0.0", "[::]"})
# RFC 3986 host[:port] without user info: an IP literal in brackets, or a name / IPv4.
_AUTHORITY = re.compile(
    r"(?:\[(?P<ip6>[0-9A-Fa-f:.]{2,45})\]|(?P<name>[A-Za-z0-9_.-]{1,253}))(?::(?P<port>[0-9]{1,5}))?"
)


class Authority(NamedTuple):
    host: str  # canonical: lower case, no trailing dot, IPv6 in brackets
    port: int | None


def parse_authority(value: str) -> Authority | None:
    """``host[:port]`` in canonical form, or None when it is not one."""
    match = _AUTHORITY.fullmatch(value)
    if match is None:
        return None
    port = None if match["port"] is None else int(match["port"])
    if port is not None and port > 65535:
        return None
    if match["ip6"] is not None:
        try:
            address = ipaddress.IPv6Address(match["ip6"])
        except ValueError:
            return None
        return Authority(canonical_ip(str(address)), port)
    name = match["name"].lower()
    if ".." in name or name.startswith("."):
        return None
    name = name.removesuffix(".")
    with contextlib.suppress(ValueError):  # dotted-quad IPv4, as a URL parser writes it
        name = canonical_ip(name)
    return Authority(name, port) if name else None


def canonical_ip(text: str) -> str:
    """An IP address as a Host names it: IPv4 dotted, IPv6 compressed in brackets
    (an IPv4-mapped IPv6 address as its IPv4 form). ``ValueError`` if not one."""
    address = ipaddress.ip_address(text.strip("[]"))
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return f"[{address.compressed}]"
    return str(address)


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listens_on_loopback(host: str) -> bool:
    """A listening address of this machine's own: a loopback address, or a name
    all of whose addresses are (``serve --host``)."""
    if is_loopback_host(host):
        return True
    try:
        ipaddress.ip_address(host.strip("[]"))
        return False  # (an address, not a loopback one)
    except ValueError:
        pass
    try:
        return all(
            ipaddress.ip_address(info[4][0]).is_loopback for info in socket.getaddrinfo(host, None)
        )
    except OSError:
        return False


@dataclass(frozen=True)
class HostRules:
    """The names one listener answers to (module docstring)."""

    port: int
    names: frozenset[str]  # the listener's own names, with ``port`` only
    allowed: frozenset[Authority]  # configured; port None: any port

    @classmethod
    def for_listener(
        cls, bind_host: str, port: int, allow_hosts: Iterable[str] = (), *, loopback: bool
    ) -> HostRules:
        """``loopback``: the server listens on loopback only. ``ValueError`` (one
        line) for an ``allow_hosts`` entry that is not ``host`` or ``host:port``."""
        allowed = set()
        for entry in allow_hosts:
            authority = parse_authority(entry)
            if authority is None:
                raise ValueError(f"--allow-host {entry[:100]!r}: not a host name or host:port")
            allowed.add(authority)
        names: set[str] = set()
        bound = parse_authority(f"[{bind_host.strip('[]')}]" if ":" in bind_host else bind_host)
        if bound is not None and bound.host not in _WILDCARDS:
            names.add(bound.host)
        if not loopback:
            own = parse_authority(socket.gethostname())
            if own is not None:
                names.add(own.host)
        return cls(port, frozenset(names), frozenset(allowed))

    def allows(
        self, authority: Authority, local_ip: str | None, default_port: int | None = None
    ) -> bool:
        """``authority`` (a Host or an Origin's) names this listener, reached at
        ``local_ip``. Without a port it is the scheme's ``default_port`` (a Host
        does not say its scheme: 80 or 443)."""
        if authority.port is not None:
            ports = {authority.port}
        else:
            ports = {80, 443} if default_port is None else {default_port}
        for allowed in self.allowed:
            if allowed.host == authority.host and (allowed.port is None or allowed.port in ports):
                return True
        if self.port not in ports:
            return False
        if authority.host in self.names:
            return True
        if local_ip is None:
            return False
        try:
            local = canonical_ip(local_ip)
        except ValueError:
            return False
        return authority.host == local or (
            is_loopback_host(local) and authority.host in LOOPBACK_NAMES
        )

    def allows_host(self, value: str | None, local_ip: str | None) -> bool:
        """A request's ``Host`` header (None: missing)."""
        authority = None if value is None else parse_authority(value)
        return authority is not None and self.allows(authority, local_ip)

    def allows_origin(self, origin: str, local_ip: str | None) -> bool:
        """A browser's ``Origin`` (``scheme://host[:port]``) is one of these names."""
        scheme, sep, rest = origin.partition("://")
        default_port = {"http": 80, "https": 443}.get(scheme.lower())
        if not sep or default_port is None:
            return False
        authority = parse_authority(rest)
        return authority is not None and self.allows(authority, local_ip, default_port)
