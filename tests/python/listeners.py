#!/usr/bin/python3
# A DDP job's rendezvous, then: how many TCP sockets this process listens on beyond loopback
# (its listening sockets in /proc/net/tcp*, matched to its own fds). Used by test_recorder.py.
import os, torch, torch.distributed as dist, torch.nn as nn
dist.init_process_group("gloo")
ddp = nn.parallel.DistributedDataParallel(nn.Linear(8, 8))
ddp(torch.randn(2, 8)).sum().backward()  # one step: a job without one is a failed run
inodes = set()
for fd in os.listdir("/proc/self/fd"):
    try:
        t = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        continue
    if t.startswith("socket:["):
        inodes.add(t[8:-1])
wide = 0
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    with open(table) as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            local, state, inode = parts[1], parts[3], parts[9]
            if state == "0A" and inode in inodes and not local.startswith(("0100007F", "00000000000000000000000001000000")):
                wide += 1
print(f"rank {dist.get_rank()} listeners beyond loopback: {wide}", flush=True)
dist.barrier()
dist.destroy_process_group()
