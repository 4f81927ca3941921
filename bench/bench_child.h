// What the benchmarks that time a piece of work in a forked child share: the child's peak
// resident memory (VmHWM) is then that work's alone.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>

namespace lockstep::bench {

// This process's peak resident memory so far (VmHWM of /proc/self/status), in KiB; -1 when it
// cannot be read.
inline int64_t peakRssKb()
{
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmHWM:", 0) == 0)
            return std::atoll(line.c_str() + 6);
    return -1;
}

struct ChildResult {
    std::string line; // what the work returned ("" when the child died before saying anything)
    int status = 0;   // waitpid's status
};

// Runs `work` in a forked child: it returns {its result line, the child's exit code}; the line
// comes back through a pipe.
template <class Work>
ChildResult runInChild(Work&& work)
{
    int fds[2];
    if (pipe(fds) != 0)
        return {"error: pipe failed", -1};
    const pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return {"error: fork failed", -1};
    }
    if (pid == 0) {
        close(fds[0]);
        const std::pair<std::string, int> result = work();
        if (write(fds[1], result.first.data(), result.first.size()) < 0)
            _exit(3);
        _exit(result.second);
    }
    close(fds[1]);
    ChildResult r;
    char buf[512];
    ssize_t n = 0;
    while ((n = read(fds[0], buf, sizeof buf)) > 0)
        r.line.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    waitpid(pid, &r.status, 0);
    return r;
}

} // namespace lockstep::bench
