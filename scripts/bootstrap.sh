#!/usr/bin/env bash
# Set up everything voice_membrane needs on a fresh Debian machine: system packages
# (when run as root), a virtual environment with the package, its embedded engines
# and its dev tools (the install step is install-package.sh, which deploy/Dockerfile
# runs too). Safe to run again: finished steps are skipped.
set -euo pipefail
venv=${1:-.venv}
python=${PYTHON:-python3}

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "voice_membrane needs Python 3.11 or newer; $python is $("$python" --version 2>&1)" >&2
    exit 1
fi

bash "$(dirname "$0")/system-packages.sh" dev
PYTHON=$python bash "$(dirname "$0")/install-package.sh" "$venv" local,pyaudio,dev
echo "setup done"
