"""deploy/Dockerfile, checked without a container engine (none runs here): it
installs with the setup script's own steps, runs as a user, and its entry point,
port and health check agree with the server's flags and routes."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.deploy_helpers import (
    ROOT,
    Instruction,
    dockerfile,
    http_status,
    serve_args,
    unknown_flags,
)
from voice_membrane.testing.redis_server import free_port

SCRIPTS = ROOT / "scripts"
GUARD_S = 30  # against a hang only
SERVE = [sys.executable, "-m", "voice_membrane.cli", "serve"]


def _stages() -> tuple[list[Instruction], list[Instruction]]:
    instructions = dockerfile()
    last = max(i.stage for i in instructions)
    assert last >= 1, "a multi-stage build: compilers stay out of the final image"
    return [i for i in instructions if i.stage < last], [i for i in instructions if i.stage == last]


def _final(keyword: str) -> Instruction:
    found = [i for i in _stages()[1] if i.keyword == keyword]
    assert found, f"the final stage has no {keyword}"
    return found[-1]


def _runs(stage: list[Instruction]) -> str:
    return "\n".join(i.args for i in stage if i.keyword == "RUN")


def _cmd_args() -> list[str]:
    return _final("CMD").exec_form()


def test_the_image_installs_with_the_setup_scripts_own_steps() -> None:
    build, final = _stages()
    build_runs, final_runs = _runs(build), _runs(final)
    # Every package the image gets comes through the scripts make test runs: no
    # apt-get or pip of its own that CI would never exercise.
    for runs in (build_runs, final_runs):
        assert not re.search(r"\bapt-get\s+install\b|\bpip3?\s+install\b", runs)
    assert re.search(r"scripts/system-packages\.sh build\b", build_runs)
    assert re.search(r"scripts/install-package\.sh /opt/venv ", build_runs)
    # The final stage gets the runtime packages only: no compilers.
    assert re.search(r"system-packages\.sh runtime\b", final_runs)
    assert "install-package.sh" not in final_runs and "build-essential" not in final_runs
    bootstrap = (SCRIPTS / "bootstrap.sh").read_text(encoding="utf-8")
    assert re.search(r"system-packages\.sh\" dev\b", bootstrap)
    assert re.search(r"install-package\.sh\" \"\$venv\" ", bootstrap)


def test_the_profiles_and_extras_the_image_names_exist() -> None:
    build, final = _stages()
    profiles = set(re.findall(r"system-packages\.sh (\w+)", _runs(build) + _runs(final)))
    script = (SCRIPTS / "system-packages.sh").read_text(encoding="utf-8")
    arms = set(re.findall(r"^\s+(\w+)\) wanted=", script, re.M))
    assert profiles and profiles <= arms
    extras = set(re.findall(r"extras=([\w,]+)", _runs(build)))
    assert len(extras) == 2, "one install for LOCAL_ENGINES=1, one for 0"
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    for names in extras:
        assert set(names.split(",")) <= set(declared), names
    # The one without the embedded engines has no llama.cpp build in it.
    assert any("local" not in names.split(",") for names in extras)


def test_an_unknown_profile_is_refused_in_one_line() -> None:
    done = subprocess.run(
        ["bash", str(SCRIPTS / "system-packages.sh"), "sever"],
        capture_output=True,
        text=True,
        timeout=GUARD_S,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "system-packages.sh: unknown profile 'sever' (runtime, build or dev)"
    ]


def test_what_the_build_copies_exists_and_passes_dockerignore() -> None:
    ignore = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    kept = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert "*" in ignore, "the context holds only what the image copies"
    for instruction in _stages()[0] + _stages()[1]:
        if instruction.keyword != "COPY" or "--from=" in instruction.args:
            continue
        *sources, _ = instruction.args.split()
        for source in sources:
            assert (ROOT / source).exists(), source
            assert source.rstrip("/") in kept, f"{source} is excluded by .dockerignore"


def test_the_final_image_runs_as_a_user_not_root() -> None:
    user = _final("USER").args.split(":")[0]
    assert user not in ("root", "0")
    assert user.isdigit(), "numeric, so Kubernetes' runAsNonRoot can check it"
    final_runs = _runs(_stages()[1])
    assert re.search(rf"useradd\b[^&;]*--uid {user}\b", final_runs)
    group = _final("USER").args.partition(":")[2]
    assert not group or re.search(rf"groupadd\b[^&;]*--gid {group}\b", final_runs)


def test_the_entry_point_is_the_serve_command_and_cmd_its_flags() -> None:
    assert _final("ENTRYPOINT").exec_form() == ["voice-membrane", "serve"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "scripts"
    ]
    assert "voice-membrane" in scripts
    args, unknown = serve_args(_cmd_args())
    assert unknown == [] and unknown_flags(_cmd_args()) == []
    assert args.host == "0.0.0.0"  # reachable through the container's port mapping


def test_the_exposed_port_is_the_one_served() -> None:
    args, _ = serve_args(_cmd_args())
    exposed = {int(word.split("/")[0]) for word in _final("EXPOSE").args.split()}
    assert exposed == {args.port}
    assert http_status("/healthz") == 200
    assert http_status("/healthz", ready=False) == 200, "healthy while draining"


def _healthcheck_script() -> Path:
    """The HEALTHCHECK's script, in the repository: the one the image copies there."""
    words = Instruction("CMD", _final("HEALTHCHECK").args.partition(" CMD ")[2], 0).exec_form()
    assert words[0] == "python", "the image's python: a slim image has no curl"
    (script,) = words[1:]
    copies = [i.args.split() for i in _stages()[1] if i.keyword == "COPY"]
    (source,) = [words[0] for words in copies if words[-1] == script and len(words) == 2]
    assert not re.search(r"\b\d{4,5}\b", _final("HEALTHCHECK").args), "no port of its own"
    return ROOT / source


