#!/usr/bin/env bash
# Idempotent set-up for PTO: Debian packages and a project-local .venv.
# Both quick-start commands call this; a second run installs nothing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

apt_packages=(
  build-essential catch2 nlohmann-json3-dev libcli11-dev libsqlite3-dev libfmt-dev
  libopenblas-dev libdnnl-dev libxgboost-dev pocl-opencl-icd ocl-icd-opencl-dev opencl-headers
  clinfo python3-venv libprotobuf-dev protobuf-compiler
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

py="${PTO_PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$py" -m venv .venv
fi
# Reinstall only when requirements.txt changed since the last successful install.
stamp=.venv/.pto-requirements.sha256
want="$(sha256sum requirements.txt | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing Python requirements into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.txt
  echo "$want" > "$stamp"
fi
echo "[setup] ok ($(.venv/bin/python -c 'import importlib.metadata as m; print("halide", m.version("halide"))'))"
