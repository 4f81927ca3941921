// Export -> import round trip: a run written by writeChromeTrace (what `lockstep export --chrome`
// writes) imports back into the same ranks, lanes, steps, buckets, instants and every metric
// within 1 µs; the export is a Chrome trace Perfetto opens (ranks as processes, lanes as
// threads) with flow events for each bucket's all-reduce across ranks and its gradient-ready
// -> launch.
#include "../analysis/run_builder.h"
#include "trace_writer.h"
#include "../support/config_fields.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/chrome_export.h"
#include "lockstep/core/fields.h"
#include "lockstep/core/synthetic.h"
#include "lockstep/import/import.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>

using namespace lockstep::core;
using lockstep::test::RunBuilder;
namespace core = lockstep::core; // gtest's Test::Run hides core::Run inside TEST bodies

namespace {

constexpr double kMicrosecondNs = 1000.0;

std::string exported(const core::Run& run)
{
    std::ostringstream out;
    const Status s = writeChromeTrace(run, out);
    EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message);
    return out.str();
}

void expectNear(double a, double b, double tolerance, const char* what)
{
    if (std::isnan(a) || std::isnan(b)) {
        EXPECT_EQ(std::isnan(a), std::isnan(b)) << what;
    } else {
        EXPECT_NEAR(a, b, tolerance) << what;
    }
}

// The same run: structure exactly, every metric within 1 µs (times) or the same (ratios).
void expectSameRun(const core::Run& a, const core::Run& b)
{
    ASSERT_EQ(a.lanes.size(), b.lanes.size());
    for (size_t i = 0; i < a.lanes.size(); ++i) {
        EXPECT_EQ(a.lanes[i].rank, b.lanes[i].rank) << "lane " << i;
        EXPECT_EQ(a.lanes[i].kind, b.lanes[i].kind) << "lane " << i;
        EXPECT_EQ(a.lanes[i].device, b.lanes[i].device) << "lane " << i;
        EXPECT_EQ(a.lanes[i].stream, b.lanes[i].stream) << "lane " << i;
        EXPECT_EQ(a.lanes[i].name, b.lanes[i].name) << "lane " << i;
    }
    ASSERT_EQ(a.ranks.size(), b.ranks.size());
    for (size_t i = 0; i < a.ranks.size(); ++i) {
        EXPECT_EQ(a.ranks[i].rank, b.ranks[i].rank);
        EXPECT_EQ(a.ranks[i].host, b.ranks[i].host);
    }
    ASSERT_EQ(a.steps.size(), b.steps.size());
    for (size_t i = 0; i < a.steps.size(); ++i) {
        EXPECT_EQ(a.steps[i].rank, b.steps[i].rank);
        EXPECT_EQ(a.steps[i].step, b.steps[i].step);
        EXPECT_EQ(a.steps[i].start, b.steps[i].start);
        EXPECT_EQ(a.steps[i].end, b.steps[i].end);
        EXPECT_EQ(a.steps[i].samples, b.steps[i].samples);
        EXPECT_EQ(a.steps[i].cpuNs, b.steps[i].cpuNs);
        EXPECT_EQ(a.steps[i].runqNs, b.steps[i].runqNs);
    }
    ASSERT_EQ(a.buckets.size(), b.buckets.size());
    for (size_t i = 0; i < a.buckets.size(); ++i) {
        EXPECT_EQ(a.buckets[i].index, b.buckets[i].index);
        EXPECT_EQ(a.buckets[i].bytes, b.buckets[i].bytes);
        EXPECT_EQ(a.buckets[i].params, b.buckets[i].params);
    }
    ASSERT_EQ(a.spans.size(), b.spans.size());
    for (size_t i = 0; i < a.spans.size(); ++i) {
        EXPECT_EQ(a.spans[i].lane, b.spans[i].lane);
        EXPECT_EQ(a.spans[i].kind, b.spans[i].kind);
        EXPECT_EQ(a.spans[i].step, b.spans[i].step);
        EXPECT_EQ(a.spans[i].bucket, b.spans[i].bucket);
        EXPECT_EQ(a.spans[i].start, b.spans[i].start);
        EXPECT_EQ(a.spans[i].end, b.spans[i].end);
        EXPECT_EQ(a.spans[i].bytes, b.spans[i].bytes);
        EXPECT_EQ(a.strings.text(a.spans[i].name), b.strings.text(b.spans[i].name));
    }
    EXPECT_EQ(a.instants.size(), b.instants.size());
    EXPECT_EQ(a.config.warmupSteps, b.config.warmupSteps);
    EXPECT_EQ(a.config.worldSize, b.config.worldSize);

    const RunAnalysis x = analyze(a), y = analyze(b);
    ASSERT_EQ(x.steps.size(), y.steps.size());
    for (size_t i = 0; i < x.steps.size(); ++i) {
        const StepBreakdown &p = x.steps[i], &q = y.steps[i];
        EXPECT_EQ(p.window, q.window);
        for (auto [u, v] : {std::pair{p.wall, q.wall}, {p.computeOnly, q.computeOnly}, {p.overlapped, q.overlapped},
                            {p.exposed, q.exposed}, {p.memoryOnly, q.memoryOnly}, {p.idle, q.idle}})
            EXPECT_LE(std::abs(u - v), 1000) << "rank " << p.rank << " step " << p.step;
    }
    ASSERT_EQ(x.buckets.size(), y.buckets.size());
    for (size_t i = 0; i < x.buckets.size(); ++i) {
        EXPECT_LE(std::abs(x.buckets[i].launch - y.buckets[i].launch), 1000);
        EXPECT_LE(std::abs(x.buckets[i].duration - y.buckets[i].duration), 1000);
        EXPECT_LE(std::abs(x.buckets[i].readyToLaunch - y.buckets[i].readyToLaunch), 1000);
    }
    const RunSummary &s = x.summary, &t = y.summary;
    const double ms = kMicrosecondNs * 1e-6;
    expectNear(s.stepTimeMs, t.stepTimeMs, ms, "step time");
    expectNear(s.computeOnlyMs, t.computeOnlyMs, ms, "compute only");
    expectNear(s.overlappedMs, t.overlappedMs, ms, "overlapped");
    expectNear(s.exposedCommMs, t.exposedCommMs, ms, "exposed");
    expectNear(s.memoryOnlyMs, t.memoryOnlyMs, ms, "memory only");
    expectNear(s.idleMs, t.idleMs, ms, "idle");
    expectNear(s.overlapRatio, t.overlapRatio, 1e-9, "overlap ratio");
    expectNear(s.throughput, t.throughput, 1e-6 * s.throughput, "throughput");
    EXPECT_EQ(s.steadySteps, t.steadySteps);
    EXPECT_EQ(s.stragglers, t.stragglers);
    EXPECT_EQ(s.straggler.stepsLate, t.straggler.stepsLate);
    expectNear(s.straggler.meanWaitNs, t.straggler.meanWaitNs, kMicrosecondNs, "mean wait");
    ASSERT_EQ(s.buckets.size(), t.buckets.size());
    for (size_t i = 0; i < s.buckets.size(); ++i) {
        expectNear(s.buckets[i].meanDurationMs, t.buckets[i].meanDurationMs, ms, "bucket duration");
        expectNear(s.buckets[i].meanSkewMs, t.buckets[i].meanSkewMs, ms, "bucket skew");
        EXPECT_EQ(s.buckets[i].lateRank, t.buckets[i].lateRank);
    }
}

