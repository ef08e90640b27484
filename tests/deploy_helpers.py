"""Helpers for the deployment tests: deploy/Dockerfile's instructions, deploy/k8s's
overlays rendered by ``kubectl kustomize``, the serve command's own parser and the
answers of its HTTP routes."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from websockets.datastructures import Headers
from websockets.http11 import Request

from voice_membrane.cli.main import _build_parser
from voice_membrane.server.http_routes import route

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
K8S = ROOT / "deploy" / "k8s"
KUBECTL = shutil.which("kubectl")
# What a user applies (kubectl apply -k …), by name; the component any of them may add.
OVERLAYS = {"cloud": K8S, "local": K8S / "local"}
SESSIONS_AUTOSCALING = K8S / "sessions-autoscaling"


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


@cache
def rendered(overlay: str, *, sessions_autoscaling: bool = False) -> tuple[dict[str, Any], ...]:
    """The overlay's manifests as ``kubectl kustomize`` renders them; with the
    component sessions-autoscaling added (through a kustomization of the test's own,
    as a user adds it to theirs)."""
    assert KUBECTL is not None
    target = OVERLAYS[overlay]
    with tempfile.TemporaryDirectory(prefix="vm-kustomize-") as folder:
        if sessions_autoscaling:
            kustomization = {
                "resources": [os.path.relpath(target, folder)],
                "components": [os.path.relpath(SESSIONS_AUTOSCALING, folder)],
            }
            Path(folder, "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
            target = Path(folder)
        done = subprocess.run(
            [KUBECTL, "kustomize", str(target)], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 0, done.stderr
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


@dataclass(frozen=True)
class Manifests:
    """One rendering's documents, and the serve Deployment's parts."""

    docs: tuple[dict[str, Any], ...]

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [d for d in self.all(kind) if name is None or d["metadata"]["name"] == name]
        assert len(found) == 1, f"{kind} {name or ''}: {len(found)} found"
        return found[0]

    def pod(self, deployment: str = "voice-membrane") -> dict[str, Any]:
        spec: dict[str, Any] = self.one("Deployment", deployment)["spec"]["template"]["spec"]
        return spec

    def container(self, deployment: str = "voice-membrane") -> dict[str, Any]:
        (container,) = self.pod(deployment)["containers"]
        return dict(container)

    def args(self) -> list[str]:
        args = self.container()["args"]
        assert args[0].startswith("-"), "the image's entry point is `voice-membrane serve`"
        return list(args)

    def port(self, name_or_number: str | int, deployment: str = "voice-membrane") -> int:
        """A container port of the deployment's, by name or number."""
        if isinstance(name_or_number, int):
            return name_or_number
        ports = self.container(deployment)["ports"]
        (port,) = [p for p in ports if p["name"] == name_or_number]
        return int(port["containerPort"])

    def env(self, deployment: str = "voice-membrane") -> dict[str, dict[str, Any]]:
        return {e["name"]: e for e in self.container(deployment).get("env", [])}

    def mounted_file(self, path: str) -> str:
        """The text of the ConfigMap file the serve container sees at ``path``."""
        folder, _, name = path.rpartition("/")
        mounts = {m["mountPath"].rstrip("/"): m["name"] for m in self.container()["volumeMounts"]}
        volumes = {v["name"]: v for v in self.pod()["volumes"]}
        config_map = self.one("ConfigMap", volumes[mounts[folder]]["configMap"]["name"])
        return str(config_map["data"][name])


def manifests(overlay: str, *, sessions_autoscaling: bool = False) -> Manifests:
    return Manifests(rendered(overlay, sessions_autoscaling=sessions_autoscaling))
