#!/usr/bin/env python3
"""A witness the straggler benchmark does not get from Lockstep: how long each rank's threads
were runnable but not running (waiting for a CPU) and how much CPU time they used, from the
kernel's own scheduler statistics.

Started beside one `lockstep run`, it samples /proc every 100 ms for lockstep-worker processes,
takes each one's rank from its environment (RANK, as the launcher sets it) and sums, over all of
its threads, the second and first fields of /proc/PID/task/TID/schedstat (nanoseconds spent
waiting on a run queue, and running). Counters only grow, so the last sample of each thread is
its total; a thread seen once keeps its last value after it exits. Each sample appends, per
rank, [CLOCK_REALTIME ns, run-queue wait ns, run ns] summed over the rank's threads: cumulative
series on the clock the run database uses, so a reader can take the increments over any window
of the run (the straggler benchmark takes the steady steps). On SIGTERM or SIGINT it prints one
JSON object {"RANK": [[t_ns, wait_ns, run_ns], ...], ...} and exits.

Why: on a 2-core machine a rank that shares its core with a busy process (or with the other
ranks' threads), or runs on a vCPU whose host core is busy with another guest, is late every
step although nothing was injected. Lockstep sees only that it is late; the kernel sees that it
waited longer for a CPU, or needed more CPU time for the same work. A clean run's named
straggler whose extra run-queue wait and CPU time account for its delay was made by the
machine, and the verdict was right.

Usage: rank_cpu.py (runs until signalled)
"""
import json
import os
import signal
import sys
import time

totals = {}  # (pid, tid) -> (rank, wait_ns, run_ns)


def rank_of(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"RANK="):
                    return int(item[5:])
    except (OSError, ValueError):
        pass
    return None


workers = {}  # pid -> rank


def find_workers():
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in workers:
            continue
        pid = int(name)
        try:
            with open("/proc/%d/comm" % pid) as f:
                if f.read().strip() != "lockstep-worker":
                    continue
        except OSError:
            continue
        rank = rank_of(pid)
        if rank is not None:
            workers[pid] = rank


def sample():
    for pid, rank in list(workers.items()):
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            del workers[pid]
            continue
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    run_ns, wait_ns = (int(v) for v in f.read().split()[:2])
            except (OSError, ValueError):
                continue
            totals[(pid, tid)] = (rank, wait_ns, run_ns)


series = {}  # rank -> [[t_ns, wait_ns, run_ns], ...]


def record():
    now = time.time_ns()
    sums = {}
    for rank, wait_ns, run_ns in totals.values():
        w, r = sums.get(rank, (0, 0))
        sums[rank] = (w + wait_ns, r + run_ns)
    for rank, (w, r) in sums.items():
        series.setdefault(str(rank), []).append([now, w, r])


def report(*_):
    sample()
    record()
    print(json.dumps(series, sort_keys=True))
    sys.stdout.flush()
    sys.exit(0)


signal.signal(signal.SIGTERM, report)
signal.signal(signal.SIGINT, report)
# Sampling the known workers every 100 ms costs about 2% of a core; looking for new ones means
# reading every process's name, so that is done every 100 ms until one is found, then every second.
tick = 0
while True:
    if not workers or tick % 10 == 0:
        find_workers()
    sample()
    record()
    tick += 1
    time.sleep(0.1)
