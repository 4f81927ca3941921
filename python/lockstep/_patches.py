"""The few places where lockstep wraps PyTorch, installed once when lockstep is imported.

Why each one exists:

- ``DistributedDataParallel.register_comm_hook`` (and the private built-in variant): a DDP
  accepts exactly one communication hook, and the recorder needs that one slot to see each
  bucket. So lockstep owns the slot (a :class:`CommSlot` registered with DDP) and the user's
  hook runs inside it, whether the user registers it before or after ``lockstep.attach``.
  Registering twice still fails exactly as DDP would.
- ``torch.optim.Optimizer.__init__``: remembers every optimizer (weakly) and shows it to the
  attached recorders, so each finds the one that steps its DDP's parameters and times its
  ``step`` (an optimizer built before a recorder attached is found in the registry).
- ``torch.autograd.backward``: the moment backward is called (the first backward segment starts
  there) and the loss it starts from. Tensor.backward calls it too.
- ``torch.distributed.destroy_process_group``: recorders finish (and measure their closing clock
  offset over the store) while the process group still exists.
- ``DistributedDataParallel.__init__``: only when auto-attach is on (``python -m
  lockstep.record``), every DDP the script creates is attached as it is built.

With no recorder attached every wrapper is a pass-through of the original.
"""
import functools
import weakref

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

_installed = False
_orig = {}
optimizers = weakref.WeakSet()  # every optimizer built since lockstep was imported
recorders = []                  # attached recorders that are still open (see _recorder.py)
auto_attach = None              # callable(ddp) while `python -m lockstep.record` runs a script


def _default_allreduce(slot, bucket, raw=False):
    """DDP's built-in all-reduce, reproduced bit for bit so that attaching changes no result.

    Without a hook, DDP's reducer scales each gradient by 1/world as it copies it into the
    bucket (a multiplication by the rounded reciprocal), or, when the gradient already *is* a
    view of the bucket (gradient_as_bucket_view, after the first step), divides it in place.
    Multiplying by 1/3 and dividing by 3 can differ in the last bit, so the hook does what DDP
    would have done for each parameter. DDP makes every gradient a view of its bucket when it
    copies it in, and it stays one while it is zeroed in place or accumulated into (no_sync,
    or DDP's rebuild re-pointing it); it stops being one when it is set to None, because
    autograd then stores a fresh tensor. So a gradient is a view at the synchronized backward
    exactly when ``p.grad`` was not None when the first backward since the last synchronized
    one started (CommSlot.note_backward_start). For a world size that is a power of two both
    are exact, and with gradient_as_bucket_view=False DDP always multiplies.
    """
    buf = bucket.buffer()
    world = slot.world
    if slot.exact_scaling or not slot.ddp.gradient_as_bucket_view:
        buf.mul_(1.0 / world)
    else:
        none = slot.grad_was_none
        params = bucket.parameters()
        flags = [none.get(id(p), True) for p in params]
        if all(flags):
            buf.mul_(1.0 / world)
        elif not any(flags):
            buf.div_(world)
        else:
            offset = 0
            for p, was_none in zip(params, flags):
                view = buf[offset:offset + p.numel()]
                view.mul_(1.0 / world) if was_none else view.div_(world)
                offset += p.numel()
    fut = dist.all_reduce(buf, group=slot.ddp.process_group, async_op=True).get_future()
    # raw: the caller chains its own callback, which takes the first tensor (_first_tensor) — one
    # Python callback per bucket on gloo's thread instead of two (the recorder's completion stamp).
    return fut if raw else fut.then(_first_tensor)


def _first_tensor(fut):
    value = fut.value()
    return value[0] if isinstance(value, list) else value


class CommSlot:
    """The one communication hook lockstep registers with a DDP: the user's hook (or DDP's
    default all-reduce) inside, the recorder (when attached) around it."""

    def __init__(self, ddp):
        self.ddp = weakref.proxy(ddp)
        self.world = dist.get_world_size(ddp.process_group)
        self.exact_scaling = self.world & (self.world - 1) == 0
        self.user_state = None
        self.user_hook = None
        self.recorder = None
        self.grad_was_none = {}
        self._params = None
        self._snapshot_due = True  # the next backward is the first since a synchronized one

    @property
    def hook_name(self):
        return getattr(self.user_hook, "__qualname__", None) or getattr(self.user_hook, "__name__", "hook")

    def run_inner(self, bucket, raw=False):
        """The user's hook, or DDP's all-reduce (raw: its future before taking the first tensor;
        the caller's callback must return _first_tensor of it)."""
        if self.user_hook is not None:
            return self.user_hook(self.user_state, bucket)
        return _default_allreduce(self, bucket, raw)

    def note_backward_start(self):
        # Only the default hook's exact scaling needs it, and only in the one case where
        # multiplying and dividing can differ (see _default_allreduce).
        if not self._snapshot_due:
            return
        self._snapshot_due = False
        if self.user_hook is None and not self.exact_scaling and self.ddp.gradient_as_bucket_view:
            if self._params is None:
                self._params = [p for p in self.ddp.parameters() if p.requires_grad]
            self.grad_was_none = {id(p): p.grad is None for p in self._params}

    def note_synchronized(self):
        self._snapshot_due = True


