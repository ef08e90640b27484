"""deploy/k8s, rendered by ``kubectl kustomize`` and checked against the server's
own code: its parser (every flag), its routes (the probes), its metrics (the
autoscaler's), its drain timeout (the grace period) and the image (the user)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from functools import cache
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.deploy_helpers import K8S, dockerfile, flag_value, http_status, serve_args, unknown_flags
from voice_membrane.server.prometheus import ServerMetrics

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed: deploy/k8s cannot be rendered"
)
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.I)


@cache
def _rendered() -> tuple[dict[str, Any], ...]:
    assert KUBECTL is not None
    done = subprocess.run(
        [KUBECTL, "kustomize", str(K8S)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def _one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [
        d
        for d in _rendered()
        if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"{kind} {name or ''}: {len(found)} found"
    return found[0]


def _deployment() -> dict[str, Any]:
    return _one("Deployment", "voice-membrane")


def _container() -> dict[str, Any]:
    (container,) = _deployment()["spec"]["template"]["spec"]["containers"]
    return container


def _args() -> list[str]:
    args = _container()["args"]
    assert args[0].startswith("-"), "the image's entry point is `voice-membrane serve`"
    return list(args)


def _port(name_or_number: str | int) -> int:
    if isinstance(name_or_number, int):
        return name_or_number
    (port,) = [p for p in _container()["ports"] if p["name"] == name_or_number]
    return int(port["containerPort"])


def test_every_flag_in_the_args_is_one_serve_knows() -> None:
    # Fails until `--workers` and `--config` (issue 27's other parts) are on main.
    assert unknown_flags(_args()) == []


def test_the_container_port_is_the_one_served() -> None:
    args, _ = serve_args(_args())
    ports = [int(p["containerPort"]) for p in _container()["ports"]]
    assert ports == [args.port]
    assert args.host == "0.0.0.0"
    service = _one("Service", "voice-membrane")
    (service_port,) = service["spec"]["ports"]
    assert _port(service_port["targetPort"]) == args.port


def test_the_probes_ask_routes_the_server_answers() -> None:
    container = _container()
    args, _ = serve_args(_args())
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert _port(get["port"]) == args.port, probe
        assert http_status(get["path"]) == 200, probe
    # Draining: out of the Service (readiness fails), yet alive (no restart mid-drain).
    assert http_status(container["readinessProbe"]["httpGet"]["path"], ready=False) == 503
    assert http_status(container["livenessProbe"]["httpGet"]["path"], ready=False) == 200
    assert http_status(container["startupProbe"]["httpGet"]["path"], ready=False) == 200


def test_the_grace_period_covers_the_pre_stop_and_the_drain() -> None:
    args, _ = serve_args(_args())  # --drain-timeout given, or the parser's default
    pod = _deployment()["spec"]["template"]["spec"]
    command = _container()["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep" and len(command) == 2
    pre_stop_s = float(command[1])
    assert pod["terminationGracePeriodSeconds"] >= pre_stop_s + args.drain_timeout + 5


def test_the_autoscaler_follows_a_family_the_server_exports() -> None:
    hpa = _one("HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", "voice-membrane")
    families = {metric.name for metric in ServerMetrics().registry.collect()}
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "Pods"
    assert metric["pods"]["metric"]["name"] in families
    # It scales out before the pods are full: below workers x --max-sessions.
    args, _ = serve_args(_args())
    workers = int(flag_value(_args(), "--workers") or 1)
    average = float(metric["pods"]["target"]["averageValue"])
    assert 0 < average < workers * args.max_sessions


def test_the_config_file_is_mounted_where_serve_reads_it_and_names_the_redis() -> None:
    path = PurePosixPath(flag_value(_args(), "--config") or "")
    mounts = {m["name"]: m["mountPath"] for m in _container()["volumeMounts"]}
    volumes = {v["name"]: v for v in _deployment()["spec"]["template"]["spec"]["volumes"]}
    (volume,) = [n for n, mount in mounts.items() if PurePosixPath(mount) == path.parent]
    config_map = _one("ConfigMap", volumes[volume]["configMap"]["name"])
    config = tomllib.loads(config_map["data"][path.name])
    store = urlsplit(config["sessions"]["store"])
    assert store.scheme == "redis"
    assert config["sessions"]["grace_s"] > 0
    redis = _one("Service", store.hostname)
    assert store.port in [p["port"] for p in redis["spec"]["ports"]]


def test_keys_and_the_token_come_from_a_secret_never_a_literal() -> None:
    assert not [d for d in _rendered() if d["kind"] == "Secret"], "create it, never commit it"
    env = _container()["env"]
    names = {e["name"] for e in env}
    assert "VOICE_MEMBRANE_TOKEN" in names  # serve beyond loopback needs one
    for variable in env:
        if SECRET_NAME.search(variable["name"]):
            assert "value" not in variable, variable["name"]
            assert "secretKeyRef" in variable["valueFrom"], variable["name"]
    assert flag_value(_args(), "--token") is None, "a --token shows in ps"


def test_the_pod_runs_as_the_images_user_without_privileges() -> None:
    (user,) = [i.args.split(":")[0] for i in dockerfile() if i.keyword == "USER"]
    pod = _deployment()["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert str(pod["securityContext"]["runAsUser"]) == user
    assert _container()["securityContext"]["allowPrivilegeEscalation"] is False


def test_the_budget_and_the_service_select_the_deployments_pods() -> None:
    labels = _deployment()["spec"]["template"]["metadata"]["labels"]
    for selector in (
        _one("PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        _one("Service", "voice-membrane")["spec"]["selector"],
    ):
        assert selector.items() <= labels.items()


def test_workers_fit_the_cpu_the_pod_may_use() -> None:
    workers = flag_value(_args(), "--workers")
    assert workers is not None and workers.isdigit(), "auto counts the node's cores"
    limit = _container()["resources"]["limits"]["cpu"]
    cores = float(limit[:-1]) / 1000 if limit.endswith("m") else float(limit)
    assert int(workers) <= cores
