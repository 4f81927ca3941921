// One rank's training run: rendezvous and process group, clock alignment to rank 0, the
// training loop with its timestamps, the replica check, and the failure edge where every
// c10::Error / std::exception becomes a protocol `failed` line and a failed shard.
#include "lockstep/rt/worker.h"
#include "runtime_torch.h"

#include "lockstep/core/clock_sync.h"
#include "lockstep/core/diagnostics.h"
#include "lockstep/core/stop_signal.h"
#include "lockstep/core/thread_sched.h"
#include "lockstep/core/whatif.h"
#include "lockstep/job/flags.h"
#include "lockstep/job/launcher.h"
#include "lockstep/job/process.h"
#include "lockstep/job/progress.h"
#include "lockstep/job/shard_layout.h"

#include <c10/core/DeviceGuard.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>
#ifdef LOCKSTEP_HAVE_CUPTI
#include "lockstep/rt/cupti_collector.h"
#endif
#ifdef LOCKSTEP_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <time.h>

namespace lockstep::rt {

namespace {

struct DistEnv {
    int rank = 0;
    int world = 1;
    int localRank = 0;
    int localWorld = 1;
    std::string masterAddr;
    int masterPort = 0;
    bool agentStore = false; // torchrun's agent hosts the TCPStore
    std::string restart = "0";
    std::string rendezvousFile; // a local launcher's FileStore (no socket)
};

// Set in the environment of a one-rank run's compute-probe partner (Trainer::probeComputeWithPartner):
// the FileStore of the probe's two-process group. The partner's flags are the rank's own.
constexpr const char* kEnvComputeProbePartner = "LOCKSTEP_COMPUTE_PROBE_PARTNER";
// How long the rank waits for its partner to join or finish (at most the run's --timeout).
constexpr std::chrono::milliseconds kProbePartnerTimeout{30000};

// A signal to stop (a launcher's SIGTERM, Ctrl-C, a hang-up) must not lose the steps this rank
// completed whose commits are still queued for the recorder's writer: the process's stop-signal
// thread (core::onStopSignal) finishes the recorder (commits the queue, marks the shard "stopped by
// SIG...") before the exit. Whoever finishes the recorder holds g_stopMutex, so it is finished
// once; the signal's cleanup keeps it to the exit, so no step is queued after it.
std::mutex g_stopMutex;
Recorder* g_stopRecorder = nullptr; // the recorder a signal finishes (Trainer::setup, finishRecorder)

void finishOnSignal()
{
    // Before any other thread exists (gloo's, torch's, the writer's): they inherit the mask.
    core::onStopSignal([](int sig) {
        g_stopMutex.lock();
        if (g_stopRecorder)
            (void)g_stopRecorder->finish(core::RunStatus::Failed, "stopped by " + job::signalName(sig));
        std::fflush(stdout);
    });
}

int envInt(const char* name, int fallback, bool* found = nullptr)
{
    const char* v = std::getenv(name);
    if (!v || !*v)
        return fallback;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (*end != '\0' || x < 0 || x > (1 << 24))
        throw std::invalid_argument(std::string("environment variable ") + name + "='" + v + "' is not a valid number");
    if (found)
        *found = true;
    return static_cast<int>(x);
}

DistEnv readEnv()
{
    DistEnv e;
    bool haveRank = false, haveWorld = false;
    e.rank = envInt("RANK", -1, &haveRank);
    e.world = envInt("WORLD_SIZE", -1, &haveWorld);
    if (!haveRank)
        e.rank = envInt("SLURM_PROCID", 0);
    if (!haveWorld)
        e.world = envInt("SLURM_NTASKS", 1);
    e.localRank = envInt("LOCAL_RANK", -1);
    if (e.localRank < 0)
        e.localRank = envInt("SLURM_LOCALID", 0);
    e.localWorld = envInt("LOCAL_WORLD_SIZE", -1);
    if (e.localWorld < 0)
        e.localWorld = envInt("SLURM_NTASKS_PER_NODE", e.world);
    if (e.world < 1)
        throw std::invalid_argument("WORLD_SIZE must be at least 1");
    if (e.rank >= e.world)
        throw std::invalid_argument("RANK " + std::to_string(e.rank) + " is not below WORLD_SIZE "
                                    + std::to_string(e.world));
    if (const char* a = std::getenv("MASTER_ADDR"))
        e.masterAddr = a;
    e.masterPort = envInt("MASTER_PORT", 0);
    if (const char* f = std::getenv(job::kEnvRendezvousFile))
        e.rendezvousFile = f;
    if (e.world > 1 && e.rendezvousFile.empty() && (e.masterAddr.empty() || e.masterPort == 0))
        throw std::invalid_argument("WORLD_SIZE > 1 needs MASTER_ADDR and MASTER_PORT (the rendezvous; under srun, "
                                    "export them: the first node's address and a free port)");
    if (e.masterPort > 65535)
        throw std::invalid_argument("MASTER_PORT out of range");
    if (const char* s = std::getenv("TORCHELASTIC_USE_AGENT_STORE"))
        e.agentStore = std::string(s) == "True" || std::string(s) == "1";
    if (const char* s = std::getenv("TORCHELASTIC_RESTART_COUNT"))
        e.restart = s;
    return e;
}

std::string envText(const char* name)
{
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

std::string hostName()
{
    char buf[256] = {};
    gethostname(buf, sizeof buf - 1);
    return buf;
}

std::string commandLine()
{
    std::ifstream f("/proc/self/cmdline", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (auto& c : all)
        if (c == '\0')
            c = ' ';
    while (!all.empty() && all.back() == ' ')
        all.pop_back();
    return all;
}

bool isLoopback(const std::string& addr)
{
    return addr.rfind("127.", 0) == 0 || addr == "localhost" || addr == "::1";
}

// The rendezvous. A local launcher (`lockstep run`) gives a file in the job's private shard
// folder: a c10d FileStore needs no socket, so nothing of a local run listens beyond loopback
// (torch 1.13's TCPStore server listens on every interface). Under torchrun and srun the
// cluster's own rendezvous (MASTER_ADDR/MASTER_PORT, torchrun's agent store) is used unchanged.
c10::intrusive_ptr<c10d::Store> makeStore(const DistEnv& env, std::chrono::milliseconds timeout)
{
    if (env.world == 1 && env.masterAddr.empty() && env.rendezvousFile.empty())
        return c10::make_intrusive<c10d::HashStore>();
    if (!env.rendezvousFile.empty()) {
        auto file = c10::make_intrusive<c10d::FileStore>(env.rendezvousFile, env.world);
        file->setTimeout(timeout);
        return file;
    }
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(env.masterPort);
    o.isServer = env.rank == 0 && !env.agentStore;
    o.numWorkers = env.world;
    o.waitWorkers = false;
    o.timeout = timeout;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(env.masterAddr, o);
    // torchrun's agent store outlives restarts and other jobs: keep our keys apart.
    return c10::make_intrusive<c10d::PrefixStore>("lockstep/" + env.restart, tcp);
}

// This host's address on the interface that reaches `masterAddr` (the route's source address: a
// UDP socket "connected" there sends nothing). "" when it cannot be found. Binding gloo there,
// rather than to whatever this host's name resolves to (Debian maps it to 127.0.1.1), is what
// lets ranks on other hosts connect, without listening on every interface.
std::string addressTowards(const std::string& masterAddr, int port)
{
    addrinfo hints {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port > 0 ? port : 29500);
    if (getaddrinfo(masterAddr.c_str(), service.c_str(), &hints, &found) != 0 || !found)
        return {};
    std::string out;
    for (addrinfo* a = found; a && out.empty(); a = a->ai_next) {
        const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        sockaddr_storage local {};
        socklen_t len = sizeof local;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0
            && getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
            char text[INET6_ADDRSTRLEN] = {};
            const void* bytes = local.ss_family == AF_INET
                ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
            if (inet_ntop(local.ss_family, bytes, text, sizeof text))
                out = text;
        }
        close(fd);
    }
    freeaddrinfo(found);
    return out;
}

c10::intrusive_ptr<CommGroup> makeGlooGroup(const DistEnv& env, const c10::intrusive_ptr<c10d::Store>& store,
                                                    std::chrono::milliseconds timeout)
{
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    // Bind where the other ranks can reach us, and only there: the named interface (torchrun's
    // GLOO_SOCKET_IFNAME; `lockstep run --hosts` names eth0), loopback for a local rendezvous,
    // else the address of the interface that reaches MASTER_ADDR (this host's resolved name as
    // the last resort, which is gloo's own default).
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else if (env.masterAddr.empty() || isLoopback(env.masterAddr))
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else if (const std::string local = addressTowards(env.masterAddr, env.masterPort); !local.empty() && !isLoopback(local))
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(local));
    else
        opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    opts->threads = 2; // what torch.distributed uses, so the peer benchmark compares like with like
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world, opts);
}

c10::intrusive_ptr<CommGroup> makeProcessGroup(const WorkerOptions& o, const DistEnv& env,
                                                        const c10::intrusive_ptr<c10d::Store>& store,
                                                        std::chrono::milliseconds timeout)
{
    if (o.backend == "nccl") {
#ifdef LOCKSTEP_HAVE_NCCL
        auto opts = c10d::ProcessGroupNCCL::Options::create();
        opts->timeout = timeout;
        return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world, opts);
#else
        throw std::invalid_argument("--backend nccl needs a CUDA build of LibTorch; this build has gloo only");
#endif
    }
    return makeGlooGroup(env, store, timeout);
}

