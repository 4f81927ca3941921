#!/bin/sh
# run_torch2.sh BUILD COMMAND [ARGS...]: runs COMMAND against the GPU build BUILD (scripts/gpu_build.sh)
# on the CPU: LOCKSTEP_CLI is BUILD's lockstep (so its worker, linked to pip's PyTorch 2.x),
# PYTHONPATH its Python recorder, LOCKSTEP_TORCH_PYTHON the interpreter it was built for (the one
# whose torch the tests' own PyTorch jobs and torchrun use). A COMMAND of --python is that
# interpreter. Exit 77 (skipped) when BUILD is not there, unless LOCKSTEP_REQUIRE_TORCH2=1.
set -eu
build=$1
shift
python=$(sed -n 's/^LOCKSTEP_PYTHON:FILEPATH=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [ ! -x "$build/app/lockstep" ] || [ ! -x "$build/app/lockstep-worker" ] || [ -z "$python" ] || [ ! -x "$python" ]; then
  echo "no GPU build at $build (bash scripts/gpu_build.sh makes one): nothing to test against PyTorch 2.x"
  if [ "${LOCKSTEP_REQUIRE_TORCH2:-0}" = 1 ]; then exit 1; fi
  exit 77
fi
"$python" -c 'import torch, sys; print("against torch", torch.__version__, "at", sys.executable)'
export LOCKSTEP_CLI="$build/app/lockstep"
export LOCKSTEP_TORCH_PYTHON="$python"
export PYTHONPATH="$build/python"
export LOCKSTEP_UI=""
if [ "$1" = "--python" ]; then
  shift
  exec "$python" "$@"
fi
exec "$@"
