#!/bin/bash
# Runtime benchmarks (print `name: value unit` lines):
#  (a) peer: the same mlp / batch / bucket caps / world size 2 / 1 thread per rank, trained by
#      PyTorch's DistributedDataParallel (Debian's /usr/bin/python3, torch 1.13, gloo) and by
#      `lockstep worker`, alternated REPEATS times; the median steady step time (steps after
#      WARMUP, rank 0) of each, best repeat kept on both sides: peer_step_ms, lockstep_step_ms,
#      ratio = lockstep / peer (target <= 1.0).
#  (b) recorder overhead: `lockstep worker` recorded vs --no-record, alternated: on 2 ranks
#      (recorder_overhead_2rank_pct) and on 1 rank (recorder_overhead_pct, target <= 2).
# Usage: bench_runtime.sh [LOCKSTEP_BINARY]   (env: LAYERS WIDTH BATCH STEPS WARMUP REPEATS)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cli=${1:-${LOCKSTEP_CLI:-$here/../../build/app/lockstep}}
py=/usr/bin/python3
layers=${LAYERS:-6} width=${WIDTH:-512} batch=${BATCH:-64} steps=${STEPS:-30} warmup=${WARMUP:-5}
repeats=${REPEATS:-3} bucket=${BUCKET_MB:-1} first=${FIRST_BUCKET_MB:-1}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# two ranks of a command; rank 0's stdout goes to $1
two_ranks() {
  local out=$1; shift
  local port; port=$(free_port)
  for r in 1 0; do
    env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        OMP_NUM_THREADS=1 "$@" > "$tmp/r$r.txt" 2>&1 &
  done
  wait
  cp "$tmp/r0.txt" "$out"
}

# median step_ms of steps >= warmup in a progress file: the median, not the mean, because on a
# shared machine a few steps that lose the CPU to other processes would dominate a mean
mean_ms() { awk -v w="$warmup" '/step=/ { for (i=1;i<=NF;i++) { split($i,kv,"="); v[kv[1]]=kv[2] }
  if (v["step"] >= w) print v["step_ms"] }' "$1" | sort -g | awk '{ a[n++] = $1 }
  END { if (!n) print "nan"; else if (n % 2) printf "%.3f", a[(n-1)/2]; else printf "%.3f", (a[n/2-1]+a[n/2])/2 }'; }
best() { printf '%s\n' "$@" | sort -g | head -1; }

model=(--layers "$layers" --width "$width" --batch "$batch" --steps "$steps" --bucket-mb "$bucket" --first-bucket-mb "$first")
peer=() ; lock=() ; rec=() ; norec=()
for i in $(seq "$repeats"); do
  two_ranks "$tmp/peer.txt" "$py" "$here/ddp_peer.py" "${model[@]}" --threads 1
  peer+=("$(mean_ms "$tmp/peer.txt")")
  two_ranks "$tmp/norec.txt" "$cli" worker --model mlp "${model[@]}" --threads 1 --no-record
  norec+=("$(mean_ms "$tmp/norec.txt")")
  two_ranks "$tmp/rec.txt" "$cli" worker --model mlp "${model[@]}" --threads 1 --out-dir "$tmp/shards$i"
  rec+=("$(mean_ms "$tmp/rec.txt")")
done
# (b) also on one rank: the same recording work (hooks, every span, a commit per step) without
# gloo's scheduling on the shared cores, which on a busy 2-core machine swings step times by
# tens of percent between identical runs and hides a cost of ~1%.
rec1=() ; norec1=()
for i in $(seq "$repeats"); do
  env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT "$cli" worker --model mlp "${model[@]}" --threads 1 --no-record > "$tmp/n1.txt" 2>&1
  norec1+=("$(mean_ms "$tmp/n1.txt")")
  env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT "$cli" worker --model mlp "${model[@]}" --threads 1 --out-dir "$tmp/one$i" > "$tmp/r1.txt" 2>&1
  rec1+=("$(mean_ms "$tmp/r1.txt")")
done
p=$(best "${peer[@]}"); n=$(best "${norec[@]}"); r=$(best "${rec[@]}")
n1=$(best "${norec1[@]}"); r1=$(best "${rec1[@]}")
echo "runtime_config: mlp layers=$layers width=$width batch=$batch world=2 bucket_mb=$bucket first_bucket_mb=$first threads=1 steps=$steps warmup=$warmup repeats=$repeats"
echo "peer_step_ms_all: ${peer[*]} ms"
echo "lockstep_step_ms_all: ${norec[*]} ms"
echo "lockstep_recorded_step_ms_all: ${rec[*]} ms"
echo "peer_step_ms: $p ms"
echo "lockstep_step_ms: $n ms"
echo "ratio: $(awk -v a="$n" -v b="$p" 'BEGIN { printf "%.3f", a/b }')"
echo "lockstep_recorded_step_ms: $r ms"
echo "recorder_overhead_2rank_pct: $(awk -v a="$r" -v b="$n" 'BEGIN { printf "%.2f", (a/b-1)*100 }') %"
echo "lockstep_1rank_step_ms_all: ${norec1[*]} ms"
echo "lockstep_1rank_recorded_step_ms_all: ${rec1[*]} ms"
echo "recorder_overhead_pct: $(awk -v a="$r1" -v b="$n1" 'BEGIN { printf "%.2f", (a/b-1)*100 }') %"