def _slot_hook(state, bucket):
    # DDP inspects the hook's signature: the second parameter must be named `bucket`.
    state.note_synchronized()
    rec = state.recorder
    if rec is None:
        return state.run_inner(bucket)
    return rec._on_bucket(state, bucket)


def comm_slot(ddp, create=True):
    """The CommSlot of a DDP, registering it with DDP on first use (create=True)."""
    slot = ddp.__dict__.get("_lockstep_comm_slot")
    if slot is None and create:
        slot = CommSlot(ddp)
        _orig["register_comm_hook"](ddp, slot, _slot_hook)
        # DDP's logging data names no hook until the user registers one, as without lockstep.
        ddp.logger._set_comm_hook_name("")
        ddp.__dict__["_lockstep_comm_slot"] = slot
        _slots.add(slot)
    return slot


_slots = weakref.WeakSet()


def foreign_hook_name(ddp):
    """The name of a hook registered with this DDP before lockstep was imported, or None."""
    if ddp.__dict__.get("_lockstep_comm_slot") is not None:
        return None
    name = ddp._get_ddp_logging_data().get("comm_hook")
    return name or None


def _register_comm_hook(self, state, hook):
    slot = self.__dict__.get("_lockstep_comm_slot")
    if slot is not None and slot.user_hook is not None:
        # What DDP says when a second hook is registered.
        raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be called once.")
    self._check_comm_hook(hook)
    slot = comm_slot(self)
    slot.user_state, slot.user_hook = state, hook
    # DDP's logging data names the user's hook, as it would without lockstep.
    self.logger._set_comm_hook_name(slot.hook_name)


def _register_builtin_comm_hook(self, comm_hook_type):
    # The C++ built-ins cannot run inside a Python hook; their Python twins compute the same.
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    twins = {
        dist.BuiltinCommHookType.ALLREDUCE: default_hooks.allreduce_hook,
        dist.BuiltinCommHookType.FP16_COMPRESS: default_hooks.fp16_compress_hook,
    }
    if comm_hook_type not in twins:
        return _orig["register_builtin_comm_hook"](self, comm_hook_type)
    _register_comm_hook(self, self.process_group, twins[comm_hook_type])


def _optimizer_init(self, *args, **kwargs):
    _orig["optimizer_init"](self, *args, **kwargs)
    optimizers.add(self)
    for rec in list(recorders):
        rec._offer_optimizer(self)


def _backward(*args, **kwargs):
    if recorders or _slots:
        tensors = args[0] if args else kwargs.get("tensors")
        for slot in list(_slots):
            slot.note_backward_start()
        for rec in list(recorders):
            rec._on_backward_call(tensors)
    return _orig["backward"](*args, **kwargs)


def _destroy_process_group(group=None):
    for rec in list(recorders):
        if group is None or rec._uses_group(group):
            rec.close()
    return _orig["destroy_process_group"](group)


def _ddp_init(self, *args, **kwargs):
    _orig["ddp_init"](self, *args, **kwargs)
    if auto_attach is not None:
        auto_attach(self)


def install():
    """Installs the wrappers once (lockstep's import does it)."""
    global _installed
    if _installed:
        return
    _installed = True
    _orig["register_comm_hook"] = DDP.register_comm_hook
    _orig["register_builtin_comm_hook"] = DDP._register_builtin_comm_hook
    _orig["optimizer_init"] = torch.optim.Optimizer.__init__
    _orig["backward"] = torch.autograd.backward
    _orig["destroy_process_group"] = dist.destroy_process_group
    _orig["ddp_init"] = DDP.__init__
    functools.update_wrapper(_register_comm_hook, DDP.register_comm_hook)
    functools.update_wrapper(_register_builtin_comm_hook, DDP._register_builtin_comm_hook)
    functools.update_wrapper(_optimizer_init, torch.optim.Optimizer.__init__)
    functools.update_wrapper(_backward, torch.autograd.backward)
    functools.update_wrapper(_destroy_process_group, dist.destroy_process_group)
    functools.update_wrapper(_ddp_init, DDP.__init__)
    DDP.register_comm_hook = _register_comm_hook
    DDP._register_builtin_comm_hook = _register_builtin_comm_hook
    torch.optim.Optimizer.__init__ = _optimizer_init
    torch.autograd.backward = _backward
    dist.destroy_process_group = _destroy_process_group
    DDP.__init__ = _ddp_init
