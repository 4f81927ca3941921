// The launcher's job loop: N local ranks, one watchdog loop, one merged run file (launcher.h).
//
// How a job is watched (why it looks like this):
//  - Every rank gets its own stdout and stderr pipe (process.h). stdout carries the protocol
//    (progress.h); stderr is the worker's free text (LibTorch and gloo messages), written to
//    rank-<r>.log in the shard folder and kept as a short tail so that a rank that dies without
//    a word still gets a cause.
//  - One poll() loop reads all pipes with a short timeout and reaps exited ranks with
//    waitpid(WNOHANG), so no thread is needed and a signal (Ctrl-C) interrupts it at once.
//  - The first failure (a `failed` line, a non-zero exit, death by a signal, or no progress
//    from any rank for hangTimeoutS) starts the stop sequence: the other ranks get a grace
//    period to notice and exit on their own (they usually do within milliseconds, when gloo
//    sees the dead peer's sockets close), then SIGTERM, then SIGKILL. So every rank is gone a
//    few seconds after the first failure, however the collectives behave.
//  - Which failure is the run's cause is decided by the failure ranking (failure.h).
//  - The merge writes the run whole or not at all (core::mergeRunFiles through an OutputFile),
//    with the launcher's verdict in it, so a reader never sees a half-merged run file.
#include "lockstep/job/launcher.h"

#include "lockstep/core/output_file.h"
#include "lockstep/core/report.h"
#include "lockstep/core/types.h"
#include "lockstep/job/failure.h"
#include "lockstep/job/flags.h"
#include "lockstep/job/netns.h"
#include "lockstep/job/process.h"
#include "lockstep/job/progress.h"
#include "lockstep/job/shard_layout.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

