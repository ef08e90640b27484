#!/usr/bin/env bash
# Create the project's virtual environment and install voice_membrane with its dev tools.
set -euo pipefail
venv=${1:-.venv}
python=${PYTHON:-python3}

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "voice_membrane needs Python 3.11 or newer; $python is $("$python" --version 2>&1)" >&2
    exit 1
fi
if ! "$python" -m venv --help >/dev/null 2>&1 || ! "$python" -c 'import ensurepip' 2>/dev/null; then
    # Debian's system Python ships venv/ensurepip separately.
    echo "installing python3-venv (Debian) ..."
    apt-get update -qq && apt-get install -y -qq python3-venv
fi
echo "creating $venv and installing voice_membrane[dev] ..."
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -e '.[dev]'
