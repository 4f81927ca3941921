#!/usr/bin/env bash
# Installs every Debian 12 package Lockstep needs to build, test and run (by name, with apt;
# sudo when not root). Nothing else is downloaded, at set-up or at build time.
set -euo pipefail

packages=(
  build-essential cmake pkg-config         # toolchain
  libsqlite3-dev                           # the run database
  libtorch-dev libgloo-dev                 # the DDP runtime: LibTorch 1.13 (CPU) + c10d gloo
  python3-torch                            # the peer we benchmark against; torchrun; torch.profiler traces in tests
  python3-dev pybind11-dev                 # the Python recorder's native module lockstep._core: Python headers, pybind11 (+ its CMake config)
  python3-venv                             # scripts/gpu_build.sh: the virtual environment for pip's PyTorch 2.x (CUDA)
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev qt6-svg-dev libgl-dev  # the desktop app and Qt Test (Qt6Charts needs Qt6OpenGL)
  libgtest-dev                             # GoogleTest for the Qt-free suites (core, job, runtime)
  libsimdjson-dev                          # streaming Kineto JSON import
  rapidjson-dev                            # JSON output (report --json, Chrome trace export)
  libcli11-dev                             # the lockstep command line
  zlib1g-dev                               # gzip traces
  clang-16 libclang-rt-16-dev             # libFuzzer targets for the importers (clang 16: std::expected)
  xauth xvfb                               # headless screenshots when there is no display
  iproute2                                 # lockstep run --hosts: ip and tc (network namespaces, bridge, veth, htb, netem)
)

# --list: print the package list (the package guard test, tests/packages, reads it from here).
if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