namespace lockstep::job {
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

// Whether `s` is valid UTF-8 (a path a Python worker can hand to torch, whose FileStore takes text).
bool isUtf8(std::string_view s)
{
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (n == 0 || i + n > s.size())
            return false;
        for (size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
                return false;
        i += n;
    }
    return true;
}

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

core::TimeNs realtimeNs()
{
    timespec ts {};
    clock_gettime(CLOCK_REALTIME, &ts);
    return core::TimeNs(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct Rank {
    int rank = 0;
    ChildProcess child;
    LineSplitter out, err;
    std::deque<std::string> errTail; // the last lines of stderr, for a cause when none is given
    std::ofstream log;
    bool exited = false;
    int waitStatus = 0;
    bool killedByUs = false;
    int lastStep = -1;        // last completed step reported
    int waitingStep = -1;     // last step whose all-reduce it reported reaching (`waiting`)
    Phase phase = Phase::Starting; // the last phase it reported (`phase`)
    std::string failedCause;  // from the rank's own `failed` line
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
    void loop();
    void readFd(Rank& r, bool isOut);
    void handleLine(Rank& r, const std::string& line, bool isOut);
    void reap();
    void noteFailure(int rank, std::string cause, bool unambiguous = false);
    void killAll(int sig);
    void showProgress(int step, const StepAgg& agg);
    // Before the first step: the slowest rank's phase and how many ranks are past it, shown
    // when either changes (progress.h, `phase`).
    void showPhase();
    void finishProgress();
    void message(const std::string& text);
    core::Status mergeShards(LaunchResult& result);
    // Every rank of the job: nproc per host on each emulated host, or nproc.
    int world() const { return m_opt.hosts > 0 ? m_opt.hosts * m_opt.nproc : m_opt.nproc; }
    bool anyAlive() const
    {
        return std::any_of(m_ranks.begin(), m_ranks.end(), [](const Rank& r) { return !r.exited; });
    }
    bool anyPipeOpen() const
    {
        return std::any_of(m_ranks.begin(), m_ranks.end(),
                           [](const Rank& r) { return r.child.outFd >= 0 || r.child.errFd >= 0; });
    }

    const LaunchOptions& m_opt;
    std::unique_ptr<HostNetwork> m_net; // --hosts: the emulated hosts (torn down with the Job)
    fs::path m_out;
    std::string m_shardDir;
    std::string m_rendezvousDir; // a private folder for the rendezvous file when m_shardDir is not UTF-8
    std::string m_runName;
    int m_port = 0;
    std::vector<Rank> m_ranks;
    Clock::time_point m_start;
    Clock::time_point m_lastProgress;
    bool m_anyStep = false; // a rank has reported a step: start-up is over (startupTimeoutS)
    FailureLog m_failures;
    bool m_interrupted = false;
    int m_signal = 0;
    bool m_hung = false;
    bool m_termSent = false;
    Clock::time_point m_termAt;
    bool m_killSent = false;
    std::map<int, StepAgg> m_steps;
    int m_shownStep = -1;
    std::pair<int, int> m_shownPhase{-1, -1}; // (phase, ranks past it) last shown
    bool m_barOnScreen = false;
    ProgressStyle m_style = ProgressStyle::Plain;
};

core::Status Job::prepare()
{
    if (auto s = checkLaunchOptions(m_opt); !s)
        return s;
    // The network first: a failure to build it leaves nothing (no shard folder either).
    if (m_opt.hosts > 0) {
        auto net = HostNetwork::create(m_opt.hosts, m_opt.net);
        if (!net)
            return std::unexpected(net.error());
        m_net = std::move(*net);
    }
    std::error_code ec;
    m_out = fs::absolute(m_opt.out, ec);
    m_runName = m_opt.runName.empty() ? m_out.stem().string() : m_opt.runName;
    auto folder = createShardFolder(m_out.string());
    if (!folder)
        return std::unexpected(folder.error());
    m_shardDir = *folder;
    // Paths are bytes, but torch's FileStore takes text: a shard folder whose path is not UTF-8
    // (the run file's name or folder) gets its rendezvous file in a private folder of $TMPDIR.
    if (!isUtf8(m_shardDir)) {
        const char* tmp = std::getenv("TMPDIR");
        std::string tmpl = std::string(tmp && *tmp && isUtf8(tmp) ? tmp : "/tmp") + "/.lockstep-rendezvous-XXXXXX";
        if (!mkdtemp(tmpl.data()))
            return core::fail("cannot create a folder for the rendezvous file: " + std::string(std::strerror(errno)));
        m_rendezvousDir = tmpl;
    }
    auto port = pickFreePort();
    if (!port)
        return std::unexpected(port.error());
    m_port = *port;
    m_style = m_opt.progress;
    if (m_style == ProgressStyle::Auto)
        m_style = isatty(STDERR_FILENO) ? ProgressStyle::Bar : ProgressStyle::Plain;
    return {};
}

core::Status Job::spawnAll()
{
    // Ours and the command's own variables replace any of the same name this process has.
    // The launcher's own variables are set below and win over the command's.
    std::vector<std::string_view> own{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                      "MASTER_PORT", "GROUP_RANK", "TORCHELASTIC_RUN_ID", kEnvShardDir,
                                      kEnvRunName, kEnvRendezvousFile};
    if (m_net) // the emulated hosts' interface, whatever this machine's is
        own.insert(own.end(), {"GLOO_SOCKET_IFNAME", kEnvEmulatedNet});
    std::vector<std::string_view> drop = own;
    std::vector<std::string> commandEnv;
    bool ompGiven = std::getenv("OMP_NUM_THREADS") != nullptr;
    for (const std::string& kv : m_opt.worker.env) {
        const std::string_view key = std::string_view(kv).substr(0, kv.find('='));
        if (std::find(own.begin(), own.end(), key) != own.end())
            continue;
        drop.push_back(key);
        commandEnv.push_back(kv);
        ompGiven = ompGiven || key == "OMP_NUM_THREADS";
    }
    std::vector<std::string> baseEnv = environmentWithout(drop);
    baseEnv.insert(baseEnv.end(), commandEnv.begin(), commandEnv.end());
    if (!ompGiven) {
        const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
        baseEnv.push_back("OMP_NUM_THREADS=" + std::to_string(std::max(1u, cores / unsigned(world()))));
    }
    baseEnv.push_back("WORLD_SIZE=" + std::to_string(world()));
    baseEnv.push_back("LOCAL_WORLD_SIZE=" + std::to_string(m_opt.nproc));
    if (!m_net) {
        baseEnv.push_back("GROUP_RANK=0");
        baseEnv.push_back("MASTER_ADDR=127.0.0.1");
        baseEnv.push_back("MASTER_PORT=" + std::to_string(m_port));
    } else {
        // Emulated hosts: host 0's address, and gloo on the interface that reaches the others
        // (the port is free: host 0's namespace is new).
        baseEnv.push_back("MASTER_ADDR=" + m_net->address(0));
        baseEnv.push_back("MASTER_PORT=29500");
        baseEnv.push_back(std::string("GLOO_SOCKET_IFNAME=") + kHostInterface);
        baseEnv.push_back(std::string(kEnvEmulatedNet) + "=hosts=" + std::to_string(m_opt.hosts) + " nproc="
                          + std::to_string(m_opt.nproc) + " gbps=" + formatNumber(m_opt.net.gbps) + " delay_us="
                          + formatNumber(m_opt.net.delayUs) + " jitter_us=" + formatNumber(m_opt.net.jitterUs)
                          + " loss_pct=" + formatNumber(m_opt.net.lossPct));
    }
    baseEnv.push_back(std::string(kEnvShardDir) + "=" + m_shardDir);
    baseEnv.push_back(std::string(kEnvRunName) + "=" + m_runName);
    baseEnv.push_back(std::string(kEnvRendezvousFile) + "="
                      + rendezvousFile(m_rendezvousDir.empty() ? m_shardDir : m_rendezvousDir));

    m_ranks.resize(size_t(world()));
    m_start = Clock::now();
    m_lastProgress = m_start;
    for (int r = 0; r < world(); ++r) {
        Rank& rank = m_ranks[size_t(r)];
        rank.rank = r;
        rank.log.open(logFile(m_shardDir, r));
        std::vector<std::string> env = baseEnv;
        env.push_back("RANK=" + std::to_string(r));
        env.push_back("LOCAL_RANK=" + std::to_string(r % m_opt.nproc));
        SpawnPlace place;
        if (m_net) {
            const int host = r / m_opt.nproc;
            env.push_back("GROUP_RANK=" + std::to_string(host));
            place.netnsFd = m_net->netnsFd(host);
            place.hostname = m_net->hostname(host);
        }
        auto child = spawnChild(m_opt.worker.argv, env, place);
        if (!child) {
            // Stop the ranks already started; the others never were.
            for (int q = r; q < world(); ++q)
                m_ranks[size_t(q)].exited = true;
            killAll(SIGKILL);
            for (Rank& x : m_ranks) {
                if (x.child.pid > 0 && !x.exited)
                    waitpid(x.child.pid, &x.waitStatus, 0);
                x.exited = true;
                for (int* fd : {&x.child.outFd, &x.child.errFd})
                    if (*fd >= 0)
                        close(*fd), *fd = -1;
            }
            return std::unexpected(child.error());
        }
        rank.child = *child;
    }
    return {};
}

void Job::killAll(int sig)
{
    for (Rank& r : m_ranks) {
        if (r.child.pid > 0 && !r.exited) {
            r.killedByUs = true;
            signalChild(r.child.pid, sig);
        }
    }
}

void Job::noteFailure(int rank, std::string cause, bool unambiguous)
{
    m_failures.note(rank, std::move(cause), secondsSince(m_start), unambiguous);
}

void Job::message(const std::string& text)
{
    finishProgress();
    std::fprintf(stderr, "%s: %s\n", m_opt.messagePrefix.c_str(), core::escapeControl(text).c_str());
}

void Job::handleLine(Rank& r, const std::string& line, bool isOut)
{
    if (r.log.is_open())
        r.log << (isOut ? "[out] " : "") << line << '\n';
    const auto echo = [&] {
        if (m_opt.echoWorkerOutput) {
            finishProgress();
            std::fprintf(stderr, "[rank %d] %s\n", r.rank, line.c_str());
        }
    };
    if (!isOut) {
        r.errTail.push_back(line);
        if (r.errTail.size() > 20)
            r.errTail.pop_front();
        echo();
        return;
    }
    const ProgressLine p = parseProgressLine(line);
    switch (p.kind) {
    case ProgressLine::Kind::Step: {
        m_lastProgress = Clock::now();
        m_anyStep = true;
        r.lastStep = std::max(r.lastStep, p.step);
        StepAgg& agg = m_steps[p.step];
        agg.ranks += 1;
        agg.lossSum += p.loss;
        agg.maxStepMs = std::max(agg.maxStepMs, p.stepMs);
        if (agg.ranks == world() && p.step > m_shownStep) {
            m_shownStep = p.step;
            showProgress(p.step, agg);
            m_steps.erase(m_steps.begin(), m_steps.find(p.step));
        }
        break;
    }
    case ProgressLine::Kind::Info:
        if (p.text == "waiting") {
            r.waitingStep = std::max(r.waitingStep, p.step);
            break;
        }
        echo();
        break;
    case ProgressLine::Kind::Done:
        m_lastProgress = Clock::now();
        break;
    case ProgressLine::Kind::Phase:
        if (p.rank == r.rank && p.phase > r.phase) {
            r.phase = p.phase;
            showPhase();
        }
        break;
    case ProgressLine::Kind::Failed:
        r.failedCause = p.text.empty() ? "failed without a cause" : p.text;
        if (!r.killedByUs)
            noteFailure(r.rank, "rank " + std::to_string(r.rank) + " failed at step "
                                    + std::to_string(p.step >= 0 ? p.step : r.lastStep + 1) + ": " + r.failedCause);
        break;
    default:
        echo();
        break;
    }
}

void Job::readFd(Rank& r, bool isOut)
{
    int& fd = isOut ? r.child.outFd : r.child.errFd;
    LineSplitter& split = isOut ? r.out : r.err;
    char chunk[8192];
    for (;;) {
        const ssize_t n = read(fd, chunk, sizeof chunk);
        if (n > 0) {
            for (const std::string& line : split.feed(std::string_view(chunk, size_t(n))))
                handleLine(r, line, isOut);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        // EOF or error: the pipe is done.
        for (const std::string& line : split.finish())
            handleLine(r, line, isOut);
        close(fd);
        fd = -1;
        return;
    }
}

void Job::reap()
{
    for (Rank& r : m_ranks) {
        if (r.exited || r.child.pid <= 0)
            continue;
        int status = 0;
        if (waitpid(r.child.pid, &status, WNOHANG) != r.child.pid)
            continue;
        // Drain what it wrote before dying: its `failed` line explains the exit.
        if (r.child.outFd >= 0)
            readFd(r, true);
        if (r.child.errFd >= 0)
            readFd(r, false);
        r.exited = true;
        r.waitStatus = status;
        const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (clean || r.killedByUs || !r.failedCause.empty())
            continue; // a `failed` line was noted already; its status is added to the cause
        std::string cause = "rank " + std::to_string(r.rank) + " " + describeWaitStatus(status) + " at step "
            + std::to_string(r.lastStep + 1);
        if (!r.errTail.empty())
            cause += ": " + r.errTail.back();
        // A rank that died by a signal without explaining itself is the likeliest cause even
        // when its last stderr line mentions a peer.
        noteFailure(r.rank, cause, WIFSIGNALED(status));
    }
}

void Job::showProgress(int step, const StepAgg& agg)
{
    const double loss = agg.lossSum / std::max(1, agg.ranks);
    const int shown = step + 1; // steps are numbered from 0; show the completed count
    const int planned = m_opt.stepsPlanned;
    char text[256];
    switch (m_style) {
    case ProgressStyle::None:
    case ProgressStyle::Auto:
        return;
    case ProgressStyle::Protocol:
        std::fprintf(stderr, "%s\n", progressLine(step, planned, loss, agg.maxStepMs).c_str());
        std::fflush(stderr);
        return;
    case ProgressStyle::Plain:
        if (planned > 0)
            std::snprintf(text, sizeof text, "step %d/%d loss=%.4f step_ms=%.1f\n", shown, planned, loss, agg.maxStepMs);
        else
            std::snprintf(text, sizeof text, "step %d loss=%.4f step_ms=%.1f\n", shown, loss, agg.maxStepMs);
        std::fputs(text, stderr);
        std::fflush(stderr);
        return;
    case ProgressStyle::Bar:
        break;
    }
    constexpr int kWidth = 30;
    if (planned > 0) {
        const int filled = std::clamp(shown * kWidth / planned, 0, kWidth);
        const std::string bar = "[" + std::string(size_t(filled), '#') + std::string(size_t(kWidth - filled), '.') + "] ";
        std::snprintf(text, sizeof text, "\r\033[K%sstep %d/%d  loss %.4f  %.1f ms/step  %d ranks", bar.c_str(), shown,
                      planned, loss, agg.maxStepMs, world());
    } else {
        std::snprintf(text, sizeof text, "\r\033[Kstep %d  loss %.4f  %.1f ms/step  %d ranks", shown, loss, agg.maxStepMs,
                      world());
    }
    std::fputs(text, stderr);
    std::fflush(stderr);
    m_barOnScreen = true;
}

void Job::showPhase()
{
    if (m_shownStep >= 0 || m_ranks.empty())
        return; // steps are shown from the first completed one on
    Phase slowest = Phase::Training;
    for (const Rank& r : m_ranks)
        slowest = std::min(slowest, r.phase);
    const int past = int(std::count_if(m_ranks.begin(), m_ranks.end(), [&](const Rank& r) { return r.phase > slowest; }));
    if (m_shownPhase == std::pair{int(slowest), past})
        return;
    const bool newPhase = m_shownPhase.first != int(slowest);
    m_shownPhase = {int(slowest), past};
    const std::string label(phaseLabel(slowest));
    const std::string ranks = world() > 1 && past > 0
        ? " (" + std::to_string(past) + "/" + std::to_string(world()) + " ranks past it)"
        : std::string();
    switch (m_style) {
    case ProgressStyle::None:
    case ProgressStyle::Auto:
        return;
    case ProgressStyle::Protocol:
        std::fprintf(stderr, "%s\n", jobPhaseLine(slowest, past, world()).c_str());
        std::fflush(stderr);
        return;
    case ProgressStyle::Plain: // a line per phase; the ranks' counts only where a line is rewritten
        if (!newPhase)
            return;
        std::fprintf(stderr, "%s\n", label.c_str());
        std::fflush(stderr);
        return;
    case ProgressStyle::Bar:
        std::fprintf(stderr, "\r\033[K%s%s…", label.c_str(), ranks.c_str());
        std::fflush(stderr);
        m_barOnScreen = true;
        return;
    }
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
        // Signals first: the first Ctrl-C stops the ranks politely, a second one at once.
        if (g_signal != 0 && !m_interrupted) {
            m_interrupted = true;
            m_signal = g_signal;
            noteFailure(-1, "interrupted", true);
            message(signalName(g_signal) + " received, stopping " + std::to_string(world()) + " workers");
            killAll(SIGTERM);
            m_termSent = true;
            m_termAt = Clock::now();
        }
        if (m_interrupted && g_signalCount > 1 && !m_killSent) {
            killAll(SIGKILL);
            m_killSent = true;
        }
        // Hang watchdog: no progress line from any rank for too long.
        // Until the first step, start-up's own limit (if longer).
        const double hangLimitS = m_anyStep ? m_opt.hangTimeoutS : std::max(m_opt.hangTimeoutS, m_opt.startupTimeoutS);
        if (m_failures.empty() && m_opt.hangTimeoutS > 0 && secondsSince(m_lastProgress) > hangLimitS) {
            // The rank that hung: the one furthest behind, and among those one that did not reach
            // the next step's all-reduce (the others wait there for it).
            const auto behind = [](const Rank& r) { return std::pair{r.lastStep, r.waitingStep > r.lastStep ? 1 : 0}; };
            int slowest = -1;
            for (const Rank& r : m_ranks)
                if (!r.exited && (slowest < 0 || behind(r) < behind(m_ranks[size_t(slowest)])))
                    slowest = r.rank;
            std::string cause = m_anyStep ? "hung: no progress from any rank for " + formatNumber(hangLimitS) + " s"
                                          : "hung: no rank reported a step in the first " + formatNumber(hangLimitS) + " s";
            if (slowest >= 0) {
                const int stuckAt = m_ranks[size_t(slowest)].lastStep + 1;
                cause += " (rank " + std::to_string(slowest) + " stuck at step " + std::to_string(stuckAt);
                std::string waiting;
                for (const Rank& r : m_ranks)
                    if (!r.exited && r.rank != slowest && r.waitingStep >= stuckAt && r.lastStep < stuckAt)
                        waiting += (waiting.empty() ? "" : ", ") + std::to_string(r.rank);
                if (!waiting.empty())
                    cause += "; rank" + std::string(waiting.find(',') == std::string::npos ? " " : "s ") + waiting
                        + " waiting for it in that step's all-reduce";
                cause += ")";
            }
            noteFailure(slowest, cause, true);
            m_hung = true;
            // The job has already had its time to recover: no grace period on top.
            killAll(SIGTERM);
            m_termSent = true;
            m_termAt = Clock::now();
        }
        // Stop sequence after a failure: grace, SIGTERM, SIGKILL.
        if (!m_failures.empty() && !m_termSent && anyAlive()
            && secondsSince(m_start) - m_failures.firstAtS() >= m_opt.graceS) {
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
        for (size_t i = 0; i < m_ranks.size(); ++i) {
            if (m_ranks[i].child.outFd >= 0) {
                fds.push_back({m_ranks[i].child.outFd, POLLIN, 0});
                owners.emplace_back(i, true);
            }
            if (m_ranks[i].child.errFd >= 0) {
                fds.push_back({m_ranks[i].child.errFd, POLLIN, 0});
                owners.emplace_back(i, false);
            }
        }
        // 50 ms: short enough to notice exits and deadlines promptly, long enough to cost nothing.
        if (poll(fds.data(), nfds_t(fds.size()), 50) < 0)
            continue; // EINTR: handled at the top
        for (size_t k = 0; k < fds.size(); ++k) {
            if (fds[k].revents == 0)
                continue;
            Rank& r = m_ranks[owners[k].first];
            const bool isOut = owners[k].second;
            if ((isOut ? r.child.outFd : r.child.errFd) >= 0)
                readFd(r, isOut);
        }
    }
    for (Rank& r : m_ranks) {
        for (int* fd : {&r.child.outFd, &r.child.errFd})
            if (*fd >= 0)
                close(*fd), *fd = -1;
        if (r.log.is_open())
            r.log.close();
    }
    finishProgress();
}

core::Status Job::mergeShards(LaunchResult& result)
{
    // Every rank has exited: which shards make the run is shard_layout's one decision.
    const RunShards found = runShardsIn(m_shardDir);
    for (const RunShards::LeftOut& left : found.leftOut) {
        message("a shard is left out: " + left.reason);
        // Interrupted: the interrupt explains it (a shard with no configuration, a damaged one);
        // a full disk or a crash does not.
        if (!result.success && !result.interrupted)
            result.cause += "; " + fs::path(left.file).stem().string()
                            + (left.noConfig ? "'s shard has no configuration" : "'s shard unreadable");
    }
    const std::vector<std::string>& shards = found.files;
    const core::RunStatus verdict = result.success ? core::RunStatus::Completed : core::RunStatus::Failed;
    const std::string cause = result.success ? std::string() : result.cause;
    // --force replaces an existing run file only with a run that recorded something: a job that
    // failed before its first step (a bad flag, no device, Ctrl-C at start-up) keeps the old one.
    std::error_code ec;
    const bool replacing = m_opt.force && fs::exists(fs::symlink_status(m_out, ec));
    const auto keepOld = [&] {
        message("no step was recorded; " + m_out.string() + " was not replaced");
        if (!result.success)
            result.cause += "; no step recorded, the existing run file was kept";
        else {
            result.success = false;
            result.cause = "no step recorded; the existing run file was kept";
        }
        return core::Status{};
    };
    if (!shards.empty()) {
        core::MergeOptions options;
        options.overwrite = m_opt.force;
        options.keepExistingWithoutSteps = replacing;
        options.allowMissingRanks = true; // a failed job's ranks may have died before their shards
        options.status = verdict;
        options.failureCause = cause;
        options.endedNs = result.success ? 0 : realtimeNs();
        auto stats = core::mergeRunFiles(shards, m_out.string(), options);
        if (!stats)
            return core::fail(stats.error(), "writing the run file failed: " + stats.error().message);
        if (!stats->written)
            return keepOld();
        result.merge = *stats;
    } else if (replacing) {
        return keepOld();
    } else {
        // No rank got as far as its shard: still leave a run file that says why.
        core::Run run;
        run.config.name = m_runName;
        run.config.worldSize = world();
        run.config.commandLine = m_opt.commandLine;
        run.config.createdNs = realtimeNs();
        run.config.endedNs = realtimeNs();
        run.config.status = verdict;
        run.config.failureCause = cause;
        if (auto s = core::saveRun(run, m_out.string(), m_opt.force ? core::RunWriter::Mode::Overwrite
                                                                     : core::RunWriter::Mode::CreateNew);
            !s)
            return core::fail(s.error(), "writing the run file failed: " + s.error().message);
    }
    result.haveRunFile = true;
    return {};
}

core::Result<LaunchResult> Job::run()
{
    // Before the shard folder exists: a signal from here on is the launcher's to handle (it
    // removes the folder), never the default action that would leave the folder behind.
    SignalGuard guard;
    struct BlockAtEnd {
        bool on;
        ~BlockAtEnd()
        {
            if (!on)
                return;
            sigset_t set;
            sigemptyset(&set);
            for (int sig : {SIGINT, SIGTERM, SIGHUP})
                sigaddset(&set, sig);
            pthread_sigmask(SIG_BLOCK, &set, nullptr);
        }
    } blockAtEnd{m_opt.blockSignalsAtEnd}; // destroyed before the guard: no default action between
    struct RemoveRendezvous {
        const std::string& dir;
        ~RemoveRendezvous()
        {
            std::error_code ec;
            if (!dir.empty())
                fs::remove_all(dir, ec);
        }
    } removeRendezvous{m_rendezvousDir};
    if (auto st = prepare(); !st)
        return std::unexpected(st.error());
    const auto interruptedBeforeStart = [&] {
        std::error_code ec;
        fs::remove_all(m_shardDir, ec);
        message(signalName(g_signal) + " received before the workers started; nothing was written");
        LaunchResult result;
        result.interrupted = true;
        result.signal = g_signal;
        result.cause = "interrupted (" + signalName(g_signal) + ") before the workers started";
        return result;
    };
    if (g_signal != 0)
        return interruptedBeforeStart();
    if (auto st = spawnAll(); !st) {
        std::error_code ec;
        fs::remove_all(m_shardDir, ec);
        return std::unexpected(st.error());
    }
    if (m_style == ProgressStyle::Protocol)
        std::fprintf(stderr, "%s\n", jobLine(world(), m_opt.stepsPlanned, m_shardDir).c_str());
    else if (m_style != ProgressStyle::None)
        message(std::to_string(world()) + " worker" + (world() == 1 ? "" : "s")
                + (m_net ? " on " + m_net->describe() : std::string()) + ", shards in " + m_shardDir);
    showPhase(); // starting workers
    loop();

    LaunchResult result;
    result.wallS = secondsSince(m_start);
    result.stopS = m_failures.empty() ? 0 : secondsSince(m_start) - m_failures.firstAtS();
    result.interrupted = m_interrupted;
    result.signal = m_interrupted ? m_signal : 0;
    result.hung = m_hung;
    std::vector<RankEnd> ends;
    for (const Rank& r : m_ranks) {
        result.exitCodes.push_back(exitCodeOf(r.waitStatus));
        ends.push_back(RankEnd{r.rank, r.waitStatus, r.killedByUs, !r.failedCause.empty()});
    }
    const bool allClean = std::all_of(m_ranks.begin(), m_ranks.end(), [](const Rank& r) {
        return WIFEXITED(r.waitStatus) && WEXITSTATUS(r.waitStatus) == 0;
    });
    result.success = m_failures.empty() && allClean;
    const bool anyStep = std::any_of(m_ranks.begin(), m_ranks.end(), [](const Rank& r) { return r.lastStep >= 0; });
    if (result.success && !anyStep && !m_opt.noStepCause.empty()) {
        result.success = false;
        result.cause = m_opt.noStepCause;
    }
    if (!result.success && result.cause.empty()) {
        result.cause = m_failures.cause(ends, m_interrupted);
        if (result.cause.empty())
            result.cause = "a worker failed";
        const FailureEvent* primary = m_failures.primary();
        if (!m_interrupted && primary)
            result.failedRank = primary->rank; // for a hang: the rank that hung
        if (!m_interrupted && primary && primary->rank >= 0) {
            // Show the failing rank's own last words: they are gone with the shards otherwise.
            const Rank& r = m_ranks[size_t(primary->rank)];
            if (!r.errTail.empty()) {
                message("last messages of rank " + std::to_string(r.rank) + ":");
                const size_t from = r.errTail.size() > 5 ? r.errTail.size() - 5 : 0;
                for (size_t i = from; i < r.errTail.size(); ++i)
                    std::fprintf(stderr, "  %s\n", r.errTail[i].c_str());
            }
        }
    }

    if (auto merged = mergeShards(result); !merged) {
        // Keep the shards: they are all there is.
        message(merged.error().message);
        message("the rank shards are kept in " + m_shardDir);
        result.cause = result.success ? merged.error().message : result.cause + "; " + merged.error().message;
        result.success = false;
        return result;
    }
    std::error_code ec;
    if (m_opt.keepShards) {
        message("rank shards and worker logs kept in " + m_shardDir);
    } else {
        fs::remove_all(m_shardDir, ec);
    }
    return result;
}

} // namespace

namespace {

// Whatever keeps a job from starting, the job did not start (ErrorCode::NotStarted; a bad value
// stays a usage error): the code the CLI's exit status follows.
template <class R>
R notStarted(R r)
{
    if (!r && r.error().code != core::ErrorCode::Usage)
        r.error().code = core::ErrorCode::NotStarted;
    return r;
}

core::Status checkLaunchOptionsOnce(const LaunchOptions& o)
{
    if (o.nproc < 1 || o.nproc > kMaxLocalRanks)
        return core::fail(core::ErrorCode::Usage, "--nproc: " + std::to_string(o.nproc) + " is out of range (1 to " + std::to_string(kMaxLocalRanks)
                          + ")");
    for (const auto& [name, value] : {std::pair{"--hang-timeout-s", o.hangTimeoutS}, std::pair{"--startup-timeout-s", o.startupTimeoutS},
                                      std::pair{"--grace-s", o.graceS}, std::pair{"termS", o.termS}})
        if (!std::isfinite(value) || value < 0)
            return core::fail(core::ErrorCode::Usage, std::string(name) + ": expected a finite number >= 0");
    if (o.hosts != 0) {
        if (auto s = checkHostNetwork(o.hosts, o.net); !s)
            return s;
        if (int64_t(o.hosts) * o.nproc > kMaxLocalRanks)
            return core::fail(core::ErrorCode::Usage, "--hosts " + std::to_string(o.hosts) + " x --nproc " + std::to_string(o.nproc)
                              + " is more ranks than one machine starts (" + std::to_string(kMaxLocalRanks) + ")");
    } else if (o.net.gbps > 0 || o.net.needsNetem()) {
        return core::fail(core::ErrorCode::Usage, "--net-gbps, --net-delay-us, --net-jitter-us and --net-loss-pct shape the links between "
                          "emulated hosts: they need --hosts");
    }
    if (o.worker.argv.empty())
        return core::fail("no worker command");
    if (access(o.worker.argv.front().c_str(), X_OK) != 0)
        return core::fail("the worker " + o.worker.argv.front() + " cannot be started: " + std::strerror(errno));
    if (o.out.empty())
        return core::fail("no run file given (--out)");
    std::error_code ec;
    const fs::path out = fs::absolute(o.out, ec);
    if (ec)
        return core::fail("cannot resolve " + o.out + ": " + ec.message());
    if (fs::is_directory(out, ec))
        return core::fail(out.string() + " is a folder; give a file name such as run.db");
    // The script, its data: never replaced by the run file.
    if (auto s = core::refuseOutputIsInput(out.string(), o.inputs); !s)
        return s;
    // The checks of the merge's OutputFile, before any rank starts (not a device, ...).
    auto target = core::checkOutputPath(out.string(), o.force);
    if (!target)
        return std::unexpected(target.error());
    const fs::path parent = fs::path(*target).parent_path();
    if (access(parent.c_str(), W_OK) != 0)
        return core::fail("cannot write into " + parent.string() + ": " + std::strerror(errno));
    return {};
}

} // namespace

core::Status checkLaunchOptions(const LaunchOptions& o) { return notStarted(checkLaunchOptionsOnce(o)); }

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
    return notStarted(job.run());
}

} // namespace lockstep::job
