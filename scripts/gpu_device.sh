#!/usr/bin/env bash
# Builds Lockstep's GPU path (NCCL, CUDA events, CUPTI collector) on a machine with an NVIDIA
# GPU, a CUDA toolkit and a CUDA build of PyTorch installed with pip, then records a 1-rank NCCL
# run (world size 1: one GPU) and prints its report. Usage, from anywhere:
#   scripts/gpu_device.sh                      # build-cuda/, runs/gpu/nccl-1.db
#   PYTHON=python3.11 CUDAToolkit_ROOT=/opt/cuda STEPS=50 scripts/gpu_device.sh
#   GLOO_INCLUDE=/path/usr/include scripts/gpu_device.sh  # gloo headers (pip PyTorch ships none: dpkg -x libgloo-dev_*.deb DIR)
# Everything it does is printed; it stops at the first failing step.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
CUDA_ROOT=${CUDAToolkit_ROOT:-/usr/local/cuda}
BUILD=${BUILD_DIR:-$PWD/build-cuda}
OUT_DIR=${OUT_DIR:-$PWD/runs/gpu}
STEPS=${STEPS:-20}
JOBS=${JOBS:-$(nproc)}

echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || echo "nvidia-smi not available"

echo "== PyTorch"
TORCH_PREFIX=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')
"$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count(), "cxx11abi", torch.compiled_with_cxx11_abi())'
echo "CMAKE_PREFIX_PATH=$TORCH_PREFIX"

echo "== configure (preset cuda: headless + LOCKSTEP_WITH_CUDA)"
set -x
cmake --preset cuda -B "$BUILD" \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
  -DCUDAToolkit_ROOT="$CUDA_ROOT" \
  -DCMAKE_CUDA_COMPILER="$CUDA_ROOT/bin/nvcc" \
  -DLOCKSTEP_GLOO_IN_TORCH=ON ${GLOO_INCLUDE:+-DCMAKE_CXX_FLAGS=-isystem$GLOO_INCLUDE}
cmake --build "$BUILD" -j"$JOBS" --target lockstep lockstep-worker lockstep-cupti-check
set +x

echo "== CUPTI collector check"
"$BUILD/instrumentation/cuda/lockstep-cupti-check"

echo "== 1-rank NCCL run"
mkdir -p "$OUT_DIR"
RUN="$OUT_DIR/nccl-1.db"
"$BUILD/app/lockstep" run --nproc 1 --out "$RUN" --force --progress plain \
  --backend nccl --device cuda --model mlp --layers 8 --width 1024 --batch 64 --steps "$STEPS"

echo "== report"
"$BUILD/app/lockstep" report "$RUN"
echo "run file: $RUN"
