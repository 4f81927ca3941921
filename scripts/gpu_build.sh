#!/usr/bin/env bash
# Builds Lockstep's GPU path against the PyTorch GPU users have: pip's PyTorch 2.x for CUDA.
#
#   bash scripts/gpu_build.sh                 # venv from scripts/gpu-requirements.txt, build-cuda/
#   bash scripts/gpu_build.sh --python PY     # use PY's own PyTorch (e.g. a GPU node's venv); no download
#
# Without --python it creates a virtual environment under the build folder (build-cuda/venv, from
# Debian's /usr/bin/python3) and installs exactly scripts/gpu-requirements.txt into it (pip's
# torch 2.11.0+cu130 and what it links against: ~3 GB downloaded once, 4.7 GB installed; pip's
# cache keeps the wheels), reusing the venv while the requirements file is unchanged. Then it
# configures `cmake --preset cuda` (no Qt, no tests) with that PyTorch and the CUDA toolkit
# (CUDAToolkit_ROOT, default /usr/local/cuda), and compiles and links every GPU target: the
# runtime with NCCL and CUPTI, lockstep-worker, lockstep-cupti-check, the `lockstep` CLI, and the
# Python recorder's module for that interpreter (pybind11 3.x). Nothing here needs a GPU.
# gloo's headers are not in pip's wheel: they come from Debian's libgloo-dev (/usr/include), or
# from GLOO_INCLUDE (a folder with gloo/ in it, e.g. the package unpacked with dpkg -x).
# LOCKSTEP_GPU_CMAKE_ARGS adds configure arguments (scripts/gpu_device.sh points CMake at the
# Debian packages it carries to a machine that lacks them).
# The last line is `gpu_build: ok torch <version> cuda <version>` or `gpu_build: FAILED: <why>`.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${LOCKSTEP_GPU_BUILD_DIR:-$PWD/build-cuda}
CUDA_ROOT=${CUDAToolkit_ROOT:-/usr/local/cuda}
REQUIREMENTS=$PWD/scripts/gpu-requirements.txt
JOBS=${JOBS:-$(nproc)}
PYTHON=""

fail() {
  echo "gpu_build: FAILED: $*"
  exit 1
}

while [ $# -gt 0 ]; do
  case "$1" in
    --python) PYTHON=${2:?--python needs an interpreter}; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_build: unknown argument '$1' (see --help)"; exit 2 ;;
  esac
done

# The CUDA toolkit: nvcc, CUPTI and NCCL's headers are what the GPU targets compile against.
[ -x "$CUDA_ROOT/bin/nvcc" ] || fail "no CUDA toolkit at $CUDA_ROOT (nvcc missing); set CUDAToolkit_ROOT"
[ -f "$CUDA_ROOT/include/cupti.h" ] || [ -f "$CUDA_ROOT/extras/CUPTI/include/cupti.h" ] \
  || fail "the CUDA toolkit at $CUDA_ROOT has no CUPTI (cupti.h)"

# The Python environment.
mkdir -p "$BUILD"
if [ -z "$PYTHON" ]; then
  VENV=$BUILD/venv
  STAMP=$VENV/.lockstep-requirements
  if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && cmp -s "$STAMP" "$REQUIREMENTS"; then
    echo "gpu_build: reusing $VENV"
  else
    [ -x /usr/bin/python3 ] || fail "no /usr/bin/python3 to make the virtual environment from"
    echo "gpu_build: installing scripts/gpu-requirements.txt into $VENV (about 3 GB to download the first time)"
    rm -rf "$VENV"
    /usr/bin/python3 -m venv "$VENV" || fail "python3 -m venv $VENV (Debian: python3-venv)"
    "$VENV/bin/python" -m pip install --quiet --no-deps --progress-bar off -r "$REQUIREMENTS" \
      || fail "pip install -r scripts/gpu-requirements.txt into $VENV"
    cp "$REQUIREMENTS" "$STAMP"
  fi
  PYTHON=$VENV/bin/python
