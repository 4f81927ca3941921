// The calling thread's scheduler statistics: how long it has run on a CPU and how long it has
// waited, runnable, for one (Linux: /proc/thread-self/schedstat, the kernel's per-task
// sched_info, in ns since the thread started). Recorders read it at a step's start and end on the
// training thread and store the differences as Step::cpuNs and Step::runqNs: a rank whose step
// took longer because the machine gave it less CPU (a long run-queue wait, a slower core) is told
// apart from one that had more work. Qt-free, LibTorch-free; about 2 µs per call on this machine (a
// clock read and a pread of the small /proc file, which each thread opens once and keeps; with an
// open/read/close per call it was 9.6 µs).
#pragma once

#include <cstdint>

namespace lockstep::core {

struct ThreadSchedStat {
    int64_t cpuNs = -1;  // time on a CPU; -1 = unavailable (not Linux, no schedstat, /proc absent)
    int64_t runqNs = -1; // time runnable but waiting for a CPU; -1 = unavailable
};

ThreadSchedStat readThreadSchedStat();

// end - start per field, -1 where either is unavailable (or the counter went backwards).
ThreadSchedStat schedStatDelta(const ThreadSchedStat& start, const ThreadSchedStat& end);

} // namespace lockstep::core
