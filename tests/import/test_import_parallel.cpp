// Many files in parallel (issue 31 item 3): an import over several threads writes exactly the
// run the one-thread import writes (lanes, strings, spans, steps, buckets, ranks, diagnostics,
// configuration), on committed real traces and on generated ones whose ranks come in reverse
// file order; errors are the same whatever the number of threads; progress counts every file;
// `lockstep import` interrupted while its threads parse leaves its whole output or nothing.
#include "trace_writer.h"
#include "test_support.h"

#include "lockstep/core/run_db.h"
#include "lockstep/import/import.h"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using namespace lockstep::core;
using namespace lockstep::testing;
namespace core = lockstep::core;

namespace {

using lockstep::test::Child;
using lockstep::test::TempDir;

const std::string kData = std::string(LOCKSTEP_SOURCE_DIR) + "/tests/data/";

// A GPU rank's trace: steps on the main thread with CPU ops (some names shared by every rank,
// some the rank's own, so that the string table's order depends on the files' order), runtime
// launches, kernels and NCCL all-reduces (with record_param_comms) on two streams, a data
// loader thread; `rank` and `world` in distributedInfo.
std::string rankTrace(int rank, int world, int steps)
{
    const std::string pid = "100", main = "100", loader = "107";
    const double t0 = 1'700'000'000'000'000.0 + rank * 3.25;
    std::vector<std::string> events;
    int corr = 1;
    for (int s = 0; s < steps; ++s) {
        const double base = t0 + s * 1000.0;
        events.push_back(xEvent("user_annotation", "ProfilerStep#" + std::to_string(s), base, 900, pid, main));
        events.push_back(xEvent("cpu_op", "DataLoader#next", base + 1, 5, pid, loader));
        for (int k = 0; k < 6; ++k) {
            const double t = base + 10 + k * 100;
            const std::string op = k % 2 ? "aten::linear" : "rank" + std::to_string(rank) + "::op" + std::to_string(k);
            const std::string c = std::to_string(corr++);
            events.push_back(xEvent("cpu_op", op, t, 40, pid, main, "\"External id\": " + c));
            events.push_back(xEvent("cuda_runtime", "cudaLaunchKernel", t + 5, 4, pid, main, "\"correlation\": " + c));
            events.push_back(xEvent("kernel", k % 3 ? "gemm_kernel" : "elementwise_" + std::to_string(rank % 3), t + 20 + rank,
                                    30, "0", "7", "\"device\": 0, \"stream\": 7, \"correlation\": " + c));
            if (k % 3 == 2) {
                const std::string ar = std::to_string(corr++);
                events.push_back(xEvent("cpu_op", "record_param_comms", t + 50, 10, pid, main,
                                        "\"Collective name\": \"allreduce\", \"dtype\": \"Float\", \"In msg nelems\": "
                                            + std::to_string(1000 * (k + 1)) + ", \"Group size\": " + std::to_string(world)));
                events.push_back(xEvent("cuda_runtime", "cudaLaunchKernel", t + 55, 4, pid, main, "\"correlation\": " + ar));
                events.push_back(xEvent("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", t + 70, 60 + rank, "0", "20",
                                        "\"device\": 0, \"stream\": 20, \"correlation\": " + ar
                                            + ", \"Collective name\": \"allreduce\", \"In msg nelems\": " + std::to_string(1000 * (k + 1))
                                            + ", \"dtype\": \"Float\""));
            }
        }
    }
    std::string json = "{\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": " + std::to_string(rank)
                     + ", \"world_size\": " + std::to_string(world) + "}, \"traceEvents\": [";
    for (size_t i = 0; i < events.size(); ++i)
        json += (i ? ",\n" : "") + events[i];
    return json + "]}";
}

// The loaded runs are the same, field by field (the creation time aside).
void expectSameRun(const core::Run& a, const core::Run& b)
{
    RunConfig ca = a.config, cb = b.config;
    ca.createdNs = cb.createdNs = 0;
    ca.endedNs = cb.endedNs = 0;
    EXPECT_EQ(ca.name, cb.name);
    EXPECT_EQ(ca.source, cb.source);
    EXPECT_EQ(ca.worldSize, cb.worldSize);
    EXPECT_EQ(ca.warmupSteps, cb.warmupSteps);
    EXPECT_EQ(ca.stepsPlanned, cb.stepsPlanned);
    EXPECT_EQ(ca.backend, cb.backend);
    EXPECT_EQ(ca.device, cb.device);
    EXPECT_EQ(ca.extra, cb.extra);
    EXPECT_EQ(a.strings.texts(), b.strings.texts());
    ASSERT_EQ(a.lanes.size(), b.lanes.size());
    for (size_t i = 0; i < a.lanes.size(); ++i)
        EXPECT_EQ(std::tie(a.lanes[i].id.v, a.lanes[i].rank, a.lanes[i].kind, a.lanes[i].device, a.lanes[i].stream, a.lanes[i].name),
                  std::tie(b.lanes[i].id.v, b.lanes[i].rank, b.lanes[i].kind, b.lanes[i].device, b.lanes[i].stream, b.lanes[i].name))
            << "lane " << i;
    ASSERT_EQ(a.ranks.size(), b.ranks.size());
    for (size_t i = 0; i < a.ranks.size(); ++i)
        EXPECT_EQ(std::tie(a.ranks[i].rank, a.ranks[i].pid, a.ranks[i].device, a.ranks[i].host),
                  std::tie(b.ranks[i].rank, b.ranks[i].pid, b.ranks[i].device, b.ranks[i].host));
    ASSERT_EQ(a.steps.size(), b.steps.size());
    for (size_t i = 0; i < a.steps.size(); ++i)
        EXPECT_EQ(std::tie(a.steps[i].rank, a.steps[i].step, a.steps[i].start, a.steps[i].end, a.steps[i].samples),
                  std::tie(b.steps[i].rank, b.steps[i].step, b.steps[i].start, b.steps[i].end, b.steps[i].samples));
    ASSERT_EQ(a.buckets.size(), b.buckets.size());
    for (size_t i = 0; i < a.buckets.size(); ++i)
        EXPECT_EQ(std::tie(a.buckets[i].index, a.buckets[i].bytes, a.buckets[i].params),
                  std::tie(b.buckets[i].index, b.buckets[i].bytes, b.buckets[i].params));
    ASSERT_EQ(a.spans.size(), b.spans.size());
    size_t spanDiffs = 0;
    for (size_t i = 0; i < a.spans.size(); ++i) {
        const Span& x = a.spans[i];
        const Span& y = b.spans[i];
        spanDiffs += std::tie(x.start, x.end, x.bytes, x.lane.v, x.name.v, x.step, x.bucket, x.kind)
                  != std::tie(y.start, y.end, y.bytes, y.lane.v, y.name.v, y.step, y.bucket, y.kind);
    }
    EXPECT_EQ(spanDiffs, 0u);
    ASSERT_EQ(a.instants.size(), b.instants.size());
    for (size_t i = 0; i < a.instants.size(); ++i)
        EXPECT_EQ(std::tie(a.instants[i].ts, a.instants[i].lane.v, a.instants[i].name.v, a.instants[i].step, a.instants[i].bucket),
                  std::tie(b.instants[i].ts, b.instants[i].lane.v, b.instants[i].name.v, b.instants[i].step, b.instants[i].bucket));
    ASSERT_EQ(a.diagnostics.size(), b.diagnostics.size());
    for (size_t i = 0; i < a.diagnostics.size(); ++i)
        EXPECT_EQ(std::tie(a.diagnostics[i].kind, a.diagnostics[i].count, a.diagnostics[i].message),
                  std::tie(b.diagnostics[i].kind, b.diagnostics[i].count, b.diagnostics[i].message));
}

// Imports `files` with `jobs` threads into dir/name and loads the run.
core::Run importWith(const TempDir& dir, const std::vector<std::string>& files, int jobs, ImportOptions options = {})
{
    const std::string out = dir.file("jobs" + std::to_string(jobs) + ".db");
    options.jobs = jobs;
    options.runName = "same";
    auto stats = importTraces(files, out, options);
    EXPECT_TRUE(stats.has_value()) << stats.error().message;
    EXPECT_EQ(stats ? stats->files : 0, static_cast<int>(files.size()));
    auto run = loadRun(out);
    EXPECT_TRUE(run.has_value()) << run.error().message;
    return run ? std::move(*run) : core::Run{};
}

} // namespace