std::vector<uint8_t> encode(int64_t v)
{
    const std::string s = std::to_string(v);
    return {s.begin(), s.end()};
}
int64_t decode(const std::vector<uint8_t>& v) { return std::stoll(std::string(v.begin(), v.end())); }

// Clock alignment by ping-pong (docs/design.md "Time and clocks"). Rank r stamps t0 and sends a
// ping; rank 0, serving ranks one after another, answers each ping with its own clock T; rank r
// stamps t1 when the answer arrives. If the two legs take equal time, T was read at r's
// (t0+t1)/2, so offset = T - (t0+t1)/2 with an error of at most half the round trip t1-t0. Of
// kSamples exchanges the one with the smallest round trip is kept: it is the one least disturbed
// by scheduling and queueing.
//
// The exchange goes over the gloo process group when there is one (a direct TCP pair between the
// two ranks, no store server in between: round trips of 0.1 ms on a quiet machine), and over the
// rendezvous store otherwise (NCCL runs). A TCPStore would do, but the FileStore of a local run
// polls its file every 10 ms: round trips of tens of milliseconds, offsets uncertain by as much
// (so a local NCCL run's offsets are that coarse; its ranks share one host clock anyway).
// Many exchanges, the best kept (clock_sync.h bestClockExchange): 16 round trips of ~0.1 ms over
// gloo cost a few ms once at start. Ranks with rank 0's boot id take no offset at all (the
// reader's rule); the exchange matters across hosts.
constexpr int kClockSamples = 16;
// Tags of the clock exchange: above any bucket index (the reducer's pairwise exchange tags).
constexpr int kClockTag = 1 << 20;

struct ClockResult {
    TimeNs offset = 0, rtt = 0, uncertainty = 0, at = 0;
};

ClockResult keepBest(const std::vector<core::ClockExchange>& exchanges)
{
    ClockResult out;
    out.at = nowNs();
    if (const auto best = core::bestClockExchange(exchanges))
        out = {best->offsetNs, best->rttNs, best->uncertaintyNs, best->atNs};
    return out;
}

ClockResult syncClockOverGroup(CommGroup& pg, const DistEnv& env, std::chrono::milliseconds timeout)
{
    std::vector<at::Tensor> buf{torch::zeros({1}, torch::kLong)};
    if (env.rank == 0) {
        for (int r = 1; r < env.world; ++r)
            for (int i = 0; i < kClockSamples; ++i) {
                pg.recv(buf, r, kClockTag + i)->wait(timeout);
                buf[0].fill_(static_cast<int64_t>(nowNs()));
                pg.send(buf, r, kClockTag + i)->wait(timeout);
            }
        return ClockResult{0, 0, 0, nowNs()};
    }
    std::vector<core::ClockExchange> exchanges;
    for (int i = 0; i < kClockSamples; ++i) {
        const TimeNs t0 = nowNs();
        pg.send(buf, 0, kClockTag + i)->wait(timeout);
        pg.recv(buf, 0, kClockTag + i)->wait(timeout);
        const TimeNs t1 = nowNs();
        exchanges.push_back({t0, buf[0].item<int64_t>(), t1});
    }
    return keepBest(exchanges);
}

ClockResult syncClock(c10d::Store& store, CommGroup* gloo, const DistEnv& env, const std::string& phase,
                      std::chrono::milliseconds timeout)
{
    if (env.world == 1)
        return ClockResult{0, 0, 0, nowNs()};
    if (gloo)
        return syncClockOverGroup(*gloo, env, timeout);
    if (env.rank == 0) {
        for (int r = 1; r < env.world; ++r)
            for (int i = 0; i < kClockSamples; ++i) {
                const std::string k = "clock/" + phase + "/" + std::to_string(r) + "/" + std::to_string(i);
                store.get(k + "/ping");
                store.set(k + "/pong", encode(nowNs()));
            }
        return ClockResult{0, 0, 0, nowNs()};
    }
    std::vector<core::ClockExchange> exchanges;
    for (int i = 0; i < kClockSamples; ++i) {
        const std::string k = "clock/" + phase + "/" + std::to_string(env.rank) + "/" + std::to_string(i);
        const TimeNs t0 = nowNs();
        store.set(k + "/ping", encode(t0));
        const TimeNs remote = decode(store.get(k + "/pong"));
        const TimeNs t1 = nowNs();
        exchanges.push_back({t0, remote, t1});
    }
    return keepBest(exchanges);
}

// A hash of every parameter's bytes (FNV-1a over 64-bit words): equal replicas hash equal.
int64_t paramHash(const std::vector<torch::Tensor>& params)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (const auto& p : params) {
        auto c = p.detach().cpu().contiguous();
        const auto* bytes = static_cast<const unsigned char*>(c.data_ptr());
        const size_t n = c.numel() * c.element_size();
        for (size_t i = 0; i < n; ++i)
            h = (h ^ bytes[i]) * 0x100000001B3ull;
    }
    return static_cast<int64_t>(h >> 1); // positive: its negation is representable
}

std::string expandRank(std::string path, int rank, int world)
{
    const auto pos = path.find("{rank}");
    if (pos != std::string::npos)
        return path.replace(pos, 6, std::to_string(rank));
    if (world > 1)
        return path + ".rank" + std::to_string(rank);
    return path;
}

