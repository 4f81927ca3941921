#!/usr/bin/env python3
"""Expected numbers for the real GPU fixtures, derived from their raw spans.

Independent of the code under test: sqlite3, json and gzip only, no project code. It applies
docs/design.md's rules ("Windows", "Parts by time, names by launch", "Categories") directly to
the raw rows and events and writes expected.json beside itself:

  python3 tests/data/gpu/derive.py

The fixtures (copied from the lent H100 machine's runs, see README.md there):
  record-nccl-1.db, record-nccl-tx.db   lockstep record, 1 rank, NCCL (ddp_job.py --cuda)
  record-gloo-cuda-2.db                 lockstep record, 2 ranks, gloo over CUDA tensors
  kineto-gloo2-rank-{0,1}.json.gz       torch.profiler, 2 ranks, DDP with gloo over CUDA tensors

Rules, as applied here:
  device work: kernels, communication kernels, copies, memsets; its step is the step that
    launched it (the span's step column; in a Kineto trace the ProfilerStep holding the CUDA
    runtime call with the same correlation id).
  window of step s (device rank): from the first device work step s launched to the first
    device work step s+1 launched; the last window ends at the later of its last device work
    and its host step's end.
  C: compute kernels (and, where the rank's collectives run on the host, the training threads'
    host ops); M: communication kernels (or host collectives: the gloo op on the worker thread,
    the c10d call, and the device<->host copies launched inside either, on the same thread);
    Mem: other copies and memsets. Parts of W: compute-only |C\\M|, overlapped |C&M|, exposed
    |M\\C|, memory-only |Mem\\(C|M)|, idle; on one rank M is empty (nothing to communicate).
  Run numbers: means over steady steps (step >= warm-up) and ranks.
"""
import gzip
import json
import os
import sqlite3
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))


def union(iv):
    out = []
    for a, b in sorted(iv):
        if b < a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def length(u):
    return sum(b - a for a, b in u)


def clip(u, lo, hi):
    return [[max(a, lo), min(b, hi)] for a, b in u if min(b, hi) > max(a, lo)]


def inter(x, y):
    i = j = 0
    out = []
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if a < b:
            out.append([a, b])
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def parts(C, M, Mem, lo, hi):
    c, m, mem = clip(C, lo, hi), clip(M, lo, hi), clip(Mem, lo, hi)
    wall = hi - lo
    cm = union(c + m)
    overlapped = length(inter(c, m))
    return {
        'wall': wall, 'compute': length(c), 'comm': length(m), 'memory': length(mem),
        'compute_only': length(c) - overlapped, 'overlapped': overlapped,
        'exposed': length(m) - overlapped,
        'memory_only': length(mem) - length(inter(mem, cm)),
        'idle': wall - length(union(cm + mem)),
    }


def windows(extent, host_end):
    """extent: {step: (first, last)}; host_end: {step: end}. Tiling windows per step."""
    steps = sorted(extent)
    out = {}
    prev = None
    starts = []
    for s in steps:
        st = extent[s][0] if prev is None else max(extent[s][0], prev)
        starts.append(st)
        prev = st
    for k, s in enumerate(steps):
        end = starts[k + 1] if k + 1 < len(steps) else max(starts[k], extent[s][1], host_end[s])
        out[s] = (starts[k], end)
    return out


def summarize(per_rank_steps, warmup, multi):
    """per_rank_steps: {rank: {step: parts}} -> means over steady steps and ranks, in ms."""
    rows = [p for r in per_rank_steps.values() for s, p in r.items() if s >= warmup]
    mean = lambda k: statistics.mean(p[k] for p in rows) / 1e6
    out = {k + '_ms': mean(k) for k in ('wall', 'compute', 'comm', 'compute_only', 'memory_only', 'idle')}
    out['step_time_ms'] = out.pop('wall_ms')
    if multi:
        out['overlapped_ms'] = mean('overlapped')
        out['exposed_comm_ms'] = mean('exposed')
        out['overlap_ratio'] = sum(p['overlapped'] for p in rows) / sum(p['comm'] for p in rows)
    out['per_rank'] = {}
    for r, st in sorted(per_rank_steps.items()):
        steady = [p for s, p in st.items() if s >= warmup]
        out['per_rank'][str(r)] = {
            'step_time_ms': statistics.mean(p['wall'] for p in steady) / 1e6,
            'comm_ms': statistics.mean(p['comm'] for p in steady) / 1e6,
        }
    return out


