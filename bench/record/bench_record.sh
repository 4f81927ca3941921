#!/bin/bash
# Benchmarks of the Python recorder (issue 12), printing `name: value unit` lines.
# The job: bench/runtime/ddp_peer.py, PyTorch's own DistributedDataParallel training the mlp that
# Lockstep's runtime trains (Linear/ReLU x LAYERS + Linear(WIDTH, 10), batch BATCH per rank,
# SGD momentum, buckets BUCKET_MB with the first FIRST_BUCKET_MB), 2 ranks, gloo over
# 127.0.0.1, one thread per rank; it prints its own step time (perf_counter around batch +
# forward + backward + optimizer step), so every variant is timed the same way, from inside.
#  (a) record_overhead_pct: the unchanged script plain and under `python -m lockstep.record`
#      (what `lockstep record` runs in each rank), alternated REPEATS times (plain, recorded,
#      plain, ...) so both see the same machine load. Per run: the median steady step time of
#      rank 0 (steps >= WARMUP; a median, because a few steps that lose the CPU to other
#      processes would dominate a mean). Headline: the median of the per-repeat ratios
#      recorded/plain of back-to-back runs (pairs see the same load); also every run's value.
#      Goal <= 2 %. Also the CPU time of the rank-0 process per step (all threads: the hooks and
#      the writer thread included; cpu_ms of ddp_peer.py), paired the same way
#      (record_cpu_overhead_pct): the cost itself, less swayed than wall time by other
#      processes on a shared machine.
#      The same on one rank (record_overhead_1rank_pct: every hook still runs, without gloo's
#      scheduling on shared cores, which on a busy machine swings step times by tens of percent),
#      and the recorder's fixed cost per step on a tiny mlp (width 64, batch 8: a step of about
#      a millisecond; 10 parameters, 13 top-level modules, one bucket), measured in one process
#      (ddp_peer.py --attach-at: 1,500 steps on untouched PyTorch, then lockstep.attach() and
#      1,500 recorded steps), so both halves see nearly the same machine state: per run, the
#      recorded half's median step minus the plain half's (the first 50 steps of each left out);
#      record_cost_us_per_step is the median over the runs. (Separate runs were too noisy here:
#      their medians moved by more than the cost from one run to the next.)
#  (a') record_overhead_inprocess_pct: the 2-rank job the same way, in one process per rank: STEPS
#      steps plain, then attached for STEPS more; per run the ratio of the halves' median steps (first
#      WARMUP steps of each half left out), median over REPEATS runs. Both are printed: the
#      halves of one process are seconds apart where (a)'s pairs are whole runs apart, but they are
#      not interleaved (a recorder cannot be detached), so a drift within a run still counts.
#  (b) torch_profiler_overhead_pct: the same, paired the same way, under torch.profiler (CPU
#      activities; the trace is written after the last step) — how users profile DDP today.
#  (c) the same mlp through Lockstep's C++ runtime (`lockstep run --model mlp`, same layers,
#      width, batch, caps, steps, world size 2, threads 1, gloo's ring all-reduce:
#      LOCKSTEP_PAIRWISE=0 like DDP) and through `lockstep record` on ddp_peer.py: both runs'
#      overlap ratio (lockstep report) and bucket layouts (bucket bytes), printed side by side;
#      REPEATS_C (default 3) alternated pairs, medians and every value.
# Pinning: rank r runs on core r (the one-rank runs on core 0) in every variant. This machine's
# two vCPUs do not run at the same speed (for tens of seconds one is 20-50% slower; README,
# "Performance"), so an unpinned rank's step time depends on which core the scheduler gave it,
# which differs between the two runs of a pair; pinned, both runs of a pair see the same cores.
# Usage: bench_record.sh [LOCKSTEP_CLI]  (env: LAYERS WIDTH BATCH STEPS WARMUP REPEATS BUCKET_MB
#        FIRST_BUCKET_MB LOCKSTEP_PYTHON PYTHONPATH; needs the lockstep Python package built)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cli=${1:-${LOCKSTEP_CLI:-$here/../../build/app/lockstep}}
py=${LOCKSTEP_PYTHON:-/usr/bin/python3}
pkg=${LOCKSTEP_PYTHONPATH:-$(cd "$(dirname "$cli")/.." && pwd)/python}
export PYTHONPATH=$pkg${PYTHONPATH:+:$PYTHONPATH}
layers=${LAYERS:-6} width=${WIDTH:-512} batch=${BATCH:-64} steps=${STEPS:-30} warmup=${WARMUP:-5}
repeats=${REPEATS:-5} bucket=${BUCKET_MB:-1} first=${FIRST_BUCKET_MB:-1}
peer=$here/../runtime/ddp_peer.py
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$py" -c "import lockstep" || { echo "bench_record: the lockstep package is not importable (PYTHONPATH=$PYTHONPATH)" >&2; exit 2; }

