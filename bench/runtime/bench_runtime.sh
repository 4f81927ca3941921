#!/bin/bash
# Runtime benchmarks (print `name: value unit` lines):
#  (a) peer: the same mlp / batch / bucket caps / world size 2 / 1 thread per rank, trained by
#      PyTorch's DistributedDataParallel (Debian's /usr/bin/python3, torch 1.13, gloo) and by
#      `lockstep worker`, alternated REPEATS times (peer, lockstep, peer, ... so both see the same
#      machine load). Per run: the median steady step time (steps after WARMUP, rank 0).
#      Reported: every run's median; best of the repeats on each side (ratio_best); the median
#      of the repeats on each side (ratio_median); and the median of the per-repeat ratios of
#      back-to-back runs (ratio, the headline: least sensitive to load that drifts between runs).
#      Target ratio <= 1.0.
#      Same work on both sides (checked; the `layout:` lines print both sides' buckets):
#      - data: every step both generate a fresh batch and label it with a fixed teacher (peer:
#        torch.rand + x @ teacher; Lockstep: per-sample splitmix + teacher dot) — ~0.3 ms either way;
#      - model: Linear/ReLU x LAYERS + Linear(WIDTH,10), cross entropy, same shapes and kernels;
#      - buckets: cap BUCKET_MB, first bucket FIRST_BUCKET_MB, built in gradient-ready order
#        (DDP's rebuilt buckets after step 0 == Lockstep's): 6 buckets for the default mlp;
#      - gradients live in the buckets on both sides (DDP gradient_as_bucket_view=True), averaged
#        by dividing before the sum; PEER_GRAD_VIEW=0 runs DDP's default (copies) instead;
#      - optimizer: SGD lr 0.01 momentum 0.9 (torch::optim::SGD / torch.optim.SGD, per-tensor);
#        gradients zeroed in place each step (zero_grad(set_to_none=False) / bucket zero_);
#      - threads: OMP_NUM_THREADS=1, intra-op 1 (--threads 1), inter-op 1 (unused), gloo 2 threads.
#      - communication: the same bytes over the same gloo TCP pairs; DDP all-reduces each bucket with
#        gloo's ring (2 round trips on 2 ranks), Lockstep on 2 ranks exchanges it with one
#        send/recv and adds locally (LOCKSTEP_PAIRWISE=0 in the environment: gloo's ring too).
#      Not the runtime: ~90% of a step is the GEMMs of Debian's reference (netlib) BLAS, identical
#      on both sides, so runtime savings show as a few percent at most.
#  (b) recorder overhead: `lockstep worker` recorded vs --no-record, alternated: on 2 ranks
#      (recorder_overhead_2rank_pct) and on 1 rank (recorder_overhead_pct, target <= 2).
# Usage: bench_runtime.sh [LOCKSTEP_BINARY]
#   (env: LAYERS WIDTH BATCH STEPS WARMUP REPEATS BUCKET_MB FIRST_BUCKET_MB PEER_GRAD_VIEW;
#    PEER_ONLY=1: part (a) only, for quick iterations)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cli=${1:-${LOCKSTEP_CLI:-$here/../../build/app/lockstep}}
py=/usr/bin/python3
layers=${LAYERS:-6} width=${WIDTH:-512} batch=${BATCH:-64} steps=${STEPS:-30} warmup=${WARMUP:-5}
repeats=${REPEATS:-3} bucket=${BUCKET_MB:-1} first=${FIRST_BUCKET_MB:-1}
peer_flags=(); [ "${PEER_GRAD_VIEW:-1}" = 0 ] && peer_flags=(--no-grad-view)
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
median() { printf '%s\n' "$@" | sort -g | awk '{ a[n++] = $1 }
  END { if (n % 2) printf "%.3f", a[(n-1)/2]; else printf "%.3f", (a[n/2-1]+a[n/2])/2 }'; }

model=(--layers "$layers" --width "$width" --batch "$batch" --steps "$steps" --bucket-mb "$bucket" --first-bucket-mb "$first")
peer=() ; lock=() ; rec=() ; norec=() ; ratios=()
for i in $(seq "$repeats"); do
  two_ranks "$tmp/peer.txt" "$py" "$here/ddp_peer.py" "${model[@]}" --threads 1 "${peer_flags[@]}"
  peer+=("$(mean_ms "$tmp/peer.txt")")
  two_ranks "$tmp/norec.txt" "$cli" worker --model mlp "${model[@]}" --threads 1 --no-record
  norec+=("$(mean_ms "$tmp/norec.txt")")
  ratios+=("$(awk -v a="${norec[-1]}" -v b="${peer[-1]}" 'BEGIN { printf "%.3f", a/b }')")
  if [ "$i" = 1 ]; then
    peer_layout=$(grep -m1 '^peer layout' "$tmp/peer.txt" || echo "peer layout: missing")
    lock_layout=$(grep -m1 '^LOCKSTEP layout' "$tmp/norec.txt" || echo "LOCKSTEP layout: missing")
  fi
  [ "${PEER_ONLY:-0}" = 1 ] && continue
  two_ranks "$tmp/rec.txt" "$cli" worker --model mlp "${model[@]}" --threads 1 --out-dir "$tmp/shards$i"
  rec+=("$(mean_ms "$tmp/rec.txt")")
done
# (b) also on one rank: the same recording work (hooks, every span, a commit per step) without
# gloo's scheduling on the shared cores, which on a busy 2-core machine swings step times by
# tens of percent between identical runs and hides a cost of ~1%.
rec1=() ; norec1=()
for i in $(seq "$repeats"); do
  [ "${PEER_ONLY:-0}" = 1 ] && break
  env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT "$cli" worker --model mlp "${model[@]}" --threads 1 --no-record > "$tmp/n1.txt" 2>&1
  norec1+=("$(mean_ms "$tmp/n1.txt")")
  env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT "$cli" worker --model mlp "${model[@]}" --threads 1 --out-dir "$tmp/one$i" > "$tmp/r1.txt" 2>&1
  rec1+=("$(mean_ms "$tmp/r1.txt")")
done
p=$(best "${peer[@]}"); n=$(best "${norec[@]}")
echo "runtime_config: mlp layers=$layers width=$width batch=$batch world=2 bucket_mb=$bucket first_bucket_mb=$first threads=1 steps=$steps warmup=$warmup repeats=$repeats"
echo "layout_peer: ${peer_layout#peer layout }"
echo "layout_lockstep: ${lock_layout#LOCKSTEP layout }"
echo "peer_step_ms_all: ${peer[*]} ms"
echo "lockstep_step_ms_all: ${norec[*]} ms"
echo "peer_step_ms: $p ms"
echo "lockstep_step_ms: $n ms"
pm=$(median "${peer[@]}"); nm=$(median "${norec[@]}")
echo "peer_step_ms_median: $pm ms"
echo "lockstep_step_ms_median: $nm ms"
echo "ratio_all: ${ratios[*]}"
echo "ratio_best: $(awk -v a="$n" -v b="$p" 'BEGIN { printf "%.3f", a/b }')"
echo "ratio_median: $(awk -v a="$nm" -v b="$pm" 'BEGIN { printf "%.3f", a/b }')"
echo "ratio: $(median "${ratios[@]}")"
if [ "${PEER_ONLY:-0}" = 1 ]; then exit 0; fi
r=$(best "${rec[@]}"); n1=$(best "${norec1[@]}"); r1=$(best "${rec1[@]}")
echo "lockstep_recorded_step_ms_all: ${rec[*]} ms"
echo "lockstep_recorded_step_ms: $r ms"
echo "recorder_overhead_2rank_pct: $(awk -v a="$r" -v b="$n" 'BEGIN { printf "%.2f", (a/b-1)*100 }') %"
echo "lockstep_1rank_step_ms_all: ${norec1[*]} ms"
echo "lockstep_1rank_recorded_step_ms_all: ${rec1[*]} ms"
echo "recorder_overhead_pct: $(awk -v a="$r1" -v b="$n1" 'BEGIN { printf "%.2f", (a/b-1)*100 }') %"