def derive_db(path):
    db = sqlite3.connect(path)
    warmup = 3  # ddp_job.py / gpu_job.py under lockstep record: the default --warmup
    lanes = {i: (r, k) for i, r, k in db.execute('select id, rank, kind from lanes')}
    world = len({r for r, _ in lanes.values()})
    multi = world > 1
    steps = {}
    for r, s, a, b, n in db.execute('select rank, step, start_ns, end_ns, samples from steps'):
        steps.setdefault(r, {})[s] = (a, b, n)
    dev = {}
    for lane, start, dur, kind, step, bucket in db.execute(
            'select lane, start_ns, dur_ns, kind, step, bucket from spans'):
        r, lk = lanes[lane]
        if lk != 'gpu_stream' or kind not in (6, 7, 8, 9):
            continue
        dev.setdefault(r, []).append((start, start + dur, kind, step, bucket))
    per_rank = {}
    host = []
    for r in sorted(steps):
        spans = dev.get(r, [])
        C = union([[a, b] for a, b, k, s, bk in spans if k == 6])
        M = union([[a, b] for a, b, k, s, bk in spans if k == 7 or (k in (8, 9) and bk >= 0)]) if multi else []
        Mem = union([[a, b] for a, b, k, s, bk in spans if k in (8, 9) and bk < 0])
        extent = {}
        for a, b, k, s, bk in spans:
            if s < 0:
                continue
            e = extent.get(s)
            extent[s] = (a, b) if e is None else (min(e[0], a), max(e[1], b))
        w = windows(extent, {s: v[1] for s, v in steps[r].items()})
        per_rank[r] = {s: parts(C, M, Mem, lo, hi) for s, (lo, hi) in w.items()}
        host += [(b - a) for s, (a, b, n) in steps[r].items() if s >= warmup]
    out = summarize(per_rank, warmup, multi)
    out['host_step_ms'] = statistics.mean(host) / 1e6
    samples = [n for r in steps for s, (a, b, n) in steps[r].items() if s >= warmup]
    out['throughput_samples_per_s'] = statistics.mean(samples) * world / (out['step_time_ms'] / 1e3)
    return out


