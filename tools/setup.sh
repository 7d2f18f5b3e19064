#!/usr/bin/env bash
# Installs the Debian 12 packages trnsim needs to build and test, skipping those already present.
# Run as root (or with sudo available). Safe to run again.
set -euo pipefail
# python3-dev, pybind11-dev, python3-pybind11 and python3-numpy: the Python bindings (trnsim._core), the
# interpreter the CLI embeds for Python (NKI) kernels, and the Python tests; python3-pyflakes: the lint test of
# the trnsim package (python/tests/test_pyflakes.py).
packages=(cmake ninja-build g++ pkg-config libsystemc-dev libfmt-dev libspdlog-dev catch2 nlohmann-json3-dev
          libcli11-dev libprotobuf-dev protobuf-compiler libopenblas-dev python3-dev pybind11-dev python3-pybind11
          python3-numpy liblua5.4-dev libssl-dev python3-matplotlib python3-pyflakes)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