fi
PYTHON=$(command -v "$PYTHON") || fail "no Python interpreter '$PYTHON'"

read -r TORCH_VERSION TORCH_CUDA TORCH_PREFIX < <("$PYTHON" - <<'EOF' 2>/dev/null || true
import torch
print(torch.__version__, torch.version.cuda or "none", torch.utils.cmake_prefix_path)
EOF
)
[ -n "${TORCH_VERSION:-}" ] || fail "$PYTHON cannot import torch"
[ "$TORCH_CUDA" != "none" ] || fail "$PYTHON's torch $TORCH_VERSION is not a CUDA build"
case "$TORCH_VERSION" in 1.*) fail "$PYTHON's torch is $TORCH_VERSION; the GPU build is for PyTorch 2.x" ;; esac
PYBIND11_DIR=$("$PYTHON" -m pybind11 --cmakedir 2>/dev/null) || fail "pybind11 is not importable by $PYTHON (pip install pybind11)"

GLOO_FLAGS=()
if [ -n "${GLOO_INCLUDE:-}" ]; then
  [ -f "$GLOO_INCLUDE/gloo/config.h" ] || fail "GLOO_INCLUDE=$GLOO_INCLUDE has no gloo/config.h"
  GLOO_FLAGS=(-DLOCKSTEP_GLOO_INCLUDE="$GLOO_INCLUDE")
elif [ ! -f /usr/include/gloo/config.h ]; then
  fail "gloo's headers are missing (pip's torch has none): install libgloo-dev or set GLOO_INCLUDE"
fi

echo "gpu_build: torch $TORCH_VERSION (CUDA $TORCH_CUDA) from $PYTHON; CUDA toolkit $CUDA_ROOT; $BUILD"
# No GPU here to ask for its architecture: name the one we have (H100, sm_90); harmless where
# nothing is compiled for the device.
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
LOG=$BUILD/gpu_build.log
if ! cmake --preset cuda -B "$BUILD" \
      -DLOCKSTEP_BUILD_TESTS=OFF \
      -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
      -DCUDAToolkit_ROOT="$CUDA_ROOT" \
      -DCMAKE_CUDA_COMPILER="$CUDA_ROOT/bin/nvcc" \
      -DLOCKSTEP_GLOO_IN_TORCH=ON "${GLOO_FLAGS[@]}" \
      -DLOCKSTEP_PYTHON="$PYTHON" -Dpybind11_DIR="$PYBIND11_DIR" ${LOCKSTEP_GPU_CMAKE_ARGS:-} > "$LOG" 2>&1; then
  grep -E -A4 'CMake Error' "$LOG" | head -40
  fail "cmake --preset cuda (full log: $LOG)"
fi
if ! cmake --build "$BUILD" -j"$JOBS" --target lockstep lockstep-worker lockstep-cupti-check lockstep_python >> "$LOG" 2>&1; then
  grep -E -B2 -A6 'error|Error' "$LOG" | head -60
  fail "cmake --build $BUILD (full log: $LOG)"
fi
for f in app/lockstep app/lockstep-worker instrumentation/cuda/lockstep-cupti-check; do
  [ -x "$BUILD/$f" ] || fail "$BUILD/$f was not built"
done
ls "$BUILD"/python/lockstep/_core*.so > /dev/null 2>&1 || fail "the Python recorder's module was not built"
# What the GPU path is made of, read off the binary rather than assumed: the worker links
# PyTorch's CUDA library, NCCL (through it) and CUPTI.
LINKED=$(ldd "$BUILD/app/lockstep-worker" 2>/dev/null || true)
for lib in libtorch_cuda libcupti; do
  grep -q "$lib" <<<"$LINKED" || fail "lockstep-worker does not link $lib"
done
echo "gpu_build: ok torch $TORCH_VERSION cuda $TORCH_CUDA"
