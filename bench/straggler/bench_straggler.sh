#!/usr/bin/env bash
# Straggler detection on real runs of this machine (docs/design.md "straggler", core/src/stragglers.cpp):
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
# A second witness, from the kernel (rank_cpu.py): each rank's run-queue wait (time runnable but
# not running: waiting for a CPU) and CPU time per step over its steady steps. The ranks do the
# same work, so a rank that needed more of the two than the others waited for a CPU (the hogs,
# four ranks on two cores) or ran on a slower one (the vCPU's host core busy with another
# guest): it IS late every step, though nothing was injected, and a verdict naming it is right.
# So a clean run's named rank counts as a false positive only when what it took beyond the others
# (its run-queue wait + CPU time minus the mean of the others') is less than half of the
# systematic delay it was named for; otherwise it is counted as machine-made
# (straggler_machine_made), printed with both numbers. Symmetrically, an injected run whose
# injected rank, beyond its injected work, took less than -X/2 against the others (the machine
# held them back: its effective delay is below half of X) is counted apart as masked, not as a
# miss; so is one the machine slowed until X fell under 5% of its own step (below the size a run
# straggler must have, so "none" is the specified verdict; straggler_below_size_runs). The
# witness checks itself on the injected runs: X ms of injected work shows as about X
# more CPU ms per step on that rank. Lockstep's own account of the cause (the report's
# straggler.cause, from the training thread's scheduler statistics that the runtime records per
# step) is checked against the witness: straggler_cause_agrees_with_witness counts the named
# clean runs where it reads cpu-wait or cpu-time for a machine-made rank, and neither for a
# false one.
#
# Prints one line per run and then `name: value unit` lines:
#   straggler_clean_runs, straggler_false_positives (goal 0), straggler_machine_made,
#   straggler_named_on_clean_runs (both), straggler_injected_runs, straggler_detected_pct (goal
#   100; the injected rank named), the same per delay, straggler_masked_runs,
#   straggler_detected_raw_pct (masked runs counted as misses), and straggler_uneven_runs (runs
#   left out because the cores were uneven; their verdicts are printed).
#
# Usage: bench/straggler/bench_straggler.sh [path/to/lockstep [path/to/core_speed]]
#   env STEPS (default 60), CLEAN (clean runs per configuration, default 4), INJECTED (runs per
#   delay and configuration, default 3), CONFIGS (default "mlp:2 mlp:4 transformer:2 transformer:4"),
#   EVEN (default 1.05), TRIES (default 4), KEEP=1 keeps the run files (printed folder),
#   RUN_ARGS (more `lockstep run` flags for every run, e.g. "--bucket-mb 0.25").
set -euo pipefail

LOCKSTEP=${1:-build/app/lockstep}
CORE_SPEED=${2:-$(dirname "$LOCKSTEP")/../bench/straggler/core_speed}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
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

stop_witness() { kill -TERM "$witness" 2>/dev/null || true; wait "$witness" 2>/dev/null || true; }

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
# Is the test true? (a Python expression over numbers already substituted)
holds() { "$PYTHON" -c "import sys; sys.exit(0 if ($1) else 1)"; }
is_even() { holds "$1 <= $EVEN"; }

