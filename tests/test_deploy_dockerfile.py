"""deploy/Dockerfile, checked without a container engine (none runs here): it
installs with the setup script's own steps, runs as a user, and its entry point,
port and health check agree with the server's flags and routes."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import pytest

from tests.deploy_helpers import (
    ROOT,
    Instruction,
    dockerfile,
    http_status,
    serve_args,
    unknown_flags,
)
from voice_membrane.server import Server

SCRIPTS = ROOT / "scripts"
GUARD_S = 30  # against a hang only


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


def test_the_exposed_port_is_the_one_served_and_health_checked() -> None:
    args, _ = serve_args(_cmd_args())
    exposed = {int(word.split("/")[0]) for word in _final("EXPOSE").args.split()}
    assert exposed == {args.port}
    check = _final("HEALTHCHECK").args
    url = re.search(r"http://127\.0\.0\.1:(\d+)(/\S*?)['\"]", check)
    assert url, check
    assert int(url[1]) == args.port
    assert url[2] == "/healthz"
    assert http_status(url[2]) == 200
    assert http_status(url[2], ready=False) == 200, "healthy while draining"


def _healthcheck_command(port: int) -> list[str]:
    """The HEALTHCHECK's command, with the venv's python and ``port``."""
    check = _final("HEALTHCHECK").args
    words = Instruction("CMD", check.partition(" CMD ")[2], 0).exec_form()
    assert words[0] == "python", "the image's python: a slim image has no curl"
    code = re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port}", words[2])
    return [sys.executable, *words[1:2], code]


def test_the_health_check_command_passes_on_a_serving_server_and_fails_without(
    tmp_path: Path,
) -> None:
    from tests.serve_helpers import pipelines

    async def check() -> tuple[int, int]:
        async with Server(pipelines(tmp_path), port=0, log=lambda *a, **f: None) as server:
            with anyio.fail_after(GUARD_S):
                up = await anyio.run_process(_healthcheck_command(server.port), check=False)
            port = server.port
        with anyio.fail_after(GUARD_S):
            down = await anyio.run_process(_healthcheck_command(port), check=False)
        return up.returncode, down.returncode

    up, down = anyio.run(check)
    assert up == 0
    assert down != 0


@pytest.mark.parametrize("word", ["HEALTHCHECK", "ENTRYPOINT", "CMD", "USER", "EXPOSE"])
def test_the_final_stage_sets_each_once(word: str) -> None:
    assert [i.keyword for i in _stages()[1]].count(word) == 1
