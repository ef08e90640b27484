"""deploy/k8s's network and secrets, in every overlay: the NetworkPolicies select the
serve and Redis pods by the labels their Deployments give them (only serve reaches
Redis; serve is reached only on its port), Redis's password comes from the Secret
(to Redis, its probe and serve's store URL) and no manifest holds a literal one, the
Ingress serves the public paths over TLS under a name serve answers, and the
autoscalers (CPU by default, open sessions as a component with its adapter's rule)
follow what the server exports. Redis started from its manifest: test_hostile_deploy_redis.py."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from websockets.datastructures import Headers
from websockets.http11 import Request

from tests.deploy_helpers import (
    KUBECTL,
    OVERLAYS,
    SESSIONS_AUTOSCALING,
    Manifests,
    flag_value,
    http_status,
    manifests,
    serve_args,
)
from voice_membrane.server.http_routes import route
from voice_membrane.server.prometheus import ServerMetrics
from voice_membrane.server.protocol import SESSION_PATH

pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed: deploy/k8s cannot be rendered"
)
SECRET = "voice-membrane-secrets"
STORE_VARIABLE = "VOICE_MEMBRANE_SESSION_STORE"  # what serve reads its store URL from
REFERENCE = re.compile(r"^\$\((\w+)\)$")  # Kubernetes' $(VAR) in a value
INTERNAL_PATHS = ("/metrics", "/healthz", "/readyz")


@pytest.fixture(params=sorted(OVERLAYS))
def overlay(request: pytest.FixtureRequest) -> Manifests:
    return manifests(request.param)


def _labels(overlay: Manifests, deployment: str) -> dict[str, str]:
    labels = overlay.one("Deployment", deployment)["spec"]["template"]["metadata"]["labels"]
    return dict(labels)


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) == {"matchLabels"}, "matchLabels only: checked here"
    return bool(selector["matchLabels"].items() <= labels.items())


def _policy_for(overlay: Manifests, deployment: str) -> dict[str, Any]:
    labels = _labels(overlay, deployment)
    found = [p for p in overlay.all("NetworkPolicy") if _selects(p["spec"]["podSelector"], labels)]
    assert len(found) == 1, f"{deployment}: {len(found)} NetworkPolicies select its pods"
    return found[0]


def _secret_ref(variable: dict[str, Any]) -> tuple[str, str]:
    assert "value" not in variable, variable["name"]
    ref = variable["valueFrom"]["secretKeyRef"]
    return ref["name"], ref["key"]


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def test_only_the_serve_pods_reach_redis_and_redis_reaches_nothing(overlay: Manifests) -> None:
    policy = _policy_for(overlay, "redis")["spec"]
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    assert policy["egress"] == []
    (rule,) = policy["ingress"]
    (source,) = rule["from"]
    assert set(source) == {"podSelector"}, "no namespace or address block: this namespace's"
    assert _selects(source["podSelector"], _labels(overlay, "voice-membrane"))
    assert not _selects(source["podSelector"], _labels(overlay, "redis"))
    (port,) = rule["ports"]
    assert overlay.port(port["port"], "redis") == 6379
    (service_port,) = overlay.one("Service", "redis")["spec"]["ports"]
    assert overlay.port(service_port["targetPort"], "redis") == 6379


def test_serve_is_reached_on_its_port_only(overlay: Manifests) -> None:
    policy = _policy_for(overlay, "voice-membrane")["spec"]
    assert "Ingress" in policy["policyTypes"]
    args, _ = serve_args(overlay.args())
    assert policy["ingress"], "no rule would refuse everyone, the ingress controller too"
    for rule in policy["ingress"]:
        assert rule["ports"], "a rule without ports opens every port"
        assert [overlay.port(p["port"]) for p in rule["ports"]] == [args.port]


def test_redis_asks_for_the_secrets_password_and_serve_gives_it(overlay: Manifests) -> None:
    redis = overlay.container("redis")
    env = overlay.env("redis")
    password = _secret_ref(env["REDIS_PASSWORD"])
    assert password[0] == SECRET
    assert _secret_ref(env["REDISCLI_AUTH"]) == password  # the probe's redis-cli
    script = " ".join(redis["command"])
    assert "requirepass $REDIS_PASSWORD" in script
    assert not any("requirepass" in word for word in redis.get("args", []))
    # serve: the store URL carries the same password, by reference.
    serve_env = overlay.env()
    store = urlsplit(serve_env[STORE_VARIABLE]["value"])
    assert store.scheme == "redis"
    (referenced,) = REFERENCE.findall(store.password or "")
    assert _secret_ref(serve_env[referenced]) == password
    names = list(serve_env)
    assert names.index(referenced) < names.index(STORE_VARIABLE), "$(…) sees only earlier ones"
    service = overlay.one("Service", store.hostname)
    assert store.port in [p["port"] for p in service["spec"]["ports"]]
    # The config file names the same store, without the password.
    config = tomllib.loads(overlay.mounted_file(flag_value(overlay.args(), "--config") or ""))
    in_file = urlsplit(config["sessions"]["store"])
    assert in_file.password is None
    assert (in_file.hostname, in_file.port) == (store.hostname, store.port)


def test_no_manifest_holds_a_literal_password(overlay: Manifests) -> None:
    assert not overlay.all("Secret")
    for doc in overlay.docs:
        for text in _strings(doc):
            for url in re.findall(r"\b[a-z][a-z0-9+.-]*://\S+", text):
                password = urlsplit(url).password
                assert password is None or REFERENCE.match(password), url
            for value in re.findall(r"requirepass\s+(\S+)", text):
                assert value.startswith("$"), "requirepass takes a variable"


def test_the_ingress_serves_the_public_paths_over_tls_under_a_name_serve_answers(
    overlay: Manifests,
) -> None:
    ingress = overlay.one("Ingress", "voice-membrane")
    spec = ingress["spec"]
    hosts = [rule["host"] for rule in spec["rules"]]
    (tls,) = spec["tls"]
    assert tls["secretName"] and sorted(tls["hosts"]) == sorted(hosts)
    assert "cert-manager.io/cluster-issuer" in ingress["metadata"]["annotations"]
    allowed = [w.partition("=")[2] for w in overlay.args() if w.startswith("--allow-host=")]
    assert set(hosts) <= set(allowed)
    service_ports = {p["name"] for p in overlay.one("Service", "voice-membrane")["spec"]["ports"]}
    routed: list[tuple[str, str]] = []
    for rule in spec["rules"]:
        for path in rule["http"]["paths"]:
            backend = path["backend"]["service"]
            assert backend["name"] == "voice-membrane" and backend["port"]["name"] in service_ports
            routed.append((path["pathType"], path["path"]))
    asked = {"/": 200, "/index.html": 200, "/static/app.js": 200}
    for url, status in asked.items():
        assert any(_matches(rule, url) for rule in routed), url
        assert http_status(url) == status
    assert any(_matches(rule, SESSION_PATH) for rule in routed)
    request = Request(SESSION_PATH, Headers([("Host", "127.0.0.1:8765")]))
    assert route(request, allowed_origins=(), ready=lambda: True, metrics=lambda: b"") is None
    for url in INTERNAL_PATHS:
        assert not any(_matches(rule, url) for rule in routed), f"{url} stays inside"


def _matches(rule: tuple[str, str], url: str) -> bool:
    kind, path = rule
    if kind == "Exact":
        return url == path
    assert kind == "Prefix"
    return url == path or url.startswith(path.rstrip("/") + "/")


def test_the_ingress_outlasts_the_idle_timeout_and_buffers_nothing(overlay: Manifests) -> None:
    annotations = overlay.one("Ingress", "voice-membrane")["metadata"]["annotations"]
    args, _ = serve_args(overlay.args())
    for way in ("read", "send"):
        timeout = annotations[f"nginx.ingress.kubernetes.io/proxy-{way}-timeout"]
        assert float(timeout) > args.idle_timeout
    assert annotations["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    assert annotations["nginx.ingress.kubernetes.io/proxy-request-buffering"] == "off"


def test_the_default_autoscaler_needs_only_cpu(overlay: Manifests) -> None:
    hpa = overlay.one("HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", "voice-membrane")
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "Resource" and metric["resource"]["name"] == "cpu"
    assert 0 < metric["resource"]["target"]["averageUtilization"] < 100
    assert overlay.container()["resources"]["requests"]["cpu"], "utilization of the request"


def test_the_sessions_autoscaler_follows_a_family_the_server_exports() -> None:
    cloud = manifests("cloud", sessions_autoscaling=True)
    (metric,) = cloud.one("HorizontalPodAutoscaler")["spec"]["metrics"]
    assert metric["type"] == "Pods"
    name = metric["pods"]["metric"]["name"]
    assert name in {family.name for family in ServerMetrics().registry.collect()}
    # It scales out before the pods are full: below workers x --max-sessions.
    args, _ = serve_args(cloud.args())
    workers = int(flag_value(cloud.args(), "--workers") or 1)
    assert 0 < float(metric["pods"]["target"]["averageValue"]) < workers * args.max_sessions
    # The adapter's shipped rule serves that metric from that family.
    values = yaml.safe_load(
        (SESSIONS_AUTOSCALING / "prometheus-adapter-values.yaml").read_text(encoding="utf-8")
    )
    (rule,) = values["rules"]["custom"]
    assert rule["name"]["as"] == name
    assert rule["seriesQuery"].startswith(name + "{")
    assert set(rule["resources"]["overrides"]) == {"namespace", "pod"}
