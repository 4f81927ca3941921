#!/usr/bin/env bash
# Builds Lockstep's GPU path (NCCL, CUDA events, CUPTI collector) on a machine with an NVIDIA
# GPU, a CUDA toolkit and a CUDA build of PyTorch installed with pip, then records a 1-rank NCCL
# run (world size 1: one GPU) and prints its report. When pybind11 is importable by $PYTHON
# (pip install pybind11), it also builds the Python recorder for that interpreter and records a
# PyTorch DDP job over NCCL with `lockstep record` (CUDA events). Usage, from anywhere:
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

# The Python recorder: built for this interpreter (it links no LibTorch), pybind11 from pip.
PYTHON_EXE=$(command -v "$PYTHON")
PYBIND11_DIR=$("$PYTHON" -m pybind11 --cmakedir 2>/dev/null || true)
if [ -n "$PYBIND11_DIR" ]; then
  PY_FLAGS=(-DLOCKSTEP_BUILD_PYTHON=ON -DLOCKSTEP_PYTHON="$PYTHON_EXE" -Dpybind11_DIR="$PYBIND11_DIR")
else
  echo "pybind11 not importable by $PYTHON: the Python recorder is left out (pip install pybind11)"
  PY_FLAGS=(-DLOCKSTEP_BUILD_PYTHON=OFF)
fi

echo "== configure (preset cuda: headless + LOCKSTEP_WITH_CUDA)"
set -x
cmake --preset cuda -B "$BUILD" \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
  -DCUDAToolkit_ROOT="$CUDA_ROOT" \
  -DCMAKE_CUDA_COMPILER="$CUDA_ROOT/bin/nvcc" \
  -DLOCKSTEP_GLOO_IN_TORCH=ON ${GLOO_INCLUDE:+-DCMAKE_CXX_FLAGS=-isystem$GLOO_INCLUDE} "${PY_FLAGS[@]}"
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

if [ -n "$PYBIND11_DIR" ]; then
  echo "== lockstep record: a PyTorch DDP job over NCCL, one rank per GPU (CUDA events)"
  NGPU=$("$PYTHON" -c 'import torch; print(max(1, torch.cuda.device_count()))')
  RECORDED="$OUT_DIR/record-nccl-$NGPU.db"
  "$BUILD/app/lockstep" record --nproc "$NGPU" --python "$PYTHON_EXE" --out "$RECORDED" --force --progress plain \
    -- tests/python/ddp_job.py --cuda --width 1024 --layers 8 --batch 64 --bucket-mb 4 --steps "$STEPS"
  "$BUILD/app/lockstep" report "$RECORDED"
  echo "run file: $RECORDED"
fi
