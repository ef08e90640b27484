"""The session store as deploy/k8s ships it, tried as another pod would: Debian's
redis-server started with deploy/k8s/base/redis.yaml's own command and environment
(the password from the Secret's variable) refuses a client without the password or
with a wrong one, keeps the password off its command line, is ready for its probe
only with the password, and serves the store URL serve is given
(deployment.yaml's, its $(REDIS_PASSWORD) filled in as Kubernetes does)."""

from __future__ import annotations

import re
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis
import yaml
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.deploy_helpers import K8S
from voice_membrane.server.redis_store import RedisStore
from voice_membrane.server.session_store import StoreUnavailable
from voice_membrane.testing.redis_server import free_port

pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None or shutil.which("redis-cli") is None,
    reason="redis-server is not installed (scripts/system-packages.sh installs it)",
)
START_TIMEOUT_S = 10.0
GUARD_S = 10


def _docs(name: str) -> list[dict[str, Any]]:
    text = (K8S / "base" / name).read_text(encoding="utf-8")
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _container(name: str) -> dict[str, Any]:
    (deployment,) = [d for d in _docs(name) if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _env_from_secret(container: dict[str, Any], key: str) -> list[str]:
    """The container's variables that Kubernetes fills with the Secret's ``key``."""
    return [
        e["name"]
        for e in container.get("env", [])
        if e.get("valueFrom", {}).get("secretKeyRef", {}).get("key") == key
    ]


class ShippedRedis:
    """redis.yaml's redis container as a process here: on a free loopback port, its
    working folder a temporary one (the manifest's /data)."""

    def __init__(self, folder: Path, password: str) -> None:
        self.container = _container("redis.yaml")
        self.password = password
        names = _env_from_secret(self.container, "redis-password")
        self.env = {name: password for name in names}
        self.port = free_port()
        # Without a command of its own the image's entry point runs redis-server ARGS.
        entry = self.container.get("command", ["redis-server"])
        command = [*entry, *self.container.get("args", [])]
        # sh -c SCRIPT $0 ARGS…: ours go with the manifest's, before the last "-".
        command += ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(folder)]
        self.process = subprocess.Popen(
            command,
            env={"PATH": "/usr/bin:/bin", **self.env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._listening():
            assert self.process.poll() is None, self.process.stderr.read()  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.02)

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def client(self, password: str | None) -> redis.Redis:
        # No retries: a refusal is the answer looked for (redis-py retries it otherwise).
        return redis.Redis(
            port=self.port, password=password, socket_timeout=GUARD_S, retry=Retry(NoBackoff(), 0)
        )

    def probe(self, password: str | None) -> int:
        """The readiness probe's exit code, its redis-cli pointed at our port."""
        (command,) = [self.container["readinessProbe"]["exec"]["command"]]
        pointed: list[str] = []
        for word in command:  # a word of its own (exec form) or in a shell's script
            if word == "redis-cli":
                pointed += [word, "-p", str(self.port)]
            else:
                pointed.append(re.sub(r"\bredis-cli\b", f"redis-cli -p {self.port}", word))
        env = {"PATH": "/usr/bin:/bin"}
        if password is not None:
            env["REDISCLI_AUTH"] = password
        return subprocess.run(pointed, env=env, timeout=GUARD_S, check=False).returncode

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def shipped(tmp_path: Path) -> Iterator[ShippedRedis]:
    server = ShippedRedis(tmp_path, secrets.token_hex(32))
    try:
        yield server
    finally:
        server.stop()


def test_a_client_without_the_password_reads_nothing(shipped: ShippedRedis) -> None:
    assert shipped.client(shipped.password).set("vm:{s}:record", "a conversation")
    with pytest.raises(redis.AuthenticationError):
        shipped.client(None).get("vm:{s}:record")
    with pytest.raises(redis.AuthenticationError):
        shipped.client(None).keys("*")
    with pytest.raises(redis.AuthenticationError):
        shipped.client("not-" + shipped.password).ping()
    assert shipped.client(shipped.password).get("vm:{s}:record") == b"a conversation"


def test_the_password_is_on_no_command_line(shipped: ShippedRedis) -> None:
    # The shell execs redis-server: one process, the password on its stdin only.
    cmdline = Path(f"/proc/{shipped.process.pid}/cmdline").read_bytes()
    assert b"redis-server" in cmdline
    assert shipped.password.encode() not in cmdline
    assert shipped.password not in " ".join(shipped.container.get("command", []))


def test_ready_only_with_the_password(shipped: ShippedRedis) -> None:
    assert shipped.probe(shipped.password) == 0
    assert shipped.probe(None) != 0
    assert shipped.probe("wrong") != 0


def test_the_store_url_serve_is_given_opens_and_without_the_password_does_not(
    shipped: ShippedRedis,
) -> None:
    (variable,) = [e for e in _container("deployment.yaml")["env"] if "value" in e]
    url = str(variable["value"])
    reference = "$(REDIS_PASSWORD)"
    assert reference in url
    # Kubernetes fills $(REDIS_PASSWORD) in; the host is ours, not the Service's.
    ours = url.replace(reference, shipped.password).replace(
        "@redis:6379", f"@127.0.0.1:{shipped.port}"
    )
    bare = re.sub(r"//[^@]*@", "//", ours)

    async def open_both() -> None:
        with anyio.fail_after(GUARD_S):
            store = RedisStore(ours)
            await store.open()
            await store.aclose()
            assert shipped.password not in store.name
            with pytest.raises(StoreUnavailable):
                await RedisStore(bare).open()

    anyio.run(open_both)
