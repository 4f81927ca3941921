// The launcher: N local workers, one watchdog loop, one merged run file.
//
// How a job is watched (why it looks like this):
//  - Every worker gets its own stdout and stderr pipe. stdout carries the protocol
//    (`LOCKSTEP step=...`, `LOCKSTEP done`, `LOCKSTEP failed ... cause=...`); stderr is the
//    worker's free text (LibTorch and gloo messages), written to rank-<r>.log beside the shards
//    and kept as a short tail so that a rank that dies without a word still gets a cause.
//  - One poll() loop reads all pipes with a short timeout and reaps exited workers with
//    waitpid(WNOHANG), so no thread is needed and a signal (Ctrl-C) interrupts it at once.
//  - The first failure (a `failed` line, a non-zero exit, death by a signal, or no progress
//    from any rank for --hang-timeout-s) starts the stop sequence: the other ranks get a grace
//    period to notice and exit on their own (they usually do within milliseconds, when gloo
//    sees the dead peer's sockets close), then SIGTERM, then SIGKILL. So every rank is gone a
//    few seconds after the first failure, however the collectives behave.
//  - When one rank fails, the others fail too, a moment later, with messages about their dead
//    peer. The run's cause must name the rank that started it, so failures seen within a short
//    settle window are ranked: a cause that reads like a peer's consequence (connection reset,
//    closed by peer, timeout) is kept only if nothing better arrives.
//  - Workers run in their own process groups (a terminal's Ctrl-C reaches only the launcher,
//    which then stops them in order and still merges what completed) and get PR_SET_PDEATHSIG,
//    so they die with the launcher even if it is killed with SIGKILL.
//  - The merge goes to a temporary file next to --out and is renamed over it at the end, so a
//    reader never sees a half-merged run file.
#include "launcher.h"

#include "lockstep/core/types.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

extern char** environ;