free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# one rank of `python ARGS...` (world of one: the same hooks, no peer); output to $1
one_rank() {
  local out=$1; shift
  env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$(free_port)" \
      OMP_NUM_THREADS=1 taskset -c 0 "$py" "$@" > "$out" 2>&1
}
# two ranks of `python ARGS...`; rank 0's output goes to $1
two_ranks() {
  local out=$1; shift
  local port; port=$(free_port)
  for r in 1 0; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        OMP_NUM_THREADS=1 taskset -c $((r % $(nproc))) "$py" "$@" > "$tmp/r$r.txt" 2>&1 &
  done
  wait
  cp "$tmp/r0.txt" "$out"
}
# median of a field (step_ms by default) over the steady steps of a ddp_peer.py output
median_ms() { awk -v w="$warmup" -v key="${2:-step_ms}" '/^peer step=/ { for (i=1;i<=NF;i++) { split($i,kv,"="); v[kv[1]]=kv[2] }
  if (v["step"] >= w) print v[key] }' "$1" | sort -g | awk '{ a[n++] = $1 }
  END { if (!n) print "nan"; else if (n % 2) printf "%.3f", a[(n-1)/2]; else printf "%.3f", (a[n/2-1]+a[n/2])/2 }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ a[n++] = $1 }
  END { if (n % 2) printf "%.4f", a[(n-1)/2]; else printf "%.4f", (a[n/2-1]+a[n/2])/2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", a/b }'; }
pct() { awk -v r="$1" 'BEGIN { printf "%.2f", (r-1)*100 }'; }

job=(--layers "$layers" --width "$width" --batch "$batch" --steps "$steps" --bucket-mb "$bucket"
     --first-bucket-mb "$first" --threads 1)
plain=() ; rec=() ; prof=() ; rec_ratios=() ; prof_ratios=() ; cpu_ratios=()
for i in $(seq "$repeats"); do
  two_ranks "$tmp/plain.txt" "$peer" "${job[@]}"
  plain+=("$(median_ms "$tmp/plain.txt")")
  rm -rf "$tmp/shards"
  two_ranks "$tmp/rec.txt" -m lockstep.record --out-dir "$tmp/shards" "$peer" "${job[@]}"
  rec+=("$(median_ms "$tmp/rec.txt")")
  rec_ratios+=("$(ratio "${rec[-1]}" "${plain[-1]}")")
  cpu_ratios+=("$(ratio "$(median_ms "$tmp/rec.txt" cpu_ms)" "$(median_ms "$tmp/plain.txt" cpu_ms)")")
  two_ranks "$tmp/plain2.txt" "$peer" "${job[@]}"
  p2=$(median_ms "$tmp/plain2.txt")
  two_ranks "$tmp/prof.txt" "$here/under_profiler.py" "$tmp/trace.json" "$peer" "${job[@]}"
  prof+=("$(median_ms "$tmp/prof.txt")")
  prof_ratios+=("$(ratio "${prof[-1]}" "$p2")")
  plain+=("$p2")
done
# Medians of the plain and the recorded half of an in-process run (ddp_peer.py --attach-at),
# leaving out the first SKIP steps of each half: "plain_ms recorded_ms".
halves() { # output skip
  "$py" - "$1" "$2" <<'PY'
import statistics, sys
rows = []
for line in open(sys.argv[1]):
    if line.startswith("peer step="):
        d = dict(kv.split("=", 1) for kv in line.split()[1:])
        rows.append((int(d["step"]), int(d.get("recorded", 0)), float(d["step_ms"])))
skip = int(sys.argv[2])
at = min((s for s, r, _ in rows if r), default=None)
if at is None:
    sys.exit("bench_record: the in-process run never attached")
plain = [v for s, r, v in rows if not r and s >= skip]
rec = [v for s, r, v in rows if r and s >= at + skip]
print("%.4f %.4f" % (statistics.median(plain), statistics.median(rec)))
PY
}
plain1=() ; rec1=() ; ratios1=() ; tiny_cost=() ; inproc=()
tiny=(--layers 6 --width 64 --batch 8 --steps 3000 --bucket-mb "$bucket" --first-bucket-mb "$first" --threads 1
      --attach-at 1500)
for i in $(seq "$repeats"); do
  one_rank "$tmp/p1.txt" "$peer" "${job[@]}"
  plain1+=("$(median_ms "$tmp/p1.txt")")
  rm -rf "$tmp/shards1"
  one_rank "$tmp/r1.txt" -m lockstep.record --out-dir "$tmp/shards1" "$peer" "${job[@]}"
  rec1+=("$(median_ms "$tmp/r1.txt")")
  ratios1+=("$(ratio "${rec1[-1]}" "${plain1[-1]}")")
  rm -rf "$tmp/shards2"
  one_rank "$tmp/tiny.txt" "$peer" "${tiny[@]}" --attach-out "$tmp/shards2"
  read -r a b <<< "$(halves "$tmp/tiny.txt" 50)"
  tiny_cost+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", (b - a) * 1000 }')")
  rm -rf "$tmp/shards3"
  two_ranks "$tmp/inproc.txt" "$peer" "${job[@]}" --steps "$((2 * steps))" --attach-at "$steps" --attach-out "$tmp/shards3"
  read -r a b <<< "$(halves "$tmp/inproc.txt" "$warmup")"
  inproc+=("$(ratio "$b" "$a")")
