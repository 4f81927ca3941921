"""python -m lockstep.record: runs an unchanged PyTorch DDP script and records every
DistributedDataParallel it builds, one shard per rank.

    torchrun --nproc_per_node 2 -m lockstep.record --out-dir shards train.py --lr 0.1
    lockstep merge shards/rank-*.db --out run.db

(`lockstep record --nproc N -- train.py ARGS` starts the ranks, shows progress and merges for
you; it runs this module in each rank, whose default env:// rendezvous then goes through the
launcher's rendezvous file.) The script runs as `python train.py` would run it
(__main__, sys.argv, sys.path[0]); its exit status is this process's exit status. Nothing is
printed unless something is wrong; the launcher's progress lines go to the file descriptor in
LOCKSTEP_PROGRESS_FD when that is set.
"""
import argparse
import functools
import os
import runpy
import sys
import traceback

import lockstep
from lockstep import _core, _patches, _recorder


def _parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m lockstep.record",
        description="Run a PyTorch DDP script with every DistributedDataParallel it builds recorded "
                    "into OUT_DIR/rank-<rank>.db (merge them with `lockstep merge`).")
    p.add_argument("--out-dir", default=os.environ.get("LOCKSTEP_SHARD_DIR") or "lockstep-shards",
                   help="folder for the rank shards (default: $LOCKSTEP_SHARD_DIR, else lockstep-shards)")
    p.add_argument("--run-name", help="name of the run shown in the app (default: the script's name)")
    p.add_argument("--warmup", type=int, default=3, help="steps left out of run-level numbers (default 3)")
    p.add_argument("--force", action="store_true",
                   help="replace this rank's shard if OUT_DIR already holds one (refused without it)")
    p.add_argument("-m", dest="module", action="store_true", help="SCRIPT is a module name, run like python -m")
    p.add_argument("script", help="the training script (or module with -m)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    return p.parse_args(argv)


def _file_rendezvous():
    """Under `lockstep record`, a script's default env:// rendezvous goes through the c10d
    FileStore in the job's private folder (LOCKSTEP_RENDEZVOUS_FILE) instead: torch's TCPStore
    server listens on every interface, a file listens on none, and a local job needs no network
    (the launcher's promise for `lockstep run` holds for a user's script too). The ranks still
    find RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in their environment; an explicit
    init_method or store is left alone."""
    path = os.environ.get("LOCKSTEP_RENDEZVOUS_FILE")
    if not path:
        return
    import torch.distributed as dist

    original = dist.init_process_group

    @functools.wraps(original)
    def init_process_group(backend=None, init_method=None, *args, **kwargs):
        if init_method in (None, "env://") and not args and kwargs.get("store") is None:
            init_method = "file://" + path
            for key, env in (("rank", "RANK"), ("world_size", "WORLD_SIZE")):
                if kwargs.get(key, -1) == -1:
                    kwargs[key] = int(os.environ[env])
        return original(backend, init_method, *args, **kwargs)

    dist.init_process_group = init_process_group


def _script_traceback(error):
    """The traceback as `python script.py` would print it: without this runner's frames."""
    tb = error.__traceback__
    skip = {os.path.abspath(__file__), os.path.abspath(runpy.__file__), "<frozen runpy>"}
    while tb is not None and (tb.tb_frame.f_code.co_filename in skip
                              or os.path.abspath(tb.tb_frame.f_code.co_filename) in skip):
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb)


def main(argv=None):
    opts = _parse(sys.argv[1:] if argv is None else argv)
    fd = os.environ.get("LOCKSTEP_PROGRESS_FD")
    progress_fd = int(fd) if fd else None
    stem = opts.script if opts.module else os.path.splitext(os.path.basename(opts.script))[0]
    run_name = opts.run_name or os.environ.get("LOCKSTEP_RUN_NAME") or stem
    rank = int(os.environ.get("RANK", "0"))
    # A shard from an earlier run is somebody's data: refused before the script starts, as
    # lockstep-worker refuses its own (`lockstep record` gives every run a fresh folder).
    shard = _recorder.shard_path(opts.out_dir, rank)
    if os.path.lexists(shard) and not opts.force:
        print("python -m lockstep.record: %s already exists; pass --force to replace it" % shard, file=sys.stderr)
        return 2
    recorded = []
    ignored = []

    def auto_attach(ddp):
        if recorded:
            # One shard per rank holds one model's buckets; a second DDP would mix two layouts.
            if not ignored:
                print("lockstep record: the script built a second DistributedDataParallel; only the first "
                      "one is recorded", file=sys.stderr)
                recorded[0]._core.add_diagnostic("second DDP not recorded", 1,
                                                 "the script built more than one DistributedDataParallel; only the "
                                                 "first is recorded")
            ignored.append(ddp)
            return
        recorded.append(lockstep.attach(ddp, opts.out_dir, run_name=run_name, warmup=opts.warmup,
                                        progress_fd=progress_fd))

    _patches.auto_attach = auto_attach
    _file_rendezvous()
    sys.argv = [opts.script] + opts.args
    code, cause = 0, ""
    try:
        if opts.module:
            # As `python -m` does: the working folder first (a module is looked up from there).
            sys.path[0:1] = [os.getcwd()]
            runpy.run_module(opts.script, run_name="__main__", alter_sys=True)
        else:
            if not os.path.isfile(opts.script):
                print(f"lockstep record: no such script: {opts.script}", file=sys.stderr)
                return 2
            sys.path[0] = os.path.dirname(os.path.abspath(opts.script))
            runpy.run_path(opts.script, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
        cause = f"the script exited with status {code}" if code else ""
    except BaseException as e:  # the script's own error: shown as Python shows it, run marked failed
        _script_traceback(e)
        code, cause = 1, f"{type(e).__name__}: {e}"
    finally:
        _patches.auto_attach = None
    _recorder.close_all("completed" if code == 0 else "failed", cause)
    # Each recorder keeps its error, also when it was closed earlier (destroy_process_group).
    errors = [rec.error for rec in recorded if rec.error]
    error_step = -1
    if errors and not cause:
        cause = errors[0]  # the shard is not whole: the launcher marks the run failed with why
        error_step = next(rec.error_step for rec in recorded if rec.error)  # where, not where training ended

    if not recorded:
        why = (f"{opts.script} never created a torch.nn.parallel.DistributedDataParallel, so nothing was recorded "
               "(lockstep records DDP training: wrap the model with DistributedDataParallel after "
               "torch.distributed.init_process_group)")
        if progress_fd is None:  # under `lockstep record` the launcher says it, once
            print(f"lockstep record: {why}", file=sys.stderr)
        cause = cause or why
    # The script's exit status is ours; the launcher also learns when nothing was recorded or
    # a shard could not be written whole.
    _protocol(progress_fd, rank, cause if (code or not recorded or errors) else "", error_step)
    return code


def _protocol(fd, rank, cause, step=-1):
    """The launcher's last line for this rank: done, or failed with the cause (and the step it
    happened at, when that is not where the rank stopped)."""
    if fd is None:
        return
    line = (_core.failed_line(rank, cause, step) if cause else _core.done_line(rank)) + "\n"
    try:
        if fd == 1:
            sys.stdout.flush()
        os.write(fd, line.encode())
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
