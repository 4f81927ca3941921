"""Lockstep's recorder for PyTorch DistributedDataParallel jobs.

Records, per rank and per step, each top-level module's forward and backward, every
gradient-ready instant, each bucket's all-reduce (DDP's own buckets: index, parameters, bytes,
launch, completion), the wait at the end of backward and the optimizer step into a Lockstep run
database shard, written by core's RunWriter (lockstep._core) and committed once per step, so
lockstep-ui shows the run while it trains.

Two ways in:
  - unchanged script:  lockstep record --nproc 2 -- train.py ARGS
                       torchrun --nproc_per_node 2 -m lockstep.record --out-dir shards train.py ARGS
  - in your code:      import lockstep; rec = lockstep.attach(ddp_model, out="shards")

Importing lockstep installs a few pass-through wrappers (see lockstep._patches); it changes no
result of the training.
"""
from . import _patches

_patches.install()

from ._core import SCHEMA_VERSION, load_run, summary_json  # noqa: E402
from ._recorder import Recorder, RecorderError, attach, close_all, shard_path  # noqa: E402

__all__ = ["attach", "close_all", "Recorder", "RecorderError", "shard_path", "load_run", "summary_json",
           "SCHEMA_VERSION"]
