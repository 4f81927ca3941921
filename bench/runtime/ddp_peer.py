#!/usr/bin/python3
# The peer of Lockstep's runtime: the same mlp, batch, bucket caps, optimizer and thread count,
# trained by PyTorch's own torch.nn.parallel.DistributedDataParallel (gloo, CPU; --cuda: NCCL, one
# GPU per rank, for scripts/gpu_device.sh's runtime-vs-DDP figure on a lent GPU).
# One rank per process; rank/world/rendezvous from the usual environment variables.
# Prints `peer step=<s> rank=<r> loss=<f> step_ms=<f> cpu_ms=<f>` per step (step_ms: same meaning
# as Lockstep's: batch generation + forward + backward with all-reduces + optimizer step; cpu_ms:
# the CPU time of the whole process, all threads, over the same interval).
import argparse, os, time
import torch
import torch.distributed as dist
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--layers", type=int, default=4)
p.add_argument("--width", type=int, default=256)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--bucket-mb", type=float, default=25.0)
p.add_argument("--first-bucket-mb", type=float, default=1.0)
p.add_argument("--lr", type=float, default=0.01)
p.add_argument("--threads", type=int, default=1)
# Lockstep keeps gradients in its buckets (DDP's gradient_as_bucket_view); so does the peer by
# default, so both do the same copies. --no-grad-view: DDP's default (copy into and out of buckets).
p.add_argument("--no-grad-view", action="store_true")
# In-process comparison (README, "Profile your own DDP job", Cost): steps 0..K-1 run on untouched
# PyTorch, then from step K on either lockstep.attach() records into --attach-out DIR, or, with
# --attach-out pyhook, PyTorch's own Python all-reduce hook is registered instead (the control:
# what any Python communication hook costs). Each step line then says recorded=0 or 1.
p.add_argument("--attach-at", type=int, default=-1)
p.add_argument("--attach-out", default=None)
p.add_argument("--cuda", action="store_true", help="NCCL, the model and the batches on GPU LOCAL_RANK")
a = p.parse_args()

torch.set_num_threads(a.threads)
torch.set_num_interop_threads(1)
dist.init_process_group("nccl" if a.cuda else "gloo")
rank = dist.get_rank()
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if a.cuda else torch.device("cpu")
if a.cuda:
    torch.cuda.set_device(device)
torch.manual_seed(1 + rank)
layers = []
for _ in range(a.layers):
    layers += [nn.Linear(a.width, a.width), nn.ReLU()]
layers.append(nn.Linear(a.width, 10))
model = nn.Sequential(*layers).to(device)
# torch reads the first bucket's cap from a private attribute; set it to match Lockstep's flag.
dist._DEFAULT_FIRST_BUCKET_BYTES = int(a.first_bucket_mb * 1024 * 1024)
ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb, gradient_as_bucket_view=not a.no_grad_view)
opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=0.9)
teacher = torch.randn(a.width, 10, generator=torch.Generator().manual_seed(7))
gen = torch.Generator().manual_seed(100 + rank)
recorded = 0
for s in range(a.steps):
    if s == a.attach_at and a.attach_out == "pyhook":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        ddp.register_comm_hook(dist.group.WORLD, default_hooks.allreduce_hook)
        recorded = 1
    elif s == a.attach_at:
        import lockstep  # installs its wrappers now: the steps before ran on untouched PyTorch

        lockstep.attach(ddp, out=a.attach_out, optimizer=opt)
        recorded = 1
    t0 = time.perf_counter()
    c0 = time.process_time()
    x = torch.rand(a.batch, a.width, generator=gen) * 3.4641 - 1.7320
    y = (x @ teacher).argmax(1)
    x, y = x.to(device), y.to(device)  # generated on the CPU and copied, as Lockstep's batches are
    loss = nn.functional.cross_entropy(ddp(x), y)
    opt.zero_grad(set_to_none=False)  # 1.13 default, spelled out: zeroed in place like Lockstep
    loss.backward()
    opt.step()
    loss_value = loss.item()  # on a GPU: waits for the step's kernels, as Lockstep's step does
    ms = (time.perf_counter() - t0) * 1e3
    cpu = (time.process_time() - c0) * 1e3
    print(f"peer step={s} rank={rank} loss={loss_value:.6f} step_ms={ms:.3f} cpu_ms={cpu:.3f} recorded={recorded}",
          flush=True)
# DDP rebuilds its buckets in gradient-ready order after step 0; these are the ones the steady
# steps use (Lockstep prints `LOCKSTEP layout ... buckets=`).
info = ddp._get_ddp_logging_data()
sizes = str(info.get("rebuilt_bucket_sizes", info.get("bucket_sizes", ""))).replace(" ", "")
print(f"peer layout rank={rank} buckets={len(sizes.split(',')) if sizes else 0} bucket_bytes={sizes} "
      f"grad_view={int(not a.no_grad_view)} threads={torch.get_num_threads()}", flush=True)
dist.barrier()
dist.destroy_process_group()
