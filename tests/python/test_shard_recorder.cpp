// The Python recorder's native half without an interpreter (and the scheduler statistics it reads): a hand-written event log of one
// step goes through ShardRecorder into a real shard file, is read back through core, and must
// give exactly the spans, instants, buckets and step derived by hand below.
#include "shard_recorder.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/thread_sched.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <time.h>
#include <tuple>

namespace fs = std::filesystem;
using namespace lockstep;
using record::Ev;
using record::ShardRecorder;

namespace {

struct TempDir {
    fs::path path;
    TempDir()
    {
        std::string t = (fs::temp_directory_path() / "lockstep-shard-XXXXXX").string();
        path = mkdtemp(t.data());
    }
    ~TempDir() { fs::remove_all(path); }
};

// Model "Net" with children a and b: params a.w (stage 0), b.w and b.bias (stage 1).
record::ModelInfo model(int32_t device = -1)
{
    record::ModelInfo m;
    m.stageNames = {"a", "b", "Net"};
    m.paramNames = {"a.w", "b.w", "b.bias"};
    m.paramStage = {0, 1, 1};
    m.rootStage = 2;
    m.device = device;
    return m;
}

// Bucket 0 = [b.bias, b.w] (100 bytes), bucket 1 = [a.w] (50 bytes): DDP's reverse order.
std::shared_ptr<record::BucketLayout> layout()
{
    auto l = std::make_shared<record::BucketLayout>();
    l->buckets = {core::Bucket{0, 100, {"b.bias", "b.w"}}, core::Bucket{1, 50, {"a.w"}}};
    l->paramBucket = {1, 0, 0};
    return l;
}

std::unique_ptr<ShardRecorder> open(const fs::path& file, const record::ModelInfo& m)
{
    core::RunConfig c;
    c.name = "golden";
    c.worldSize = 2;
    c.warmupSteps = 0;
    core::RankInfo r;
    r.rank = 0;
    auto rec = ShardRecorder::open(file.string(), c, r, m);
    EXPECT_TRUE(rec.has_value()) << (rec ? "" : rec.error().message);
    return rec ? std::move(*rec) : nullptr;
}

struct Row {
    std::string lane, kind, name;
    core::TimeNs start, end;
    int32_t bucket;
    int64_t bytes;
    friend bool operator==(const Row&, const Row&) = default;
};

std::vector<Row> rows(const core::Run& run)
{
    std::vector<Row> out;
    for (const auto& s : run.spans)
        out.push_back({run.lanes[s.lane.v].name, core::spanKindName(s.kind), run.strings.text(s.name), s.start, s.end,
                       s.bucket, s.bytes});
    std::sort(out.begin(), out.end(), [](const Row& a, const Row& b) {
        return std::tie(a.lane, a.start, a.end) < std::tie(b.lane, b.start, b.end);
    });
    return out;
}

std::ostream& operator<<(std::ostream& o, const Row& r)
{
    return o << r.lane << " " << r.kind << " '" << r.name << "' [" << r.start << "," << r.end << "] b" << r.bucket << " "
             << r.bytes;
}

// One step, times in ns (numbers chosen so every span can be checked by eye).
void oneStep(ShardRecorder& rec)
{
    const int32_t sgd = rec.label("SGD");
    rec.setLayout(layout(), true);
    rec.markAt(Ev::StepStart, 1000);
    rec.markAt(Ev::ForwardBegin, 1100, 0, 8);
    rec.markAt(Ev::StageBegin, 1150, 0);
    rec.markAt(Ev::StageEnd, 1400, 0);
    rec.markAt(Ev::StageBegin, 1450, 1);
    rec.markAt(Ev::StageBegin, 1500, 0); // a called from inside b: nested, not a stage of its own
    rec.markAt(Ev::StageEnd, 1550, 0);
    rec.markAt(Ev::StageEnd, 1700, 1);
    rec.markAt(Ev::ForwardEnd, 1800);
    rec.markAt(Ev::BackwardBegin, 2000);
    rec.gradAt(2, 2200);                          // b.bias
    EXPECT_EQ(rec.commLaunchAt(0, 100, -1, 2350), 0); // DDP launched bucket 0 in b.w's hook...
    rec.gradAt(1, 2400);                          // ...so b.w counts as ready at 2350
    rec.gradAt(0, 2600);                          // a.w
    EXPECT_EQ(rec.commLaunchAt(1, 50, -1, 2650), 1);
    rec.markAt(Ev::BackwardEnd, 2700);
    rec.markAt(Ev::CommDone, 2900, 0);
    rec.markAt(Ev::CommDone, 3100, 1);
    rec.markAt(Ev::WaitEnd, 3200);
    rec.markAt(Ev::OptBegin, 3300, 0, 0, sgd);
    rec.markAt(Ev::OptEnd, 3500);
    rec.markAt(Ev::StepEnd, 3500);
    auto step = rec.takeStep(0);
    step->loss = 2.5;
    rec.submit(std::move(step));
}

} // namespace

