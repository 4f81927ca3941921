#!/usr/bin/env bash
# Straggler detection on real runs of this machine (DESIGN.md "straggler", core/src/stragglers.cpp):
# does `lockstep report` name the rank that was made late, and nobody when nothing was injected,
# even on a busy 2-core machine?
#
# For each configuration (the mlp and a small transformer, 2 and 4 ranks) it first records one
# clean run to measure the step time T (its verdict counts like any clean run's), then records
# through the documented CLI only:
#   - clean runs (`lockstep run` with nothing injected), half of them with CPU hogs (one busy
#     loop pinned to each core) running beside the job for the whole run;
#   - runs with `--straggler k:X`, X = 10% and 25% of T, k cycling over the ranks other than 0.
# Every run is read back with `lockstep report --json` (schema in docs/report-json.md): the
# straggler named (if any) and the evidence (steps late, wait, noise floor, chance).
#
# The machine itself is a witness, not an assumption. On this virtual machine one vCPU can run
# 20-30% slower than the other for tens of seconds (its host core is shared with another guest):
# a rank that sits there computes that much slower every step and IS the run's straggler though
# nothing was injected (pinning rank 0 to core 0 and then to core 1 moves the slow rank with the
# core). So core_speed measures every core at once right before and right after each run; a run
# counts toward the goals only when both show the cores within EVEN of each other (fastest /
# slowest, default 1.05). An uneven run is retried (TRIES attempts in all, waiting for the cores
# to even out before each); one still uneven is printed and counted apart
# (straggler_uneven_runs), never silently dropped. For the same reason the hogs are one per core:
# a single busy loop on 2 cores takes half of one rank's core for the whole run, a real
# straggler made by the machine, not noise.
#
# Prints one line per run and then `name: value unit` lines:
#   straggler_clean_runs, straggler_false_positives (goal 0), straggler_injected_runs,
#   straggler_detected_pct (goal 100; the injected rank named), the same per delay, and
#   straggler_uneven_runs (runs left out because the cores were uneven; their verdicts are printed).
#
# Usage: bench/straggler/bench_straggler.sh [path/to/lockstep [path/to/core_speed]]
#   env STEPS (default 60), CLEAN (clean runs per configuration, default 4), INJECTED (runs per
#   delay and configuration, default 3), CONFIGS (default "mlp:2 mlp:4 transformer:2 transformer:4"),
#   EVEN (default 1.05), TRIES (default 4), KEEP=1 keeps the run files (printed folder).
set -euo pipefail

LOCKSTEP=${1:-build/app/lockstep}
CORE_SPEED=${2:-$(dirname "$LOCKSTEP")/../bench/straggler/core_speed}
EVEN=${EVEN:-1.05}
TRIES=${TRIES:-4}
# 60 steps: with four ranks sharing two cores the step-to-step noise floor of 30 steps (5-8 ms on
# 31-48 ms steps) hid some 10% delays; the floor narrows as 1/sqrt(steps).
STEPS=${STEPS:-60}
CLEAN=${CLEAN:-4}
INJECTED=${INJECTED:-3}
CONFIGS=${CONFIGS:-"mlp:2 mlp:4 transformer:2 transformer:4"}
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/lockstep-straggler-XXXXXX)
HOG_PIDS=()
[[ -x "$CORE_SPEED" ]] || { echo "bench_straggler: $CORE_SPEED is not built (make core_speed)" >&2; exit 2; }

