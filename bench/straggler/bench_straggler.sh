#!/usr/bin/env bash
# Straggler detection on real runs of this machine (DESIGN.md "straggler", core/src/stragglers.cpp):
# does `lockstep report` name the rank that was made late, and nobody when nothing was injected,
# even on a busy 2-core machine?
#
# For each configuration (the mlp and a small transformer, 2 and 4 ranks) it first records one
# clean run to measure the step time T (its verdict counts like any clean run's), then records
# through the documented CLI only:
#   - clean runs (`lockstep run` with nothing injected), half of them with a CPU hog (a busy
#     loop) running beside the job for the whole run;
#   - runs with `--straggler k:X`, X = 10% and 25% of T, k cycling over the ranks other than 0.
# Every run is read back with `lockstep report --json` (schema in docs/report-json.md): the
# straggler named (if any) and the evidence (steps late, wait, noise floor, chance).
#
# Prints one line per run and then `name: value unit` lines:
#   straggler_clean_runs, straggler_false_positives (goal 0), straggler_injected_runs,
#   straggler_detected_pct (goal 100; the injected rank named), and the same per delay.
#
# Usage: bench/straggler/bench_straggler.sh [path/to/lockstep]
#   env STEPS (default 30), CLEAN (clean runs per configuration, default 4), INJECTED (runs per
#   delay and configuration, default 3), CONFIGS (default "mlp:2 mlp:4 transformer:2 transformer:4"),
#   KEEP=1 keeps the run files (printed folder).
set -euo pipefail

LOCKSTEP=${1:-build/app/lockstep}
STEPS=${STEPS:-30}
CLEAN=${CLEAN:-4}
INJECTED=${INJECTED:-3}
CONFIGS=${CONFIGS:-"mlp:2 mlp:4 transformer:2 transformer:4"}
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/lockstep-straggler-XXXXXX)
HOG_PID=""

cleanup() {
    if [[ -n "$HOG_PID" ]]; then kill "$HOG_PID" 2>/dev/null || true; fi
    if [[ "${KEEP:-0}" != 1 ]]; then rm -rf "$WORK"; else echo "# runs kept in $WORK"; fi
}
trap cleanup EXIT

# Small models: the step is dominated by reference-BLAS matrix products on 2 shared cores, so
# the defaults of the transformer (seconds per step) would make a run take minutes.
model_args() {
    case "$1" in
    mlp) echo "--model mlp --layers 4 --width 256 --batch 32" ;;
    transformer) echo "--model transformer --layers 2 --width 64 --heads 2 --seq 16 --batch 8" ;;
    esac
}

# One run: record it, print its verdict as "named|candidate|steps_late/steady|wait%|above_ms|floor_ms|chance|step_ms".
record() { # out.db nproc model [extra args...]
    local db=$1 nproc=$2 model=$3
    shift 3
    # shellcheck disable=SC2046
    "$LOCKSTEP" run --nproc "$nproc" $(model_args "$model") --steps "$STEPS" --progress none --force \
        --out "$db" "$@" >"$db.log" 2>&1 || { echo "run failed: $(tail -3 "$db.log")" >&2; return 1; }
    "$LOCKSTEP" report --json "$db" | "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)
e = d["straggler"]
named = ",".join(str(r) for r in d["stragglers"]) or "none"
def f(v, scale=1.0, fmt="%.2f"):
    return "-" if v is None else fmt % (v * scale)
print("|".join([named, str(e["candidate"]), "%d/%d" % (e["steps_late"], e["steady_steps"]),
                f(e["wait_fraction"], 100, "%.1f"), f(e["lateness_above_others_ms"]), f(e["noise_floor_ms"]),
                f(e["chance"], 1, "%.2g"), f(d["step_time_ms"])]))'
}

clean=0
false_positives=0
declare -A injected=([10]=0 [25]=0)
declare -A detected=([10]=0 [25]=0)

for config in $CONFIGS; do
    model=${config%%:*}
    nproc=${config##*:}
    # The calibration run is a clean run too: its verdict counts.
    verdict=$(record "$WORK/calib-$model-$nproc.db" "$nproc" "$model")
    step_ms=${verdict##*|}
    named=${verdict%%|*}
    clean=$((clean + 1))
    [[ "$named" != none ]] && false_positives=$((false_positives + 1))
    echo "# $model on $nproc ranks: step time $step_ms ms (calibration)"
    echo "run: $model N=$nproc clean (calibration) -> named=$named  (candidate|late|wait%|above ms|floor ms|chance|step ms: ${verdict#*|})"
    for ((i = 0; i < CLEAN; i++)); do
        hog=no
        if ((i % 2 == 1)); then
            "$PYTHON" -c 'while True: pass' &
            HOG_PID=$!
            hog=yes
        fi
        verdict=$(record "$WORK/clean-$model-$nproc-$i.db" "$nproc" "$model")
        if [[ -n "$HOG_PID" ]]; then kill "$HOG_PID" 2>/dev/null || true; wait "$HOG_PID" 2>/dev/null || true; HOG_PID=""; fi
        named=${verdict%%|*}
        clean=$((clean + 1))
        [[ "$named" != none ]] && false_positives=$((false_positives + 1))
        echo "run: $model N=$nproc clean hog=$hog -> named=$named  (candidate|late|wait%|above ms|floor ms|chance|step ms: ${verdict#*|})"
    done
    for pct in 10 25; do
        delay=$("$PYTHON" -c "print(round($step_ms * $pct / 100.0, 1))")
        for ((i = 0; i < INJECTED; i++)); do
            rank=$((1 + i % (nproc - 1)))
            verdict=$(record "$WORK/late-$model-$nproc-$pct-$i.db" "$nproc" "$model" --straggler "$rank:$delay")
            named=${verdict%%|*}
            injected[$pct]=$((injected[$pct] + 1))
            [[ "$named" == "$rank" ]] && detected[$pct]=$((detected[$pct] + 1))
            echo "run: $model N=$nproc straggler $rank:${delay}ms ($pct%) -> named=$named  (candidate|late|wait%|above ms|floor ms|chance|step ms: ${verdict#*|})"
        done
    done
done

total_injected=$((injected[10] + injected[25]))
total_detected=$((detected[10] + detected[25]))
pct() { "$PYTHON" -c "print('%.1f' % (100.0 * $1 / $2 if $2 else 0.0))"; }
echo "straggler_clean_runs: $clean runs"
echo "straggler_false_positives: $false_positives runs"
echo "straggler_injected_runs: $total_injected runs"
echo "straggler_detected_pct: $(pct "$total_detected" "$total_injected") %"
echo "straggler_detected_pct_10: $(pct "${detected[10]}" "${injected[10]}") %"
echo "straggler_detected_pct_25: $(pct "${detected[25]}" "${injected[25]}") %"
