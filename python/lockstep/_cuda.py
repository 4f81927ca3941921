"""GPU time for a DDP job on CUDA: events on the compute and communication streams, resolved to
host CLOCK_REALTIME without ever synchronizing a training stream.

On a GPU the host hooks only see when work was *queued*; what the overlap analysis needs is
when it ran. So the recorder also records CUDA events:
 - compute stream (the stream the DDP forward runs on, where autograd also runs backward):
   each top-level module's forward, backward from its call to the engine's end, the optimizer;
 - communication: a bucket's gradients are ready on the device when the compute stream reaches
   the point where DDP called the hook (event recorded there); its collective is done when the
   stream that the future's then() callback runs on (made to wait for the collective by
   PyTorch) reaches our event. NCCL runs a rank's collectives one after another on its own
   stream, so a bucket's collective starts at max(its ready time, the previous one's end).

Resolving to host time. A CUDA event has no wall-clock time, only elapsed_time() to another
event, in float milliseconds (so intervals must stay short to keep sub-microsecond precision).
When a step opens, an *anchor* event is recorded on a private stream that has no work, so the
GPU completes it at once; polling query() brackets that moment between the last host time it
was still pending and the first time it was done, and the midpoint is the anchor's host time
(error: half the bracket, microseconds). Every event of the step is recorded after the anchor
completed, so elapsed_time(anchor, event) >= 0 and stays within the step. Nothing waits on a
training stream: a step's events are resolved at a later step close, once query() says they
all completed, and only then is the step written (whole). The loss is copied to pinned host
memory without blocking and read at the same time.

This path needs a CUDA build of PyTorch and a GPU; it is not exercised by the CPU test suite.
"""
from collections import deque

import torch

from . import _core
from ._core import DeviceWhat

_ANCHOR_POLL_LIMIT = 1_000_000  # query() calls before giving up on an anchor (a wedged GPU)
_LOSS_SLOTS = 1024              # pinned loss slots, reused round robin (steps resolve long before)


class _Step:
    __slots__ = ("anchor_ev", "anchor_ns", "spans", "comms", "events", "losses", "pending")

    def __init__(self, anchor_ev, anchor_ns):
        self.anchor_ev, self.anchor_ns = anchor_ev, anchor_ns
        self.spans = []   # (what, index, start_ev, end_ev, nbytes, label) of compute
        self.comms = []   # [bucket, nbytes, label, ready_ev, done_ev] in launch order
        self.events = []  # every event of the step, for the completion check and for reuse
        self.losses = []  # pinned slot indices
        self.pending = None


class DeviceTimer:
    def __init__(self, device, core, report):
        self._device = torch.device("cuda", device)
        self._core = core
        self._report = report
        self._anchor_stream = torch.cuda.Stream(device=self._device)
        self._free = []
        self._queue = deque()
        self._step = None
        self._compute_stream = None
        self._stage_depth = 0
        self._stage_start = None
        self._backward_start = None
        self._opt = None
        self._loss_buf = torch.zeros(_LOSS_SLOTS, dtype=torch.float64, pin_memory=True)
        self._loss_next = 0

    def _event(self, stream=None):
        ev = self._free.pop() if self._free else torch.cuda.Event(enable_timing=True)
        ev.record(stream if stream is not None else torch.cuda.current_stream(self._device))
        if self._step is not None:
            self._step.events.append(ev)
        return ev

    def step_opened(self):
        ev = self._free.pop() if self._free else torch.cuda.Event(enable_timing=True)
        before = _core.now_ns()
        ev.record(self._anchor_stream)
        polls = 0
        while not ev.query():
            before = _core.now_ns()
            polls += 1
            if polls > _ANCHOR_POLL_LIMIT:
                ev.synchronize()
                break
        after = _core.now_ns()
        self._step = _Step(ev, (before + after) // 2)

    def forward_begin(self):
        self._compute_stream = torch.cuda.current_stream(self._device)
        self._stage_depth = 0

    def stage_begin(self, stage):
        if self._step is None:
            return
        self._stage_depth += 1
        if self._stage_depth == 1:
            self._stage_start = (stage, self._event())

    def stage_end(self, stage):
        if self._step is None or self._stage_depth == 0:
            return
        self._stage_depth -= 1
        if self._stage_depth == 0 and self._stage_start is not None:
            k, start = self._stage_start
            self._step.spans.append((DeviceWhat.Forward, k, start, self._event(), 0, -1))
            self._stage_start = None

    def backward_begin(self, loss):
        if self._step is None:
            return
        self._backward_start = self._event(self._compute_stream)
        if loss is not None:
            slot = self._loss_next % _LOSS_SLOTS
            self._loss_next += 1
            self._loss_buf[slot].copy_(loss.detach().reshape(()).to(torch.float64), non_blocking=True)
            self._step.losses.append(slot)

    def backward_end(self):
        if self._step is None or self._backward_start is None:
            return
        self._step.spans.append((DeviceWhat.Backward, 0, self._backward_start, self._event(self._compute_stream), 0, -1))
        self._backward_start = None

    def bucket_ready(self, bucket, nbytes, label):
        if self._step is None:
            return None
        token = [bucket, nbytes, label, self._event(), None]
        self._step.comms.append(token)
        return token

    def bucket_done(self, token):
        if token is not None and self._step is not None:
            token[4] = self._event()

    def optimizer_begin(self, label):
        if self._step is not None:
            self._opt = (label, self._event())

    def optimizer_end(self):
        if self._step is not None and self._opt is not None:
            label, start = self._opt
            self._step.spans.append((DeviceWhat.Optimizer, 0, start, self._event(), 0, label))
            self._opt = None

    def close_step(self, pending):
        step, self._step = self._step, None
        if step is None:
            self._core.submit(pending)
            return
        step.pending = pending
        self._queue.append(step)
        while self._queue and all(ev.query() for ev in self._queue[0].events):
            self._resolve(self._queue.popleft())

    def drain(self):
        """At the end of recording: wait for the device and write every step still pending."""
        while self._queue:
            step = self._queue.popleft()
            for ev in step.events:
                ev.synchronize()
            self._resolve(step)

    def _resolve(self, step):
        def host(ev):
            return step.anchor_ns + int(step.anchor_ev.elapsed_time(ev) * 1e6)

        pending = step.pending
        for what, index, start_ev, end_ev, nbytes, label in step.spans:
            pending.add_device_span(what, index, host(start_ev), host(end_ev), nbytes, label)
        comm_end = None
        for bucket, nbytes, label, ready_ev, done_ev in step.comms:
            if done_ev is None:
                continue
            # One communication stream: a collective starts when its bucket is ready and the
            # previous collective is done.
            start = host(ready_ev) if comm_end is None else max(host(ready_ev), comm_end)
            comm_end = max(start, host(done_ev))
            pending.add_device_span(DeviceWhat.Comm, bucket, start, comm_end, nbytes, label)
        losses = [float(self._loss_buf[s]) for s in step.losses]
        pending.loss = sum(losses) / len(losses) if losses else float("nan")
        start, end, index, loss = pending.start_ns, pending.end_ns, pending.step, pending.loss
        self._core.submit(pending)
        self._report(index, loss, start, end)
        self._free.extend(step.events)
        self._free.append(step.anchor_ev)
