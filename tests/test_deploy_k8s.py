"""deploy/k8s's overlays (cloud: deploy/k8s, keyless: deploy/k8s/local), rendered by
``kubectl kustomize`` and checked against the server's own code: its parser (every
flag), its routes (the probes), its drain timeout (the grace period), the image (the
user), the pipelines (the keyless one) and the memory measured of its processes.
The network (NetworkPolicy, Ingress, Redis's password): test_deploy_k8s_network.py."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.deploy_helpers import (
    KUBECTL,
    OVERLAYS,
    ROOT,
    Manifests,
    dockerfile,
    flag_value,
    http_status,
    manifests,
    serve_args,
    unknown_flags,
)
from voice_membrane.infra.redact import KEY_VARIABLES
from voice_membrane.pipeline.config import load_pipeline
from voice_membrane.server.workers import computes_here

pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed: deploy/k8s cannot be rendered"
)
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.I)
MIB = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}

# Resident memory measured of `voice-membrane serve` (docs/deploy.md, "Capacity and
# sizing"), MiB: a worker's highest with one session after its turns, what each further
# session at once added, and a --workers parent's. local-voice: VmHWM of one process
# after a voice turn, 640,188 kB; with two sessions' turns at once, 744,044 kB; the parent
# of 2 workers 126,456 kB (2026-11-29). openai-voice: 166 MiB warm (117 + Silero's 49),
# 0.4 MiB a session (the benchmarks' 390-410 KiB), the parent of 2 workers 123,540 kB.
MEASURED_MIB = {"local-voice": (625.0, 102.0), "openai-voice": (166.4, 0.4)}
PARENT_MIB = 123.5
HEADROOM = 1.2


@pytest.fixture(params=sorted(OVERLAYS))
def overlay(request: pytest.FixtureRequest) -> Manifests:
    return manifests(request.param)


def _mebibytes(quantity: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)([KMG]i)", quantity).groups()  # type: ignore[union-attr]
    return float(number) * MIB[unit]


def _cores(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def _pipeline(overlay: Manifests) -> tuple[str, str]:
    """The served pipeline's name and its file's text (a ConfigMap's or a shipped one)."""
    value = flag_value(overlay.args(), "--pipeline")
    assert value is not None, "the overlay names its pipeline"
    if value.startswith("/"):
        return Path(value).stem, overlay.mounted_file(value)
    return value, (ROOT / "pipelines" / f"{value}.toml").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(OVERLAYS))
def test_every_overlay_renders_with_and_without_the_sessions_autoscaler(name: str) -> None:
    assert OVERLAYS[name].joinpath("kustomization.yaml").is_file()
    for sessions in (False, True):
        kinds = {d["kind"] for d in manifests(name, sessions_autoscaling=sessions).docs}
        assert {"Deployment", "Service", "Ingress", "NetworkPolicy"} <= kinds


def test_every_flag_in_the_args_is_one_serve_knows(overlay: Manifests) -> None:
    assert unknown_flags(overlay.args()) == []
    # Each once (the base's and the overlay's): argparse would take the last in silence.
    flags = [word.partition("=")[0] for word in overlay.args() if word.startswith("--")]
    assert {flag for flag in flags if flags.count(flag) > 1} <= {"--allow-host"}


def test_the_container_port_is_the_one_served(overlay: Manifests) -> None:
    args, _ = serve_args(overlay.args())
    ports = [int(p["containerPort"]) for p in overlay.container()["ports"]]
    assert ports == [args.port]
    assert args.host == "0.0.0.0"
    (service_port,) = overlay.one("Service", "voice-membrane")["spec"]["ports"]
    assert overlay.port(service_port["targetPort"]) == args.port


def test_the_probes_ask_routes_the_server_answers(overlay: Manifests) -> None:
    container = overlay.container()
    args, _ = serve_args(overlay.args())
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert overlay.port(get["port"]) == args.port, probe
        assert http_status(get["path"]) == 200, probe
    # Draining: out of the Service (readiness fails), yet alive (no restart mid-drain).
    assert http_status(container["readinessProbe"]["httpGet"]["path"], ready=False) == 503
    assert http_status(container["livenessProbe"]["httpGet"]["path"], ready=False) == 200
    assert http_status(container["startupProbe"]["httpGet"]["path"], ready=False) == 200


