#!/usr/bin/env bash
# The test command: installs what is missing, builds, builds the GPU path against pip's PyTorch
# 2.x (scripts/gpu_build.sh: compiles and links, needs the CUDA toolkit, no GPU), runs every test
# through ctest (the runtime's and the recorder's suites once more against that PyTorch, on the
# CPU), then runs each importer's fuzzer for a bounded time.
# LOCKSTEP_SKIP_GPU_BUILD=1 leaves the GPU build out (a machine without the CUDA toolkit): the
# PyTorch 2.x suites are then skipped and say so.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
if [ "${LOCKSTEP_SKIP_GPU_BUILD:-0}" = 1 ]; then
  echo "test: the GPU build is left out (LOCKSTEP_SKIP_GPU_BUILD=1)"
else
  bash scripts/gpu_build.sh
  export LOCKSTEP_REQUIRE_TORCH2=1
fi
(cd build && ctest --output-on-failure --timeout 300)
bash scripts/fuzz.sh "${LOCKSTEP_FUZZ_SECONDS:-20}"
