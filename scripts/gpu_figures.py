#!/usr/bin/env python3
"""Figures of a run file recorded on a GPU, computed from its raw rows with sqlite3 alone (none of
Lockstep's code), so they check what `lockstep report` says rather than repeat it.

    python3 scripts/gpu_figures.py NAME RUN.db [WARMUP [REPORT.json]]

prints `NAME_<figure>: value unit` lines:
  rank_steps, host_step_ms steady (rank, step) rows (step >= WARMUP, default 3) and their mean host step
                           (the step's own start..end on the host: the truth a report's step time
                           must agree with; the worker's step ends once its device work is done)
  device_spans             kernels, communication kernels, copies and memsets of the run
  device_attributed_pct    of those, the share tagged with the step that launched them
  kernels_per_step         kernels + communication kernels launched per steady step (mean)
  comm_kernels, comm_kernels_with_bucket_pct
                           NCCL kernels, and the share tagged with their bucket
  device_outside_host_us   CUPTI vs host clock: how far a steady step's device work reaches
                           outside [its host step start, its host step end] (max over steps, and
                           the median); device work a step launched can start no earlier than the
                           step and, the step ending with a read that waits for the GPU, end no
                           later: on one clock this is 0 give or take the launch/read latency
  diagnostics              the run's diagnostics, one line each
  report_*                 with REPORT.json (`lockstep report --json`): what the report says
                           (step time, communication, overlap ratio, samples/s), beside the above
"""
import json
import sqlite3
import statistics
import sys

DEVICE_KINDS = (6, 7, 8, 9)  # SpanKind: Kernel, CommKernel, Memcpy, Memset (core/include/lockstep/core/types.h)


def varint(data, i):
    v, shift = 0, 0
    while True:
        c = data[i]
        i += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, i
        shift += 7


def unzigzag(v):
    return (v >> 1) ^ -(v & 1)


def block_rows(lane, data):
    """(lane, start, dur, kind, step, bucket) of one span block, decoded here from the format
    core/include/lockstep/core/span_block.h documents (not with Lockstep's decoder)."""
    if data[0] != 1:
        raise ValueError("unknown span block format %d" % data[0])
    count, i = varint(data, 1)
    start, i = varint(data, i)
    start = unzigzag(start)
    kind, step, bucket = 0, -1, -1
    for _ in range(count):
        flags = data[i]
        i += 1
        delta, i = varint(data, i)
        dur, i = varint(data, i)
        start += delta
        if flags & 1:
            kind = data[i]
            i += 1
        if flags & 2:
            _, i = varint(data, i)  # name
        if flags & 4:
            v, i = varint(data, i)
            step += unzigzag(v)
        if flags & 8:
            v, i = varint(data, i)
            bucket = unzigzag(v)
        if flags & 16:
            _, i = varint(data, i)  # bytes
        yield lane, start, dur, kind, step, bucket


def span_rows(db):
    """Every span as (lane, start, dur, kind, step, bucket): rows of `spans` before run-file schema 6,
    decoded `span_blocks` from 6 on."""
    if db.execute("PRAGMA user_version").fetchone()[0] < 6:
        yield from db.execute("SELECT lane, start_ns, COALESCE(dur_ns, 0), kind, step, bucket FROM spans")
        return
    for lane, data in db.execute("SELECT lane, data FROM span_blocks"):
        yield from block_rows(lane, data)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    name, path = sys.argv[1], sys.argv[2]
    warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out = []

    def fig(key, value, unit=""):
        out.append(f"{name}_{key}: {value}{(' ' + unit) if unit else ''}")

    steps = {(r, s): (a, b) for r, s, a, b in db.execute("SELECT rank, step, start_ns, end_ns FROM steps")}
    steady = {k: v for k, v in steps.items() if k[1] >= warmup}
    fig("rank_steps", len(steady), f"steady of {len(steps)} (rank, step) rows")
    if steady:
        fig("host_step_ms", f"{statistics.mean((b - a) / 1e6 for a, b in steady.values()):.3f}", "ms")

    lane_rank = dict(db.execute("SELECT id, rank FROM lanes"))
    device = [(lane_rank.get(l, -1), a, a + d, k, s, b) for l, a, d, k, s, b in span_rows(db) if k in DEVICE_KINDS]
    fig("device_spans", len(device))
    if device:
        fig("device_attributed_pct", f"{100 * sum(1 for x in device if x[4] >= 0) / len(device):.1f}", "%")
    per_step = {}
    extent = {}
    for rank, a, b, kind, step, bucket in device:
        if (rank, step) not in steady:
            continue
        if kind in (6, 7):
            per_step[(rank, step)] = per_step.get((rank, step), 0) + 1
        lo, hi = extent.get((rank, step), (a, b))
        extent[(rank, step)] = (min(lo, a), max(hi, b))
    if steady:
        fig("kernels_per_step", f"{sum(per_step.values()) / len(steady):.1f}")
    comm = [x for x in device if x[3] == 7]
    fig("comm_kernels", len(comm))
    if comm:
        fig("comm_kernels_with_bucket_pct", f"{100 * sum(1 for x in comm if x[5] >= 0) / len(comm):.1f}", "%")
    outside = []
    for key, (lo, hi) in extent.items():
        a, b = steady[key]
        outside.append(max(0, a - lo, hi - b) / 1e3)
    if outside:
        fig("device_outside_host_us", f"max {max(outside):.1f} median {statistics.median(outside):.1f}", "us")
    for kind, count, message in db.execute("SELECT kind, count, message FROM diagnostics"):
        fig("diagnostic", f"{kind} x {count}: {message}")
    if len(sys.argv) > 4:
        with open(sys.argv[4]) as f:
            report = json.load(f)
        fig("report_step_ms", report.get("step_time_ms"), "ms")
        fig("report_comm_ms", report.get("comm_ms"), "ms")
        fig("report_overlap_ratio", report.get("overlap_ratio"))
        fig("report_samples_per_s", report.get("throughput_samples_per_s"))
    print("\n".join(out))


if __name__ == "__main__":
    main()
