#!/usr/bin/env bash
# Debian packages, by what they are for (the argument; default dev, everything):
#   runtime  what `voice-membrane serve` needs: espeak-ng (the fast voice), libportaudio2
#            (the speaker; sounddevice loads it), python3-venv (for Debian's own Python);
#   build    runtime + what the install compiles: build-essential and cmake (llama-cpp-python),
#            portaudio19-dev (PyAudio compiles against it);
#   dev      build + PulseAudio (a virtual sound card for the speaker tests), chromium (the
#            browser the page of `voice-membrane serve` is tested in, through Playwright),
#            redis-server and haproxy (the session store and the load balancer the cluster
#            tests start for themselves).
# bootstrap.sh runs it with dev, deploy/Dockerfile with build and runtime (docs/deploy.md).
# Installs only what is missing, and only when it can (root with apt-get).
set -euo pipefail
profile=${1:-dev}
runtime=(espeak-ng libportaudio2)
build=("${runtime[@]}" build-essential cmake portaudio19-dev)
case "$profile" in
    runtime) wanted=("${runtime[@]}") ;;
    build) wanted=("${build[@]}") ;;
    dev) wanted=("${build[@]}" pulseaudio pulseaudio-utils libasound2-plugins chromium redis-server haproxy) ;;
    *) echo "system-packages.sh: unknown profile '$profile' (runtime, build or dev)" >&2; exit 2 ;;
esac
if ! python3 -c 'import ensurepip' 2>/dev/null; then
    wanted+=(python3-venv)
fi
missing=()
for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "note: missing system packages (${missing[*]}); install them as root with apt-get" >&2
    exit 0
fi
echo "installing Debian packages: ${missing[*]} ..."
# An image keeps only what it asked for; a dev machine takes the recommended extras too
# (chromium's fonts).
options=()
[ "$profile" = dev ] || options+=(--no-install-recommends)
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${options[@]}" "${missing[@]}" >/dev/null