std::string oneLine(std::string s)
{
    for (auto& c : s)
        if (c == '\n' || c == '\r')
            c = ' ';
    // c10::Error appends a C++ backtrace after "Exception raised from"; the cause stays short.
    if (auto p = s.find(" Exception raised from"); p != std::string::npos)
        s.resize(p);
    return s;
}

#ifdef LOCKSTEP_HAVE_CUPTI
// The CUPTI collector as the recorder's device activity (recorder.h).
class CuptiActivity : public DeviceActivity {
public:
    explicit CuptiActivity(std::unique_ptr<CuptiCollector> c) : m_collector(std::move(c)) {}
    core::Status flush(std::vector<core::Span>& out, const LaneResolver& lane, const Interner& intern) override
    {
        return m_collector->flush(out, lane, intern);
    }
    std::vector<core::Diagnostic> diagnostics() const override { return m_collector->diagnostics(); }
    CuptiCollector& collector() { return *m_collector; }

private:
    std::unique_ptr<CuptiCollector> m_collector;
};
#endif

#ifdef LOCKSTEP_HAVE_CUPTI
// Runs before a node of backward executes, on the thread that executes it.
struct PreHook : torch::autograd::FunctionPreHook {
    std::function<void()> fn;
    explicit PreHook(std::function<void()> f) : fn(std::move(f)) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& grads) override
    {
        fn();
        return grads;
    }
};

// Whether this thread carries a step's tag (Trainer::tagBackwardThread).
thread_local bool t_stepTagged = false;
#endif

class Trainer {
public:
    Trainer(const WorkerOptions& o) : m_o(o) {}
    int run();
    // The second process of a one-rank run's compute probe (probeComputeWithPartner): joins the
    // probe's two-process group at the FileStore `storePath`, takes its turns, returns.
    void probePartner(const std::string& storePath);

private:
    void setup();
    // setup()'s steps, in the order it takes them.
    struct StartupComputeProbe {
        std::optional<core::ComputeProbe> probe;
        std::string cost; // its cost and turns, or why a one-rank run has none
    };
    int setThreads();
    void connect();
    StartupComputeProbe probeComputeAtStartup();
    ReducerOptions reducerOptions();
    void printBucketLayout(int threads);
    void syncClockAndDescribeRank();
    std::vector<core::LinkProbePoint> probeLinkAtStartup();
    void makeOptimizer();
    core::RunConfig runConfig(const ReducerOptions& ro, int threads);
    ModelLayout modelLayout(std::vector<std::vector<int64_t>>& numel);
    void startRecording(const ReducerOptions& ro, int threads, const std::vector<core::LinkProbePoint>& linkProbe,
                        const StartupComputeProbe& computeProbe);
    std::optional<core::ComputeProbe> probeCompute(CommGroup& pg, int64_t localRank, int64_t localWorld,
                                                   int* repeatsOut);
    std::optional<core::ComputeProbe> probeComputeWithPartner(int* repeatsOut, std::string* whyNot);
    void buildModel(int rank, int world);
    core::Status finishRecorder(core::RunStatus status, const std::string& cause);
    std::pair<int64_t, int64_t> localByHost();
    void trainStep(int step);
    void replicaCheck(int step);
    void throwIfRecordingFailed();
    // The process group when it is gloo (the clock exchange goes over it), else nullptr.
    CommGroup* glooGroup() const { return m_o.backend == "gloo" ? m_pg.get() : nullptr; }
    // A small tensor for a collective of this rank's group (NCCL takes device tensors only).
    torch::Tensor forGroup(torch::Tensor t) const { return m_o.backend == "nccl" ? t.to(m_device) : t; }
    // Waits for the device's queued work (nothing on the CPU).
    void syncDevice() const
    {
        if (m_device.is_cuda())
            torch::cuda::synchronize(m_device.index());
    }
    void selectDevice();
    // Device work tags (CUPTI external correlation ids): what is launched between push and pop on
    // the calling thread belongs to that step (and bucket). No-ops without a collector.
    void tagPush(int32_t step, int32_t bucket);
    void tagPop();
    void tagBackwardThread(const torch::Tensor& objective);

    const WorkerOptions& m_o;
    DistEnv m_env;
    torch::Device m_device{torch::kCPU};
    std::optional<c10::DeviceGuard> m_deviceGuard; // the training thread's current device
    std::unique_ptr<DeviceActivity> m_deviceActivity; // until the recorder takes it
    std::string m_deviceActivityMissing;              // why there is none on a GPU run
#ifdef LOCKSTEP_HAVE_CUPTI
    CuptiCollector* m_cupti = nullptr; // owned by the recorder (through m_deviceActivity)
    int m_cuptiAlternate = 0;          // LOCKSTEP_CUPTI_ALTERNATE: blocks of steps with CUPTI on, off, on...
#endif
    std::atomic<int32_t> m_launchStep{core::kNoStep}; // the step backward's threads tag their work with
    std::thread::id m_trainingThread = std::this_thread::get_id();
    std::chrono::milliseconds m_timeout{30000};
    c10::intrusive_ptr<c10d::Store> m_store;
    c10::intrusive_ptr<CommGroup> m_pg;
    ModelSpec m_spec;
    std::unique_ptr<Model> m_model;
    std::unique_ptr<Dataset> m_data;
    std::unique_ptr<Sampler> m_sampler;
    GradBuffers m_gradBuffers;
    std::unique_ptr<Reducer> m_reducer;
    std::unique_ptr<torch::optim::Optimizer> m_opt;
    std::unique_ptr<Recorder> m_recorder;
    core::RankInfo m_rankInfo;
    std::unique_ptr<StepRecord> m_scratch; // used when not recording
    int m_completedSteps = 0;
    std::string m_phase = "setup: "; // prefix of a failure cause: where it happened
    bool m_envRead = false;          // m_env holds this rank's rank and world size
};

// The straggler's injected delay: extra compute at the start of backward, so every bucket of
// this rank launches late, and the others wait for it in their all-reduces. Compute, not a
// sleep: `cpuNs` of this thread's CPU time, so that where ranks share cores (more local ranks
// than cores) the extra work competes for them as real work would; a sleep would hand its core
// to the other ranks and shrink the delay it stands for.
static std::function<void()> burnThreadCpu(int64_t cpuNs)
{
    return [cpuNs] {
        auto threadCpuNs = [] {
            timespec ts{};
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
            return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
        };
        const int64_t until = threadCpuNs() + cpuNs;
        volatile double sink = 1.0;
        while (threadCpuNs() < until)
            for (int i = 0; i < 1000; ++i)
                sink = sink * 1.0000001 + 1e-9;
    };
}

void Trainer::setup()
{
    m_phase = "environment: ";
    m_env = readEnv();
    m_envRead = true;
    m_phase = "setup: ";
    m_timeout = std::chrono::milliseconds(static_cast<int64_t>(m_o.timeoutS * 1000.0));
    // The rules that need the world size (a rank that exists, a dataset of a global batch):
    // `lockstep run` checked them before starting; a worker started by hand learns the world here.
    if (auto ok = job::checkOptions(m_o, m_env.world); !ok)
        throw std::invalid_argument(ok.error().message);
    selectDevice();
    const int threads = setThreads();
    buildModel(m_env.rank, m_env.world);
    connect();
    // Before the Reducer exists: no gradient hook fires, no bucket launches.
    const StartupComputeProbe computeProbe = m_o.record ? probeComputeAtStartup() : StartupComputeProbe{};
    const ReducerOptions ro = reducerOptions();
    m_reducer = std::make_unique<Reducer>(m_model->params, m_pg, ro, &m_gradBuffers);
    if (!m_o.quiet)
        printBucketLayout(threads);
    syncClockAndDescribeRank();
    m_reducer->broadcastParameters();
    const std::vector<core::LinkProbePoint> linkProbe = probeLinkAtStartup();
    makeOptimizer();
    if (m_o.record)
        startRecording(ro, threads, linkProbe, computeProbe);
    else
        m_scratch = std::make_unique<StepRecord>();
}