TEST(ParallelImport, RealTracesAreTheSameRunWithAnyNumberOfThreads)
{
    // torch.profiler's own traces: a CPU gloo pair and an H100 gloo-over-CUDA pair, as ranks 0..3.
    TempDir dir;
    const std::vector<std::string> files{kData + "cpu/kineto-cpu-rank0.json.gz", kData + "cpu/kineto-cpu-rank1.json.gz",
                                         kData + "gpu/kineto-gloo2-rank-0.json.gz", kData + "gpu/kineto-gloo2-rank-1.json.gz"};
    ImportOptions options;
    options.rank = 0;
    const core::Run one = importWith(dir, files, 1, options);
    ASSERT_FALSE(one.spans.empty());
    for (int jobs : {2, 4}) {
        SCOPED_TRACE("jobs " + std::to_string(jobs));
        expectSameRun(one, importWith(dir, files, jobs, options));
    }
    // The in-memory import is the same run too.
    auto memory = importTracesToRun(files, options);
    ASSERT_TRUE(memory.has_value()) << memory.error().message;
    memory->config.name = "same";
    ASSERT_TRUE(saveRun(*memory, dir.file("memory.db")).has_value());
    auto loaded = loadRun(dir.file("memory.db"));
    ASSERT_TRUE(loaded.has_value());
    expectSameRun(one, *loaded);
}

