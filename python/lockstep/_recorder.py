"""Recording one DistributedDataParallel model into a rank shard.

What is hooked, and why there (torch 1.13 and 2.x alike, public API or DDP's own attributes):

- Gradient-ready instants: a post-hook on each parameter's gradient accumulator, the node DDP's
  own reducer hooks. It is a native callable (lockstep._core.GradHook): one call into C++ and a
  clock read per gradient. The accumulators are kept alive by the recorder, as DDP keeps them.
- The end of backward: a callback queued on the autograd engine by the first gradient (or
  bucket launch) of each backward; it runs when the engine has finished backward's compute and
  queues a second one, which runs after DDP's own end-of-backward callback (the wait for every
  bucket and the copy back of the averaged gradients). Between the two is the "wait".
- Buckets: the one communication hook DDP accepts is lockstep's CommSlot (_patches.py), which
  runs the user's hook or DDP's default all-reduce inside. GradBucket gives the bucket's index
  (after DDP's rebuild), its parameters and its buffer; launch is the hook's call, completion
  the future's then().
- Forward: forward pre/post hooks on the DDP module and on each top-level child module.
- Backward's start and the loss: the torch.autograd.backward wrapper (_patches.py).
- The optimizer step: the instance's step() wrapped, for every optimizer that holds one of the
  DDP's parameters (found through the Optimizer registry or passed to attach()).

A step is one optimizer step: it opens at the first training forward (grad enabled, module in
training mode) after the previous step and closes when the optimizer step that follows a
synchronized backward returns (under no_sync, several forward/backward micro-batches come first). A script without a
recognizable optimizer step gets steps that close at the next forward, ending where the
synchronized backward's wait ended. Steps are contiguous: everything between two steps (data
loading, zero_grad, logging) belongs to the later one, as "data, user code".

Nothing here changes what the training computes: hooks observe, the default all-reduce is
DDP's own arithmetic (_patches._default_allreduce), and the user's hook runs unchanged.
"""
import atexit
import functools
import math
import os
import shlex
import socket
import sys
import types
import weakref

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from . import _clock, _core, _patches
from ._core import Ev

_engine = torch.autograd.Variable._execution_engine
_attach_count = 0  # per process; the same on every rank when every rank attaches in one order

# How long a clock exchange may wait for a peer: long enough for ranks that reach attach()
# seconds apart (DDP's construction is collective, so they are close), short enough that a
# peer that died does not keep the others waiting at exit.
_CLOCK_START_TIMEOUT_S = 60
_CLOCK_END_TIMEOUT_S = 10


class RecorderError(RuntimeError):
    """lockstep cannot record this model (the message says why and what to do)."""


def _guarded(method):
    """A hook must never break the user's training: an error of the recorder itself is noted
    (once on stderr, and in the shard's diagnostics) and the training goes on."""

    @functools.wraps(method)
    def wrapper(self, *args):
        try:
            return method(self, *args)
        except Exception as e:
            self._internal_error(e)

    return wrapper


def shard_path(out_dir, rank):
    """Where a rank's shard goes: the job library's layout (`lockstep record`, `lockstep merge`)."""
    return os.fsdecode(_core.shard_file(os.fsencode(out_dir), rank))


def _native(text):
    """A str for core: itself when it is UTF-8, else the bytes it came from (a name, path or
    argument that was not UTF-8 arrives as str with surrogate escapes; core keeps bytes)."""
    if not isinstance(text, str):
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape")


def attach(ddp, out=None, *, run_name=None, warmup=3, optimizer=None, progress_fd=None):
    """Records `ddp` (a torch.nn.parallel.DistributedDataParallel) into OUT/rank-<rank>.db.

    Call it on every rank, after the DDP is built and before training. OUT defaults to the
    folder `lockstep record` gives its ranks (LOCKSTEP_SHARD_DIR), else "lockstep-shards".
    `optimizer` is only needed for an optimizer created before lockstep was imported. A DDP
    that is already recorded (a script calling attach() under `lockstep record`) keeps its
    recorder, which is returned. The shard is finished when the process group is destroyed, at
    interpreter exit, or by Recorder.close(); merge the ranks' shards with
    `lockstep merge OUT/rank-*.db --out run.db`.
    """
    if not isinstance(ddp, DDP):
        raise TypeError(f"lockstep.attach expects a torch.nn.parallel.DistributedDataParallel, got {type(ddp).__name__}")
    existing = ddp.__dict__.get("_lockstep_recorder")
    if existing is not None:
        return existing
    if out is None:
        out = os.environ.get("LOCKSTEP_SHARD_DIR") or "lockstep-shards"
    if progress_fd is None and os.environ.get("LOCKSTEP_PROGRESS_FD"):
        progress_fd = int(os.environ["LOCKSTEP_PROGRESS_FD"])
    return Recorder(ddp, out, run_name=run_name, warmup=warmup, optimizer=optimizer, progress_fd=progress_fd)


