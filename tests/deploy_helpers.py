"""Helpers for the deployment tests: deploy/Dockerfile's instructions, the serve
command's own parser and the answers of its HTTP routes."""

from __future__ import annotations

import argparse
import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from websockets.datastructures import Headers
from websockets.http11 import Request

from voice_membrane.cli.main import _build_parser
from voice_membrane.server.http_routes import route

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
K8S = ROOT / "deploy" / "k8s"


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case
    args: str  # continuation lines joined
    stage: int  # 0-based index of its FROM (-1: before the first)

    def exec_form(self) -> list[str]:
        """The JSON array form's words (["a", "b"]); shell form split as a shell would."""
        text = self.args.strip()
        if text.startswith("["):
            words = json.loads(text)
            assert all(isinstance(w, str) for w in words), text
            return list(words)
        return shlex.split(text)


def dockerfile(path: Path = DOCKERFILE) -> list[Instruction]:
    """Instructions in order: comments dropped, ``\\`` continuations joined."""
    instructions: list[Instruction] = []
    stage = -1
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = pending + line
        pending = ""
        keyword, _, args = text.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        instructions.append(Instruction(keyword, args.strip(), stage))
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


def serve_args(args: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """``voice-membrane serve ARGS`` through the command's own parser: the namespace
    and the words it does not know."""
    return _build_parser().parse_known_args(["serve", *args])


def serve_flags() -> set[str]:
    """Every option string of ``voice-membrane serve``."""
    (commands,) = [a for a in _build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return set(commands.choices["serve"]._option_string_actions)


def unknown_flags(args: list[str]) -> list[str]:
    """The flags in ``args`` that are not, exactly, serve's own (argparse would take
    a prefix, which a flag added later can make ambiguous)."""
    known = serve_flags()
    flags = [word.partition("=")[0] for word in args if word.startswith("-")]
    return [flag for flag in flags if flag not in known]


def http_status(path: str, *, ready: bool = True) -> int:
    """What the server's own router answers a GET of ``path`` with (None: the
    WebSocket handshake goes on, which a probe cannot use)."""
    request = Request(path, Headers([("Host", "127.0.0.1:8765")]))
    answer = route(request, allowed_origins=(), ready=lambda: ready, metrics=lambda: b"")
    assert answer is not None, f"{path} is the WebSocket route, not an HTTP one"
    return answer.status_code


def flag_value(args: list[str], flag: str) -> str | None:
    """The value of ``--flag=V`` or ``--flag V`` in ``args`` (the last one)."""
    found = None
    for i, word in enumerate(args):
        if word == flag and i + 1 < len(args):
            found = args[i + 1]
        elif word.startswith(flag + "="):
            found = word.partition("=")[2]
    return found
