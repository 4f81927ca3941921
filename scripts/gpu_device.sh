#!/usr/bin/env bash
# The whole GPU check in one call on a lent GPU machine (the device tool: one H100/H200, Ubuntu
# 24.04, Python 3.12 with pip PyTorch 2.x for CUDA, CMake 4, gcc 13; no Qt, no SQLite, simdjson,
# RapidJSON, CLI11 or gloo headers, no internet). Two halves:
#
#   bash scripts/gpu_device.sh --prepare      # HERE (Debian 12): fetch and unpack the Debian packages
#                                             # the GPU machine lacks into build-device/sysroot
#   bash scripts/gpu_device.sh                # THERE, with build-device carried: everything below
#
# There, in order, each stage timed and its status kept (a failing stage does not stop the rest):
#   build      scripts/gpu_build.sh --python <the machine's PyTorch> against the carried sysroot
#   cupti      lockstep-cupti-check
#   run-nccl   lockstep run --device cuda --backend nccl, 1 rank (NCCL kernels, CUPTI on stream lanes)
#   run-gloo   lockstep run --device cuda --backend gloo, 2 ranks sharing the GPU
#   record-nccl    lockstep record of a PyTorch DDP job, 1 rank, NCCL (tests/python/ddp_job.py --cuda)
#   record-gloo    lockstep record of a PyTorch DDP job, 2 ranks, gloo over CUDA (bench/gpu/gpu_job.py)
#   overhead   CUPTI on vs off in one worker process, alternated by blocks of steps
#              (cupti_overhead_pct, goal <= 3); the runtime vs PyTorch's DDP on the same GPU, model,
#              caps and batch, alternated pairs (runtime_vs_ddp_ratio, goal <= 1.0); the Python
#              recorder attached halfway through one DDP process (record_overhead_inprocess_pct)
# Every run file, report, log and figure lands in $OUT (the device tool's output folder; default
# runs/gpu): figures.txt holds the `name: value unit` lines (scripts/gpu_figures.py computes the
# run files' figures from their raw rows), gpu_device.log everything printed.
# Rehearse here: `bash scripts/gpu_device.sh --prepare && bash scripts/gpu_device.sh` builds
# against the sysroot (checking that no carried header was taken from this machine's /usr/include)
# and runs each stage up to where a GPU is needed, where it must fail with a clear message.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SYSROOT=$ROOT/build-device/sysroot
# The Debian 12 packages whose headers, CMake files and libraries the GPU machine lacks.
CARRIED=(libsqlite3-dev libsqlite3-0 libsimdjson-dev libsimdjson14 rapidjson-dev libcli11-dev libgloo-dev zlib1g-dev zlib1g)