done
grep -q '^peer step=' "$tmp/rec.txt" || { echo "bench_record: the recorded run printed no steps:" >&2; cat "$tmp/rec.txt" >&2; exit 1; }
[ -s "$tmp/shards/rank-0.db" ] || { echo "bench_record: the recorded run wrote no shard" >&2; exit 1; }
echo "record_config: mlp layers=$layers width=$width batch=$batch world=2 bucket_mb=$bucket first_bucket_mb=$first threads=1 steps=$steps warmup=$warmup repeats=$repeats"
echo "plain_step_ms_all: ${plain[*]} ms"
echo "recorded_step_ms_all: ${rec[*]} ms"
echo "torch_profiler_step_ms_all: ${prof[*]} ms"
echo "record_ratio_all: ${rec_ratios[*]}"
echo "torch_profiler_ratio_all: ${prof_ratios[*]}"
echo "plain_step_ms: $(median "${plain[@]}") ms"
echo "recorded_step_ms: $(median "${rec[@]}") ms"
echo "torch_profiler_step_ms: $(median "${prof[@]}") ms"
echo "record_cpu_ratio_all: ${cpu_ratios[*]}"
echo "record_overhead_pct: $(pct "$(median "${rec_ratios[@]}")") %"
echo "record_cpu_overhead_pct: $(pct "$(median "${cpu_ratios[@]}")") %"
echo "torch_profiler_overhead_pct: $(pct "$(median "${prof_ratios[@]}")") %"
echo "plain_1rank_step_ms_all: ${plain1[*]} ms"
echo "recorded_1rank_step_ms_all: ${rec1[*]} ms"
echo "record_overhead_1rank_pct: $(pct "$(median "${ratios1[@]}")") %"
echo "record_cost_us_per_step_all: ${tiny_cost[*]} us"
echo "record_cost_us_per_step: $(median "${tiny_cost[@]}") us"
echo "record_overhead_inprocess_ratio_all: ${inproc[*]}"
echo "record_overhead_inprocess_pct: $(pct "$(median "${inproc[@]}")") %"

# (c) the C++ runtime and the recorded PyTorch DDP on the same mlp
report() { "$cli" report --json "$1" | "$py" -c '
import json, sys
r = json.load(sys.stdin)
print("%.4f %s" % (r["overlap_ratio"], ",".join(str(b["bytes"]) for b in r["buckets"])))'; }
common=(--layers "$layers" --width "$width" --batch "$batch" --steps "$steps" --bucket-mb "$bucket" --first-bucket-mb "$first")
rt_all=() ; py_all=()
for i in $(seq "${REPEATS_C:-3}"); do
  rm -f "$tmp/runtime.db" "$tmp/recorded.db"
  LOCKSTEP_PAIRWISE=0 OMP_NUM_THREADS=1 "$cli" run --nproc 2 --model mlp "${common[@]}" --threads 1 --warmup "$warmup" \
      --progress none --out "$tmp/runtime.db" > /dev/null
  OMP_NUM_THREADS=1 "$cli" record --nproc 2 --python "$py" --warmup "$warmup" --progress none -q --out "$tmp/recorded.db" \
      -- "$peer" "${common[@]}" --threads 1 > /dev/null
  read -r rt_overlap rt_layout <<< "$(report "$tmp/runtime.db")"
  read -r py_overlap py_layout <<< "$(report "$tmp/recorded.db")"
  rt_all+=("$rt_overlap") ; py_all+=("$py_overlap")
done
echo "overlap_ratio_runtime_all: ${rt_all[*]}"
echo "overlap_ratio_pytorch_recorded_all: ${py_all[*]}"
echo "overlap_ratio_runtime: $(median "${rt_all[@]}")"
echo "overlap_ratio_pytorch_recorded: $(median "${py_all[@]}")"
echo "bucket_bytes_runtime: $rt_layout"
echo "bucket_bytes_pytorch_recorded: $py_layout"
echo "bucket_layout_equal: $([ "$rt_layout" = "$py_layout" ] && echo yes || echo no)"
