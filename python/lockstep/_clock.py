"""Clock offset of this rank to rank 0, over the job's own c10d store (docs/design.md "Time and clocks").

The same ping-pong as the runtime's worker: rank r stamps t0 and posts a ping; rank 0, serving
the ranks one after another, answers each ping with its own clock T; rank r stamps t1 when the
answer arrives. If both legs take equal time, T was read at r's (t0 + t1) / 2, so
offset = T - (t0 + t1) / 2, wrong by at most half the round trip: that half is stored as the
offset's uncertainty. Of SAMPLES exchanges the one with the smallest round trip is kept (core's
bestClockExchange, clock_sync.h): it is the one least disturbed by scheduling and by the store's
own queueing. Each rank finally posts an acknowledgement that rank 0 waits for, so the rank that
may host the store never leaves while another still reads its answer.

The offset only matters across hosts: ranks with rank 0's kernel boot id (stored beside it) read
rank 0's clock, and the reader applies no offset to them whatever was measured here (a store
round trip from Python is ~10 ms on a busy host; its "offsets" between processes of one host
were 0.4-4.7 ms of pure error).

A store that does not answer within the timeout (a peer died) gives up without an offset:
clocks are then left uncorrected for this rank and the caller records why.
"""
import contextlib
from datetime import timedelta

from . import _core

# Many exchanges, the best kept: the chance that none is quick falls geometrically with their
# number; 16 store round trips cost ~0.2 s at start on a busy host, once.
SAMPLES = 16


class ClockSample:
    def __init__(self, offset_ns=0, rtt_ns=0, at_ns=0, uncertainty_ns=0):
        self.offset_ns = offset_ns            # rank 0's clock - this rank's clock
        self.rtt_ns = rtt_ns                  # round trip of the kept sample
        self.at_ns = at_ns                    # local time of the kept sample
        self.uncertainty_ns = uncertainty_ns  # |error of offset_ns| <= this: half the round trip


def boot_id():
    """This machine's kernel boot id ("" when unreadable): ranks that share rank 0's share its clock."""
    return _core.boot_id()


@contextlib.contextmanager
def store_timeout(store, timeout_s):
    """The store's timeout set to timeout_s inside the block, restored after it."""
    old_timeout = store.timeout
    store.set_timeout(timedelta(seconds=timeout_s))
    try:
        yield store
    finally:
        store.set_timeout(old_timeout)


def measure(store, rank, world, prefix, timeout_s):
    """Runs one ping-pong round on every rank of the group (rank 0 serves). Returns a
    ClockSample; raises on a store error or timeout (after restoring the store's timeout)."""
    if world <= 1:
        return ClockSample(0, 0, _core.now_ns())
    with store_timeout(store, timeout_s):
        if rank == 0:
            for r in range(1, world):
                for i in range(SAMPLES):
                    key = f"{prefix}/{r}/{i}"
                    store.get(key + "/ping")
                    store.set(key + "/pong", str(_core.now_ns()))
            for r in range(1, world):
                store.get(f"{prefix}/{r}/ack")
            return ClockSample(0, 0, _core.now_ns())
        exchanges = []
        for i in range(SAMPLES):
            key = f"{prefix}/{rank}/{i}"
            t0 = _core.now_ns()
            store.set(key + "/ping", str(t0))
            remote = int(store.get(key + "/pong"))
            t1 = _core.now_ns()
            exchanges.append((t0, remote, t1))
        store.set(f"{prefix}/{rank}/ack", "1")
        best = _core.best_clock_exchange(exchanges)
        if best is None:
            raise RuntimeError("every clock exchange ended before it began (the clock stepped backwards)")
        return ClockSample(best["offset_ns"], best["rtt_ns"], best["at_ns"], best["uncertainty_ns"])