// --threads, or 0: the cores shared among the host's ranks. Returns what was set.
int Trainer::setThreads()
{
    int threads = m_o.threads;
    if (threads <= 0)
        threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / std::max(1, m_env.localWorld));
    at::set_num_threads(threads);
    return threads;
}

// The store and the process group, with the rank's phase before and after for the launcher.
void Trainer::connect()
{
    // Where the rank is before its first step, for the launcher's progress (progress.h).
    const auto phase = [this](job::Phase p) {
        std::printf("%s\n", job::phaseLine(m_env.rank, p).c_str());
        std::fflush(stdout);
    };
    phase(job::Phase::Rendezvous);
    m_store = makeStore(m_env, m_timeout);
    m_pg = makeProcessGroup(m_o, m_env, m_store, m_timeout);
    phase(job::Phase::WarmUp);
}

// Compute beside the host's other ranks and alone (whatif.h, kComputeProbeKey).
Trainer::StartupComputeProbe Trainer::probeComputeAtStartup()
{
    StartupComputeProbe out;
    m_phase = "probing compute: ";
    const TimeNs t0 = nowNs();
    int repeats = 0;
    std::string whyNot, who = ", with a partner process";
    if (m_env.world > 1) {
        const auto [localRank, localWorld] = localByHost();
        out.probe = probeCompute(*m_pg, localRank, localWorld, &repeats);
        who = ", local rank " + std::to_string(localRank) + " of " + std::to_string(localWorld) + " on its host";
    } else {
        out.probe = probeComputeWithPartner(&repeats, &whyNot);
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f ms, %d turn%s", static_cast<double>(nowNs() - t0) / 1e6, repeats,
                  repeats == 1 ? "" : "s");
    out.cost = out.probe ? buf + who : whyNot;
    m_phase = "setup: ";
    return out;
}

ReducerOptions Trainer::reducerOptions()
{
    ReducerOptions ro;
    ro.firstBucketBytes = std::max<int64_t>(1, static_cast<int64_t>(m_o.firstBucketMb * 1024 * 1024));
    ro.bucketBytes = std::max<int64_t>(1, static_cast<int64_t>(m_o.bucketMb * 1024 * 1024));
    ro.compress = m_o.compress == "fp16" ? Compress::Fp16 : m_o.compress == "bf16" ? Compress::Bf16 : Compress::None;
    ro.linkGbps = m_o.linkGbps;
    ro.timeout = m_timeout;
    ro.hostCompletion = m_o.backend != "nccl";
#ifdef LOCKSTEP_HAVE_CUPTI
    if (m_cupti) {
        ro.launchBegin = [this](int b) { tagPush(m_launchStep.load(), b); };
        ro.launchEnd = [this](int) { tagPop(); };
    }
#endif
    // LOCKSTEP_PAIRWISE=0: gloo's ring all-reduce on two ranks too (for comparisons)
    if (const char* pw = std::getenv("LOCKSTEP_PAIRWISE"); pw && std::string(pw) == "0")
        ro.pairwise = false;
    if (m_o.stragglerRank == m_env.rank && m_o.stragglerMs > 0)
        ro.firstGradHook = burnThreadCpu(static_cast<int64_t>(m_o.stragglerMs * 1e6));
    return ro;
}

// The bucket layout, so a comparison with torch's DDP can check both sides bucket alike
// (bench/runtime/ddp_peer.py prints the same from DDP's rebuilt buckets).
void Trainer::printBucketLayout(int threads)
{
    std::string sizes;
    for (size_t b = 0; b < m_reducer->bucketParams().size(); ++b)
        sizes += (b ? "," : "") + std::to_string(m_reducer->bucketBytes(static_cast<int>(b)));
    std::printf("%s\n", job::layoutLine(m_env.rank, m_reducer->bucketParams().size(), sizes, threads,
                                        m_reducer->pairwise()).c_str());
    std::fflush(stdout);
}

// The clock exchange (collective), and this rank's row.
void Trainer::syncClockAndDescribeRank()
{
    const ClockResult clock = syncClock(*m_store, glooGroup(), m_env, "start", m_timeout);
    m_rankInfo.rank = m_env.rank;
    m_rankInfo.host = hostName();
    m_rankInfo.bootId = core::readBootId();
    m_rankInfo.pid = getpid();
    m_rankInfo.device = m_device.str();
    m_rankInfo.clockOffsetNs = clock.offset;
    m_rankInfo.clockRttNs = clock.rtt;
    m_rankInfo.clockUncertaintyNs = clock.uncertainty;
    m_rankInfo.clockSyncStartNs = clock.at;
}

// The link at three small sizes (whatif.h, kLinkProbeKey: kLinkProbeBytes, the fastest of
// kLinkProbeRepeats each; ~30 ms on 127.0.0.1): lets `lockstep predict` tell the link's
// latency from its bandwidth when the run's own buckets all have one size. Recording runs of
// more than one rank only (collective).
std::vector<core::LinkProbePoint> Trainer::probeLinkAtStartup()
{
    std::vector<core::LinkProbePoint> probe;
    if (m_o.record && m_env.world > 1) {
        m_phase = "probing the link: ";
        for (const auto& [bytes, ns] : m_reducer->probeLink({core::kLinkProbeBytes.begin(), core::kLinkProbeBytes.end()}, core::kLinkProbeRepeats))
            probe.push_back({bytes, ns});
        m_phase = "setup: ";
    }
    return probe;
}

void Trainer::makeOptimizer()
{
    if (m_o.optimizer == "adamw")
        m_opt = std::make_unique<torch::optim::AdamW>(m_model->params, torch::optim::AdamWOptions(m_o.lr));
    else
        m_opt = std::make_unique<torch::optim::SGD>(m_model->params,
                                                    torch::optim::SGDOptions(m_o.lr).momentum(job::kMomentum));
}