TEST(ParallelImport, GeneratedRanksInReverseOrderAreTheSameRun)
{
    // 24 ranks, files named in order but holding ranks 23..0, half of them gzip: lanes, strings
    // and steps must come out as the one-thread import numbers them.
    TempDir dir;
    std::vector<std::string> files;
    const int world = 24;
    for (int i = 0; i < world; ++i) {
        const std::string json = rankTrace(world - 1 - i, world, 4 + i % 3);
        files.push_back(dir.file("trace-" + std::to_string(i) + (i % 2 ? ".json.gz" : ".json")));
        if (i % 2)
            ASSERT_TRUE(writeGzip(files.back(), json));
        else
            writeFile(files.back(), json);
    }
    const core::Run one = importWith(dir, files, 1);
    ASSERT_EQ(one.ranks.size(), static_cast<size_t>(world));
    ASSERT_FALSE(one.buckets.empty());
    for (int jobs : {3, 8, 64}) {
        SCOPED_TRACE("jobs " + std::to_string(jobs));
        expectSameRun(one, importWith(dir, files, jobs));
    }
}

TEST(ParallelImport, ErrorsAndProgressDoNotDependOnTheThreads)
{
    TempDir dir;
    std::vector<std::string> files;
    for (int i = 0; i < 8; ++i) {
        files.push_back(dir.file("r" + std::to_string(i) + ".json"));
        writeFile(files.back(), rankTrace(i, 8, 2));
    }
    for (int jobs : {1, 4}) {
        SCOPED_TRACE("jobs " + std::to_string(jobs));
        ImportOptions options;
        options.jobs = jobs;
        // Progress: from the calling thread, files done never going back, every file at the end.
        const auto caller = std::this_thread::get_id();
        int lastDone = 0, calls = 0;
        bool sameThread = true, monotonic = true;
        ImportProgress last;
        auto stats = importTraces(files, dir.file("ok" + std::to_string(jobs) + ".db"), options,
                                  [&](const ImportProgress& p) {
                                      sameThread &= std::this_thread::get_id() == caller;
                                      monotonic &= p.filesDone >= lastDone && p.bytesDone <= p.bytesTotal;
                                      lastDone = p.filesDone;
                                      last = p;
                                      ++calls;
                                  });
        ASSERT_TRUE(stats.has_value()) << stats.error().message;
        EXPECT_TRUE(sameThread);
        EXPECT_TRUE(monotonic);
        EXPECT_GE(calls, 8);
        EXPECT_EQ(last.filesDone, 8);
        EXPECT_EQ(last.files, 8);
        EXPECT_EQ(last.bytesDone, last.bytesTotal);

        // Two files of one rank (3 and 5) and a file that is no trace (6): the file that cannot
        // be read is the answer, as with one thread; nothing is written.
        std::vector<std::string> bad = files;
        bad[5] = files[3];
        writeFile(dir.file("not-a-trace.json"), "{\"traceEvents\": 12}");
        bad[6] = dir.file("not-a-trace.json");
        const std::string out = dir.file("bad" + std::to_string(jobs) + ".db");
        auto failed = importTraces(bad, out, options);
        ASSERT_FALSE(failed.has_value());
        EXPECT_NE(failed.error().message.find("not-a-trace.json"), std::string::npos) << failed.error().message;
        EXPECT_FALSE(std::filesystem::exists(out));
        // Without it, the rank both files claim.
        bad[6] = files[6];
        failed = importTraces(bad, out, options);
        ASSERT_FALSE(failed.has_value());
        EXPECT_NE(failed.error().message.find("are both rank 3"), std::string::npos) << failed.error().message;
        EXPECT_FALSE(std::filesystem::exists(out));
        EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator{}),
                  static_cast<long>(files.size()) + 1 + (jobs == 1 ? 1 : 2));
    }
}

TEST(ParallelImport, InterruptedWhileParsingLeavesNothing)
{
    // 48 files on 2 threads; SIGINT once the first file is in (its progress line): exit 130 and
    // nothing in the folder but the traces (or, had it finished first, exit 0 and the whole run).
    TempDir dir;
    std::vector<std::string> args{"import"};
    for (int i = 0; i < 48; ++i) {
        args.push_back(dir.file("r" + std::to_string(i) + ".json"));
        writeFile(args.back(), rankTrace(i, 48, 150));
    }
    const std::string out = dir.file("run.db");
    for (const char* a : {"--out", out.c_str(), "--jobs", "2"})
        args.push_back(a);
    Child c;
    ASSERT_TRUE(c.start(std::string(LOCKSTEP_BINARY_DIR) + "/app/lockstep", args)) << c.err();
    while (c.err().find("importing:") == std::string::npos && c.pump(100)) {
    }
    c.kill(SIGINT);
    ASSERT_TRUE(c.wait(120'000));
    if (c.exitCode() == 0) {
        auto run = loadRun(out);
        ASSERT_TRUE(run.has_value()) << run.error().message;
        EXPECT_EQ(run->ranks.size(), 48u);
        return;
    }
    EXPECT_EQ(c.exitCode(), 130) << c.all();
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator{}), 48);
}
