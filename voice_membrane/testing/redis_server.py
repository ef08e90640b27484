"""A real ``redis-server`` (Debian's package) for tests: on a free loopback port,
nothing written to disk (no RDB, no AOF, its working folder a temporary one),
stopped with the test — or killed (``kill``) to see what a lost Redis does,
and started again on its port (``restart``: empty, as a Redis without
persistence comes back). With ``password``, it requires it (``requirepass``).

::

    with RedisServer() as redis:
        store = RedisStore(redis.url)   # redis://127.0.0.1:PORT/0
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

REDIS_SERVER = "/usr/bin/redis-server"
START_TIMEOUT_S = 10.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _read_some(sock: socket.socket) -> bytes:
    """Until the PING's answer (after AUTH's ``+OK``), or an error."""
    got = b""
    while b"PONG" not in got and b"-" not in got:
        chunk = sock.recv(64)
        if not chunk:
            break
        got += chunk
    return got


class RedisServer:
    def __init__(self, executable: str | None = None, password: str | None = None) -> None:
        found = executable or shutil.which("redis-server") or REDIS_SERVER
        if not Path(found).exists():
            raise RuntimeError(
                "redis-server is not installed (scripts/system-packages.sh installs it)"
            )
        self.executable = found
        self.password = password
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def url(self) -> str:
        auth = "" if self.password is None else f":{quote(self.password, safe='')}@"
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self, port: int | None = None) -> RedisServer:
        self._dir = tempfile.TemporaryDirectory(prefix="vm-redis-")
        self.port = port or free_port()
        auth = [] if self.password is None else ["--requirepass", self.password]
        self.process = subprocess.Popen(
            [
                self.executable,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self._dir.name,
                "--protected-mode",
                "yes",
                "--daemonize",
                "no",
                "--loglevel",
                "warning",
                *auth,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)
        return self

    def restart(self) -> None:
        """Stopped, then started again on the same port (empty)."""
        port = self.port
        self.stop()
        self.start(port)

    def _answers(self) -> bool:
        ping = b"PING\r\n"
        if self.password is not None:
            word = self.password.encode()
            ping = b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%b\r\n" % (len(word), word) + ping
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(ping)
                return b"+PONG" in _read_some(sock)
        except OSError:
            return False

    def kill(self) -> None:
        """Gone at once (SIGKILL), as a crashed or unplugged Redis."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._dir is not None:
            with contextlib.suppress(OSError):
                self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
