#!/usr/bin/python3
# A small but real PyTorch DDP training job (gloo, CPU) for the recorder's tests: an mlp whose
# parameters fill several DDP buckets, trained by an ordinary loop. It knows nothing of lockstep
# unless --attach is given, so `python -m lockstep.record ddp_job.py` records it unchanged.
# One rank per process; rank and rendezvous from the environment torchrun sets.
#   --dump PATH       torch.save the final parameters and the last step's gradients
#   --ddp-info PATH   json of DDP's own _get_ddp_logging_data() (its bucket sizes and indices)
# ("{rank}" in PATH is replaced by the rank.)
import argparse
import json
import os
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--layers", type=int, default=4)
p.add_argument("--width", type=int, default=256)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--steps", type=int, default=6)
p.add_argument("--bucket-mb", type=float, default=0.25)
p.add_argument("--first-bucket-mb", type=float, default=None)
p.add_argument("--accumulate", type=int, default=1, help="micro-batches per step (no_sync on all but the last)")
p.add_argument("--hook", choices=["none", "fp16", "allreduce"], default="none")
p.add_argument("--hook-after-attach", action="store_true", help="register the hook after lockstep.attach")
p.add_argument("--grad-view", action="store_true", help="gradient_as_bucket_view=True")
p.add_argument("--set-to-none", action="store_true", help="zero_grad(set_to_none=True)")
p.add_argument("--attach", metavar="OUT_DIR", help="import lockstep first and lockstep.attach(ddp, out=OUT_DIR)")
p.add_argument("--import-late", action="store_true", help="with --attach: import lockstep only just before attach")
p.add_argument("--no-ddp", action="store_true", help="train without DistributedDataParallel")
p.add_argument("--fail-at", type=int, default=-1, help="raise an exception at this step")
p.add_argument("--crash", metavar="RANK:STEP", help="that rank dies (os._exit(3), no clean-up) at that step")
p.add_argument("--disk-full-at", type=int, default=-1,
               help="from this step on, no file of this process may grow (RLIMIT_FSIZE of 1 byte, SIGXFSZ ignored)")
p.add_argument("--sleep-ms", type=float, default=0,
               help="sleep this long in every step (keeps a short job recording for seconds: the app's live view)")
p.add_argument("--threads", type=int, default=1)
p.add_argument("--hang", metavar="RANK:STEP", help="that rank stops making progress at the start of that step")
p.add_argument("--exit-before-ddp", action="store_true", help="os._exit(0) before building DDP")
p.add_argument("--cuda", action="store_true", help="NCCL, one GPU per rank (LOCAL_RANK), for scripts/gpu_device.sh")
p.add_argument("--dump")
p.add_argument("--ddp-info")
a = p.parse_args()
if a.attach and not a.import_late:
    import lockstep  # noqa: F401  (as a user of lockstep.attach would, at the top)

torch.set_num_threads(a.threads)
dist.init_process_group("nccl" if a.cuda else "gloo")
rank, world = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if a.cuda else torch.device("cpu")
if a.cuda:
    torch.cuda.set_device(device)
if a.first_bucket_mb is not None:
    dist._DEFAULT_FIRST_BUCKET_BYTES = int(a.first_bucket_mb * 1024 * 1024)
torch.manual_seed(1234)
layers = []
for _ in range(a.layers):
    layers += [nn.Linear(a.width, a.width), nn.ReLU()]
layers.append(nn.Linear(a.width, 10))
model = nn.Sequential(*layers).to(device)


def register_hook(ddp):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    hook = default_hooks.fp16_compress_hook if a.hook == "fp16" else default_hooks.allreduce_hook
    ddp.register_comm_hook(dist.group.WORLD, hook)


if a.exit_before_ddp:
    os._exit(0)
if a.no_ddp:
    ddp = model
else:
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if a.cuda else None,
                                              bucket_cap_mb=a.bucket_mb, gradient_as_bucket_view=a.grad_view)
    if a.hook != "none" and not a.hook_after_attach:
        register_hook(ddp)
    if a.attach:
        import lockstep
        try:
            lockstep.attach(ddp, out=a.attach)
        except lockstep.RecorderError as e:
            print(f"RecorderError: {e}", file=sys.stderr)
            sys.exit(3)
    if a.hook != "none" and a.hook_after_attach:
        register_hook(ddp)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
gen = torch.Generator().manual_seed(100 + rank)
teacher = torch.randn(a.width, 10, generator=torch.Generator().manual_seed(7)).to(device)
for step in range(a.steps):
    if step == a.fail_at:
        raise RuntimeError(f"injected failure at step {step}")
    if a.crash and a.crash == f"{rank}:{step}":
        os._exit(3)
    if a.hang and a.hang == f"{rank}:{step}":
        threading.Event().wait()  # forever: the launcher's hang timeout ends it
    if step == a.disk_full_at:
        import resource
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    if a.sleep_ms > 0:
        time.sleep(a.sleep_ms / 1000)
    opt.zero_grad(set_to_none=a.set_to_none)
    for k in range(a.accumulate):
        x = torch.randn(a.batch, a.width, generator=gen).to(device)
        y = (x @ teacher).argmax(1)
        last = k == a.accumulate - 1
        ctx = ddp.no_sync() if (not last and not a.no_ddp) else torch.enable_grad()
        with ctx:
            loss = nn.functional.cross_entropy(ddp(x), y) / a.accumulate
            loss.backward()
    opt.step()
    sched.step()

if a.dump:
    torch.save({"params": [q.detach().clone() for q in model.parameters()],
                "grads": [q.grad.detach().clone() for q in model.parameters()]}, a.dump.format(rank=rank))
if a.ddp_info and not a.no_ddp:
    info = ddp._get_ddp_logging_data()
    keep = ("bucket_sizes", "rebuilt_bucket_sizes", "rebuilt_per_bucket_param_indices", "comm_hook",
            "has_rebuilt_buckets", "bucket_cap_bytes")
    with open(a.ddp_info.format(rank=rank), "w") as f:
        json.dump({k: info.get(k) for k in keep}, f)
print(f"rank {rank} trained {a.steps} steps", flush=True)
dist.barrier()
dist.destroy_process_group()
