#!/usr/bin/env bash
# Records real DDP runs with the lockstep CLI (2 ranks with a straggler and 1 MiB buckets, whose
# all-reduces run concurrently; 4 ranks with a straggler for the ranks view; a bucket-size sweep
# at 2 ranks; 1 and 4 ranks for scaling) and renders the app's views headless into
# docs/screenshots/*.png with `lockstep-ui --screenshot`; and the H100 trace pair of tests/data/gpu
# (timeline, summary, kernels). The README shows these images.
#
#   scripts/screenshots.sh                 # uses build/app/lockstep and build/app/lockstep-ui
#   BUILD=build-x scripts/screenshots.sh   # another build folder
#   LOCKSTEP=… LOCKSTEP_UI=… OUT=… WORK=… scripts/screenshots.sh
#   WORK=/tmp/x RECORD=0 scripts/screenshots.sh   # re-render from runs recorded before
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
LOCKSTEP=${LOCKSTEP:-$BUILD/app/lockstep}
LOCKSTEP_UI=${LOCKSTEP_UI:-$BUILD/app/lockstep-ui}
OUT=${OUT:-$ROOT/docs/screenshots}
WORK=${WORK:-$(mktemp -d /tmp/lockstep-screenshots.XXXXXX)}
SIZE=${SIZE:-1400x860}

die() { echo "screenshots.sh: $*" >&2; exit 1; }
[[ -x $LOCKSTEP ]] || die "no lockstep CLI at $LOCKSTEP (build it, or set LOCKSTEP=…)"
[[ -x $LOCKSTEP_UI ]] || die "no lockstep-ui at $LOCKSTEP_UI (build it, or set LOCKSTEP_UI=…)"
"$LOCKSTEP" --help 2>&1 | grep -Eq '^\s+run\b' || die "$LOCKSTEP has no 'run' command (configure with -DLOCKSTEP_BUILD_RUNTIME=ON)"

RUNS=$WORK/runs
mkdir -p "$RUNS/sweep" "$OUT"
# A small MLP: 6 x 1 MiB of weights, so 1, 4 and 25 MiB caps give 6, 2 and 1 buckets.
MODEL=(--model mlp --layers 6 --width 512 --batch 32 --progress none)

if [[ ${RECORD:-1} != 0 ]]; then
echo "== recording: 2 ranks, 1 MiB buckets, rank 1 a 15 ms straggler"
"$LOCKSTEP" run --nproc 2 --out "$RUNS/mlp-2rank-straggler.db" "${MODEL[@]}" --steps 20 --bucket-mb 1 \
  --straggler 1:15 --force >/dev/null
echo "== recording: the demo run (scripts/demo.sh), for the What-if page"
"$LOCKSTEP" run --nproc 2 --out "$RUNS/demo.db" --model mlp --layers 8 --width 512 --batch 32 --steps 12 \
  --bucket-mb 1 --progress none --force >/dev/null
echo "== recording: 4 ranks, rank 2 a 15 ms straggler"
"$LOCKSTEP" run --nproc 4 --out "$RUNS/mlp-4rank-straggler.db" "${MODEL[@]}" --steps 12 --bucket-mb 1 \
  --straggler 2:15 --force >/dev/null
echo "== recording: bucket-size sweep at 2 ranks (1, 4, 25 MiB)"
"$LOCKSTEP" sweep --nproc 2 --bucket-mb 1,4,25 --out-dir "$RUNS/sweep" "${MODEL[@]}" --steps 8 --force >/dev/null
echo "== recording: 1 and 4 ranks at 4 MiB (scaling)"
"$LOCKSTEP" sweep --nproc 1,4 --bucket-mb 4 --out-dir "$RUNS/sweep" "${MODEL[@]}" --steps 8 --force >/dev/null
fi

shot() {
  local name=$1
  shift
  echo "== rendering $OUT/$name.png"
  "$LOCKSTEP_UI" --screenshot "$OUT/$name.png" --size "$SIZE" "$@"
}
S=$RUNS/sweep
shot timeline --view timeline --step 5 "$RUNS/mlp-2rank-straggler.db"
shot summary --view summary "$RUNS/mlp-2rank-straggler.db"
shot ranks --view ranks "$RUNS/mlp-4rank-straggler.db"
shot charts --view charts "$S/mlp-n2-b4.db" "$S/mlp-n2-b1.db" "$S/mlp-n2-b25.db" "$S/mlp-n1-b4.db" "$S/mlp-n4-b4.db"
shot compare --view compare --step 4 "$S/mlp-n2-b1.db" "$S/mlp-n2-b25.db"
shot whatif --view whatif "$RUNS/demo.db"
shot browser --view browser --workspace "$RUNS"
# Two emulated hosts (network namespaces: needs root): the timeline's host rows and the heatmap's
# host bands. Left out, saying so, without root.
if [[ $(id -u) == 0 ]]; then
  if [[ ${RECORD:-1} != 0 ]]; then
    echo "== recording: 2 hosts x 2 ranks (lockstep run --hosts 2)"
    "$LOCKSTEP" run --hosts 2 --nproc 2 --out "$RUNS/hosts-2x2.db" "${MODEL[@]}" --steps 12 --bucket-mb 1 --force >/dev/null
  fi
  shot hosts-timeline --view timeline --step 5 "$RUNS/hosts-2x2.db"
  shot hosts-ranks --view ranks "$RUNS/hosts-2x2.db"
else
  echo "== not root: hosts-timeline and hosts-ranks left as they are (lockstep run --hosts needs root)"
fi
# The only real GPU data (tests/data/gpu): two ranks sharing an H100, gloo over CUDA tensors.
echo "== importing: the H100 gloo-over-CUDA torch.profiler pair (tests/data/gpu)"
"$LOCKSTEP" import "$ROOT"/tests/data/gpu/kineto-gloo2-rank-{0,1}.json.gz --out "$WORK/gpu-gloo2.db" -q --force
shot gpu-timeline --view timeline --step 6 "$WORK/gpu-gloo2.db"
shot gpu-summary --view summary "$WORK/gpu-gloo2.db"
shot gpu-kernels --view kernels "$WORK/gpu-gloo2.db"
echo "done: $(ls "$OUT"/*.png | tr '\n' ' ')"
echo "runs kept in $RUNS"
