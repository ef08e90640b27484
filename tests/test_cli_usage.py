"""The command line's own errors: a mistyped option is reported by its command
(its usage, and the option it was probably meant to be), and ``--version``."""

from __future__ import annotations

import importlib.metadata

import pytest

from voice_membrane.cli import main


def _exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as excinfo:
        main(argv)
    captured = capsys.readouterr()
    code = excinfo.value.code
    return (code if isinstance(code, int) else 1), captured.out, captured.err


@pytest.mark.parametrize(
    ("argv", "command", "meant"),
    [
        (["run", "--promt", "hi"], "run", "--prompt"),
        (["serve", "--prot", "1"], "serve", "--port"),
        (["bench", "--trns=3"], "bench", "--turns"),
        (["demo", "--sped", "2"], "demo", "--speed"),
    ],
)
def test_a_mistyped_option_is_reported_by_its_command_with_a_guess(
    argv: list[str], command: str, meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _exit(argv, capsys)
    assert code == 2
    assert err.startswith(f"usage: voice-membrane {command} ")
    assert f"voice-membrane {command}: error: unrecognized arguments: {argv[1]}" in err
    assert f"(did you mean {meant}?)" in err


def test_an_extra_word_is_reported_without_a_guess(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _exit(["run", "hi"], capsys)
    assert code == 2
    assert err.startswith("usage: voice-membrane run ")
    assert err.rstrip().endswith("voice-membrane run: error: unrecognized arguments: hi")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _exit(["--version"], capsys)
    assert code == 0
    assert out.strip() == f"voice-membrane {importlib.metadata.version('voice-membrane')}"
