// Process management for launchers: starting a worker with its stdout and stderr on pipes, in a
// process group of its own, tied to the launcher's life; signalling and reaping it; splitting
// its output into lines. POSIX only, no threads.
#pragma once

#include "lockstep/core/result.h"

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace lockstep::job {

struct ChildProcess {
    pid_t pid = -1;
    int outFd = -1; // its stdout (non-blocking read end)
    int errFd = -1; // its stderr (non-blocking read end)
};

// Starts argv[0] (a path; no PATH search) with exactly `env` ("KEY=VALUE" each), stdin from
// /dev/null, stdout and stderr on pipes. The child leads a new process group (a terminal's
// Ctrl-C reaches the launcher only, which stops its workers in order) and gets SIGKILL when the
// launcher dies (PR_SET_PDEATHSIG), so no worker outlives a launcher killed with SIGKILL.
// A failed exec is reported here, not as an exit status.
//
// `place` puts the child on an emulated host (netns.h) before the exec: it enters the network
// namespace `netnsFd` (setns) and, with a `hostname`, a UTS namespace of its own named so (so
// gethostname() tells hosts apart). A failure to do so is reported like a failed exec.
struct SpawnPlace {
    int netnsFd = -1;     // -1: this process's network namespace
    std::string hostname; // "": this process's UTS namespace and name
};
core::Result<ChildProcess> spawnChild(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                      const SpawnPlace& place = {});

// Sends `sig` to the child's process group (itself and anything it started).
void signalChild(pid_t pid, int sig);

// The exit code of a wait status: the exit status, or 128 + signal (the shell's convention).
int exitCodeOf(int waitStatus);
// "exited with status 3", "was killed by SIGKILL".
std::string describeWaitStatus(int waitStatus);
std::string signalName(int sig);

// This process's environment without the variables named in `drop` (names, without '=').
std::vector<std::string> environmentWithout(const std::vector<std::string_view>& drop);

// The path of the running executable (/proc/self/exe), and of an executable beside it.
core::Result<std::string> selfExecutable();
core::Result<std::string> siblingExecutable(std::string_view name);

// Splits a byte stream into lines ('\n', a trailing '\r' dropped). A line longer than kMaxLine
// is cut there: a child writing megabytes without a newline must not grow the launcher.
class LineSplitter {
public:
    static constexpr size_t kMaxLine = size_t(1) << 20;
    // Appends bytes and returns the complete lines they finished.
    std::vector<std::string> feed(std::string_view bytes);
    // At end of stream: the last, unterminated line (if any).
    std::vector<std::string> finish();

private:
    std::string m_buf;
};

} // namespace lockstep::job
