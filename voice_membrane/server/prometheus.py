"""The server's Prometheus metrics, in a registry of its own (several servers
may run in one process, in tests)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# First audio of a turn, from the request: the embedded model takes ~0.3 to 1 s, a
# cloud model more; the buckets cover both with room for a loaded machine.
FIRST_AUDIO_BUCKETS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


class ServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.sessions = Gauge("voice_membrane_sessions", "Sessions open now", registry=r)
        self.turns = Counter("voice_membrane_turns", "Turns run", registry=r)
        self.first_audio = Histogram(
            "voice_membrane_first_audio_seconds",
            "Time from a turn's request to its first audio",
            buckets=FIRST_AUDIO_BUCKETS,
            registry=r,
        )
        self.voice_to_voice = Histogram(
            "voice_membrane_voice_to_voice_seconds",
            "Time from the end of the user's speech to the reply's first audio",
            buckets=FIRST_AUDIO_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "voice_membrane_errors", "Error events sent, by code", ["kind"], registry=r
        )
        self.dropped = Counter(
            "voice_membrane_dropped_clients", "Clients dropped for not keeping up", registry=r
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