TEST(ShardRecorder, OneHostStepBecomesTheRowsDerivedByHand)
{
    TempDir dir;
    const fs::path file = dir.path / "rank-0.db";
    auto rec = open(file, model());
    ASSERT_TRUE(rec);
    oneStep(*rec);
    ASSERT_TRUE(rec->finish(core::RunStatus::Completed, {}).has_value());

    auto run = core::loadRun(file.string());
    ASSERT_TRUE(run.has_value()) << run.error().message;
    // Compute lane: the gap before the forward; forward cut into the root's own time and the
    // outermost children (the nested call of a stays inside b); forward end to backward call;
    // backward cut at gradient-ready instants sorted by time — b.bias 2200 and b.w 2350 (moved
    // back to its bucket's launch) are both b's, so b's segment runs [2000, 2350], then a.w at
    // 2600 is a's and, being the last, runs to backward's end 2700; the wait [2700, 3200]; the
    // optimizer. Comm lane: each bucket from launch to completion with its bytes.
    const std::vector<Row> want = {
        {"comm", "comm", "allreduce bucket 0", 2350, 2900, 0, 100},
        {"comm", "comm", "allreduce bucket 1", 2650, 3100, 1, 50},
        {"compute", "data", "data, user code", 1000, 1100, -1, 0},
        {"compute", "forward", "Net", 1100, 1150, -1, 0},
        {"compute", "forward", "a", 1150, 1400, -1, 0},
        {"compute", "forward", "Net", 1400, 1450, -1, 0},
        {"compute", "forward", "b", 1450, 1700, -1, 0},
        {"compute", "forward", "Net", 1700, 1800, -1, 0},
        {"compute", "forward", "after forward (loss)", 1800, 2000, -1, 0},
        {"compute", "backward", "b", 2000, 2350, -1, 0},
        {"compute", "backward", "a", 2350, 2700, -1, 0},
        {"compute", "wait", "wait for buckets", 2700, 3200, -1, 0},
        {"compute", "optimizer", "optimizer SGD", 3300, 3500, -1, 0},
    };
    const std::vector<Row> got = rows(*run);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
        EXPECT_EQ(got[i], want[i]) << "row " << i << ": got " << got[i] << ", want " << want[i];

    ASSERT_EQ(run->instants.size(), 3u);
    EXPECT_EQ(run->strings.text(run->instants[0].name), "b.bias");
    EXPECT_EQ(run->instants[0].ts, 2200);
    EXPECT_EQ(run->instants[0].bucket, 0);
    EXPECT_EQ(run->strings.text(run->instants[1].name), "b.w");
    EXPECT_EQ(run->instants[1].ts, 2350);
    EXPECT_EQ(run->instants[1].bucket, 0);
    EXPECT_EQ(run->strings.text(run->instants[2].name), "a.w");
    EXPECT_EQ(run->instants[2].ts, 2600);
    EXPECT_EQ(run->instants[2].bucket, 1);

    ASSERT_EQ(run->steps.size(), 1u);
    EXPECT_EQ(run->steps[0].start, 1000);
    EXPECT_EQ(run->steps[0].end, 3500);
    EXPECT_EQ(run->steps[0].samples, 8);
    EXPECT_EQ(run->steps[0].loss, 2.5);
    ASSERT_EQ(run->buckets.size(), 2u);
    EXPECT_EQ(run->buckets[0].params, (std::vector<std::string>{"b.bias", "b.w"}));
    EXPECT_EQ(run->buckets[1].bytes, 50);
    EXPECT_EQ(run->config.status, core::RunStatus::Completed);

    // core's analyses on it. C = [1100, 2700] ∪ [3300, 3500], M = [2350, 3100]:
    // overlapped = |[2350, 2700]| = 350 of communication 750.
    const auto bd = core::stepBreakdown(*run);
    ASSERT_EQ(bd.size(), 1u);
    EXPECT_EQ(bd[0].compute, 1800);
    EXPECT_EQ(bd[0].communication, 750);
    EXPECT_EQ(bd[0].overlapped, 350);
    // Bucket 0: ready = b.w at 2350 = its launch, so ready->launch is 0 (not negative).
    const auto bs = core::bucketStats(*run);
    ASSERT_EQ(bs.size(), 2u);
    EXPECT_EQ(bs[0].ready, 2350);
    EXPECT_EQ(bs[0].readyToLaunch, 0);
    EXPECT_EQ(bs[1].readyToLaunch, 2650 - 2600);
}