def _health(pid: int) -> int:
    command = [sys.executable, str(_healthcheck_script()), str(pid)]
    return subprocess.run(command, capture_output=True, timeout=GUARD_S, check=False).returncode


def test_the_health_check_asks_the_port_serve_was_started_with(tmp_path: Path) -> None:
    from tests.serve_helpers import write_pipeline

    port = free_port()
    assert port != serve_args([])[0].port, "not the default: the flag is what is followed"
    pipeline = write_pipeline(tmp_path, "short", "Fine.")
    env = {k: v for k, v in os.environ.items() if k != "VOICE_MEMBRANE_TOKEN"}
    env["PYTHONPATH"] = str(ROOT)
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "voice_membrane.cli",
            "serve",
            "--port",
            str(port),
            "--pipeline",
            str(pipeline),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert serve.stdout is not None
        assert serve.stdout.readline().startswith(f"listening on http://127.0.0.1:{port}")
        assert _health(serve.pid) == 0
    finally:
        serve.terminate()
        serve.wait(timeout=GUARD_S)
    assert _health(serve.pid) != 0  # gone


def test_the_health_check_finds_serve_under_an_init_and_fails_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a pid (the image's HEALTHCHECK): the oldest serve process, PID 1 or the
    command an init (docker run --init) was given; none: unhealthy, in one line."""
    spec = importlib.util.spec_from_file_location("healthcheck", _healthcheck_script())
    assert spec is not None and spec.loader is not None
    healthcheck = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(healthcheck)
    proc = tmp_path / "proc"
    processes = {
        "1": ["/sbin/docker-init", "--", "voice-membrane", "serve", "--port", "9001"],
        "7": ["/opt/venv/bin/python", "/opt/venv/bin/voice-membrane", "serve", "--port=9001"],
        "9": ["/opt/venv/bin/python", "-m", "voice_membrane.cli", "serve", "--port=9001"],
        "self": ["ignored"],
    }
    for pid, argv in processes.items():
        (proc / pid).mkdir(parents=True)
        (proc / pid / "cmdline").write_bytes(b"\0".join(w.encode() for w in argv) + b"\0")
    monkeypatch.setattr(healthcheck, "PROC", proc)
    assert healthcheck.address(healthcheck.oldest_serve()) == ("127.0.0.1", 9001)
    assert healthcheck.address(["--host", "::", "--port", "1"]) == ("::1", 1)
    for pid in ("1", "7"):
        (proc / pid / "cmdline").write_bytes(b"/bin/sh\0")
    assert healthcheck.oldest_serve() == ["--port=9001"]  # a worker, the same port
    (proc / "9" / "cmdline").unlink()
    assert healthcheck.oldest_serve() is None


@pytest.mark.parametrize("word", ["HEALTHCHECK", "ENTRYPOINT", "CMD", "USER", "EXPOSE"])
def test_the_final_stage_sets_each_once(word: str) -> None:
    assert [i.keyword for i in _stages()[1]].count(word) == 1
