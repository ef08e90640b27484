"""A private PulseAudio server with a null sink, to test real playback without a sound card.

``pulse_null_sink()`` starts ``pulseaudio`` in the foreground on a socket in a
temporary directory, with one sink (``vsink``) that plays into nothing but whose
monitor (``vsink.monitor``) can be recorded with ``parecord``. While it runs,
``PULSE_SERVER`` points this process at it, so PortAudio's ALSA ``default``
device (ALSA's pulse plugin, from Debian's ``libasound2-plugins``, which the
``pulseaudio`` package pulls in) plays into it::

    with pulse_null_sink() as pulse, pulse.record(path) as recording:
        ...  # play through SpeakerSink
    samples, rate = soundfile.read(path)

``server.microphone()`` adds a virtual microphone, the default input device,
that hears whatever file its ``play`` speaks into it (``VirtualMicrophone``).

As root, pulseaudio only warns ("not intended to be run as root") unless
``--system`` is given; it runs normally in per-user mode once its runtime and
state directories are private ones it owns. Nothing here touches the machine's
own audio setup or root's home directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

SINK = "vsink"
MIC_FEED = "vmic_feed"  # a null sink whose monitor is the virtual microphone
MIC = "vmic"
START_TIMEOUT = 10.0  # seconds for the server, or a recording, to come up


class PulseUnavailable(RuntimeError):
    """The pulseaudio program is not installed (the only reason to skip)."""


class PulseError(RuntimeError):
    """The private server or a recording did not work; the message says why."""


class Recording:
    """``parecord`` writing what the null sink plays to a WAV file, until ``stop``."""

    def __init__(self, server: PulseServer, path: Path, sample_rate: int, channels: int) -> None:
        self.path = path
        self.sample_rate = sample_rate
        before = server.count("source-outputs")
        self._process = subprocess.Popen(
            [
                "parecord",
                f"--device={server.monitor}",
                "--file-format=wav",
                "--format=s16le",
                f"--rate={sample_rate}",
                f"--channels={channels}",
                # Small fragments: the file keeps up with playback, and the null sink
                # runs on short blocks (its idle default is 2 s).
                "--latency-msec=50",
                str(path),
            ],
            env=server.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        # Audio played before the record stream exists would be lost.
        deadline = time.monotonic() + START_TIMEOUT
        while server.count("source-outputs") <= before:
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise PulseError(f"parecord did not start: {self._errors()}")
            time.sleep(0.02)

    def stop(self) -> None:
        """End the recording; SIGINT lets parecord finish the WAV header."""
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stderr is not None:
            self._process.stderr.close()

    def _errors(self) -> str:
        if self._process.poll() is None or self._process.stderr is None:
            return "(still running)"
        return self._process.stderr.read().decode(errors="replace").strip() or "(no message)"

    def __enter__(self) -> Recording:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class VirtualMicrophone:
    """A microphone on the private server: the source ``vmic`` (made the default
    source, so PortAudio's ALSA ``default`` device records from it) hears what is
    played into the null sink ``vmic_feed`` — ``play(path)`` speaks a sound file
    into it in real time (``paplay``). ``unplug()`` removes the source."""

    def __init__(self, server: PulseServer) -> None:
        self._server = server
        self.feed = MIC_FEED
        self.source = MIC
        self._modules = [
            server.pactl("load-module", "module-null-sink", f"sink_name={MIC_FEED}").strip(),
            server.pactl(
                "load-module",
                "module-remap-source",
                f"master={MIC_FEED}.monitor",
                f"source_name={MIC}",
            ).strip(),
        ]
        server.pactl("set-default-source", MIC)
        server.pactl("set-default-sink", server.sink)  # the speaker stays where it was
        refresh_portaudio()

    def play(self, path: str | os.PathLike[str]) -> subprocess.Popen[bytes]:
        """Start speaking the file into the microphone; wait() on the result."""
        return subprocess.Popen(
            ["paplay", f"--device={self.feed}", str(path)],
            env=self._server.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def unplug(self) -> None:
        for module in reversed(self._modules):
            self._server.pactl("unload-module", module)
        self._modules = []


class PulseServer:
    """The running private server: its address, its sink, and recording from it."""

    def __init__(self, root: Path, socket: Path) -> None:
        self.root = root
        self.process: subprocess.Popen[bytes] | None = None
        self.server = f"unix:{socket}"
        self.sink = SINK
        self.monitor = f"{SINK}.monitor"
        self.env = {**os.environ, **client_environment(root, socket)}
        self._recordings: list[Recording] = []

    def record(
        self, path: str | os.PathLike[str], sample_rate: int = 22050, channels: int = 1
    ) -> Recording:
        """Start recording the sink's monitor to a WAV file at ``path``."""
        recording = Recording(self, Path(path), sample_rate, channels)
        self._recordings.append(recording)
        return recording

    def pactl(self, *args: str) -> str:
        done = subprocess.run(
            ["pactl", *args], env=self.env, capture_output=True, text=True, timeout=10
        )
        if done.returncode != 0:
            raise PulseError(f"pactl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def count(self, kind: str) -> int:
        """How many of ``kind`` (sinks, source-outputs, sink-inputs, …) exist."""
        return len(self.pactl("list", "short", kind).splitlines())

    def microphone(self) -> VirtualMicrophone:
        """Add a virtual microphone (see ``VirtualMicrophone``); no stream may be open."""
        return VirtualMicrophone(self)

    def kill(self) -> None:
        """Kill the server, as if the sound system died under its clients."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop_recordings(self) -> None:
        for recording in self._recordings:
            recording.stop()


def client_environment(root: Path, socket: Path) -> dict[str, str]:
    # PULSE_COOKIE keeps libpulse from creating a cookie in the real home directory.
    return {"PULSE_SERVER": f"unix:{socket}", "PULSE_COOKIE": str(root / "cookie")}


@contextmanager
def pulse_null_sink() -> Iterator[PulseServer]:
    """Run a private PulseAudio server with a null sink for the duration of the block.

    Raises ``PulseUnavailable`` if ``pulseaudio`` is not installed and
    ``PulseError`` if it does not come up (with the end of its log).
    """
    if shutil.which("pulseaudio") is None:
        raise PulseUnavailable("pulseaudio is not installed (apt-get install pulseaudio)")
    root = Path(tempfile.mkdtemp(prefix="vm-pulse-"))
    socket = root / "native"
    log_path = root / "pulseaudio.log"
    for sub in ("runtime", "state", "home"):
        (root / sub).mkdir(mode=0o700)
    server_env = {
        **os.environ,
        "HOME": str(root / "home"),
        "XDG_RUNTIME_DIR": str(root / "runtime"),
        "PULSE_RUNTIME_PATH": str(root / "runtime"),
        "PULSE_STATE_PATH": str(root / "state"),
    }
    server_env.pop("DBUS_SESSION_BUS_ADDRESS", None)  # never join the desktop's session
    command = [
        "pulseaudio",
        "--daemonize=no",
        "--system=no",
        "--use-pid-file=no",  # another server (the desktop's) may be running
        "--exit-idle-time=-1",
        "--disallow-exit",
        "-n",  # no default.pa: no hardware detection, only the modules below
        # norewinds: rewinds make PortAudio's ALSA stream underrun in bursts here.
        f"--load=module-null-sink sink_name={SINK} norewinds=1",
        f"--load=module-native-protocol-unix socket={socket} auth-anonymous=1",
        "--log-target=stderr",
    ]
    saved = {key: os.environ.get(key) for key in client_environment(root, socket)}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, env=server_env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    server = PulseServer(root, socket)
    server.process = process
    try:
        _wait_until_up(server, process, log_path)
        os.environ.update(client_environment(root, socket))
        refresh_portaudio()
        yield server
    finally:
        server.stop_recordings()
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        refresh_portaudio()
        shutil.rmtree(root, ignore_errors=True)


def refresh_portaudio() -> None:
    """Make an already-imported sounddevice see the devices as they are now.

    PortAudio lists devices once, at initialisation (sounddevice's import), and
    ALSA decides whether ``default`` is PulseAudio at that moment. sounddevice's
    private ``_terminate``/``_initialize`` re-run it; PyAudio initialises per
    ``PyAudio()`` and needs nothing. Must not run while a stream is open.
    """
    sd = sys.modules.get("sounddevice")
    if sd is not None:
        sd._terminate()
        sd._initialize()


def _wait_until_up(server: PulseServer, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            raise PulseError(f"pulseaudio exited ({process.returncode}): {_tail(log)}")
        try:
            if server.count("sinks") >= 1:
                return
        except (PulseError, subprocess.TimeoutExpired):
            pass
        if time.monotonic() > deadline:
            raise PulseError(f"pulseaudio did not come up in {START_TIMEOUT:.0f} s: {_tail(log)}")
        time.sleep(0.05)


def _tail(log: Path, lines: int = 5) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return " | ".join(text.strip().splitlines()[-lines:]) or "(empty log)"
