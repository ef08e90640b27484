"""The image's HEALTHCHECK: GET /healthz from ``voice-membrane serve`` on the address
it was started with, read from its own command line (``docker run IMAGE --port 9000``
is checked on 9000). Exit 0 on a 200, else 1 with one line on stderr.

    python healthcheck.py        # the oldest serve process (PID 1 in the image)
    python healthcheck.py PID    # that one (the tests)

No import of voice_membrane: it runs every 15 s, and its flags are read here with
serve's defaults (cli/serve_command.py: --host 127.0.0.1, --port 8765).
"""

from __future__ import annotations

import argparse
import sys
import urllib.request
from pathlib import Path

PROC = Path("/proc")
TIMEOUT_S = 4.0
ANY_ADDRESS = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}


def serve_flags(pid: int) -> list[str] | None:
    """The words after ``serve`` on the process's command line, if it is
    ``voice-membrane serve`` (the console script or ``-m voice_membrane.cli``,
    as the workers run it); None otherwise or if it is gone."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    words = raw.decode(errors="replace").split("\0")
    for i, word in enumerate(words[:-1]):
        is_cli = Path(word).name == "voice-membrane" or word == "voice_membrane.cli"
        if is_cli and words[i + 1] == "serve":
            return [w for w in words[i + 2 :] if w]
    return None


def oldest_serve() -> list[str] | None:
    pids = sorted(int(p.name) for p in PROC.iterdir() if p.name.isdigit())
    for pid in pids:
        flags = serve_flags(pid)
        if flags is not None:
            return flags
    return None


def address(flags: list[str]) -> tuple[str, int]:
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    known, _ = parser.parse_known_args(flags)
    host = ANY_ADDRESS.get(known.host, known.host)
    return host, known.port


def main(argv: list[str]) -> int:
    flags = serve_flags(int(argv[0])) if argv else oldest_serve()
    if flags is None:
        print("healthcheck: no voice-membrane serve process", file=sys.stderr)
        return 1
    host, port = address(flags)
    if port == 0:
        print("healthcheck: serve --port 0 (any free port): give it a port", file=sys.stderr)
        return 1
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        with urllib.request.urlopen(f"http://{netloc}/healthz", timeout=TIMEOUT_S) as answer:
            status = int(answer.status)
    except OSError as exc:  # URLError, HTTPError (a non-2xx), a timeout
        print(f"healthcheck: http://{netloc}/healthz: {exc}", file=sys.stderr)
        return 1
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
