// The calling thread's scheduler statistics (thread_sched.h).
#include "lockstep/core/thread_sched.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

namespace lockstep::core {

// CPU time from CLOCK_THREAD_CPUTIME_ID, not from schedstat's first field: the kernel brings the
// running thread's runtime up to date for the clock, while schedstat prints it as of the last tick
// or context switch (up to a tick stale). The run-queue wait is schedstat's second field, which is
// exact for the running thread: its last wait ended when it got the CPU it is running on.
#ifdef __linux__
namespace {
// The calling thread's /proc/thread-self/schedstat, opened once per thread and read with pread
// from offset 0 (procfs regenerates the text on each read): the path lookup of an open() was most
// of a read's cost (9.6 µs per call with open/read/close, measured; see thread_sched.h). The
// descriptor names the thread that opened it, so it is kept per thread and closed at its exit.
struct SchedStatFile {
    int fd = -1;
    ~SchedStatFile()
    {
        if (fd >= 0)
            ::close(fd);
    }
    ssize_t read(char* buf, size_t size)
    {
        for (int attempt = 0; attempt < 2; ++attempt) {
            if (fd < 0)
                fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                return -1;
            ssize_t n;
            do
                n = ::pread(fd, buf, size, 0);
            while (n < 0 && errno == EINTR);
            if (n > 0)
                return n;
            ::close(fd); // a descriptor gone bad (closed behind our back): open afresh once
            fd = -1;
        }
        return -1;
    }
};
thread_local SchedStatFile t_schedStat;
} // namespace
#endif

ThreadSchedStat readThreadSchedStat()
{
    ThreadSchedStat out;
#ifdef __linux__
    timespec ts{};
    if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return out;
    const int64_t cpu = int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
    // "<ns on cpu> <ns waiting on a runqueue> <timeslices>\n", read whole in one read.
    char buf[96];
    const ssize_t n = t_schedStat.read(buf, sizeof buf);
    if (n <= 0)
        return out;
    const char* end = buf + n;
    int64_t stale = 0, runq = 0;
    auto r = std::from_chars(buf, end, stale);
    if (r.ec != std::errc{} || r.ptr == end || *r.ptr != ' ')
        return out;
    r = std::from_chars(r.ptr + 1, end, runq);
    if (r.ec != std::errc{} || runq < 0)
        return out;
    out.cpuNs = cpu;
    out.runqNs = runq;
#endif
    return out;
}

ThreadSchedStat schedStatDelta(const ThreadSchedStat& start, const ThreadSchedStat& end)
{
    const auto delta = [](int64_t a, int64_t b) { return a >= 0 && b >= a ? b - a : int64_t{-1}; };
    return {delta(start.cpuNs, end.cpuNs), delta(start.runqNs, end.runqNs)};
}

} // namespace lockstep::core
