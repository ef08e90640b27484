"""Every ``voice-membrane …`` command the README and the docs give a user to type
parses with the command line it names: a renamed or removed option fails here,
not in a new user's terminal. (The quickstarts themselves are run for real by
test_run_e2e, test_browser_page and test_bench.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from voice_membrane.cli.main import _build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_BLOCK = re.compile(r"```(?:sh|bash|shell|console)?\n(.*?)```", re.DOTALL)
# Not commands: a usage synopsis (``[--pipeline FILE]…``) or an error message a
# command printed (``voice-membrane run: …``).
NOT_A_COMMAND = re.compile(r"^voice-membrane \S+:|\[--")


def _commands(path: Path) -> list[str]:
    commands = []
    for block in SHELL_BLOCK.findall(path.read_text(encoding="utf-8")):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split("  #", 1)[0].strip()
            if line.startswith("voice-membrane ") and not NOT_A_COMMAND.search(line):
                commands.append(line)
    return commands


COMMANDS = [(path.relative_to(ROOT).as_posix(), line) for path in DOCS for line in _commands(path)]


def test_the_readme_gives_the_three_quickstarts() -> None:
    readme = [line for where, line in COMMANDS if where == "README.md"]
    subcommands = [shlex.split(line)[1] for line in readme]
    assert {"run", "serve", "bench"} <= set(subcommands), readme


@pytest.mark.parametrize(("where", "line"), COMMANDS, ids=[f"{w}: {c}" for w, c in COMMANDS])
def test_each_command_parses(where: str, line: str) -> None:
    argv = shlex.split(line)[1:]
    try:
        _build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse's way of saying no
        pytest.fail(f"{where}: `{line}` does not parse (exit {exc.code})")