def test_the_grace_period_covers_the_pre_stop_and_the_drain(overlay: Manifests) -> None:
    args, _ = serve_args(overlay.args())  # --drain-timeout given, or the parser's default
    command = overlay.container()["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep" and len(command) == 2
    grace = overlay.pod()["terminationGracePeriodSeconds"]
    assert grace >= float(command[1]) + args.drain_timeout + 5


def test_the_config_file_is_mounted_where_serve_reads_it(overlay: Manifests) -> None:
    config = tomllib.loads(overlay.mounted_file(flag_value(overlay.args(), "--config") or ""))
    assert config["sessions"]["grace_s"] > 0


def test_keys_and_the_token_come_from_a_secret_never_a_literal(overlay: Manifests) -> None:
    assert not overlay.all("Secret"), "create it, never commit it"
    env = overlay.env()
    assert "VOICE_MEMBRANE_TOKEN" in env  # serve beyond loopback needs one
    for name, variable in env.items():
        if SECRET_NAME.search(name):
            assert "value" not in variable, name
            assert "secretKeyRef" in variable["valueFrom"], name
    assert flag_value(overlay.args(), "--token") is None, "a --token shows in ps"


def test_the_pod_runs_as_the_images_user_without_privileges(overlay: Manifests) -> None:
    (user,) = [i.args.split(":")[0] for i in dockerfile() if i.keyword == "USER"]
    pod = overlay.pod()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert str(pod["securityContext"]["runAsUser"]) == user
    assert overlay.container()["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["automountServiceAccountToken"] is False


def test_the_budget_and_the_service_select_the_deployments_pods(overlay: Manifests) -> None:
    labels = overlay.one("Deployment", "voice-membrane")["spec"]["template"]["metadata"]["labels"]
    for selector in (
        overlay.one("PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        overlay.one("Service", "voice-membrane")["spec"]["selector"],
    ):
        assert selector.items() <= labels.items()


def test_workers_fit_the_cpu_the_pod_may_use(overlay: Manifests) -> None:
    workers = flag_value(overlay.args(), "--workers")
    assert workers is not None and workers.isdigit(), "auto counts the node's cores"
    assert int(workers) <= _cores(overlay.container()["resources"]["limits"]["cpu"])


def test_the_memory_limit_holds_the_measured_processes_with_headroom(
    overlay: Manifests,
) -> None:
    args, _ = serve_args(overlay.args())
    workers = int(flag_value(overlay.args(), "--workers") or 1)
    name, _ = _pipeline(overlay)
    one_session, each_further = MEASURED_MIB[name]
    assert args.max_sessions > 0, "the memory is sized for a number of sessions"
    worker = one_session + each_further * (args.max_sessions - 1)
    needed = (workers * worker + (PARENT_MIB if workers > 1 else 0)) * HEADROOM
    resources = overlay.container()["resources"]
    assert _mebibytes(resources["limits"]["memory"]) >= needed
    assert _mebibytes(resources["requests"]["memory"]) <= _mebibytes(resources["limits"]["memory"])


def test_the_keyless_overlay_runs_the_local_engines_with_no_key(tmp_path: Path) -> None:
    local = manifests("local")
    for name in local.env():
        assert name not in KEY_VARIABLES or name == "VOICE_MEMBRANE_TOKEN", name
        assert not re.search(r"API_KEY|_KEY$", name), name
    name, text = _pipeline(local)
    (tmp_path / f"{name}.toml").write_text(text, encoding="utf-8")
    config = load_pipeline(tmp_path / f"{name}.toml")
    assert config.stt.spec == "whisper", "a listening pipeline, the embedded default"
    assert computes_here(config) and config.llm.spec == "local" and config.tts.spec == "piper"
    # The shipped pipeline, its engines' threads set to the pod's CPUs (by default they
    # would take the node's).
    shipped = tomllib.loads((ROOT / "pipelines" / f"{name}.toml").read_text(encoding="utf-8"))
    ours = tomllib.loads(text)
    scheduling = ours.pop("scheduling")
    assert ours == shipped
    cpus = _cores(local.container()["resources"]["limits"]["cpu"])
    assert scheduling == {"llm_threads": cpus, "tts_threads": cpus}
    image = local.container()["image"]
    assert image.rpartition(":")[2] == "local", "the image built with LOCAL_ENGINES=1"


def test_the_cloud_overlay_gives_its_pipeline_its_key() -> None:
    cloud = manifests("cloud")
    name, text = _pipeline(cloud)
    assert name == "openai-voice" and "OPENAI_API_KEY" in text
    assert "secretKeyRef" in cloud.env()["OPENAI_API_KEY"]["valueFrom"]