// The run's configuration as this rank records it (the probes and parameter sizes aside).
core::RunConfig Trainer::runConfig(const ReducerOptions& ro, int threads)
{
    core::RunConfig c;
    // Every training option, under the flag table's keys (lr, seed, micro_batch, threads,
    // timeout_s, dataset_size, straggler, crash, check_every); the columns below hold the rest.
    job::recordOptions(m_o, c);
    if (const std::string net = envText(job::kEnvEmulatedNet); !net.empty())
        c.extra["emulated_net"] = net; // `lockstep run --hosts`: the hosts and their links
    c.name = m_o.runName.empty() ? envText(job::kEnvRunName) : m_o.runName;
    c.model = m_o.model;
    c.modelArgs = m_model->args;
    c.worldSize = m_env.world;
    c.backend = m_o.backend;
    c.device = m_o.device;
    c.bucketCapBytes = ro.bucketBytes;
    c.firstBucketCapBytes = ro.firstBucketBytes;
    c.batchPerRank = int64_t{m_o.batch} * m_o.accumulate;
    c.stepsPlanned = m_o.steps;
    c.warmupSteps = m_o.warmup;
    c.optimizer = m_o.optimizer;
    c.compress = m_o.compress;
    c.accumulate = m_o.accumulate;
    c.linkGbps = m_o.linkGbps;
    c.commandLine = commandLine();
    c.host = m_rankInfo.host;
    // The LibTorch the worker was built against (the header's "1.13.0", "2.11.0").
    c.frameworkVersion = std::string("torch ") + TORCH_VERSION;
    c.createdNs = nowNs();
    c.status = core::RunStatus::Running;
    // Resolved values, what actually ran: --threads 0 means cores / local ranks.
    c.extra["threads"] = std::to_string(threads);
    // As asked (0 = automatic): what makes runs comparable across world sizes (comparison.h).
    c.extra["threads_requested"] = std::to_string(m_o.threads);
    c.extra["momentum"] = m_o.optimizer == "sgd" ? job::formatNumber(job::kMomentum) : std::string("-");
    c.extra["local_rank"] = std::to_string(m_env.localRank);
    c.extra["rendezvous"] = !m_env.rendezvousFile.empty()           ? std::string("file store in the shard folder")
        : m_env.world == 1 && m_env.masterAddr.empty()                ? std::string("none (world of one)")
                                                                      : m_env.masterAddr + ":" + std::to_string(m_env.masterPort)
            + (m_env.agentStore ? " (torchrun agent store)" : "");
    c.extra["grad_ready"] = "gradient accumulator post-hooks";
    c.extra["allreduce"] = m_reducer->pairwise() ? "pairwise send/recv exchange (world of 2)" : "process group allreduce";
#ifdef LOCKSTEP_HAVE_CUPTI
    if (m_cuptiAlternate > 0)
        c.extra["cupti_alternate"] = std::to_string(m_cuptiAlternate)
            + " (benchmark: device activity recorded in every other block of this many steps)";
#endif
    return c;
}

// The model's stages and the Reducer's buckets; `numel` gets each bucket's parameter sizes.
ModelLayout Trainer::modelLayout(std::vector<std::vector<int64_t>>& numel)
{
    ModelLayout layout;
    layout.stageNames = m_model->stageNames;
    layout.paramNames = m_model->paramNames;
    layout.paramStage = m_model->paramStage;
    layout.paramBucket = m_reducer->paramBucket();
    const auto& bp = m_reducer->bucketParams();
    numel.assign(bp.size(), {});
    for (size_t b = 0; b < bp.size(); ++b) {
        core::Bucket bucket;
        bucket.index = static_cast<int32_t>(b);
        bucket.bytes = m_reducer->bucketBytes(static_cast<int>(b));
        for (int32_t p : bp[b]) {
            bucket.params.push_back(m_model->paramNames[p]);
            numel[b].push_back(m_model->params[p].numel());
        }
        layout.buckets.push_back(std::move(bucket));
    }
    return layout;
}

