"""Load benchmark of ``voice-membrane serve``: N concurrent sessions on one process,
measured by ``voice_membrane.bench.serve_load`` (its docstring has the method):
the sizes, the scripted reply and its pace, and what each client session does.

``python -m benchmarks.serve_load`` runs it alone and prints its section.
"""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.scenario import Scenario
from benchmarks.serve_load_report import SERVE_TITLE, serve_section
from voice_membrane.bench.load_client import ClientPlan
from voice_membrane.bench.serve_load import LoadScript, LoadSetup, ServeLoadResults, run_serve_load

LEVELS = (1, 50, 100, 200, 400)  # 1: the single session the targets are relative to
BURST_LEVELS = (100,)  # every session's turns at once, on one process
BARE_LEVELS = (1, 100, 200)  # the bare protocol client in the server's place: the floor
TURNS = 3
LLM_TTFT_S = 0.3
TOKEN_S = 0.025
DELTA_CHARS = 4
TTS_TTFB_S = 0.1
# The fake releases each piece's audio over PACE x its duration. Its pacing is a
# sleep per frame (it only overshoots, so its lateness adds up) spread by a rough
# per-character alignment: at exactly real time it would fall behind its own audio
# by itself. Below real time by this much the fake keeps ahead, as a real service
# (faster than real time) does; the server's ~200 ms lead is then the client's
# buffer.
PACE = 0.8
REPLY = "The weather stays mild and dry today, with a light breeze."  # ~3 s of speech
PROMPT = "What's the weather like today?"
SAMPLE_RATE = 24000
FRAME_MS = 60  # the reply's frames, as the page asks for them (protocol 1.2)
RAMP_S = 4.0  # turns start within it: a steady load rather than a thundering herd
THINK_S = 0.5
TURN_TIMEOUT_S = 15.0  # keeps an overloaded run short; a turn that long has failed
SESSIONS_PER_CLIENT = 100  # a client process reads ~10k frames/s at most: keep it far below
WORKERS = (1, 2)  # serve --workers: one process, and one per core of this machine


def run_serve_load_bench(
    levels: tuple[int, ...] = LEVELS,
    turns: int = TURNS,
    ramp_s: float = RAMP_S,
    log: Callable[[str], None] = print,
    workers: tuple[int, ...] = WORKERS,
    burst_levels: tuple[int, ...] = BURST_LEVELS,
    bare_levels: tuple[int, ...] = BARE_LEVELS,
) -> ServeLoadResults:
    script = LoadScript(REPLY, LLM_TTFT_S, TOKEN_S, DELTA_CHARS, TTS_TTFB_S, PACE)
    client = ClientPlan(PROMPT, SAMPLE_RATE, turns, ramp_s, THINK_S, TURN_TIMEOUT_S, FRAME_MS)
    setup = LoadSetup(script, client, SESSIONS_PER_CLIENT, workers)
    return run_serve_load(setup, levels, log, burst_levels, bare_levels)


SCENARIO = Scenario(
    "serve",
    (SERVE_TITLE,),
    run_serve_load_bench,
    lambda r: [serve_section(r)],
    errors=(ImportError, RuntimeError),
)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="the serve load section alone")
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)), help="sessions, e.g. 20")
    parser.add_argument("--workers", default=",".join(map(str, WORKERS)), help="e.g. 1,2")
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--burst", default=",".join(map(str, BURST_LEVELS)), help="e.g. 100")
    parser.add_argument("--bare", default=",".join(map(str, BARE_LEVELS)), help="e.g. 1,100")
    args = parser.parse_args()

    def sizes(text: str) -> tuple[int, ...]:
        return tuple(int(n) for n in text.split(",") if n)

    results = run_serve_load_bench(
        sizes(args.levels),
        args.turns,
        workers=sizes(args.workers),
        burst_levels=sizes(args.burst),
        bare_levels=sizes(args.bare),
    )
    print(serve_section(results))
