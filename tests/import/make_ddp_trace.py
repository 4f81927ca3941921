"""Makes real torch.profiler (Kineto) traces of a 2-rank gloo DistributedDataParallel run on CPU.

Usage: make_ddp_trace.py OUT_DIR [--world-size N] [--steps S]
Writes OUT_DIR/rank0.json, OUT_DIR/rank1.json, ... (one Chrome trace per rank) and exits 0.
Used by tests/import/test_import_real.cpp with Debian's /usr/bin/python3 (python3-torch 1.13).
Rendezvous binds to 127.0.0.1 on a free port; everything is bounded by a timeout.
"""
import argparse
import os
import socket
import sys


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, world, port, out_dir, steps):
    import datetime
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=30))
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))
    # Small buckets so that a step has several all-reduces.
    ddp = DDP(model, bucket_cap_mb=0.1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))
    sched = schedule(wait=0, warmup=1, active=steps, repeat=1)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched) as prof:
        for _ in range(steps + 1):
            opt.zero_grad()
            loss = loss_fn(ddp(x), y)
            loss.backward()
            opt.step()
            prof.step()
    prof.export_chrome_trace(os.path.join(out_dir, "rank%d.json" % rank))
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    import torch.multiprocessing as mp
    os.makedirs(args.out_dir, exist_ok=True)
    ctx = mp.start_processes(worker, args=(args.world_size, free_port(), args.out_dir, args.steps),
                             nprocs=args.world_size, join=False, start_method="spawn")
    # Bounded: a hung rank must not hang the test.
    import time
    deadline = time.time() + 90
    while not ctx.join(timeout=1):
        if time.time() > deadline:
            for p in ctx.processes:
                p.kill()
            print("make_ddp_trace: timed out", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