// A launch mark only moves a gradient of the same backward on the same thread: after the
// engine's end of backward, or on another thread, gradients keep their own time.
TEST(ShardRecorder, LaunchMarkStaysInItsBackwardAndThread)
{
    TempDir dir;
    const fs::path file = dir.path / "rank-0.db";
    auto rec = open(file, model());
    ASSERT_TRUE(rec);
    rec->setLayout(layout(), false);
    rec->markAt(Ev::StepStart, 1000);
    rec->markAt(Ev::ForwardBegin, 1000);
    rec->markAt(Ev::ForwardEnd, 1100);
    rec->markAt(Ev::BackwardBegin, 1100);
    rec->commLaunchAt(0, 100, -1, 1200);
    std::thread other([&] { rec->gradAt(2, 1300); }); // another thread: not the launching hook
    other.join();
    rec->markAt(Ev::BackwardEnd, 1400);
    rec->gradAt(1, 1500); // a later backward: the mark is gone
    rec->markAt(Ev::StepEnd, 1600);
    rec->submit(rec->takeStep(0));
    ASSERT_TRUE(rec->finish(core::RunStatus::Completed, {}).has_value());
    auto run = core::loadRun(file.string());
    ASSERT_TRUE(run.has_value());
    ASSERT_EQ(run->instants.size(), 2u);
    EXPECT_EQ(run->instants[0].ts, 1300);
    EXPECT_EQ(run->instants[1].ts, 1500);
    EXPECT_TRUE(run->buckets.empty()); // setLayout(write = false): no rows
}

// On CUDA the step's GPU spans (resolved by the Python side) go to two GpuStream lanes, tagged
// with the step that launched them, and the host comm lane stays empty (a host hook's
// "completion" of a CUDA collective only means it was queued).
TEST(ShardRecorder, DeviceSpansFillTheGpuLanes)
{
    TempDir dir;
    const fs::path file = dir.path / "rank-0.db";
    auto rec = open(file, model(0));
    ASSERT_TRUE(rec);
    rec->setLayout(layout(), true);
    rec->markAt(Ev::StepStart, 50);
    rec->markAt(Ev::ForwardBegin, 60);
    rec->markAt(Ev::ForwardEnd, 70);
    rec->markAt(Ev::BackwardBegin, 80);
    rec->gradAt(2, 90);
    rec->commLaunchAt(0, 100, -1, 95);
    rec->markAt(Ev::BackwardEnd, 110);
    rec->markAt(Ev::CommDone, 111, 0);
    rec->markAt(Ev::StepEnd, 120);
    auto step = rec->takeStep(0);
    const auto dev = [&](record::DeviceWhat what, int32_t index, int64_t a, int64_t b, int64_t bytes) {
        record::Event e;
        e.kind = Ev::DeviceSpan;
        e.b = static_cast<int32_t>(what);
        e.a = index;
        e.ts = a;
        e.end = b;
        e.value = bytes;
        e.c = -1;
        step->events.push_back(e);
    };
    dev(record::DeviceWhat::Forward, 0, 100, 200, 0);
    dev(record::DeviceWhat::Backward, 0, 200, 400, 0);
    dev(record::DeviceWhat::Comm, 0, 300, 480, 100);
    dev(record::DeviceWhat::Optimizer, 0, 450, 500, 0);
    rec->submit(std::move(step));
    ASSERT_TRUE(rec->finish(core::RunStatus::Completed, {}).has_value());

    auto run = core::loadRun(file.string());
    ASSERT_TRUE(run.has_value());
    const auto got = rows(*run);
    std::vector<Row> gpu;
    std::copy_if(got.begin(), got.end(), std::back_inserter(gpu), [](const Row& r) { return r.lane.starts_with("cuda:"); });
    const std::vector<Row> want = {
        {"cuda:0 communication", "comm_kernel", "allreduce bucket 0", 300, 480, 0, 100},
        {"cuda:0 compute stream", "kernel", "a", 100, 200, -1, 0},
        {"cuda:0 compute stream", "kernel", "backward", 200, 400, -1, 0},
        {"cuda:0 compute stream", "kernel", "optimizer", 450, 500, -1, 0},
    };
    EXPECT_EQ(gpu, want);
    for (const Row& r : got)
        EXPECT_NE(r.lane, "comm") << r;
}