stop_hogs() {
    if ((${#HOG_PIDS[@]})); then
        kill "${HOG_PIDS[@]}" 2>/dev/null || true
        wait "${HOG_PIDS[@]}" 2>/dev/null || true
    fi
    HOG_PIDS=()
}
start_hogs() { # one busy loop pinned to each core
    local c
    for c in $(seq 0 $(($(nproc) - 1))); do
        taskset -c "$c" "$PYTHON" -c 'while True: pass' &
        HOG_PIDS+=($!)
    done
}

cleanup() {
    stop_hogs
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

# The cores' speed ratio (fastest / slowest) right now.
speed_ratio() { "$CORE_SPEED" 300 | sed -n 's/.* ratio //p'; }
is_even() { "$PYTHON" -c "import sys; sys.exit(0 if float('$1') <= float('$EVEN') else 1)"; }

# One run: record it, print its verdict as
# "named|candidate|steps_late/steady|wait%|delay%|above_ms|floor_ms|chance|step_ms|cores before/after|even".
record() { # out.db nproc model hog(yes|no) [extra args...]
    local db=$1 nproc=$2 model=$3 hog=$4 attempt before after i verdict
    shift 4
    for ((attempt = 1; attempt <= TRIES; attempt++)); do
        for ((i = 0; i < 10; i++)); do # wait (up to ~25 s) for the cores to even out
            before=$(speed_ratio)
            is_even "$before" && break
            sleep 2
        done
        [[ "$hog" == yes ]] && start_hogs
        # shellcheck disable=SC2046
        "$LOCKSTEP" run --nproc "$nproc" $(model_args "$model") --steps "$STEPS" --progress none --force \
            --out "$db" "$@" >"$db.log" 2>&1 || { stop_hogs; echo "run failed: $(tail -3 "$db.log")" >&2; return 1; }
        stop_hogs
        after=$(speed_ratio)
        if is_even "$before" && is_even "$after"; then
            break
        fi
    done
    verdict=$("$LOCKSTEP" report --json "$db" | "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)
e = d["straggler"]
named = ",".join(str(r) for r in d["stragglers"]) or "none"
def f(v, scale=1.0, fmt="%.2f"):
    return "-" if v is None else fmt % (v * scale)
print("|".join([named, str(e["candidate"]), "%d/%d" % (e["steps_late"], e["steady_steps"]),
                f(e["wait_fraction"], 100, "%.1f"), f(e["delay_fraction"], 100, "%.1f"),
                f(e["lateness_above_others_ms"]), f(e["noise_floor_ms"]),
                f(e["chance"], 1, "%.2g"), f(d["step_time_ms"])]))')
    if is_even "$before" && is_even "$after"; then
        echo "$verdict|$before/$after|even"
    else
        echo "$verdict|$before/$after|uneven"
    fi
}

clean=0
false_positives=0
uneven=0
declare -A injected=([10]=0 [25]=0)
declare -A detected=([10]=0 [25]=0)
FIELDS="candidate|late|wait%|delay%|above ms|floor ms|chance|step ms|cores before/after"

# A clean run's verdict: counts toward the goals when the cores were even.
count_clean() { # label verdict
    local named=${2%%|*}
    if [[ "${2##*|}" == even ]]; then
        clean=$((clean + 1))
        [[ "$named" != none ]] && false_positives=$((false_positives + 1))
    else
        uneven=$((uneven + 1))
    fi
    local rest=${2#*|}
    echo "run: $1 -> named=$named  ($FIELDS: ${rest%|*}) ${2##*|}"
}

for config in $CONFIGS; do
    model=${config%%:*}
    nproc=${config##*:}
    # The calibration run is a clean run too: its verdict counts.
    verdict=$(record "$WORK/calib-$model-$nproc.db" "$nproc" "$model" no)
    step_ms=$(cut -d'|' -f9 <<<"$verdict")
    echo "# $model on $nproc ranks: step time $step_ms ms (calibration)"
    count_clean "$model N=$nproc clean (calibration)" "$verdict"
    for ((i = 0; i < CLEAN; i++)); do
        hog=no
        ((i % 2 == 1)) && hog=yes
        verdict=$(record "$WORK/clean-$model-$nproc-$i.db" "$nproc" "$model" "$hog")
        count_clean "$model N=$nproc clean hogs=$hog" "$verdict"
    done
    for pct in 10 25; do
        delay=$("$PYTHON" -c "print(round($step_ms * $pct / 100.0, 1))")
        for ((i = 0; i < INJECTED; i++)); do
            rank=$((1 + i % (nproc - 1)))
            verdict=$(record "$WORK/late-$model-$nproc-$pct-$i.db" "$nproc" "$model" no --straggler "$rank:$delay")
            named=${verdict%%|*}
            if [[ "${verdict##*|}" == even ]]; then
                injected[$pct]=$((injected[$pct] + 1))
                [[ "$named" == "$rank" ]] && detected[$pct]=$((detected[$pct] + 1))
            else
                uneven=$((uneven + 1))
            fi
            rest=${verdict#*|}
            echo "run: $model N=$nproc straggler $rank:${delay}ms ($pct%) -> named=$named  ($FIELDS: ${rest%|*}) ${verdict##*|}"
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
echo "straggler_uneven_runs: $uneven runs"
