"""The prompts a benchmark asks: a default set shipped here, or a user's file."""

from __future__ import annotations

import json
from pathlib import Path

from ..pipeline.config import ConfigError

# Warm-up turns are not counted: the first request pays connection set-up and
# lazy loading that a user's later turns do not.
WARM_UP_PROMPT = "Hello, who are you?"
# Short voice-assistant questions; make bench's first-audio benchmark asks them too.
DEFAULT_PROMPTS = (
    "What's the weather usually like in Paris in April?",
    "Set a timer for ten minutes.",
    "Who wrote Pride and Prejudice?",
    "How far away is the moon?",
    "Tell me a fun fact about octopuses.",
    "How do I boil an egg?",
    "What's the capital of Australia?",
    "Can you recommend a good book for a long flight?",
    "How many cups are in a liter?",
    "Why is the sky blue?",
    "What should I cook for dinner tonight?",
    "How long should a power nap be?",
    "What's a good name for a golden retriever?",
    "Remind me to call my mom tomorrow.",
    "How do I say thank you in Japanese?",
    "What's the difference between a virus and a bacterium?",
    "Give me a quick tip for falling asleep faster.",
    "How many minutes are in a day?",
    "What's a healthy snack I can make in five minutes?",
    "Tell me a short joke.",
)


def load_prompts(path: Path) -> list[str]:
    """The prompts of a text file (one a line, blank lines skipped) or of a JSONL
    file (``{"prompt": …}`` a line, read as such when its first line is a JSON
    object). ``ConfigError`` (one line) for a file that cannot be read, is not
    UTF-8, holds a bad line or no prompt."""
    where = f"--prompts {path}"
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 text (byte {exc.start + 1})") from None
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise ConfigError(f"{where}: no prompt in the file")
    if not lines[0][1].startswith("{"):
        return [line for _, line in lines]
    prompts = []
    for number, line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: line {number} is not JSON ({exc.msg})") from None
        prompt = record.get("prompt") if isinstance(record, dict) else None
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError(f'{where}: line {number} has no "prompt" string')
        prompts.append(prompt.strip())
    return prompts