def derive_kineto(paths):
    warmup_step = None
    per_rank = {}
    host = []
    truth = {}
    buckets = {}
    launches = {}  # (step, bucket) -> {rank: launch ts}
    for r, path in enumerate(paths):
        with gzip.open(path) as f:
            ev = [e for e in json.load(f)['traceEvents'] if e.get('ph') == 'X']
        us = lambda t: int(round(float(t) * 1000))  # Kineto's microseconds -> ns
        iv = lambda e: (us(e['ts']), us(e['ts']) + us(e['dur']))
        # Host steps: ProfilerStep#N on the host (the device copy of the annotation is not a step).
        steps = {}
        for e in ev:
            if e['name'].startswith('ProfilerStep#') and e.get('cat') == 'user_annotation':
                steps[int(e['name'][13:])] = iv(e)
        order = sorted(steps, key=lambda s: steps[s][0])
        warmup_step = order[1]  # lockstep import's default: the first profiled step is warm-up

        def step_at(t):
            for s in order:
                a, b = steps[s]
                if a <= t < b:
                    return s
            return None

        workers = {e['tid'] for e in ev if e['name'].startswith('gloo:')}
        runtime = {e['args']['correlation']: e for e in ev
                   if e.get('cat') in ('cuda_runtime', 'cuda_driver') and 'correlation' in e.get('args', {})}
        colls = [e for e in ev if e['name'].startswith(('gloo:', 'c10d::'))]
        # device work, its launching step, and staging copies (launched inside a collective op
        # on the same thread)
        C, M, Mem = [], [], []
        extent = {}
        staging = {}  # (step, k-th c10d call of the step) -> bytes
        calls = sorted([e for e in ev if e['name'] == 'c10d::allreduce_'], key=lambda e: e['ts'])
        call_index = {}
        per_step = {}
        for e in calls:
            s = step_at(us(e['ts']))
            if s is None:
                continue
            k = per_step.get(s, 0)
            per_step[s] = k + 1
            call_index[id(e)] = (s, k)
            launches.setdefault((s, k), {})[r] = us(e['ts'])
        for e in ev:
            cat = e.get('cat')
            if cat not in ('kernel', 'gpu_memcpy', 'gpu_memset'):
                continue
            a, b = iv(e)
            call = runtime.get(e.get('args', {}).get('correlation'))
            launch = us(call['ts']) if call else None
            s = step_at(launch) if launch is not None else None
            if s is not None:
                x = extent.get(s)
                extent[s] = (a, b) if x is None else (min(x[0], a), max(x[1], b))
            if cat == 'kernel':
                C.append([a, b])
                continue
            inside = None
            if call and cat == 'gpu_memcpy':
                for c in colls:
                    ca, cb = iv(c)
                    if c['tid'] == call['tid'] and ca <= launch <= cb:
                        inside = c
                        break
            if inside is not None:
                M.append([a, b])
                if id(inside) in call_index:
                    key = call_index[id(inside)]
                    staging[key] = max(staging.get(key, 0), e['args'].get('bytes', 0))
            else:
                Mem.append([a, b])
        # host collectives: M; training threads' host ops: C
        for e in colls:
            M.append(list(iv(e)))
        for e in ev:
            if e.get('cat') not in ('cpu_op', 'user_annotation', 'cuda_runtime', 'cuda_driver'):
                continue
            n = e['name']
            if e['tid'] in workers or n.startswith(('ProfilerStep#', 'c10d::', 'gloo:', 'enumerate(DataLoader)')):
                continue
            if isinstance(e['pid'], str) or e['pid'] == 0:
                continue
            C.append(list(iv(e)))
        C, M, Mem = union(C), union(M), union(Mem)
        w = windows(extent, {s: v[1] for s, v in steps.items()})
        per_rank[r] = {s: parts(C, M, Mem, lo, hi) for s, (lo, hi) in w.items()}
        host += [b - a for s, (a, b) in steps.items() if s >= warmup_step]
        gloo = union([list(iv(e)) for e in ev if e['name'] == 'gloo:all_reduce'])
        truth[str(r)] = statistics.mean(length(clip(gloo, *steps[s])) for s in order if s >= warmup_step) / 1e6
        for (s, k), b in staging.items():
            buckets[k] = max(buckets.get(k, 0), b)
    out = summarize(per_rank, warmup_step, True)
    out['host_step_ms'] = statistics.mean(host) / 1e6
    out['gloo_in_flight_ms'] = truth
    out['bucket_bytes'] = [buckets[k] for k in sorted(buckets)]
    late = {}
    for (s, k), by in launches.items():
        if s >= warmup_step and len(by) == 2:
            lr = max(by, key=lambda x: (by[x], -x))
            late[lr] = late.get(lr, 0) + 1
    out['late_rank_buckets'] = {str(k): v for k, v in sorted(late.items())}
    return out


def main():
    out = {
        'tolerances': {
            'step_time_rel': 0.01, 'parts_rel': 0.03, 'parts_abs_ms': 0.05,
            'host_step_rel': 0.02, 'gloo_in_flight_rel': 0.10,
        },
    }
    for name in ('record-nccl-1', 'record-nccl-tx', 'record-gloo-cuda-2'):
        out[name] = derive_db(os.path.join(HERE, name + '.db'))
    out['kineto-gloo2'] = derive_kineto([os.path.join(HERE, 'kineto-gloo2-rank-%d.json.gz' % r) for r in (0, 1)])
    with open(os.path.join(HERE, 'expected.json'), 'w') as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write('\n')


if __name__ == '__main__':
    main()