def _ddp_parameters(ddp):
    """DDP's parameter list, in DDP's order (its parameter indices in _get_ddp_logging_data()):
    each module's own parameters in named_modules() order, trainable, not ignored, each once."""
    ignore = set(getattr(ddp, "parameters_to_ignore", ()) or ())
    seen = set()
    out = []
    for module_name, module in ddp.module.named_modules():
        for param_name, p in module.named_parameters(recurse=False):
            fqn = f"{module_name}.{param_name}" if module_name else param_name
            if not p.requires_grad or fqn in ignore or id(p) in seen:
                continue
            seen.add(id(p))
            out.append((fqn, p))
    return out


def _batch_size(args):
    """Samples in a forward's input: the first dimension of its first tensor argument (looking
    one level into lists, tuples and dicts). 0 when there is none."""
    for a in args:
        if isinstance(a, dict):
            a = next((v for v in a.values() if torch.is_tensor(v)), None)
        elif isinstance(a, (list, tuple)):
            a = next((v for v in a if torch.is_tensor(v)), None)
        if torch.is_tensor(a):
            return int(a.shape[0]) if a.dim() > 0 else 1
    return 0


def _command_line():
    argv = getattr(sys, "orig_argv", None) or [sys.executable] + sys.argv
    return shlex.join(argv)


def _group_key(pg):
    """The process group's global ranks as text, to keep clock keys of different groups apart."""
    try:
        return "-".join(str(r) for r in sorted(dist.distributed_c10d._pg_group_ranks[pg]))
    except (AttributeError, KeyError, TypeError):
        return "g"


_COMPRESS_OF_HOOK = {"fp16_compress_hook": "fp16", "bf16_compress_hook": "bf16"}