if [ "${1:-}" = "--prepare" ]; then
  set -e
  rm -rf "$ROOT/build-device"
  mkdir -p "$ROOT/build-device/debs" "$SYSROOT"
  (cd "$ROOT/build-device/debs" && apt-get download "${CARRIED[@]}")
  for deb in "$ROOT"/build-device/debs/*.deb; do dpkg -x "$deb" "$SYSROOT"; done
  rm -rf "$ROOT/build-device/debs"
  # Absolute symlinks (libz.so -> /lib/...) would point into the GPU machine's own system: make
  # them relative, inside the sysroot.
  find "$SYSROOT" -type l | while read -r link; do
    target=$(readlink "$link")
    case "$target" in /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$SYSROOT$target")" "$link" ;; esac
  done
  # Debian's RapidJSONConfig.cmake names /usr/include outright; point it at the sysroot's.
  sed -i 's|set(RAPIDJSON_INCLUDE_DIRS "/usr/include")|set(RAPIDJSON_INCLUDE_DIRS "${RAPIDJSON_CMAKE_DIR}/../../../include")|' \
    "$SYSROOT/usr/share/cmake/RapidJSON/RapidJSONConfig.cmake"
  rm -rf "$SYSROOT/usr/share/doc" "$SYSROOT/usr/share/man"
  echo "gpu_device: prepared $(du -sh "$ROOT/build-device" | cut -f1) in build-device/ (carry it: run(carry=[\"build-device\"]))"
  exit 0
fi

OUT=${OUT:-$ROOT/runs/gpu}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_device.log") 2>&1
FIGURES=$OUT/figures.txt
: > "$FIGURES"
STATUS=()
figure() { echo "$*" | tee -a "$FIGURES"; }
stage() { # stage NAME COMMAND...: runs it, times it, keeps its status
  local name=$1; shift
  echo; echo "=== $name ($(date +%T))"
  local t0=$SECONDS
  "$@"
  local rc=$?
  STATUS+=("$name: $([ $rc = 0 ] && echo ok || echo "FAILED (exit $rc)") in $((SECONDS - t0)) s")
  return 0
}

[ -d "$SYSROOT/usr/include" ] || { echo "gpu_device: no build-device/sysroot: run 'bash scripts/gpu_device.sh --prepare' on the Debian machine and carry build-device"; exit 2; }

# The machine's PyTorch: LOCKSTEP_GPU_PYTHON, else the lent machine's venv, else python3.
PY=${LOCKSTEP_GPU_PYTHON:-}
for candidate in /opt/torch/.venv/bin/python python3; do
  [ -n "$PY" ] && break
  command -v "$candidate" > /dev/null 2>&1 && "$candidate" -c 'import torch' 2> /dev/null && PY=$(command -v "$candidate")
done
[ -n "$PY" ] || { echo "gpu_device: no Python with torch (set LOCKSTEP_GPU_PYTHON)"; exit 2; }

BUILD=$ROOT/build-gpu-device # not build-cuda: a rehearsal here must not reconfigure the CI build
export LOCKSTEP_GPU_BUILD_DIR=$BUILD
CLI=$BUILD/app/lockstep
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

environment() {
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi: none"
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count(), "nccl", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-")'
  echo "cmake $(cmake --version | head -1), $(c++ --version | head -1), $(nproc) cores"
}

build() {
  local lib=$SYSROOT/usr/lib/x86_64-linux-gnu
  export CMAKE_PREFIX_PATH=$SYSROOT/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export GLOO_INCLUDE=$SYSROOT/usr/include
  export LOCKSTEP_GPU_CMAKE_ARGS="-DSQLite3_INCLUDE_DIR=$SYSROOT/usr/include -DSQLite3_LIBRARY=$lib/libsqlite3.so \
-DZLIB_INCLUDE_DIR=$SYSROOT/usr/include -DZLIB_LIBRARY=$lib/libz.so -DCLI11_DIR=$SYSROOT/usr/share/cmake/CLI11 \
-DRapidJSON_DIR=$SYSROOT/usr/share/cmake/RapidJSON -Dsimdjson_DIR=$lib/cmake/simdjson"
  bash scripts/gpu_build.sh --python "$PY" || return 1
  # Every carried library's headers must have come from the sysroot: on this machine a header
  # taken from /usr/include instead would be missing on the GPU machine.
  local leaked
  leaked=$(find "$BUILD" -name '*.o.d' -print0 | xargs -0 grep -ohE '(^| )/usr/include/(sqlite3\.h|simdjson\.h|zlib\.h|rapidjson/[^ ]+|CLI/[^ ]+|gloo/[^ ]+)' | sort -u | head -5)
  if [ -n "$leaked" ]; then echo "gpu_device: headers read from this machine, not the sysroot: $leaked"; return 1; fi
}

run_figures() { # run_figures NAME DB
  "$CLI" report "$2" > "$OUT/$1.report.txt" 2>&1; cat "$OUT/$1.report.txt"
  "$CLI" report --json "$2" > "$OUT/$1.report.json" 2> /dev/null
  python3 scripts/gpu_figures.py "$1" "$2" 3 "$OUT/$1.report.json" | tee -a "$FIGURES"
}

run_nccl() {
  "$CLI" run --nproc 1 --backend nccl --device cuda --model mlp --layers 8 --width 1024 --batch 64 --steps 30 \
    --out "$OUT/run-nccl-1.db" --force --progress plain || return 1
  run_figures run_nccl_1 "$OUT/run-nccl-1.db"
}

run_gloo() {
  "$CLI" run --nproc 2 --backend gloo --device cuda --model transformer --layers 4 --width 512 --batch 16 --steps 20 \
    --out "$OUT/run-gloo-cuda-2.db" --force --progress plain || return 1
  run_figures run_gloo_cuda_2 "$OUT/run-gloo-cuda-2.db"
}

record_nccl() {
  "$CLI" record --nproc 1 --python "$PY" --out "$OUT/record-nccl-1.db" --force --progress plain \
    -- tests/python/ddp_job.py --cuda --width 1024 --layers 8 --batch 64 --bucket-mb 4 --steps 30 || return 1
  run_figures record_nccl_1 "$OUT/record-nccl-1.db"
}

record_gloo() {
  "$CLI" record --nproc 2 --python "$PY" --out "$OUT/record-gloo-cuda-2.db" --force --progress plain \
    -- bench/gpu/gpu_job.py 40 || return 1
  run_figures record_gloo_cuda_2 "$OUT/record-gloo-cuda-2.db"
}

# median of the numbers on stdin
median() { sort -g | awk '{a[n++]=$1} END {if (!n) print "nan"; else if (n%2) print a[(n-1)/2]; else print (a[n/2-1]+a[n/2])/2}'; }

overhead() {
  local steps=120 block=10 flags=(--model mlp --layers 8 --width 1024 --batch 64 --bucket-mb 25 --first-bucket-mb 1)
  local env1=(RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1)
  # (1) CUPTI on (blocks 0, 2, 4, ...) and off (1, 3, ...) in one recording worker; the first two
  # blocks are warm-up.
  env "${env1[@]}" LOCKSTEP_CUPTI_ALTERNATE=$block "$CLI" worker --backend nccl --device cuda "${flags[@]}" \
    --steps $steps --out-dir "$OUT/overhead" --force > "$OUT/overhead-cupti.txt" 2>&1 || { cat "$OUT/overhead-cupti.txt"; return 1; }
  local on off
  on=$(awk -v b=$block '/step=/ {for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]} if (v["step"]>=2*b && int(v["step"]/b)%2==0) print v["step_ms"]}' "$OUT/overhead-cupti.txt" | median)
  off=$(awk -v b=$block '/step=/ {for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]} if (v["step"]>=2*b && int(v["step"]/b)%2==1) print v["step_ms"]}' "$OUT/overhead-cupti.txt" | median)
  figure "cupti_step_ms_on: $on ms"
  figure "cupti_step_ms_off: $off ms"
  figure "cupti_overhead_pct: $(awk -v a="$on" -v b="$off" 'BEGIN{printf "%.2f", (a/b-1)*100}') %"
  # (2) runtime vs PyTorch DDP, same GPU: alternated pairs, median steady step of each run.
  local ratios=() r ours peer
  for r in 1 2 3; do
    env "${env1[@]}" MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) "$PY" bench/runtime/ddp_peer.py --cuda \
      --layers 8 --width 1024 --batch 64 --steps 60 --bucket-mb 25 --first-bucket-mb 1 --threads 4 > "$OUT/peer-$r.txt" 2>&1 || { cat "$OUT/peer-$r.txt"; return 1; }
    env "${env1[@]}" "$CLI" worker --backend nccl --device cuda "${flags[@]}" --threads 4 --steps 60 --no-record \
      > "$OUT/ours-$r.txt" 2>&1 || { cat "$OUT/ours-$r.txt"; return 1; }
    peer=$(awk '/step=/ {for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]} if (v["step"]>=10) print v["step_ms"]}' "$OUT/peer-$r.txt" | median)
    ours=$(awk '/step=/ {for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]} if (v["step"]>=10) print v["step_ms"]}' "$OUT/ours-$r.txt" | median)
    figure "runtime_vs_ddp_pair$r: ours $ours ms, ddp $peer ms"
    ratios+=("$(awk -v a="$ours" -v b="$peer" 'BEGIN{printf "%.4f", a/b}')")
  done
  figure "runtime_vs_ddp_ratio: $(printf '%s\n' "${ratios[@]}" | median)"
  # (3) the Python recorder: 100 plain steps, then attached for 100, in one DDP process.
  env "${env1[@]}" MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) PYTHONPATH="$BUILD/python" "$PY" bench/runtime/ddp_peer.py --cuda \
    --layers 8 --width 1024 --batch 64 --steps 200 --attach-at 100 --attach-out "$OUT/overhead-record" > "$OUT/overhead-record.txt" 2>&1 \
    || { cat "$OUT/overhead-record.txt"; return 1; }
  local plain rec
  plain=$(awk '/step=/ {for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]} if (v["step"]>=20 && v["recorded"]==0) print v["step_ms"]}' "$OUT/overhead-record.txt" | median)
  rec=$(awk '/step=/ {for(i=1;i<=NF;i++){split($i,kv,"=");v[kv[1]]=kv[2]} if (v["step"]>=120 && v["recorded"]==1) print v["step_ms"]}' "$OUT/overhead-record.txt" | median)
  figure "record_overhead_inprocess_pct: $(awk -v a="$rec" -v b="$plain" 'BEGIN{printf "%.2f", (a/b-1)*100}') % (plain $plain ms, recorded $rec ms)"
}

stage environment environment
stage build build
if [ -x "$CLI" ]; then
  stage cupti "$BUILD/instrumentation/cuda/lockstep-cupti-check"
  stage run-nccl run_nccl
  stage run-gloo run_gloo
  stage record-nccl record_nccl
  stage record-gloo record_gloo
  stage overhead overhead
fi
echo; echo "=== summary"
printf '%s\n' "${STATUS[@]}" | tee "$OUT/status.txt"
echo "figures: $FIGURES"; cat "$FIGURES"
