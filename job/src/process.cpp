// Process management (see process.h).
#include "lockstep/job/process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

extern char** environ;

namespace lockstep::job {

core::Result<ChildProcess> spawnChild(const std::vector<std::string>& argvStr, const std::vector<std::string>& envStr,
                                      const SpawnPlace& place)
{
    if (argvStr.empty())
        return core::fail("no command to start");
    // Everything the child needs is built before fork(): between fork and exec only
    // async-signal-safe calls are allowed.
    std::vector<char*> argv;
    for (const auto& a : argvStr)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (const auto& e : envStr)
        envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);

    int outPipe[2], errPipe[2], execPipe[2];
    if (pipe2(outPipe, O_CLOEXEC) != 0)
        return core::fail(std::string("pipe: ") + std::strerror(errno));
    if (pipe2(errPipe, O_CLOEXEC) != 0) {
        close(outPipe[0]), close(outPipe[1]);
        return core::fail(std::string("pipe: ") + std::strerror(errno));
    }
    // Reports a failed exec back to the parent; closed by a successful exec (O_CLOEXEC).
    if (pipe2(execPipe, O_CLOEXEC) != 0) {
        close(outPipe[0]), close(outPipe[1]), close(errPipe[0]), close(errPipe[1]);
        return core::fail(std::string("pipe: ") + std::strerror(errno));
    }
    const int devNull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
        const int err = errno;
        for (int fd : {outPipe[0], outPipe[1], errPipe[0], errPipe[1], execPipe[0], execPipe[1], devNull})
            if (fd >= 0)
                close(fd);
        return core::fail(std::string("fork: ") + std::strerror(err));
    }
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGXFSZ})
            signal(sig, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        if (devNull >= 0)
            dup2(devNull, STDIN_FILENO);
        dup2(outPipe[1], STDOUT_FILENO);
        dup2(errPipe[1], STDERR_FILENO);
        // {stage, errno}: 0 exec, 1 entering the network namespace, 2 the host name.
        int failure[2] = {0, 0};
        if (place.netnsFd >= 0 && setns(place.netnsFd, CLONE_NEWNET) != 0)
            failure[0] = 1, failure[1] = errno;
        else if (!place.hostname.empty()
                 && (unshare(CLONE_NEWUTS) != 0 || sethostname(place.hostname.data(), place.hostname.size()) != 0))
            failure[0] = 2, failure[1] = errno;
        else {
            execve(argv[0], argv.data(), envp.data());
            failure[1] = errno;
        }
        [[maybe_unused]] ssize_t ignored = write(execPipe[1], failure, sizeof failure);
        _exit(127);
    }
    setpgid(pid, pid); // also from the parent: no race with an early kill(-pid)
    close(outPipe[1]);
    close(errPipe[1]);
    close(execPipe[1]);
    if (devNull >= 0)
        close(devNull);
    int childErr[2] = {0, 0};
    ssize_t n;
    do {
        n = read(execPipe[0], childErr, sizeof childErr);
    } while (n < 0 && errno == EINTR);
    close(execPipe[0]);
    if (n == sizeof childErr) {
        int status = 0;
        waitpid(pid, &status, 0);
        close(outPipe[0]);
        close(errPipe[0]);
        const char* what = childErr[0] == 1 ? " in its host's network namespace" : childErr[0] == 2 ? " with its host name" : "";
        return core::fail("cannot start " + argvStr[0] + what + ": " + std::strerror(childErr[1]));
    }
    ChildProcess child{pid, outPipe[0], errPipe[0]};
    fcntl(child.outFd, F_SETFL, O_NONBLOCK);
    fcntl(child.errFd, F_SETFL, O_NONBLOCK);
    return child;
}

void signalChild(pid_t pid, int sig)
{
    if (pid <= 0)
        return;
    kill(-pid, sig); // its process group: the worker and anything it started
    kill(pid, sig);  // and itself, should it have left the group
}

int exitCodeOf(int waitStatus)
{
    if (WIFEXITED(waitStatus))
        return WEXITSTATUS(waitStatus);
    if (WIFSIGNALED(waitStatus))
        return 128 + WTERMSIG(waitStatus);
    return -1;
}

std::string signalName(int sig)
{
    const char* abbrev = sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string describeWaitStatus(int waitStatus)
{
    if (WIFEXITED(waitStatus))
        return "exited with status " + std::to_string(WEXITSTATUS(waitStatus));
    if (WIFSIGNALED(waitStatus))
        return "was killed by " + signalName(WTERMSIG(waitStatus));
    return "ended (wait status " + std::to_string(waitStatus) + ")";
}

std::vector<std::string> environmentWithout(const std::vector<std::string_view>& drop)
{
    std::vector<std::string> out;
    for (char** e = environ; e && *e; ++e) {
        const std::string_view kv(*e);
        const std::string_view key = kv.substr(0, kv.find('='));
        if (std::find(drop.begin(), drop.end(), key) == drop.end())
            out.emplace_back(kv);
    }
    return out;
}

core::Result<std::string> selfExecutable()
{
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return core::fail(core::ErrorCode::NotStarted, std::string("cannot find this executable (/proc/self/exe): ") + std::strerror(errno));
    return std::string(buf, size_t(n));
}

core::Result<std::string> siblingExecutable(std::string_view name)
{
    auto self = selfExecutable();
    if (!self)
        return self;
    const std::string path = (std::filesystem::path(*self).parent_path() / name).string();
    if (access(path.c_str(), X_OK) != 0)
        return core::fail(core::ErrorCode::NotStarted, std::string(name) + " is not next to " + *self + " (" + std::strerror(errno) + ")");
    return path;
}

std::vector<std::string> LineSplitter::feed(std::string_view bytes)
{
    std::vector<std::string> lines;
    m_buf.append(bytes);
    size_t start = 0, nl;
    while ((nl = m_buf.find('\n', start)) != std::string::npos) {
        std::string line = m_buf.substr(start, nl - start);
        if (!line.empty() && line.back() == '\r')
            line.pop_back();
        lines.push_back(std::move(line));
        start = nl + 1;
    }
    m_buf.erase(0, start);
    while (m_buf.size() > kMaxLine) {
        lines.push_back(m_buf.substr(0, kMaxLine));
        m_buf.erase(0, kMaxLine);
    }
    return lines;
}

std::vector<std::string> LineSplitter::finish()
{
    std::vector<std::string> lines;
    if (!m_buf.empty()) {
        if (m_buf.back() == '\r')
            m_buf.pop_back();
        lines.push_back(std::move(m_buf));
        m_buf.clear();
    }
    return lines;
}

} // namespace lockstep::job
