#!/usr/bin/env bash
# Debian packages: python3-venv (for Debian's own Python), espeak-ng (the fast voice),
# libportaudio2 and portaudio19-dev (the speaker; PyAudio compiles against it), PulseAudio (a virtual sound card for the speaker tests),
# chromium (the browser the page of `voice-membrane serve` is tested in, through Playwright),
# redis-server and haproxy (the session store and the load balancer the cluster tests start for themselves).
# Installs only what is missing, and only when it can (root with apt-get).
set -euo pipefail
wanted=(espeak-ng libportaudio2 portaudio19-dev pulseaudio pulseaudio-utils libasound2-plugins chromium redis-server haproxy)
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
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