# One run: record it, print its verdict as "named|candidate|steps_late/steady|wait%|delay%|above_ms|
# floor_ms|chance|step_ms|run-queue wait ms/step per rank|CPU ms/step per rank|cores before/after|even".
record() { # out.db nproc model hog(yes|no) [extra args...]
    local db=$1 nproc=$2 model=$3 hog=$4 attempt before after i verdict witness
    shift 4
    for ((attempt = 1; attempt <= TRIES; attempt++)); do
        for ((i = 0; i < 10; i++)); do # wait (up to ~25 s) for the cores to even out
            before=$(speed_ratio)
            is_even "$before" && break
            sleep 2
        done
        [[ "$hog" == yes ]] && start_hogs
        "$PYTHON" "$HERE/rank_cpu.py" >"$db.cpu" &
        witness=$!
        # shellcheck disable=SC2046
        "$LOCKSTEP" run --nproc "$nproc" $(model_args "$model") ${RUN_ARGS:-} --steps "$STEPS" --progress none \
            --force --out "$db" "$@" >"$db.log" 2>&1 || { stop_witness; stop_hogs; echo "run failed: $(tail -3 "$db.log")" >&2; return 1; }
        stop_witness
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
# The witness: each rank'"'"'s run-queue wait and CPU time per steady step (ms), from the kernel
# (rank_cpu.py): the increments of its cumulative series over the rank'"'"'s steady steps
# [first start, last end], interpolated between samples, over the number of steady steps.
def at(points, t, k):
    for (t0, *a), (t1, *b) in zip(points, points[1:]):
        if t0 <= t <= t1:
            return a[k] + (b[k] - a[k]) * (t - t0) / (t1 - t0) if t1 > t0 else a[k]
    return None
rq, run = {}, {}
try:
    cpu = json.load(open(sys.argv[1]))
    for r, points in cpu.items():
        rows = [x for x in d["step_breakdown"] if x["rank"] == int(r) and x["steady"]]
        if not rows:
            continue
        t0, t1 = min(x["start_ns"] for x in rows), max(x["end_ns"] for x in rows)
        ends = [(at(points, t0, k), at(points, t1, k)) for k in (0, 1)]
        if all(a is not None and b is not None for a, b in ends):
            rq[int(r)] = (ends[0][1] - ends[0][0]) / 1e6 / len(rows)
            run[int(r)] = (ends[1][1] - ends[1][0]) / 1e6 / len(rows)
except (OSError, ValueError):
    pass
if len(rq) != d["world_size"]:
    rq, run = {}, {}
print("|".join([named, str(e["candidate"]), "%d/%d" % (e["steps_late"], e["steady_steps"]),
                f(e["wait_fraction"], 100, "%.1f"), f(e["delay_fraction"], 100, "%.1f"),
                f(e["lateness_above_others_ms"]), f(e["noise_floor_ms"]),
                f(e["chance"], 1, "%.2g"), f(d["step_time_ms"]),
                ",".join("%.2f" % rq[r] for r in sorted(rq)) or "-",
                ",".join("%.2f" % run[r] for r in sorted(run)) or "-", e.get("cause", "unknown")]))' "$db.cpu")
    if is_even "$before" && is_even "$after"; then
        echo "$verdict|$before/$after|even"
    else
        echo "$verdict|$before/$after|uneven"
    fi
}

clean=0
false_positives=0
machine_made=0
cause_agrees=0
masked=0
below_size=0
uneven=0
declare -A injected=([10]=0 [25]=0)
declare -A detected=([10]=0 [25]=0)
declare -A detected_raw=([10]=0 [25]=0)
FIELDS="candidate|late|wait%|delay%|above ms|floor ms|chance|step ms|run-queue wait ms/step per rank|CPU ms/step per rank|Lockstep's cause|cores before/after"

# The kernel's witness for one rank of a verdict: how much longer than the others it took, per
# step, to get the same work done: its run-queue wait plus CPU time per step, minus the mean of
# the other ranks' (ms; "-" when the witness has no numbers), less INJECTED_MS (the CPU work
# injected into this rank, if any).
excess_ms() { # verdict rank [injected_ms]
    "$PYTHON" -c '
import sys
def ms(field):
    return [float(v) for v in field.split(",")] if field != "-" else []
rq, run = ms(sys.argv[1]), ms(sys.argv[2])
r, injected = int(sys.argv[3]), float(sys.argv[4])
took = [a + b for a, b in zip(rq, run)]
others = [v for i, v in enumerate(took) if i != r]
print("%.2f" % (took[r] - sum(others) / len(others) - injected) if r < len(took) and others else "-")' \
        "$(cut -d'|' -f10 <<<"$1")" "$(cut -d'|' -f11 <<<"$1")" "$2" "${3:-0}"
}