class Recorder:
    """Records one DistributedDataParallel model. Made by attach()."""

    def __init__(self, ddp, out, *, run_name, warmup, optimizer, progress_fd):
        global _attach_count
        foreign = _patches.foreign_hook_name(ddp)
        if foreign:
            raise RecorderError(
                f"a communication hook ({foreign}) was registered on this DistributedDataParallel before lockstep "
                "was imported, and DDP accepts only one; import lockstep before register_comm_hook (python -m "
                "lockstep.record does that for an unchanged script)")
        self._ddp = ddp
        self._pg = ddp.process_group
        self.rank = dist.get_rank(self._pg)
        self.world = dist.get_world_size(self._pg)
        self._seq = _attach_count
        _attach_count += 1
        self._progress_fd = progress_fd
        # DDP is built, so the rendezvous is behind: the clock and the link probe are the warm-up.
        self._write_progress(_core.phase_line(self.rank, "warm-up"))
        self._closed = False
        self.error = ""  # set by close() when the shard could not be written whole
        self.error_step = -1  # and the step whose writing failed first
        self._internal_errors = 0

        named = _ddp_parameters(ddp)
        self._param_names = [n for n, _ in named]
        self._index_of = {id(p): i for i, (_, p) in enumerate(named)}
        children = [(n, m) for n, m in ddp.module.named_children()]
        root = type(ddp.module).__name__
        if root in {n for n, _ in children}:
            root += " (root)"
        stage_names = [n for n, _ in children] + [root]
        stage_of = {n: i for i, (n, _) in enumerate(children)}
        param_stage = [stage_of.get(n.split(".", 1)[0], len(children)) if "." in n else len(children)
                       for n in self._param_names]

        self._cuda = ddp.device_type == "cuda"
        device_index = -1
        if self._cuda:
            device_index = ddp.device_ids[0] if ddp.device_ids else torch.cuda.current_device()

        # Clock offset to rank 0, before anything else: every rank is here at about the same time.
        self._clock_prefix = f"lockstep/clock/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/" \
                             f"{self._seq}/{_group_key(self._pg)}"
        clock_note = None
        try:
            start = _clock.measure(self._store(), self.rank, self.world, self._clock_prefix + "/start",
                                   _CLOCK_START_TIMEOUT_S)
        except Exception as e:  # a store that does not answer: record uncorrected, say why
            start, clock_note = None, f"clock offset to rank 0 not measured at start: {e}"
        self._rank_info = dict(
            rank=self.rank, host=socket.gethostname(), pid=os.getpid(),
            device=f"cuda:{device_index}" if self._cuda else "cpu",
            clock_offset_ns=start.offset_ns if start else 0, clock_rtt_ns=start.rtt_ns if start else 0,
            clock_sync_start_ns=start.at_ns if start else 0,
            boot_id=_clock.boot_id(), clock_uncertainty_ns=start.uncertainty_ns if start else 0)

        hook_name = self._slot_hook_name(_patches.comm_slot(ddp, create=False))
        compress = _COMPRESS_OF_HOOK.get(hook_name, hook_name)
        # The link at a few small sizes, before training (_probe_link says why and how).
        probe, probe_note = self._probe_link(named, compress, start is not None,
                                             torch.device("cuda", device_index) if self._cuda else torch.device("cpu"))
        self._config = dict(
            name=_native(run_name or os.environ.get("LOCKSTEP_RUN_NAME") or "pytorch-ddp"),
            source="pytorch", model=type(ddp.module).__name__,
            model_args=f"params={len(named)} param_bytes={sum(p.numel() * p.element_size() for _, p in named)}",
            world_size=self.world, backend=str(dist.get_backend(self._pg)), device=ddp.device_type,
            bucket_cap_bytes=int(ddp.bucket_bytes_cap), first_bucket_cap_bytes=int(dist._DEFAULT_FIRST_BUCKET_BYTES),
            warmup_steps=int(warmup), compress=compress,
            command_line=_native(_command_line()), host=self._rank_info["host"], created_ns=_core.now_ns(), status="running",
            framework_version=f"torch {torch.__version__}",
            extra={
                "recorder": "lockstep python (DDP hooks)",
                "gradient_as_bucket_view": str(bool(ddp.gradient_as_bucket_view)).lower(),
                "find_unused_parameters": str(bool(ddp.find_unused_parameters)).lower(),
                "static_graph": str(bool(getattr(ddp, "static_graph", False))).lower(),
                "grad_ready": "gradient accumulator post-hooks",
                "local_rank": os.environ.get("LOCAL_RANK", ""),
            })
        if probe:
            self._config["extra"][_core.LINK_PROBE_KEY] = _core.format_link_probe(probe)
        os.makedirs(out, exist_ok=True)
        self.path = shard_path(out, self.rank)
        self._core = _core.ShardRecorder(
            os.fsencode(self.path), self._config, self._rank_info,
            dict(stage_names=stage_names, param_names=self._param_names, param_stage=param_stage,
                 root_stage=len(children), device=device_index, param_numel=[int(p.numel()) for _, p in named]),
            on_backward=self._on_backward_started)
        if clock_note:
            self._core.add_diagnostic("clock offset", 1, clock_note)
        if probe_note:
            self._core.add_diagnostic("link probe", 1, probe_note)

        self._device = None
        if self._cuda:
            from ._cuda import DeviceTimer
            self._device = DeviceTimer(device_index, self._core, self._report)

        self._write_progress(_core.phase_line(self.rank, "training"))
        # Step state (see the module's docstring).
        self._step = 0
        self._waiting_reported = -1
        self._open = False
        self._prev_end = None
        self._in_forward = False
        self._awaiting_backward = False
        self._sync = True
        self._synced_done = False
        self._wait_end_ns = 0
        self._losses = []
        self._micros = 0
        self._samples = 0
        self._opt_depth = 0
        self._steady_config_written = False
        # Bucket layouts: DDP rebuilds its buckets once, in gradient-ready order, after the first
        # step (unless find_unused_parameters without static_graph); the rebuilt one is the run's.
        self._will_rebuild = bool(getattr(ddp, "static_graph", False)) or not ddp.find_unused_parameters
        self._layout_gen = None
        self._layout = {}
        self._layout_complete = False
        self._layout_written = False
        self._initial_layout = None
        self._slot_label = (None, -1)

        self._handles = []
        self._accumulators = []
        with torch.enable_grad():
            for i, (_, p) in enumerate(named):
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                self._accumulators.append(acc)
                self._handles.append(acc.register_hook(self._core.grad_hook(i)))
        self._handles.append(ddp.register_forward_pre_hook(self._forward_pre))
        self._handles.append(ddp.register_forward_hook(self._forward_post))
        for k, (_, child) in enumerate(children):
            if isinstance(child, torch.jit.ScriptModule):
                continue  # scripted modules take only scripted hooks; their time stays with the root
            self._handles.append(child.register_forward_pre_hook(functools.partial(self._stage_begin, k)))
            self._handles.append(child.register_forward_hook(functools.partial(self._stage_end, k)))

        self._optimizers = weakref.WeakSet()
        if optimizer is not None:
            self._wrap_optimizer(optimizer)
        self._find_optimizers()

        self._slot = _patches.comm_slot(ddp)
        self._slot.recorder = self
        ddp.__dict__["_lockstep_recorder"] = self
        _patches.recorders.append(self)
        _register_exit_handler()

    # ---- the link probe ----

    def _probe_link(self, named, compress, clock_ok, device):
        """Times the job's own all-reduce at the probe's sizes, the fastest of its turns (whatif.h,
        kLinkProbeKey; the same as the runtime's, from _core).

        Why: a recording whose transfers after backward all have one size (DDP's default 25 MiB
        cap usually leaves one) cannot tell the link's latency from its bandwidth, and without a
        latency `lockstep advise` takes many small buckets to be free. The runtime probes before
        training; a user's job is probed here, at attach: once, before the first step, ~30-60 ms.

        It adds collectives to the user's process group, so every rank must make the same ones
        in the same order. Every rank attaches at the same point of its sequence (right after
        DDP's own collective construction), and whether to probe is rank 0's decision, posted in
        the store: rank 0 says yes only when its clock exchange saw every rank arrive (so every
        rank is here) and LOCKSTEP_LINK_PROBE is not 0 on rank 0; the others wait for that word
        (longer than rank 0 can wait for the slowest rank) and skip when it does not come. The
        probed tensors are the probe's own: no parameter, gradient or random state is touched.

        Returns ([(bytes on the wire, fastest ns)], note): the list is empty (and the note says
        why, for the diagnostics) when the probe was not made."""
        if self.world < 2:
            return [], None
        if compress not in ("none", "fp16"):
            return [], f"link not probed: the communication hook ({compress}) is not one the what-if model replays"
        store, key = self._store(), self._clock_prefix + "/probe"
        try:
            if self.rank == 0:
                agreed = clock_ok and os.environ.get("LOCKSTEP_LINK_PROBE", "1") != "0"
                store.set(key, "1" if agreed else "0")
            else:
                with _clock.store_timeout(store, _CLOCK_START_TIMEOUT_S * self.world + 10):
                    agreed = store.get(key) == b"1"
        except Exception as e:
            return [], f"link not probed: rank 0's word did not come over the store ({e})"
        if not agreed:
            return [], ("link not probed: LOCKSTEP_LINK_PROBE=0 on rank 0" if clock_ok and self.rank == 0
                        else "link not probed (switched off on rank 0, or not every rank reached attach in time)")
        dtype = torch.float16 if compress == "fp16" else (named[0][1].dtype if named else torch.float32)
        cuda = device.type == "cuda"
        gate = torch.zeros(1, dtype=torch.float32, device=device)
        # The sizes are float32 gradient bytes, as the caps count them; what travels is the
        # hook's type (fp16: half the bytes), and the bytes on the wire are recorded.
        tensors = [torch.ones(max(1, nbytes // 4), dtype=dtype, device=device) for nbytes in _core.LINK_PROBE_BYTES]
        best = [None] * len(tensors)
        with torch.no_grad():
            # The sizes take turns, so that a burst of load beside the job hits each of them
            # alike rather than all the repetitions of one.
            for _ in range(_core.LINK_PROBE_REPEATS):
                for i, t in enumerate(tensors):
                    # A one-element all-reduce as the barrier: every rank has joined when it returns.
                    dist.all_reduce(gate, group=self._pg)
                    if cuda:
                        torch.cuda.synchronize(device)
                    t0 = _core.now_ns()
                    dist.all_reduce(t, group=self._pg)
                    if cuda:
                        torch.cuda.synchronize(device)
                    dt = _core.now_ns() - t0
                    best[i] = dt if best[i] is None else min(best[i], dt)
        out = [(t.numel() * t.element_size(), max(1, b)) for t, b in zip(tensors, best)]
        return out, None

    # ---- forward ----

    @_guarded
    def _forward_pre(self, module, args):
        if not torch.is_grad_enabled() or not module.training:
            return  # evaluation: not part of a training step
        core = self._core
        if self._synced_done:
            # The previous step had its synchronized backward but no optimizer step we could see.
            self._close_step(self._wait_end_ns)
        now = _core.now_ns()
        if not self._open:
            self._open = True
            core.mark_at(Ev.StepStart, self._prev_end if self._prev_end is not None else now)
            if self._device:
                self._device.step_opened()
        self._sync = bool(self._ddp.require_backward_grad_sync)
        self._micros += 1
        samples = _batch_size(args)
        self._samples += samples
        core.mark_at(Ev.ForwardBegin, now, 0, samples)
        self._in_forward = True
        if self._device:
            self._device.forward_begin()

    @_guarded
    def _forward_post(self, module, args, output):
        if not self._in_forward:
            return
        self._in_forward = False
        self._awaiting_backward = True
        self._core.mark(Ev.ForwardEnd)

    @_guarded
    def _stage_begin(self, k, module, args):
        if self._in_forward:
            self._core.mark(Ev.StageBegin, k)
            if self._device:
                self._device.stage_begin(k)

    @_guarded
    def _stage_end(self, k, module, args, output):
        if self._in_forward:
            self._core.mark(Ev.StageEnd, k)
            if self._device:
                self._device.stage_end(k)

    # ---- backward ----

    @_guarded
    def _on_backward_call(self, tensors):
        if not self._awaiting_backward:
            return
        self._awaiting_backward = False
        self._core.mark(Ev.BackwardBegin)
        if isinstance(tensors, (list, tuple)) and len(tensors) == 1:
            tensors = tensors[0]
        loss = tensors if torch.is_tensor(tensors) and tensors.numel() == 1 else None
        if self._device:
            self._device.backward_begin(loss)
        elif loss is not None:
            self._losses.append(float(loss.detach()))

    def _on_backward_started(self):
        # Called by the native hooks at the first gradient or bucket launch of a backward.
        _engine.queue_callback(self._backward_end)

    @_guarded
    def _backward_end(self):
        self._core.mark(Ev.BackwardEnd)
        if self._device:
            self._device.backward_end()
        if self._sync:
            # Queued now, it runs after DDP's own end-of-backward callback.
            _engine.queue_callback(self._wait_end)

    @_guarded
    def _wait_end(self):
        t = _core.now_ns()
        self._core.mark_at(Ev.WaitEnd, t)
        self._synced_done = True
        self._wait_end_ns = t

    # ---- buckets ----

    def _slot_hook_name(self, slot):
        return slot.hook_name if slot is not None and slot.user_hook is not None else "none"

    def _on_bucket(self, slot, bucket):
        """The communication hook, recorded: launch, the user's hook (or DDP's all-reduce),
        completion."""
        try:
            launch, token = self._bucket_launched(slot, bucket)
        except Exception as e:
            self._internal_error(e)
            return slot.run_inner(bucket)
        fut = slot.run_inner(bucket, raw=True)  # done() below takes the first tensor
        core, device = self._core, self._device

        def done(f):
            core.comm_done(launch)
            if device is not None:
                device.bucket_done(token)
            return _patches._first_tensor(f)

        return fut.then(done)

    def _bucket_launched(self, slot, bucket):
        index = bucket.index()
        buf = bucket.buffer()
        nbytes = buf.numel() * buf.element_size()
        if self._layout_gen is not bool(getattr(self._ddp, "_has_rebuilt_buckets", False)):
            self._new_layout_generation()
        if not self._layout_complete:
            self._capture_bucket(index, nbytes, bucket)
        hook, label = self._slot_label
        if hook is not slot.user_hook or label < 0:
            label = self._core.label(slot.hook_name if slot.user_hook is not None else "allreduce")
            self._slot_label = (slot.user_hook, label)
            self._config["compress"] = _COMPRESS_OF_HOOK.get(slot.hook_name, slot.hook_name) \
                if slot.user_hook is not None else "none"
        if self._waiting_reported != self._step:
            # The launcher learns this rank reached the step's all-reduce: if the job hangs, the
            # rank that hung is one that did not.
            self._waiting_reported = self._step
            self._write_progress(_core.waiting_line(self.rank, self._step))
        launch = self._core.comm_launch(index, nbytes, label)
        token = self._device.bucket_ready(index, nbytes, label) if self._device else None
        return launch, token

    def _new_layout_generation(self):
        if self._layout_complete and not self._layout_written:
            self._initial_layout = self._layout_rows()
        self._layout_gen = bool(getattr(self._ddp, "_has_rebuilt_buckets", False))
        self._layout = {}
        self._layout_complete = False

    def _capture_bucket(self, index, nbytes, bucket):
        if index not in self._layout:
            self._layout[index] = (index, nbytes, [self._index_of.get(id(p), -1) for p in bucket.parameters()])
        if bucket.is_last():
            self._layout_complete = True
            final = self._layout_gen or not self._will_rebuild
            self._core.set_layout(self._layout_rows(), self._param_names, final)
            if final:
                self._write_layout_notes()

    def _layout_rows(self):
        return [self._layout[i] for i in sorted(self._layout)]

    def _write_layout_notes(self):
        self._layout_written = True
        if self._initial_layout and self._step > 0:
            sizes = ", ".join(str(b) for _, b, _ in self._initial_layout)
            self._core.add_diagnostic(
                "bucket layout rebuilt", 1,
                f"DDP rebuilt its buckets in gradient-ready order before step {self._step}; the buckets table is the "
                f"rebuilt layout, earlier steps used DDP's initial one ({len(self._initial_layout)} buckets: {sizes} bytes)")

    # ---- optimizer ----

    def _find_optimizers(self):
        for opt in list(_patches.optimizers):
            self._offer_optimizer(opt)

    def _offer_optimizer(self, opt):
        if opt not in self._optimizers and any(id(p) in self._index_of for g in opt.param_groups for p in g["params"]):
            self._wrap_optimizer(opt)

    def _wrap_optimizer(self, opt):
        if opt in self._optimizers:
            return
        self._optimizers.add(opt)
        orig = opt.step
        label = self._core.label(type(opt).__name__)
        rec_ref = weakref.ref(self)

        @functools.wraps(orig)  # keeps what lr_scheduler marks on step (_with_counter & co.)
        def step(_self, *args, **kwargs):
            rec = rec_ref()
            if rec is None or rec._closed:
                return orig(*args, **kwargs)
            rec._optimizer_begin(label)
            try:
                return orig(*args, **kwargs)
            finally:
                rec._optimizer_end()

        opt.step = types.MethodType(step, opt)
        if not self._config.get("optimizer"):
            self._config["optimizer"] = type(opt).__name__.lower()
            self._core.set_config(self._config)

    @_guarded
    def _optimizer_begin(self, label):
        if not self._open:
            return
        self._opt_depth += 1
        if self._opt_depth == 1:
            self._core.mark(Ev.OptBegin, 0, 0, label)
            if self._device:
                self._device.optimizer_begin(label)

    @_guarded
    def _optimizer_end(self):
        if self._opt_depth == 0:
            return
        self._opt_depth -= 1
        if self._opt_depth == 0:
            t = _core.now_ns()
            self._core.mark_at(Ev.OptEnd, t)
            if self._device:
                self._device.optimizer_end()
            if self._synced_done:
                self._close_step(t)

    # ---- steps ----

    def _close_step(self, end_ns):
        core = self._core
        core.mark_at(Ev.StepEnd, end_ns)
        pending = core.take_step(self._step)
        loss = sum(self._losses) / len(self._losses) if self._losses else math.nan
        if self._device:
            self._device.close_step(pending)
        else:
            pending.loss = loss
            start, end = pending.start_ns, pending.end_ns
            core.submit(pending)
            self._report(self._step, loss, start, end)
        if not self._steady_config_written:
            self._steady_config_written = True
            self._config["batch_per_rank"] = self._samples
            self._config["accumulate"] = self._micros
            self._config["extra"]["micro_batches_step0"] = str(self._micros)
            core.set_config(self._config)
        self._prev_end = end_ns
        self._step += 1
        self._open = False
        self._synced_done = False
        self._awaiting_backward = False
        self._losses = []
        self._micros = 0
        self._samples = 0

    def _report(self, step, loss, start_ns, end_ns):
        """The progress line of the launcher's protocol, when asked for (LOCKSTEP_PROGRESS_FD)."""
        if self._progress_fd is None:
            return
        self._write_progress(_core.step_line(self.rank, step, loss, (end_ns - start_ns) / 1e6))

    def _write_progress(self, text):
        if self._progress_fd is None:
            return
        line = text + "\n"
        try:
            if self._progress_fd == 1:
                sys.stdout.flush()  # the script's own complete lines first, never half a line
            os.write(self._progress_fd, line.encode())
        except OSError:
            self._progress_fd = None

    def _internal_error(self, error):
        if self._internal_errors == 0:
            print(f"lockstep: recorder error (training continues, the recording may be incomplete): "
                  f"{type(error).__name__}: {error}", file=sys.stderr)
            self._core.add_diagnostic("recorder error", 1, f"{type(error).__name__}: {error}")
        self._internal_errors += 1

    # ---- the end ----

    def _store(self):
        return dist.distributed_c10d._get_default_store()

    def _uses_group(self, group):
        return group is self._pg

    @property
    def steps(self):
        """Steps recorded so far."""
        return self._step

    def close(self, status="completed", cause=""):
        """Finishes the shard: the last step, the closing clock offset, the run's status.
        Idempotent; called for you at process-group destruction and at exit. Returns the
        recording error that kept the shard from being written whole ("" when it is whole)."""
        if self._closed:
            return self.error
        self._closed = True
        try:
            if self._open and self._synced_done:
                self._close_step(self._wait_end_ns)
            elif self._open and status == "completed":
                self._core.add_diagnostic("incomplete step", 1,
                                          f"step {self._step} had no synchronized backward when recording ended; "
                                          "it is not in the run")
            if self._device:
                self._device.drain()
            if not self._layout_written and (self._layout or self._initial_layout):
                rows = self._layout_rows() if self._layout_complete else self._initial_layout
                if rows:
                    self._core.set_layout(rows, self._param_names, True)
            if status == "completed" and self.world > 1:
                try:
                    end = _clock.measure(self._store(), self.rank, self.world, self._clock_prefix + "/end",
                                         _CLOCK_END_TIMEOUT_S)
                    if self.rank != 0:
                        # Between the two samples the offset is interpolated: its error is at
                        # most the larger of the two samples' errors.
                        self._rank_info.update(
                            clock_offset_end_ns=end.offset_ns, clock_sync_end_ns=end.at_ns,
                            clock_uncertainty_ns=max(self._rank_info["clock_uncertainty_ns"], end.uncertainty_ns))
                        self._core.update_rank(self._rank_info)
                except Exception as e:
                    self._core.add_diagnostic("clock offset", 1,
                                              f"closing clock offset to rank 0 not measured: {e}")
            if not self._config.get("optimizer"):
                self._core.add_diagnostic("no optimizer step", 1,
                                          "no optimizer holding this model's parameters was seen stepping; steps end "
                                          "at the next forward (pass optimizer= to lockstep.attach if it was created "
                                          "before lockstep was imported)")
        finally:
            for h in self._handles:
                h.remove()
            self._handles = []
            self._accumulators = []
            self._slot.recorder = None
            if self in _patches.recorders:
                _patches.recorders.remove(self)
            self._ddp.__dict__.pop("_lockstep_recorder", None)
            try:
                self._core.finish(status, _native(cause))
            except RuntimeError as e:
                self.error = str(e)
                self.error_step = self._core.error_step
                print(f"lockstep: {e}", file=sys.stderr)
        return self.error


_exit_handler_registered = False
_uncaught = []


def _register_exit_handler():
    """At exit, open recorders finish: failed with the exception's text if one escaped."""
    global _exit_handler_registered
    if _exit_handler_registered:
        return
    _exit_handler_registered = True
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        _uncaught.append(f"{kind.__name__}: {value}")
        previous(kind, value, tb)

    sys.excepthook = excepthook
    atexit.register(close_all)


def close_all(status=None, cause=""):
    """Finishes every open recorder (status: completed, or failed when an exception escaped)."""
    if status is None:
        status, cause = ("failed", _uncaught[0]) if _uncaught else ("completed", "")
    for rec in list(_patches.recorders):
        rec.close(status, cause)