TEST(ShardRecorder, UnwritableShardIsAClearError)
{
    TempDir dir;
    core::RunConfig c;
    core::RankInfo r;
    auto rec = ShardRecorder::open((dir.path / "missing" / "rank-0.db").string(), c, r, model());
    ASSERT_FALSE(rec.has_value());
    EXPECT_FALSE(rec.error().message.empty());
    record::ModelInfo bad = model();
    bad.paramStage = {0, 7, 1};
    auto rec2 = ShardRecorder::open((dir.path / "rank-0.db").string(), c, r, bad);
    ASSERT_FALSE(rec2.has_value());
    EXPECT_NE(rec2.error().message.find("stage"), std::string::npos);
}

// The per-step scheduler statistics (core/thread_sched.h) come from a /proc file each thread
// opens once and re-reads: every thread must read its own counters. Checked against a fresh
// open/read of /proc/thread-self/schedstat on the same thread just before and after (the run-queue
// wait only grows), on the main thread and on a second one, and CPU time against a busy loop.
TEST(ThreadSchedStat, EachThreadReadsItsOwnCounters)
{
    const auto direct = [] {
        std::ifstream f("/proc/thread-self/schedstat");
        int64_t cpu = -1, runq = -1;
        f >> cpu >> runq;
        return runq;
    };
    const auto check = [&](const char* where) {
        for (int i = 0; i < 3; ++i) {
            const int64_t before = direct();
            const core::ThreadSchedStat s = core::readThreadSchedStat();
            const int64_t after = direct();
            ASSERT_GE(before, 0) << where;
            EXPECT_LE(before, s.runqNs) << where;
            EXPECT_LE(s.runqNs, after) << where;
        }
    };
    check("main thread");
    const core::ThreadSchedStat mainStart = core::readThreadSchedStat();
    core::ThreadSchedStat busy;
    int64_t busyWallNs = 0;
    std::thread other([&] {
        check("second thread");
        // Spins until the thread's own CPU clock (the kernel's count, read another way) has
        // advanced 30 ms: however loaded the machine, the thread then has had 30 ms of CPU.
        const auto threadCpuNs = [] {
            timespec ts{};
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
            return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
        };
        const auto wall0 = std::chrono::steady_clock::now();
        const core::ThreadSchedStat a = core::readThreadSchedStat();
        const int64_t until = threadCpuNs() + 30'000'000;
        volatile uint64_t x = 0;
        while (threadCpuNs() < until)
            x = x + 1;
        busy = core::schedStatDelta(a, core::readThreadSchedStat());
        busyWallNs = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - wall0).count();
    });
    other.join();
    const core::ThreadSchedStat mainDelta = core::schedStatDelta(mainStart, core::readThreadSchedStat());
    check("main thread again");
    // 30 ms on a CPU; schedstat's count is updated at ticks and switches, so it may lag the CPU
    // clock by a tick or two (4 ms each at 250 Hz). It cannot exceed the wall time.
    EXPECT_GE(busy.cpuNs, 20'000'000);
    EXPECT_LE(busy.cpuNs, busyWallNs);
    // The main thread slept in join() meanwhile: its own CPU time is not the other's.
    ASSERT_GE(mainDelta.cpuNs, 0);
    EXPECT_LT(mainDelta.cpuNs, busy.cpuNs);
}