# A clean run's verdict: counts toward the goals when the cores were even. A named rank whose
# extra run-queue wait and CPU time (the kernel's witness) are at least half its systematic delay
# was made a straggler by the machine: the verdict is right, and it is counted apart, not as a
# false one.
count_clean() { # label verdict
    local named=${2%%|*} note="" kind=none excess delay_ms
    if [[ "$named" != none ]]; then
        excess=$(excess_ms "$2" "$named")
        delay_ms=$("$PYTHON" -c "print('%.2f' % ($(cut -d'|' -f5 <<<"$2") * $(cut -d'|' -f9 <<<"$2") / 100.0))")
        if [[ "$excess" != - ]] && holds "$excess >= 0.5 * $delay_ms"; then
            kind=machine
            note=" [machine-made: rank $named took ${excess} ms/step longer than the others for the same work; its delay ${delay_ms} ms]"
        else
            kind=false
            note=" [FALSE: rank $named's extra run-queue wait and CPU time, ${excess} ms/step, do not explain its delay ${delay_ms} ms]"
        fi
    fi
    # Lockstep's own cause (the report's straggler.cause, from the training threads' scheduler
    # statistics in the run file) against the witness: a machine-made rank should read cpu-wait
    # or cpu-time, a false one neither.
    local cause
    cause=$(cut -d'|' -f12 <<<"$2")
    if [[ "$kind" != none ]]; then
        note="$note [Lockstep's cause: $cause]"
    fi
    if [[ "${2##*|}" == even ]]; then
        clean=$((clean + 1))
        [[ "$kind" == machine ]] && machine_made=$((machine_made + 1))
        [[ "$kind" == false ]] && false_positives=$((false_positives + 1))
        if [[ "$kind" == machine && ( "$cause" == cpu-wait || "$cause" == cpu-time ) ]] \
            || [[ "$kind" == false && "$cause" != cpu-wait && "$cause" != cpu-time ]]; then
            cause_agrees=$((cause_agrees + 1))
        fi
    else
        uneven=$((uneven + 1))
    fi
    local rest=${2#*|}
    echo "run: $1 -> named=$named  ($FIELDS: ${rest%|*}) ${2##*|}$note"
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
            # Symmetric to the clean runs: a miss where the machine held the OTHER ranks back
            # by more than half the injected delay (beyond its injected work, the injected rank
            # took less than -X/2 longer than the others) left it not late; counted apart.
            note="" is_masked=no
            if [[ "$named" != "$rank" ]]; then
                excess=$(excess_ms "$verdict" "$rank" "$delay")
                run_step_ms=$(cut -d'|' -f9 <<<"$verdict")
                if [[ "$excess" != - ]] && holds "$delay + $excess < 0.5 * $delay"; then
                    is_masked=yes
                    note=" [masked: beyond its injected work rank $rank took ${excess} ms/step against the others]"
                elif [[ "$run_step_ms" != - ]] && holds "$delay < 0.05 * $run_step_ms"; then
                    # The machine slowed this run so much that X, 10% of the calibration run's
                    # step, is under 5% of this run's: below the size a run straggler must have
                    # (docs/design.md), so "none" is the specified verdict. Counted apart, never hidden.
                    is_masked=yes
                    below_size=$((below_size + 1))
                    note=" [below size: ${delay} ms is under 5% of this run's ${run_step_ms} ms step]"
                else
                    note=" [MISSED: beyond its injected work rank $rank took ${excess} ms/step against the others]"
                fi
            fi
            if [[ "${verdict##*|}" == even ]]; then
                [[ "$named" == "$rank" ]] && detected_raw[$pct]=$((detected_raw[$pct] + 1))
                if [[ "$is_masked" == yes ]]; then
                    masked=$((masked + 1))
                else
                    injected[$pct]=$((injected[$pct] + 1))
                    [[ "$named" == "$rank" ]] && detected[$pct]=$((detected[$pct] + 1))
                fi
            else
                uneven=$((uneven + 1))
            fi
            rest=${verdict#*|}
            echo "run: $model N=$nproc straggler $rank:${delay}ms ($pct%) -> named=$named  ($FIELDS: ${rest%|*}) ${verdict##*|}$note"
        done
    done
done

total_injected=$((injected[10] + injected[25]))
total_detected=$((detected[10] + detected[25]))
pct() { "$PYTHON" -c "print('%.1f' % (100.0 * $1 / $2 if $2 else 0.0))"; }
echo "straggler_clean_runs: $clean runs"
echo "straggler_false_positives: $false_positives runs"
echo "straggler_machine_made: $machine_made runs"
echo "straggler_cause_agrees_with_witness: $cause_agrees of $((false_positives + machine_made)) named clean runs"
echo "straggler_named_on_clean_runs: $((false_positives + machine_made)) runs"
echo "straggler_injected_runs: $total_injected runs"
echo "straggler_detected_pct: $(pct "$total_detected" "$total_injected") %"
echo "straggler_detected_pct_10: $(pct "${detected[10]}" "${injected[10]}") %"
echo "straggler_detected_pct_25: $(pct "${detected[25]}" "${injected[25]}") %"
echo "straggler_masked_runs: $masked runs"
echo "straggler_below_size_runs: $below_size runs (of the masked: X under 5% of the run's own step)"
echo "straggler_detected_raw_pct: $(pct "$((detected_raw[10] + detected_raw[25]))" "$((injected[10] + injected[25] + masked))") %"
echo "straggler_uneven_runs: $uneven runs"
