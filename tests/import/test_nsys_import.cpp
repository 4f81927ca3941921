// Nsight Systems SQLite import on nsys-like exports this test writes (trace_writer.h lists the
// tables and columns mirrored from `nsys export --type sqlite`): kernels, memcpy, memset with
// names from StringIds, steps from NVTX ranges (inline text and textId), device work by the
// runtime call that launched it (correlationId), NCCL kernels as communication, session start
// time, one report per rank.
#include "trace_writer.h"
#include "test_support.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/run_db.h"
#include "lockstep/import/import.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

using namespace lockstep::core;
using namespace lockstep::testing;
namespace core = lockstep::core; // gtest's Test::Run hides core::Run inside TEST bodies

namespace {

using lockstep::test::TempDir;

constexpr int64_t kSession = 1'700'000'000'000'000'000;
constexpr int64_t kTid = (int64_t(4242) << 24) | 4242; // nsys globalTid packs pid and tid

// Three steps s = [s ms, s+1 ms) (NVTX "ProfilerStep#10".."#12"). In each, in µs of the step:
// runtime calls at 50 (kernel), 60 (all-reduce), 70 (copy), 80 (memset); the compute kernel
// runs [100, 500], the NCCL all-reduce [300, 700]: 200 µs overlapped of 400 µs communication;
// the copy [800, 810] and memset [820, 821] run after both (memory-only 11 µs). The last
// step's all-reduce runs past the step's end, [900, 1300]: it still belongs to the step whose
// call launched it. W = [100, 810+...]: see the test. One kernel per rank has no runtime row
// (correlationId 0): no launch record.
void writeRank(const std::string& path, int64_t shiftNs, bool textIds)
{
    NsysWriter w(path);
    w.sessionStart(kSession);
    int64_t corr = 1;
    for (int s = 0; s < 3; ++s) {
        const int64_t t0 = shiftNs + s * 1'000'000;
        w.range(t0, t0 + 1'000'000, "ProfilerStep#" + std::to_string(s + 10), kTid, textIds);
        w.range(t0 + 10'000, t0 + 90'000, "forward", kTid, textIds);
        const int64_t k = corr++, a = corr++, c = corr++, m = corr++;
        w.runtime(t0 + 50'000, t0 + 55'000, k, kTid);
        w.runtime(t0 + 60'000, t0 + 65'000, a, kTid);
        w.runtime(t0 + 70'000, t0 + 75'000, c, kTid);
        w.runtime(t0 + 80'000, t0 + 85'000, m, kTid);
        w.kernel(t0 + 100'000, t0 + 500'000, 0, 7, "ampere_sgemm_128x64_tn", k);
        if (s < 2)
            w.kernel(t0 + 300'000, t0 + 700'000, 0, 21, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", a);
        else
            w.kernel(t0 + 900'000, t0 + 1'300'000, 0, 21, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", a);
        w.memcpy(t0 + 800'000, t0 + 810'000, 0, 7, 4096, c);
        w.memset(t0 + 820'000, t0 + 821'000, 0, 7, 64, m);
    }
    w.kernel(shiftNs + 5'000'000, shiftNs + 5'000'100, 0, 7, "stray_kernel");
}

int countKind(const core::Run& run, SpanKind kind)
{
    return static_cast<int>(std::count_if(run.spans.begin(), run.spans.end(), [&](const Span& s) { return s.kind == kind; }));
}

int64_t diagCount(const core::Run& run, const std::string& kind)
{
    for (const auto& d : run.diagnostics)
        if (d.kind == kind)
            return d.count;
    return 0;
}

} // namespace

TEST(NsysImport, OneRankGolden)
{
    TempDir dir;
    const std::string path = dir.file("rank0.sqlite");
    writeRank(path, 0, false);
    EXPECT_EQ(*detectTraceFormat(path), TraceFormat::NsysSqlite);
    ImportOptions options;
    options.warmupSteps = 0;
    options.worldSize = 2; // one rank of a 2-rank job (a 1-rank run has no overlap ratio)
    auto run = importTracesToRun({path}, options);
    ASSERT_TRUE(run.has_value()) << run.error().message;
    EXPECT_EQ(run->config.source, "nsys");
    EXPECT_EQ(run->config.backend, "nccl");
    EXPECT_EQ(run->config.device, "cuda");
    ASSERT_EQ(run->steps.size(), 3u);
    EXPECT_EQ(run->steps[0].step, 10);
    EXPECT_EQ(run->steps[0].start, kSession);
    EXPECT_EQ(run->steps[0].end, kSession + 1'000'000);
    EXPECT_EQ(countKind(*run, SpanKind::Kernel), 4);
    EXPECT_EQ(countKind(*run, SpanKind::CommKernel), 3);
    EXPECT_EQ(countKind(*run, SpanKind::Memcpy), 3);
    EXPECT_EQ(countKind(*run, SpanKind::Memset), 3);
    int gpu = 0, host = 0;
    for (const Lane& l : run->lanes) {
        gpu += l.kind == LaneKind::GpuStream;
        host += l.kind == LaneKind::HostThread;
        if (l.kind == LaneKind::HostThread) {
            EXPECT_EQ(l.stream, 4242);
        }
    }
    EXPECT_EQ(gpu, 2);
    EXPECT_EQ(host, 1);
    for (const Span& s : run->spans) {
        if (s.kind == SpanKind::Memcpy) {
            EXPECT_EQ(s.bytes, 4096);
        }
        if (s.kind == SpanKind::CommKernel) {
            EXPECT_EQ(s.bucket, 0);
            EXPECT_EQ(run->strings.text(s.name), "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
        }
    }
    EXPECT_EQ(diagCount(*run, "device span without launch record"), 1); // stray_kernel
    // Windows tile (docs/design.md): a step runs from its first device work to the next step's.
    // Steps 10 and 11 (µs from the step start): W = [100, 1100) = 1000; C = [100,500) 400,
    // M = [300,700) 400, Mem = [800,810) + [820,821) = 11: overlapped 200, compute-only 200,
    // exposed 200, memory-only 11, idle [700,800) + [810,820) + [821,1100) = 389 (the GPU
    // waiting for its host): 200+200+200+11+389 = 1000.
    // Step 12 (the last): the all-reduce [900,1300) runs past the host step but belongs to it:
    // W = [100, 1300) = 1200 (its last device work ends after its host step); overlapped 0, compute-only 400, exposed 400, memory-only 11,
    // idle [500,800) + [810,820) + [821,900) = 300 + 10 + 79 = 389: 400+400+11+389 = 1200.
    const auto b = stepBreakdown(*run);
    ASSERT_EQ(b.size(), 3u);
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(b[i].wall, 1'000'000);
        EXPECT_EQ(b[i].overlapped, 200'000);
        EXPECT_EQ(b[i].computeOnly, 200'000);
        EXPECT_EQ(b[i].exposed, 200'000);
        EXPECT_EQ(b[i].memoryOnly, 11'000);
        EXPECT_EQ(b[i].idle, 389'000);
        EXPECT_DOUBLE_EQ(b[i].overlapRatio, 0.5);
    }
    EXPECT_EQ(b[2].wall, 1'200'000);
    EXPECT_EQ(b[2].overlapped, 0);
    EXPECT_EQ(b[2].exposed, 400'000);
    EXPECT_EQ(b[2].memoryOnly, 11'000);
    EXPECT_EQ(b[2].idle, 389'000);
    // The same file as a 1-rank run: nothing to hide, the ratio is not applicable.
    auto alone = importTracesToRun({path});
    ASSERT_TRUE(alone);
    EXPECT_TRUE(std::isnan(stepBreakdown(*alone)[0].overlapRatio));
}

TEST(NsysImport, TwoReportsTwoRanksIntoADatabase)
{
    TempDir dir;
    const std::string r0 = dir.file("r0.sqlite");
    const std::string r1 = dir.file("r1.nsys-rep.sqlite");
    writeRank(r0, 0, false);
    writeRank(r1, 25'000, true); // names through StringIds (textId), rank 1 late by 25 µs
    const std::string out = dir.file("run.db");
    auto stats = importTraces({r0, r1}, out);
    ASSERT_TRUE(stats.has_value()) << stats.error().message;
    EXPECT_EQ(stats->ranks, 2);
    auto run = loadRun(out);
    ASSERT_TRUE(run.has_value()) << run.error().message;
    EXPECT_EQ(run->config.worldSize, 2);
    EXPECT_EQ(run->config.source, "nsys");
    EXPECT_EQ(run->ranks.size(), 2u);
    ASSERT_EQ(run->steps.size(), 6u);
    EXPECT_EQ(run->steps[3].rank, 1);
    EXPECT_EQ(run->steps[3].step, 10);
    const auto report = stragglers(*run);
    ASSERT_FALSE(report.skews.empty());
    EXPECT_EQ(report.skews[0].skew, 25'000);
    EXPECT_EQ(report.skews[0].lateRank, 1);
    // The diagnostics survive the run database (listed kinds only).
    EXPECT_EQ(diagCount(*run, "device span without launch record"), 2);
    // Mixed inputs: an nsys report and a Kineto trace as two ranks of one run.
    const std::string k = dir.file("k.json");
    writeFile(k, arrayTrace({xEvent("user_annotation", "ProfilerStep#10", 1.7e12, 1000, "1", "1")}));
    auto mixed = importTracesToRun({r0, k});
    ASSERT_TRUE(mixed);
    EXPECT_EQ(mixed->config.source, "mixed");
    EXPECT_EQ(mixed->ranks.size(), 2u);
}