namespace lockstep::app {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_signalCount = 0;

void onSignal(int sig)
{
    g_signal = sig;
    g_signalCount = g_signalCount + 1;
}

// Installs the launcher's handlers for the lifetime of one launchRun and restores the old ones.
class SignalGuard {
public:
    SignalGuard()
    {
        g_signal = 0;
        g_signalCount = 0;
        struct sigaction sa {};
        sa.sa_handler = onSignal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = 0; // no SA_RESTART: poll() must return EINTR at once
        for (size_t i = 0; i < std::size(kSignals); ++i)
            sigaction(kSignals[i], &sa, &m_old[i]);
    }
    ~SignalGuard()
    {
        for (size_t i = 0; i < std::size(kSignals); ++i)
            sigaction(kSignals[i], &m_old[i], nullptr);
    }

private:
    static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction m_old[3] {};
};

double secondsSince(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

core::TimeNs realtimeNs()
{
    timespec ts {};
    clock_gettime(CLOCK_REALTIME, &ts);
    return core::TimeNs(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string signalName(int sig)
{
    const char* abbrev = sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Failures that are most likely the consequence of another rank's death (gloo's and c10d's
// wording for a peer that went away or never answered).
bool looksLikePeerFailure(const std::string& cause)
{
    static constexpr const char* kPeerWords[] = {
        "closed by peer", "Connection reset", "connection reset", "Broken pipe", "broken pipe",
        "Connection refused", "Timed out", "timed out", "Timeout", "timeout", "peer",
        "ECONNRESET", "EPIPE", "Connection closed", "interrupted by the launcher",
    };
    for (const char* word : kPeerWords)
        if (cause.find(word) != std::string::npos)
            return true;
    return false;
}

struct Worker {
    int rank = 0;
    pid_t pid = -1;
    int outFd = -1;
    int errFd = -1;
    std::string outBuf;
    std::string errBuf;
    std::deque<std::string> errTail; // the last lines of stderr, for a cause when none is given
    std::ofstream log;
    bool exited = false;
    int rawStatus = 0;
    int exitCode = 0;       // exit status or 128 + signal
    bool killedByUs = false;
    bool done = false;
    int lastStep = -1;      // last completed step reported
    std::string failedCause; // from the worker's own `failed` line
};

struct FailureEvent {
    int rank = -1;       // -1: not a rank (hang, interrupt)
    std::string cause;
    bool peerLike = false;
    Clock::time_point at {};
};

struct StepAgg {
    int ranks = 0;
    double lossSum = 0;
    double maxStepMs = 0;
};

class Job {
public:
    explicit Job(const LaunchOptions& o) : m_opt(o) {}

    core::Result<LaunchResult> run();

private:
    core::Status prepare();
    core::Status spawnAll();
    core::Result<pid_t> spawnOne(Worker& w, const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env);
    void loop();
    void readFd(Worker& w, bool isOut);
    void handleLine(Worker& w, const std::string& line, bool isOut);
    void reap();
    void noteFailure(FailureEvent ev);
    void killAll(int sig);
    void showProgress(int step, const StepAgg& agg);
    void finishProgress();
    const FailureEvent* primaryFailure() const;
    std::string primaryCause() const;
    core::Status mergeAndMark(LaunchResult& result);
    bool anyAlive() const
    {
        return std::any_of(m_workers.begin(), m_workers.end(), [](const Worker& w) { return !w.exited; });
    }
    bool anyPipeOpen() const
    {
        return std::any_of(m_workers.begin(), m_workers.end(),
                           [](const Worker& w) { return w.outFd >= 0 || w.errFd >= 0; });
    }

    const LaunchOptions& m_opt;
    std::string m_exe;
    fs::path m_out;
    fs::path m_shardDir;
    std::string m_runName;
    int m_port = 0;
    std::vector<Worker> m_workers;
    Clock::time_point m_start;
    Clock::time_point m_lastProgress;
    bool m_failed = false;
    Clock::time_point m_failedAt;
    std::vector<FailureEvent> m_failures; // in the order seen
    bool m_interrupted = false;
    bool m_termSent = false;
    Clock::time_point m_termAt;
    bool m_killSent = false;
    std::map<int, StepAgg> m_steps;
    int m_shownStep = -1;
    bool m_barOnScreen = false;
    ProgressStyle m_style = ProgressStyle::Plain;
};

core::Status Job::prepare()
{
    if (m_opt.nproc < 1)
        return core::fail("--nproc must be at least 1 (got " + std::to_string(m_opt.nproc) + ")");
    if (m_opt.nproc > 512)
        return core::fail("--nproc " + std::to_string(m_opt.nproc) + " is more local workers than this launcher supports (512)");
    if (m_opt.out.empty())
        return core::fail("--out RUN.db is required");
    std::error_code ec;
    m_out = fs::absolute(m_opt.out, ec);
    if (ec)
        return core::fail("cannot resolve --out " + m_opt.out + ": " + ec.message());
    if (fs::is_directory(m_out, ec))
        return core::fail("--out " + m_out.string() + " is a folder; give a file name such as run.db");
    if (fs::exists(m_out, ec) && !m_opt.force)
        return core::fail(m_out.string() + " already exists; pass --force to overwrite it");
    const fs::path parent = m_out.parent_path();
    if (!fs::is_directory(parent, ec))
        return core::fail("the folder of --out does not exist: " + parent.string());
    if (access(parent.c_str(), W_OK) != 0)
        return core::fail("cannot write into " + parent.string() + ": " + std::strerror(errno));

    m_runName = m_opt.runName.empty() ? m_out.stem().string() : m_opt.runName;

    if (!m_opt.executable.empty()) {
        m_exe = m_opt.executable;
    } else {
        char buf[4096];
        const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
        if (n <= 0)
            return core::fail(std::string("cannot find this executable (/proc/self/exe): ") + std::strerror(errno));
        m_exe.assign(buf, size_t(n));
    }
    if (access(m_exe.c_str(), X_OK) != 0)
        return core::fail("worker executable " + m_exe + " is not executable: " + std::strerror(errno));

    // The shards go next to --out: same filesystem, so the final rename is atomic.
    std::string tmpl = (parent / ("." + m_out.filename().string() + ".shards-XXXXXX")).string();
    if (!mkdtemp(tmpl.data()))
        return core::fail("cannot create a folder for the rank shards next to " + m_out.string() + ": "
                          + std::strerror(errno));
    m_shardDir = tmpl;

    auto port = pickFreePort();
    if (!port)
        return core::fail(port.error().message);
    m_port = *port;

    switch (m_opt.progress) {
    case ProgressStyle::Auto:
        m_style = isatty(STDERR_FILENO) ? ProgressStyle::Bar : ProgressStyle::Plain;
        break;
    default:
        m_style = m_opt.progress;
    }
    return {};
}

core::Result<pid_t> Job::spawnOne(Worker& w, const std::vector<std::string>& argvStr,
                                  const std::vector<std::string>& envStr)
{
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
        signal(SIGPIPE, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        if (devNull >= 0)
            dup2(devNull, STDIN_FILENO);
        dup2(outPipe[1], STDOUT_FILENO);
        dup2(errPipe[1], STDERR_FILENO);
        execve(argv[0], argv.data(), envp.data());
        const int err = errno;
        [[maybe_unused]] ssize_t ignored = write(execPipe[1], &err, sizeof err);
        _exit(127);
    }
    setpgid(pid, pid); // also from the parent: no race with an early kill(-pid)
    close(outPipe[1]);
    close(errPipe[1]);
    close(execPipe[1]);
    if (devNull >= 0)
        close(devNull);
    int childErr = 0;
    ssize_t n;
    do {
        n = read(execPipe[0], &childErr, sizeof childErr);
    } while (n < 0 && errno == EINTR);
    close(execPipe[0]);
    w.pid = pid;
    w.outFd = outPipe[0];
    w.errFd = errPipe[0];
    fcntl(w.outFd, F_SETFL, O_NONBLOCK);
    fcntl(w.errFd, F_SETFL, O_NONBLOCK);
    if (n == sizeof childErr) {
        int status = 0;
        waitpid(pid, &status, 0);
        w.exited = true;
        return core::fail("cannot start " + argvStr[0] + ": " + std::strerror(childErr));
    }
    return pid;
}

core::Status Job::spawnAll()
{
    std::vector<std::string> baseEnv;
    static constexpr const char* kOwnKeys[] = {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=",
                                               "MASTER_ADDR=", "MASTER_PORT=", "GROUP_RANK=",
                                               "TORCHELASTIC_RUN_ID="};
    bool haveOmp = false;
    for (char** e = environ; e && *e; ++e) {
        std::string_view kv(*e);
        if (kv.starts_with("OMP_NUM_THREADS="))
            haveOmp = true;
        if (std::any_of(std::begin(kOwnKeys), std::end(kOwnKeys), [&](const char* k) { return kv.starts_with(k); }))
            continue;
        baseEnv.emplace_back(kv);
    }
    if (!haveOmp) {
        // torchrun's habit: N processes each with all cores' worth of intra-op threads would
        // oversubscribe the machine and measure the scheduler instead of the training.
        const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
        baseEnv.push_back("OMP_NUM_THREADS=" + std::to_string(std::max(1u, cores / unsigned(m_opt.nproc))));
    }
    baseEnv.push_back("WORLD_SIZE=" + std::to_string(m_opt.nproc));
    baseEnv.push_back("LOCAL_WORLD_SIZE=" + std::to_string(m_opt.nproc));
    baseEnv.push_back("MASTER_ADDR=127.0.0.1");
    baseEnv.push_back("MASTER_PORT=" + std::to_string(m_port));
    baseEnv.push_back("GROUP_RANK=0");

    std::vector<std::string> argv = {m_exe, "worker", "--out-dir", m_shardDir.string(), "--run-name", m_runName};
    argv.insert(argv.end(), m_opt.workerArgs.begin(), m_opt.workerArgs.end());

    m_workers.resize(size_t(m_opt.nproc));
    m_start = Clock::now();
    m_lastProgress = m_start;
    for (int r = 0; r < m_opt.nproc; ++r) {
        Worker& w = m_workers[size_t(r)];
        w.rank = r;
        w.log.open(m_shardDir / ("rank-" + std::to_string(r) + ".log"));
        std::vector<std::string> env = baseEnv;
        env.push_back("RANK=" + std::to_string(r));
        env.push_back("LOCAL_RANK=" + std::to_string(r));
        auto pid = spawnOne(w, argv, env);
        if (!pid) {
            // Mark the not-started ranks as exited and stop the started ones.
            for (int q = r; q < m_opt.nproc; ++q)
                m_workers[size_t(q)].exited = true;
            m_workers[size_t(r)].rank = r;
            killAll(SIGKILL);
            for (auto& x : m_workers) {
                if (x.pid > 0 && !x.exited) {
                    int st = 0;
                    waitpid(x.pid, &st, 0);
                    x.exited = true;
                }
                for (int* fd : {&x.outFd, &x.errFd})
                    if (*fd >= 0)
                        close(*fd), *fd = -1;
            }
            return core::fail(pid.error().message);
        }
    }
    return {};
}

void Job::killAll(int sig)
{
    for (auto& w : m_workers) {
        if (w.pid > 0 && !w.exited) {
            w.killedByUs = true;
            kill(-w.pid, sig); // its process group: the worker and anything it started
            kill(w.pid, sig);
        }
    }
}

void Job::noteFailure(FailureEvent ev)
{
    ev.peerLike = looksLikePeerFailure(ev.cause);
    ev.at = Clock::now();
    m_failures.push_back(std::move(ev));
    if (!m_failed) {
        m_failed = true;
        m_failedAt = Clock::now();
    }
}

const FailureEvent* Job::primaryFailure() const
{
    if (m_failures.empty())
        return nullptr;
    // Only failures seen within a short settle window of the first compete; later ones are
    // consequences. Within it, a failure that does not read like a dead peer's echo wins.
    constexpr double kSettleS = 0.5;
    const FailureEvent& first = m_failures.front();
    for (const auto& f : m_failures) {
        if (std::chrono::duration<double>(f.at - first.at).count() > kSettleS)
            break;
        if (!f.peerLike)
            return &f;
    }
    return &first;
}

std::string Job::primaryCause() const
{
    if (m_interrupted)
        return "interrupted";
    const FailureEvent* best = primaryFailure();
    if (!best)
        return {};
    std::string cause = best->cause;
    if (best->rank >= 0) {
        const Worker& w = m_workers[size_t(best->rank)];
        if (w.exited && !w.failedCause.empty() && !w.killedByUs) {
            if (WIFEXITED(w.rawStatus))
                cause += " (exit status " + std::to_string(WEXITSTATUS(w.rawStatus)) + ")";
            else if (WIFSIGNALED(w.rawStatus))
                cause += " (killed by " + signalName(WTERMSIG(w.rawStatus)) + ")";
        }
    }
    if (best->peerLike) {
        // A timeout or a dead connection points at a peer: name the ranks that never said a
        // word and had to be killed, they are the likelier culprits (a hung or stopped rank).
        std::string silent;
        for (const auto& w : m_workers)
            if (w.killedByUs && w.failedCause.empty() && WIFSIGNALED(w.rawStatus))
                silent += (silent.empty() ? "" : ", ") + std::to_string(w.rank);
        if (!silent.empty())
            cause += "; rank " + silent + " stopped responding and was killed by the launcher";
    }
    return cause;
}

void Job::handleLine(Worker& w, const std::string& line, bool isOut)
{
    if (w.log.is_open())
        w.log << (isOut ? "[out] " : "") << line << '\n';
    if (!isOut) {
        w.errTail.push_back(line);
        if (w.errTail.size() > 20)
            w.errTail.pop_front();
        if (m_opt.echoWorkerOutput) {
            finishProgress();
            std::fprintf(stderr, "[rank %d] %s\n", w.rank, line.c_str());
        }
        return;
    }
    const WorkerLine parsed = parseWorkerLine(line);
    switch (parsed.kind) {
    case WorkerLine::Kind::Step: {
        m_lastProgress = Clock::now();
        w.lastStep = std::max(w.lastStep, parsed.step);
        StepAgg& agg = m_steps[parsed.step];
        agg.ranks += 1;
        agg.lossSum += parsed.loss;
        agg.maxStepMs = std::max(agg.maxStepMs, parsed.stepMs);
        if (agg.ranks == m_opt.nproc && parsed.step > m_shownStep) {
            m_shownStep = parsed.step;
            showProgress(parsed.step, agg);
            m_steps.erase(m_steps.begin(), m_steps.find(parsed.step));
        }
        break;
    }
    case WorkerLine::Kind::Done:
        m_lastProgress = Clock::now();
        w.done = true;
        break;
    case WorkerLine::Kind::Failed: {
        w.failedCause = parsed.cause.empty() ? "failed without a cause" : parsed.cause;
        if (!w.killedByUs)
            noteFailure({w.rank, "rank " + std::to_string(w.rank) + " failed at step " + std::to_string(w.lastStep + 1)
                                     + ": " + w.failedCause});
        break;
    }
    case WorkerLine::Kind::Other:
        if (m_opt.echoWorkerOutput) {
            finishProgress();
            std::fprintf(stderr, "[rank %d] %s\n", w.rank, line.c_str());
        }
        break;
    }
}

void Job::readFd(Worker& w, bool isOut)
{
    int& fd = isOut ? w.outFd : w.errFd;
    std::string& buf = isOut ? w.outBuf : w.errBuf;
    char chunk[8192];
    for (;;) {
        const ssize_t n = read(fd, chunk, sizeof chunk);
        if (n > 0) {
            buf.append(chunk, size_t(n));
            size_t pos;
            while ((pos = buf.find('\n')) != std::string::npos) {
                std::string line = buf.substr(0, pos);
                buf.erase(0, pos + 1);
                if (!line.empty() && line.back() == '\r')
                    line.pop_back();
                handleLine(w, line, isOut);
            }
            // A worker that writes megabytes without a newline must not grow us without bound.
            if (buf.size() > (1u << 20)) {
                handleLine(w, buf, isOut);
                buf.clear();
            }
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        // EOF or error: the pipe is done.
        if (!buf.empty()) {
            handleLine(w, buf, isOut);
            buf.clear();
        }
        close(fd);
        fd = -1;
        return;
    }
}

void Job::reap()
{
    for (auto& w : m_workers) {
        if (w.exited || w.pid <= 0)
            continue;
        int status = 0;
        const pid_t r = waitpid(w.pid, &status, WNOHANG);
        if (r != w.pid)
            continue;
        // Drain what it wrote before dying: its `failed` line explains the exit.
        if (w.outFd >= 0)
            readFd(w, true);
        if (w.errFd >= 0)
            readFd(w, false);
        w.exited = true;
        w.rawStatus = status;
        if (WIFEXITED(status))
            w.exitCode = WEXITSTATUS(status);
        else if (WIFSIGNALED(status))
            w.exitCode = 128 + WTERMSIG(status);
        const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (clean || w.killedByUs)
            continue;
        if (!w.failedCause.empty())
            continue; // already noted from its own `failed` line; the status is added to the cause
        const std::string at = " at step " + std::to_string(w.lastStep + 1);
        std::string cause;
        if (WIFEXITED(status))
            cause = "rank " + std::to_string(w.rank) + " exited with status " + std::to_string(WEXITSTATUS(status)) + at;
        else
            cause = "rank " + std::to_string(w.rank) + " was killed by " + signalName(WTERMSIG(status)) + at;
        if (!w.errTail.empty())
            cause += ": " + w.errTail.back();
        FailureEvent ev{w.rank, cause};
        noteFailure(std::move(ev));
        // A rank that died without explaining itself is the likeliest cause even when its last
        // stderr line mentions a peer.
        if (!m_failures.empty() && WIFSIGNALED(status))
            m_failures.back().peerLike = false;
    }
}

void Job::showProgress(int step, const StepAgg& agg)
{
    if (m_style == ProgressStyle::None)
        return;
    const double loss = agg.lossSum / std::max(1, agg.ranks);
    const int shown = step + 1; // steps are numbered from 0; show completed count
    char text[256];
    if (m_style == ProgressStyle::Plain) {
        if (m_opt.stepsPlanned > 0)
            std::snprintf(text, sizeof text, "step %d/%d loss=%.4f step_ms=%.1f\n", shown, m_opt.stepsPlanned, loss, agg.maxStepMs);
        else
            std::snprintf(text, sizeof text, "step %d loss=%.4f step_ms=%.1f\n", shown, loss, agg.maxStepMs);
        std::fputs(text, stderr);
        std::fflush(stderr);
        return;
    }
    constexpr int kWidth = 30;
    std::string bar;
    if (m_opt.stepsPlanned > 0) {
        const int filled = std::clamp(shown * kWidth / m_opt.stepsPlanned, 0, kWidth);
        bar = "[" + std::string(size_t(filled), '#') + std::string(size_t(kWidth - filled), '.') + "] ";
        std::snprintf(text, sizeof text, "\r\033[K%sstep %d/%d  loss %.4f  %.1f ms/step  %d ranks", bar.c_str(), shown,
                      m_opt.stepsPlanned, loss, agg.maxStepMs, m_opt.nproc);
    } else {
        std::snprintf(text, sizeof text, "\r\033[Kstep %d  loss %.4f  %.1f ms/step  %d ranks", shown, loss, agg.maxStepMs,
                      m_opt.nproc);
    }
    std::fputs(text, stderr);
    std::fflush(stderr);
    m_barOnScreen = true;
}

void Job::finishProgress()
{
    if (m_barOnScreen) {
        std::fputs("\n", stderr);
        m_barOnScreen = false;
    }
}

void Job::loop()
{
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, bool>> owners;
    Clock::time_point allExitedAt {};
    bool allExited = false;
    for (;;) {
        // Signals first: the first Ctrl-C stops the workers politely, a second one at once.
        if (g_signal != 0 && !m_interrupted) {
            m_interrupted = true;
            noteFailure({-1, "interrupted"});
            finishProgress();
            std::fprintf(stderr, "lockstep run: %s received, stopping %d workers\n", signalName(g_signal).c_str(),
                         m_opt.nproc);
            killAll(SIGTERM);
            m_termSent = true;
            m_termAt = Clock::now();
        }
        if (m_interrupted && g_signalCount > 1 && !m_killSent) {
            killAll(SIGKILL);
            m_killSent = true;
        }
        // Hang watchdog: no progress line from any rank for too long.
        if (!m_failed && m_opt.hangTimeoutS > 0 && secondsSince(m_lastProgress) > m_opt.hangTimeoutS) {
            int slowest = -1;
            for (const auto& w : m_workers)
                if (!w.exited && (slowest < 0 || w.lastStep < m_workers[size_t(slowest)].lastStep))
                    slowest = w.rank;
            char secs[32];
            std::snprintf(secs, sizeof secs, "%g", m_opt.hangTimeoutS);
            std::string cause = std::string("hung: no progress from any rank for ") + secs + " s";
            if (slowest >= 0)
                cause += " (rank " + std::to_string(slowest) + " stuck at step "
                         + std::to_string(m_workers[size_t(slowest)].lastStep + 1) + ")";
            noteFailure({slowest, cause});
            m_failures.back().peerLike = false;
            // The job has already had its time to recover: no grace period on top.
            killAll(SIGTERM);
            m_termSent = true;
            m_termAt = Clock::now();
        }
        // Stop sequence after a failure: grace, SIGTERM, SIGKILL.
        if (m_failed && !m_termSent && anyAlive() && secondsSince(m_failedAt) >= m_opt.graceS) {
            killAll(SIGTERM);
            m_termSent = true;
            m_termAt = Clock::now();
        }
        if (m_termSent && !m_killSent && anyAlive() && secondsSince(m_termAt) >= m_opt.termS) {
            killAll(SIGKILL);
            m_killSent = true;
        }

        reap();
        if (!anyAlive()) {
            if (!allExited) {
                allExited = true;
                allExitedAt = Clock::now();
            }
            // Pipes normally reach EOF with the process; something it left behind may hold
            // them open, so do not wait for that long.
            if (!anyPipeOpen() || secondsSince(allExitedAt) > 1.0)
                break;
        }

        fds.clear();
        owners.clear();
        for (size_t i = 0; i < m_workers.size(); ++i) {
            if (m_workers[i].outFd >= 0) {
                fds.push_back({m_workers[i].outFd, POLLIN, 0});
                owners.emplace_back(i, true);
            }
            if (m_workers[i].errFd >= 0) {
                fds.push_back({m_workers[i].errFd, POLLIN, 0});
                owners.emplace_back(i, false);
            }
        }
        // 50 ms: short enough to notice exits and deadlines promptly, long enough to cost nothing.
        const int rc = poll(fds.data(), nfds_t(fds.size()), 50);
        if (rc < 0)
            continue; // EINTR: handled at the top
        for (size_t k = 0; k < fds.size(); ++k) {
            if (fds[k].revents == 0)
                continue;
            Worker& w = m_workers[owners[k].first];
            const bool isOut = owners[k].second;
            if ((isOut ? w.outFd : w.errFd) >= 0)
                readFd(w, isOut);
        }
    }
    for (auto& w : m_workers) {
        for (int* fd : {&w.outFd, &w.errFd})
            if (*fd >= 0)
                close(*fd), *fd = -1;
        if (w.log.is_open())
            w.log.close();
    }
    finishProgress();
}

core::Status Job::mergeAndMark(LaunchResult& result)
{
    std::vector<std::string> shards;
    for (int r = 0; r < m_opt.nproc; ++r) {
        const fs::path shard = m_shardDir / ("rank-" + std::to_string(r) + ".db");
        std::error_code ec;
        if (!fs::exists(shard, ec) || fs::file_size(shard, ec) == 0)
            continue;
        // A rank killed at a bad moment may leave a shard core cannot read; merge the others
        // rather than lose the whole run.
        if (auto valid = core::validateRunFile(shard.string()); !valid) {
            std::fprintf(stderr, "lockstep run: the shard of rank %d is left out: %s\n", r, valid.error().message.c_str());
            if (!result.success)
                result.cause += "; shard of rank " + std::to_string(r) + " unreadable";
            continue;
        }
        shards.push_back(shard.string());
    }
    const fs::path merged = m_shardDir / "merged.db";
    const fs::path empty = m_shardDir / "empty.db";
    const core::RunStatus want = result.success ? core::RunStatus::Completed : core::RunStatus::Failed;
    fs::path ready;
    if (!shards.empty()) {
        auto stats = core::mergeRunFiles(shards, merged.string(), core::RunWriter::Mode::Overwrite);
        if (!stats)
            return core::fail("merging the rank shards failed: " + stats.error().message);
        result.merge = *stats;
        // The merged status comes from the shards; the launcher's verdict (it saw every exit)
        // is the one that counts, so rewrite it when it differs.
        auto reader = core::RunReader::open(merged.string());
        if (!reader)
            return core::fail("cannot read the merged run: " + reader.error().message);
        auto config = (*reader)->config();
        reader->reset();
        if (!config)
            return core::fail("cannot read the merged run: " + config.error().message);
        const std::string wantCause = result.success ? std::string() : result.cause;
        if (config->status != want || config->failureCause != wantCause) {
            auto writer = core::RunWriter::openExisting(merged.string());
            if (!writer)
                return core::fail("cannot mark the run " + std::string(core::runStatusName(want)) + ": "
                                  + writer.error().message);
            const core::TimeNs ended = config->endedNs != 0 && result.success ? config->endedNs : realtimeNs();
            auto st = (*writer)->setStatus(want, wantCause, ended);
            if (st)
                st = (*writer)->close();
            if (!st)
                return core::fail("cannot mark the run " + std::string(core::runStatusName(want)) + ": "
                                  + st.error().message);
        }
        ready = merged;
    } else {
        // No rank got as far as its shard: still leave a run file that says why.
        core::RunConfig config;
        config.name = m_runName;
        config.worldSize = m_opt.nproc;
        config.commandLine = m_opt.commandLine;
        config.createdNs = realtimeNs();
        auto writer = core::RunWriter::create(empty.string(), config, core::RunWriter::Mode::Overwrite);
        if (!writer)
            return core::fail("cannot write the run file: " + writer.error().message);
        auto st = (*writer)->setStatus(want, result.success ? std::string() : result.cause, realtimeNs());
        if (st)
            st = (*writer)->close();
        if (!st)
            return core::fail("cannot write the run file: " + st.error().message);
        ready = empty;
    }
    std::error_code ec;
    if (!m_opt.force && fs::exists(m_out, ec))
        return core::fail(m_out.string() + " appeared while the run was recording; the run is left in " + ready.string());
    if (m_opt.force) {
        // A -wal left by a writer that crashed on the old file would be replayed onto the new
        // one by SQLite (nothing ties a WAL to its database): remove the old side files first.
        fs::remove(m_out.string() + "-wal", ec);
        fs::remove(m_out.string() + "-shm", ec);
    }
    fs::rename(ready, m_out, ec);
    if (ec)
        return core::fail("cannot move the run file to " + m_out.string() + ": " + ec.message());
    result.haveRunFile = true;
    return {};
}

core::Result<LaunchResult> Job::run()
{
    if (auto st = prepare(); !st)
        return std::unexpected(st.error());
    SignalGuard guard;
    if (auto st = spawnAll(); !st) {
        std::error_code ec;
        fs::remove_all(m_shardDir, ec);
        return std::unexpected(st.error());
    }
    if (m_style != ProgressStyle::None)
        std::fprintf(stderr, "lockstep run: %d worker%s, rendezvous 127.0.0.1:%d, shards in %s\n", m_opt.nproc,
                     m_opt.nproc == 1 ? "" : "s", m_port, m_shardDir.c_str());
    loop();

    LaunchResult result;
    result.wallS = secondsSince(m_start);
    result.stopS = m_failed ? secondsSince(m_failedAt) : 0;
    result.interrupted = m_interrupted;
    for (const auto& w : m_workers)
        result.exitCodes.push_back(w.exitCode);
    const bool allClean = std::all_of(m_workers.begin(), m_workers.end(),
                                      [](const Worker& w) { return WIFEXITED(w.rawStatus) && WEXITSTATUS(w.rawStatus) == 0; });
    result.success = !m_failed && allClean;
    if (!result.success) {
        result.cause = primaryCause();
        if (result.cause.empty())
            result.cause = "a worker failed";
        const FailureEvent* primary = primaryFailure();
        if (!m_interrupted && primary && primary->rank >= 0) {
            // Show the failing rank's own last words: they are gone with the shards otherwise.
            const Worker& w = m_workers[size_t(primary->rank)];
            if (!w.errTail.empty()) {
                std::fprintf(stderr, "lockstep run: last messages of rank %d:\n", w.rank);
                const size_t from = w.errTail.size() > 5 ? w.errTail.size() - 5 : 0;
                for (size_t i = from; i < w.errTail.size(); ++i)
                    std::fprintf(stderr, "  %s\n", w.errTail[i].c_str());
            }
        }
    }

    auto merged = mergeAndMark(result);
    if (!merged) {
        // Keep the shards: they are all there is.
        std::fprintf(stderr, "lockstep run: %s\nlockstep run: the rank shards are kept in %s\n",
                     merged.error().message.c_str(), m_shardDir.c_str());
        if (result.success)
            return std::unexpected(merged.error());
        result.cause += "; " + merged.error().message;
        return result;
    }
    std::error_code ec;
    if (m_opt.keepShards) {
        fs::remove(m_shardDir / "merged.db", ec);
        std::fprintf(stderr, "lockstep run: rank shards and worker logs kept in %s\n", m_shardDir.c_str());
    } else {
        fs::remove_all(m_shardDir, ec);
    }
    return result;
}

bool parseInt(std::string_view s, int& out)
{
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

bool parseDouble(std::string_view s, double& out)
{
    // from_chars for double is in libstdc++ 11+.
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
}

} // namespace

WorkerLine parseWorkerLine(std::string_view line)
{
    WorkerLine out;
    constexpr std::string_view kPrefix = "LOCKSTEP ";
    if (!line.starts_with(kPrefix))
        return out;
    line.remove_prefix(kPrefix.size());
    // Fields are key=value separated by spaces; `cause=` takes the rest of the line.
    std::string_view verb;
    bool ok = true;
    std::map<std::string_view, std::string_view> fields;
    size_t pos = 0;
    while (pos < line.size()) {
        while (pos < line.size() && line[pos] == ' ')
            ++pos;
        if (pos >= line.size())
            break;
        size_t end = line.find(' ', pos);
        std::string_view token = line.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
        const size_t eq = token.find('=');
        if (eq == std::string_view::npos) {
            if (verb.empty() && fields.empty())
                verb = token;
            else
                ok = false;
        } else {
            std::string_view key = token.substr(0, eq);
            if (key == "cause") {
                fields[key] = line.substr(pos + eq + 1);
                break;
            }
            fields[key] = token.substr(eq + 1);
        }
        if (end == std::string_view::npos)
            break;
        pos = end + 1;
    }
    if (!ok)
        return out;
    auto rankIt = fields.find("rank");
    if (rankIt == fields.end() || !parseInt(rankIt->second, out.rank))
        return WorkerLine {};
    if (verb == "done") {
        out.kind = WorkerLine::Kind::Done;
    } else if (verb == "failed") {
        out.kind = WorkerLine::Kind::Failed;
        if (auto it = fields.find("cause"); it != fields.end())
            out.cause = std::string(it->second);
    } else if (verb.empty()) {
        auto stepIt = fields.find("step");
        if (stepIt == fields.end() || !parseInt(stepIt->second, out.step))
            return WorkerLine {};
        if (auto it = fields.find("loss"); it != fields.end() && !parseDouble(it->second, out.loss))
            out.loss = std::nan("");
        if (auto it = fields.find("step_ms"); it != fields.end())
            parseDouble(it->second, out.stepMs);
        out.kind = WorkerLine::Kind::Step;
    } else {
        return WorkerLine {};
    }
    return out;
}

core::Result<int> pickFreePort()
{
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return core::fail(std::string("cannot open a socket to pick a rendezvous port: ") + std::strerror(errno));
    sockaddr_in addr {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        const int err = errno;
        close(fd);
        return core::fail(std::string("cannot bind 127.0.0.1 to pick a rendezvous port: ") + std::strerror(err));
    }
    socklen_t len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        const int err = errno;
        close(fd);
        return core::fail(std::string("getsockname: ") + std::strerror(err));
    }
    close(fd);
    return int(ntohs(addr.sin_port));
}

core::Result<LaunchResult> launchRun(const LaunchOptions& options)
{
    Job job(options);
    return job.run();
}

} // namespace lockstep::app