// The shard: the configuration with the probes, the layout, and the recorder that a signal
// finishes.
void Trainer::startRecording(const ReducerOptions& ro, int threads, const std::vector<core::LinkProbePoint>& linkProbe,
                             const StartupComputeProbe& computeProbe)
{
    core::RunConfig c = runConfig(ro, threads);
    std::vector<std::vector<int64_t>> numel;
    const ModelLayout layout = modelLayout(numel);
    // Parameter sizes, so `lockstep predict` can re-bucket at other caps (whatif.h).
    c.extra[core::kParamNumelKey] = core::formatParamNumel(numel);
    if (!linkProbe.empty())
        c.extra[core::kLinkProbeKey] = core::formatLinkProbe(linkProbe);
    if (computeProbe.probe)
        c.extra[core::kComputeProbeKey] = core::formatComputeProbe(*computeProbe.probe);
    // Its cost and turns, or why a one-rank run has none (not read by the model).
    if (!computeProbe.cost.empty())
        c.extra["compute_probe_startup"] = computeProbe.cost;
    std::string dir = m_o.outDir.empty() ? envText(job::kEnvShardDir) : m_o.outDir;
    if (dir.empty())
        dir = ".";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::string path = job::shardFile(dir, m_env.rank);
    // Another run's shard is not replaced without --force (a launcher's shard folder is new).
    if (!m_o.force && std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
        throw std::runtime_error(path + " already exists; pass --force to replace it");
    auto rec = Recorder::open(path, c, m_rankInfo, layout, std::move(m_deviceActivity));
    if (!rec)
        throw std::runtime_error("cannot record into " + path + ": " + rec.error().message);
    m_recorder = std::move(*rec);
    if (!m_deviceActivityMissing.empty())
        m_recorder->addDiagnostic(core::makeDiagnostic(core::DiagnosticKind::DeviceActivityNotRecorded, 1,
                                                       m_deviceActivityMissing));
    std::lock_guard lock(g_stopMutex);
    g_stopRecorder = m_recorder.get();
}

// The startup compute probe (whatif.h, kComputeProbeKey). Collective: every rank calls it (a
// recording run of more than one rank) and they agree first on the most ranks any host runs;
// nothing is probed when that is one. One pass is forward + loss + backward of one micro-batch,
// the batch of step 0 (Dataset::batch and Sampler::indices draw from their own per-sample
// generators, seeded by index: nothing training reads later changes; the models have no dropout
// and the pass draws no random numbers, so torch's generator is untouched too). The passes
// accumulate into the parameters' .grad like training does; at the end every .grad is undefined
// again, as the Reducer expects to find it (it makes them views of its buckets). Ranks waiting for
// their turn block in gloo's barrier: the caller waits on the work's condition variable and
// gloo's pairs wait on theirs (tcp transport, no busy polling), so a waiting rank takes no core
// (measured: a rank that waited 103 ms there used 0.5 ms of its process's CPU time).
// Returns this rank's times.
std::optional<core::ComputeProbe> Trainer::probeCompute(CommGroup& pg, int64_t localRank, int64_t localWorld,
                                                        int* repeatsOut)
{
    const auto agreeMax = [&](int64_t v) {
        std::vector<torch::Tensor> t{forGroup(torch::tensor({v}, torch::kLong))};
        c10d::AllreduceOptions opts;
        opts.reduceOp = c10d::ReduceOp::MAX;
        pg.allreduce(t, opts)->wait(m_timeout);
        return t[0][0].item<int64_t>();
    };
    // Hosts may run different numbers of ranks: the most any host runs keeps every rank in the
    // same collectives.
    const int64_t turns = agreeMax(localWorld);
    if (turns < 2)
        return std::nullopt;
    auto [cpuInput, cpuTarget] = m_data->batch(m_sampler->indices(0));
    const torch::Tensor input = cpuInput.to(m_device), target = cpuTarget.to(m_device);
    const auto pass = [&] {
        const TimeNs start = nowNs();
        torch::Tensor x = input;
        for (auto& stage : m_model->stages)
            x = stage->forward(x);
        m_model->loss(x, target).backward();
        syncDevice(); // on a GPU: the pass is done when its kernels are
        return nowNs() - start;
    };
    // Untimed warm-up (first-touch allocations, kernel selection), all ranks at once; the slowest
    // rank's last warm-up pass (a together pass) sets the repetitions: the turns (each local rank
    // alone, then all together: at most turns + 1 such passes) fit kComputeProbeBudgetMs, at least
    // one, at most kComputeProbeRepeats.
    pg.barrier()->wait(m_timeout);
    TimeNs lastWarm = 0;
    for (int i = 0; i < core::kComputeProbeWarmupPasses; ++i)
        lastWarm = pass();
    const int64_t warm = std::max<int64_t>(1, agreeMax(lastWarm));
    const int repeats = static_cast<int>(std::clamp<int64_t>(
        core::kComputeProbeBudgetMs * 1'000'000 / (warm * (turns + 1)), 1, core::kComputeProbeRepeats));
    *repeatsOut = repeats;
    core::ComputeProbe probe;
    probe.aloneNs = std::numeric_limits<int64_t>::max();
    probe.togetherNs = std::numeric_limits<int64_t>::max();
    probe.ranksOnHost = static_cast<int32_t>(turns);
    // Alone and together take turns, so that a burst of load beside the job hits both alike; the
    // fastest of each is kept (noise only adds).
    for (int i = 0; i < repeats; ++i) {
        for (int64_t turn = 0; turn < turns; ++turn) {
            pg.barrier()->wait(m_timeout);
            if (turn == localRank)
                probe.aloneNs = std::min<int64_t>(probe.aloneNs, pass());
        }
        pg.barrier()->wait(m_timeout);
        probe.togetherNs = std::min<int64_t>(probe.togetherNs, pass());
    }
    pg.barrier()->wait(m_timeout);
    for (torch::Tensor& p : m_model->params)
        p.mutable_grad() = torch::Tensor();
    if (probe.aloneNs == std::numeric_limits<int64_t>::max()) // a local rank beyond the turns (not torchrun's)
        return std::nullopt;
    return probe;
}

// This rank's index among the ranks on its host and their number, from every rank's host name over
// the store (not LOCAL_RANK / LOCAL_WORLD_SIZE: a launcher that sets neither would make every rank
// local rank 0, and the compute probe's "alone" turns would all run at once).
std::pair<int64_t, int64_t> Trainer::localByHost()
{
    const std::string me = hostName();
    const std::string prefix = "compute-probe-host/";
    m_store->set(prefix + std::to_string(m_env.rank), std::vector<uint8_t>(me.begin(), me.end()));
    int64_t localRank = 0, localWorld = 0;
    for (int r = 0; r < m_env.world; ++r) {
        const std::vector<uint8_t> v = r == m_env.rank ? std::vector<uint8_t>(me.begin(), me.end())
                                                       : m_store->get(prefix + std::to_string(r));
        if (std::string(v.begin(), v.end()) == me) {
            localRank += r < m_env.rank;
            ++localWorld;
        }
    }
    return {localRank, localWorld};
}

core::Status Trainer::finishRecorder(core::RunStatus status, const std::string& cause)
{
    std::lock_guard lock(g_stopMutex);
    g_stopRecorder = nullptr;
#ifdef LOCKSTEP_HAVE_CUPTI
    m_cupti = nullptr; // the recorder owns the collector and ends it now
#endif
    auto s = m_recorder->finish(status, cause);
    m_recorder.reset();
    return s;
}

void Trainer::buildModel(int rank, int world)
{
    m_spec = ModelSpec{m_o.model, m_o.layers, m_o.width, m_o.heads, m_o.seq};
    // Seeded per rank on purpose: the broadcast of rank 0's parameters is what makes the
    // replicas equal, and the exactness tests would catch it missing.
    m_model = makeModel(m_spec, m_o.seed * 1000003ull + static_cast<uint64_t>(rank));
    // In place: the parameters keep their identity (Model::params holds the same tensors).
    m_model->root->to(m_device);
    m_data = std::make_unique<Dataset>(m_spec, m_o.seed, m_o.datasetSize);
    m_sampler = std::make_unique<Sampler>(m_o.datasetSize, m_o.seed, rank, world, m_o.batch);
}

// A one-rank run's compute probe. Nothing shares the host with the one rank, so what a second rank
// beside it would cost its compute is measured with a partner: this executable again with the
// same flags (the same model, batch and threads per rank), started for the probe only and joined
// to this rank in a two-process gloo group of their own over a FileStore in the temp folder; the
// turns are probeCompute's (this rank is local rank 0, the partner 1); the partner exits after
// them, before training starts. Only with --threads N: with 0 a rank's thread count follows the
// ranks on the host (cores / local ranks), so a second rank would change this rank's threads too,
// which two processes at this rank's count do not show. Never fails the run: without a probe,
// whyNot says why (config_extra compute_probe_startup).
std::optional<core::ComputeProbe> Trainer::probeComputeWithPartner(int* repeatsOut, std::string* whyNot)
{
    if (m_o.threads <= 0) {
        *whyNot = "not probed: --threads 0 (each rank's thread count follows the ranks on its host)";
        return std::nullopt;
    }
    if (!m_device.is_cpu()) {
        *whyNot = "not probed: --device " + m_o.device + " (the partner process probes CPU compute)";
        return std::nullopt;
    }
    auto self = job::selfExecutable();
    if (!self) {
        *whyNot = "not probed: " + self.error().message;
        return std::nullopt;
    }
    std::error_code ec;
    std::string storePath = (std::filesystem::temp_directory_path(ec) / "lockstep-compute-probe-XXXXXX").string();
    const int fd = mkstemp(storePath.data());
    if (fd < 0) {
        *whyNot = "not probed: cannot create its store file " + storePath + ": " + std::strerror(errno);
        return std::nullopt;
    }
    close(fd);
    std::vector<std::string> argv{*self};
    for (std::string& a : job::toArguments(m_o, true))
        argv.push_back(std::move(a));
    std::vector<std::string> env = job::environmentWithout({kEnvComputeProbePartner});
    env.push_back(std::string(kEnvComputeProbePartner) + "=" + storePath);
    auto child = job::spawnChild(argv, env);
    if (!child) {
        std::filesystem::remove(storePath, ec);
        *whyNot = "not probed: the partner process did not start: " + child.error().message;
        return std::nullopt;
    }
    std::optional<core::ComputeProbe> probe;
    try {
        const auto timeout = std::min(m_timeout, kProbePartnerTimeout);
        auto store = c10::make_intrusive<c10d::FileStore>(storePath, 2);
        store->setTimeout(timeout);
        DistEnv pair;
        pair.world = 2;
        auto pg = makeGlooGroup(pair, store, timeout);
        probe = probeCompute(*pg, 0, 2, repeatsOut);
    } catch (const std::exception& e) {
        *whyNot = "not probed: " + oneLine(e.what());
        job::signalChild(child->pid, SIGKILL);
    }
    int status = 0;
    while (waitpid(child->pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::string err; // the partner's last words (it prints only a failure)
    char buf[4096];
    for (ssize_t n; (n = read(child->errFd, buf, sizeof buf)) > 0;)
        err.append(buf, static_cast<size_t>(n));
    close(child->outFd);
    close(child->errFd);
    std::filesystem::remove(storePath, ec);
    if (status != 0 && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && !probe)) {
        probe.reset();
        *whyNot = "not probed: the partner process " + job::describeWaitStatus(status)
            + (err.empty() ? std::string() : ": " + oneLine(err));
    }
    return probe;
}

void Trainer::probePartner(const std::string& storePath)
{
    m_timeout = std::min(std::chrono::milliseconds(static_cast<int64_t>(m_o.timeoutS * 1000.0)), kProbePartnerTimeout);
    at::set_num_threads(std::max(1, m_o.threads));
    buildModel(0, 1); // the rank's own batch: which samples it computes does not change the time
    auto store = c10::make_intrusive<c10d::FileStore>(storePath, 2);
    store->setTimeout(m_timeout);
    DistEnv pair;
    pair.rank = 1;
    pair.world = 2;
    auto pg = makeGlooGroup(pair, store, m_timeout);
    int repeats = 0;
    probeCompute(*pg, 1, 2, &repeats);
}

// --device cuda: the rank's GPU is LOCAL_RANK modulo the GPUs it sees (several ranks may share
// one, as the gloo-over-CUDA case does). On a recording run the CUPTI collector starts here,
// before the model's first copy to the device, so that every kernel, copy and memset of the
// process is seen (what runs outside a step is counted as such).
void Trainer::selectDevice()
{
    if (m_o.device == "cpu")
        return;
#ifndef LOCKSTEP_HAVE_NCCL
    throw std::invalid_argument("--device cuda needs a CUDA build of LibTorch; this build runs on the CPU only");
#else
    if (!torch::cuda::is_available())
        throw std::invalid_argument("--device cuda: no CUDA device is visible to this process (is the NVIDIA "
                                    "driver loaded, and CUDA_VISIBLE_DEVICES not empty?)");
    if (m_o.backend == "nccl" && m_o.linkGbps > 0)
        throw std::invalid_argument("--link-gbps emulates a link on the host; NCCL's collectives run on the GPU, "
                                    "where it cannot hold them: use --backend gloo to emulate a link");
    const auto gpus = static_cast<int>(torch::cuda::device_count());
    m_device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(m_env.localRank % gpus));
    m_deviceGuard.emplace(m_device);
#ifdef LOCKSTEP_HAVE_CUPTI
    if (m_o.record) {
        auto collector = CuptiCollector::start();
        if (collector) {
            m_cupti = collector->get();
            m_deviceActivity = std::make_unique<CuptiActivity>(std::move(*collector));
            m_cuptiAlternate = envInt("LOCKSTEP_CUPTI_ALTERNATE", 0);
        } else {
            m_deviceActivityMissing = collector.error().message;
        }
    }
#else
    m_deviceActivityMissing = "this build has no CUPTI (configure with LOCKSTEP_WITH_CUDA=ON)";
#endif
#endif
}

void Trainer::tagPush(int32_t step, int32_t bucket)
{
#ifdef LOCKSTEP_HAVE_CUPTI
    if (m_cupti)
        m_cupti->pushCorrelation(CuptiCollector::encodeCorrelation(step, bucket));
#else
    (void)step;
    (void)bucket;
#endif
}

void Trainer::tagPop()
{
#ifdef LOCKSTEP_HAVE_CUPTI
    if (m_cupti)
        m_cupti->popCorrelation();
#endif
}

// On a GPU autograd runs backward on a thread of its own per device, which launches backward's
// kernels and, through the gradient hooks, the buckets' collectives. CUPTI's tags are per thread,
// so that thread must carry the step too: a hook before backward's first node swaps the tag it
// carries for this step's. (The tag stays until the next backward's hook swaps it: nothing else
// runs on that thread, and no hook at backward's end is sure to run there.)
void Trainer::tagBackwardThread(const torch::Tensor& objective)
{
#ifdef LOCKSTEP_HAVE_CUPTI
    if (!m_cupti || !objective.grad_fn())
        return;
    const int32_t step = m_launchStep.load();
    objective.grad_fn()->add_pre_hook(std::make_unique<PreHook>([this, step] {
        if (std::this_thread::get_id() == m_trainingThread)
            return; // a CPU graph runs on the caller, which is tagged already
        if (t_stepTagged)
            tagPop();
        tagPush(step, core::kNoBucket);
        t_stepTagged = true;
    }));
#else
    (void)objective;
#endif
}

void Trainer::trainStep(int step)
{
    std::unique_ptr<StepRecord> rec = m_recorder ? m_recorder->acquire() : std::move(m_scratch);
    StepRecord& r = *rec;
    r.step = step;
    r.micros = m_o.accumulate;
    if (static_cast<int>(r.micro.size()) < m_o.accumulate)
        r.micro.resize(m_o.accumulate);
    r.start = nowNs();
#ifdef LOCKSTEP_HAVE_CUPTI
    // The overhead benchmark (scripts/gpu_device.sh): CUPTI off in every other block of K steps.
    if (m_cupti && m_cuptiAlternate > 0 && step % m_cuptiAlternate == 0)
        if (auto s = m_cupti->setEnabled(step / m_cuptiAlternate % 2 == 0); !s)
            throw std::runtime_error(s.error().message);
#endif
    m_launchStep.store(step);
    tagPush(step, core::kNoBucket);
    const core::ThreadSchedStat sched0 = core::readThreadSchedStat();
    // Summed on the device and read once, at the end of the step: a read per micro-batch would
    // make the host wait for the GPU in the middle of the step, which no training loop need do.
    torch::Tensor lossSum;
    const double scale = 1.0 / m_o.accumulate;
    for (int k = 0; k < m_o.accumulate; ++k) {
        MicroRecord& mr = r.micro[k];
        mr.forwardCuts.clear();
        mr.grads.clear();
        mr.dataStart = nowNs();
        auto [cpuInput, cpuTarget] = m_data->batch(m_sampler->indices(int64_t{step} * m_o.accumulate + k));
        const torch::Tensor input = cpuInput.to(m_device), target = cpuTarget.to(m_device);
        mr.dataEnd = nowNs();
        torch::Tensor x = input;
        for (auto& stage : m_model->stages) {
            mr.forwardCuts.push_back(nowNs());
            x = stage->forward(x);
        }
        torch::Tensor loss = m_model->loss(x, target);
        mr.forwardCuts.push_back(nowNs());
        const torch::Tensor l = loss.detach().to(torch::kFloat64);
        lossSum = k == 0 ? l : lossSum + l;
        m_reducer->prepareForBackward(k == m_o.accumulate - 1);
        const torch::Tensor objective = m_o.accumulate > 1 ? loss * scale : loss;
        tagBackwardThread(objective);
        mr.backwardStart = nowNs();
        objective.backward();
        mr.backwardEnd = nowNs();
        m_gradBuffers.drainInto(mr.grads);
        std::sort(mr.grads.begin(), mr.grads.end(), [](const GradEvent& a, const GradEvent& b) { return a.ts < b.ts; });
    }
    m_reducer->takeCommRecords(r.comms, &r.waitStart, &r.waitEnd);
    r.optStart = nowNs();
    m_opt->step();
    // Not Optimizer::zero_grad(): it detach_()es each .grad, which views of the reducer's
    // buckets refuse; zeroing the buckets in place keeps the .grads their views.
    m_reducer->zeroGrads();
    r.optEnd = nowNs();
    // On a GPU this read waits for the step's device work (the optimizer's kernels last): the
    // step ends when its work is done, as a training loop that reads its loss sees it.
    r.loss = lossSum.item<double>() / m_o.accumulate;
    r.end = nowNs();
    tagPop();
#ifdef LOCKSTEP_HAVE_CUPTI
    if (m_cupti)
        m_cupti->deliverCompleted(); // the step's device records, whole, before the next step launches
#endif
    const core::ThreadSchedStat sched = core::schedStatDelta(sched0, core::readThreadSchedStat());
    r.cpuNs = sched.cpuNs;
    r.runqNs = sched.runqNs;
    r.samples = int64_t{m_o.batch} * m_o.accumulate;
    const double ms = static_cast<double>(r.end - r.start) / 1e6;
    const double loss = r.loss;
    if (m_recorder) {
        // Under the lock a stopping signal finishes the recorder with: a step is either queued
        // before that finish (and committed by it) or never reported (finishOnSignal).
        std::lock_guard lock(g_stopMutex);
        m_recorder->submit(std::move(rec));
    } else {
        m_scratch = std::move(rec);
    }
    ++m_completedSteps;
    if (!m_o.quiet) {
        std::printf("%s\n", job::stepLine(m_env.rank, step, loss, ms).c_str());
        std::fflush(stdout);
    }
}

void Trainer::throwIfRecordingFailed()
{
    auto failure = m_recorder ? m_recorder->failure() : std::nullopt;
    if (!failure)
        return;
    m_phase.clear(); // the cause names its step itself
    throw std::runtime_error((failure->error.code == core::ErrorCode::DiskFull ? "disk full while recording step "
                                                                               : "recording failed at step ")
                             + std::to_string(failure->step) + ": " + failure->error.message);
}

// Every rank hashes its parameters; one all-reduce of (h, -h) with MAX yields the largest and
// the smallest hash at once: they differ exactly when some replica drifted.
void Trainer::replicaCheck(int step)
{
    const int64_t h = paramHash(m_model->params);
    std::vector<torch::Tensor> t{forGroup(torch::tensor({h, -h}, torch::kLong))};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::MAX;
    m_pg->allreduce(t, opts)->wait(m_timeout);
    const bool same = t[0][0].item<int64_t>() == -t[0][1].item<int64_t>();
    if (m_recorder) {
        m_recorder->addDiagnostic(core::Diagnostic{"replica check", core::Severity::Info, 1,
                                                   "parameter hashes compared across ranks"});
        if (!same)
            m_recorder->addDiagnostic(core::Diagnostic{"replica drift", core::Severity::Error, 1,
                                                       "replicas differ after step " + std::to_string(step)});
    }
    if (!same) {
        std::printf("%s\n", job::driftLine(m_env.rank, step).c_str());
        std::fflush(stdout);
    }
}

int Trainer::run()
{
    std::string cause;
    try {
        setup();
        std::printf("%s\n", job::phaseLine(m_env.rank, job::Phase::Training).c_str());
        std::fflush(stdout);
        for (int s = 0; s < m_o.steps; ++s) {
            if (m_o.crashRank == m_env.rank && m_o.crashStep == s) {
                // Fault injection: die like a killed process, after the previous step is on disk.
                if (m_recorder)
                    m_recorder->flush();
                std::printf("%s\n", job::crashLine(m_env.rank, s).c_str());
                std::fflush(stdout);
                std::_Exit(3);
            }
            // A failed commit (a full disk) stops the run here, at most one step after the step
            // whose commit failed (the writer commits step s while step s+1 trains).
            throwIfRecordingFailed();
            m_phase = "step " + std::to_string(s) + ": ";
            trainStep(s);
            if (m_o.checkEvery > 0 && (s + 1) % m_o.checkEvery == 0)
                replicaCheck(s);
        }
        if (m_recorder) {
            m_recorder->flush(); // the last steps' commits, before this rank says it is done
            throwIfRecordingFailed();
        }
        m_phase = "at the end: ";
        const ClockResult clock = syncClock(*m_store, glooGroup(), m_env, "end", m_timeout);
        if (m_env.world > 1) {
            m_rankInfo.clockOffsetEndNs = clock.offset;
            m_rankInfo.clockSyncEndNs = clock.at;
            // Interpolated between the two samples: wrong by at most the larger of their errors.
            m_rankInfo.clockUncertaintyNs = std::max(m_rankInfo.clockUncertaintyNs, clock.uncertainty);
        }
        if (m_recorder)
            m_recorder->updateRank(m_rankInfo);
        if (!m_o.dumpParams.empty()) {
            const std::string path = expandRank(m_o.dumpParams, m_env.rank, m_env.world);
            std::ofstream f(path, std::ios::binary | std::ios::trunc);
            for (const auto& p : m_model->params) {
                auto c = p.detach().to(torch::kCPU, torch::kFloat32).contiguous();
                f.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * 4));
            }
            if (!f)
                throw std::runtime_error("cannot write --dump-params file " + path);
        }
        // Last collective: nobody leaves (and rank 0 does not take the store down) before all
        // ranks are done with the store.
        if (m_env.world > 1)
            m_pg->barrier()->wait(m_timeout);
        if (m_recorder) {
            // The final status and the fold of the log into the shard: if the disk refuses them,
            // the shard is not whole and the rank has failed.
            auto s = finishRecorder(core::RunStatus::Completed, {});
            if (!s)
                throw std::runtime_error(s.error().message);
        }
        std::printf("%s\n", job::doneLine(m_env.rank).c_str());
        std::fflush(stdout);
        return 0;
    } catch (const c10::Error& e) {
        cause = m_phase + oneLine(e.what_without_backtrace());
    } catch (const std::exception& e) {
        cause = m_phase + oneLine(e.what());
    } catch (...) {
        cause = m_phase + "unknown error";
    }
    if (m_recorder)
        (void)finishRecorder(core::RunStatus::Failed, cause);
    if (!m_envRead) {
        // No rank yet (RANK=5 with WORLD_SIZE=2, a bad MASTER_PORT): not "rank 0 failed"; a usage error.
        // The protocol line names the rank the launcher gave (RANK), if it is a number at all.
        int rank = -1;
        if (const char* r = std::getenv("RANK"); r && *r) {
            char* end = nullptr;
            const long v = std::strtol(r, &end, 10);
            if (*end == '\0' && v >= 0 && v <= 1'000'000)
                rank = static_cast<int>(v);
        }
        std::printf("%s\n", job::failedLine(rank, cause).c_str());
        std::fflush(stdout);
        std::fprintf(stderr, "lockstep worker: cannot start: %s\n", cause.c_str());
        return 2;
    }
    std::printf("%s\n", job::failedLine(m_env.rank, cause).c_str());
    std::fflush(stdout);
    std::fprintf(stderr, "lockstep worker: rank %d failed after %d steps: %s\n", m_env.rank, m_completedSteps,
                 cause.c_str());
    return 1;
}

} // namespace

int runWorker(const WorkerOptions& options)
{
    // A write past a file-size limit must come back as an error (EFBIG) that the recorder
    // reports, not kill the rank without a word.
    signal(SIGXFSZ, SIG_IGN);
    if (const char* store = std::getenv(kEnvComputeProbePartner); store && *store) {
        try {
            Trainer(options).probePartner(store);
            return 0;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "%s\n", oneLine(e.what()).c_str());
            return 1;
        }
    }
    finishOnSignal();
    try {
        Trainer t(options);
        const int status = t.run();
        // The process group's threads may still be blocked on a dead peer: leave without
        // running their destructors, which could wait for the collective timeout again.
        std::fflush(stdout);
        std::fflush(stderr);
        if (status != 0)
            std::_Exit(status);
        return status;
    } catch (const std::exception& e) {
        std::printf("%s\n", job::failedLine(-1, oneLine(e.what())).c_str());
        std::fflush(stdout);
        return 1;
    }
}

} // namespace lockstep::rt