// A GPU-shaped run by hand: 2 ranks, host thread + compute stream + NCCL stream + copy stream;
// rank 1's step 1 kernel outlives its host step; a kernel of no step; grad-ready instants.
core::Run gpuRun()
{
    RunBuilder b(2, 1);
    b.run().config.name = "gpu-hand";
    b.run().config.batchPerRank = 8;
    b.bucket(0, 4096, {"w"});
    for (int32_t r = 0; r < 2; ++r) {
        const auto host = b.lane(r, LaneKind::HostThread);
        const auto compute = b.lane(r, LaneKind::GpuStream);
        const auto nccl = b.lane(r, LaneKind::GpuStream);
        const auto copy = b.lane(r, LaneKind::GpuStream);
        for (int32_t s = 0; s < 3; ++s) {
            const TimeNs t = 1'700'000'000'000'000'000LL + s * 1'000'000 + r * 30'000;
            b.step(r, s, t, t + 1'000'000, 8);
            b.span(host, SpanKind::CpuOp, t, t + 900'000, s);
            b.span(compute, SpanKind::Kernel, t + 100'000, t + 600'000 + (s == 1 ? 700'000 : 0), s);
            b.span(copy, SpanKind::Memcpy, t + 50'000, t + 80'000, s, kNoBucket, 1 << 20);
            b.ready(host, t + 400'000, s, 0);
            // The all-reduce of step 1 runs after the long kernel (same stream order on the GPU).
            const TimeNs ar = s == 1 ? t + 1'300'000 : t + 450'000;
            b.span(nccl, SpanKind::CommKernel, ar, ar + 300'000, s, 0, 4096);
        }
        b.span(compute, SpanKind::Kernel, 1'700'000'000'010'000'000LL, 1'700'000'000'010'000'500LL);
    }
    return b.build();
}

} // namespace

TEST(RoundTrip, SyntheticHostRun)
{
    SyntheticParams p;
    p.worldSize = 3;
    p.steps = 8;
    p.stragglerRank = 1;
    p.stragglerDelayNs = 1'500'000;
    const core::Run run = makeSyntheticRun(p);
    auto back = importTraceBytes(exported(run));
    ASSERT_TRUE(back.has_value()) << back.error().message;
    EXPECT_EQ(back->ranks.size(), 3u);
    EXPECT_EQ(back->config.source, "lockstep-export");
    expectSameRun(run, *back);
    EXPECT_EQ(summarize(*back).stragglers, std::vector<int32_t>{1});
}

// Every field of the run's table (core/fields.h) is in the export's header and read back, but
// what an import sets itself: the source (kept in extra), the status and the times.
TEST(RoundTrip, EveryConfigFieldSurvivesTheExport)
{
    core::Run run = makeSyntheticRun(SyntheticParams{});
    run.config = lockstep::test::everyFieldConfig();
    auto back = importTraceBytes(exported(run));
    ASSERT_TRUE(back.has_value()) << back.error().message;
    const std::set<std::string> setByImport{"source", "status", "created_ns", "ended_ns"};
    for (const RunConfigField& f : kRunConfigFields) {
        if (!setByImport.contains(f.name)) {
            EXPECT_EQ(fieldText(f, back->config), fieldText(f, run.config)) << f.name;
        }
    }
    EXPECT_EQ(back->config.extra.at("exported_source"), run.config.source);
    EXPECT_EQ(back->config.extra.at("seed"), "7");
    EXPECT_EQ(back->config.frameworkVersion, run.config.frameworkVersion);
}

// Every field of a lane, a step and a bucket (core/fields.h) but those that shape the run is in
// the export (the header's lanes and buckets, the steps' event args) and read back; a step's
// unknown loss and CPU times are left out and read back as unknown.
TEST(RoundTrip, EveryLaneStepAndBucketFieldSurvivesTheExport)
{
    core::Run run = makeSyntheticRun(SyntheticParams{});
    lockstep::test::setEveryRecordField(run);
    run.steps[0].loss = std::numeric_limits<double>::quiet_NaN();
    run.steps[0].runqNs = -1;
    auto back = importTraceBytes(exported(run));
    ASSERT_TRUE(back.has_value()) << back.error().message;
    ASSERT_EQ(back->lanes.size(), run.lanes.size());
    ASSERT_EQ(back->steps.size(), run.steps.size());
    ASSERT_EQ(back->buckets.size(), run.buckets.size());
    using lockstep::test::fieldDifferences;
    for (size_t i = 0; i < run.lanes.size(); ++i)
        EXPECT_EQ(fieldDifferences(kLaneFields, run.lanes[i], back->lanes[i]), "") << "lane " << i;
    for (size_t i = 0; i < run.steps.size(); ++i)
        EXPECT_EQ(fieldDifferences(kStepFields, run.steps[i], back->steps[i]), "") << "step row " << i;
    for (size_t i = 0; i < run.buckets.size(); ++i)
        EXPECT_EQ(fieldDifferences(kBucketFields, run.buckets[i], back->buckets[i]), "") << "bucket " << i;
    EXPECT_TRUE(std::isnan(back->steps[0].loss));
    EXPECT_EQ(back->steps[0].runqNs, -1);
}

TEST(RoundTrip, GpuShapedRunKeepsTheLaunchingSteps)
{
    const core::Run run = gpuRun();
    auto back = importTraceBytes(exported(run));
    ASSERT_TRUE(back.has_value()) << back.error().message;
    expectSameRun(run, *back);
    EXPECT_EQ(summarize(*back).deviceSpansWithoutStep, 2);
}

TEST(RoundTrip, TheExportIsAChromeTraceWithRanksLanesAndFlows)
{
    const core::Run run = gpuRun();
    const std::string json = exported(run);
    rapidjson::Document doc;
    doc.Parse(json.c_str(), json.size());
    ASSERT_FALSE(doc.HasParseError());
    ASSERT_TRUE(doc["traceEvents"].IsArray());
    std::map<int, std::string> processes;
    std::set<std::pair<int, int64_t>> threads;
    int bucketFlows = 0, readyFlows = 0, flowEnds = 0;
    for (const auto& e : doc["traceEvents"].GetArray()) {
        const std::string ph = e["ph"].GetString();
        if (ph == "M" && std::string(e["name"].GetString()) == "process_name")
            processes[e["pid"].GetInt()] = e["args"]["name"].GetString();
        if (ph == "M" && std::string(e["name"].GetString()) == "thread_name")
            threads.insert({e["pid"].GetInt(), e["tid"].GetInt64()});
        if (ph == "s" && std::string(e["cat"].GetString()) == "lockstep.bucket")
            ++bucketFlows;
        if (ph == "s" && std::string(e["cat"].GetString()) == "lockstep.ready")
            ++readyFlows;
        if (ph == "f")
            ++flowEnds;
    }
    // Ranks are processes; each lane is a thread of its rank's process, plus a "steps" thread.
    EXPECT_EQ(processes.size(), 2u);
    EXPECT_EQ(processes[1], "rank 1");
    EXPECT_EQ(threads.size(), run.lanes.size() + 2);
    for (const Lane& l : run.lanes)
        EXPECT_TRUE(threads.count({l.rank, int64_t(l.id.v)})) << l.id.v;
    // 3 steps x 1 bucket linked across the 2 ranks; 3 steps x 2 ranks ready -> launch arrows.
    EXPECT_EQ(bucketFlows, 3);
    EXPECT_EQ(readyFlows, 6);
    EXPECT_EQ(flowEnds, 9);
}
