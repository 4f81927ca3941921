// Quantiles, spreads, per-step means, step-time quartiles, per-span bandwidth and the step jump's
// collective search (core/step_stats.h, RunIndex::largestCollective), on hand-built runs whose
// expected numbers are derived by hand below; and the JSON keys that carry them.
#include "lockstep/core/analysis.h"
#include "lockstep/core/report.h"
#include "lockstep/core/step_stats.h"
#include "run_builder.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cmath>
#include <optional>
#include <stdexcept>

using namespace lockstep::core;
namespace core = lockstep::core;
using lockstep::test::RunBuilder;

namespace {

constexpr TimeNs kMs = 1'000'000;

// Two ranks, warm-up 1, three steps, times in ms. Host lanes: compute and comm.
//   step 0 (warm-up): both ranks [0,10), compute [0,8): idle 2.
//   step 1: rank 0 [10,20): compute [10,16), bucket 0 [14,18) 4 MB, bucket 1 [15,16) 8 MB
//             M = [14,18) = 4, C∩M = 2, exposed 2, compute only 4, idle 10 - 8 = 2
//           rank 1 [10,24): compute [10,20), bucket 0 [18,22) 4 MB
//             M = 4, C∩M = 2, exposed 2, compute only 8, idle 14 - 12 = 2
//   step 2: rank 0 [20,32): compute [20,26), bucket 0 [26,30)
//             M = 4, C∩M = 0, exposed 4, compute only 6, idle 12 - 10 = 2
//           rank 1 [24,32): compute [24,30), bucket 0 [28,32)
//             M = 4, C∩M = 2, exposed 2, compute only 4, idle 8 - 8 = 0
// Every (rank, step) took 32 samples: 64 per step.
core::Run twoRankRun()
{
    RunBuilder b(2, 1);
    const LaneId c0 = b.lane(0, LaneKind::Compute), m0 = b.lane(0, LaneKind::Comm);
    const LaneId c1 = b.lane(1, LaneKind::Compute), m1 = b.lane(1, LaneKind::Comm);
    b.bucket(0, 4 * kMs).bucket(1, 8 * kMs);
    b.step(0, 0, 0, 10 * kMs, 32).step(1, 0, 0, 10 * kMs, 32);
    b.step(0, 1, 10 * kMs, 20 * kMs, 32).step(1, 1, 10 * kMs, 24 * kMs, 32);
    b.step(0, 2, 20 * kMs, 32 * kMs, 32).step(1, 2, 24 * kMs, 32 * kMs, 32);
    b.span(c0, SpanKind::Forward, 0, 8 * kMs, 0).span(c1, SpanKind::Forward, 0, 8 * kMs, 0);
    b.span(c0, SpanKind::Backward, 10 * kMs, 16 * kMs, 1).span(m0, SpanKind::Comm, 14 * kMs, 18 * kMs, 1, 0, 4 * kMs);
    b.span(m0, SpanKind::Comm, 15 * kMs, 16 * kMs, 1, 1, 8 * kMs);
    b.span(c1, SpanKind::Backward, 10 * kMs, 20 * kMs, 1).span(m1, SpanKind::Comm, 18 * kMs, 22 * kMs, 1, 0, 4 * kMs);
    b.span(c0, SpanKind::Backward, 20 * kMs, 26 * kMs, 2).span(m0, SpanKind::Comm, 26 * kMs, 30 * kMs, 2, 0, 4 * kMs);
    b.span(c1, SpanKind::Backward, 24 * kMs, 30 * kMs, 2).span(m1, SpanKind::Comm, 28 * kMs, 32 * kMs, 2, 0, 4 * kMs);
    return b.build();
}

// The step jump's answer by a scan of every span: the rank's communication span of the step with
// the most bytes, the first in span order among equals.
std::optional<size_t> scanLargest(const core::Run& run, int32_t rank, int32_t step)
{
    std::optional<size_t> best;
    for (size_t i = 0; i < run.spans.size(); ++i) {
        const Span& s = run.spans[i];
        if (s.step == step && isCommunication(s.kind) && run.lanes[s.lane.v].rank == rank
            && (!best || s.bytes > run.spans[*best].bytes))
            best = i;
    }
    return best;
}

const StepMean* meanOf(const std::vector<StepMean>& v, int32_t step)
{
    for (const StepMean& m : v)
        if (m.step == step)
            return &m;
    return nullptr;
}

} // namespace

TEST(StepStats, QuantileIsType7)
{
    const std::vector<double> v = {1, 2, 3, 4};
    // h = q (n - 1): 0.75, 1.5, 2.25.
    EXPECT_DOUBLE_EQ(quantile(v, 0.25), 1.75);
    EXPECT_DOUBLE_EQ(quantile(v, 0.5), 2.5);
    EXPECT_DOUBLE_EQ(quantile(v, 0.75), 3.25);
    EXPECT_DOUBLE_EQ(quantile(v, 0.0), 1.0);
    EXPECT_DOUBLE_EQ(quantile(v, 1.0), 4.0);
    const std::vector<double> one = {5};
    EXPECT_DOUBLE_EQ(quantile(one, 0.25), 5.0);
    EXPECT_TRUE(std::isnan(quantile(std::vector<double>{}, 0.5)));
}

TEST(StepStats, QuartilesLeaveNaNOut)
{
    const Quartiles q = quartiles({4, std::nan(""), 1, 3, 2});
    EXPECT_EQ(q.count, 4);
    EXPECT_DOUBLE_EQ(q.min, 1);
    EXPECT_DOUBLE_EQ(q.q1, 1.75);
    EXPECT_DOUBLE_EQ(q.median, 2.5);
    EXPECT_DOUBLE_EQ(q.q3, 3.25);
    EXPECT_DOUBLE_EQ(q.max, 4);
    const Quartiles none = quartiles({std::nan("")});
    EXPECT_EQ(none.count, 0);
    EXPECT_TRUE(std::isnan(none.median));
}

TEST(StepStats, SpreadIsTheSampleStandardDeviation)
{
    const std::vector<double> v = {1, std::nan(""), 3};
    const Spread s = spreadOf(v);
    EXPECT_EQ(s.count, 2);
    EXPECT_DOUBLE_EQ(s.mean, 2.0);
    EXPECT_DOUBLE_EQ(s.sd, std::sqrt(2.0)); // ((1-2)^2 + (3-2)^2) / (2 - 1)
    const std::vector<double> one = {7};
    EXPECT_DOUBLE_EQ(spreadOf(one).sd, 0.0);
    const Spread none = spreadOf(std::vector<double>{});
    EXPECT_EQ(none.count, 0);
    EXPECT_TRUE(std::isnan(none.mean));
    EXPECT_TRUE(std::isnan(none.sd));
}

TEST(StepStats, StepMeansSpreadAndQuartilesByHand)
{
    const core::Run run = twoRankRun();
    const RunAnalysis a = analyze(run);
    const std::vector<StepMean> steps = stepMeans(run, a);
    ASSERT_EQ(steps.size(), 3u);
    const StepMean* s0 = meanOf(steps, 0);
    const StepMean* s1 = meanOf(steps, 1);
    const StepMean* s2 = meanOf(steps, 2);
    ASSERT_TRUE(s0 && s1 && s2);
    EXPECT_TRUE(s0->warmup);
    EXPECT_FALSE(s0->steady);
    EXPECT_TRUE(s1->steady && s2->steady);
    EXPECT_EQ(s1->ranks, 2);
    // Step 1: wall (10 + 14) / 2, compute only (4 + 8) / 2, overlapped (2 + 2) / 2, exposed 2,
    // idle 2; ratio (2 + 2) / (4 + 4); throughput 64 samples / 12 ms.
    EXPECT_DOUBLE_EQ(s1->wallMs, 12.0);
    EXPECT_DOUBLE_EQ(s1->computeOnlyMs, 6.0);
    EXPECT_DOUBLE_EQ(s1->overlappedMs, 2.0);
    EXPECT_DOUBLE_EQ(s1->exposedMs, 2.0);
    EXPECT_DOUBLE_EQ(s1->idleMs, 2.0);
    EXPECT_DOUBLE_EQ(s1->overlapRatio, 0.5);
    EXPECT_NEAR(s1->throughput, 64.0 / 0.012, 1e-6);
    // Step 2: wall (12 + 8) / 2, compute only (6 + 4) / 2, overlapped (0 + 2) / 2, exposed
    // (4 + 2) / 2, idle (2 + 0) / 2; ratio 2 / 8; throughput 64 / 10 ms.
    EXPECT_DOUBLE_EQ(s2->wallMs, 10.0);
    EXPECT_DOUBLE_EQ(s2->computeOnlyMs, 5.0);
    EXPECT_DOUBLE_EQ(s2->overlappedMs, 1.0);
    EXPECT_DOUBLE_EQ(s2->exposedMs, 3.0);
    EXPECT_DOUBLE_EQ(s2->idleMs, 1.0);
    EXPECT_DOUBLE_EQ(s2->overlapRatio, 0.25);
    EXPECT_NEAR(s2->throughput, 6400.0, 1e-6);

    // Spread over the steady steps 1 and 2 (two values x, y: sd = |x - y| / sqrt 2).
    const StepSpread sp = stepSpread(steps);
    EXPECT_EQ(sp.stepTimeMs.count, 2);
    EXPECT_DOUBLE_EQ(sp.stepTimeMs.mean, 11.0);
    EXPECT_NEAR(sp.stepTimeMs.sd, 2.0 / std::sqrt(2.0), 1e-12);
    EXPECT_NEAR(sp.overlapRatio.sd, 0.25 / std::sqrt(2.0), 1e-12);
    EXPECT_NEAR(sp.throughput.sd, (6400.0 - 64.0 / 0.012) / std::sqrt(2.0), 1e-6);

    // Quartiles of each rank's steady steps: rank 0 {10, 12}, rank 1 {14, 8}.
    const std::vector<RankStepTimes> q = rankStepTimes(a);
    ASSERT_EQ(q.size(), 2u);
    EXPECT_EQ(q[0].rank, 0);
    EXPECT_EQ(q[0].stepTimeMs.count, 2);
    EXPECT_DOUBLE_EQ(q[0].stepTimeMs.min, 10.0);
    EXPECT_DOUBLE_EQ(q[0].stepTimeMs.q1, 10.5);
    EXPECT_DOUBLE_EQ(q[0].stepTimeMs.median, 11.0);
    EXPECT_DOUBLE_EQ(q[0].stepTimeMs.q3, 11.5);
    EXPECT_DOUBLE_EQ(q[0].stepTimeMs.max, 12.0);
    EXPECT_DOUBLE_EQ(q[1].stepTimeMs.min, 8.0);
    EXPECT_DOUBLE_EQ(q[1].stepTimeMs.q1, 9.5);
    EXPECT_DOUBLE_EQ(q[1].stepTimeMs.q3, 12.5);
    EXPECT_DOUBLE_EQ(q[1].stepTimeMs.max, 14.0);
}

TEST(StepStats, OneRankHasNoOverlapSpread)
{
    RunBuilder b(1, 0);
    const LaneId c = b.lane(0, LaneKind::Compute), m = b.lane(0, LaneKind::Comm);
    b.step(0, 0, 0, 10 * kMs).step(0, 1, 10 * kMs, 20 * kMs);
    b.span(c, SpanKind::Backward, 0, 5 * kMs, 0).span(m, SpanKind::Comm, 4 * kMs, 6 * kMs, 0, 0, kMs);
    b.span(c, SpanKind::Backward, 10 * kMs, 15 * kMs, 1).span(m, SpanKind::Comm, 14 * kMs, 16 * kMs, 1, 0, kMs);
    const core::Run run = b.build();
    const RunAnalysis a = analyze(run);
    const std::vector<StepMean> steps = stepMeans(run, a);
    ASSERT_EQ(steps.size(), 2u);
    EXPECT_TRUE(std::isnan(steps[0].overlapRatio));
    // No samples recorded and no batch size: throughput unknown.
    EXPECT_TRUE(std::isnan(steps[0].throughput));
    const StepSpread sp = stepSpread(steps);
    EXPECT_EQ(sp.overlapRatio.count, 0);
    EXPECT_TRUE(std::isnan(sp.overlapRatio.sd));
    EXPECT_DOUBLE_EQ(sp.stepTimeMs.sd, 0.0);
}

TEST(StepStats, SpanBandwidthFollowsTheCollectiveAndTheOneRankRule)
{
    // Four ranks: busbw = algbw x 2 (4 - 1) / 4 = 1.5 algbw. Rank 0's bucket 0 in step 0 is a
    // chunked all-reduce, two spans [0,2) 1 MB and [1,4) 2 MB: one collective of 3 MB over 4 ms
    // (0.75 GB/s). A broadcast outside the buckets [5,7) of 3 MB: its own 1.5 GB/s.
    RunBuilder b(4, 0);
    const LaneId m0 = b.lane(0, LaneKind::Comm);
    const LaneId c0 = b.lane(0, LaneKind::Compute);
    for (int32_t r = 1; r < 4; ++r)
        b.lane(r, LaneKind::Comm);
    b.step(0, 0, 0, 10 * kMs);
    b.span(m0, SpanKind::Comm, 0, 2 * kMs, 0, 0, kMs).span(m0, SpanKind::Comm, 1 * kMs, 4 * kMs, 0, 0, 2 * kMs);
    b.span(m0, SpanKind::Comm, 5 * kMs, 7 * kMs, 0, kNoBucket, 3 * kMs);
    b.span(c0, SpanKind::Forward, 0, 1 * kMs, 0);
    const core::Run run = b.build();
    const RunAnalysis a = analyze(run);
    auto spanAt = [&](LaneId lane, TimeNs start) -> const Span& {
        for (const Span& s : run.spans)
            if (s.lane == lane && s.start == start)
                return s;
        throw std::runtime_error("no such span");
    };
    const SpanBandwidth chunk = spanBandwidth(run, a.buckets, spanAt(m0, 0));
    EXPECT_TRUE(chunk.applicable);
    EXPECT_TRUE(chunk.collective);
    EXPECT_EQ(chunk.worldSize, 4);
    EXPECT_EQ(chunk.bytes, 3 * kMs);
    EXPECT_EQ(chunk.duration, 4 * kMs);
    EXPECT_DOUBLE_EQ(chunk.algbwGBps, 0.75);
    EXPECT_DOUBLE_EQ(chunk.busbwGBps, 1.125);
    const SpanBandwidth broadcast = spanBandwidth(run, a.buckets, spanAt(m0, 5 * kMs));
    EXPECT_TRUE(broadcast.applicable);
    EXPECT_FALSE(broadcast.collective);
    EXPECT_DOUBLE_EQ(broadcast.algbwGBps, 1.5);
    EXPECT_DOUBLE_EQ(broadcast.busbwGBps, 2.25);
    const SpanBandwidth compute = spanBandwidth(run, a.buckets, spanAt(c0, 0));
    EXPECT_FALSE(compute.applicable);

    // A copy of 2 MB over 4 ms, on one rank as on many: 0.5 GB/s and no bus bandwidth.
    RunBuilder c(1, 0);
    const LaneId gpu = c.lane(0, LaneKind::GpuStream);
    c.step(0, 0, 0, 10 * kMs).span(gpu, SpanKind::Memcpy, 0, 4 * kMs, 0, kNoBucket, 2 * kMs);
    const core::Run copyRun = c.build();
    const SpanBandwidth copy = spanBandwidth(copyRun, {}, copyRun.spans.front());
    EXPECT_TRUE(copy.applicable);
    EXPECT_FALSE(copy.collective);
    EXPECT_DOUBLE_EQ(copy.algbwGBps, 0.5);
    EXPECT_TRUE(std::isnan(copy.busbwGBps));

    // One rank: nothing crosses a link, whatever the bytes.
    RunBuilder one(1, 0);
    const LaneId m = one.lane(0, LaneKind::Comm);
    one.step(0, 0, 0, 10 * kMs).span(m, SpanKind::Comm, 0, 2 * kMs, 0, 0, kMs);
    const core::Run oneRun = one.build();
    const RunAnalysis oneA = analyze(oneRun);
    const SpanBandwidth local = spanBandwidth(oneRun, oneA.buckets, oneRun.spans.front());
    EXPECT_FALSE(local.applicable);
    EXPECT_TRUE(std::isnan(local.algbwGBps));

    // Two ranks, no size anywhere (span 0 B, no bucket table): unknown, not 0 GB/s.
    RunBuilder two(2, 0);
    const LaneId t0 = two.lane(0, LaneKind::Comm);
    two.lane(1, LaneKind::Comm);
    two.step(0, 0, 0, 10 * kMs).span(t0, SpanKind::Comm, 0, 2 * kMs, 0, 0, 0);
    const core::Run twoRun = two.build();
    const RunAnalysis twoA = analyze(twoRun);
    const SpanBandwidth unknown = spanBandwidth(twoRun, twoA.buckets, twoRun.spans.front());
    EXPECT_TRUE(unknown.applicable);
    EXPECT_EQ(unknown.bytes, 0);
    EXPECT_TRUE(std::isnan(unknown.algbwGBps));
    EXPECT_TRUE(std::isnan(unknown.busbwGBps));
}

// The step jump's search through the index gives what a scan of every span gives, also for a
// GPU stream whose work of a step runs after the host step ended.
TEST(StepStats, LargestCollectiveMatchesAFullScan)
{
    RunBuilder b(2, 0);
    const LaneId c = b.lane(0, LaneKind::Compute), g = b.lane(0, LaneKind::GpuStream);
    b.lane(1, LaneKind::Comm);
    b.step(0, 0, 0, 10 * kMs).step(0, 1, 10 * kMs, 20 * kMs).step(0, 2, 20 * kMs, 30 * kMs);
    b.span(c, SpanKind::Forward, 0, 9 * kMs, 0).span(c, SpanKind::Forward, 10 * kMs, 19 * kMs, 1);
    b.span(g, SpanKind::Kernel, 2 * kMs, 9 * kMs, 0);
    b.span(g, SpanKind::CommKernel, 9 * kMs, 15 * kMs, 0, 0, 100); // step 0's, past its host end
    b.span(g, SpanKind::Kernel, 15 * kMs, 25 * kMs, 1);
    b.span(g, SpanKind::CommKernel, 25 * kMs, 30 * kMs, 1, 0, 50);
    b.span(g, SpanKind::CommKernel, 30 * kMs, 31 * kMs, 1, 1, 70); // after step 2's host start
    b.span(g, SpanKind::Kernel, 31 * kMs, 33 * kMs, 2);
    const core::Run run = b.build();
    const RunIndex index(run);
    for (int32_t step = 0; step < 3; ++step)
        EXPECT_EQ(index.largestCollective(0, step), scanLargest(run, 0, step)) << "step " << step;
    ASSERT_TRUE(index.largestCollective(0, 0));
    EXPECT_EQ(run.spans[*index.largestCollective(0, 0)].bytes, 100);
    EXPECT_EQ(run.spans[*index.largestCollective(0, 1)].bytes, 70);
    EXPECT_FALSE(index.largestCollective(0, 2)); // no communication in step 2
    EXPECT_FALSE(index.largestCollective(0, 9)); // no such step

    // The host run above: rank 0's step 1 has buckets 0 (4 MB) and 1 (8 MB).
    const core::Run host = twoRankRun();
    const RunIndex hostIndex(host);
    for (int32_t rank = 0; rank < 2; ++rank)
        for (int32_t step = 0; step < 3; ++step)
            EXPECT_EQ(hostIndex.largestCollective(rank, step), scanLargest(host, rank, step)) << rank << "/" << step;
    EXPECT_EQ(host.spans[*hostIndex.largestCollective(0, 1)].bytes, 8 * kMs);
}

// report --json carries them: the spread at the top, each rank's quartiles, step_means.
TEST(StepStats, ReportJsonCarriesThem)
{
    const core::Run run = twoRankRun();
    const RunAnalysis a = analyze(run);
    rapidjson::Document d;
    const std::string json = reportJson(run, a);
    d.Parse(json.c_str());
    ASSERT_FALSE(d.HasParseError());
    EXPECT_EQ(d["schema_version"].GetInt(), 6);
    EXPECT_NEAR(d["step_time_sd_ms"].GetDouble(), 2.0 / std::sqrt(2.0), 1e-9);
    EXPECT_NEAR(d["overlap_ratio_sd"].GetDouble(), 0.25 / std::sqrt(2.0), 1e-9);
    EXPECT_TRUE(d["throughput_sd_samples_per_s"].IsNumber());
    const auto& ranks = d["ranks"].GetArray();
    ASSERT_EQ(ranks.Size(), 2u);
    const auto& q1 = ranks[1]["step_time_quartiles_ms"];
    ASSERT_TRUE(q1.IsObject());
    EXPECT_DOUBLE_EQ(q1["min"].GetDouble(), 8.0);
    EXPECT_DOUBLE_EQ(q1["q1"].GetDouble(), 9.5);
    EXPECT_DOUBLE_EQ(q1["median"].GetDouble(), 11.0);
    EXPECT_DOUBLE_EQ(q1["q3"].GetDouble(), 12.5);
    EXPECT_DOUBLE_EQ(q1["max"].GetDouble(), 14.0);
    const auto& steps = d["step_means"].GetArray();
    ASSERT_EQ(steps.Size(), 3u);
    EXPECT_EQ(steps[2]["step"].GetInt(), 2);
    EXPECT_DOUBLE_EQ(steps[2]["step_time_ms"].GetDouble(), 10.0);
    EXPECT_DOUBLE_EQ(steps[2]["exposed_comm_ms"].GetDouble(), 3.0);
    EXPECT_DOUBLE_EQ(steps[2]["overlap_ratio"].GetDouble(), 0.25);
    EXPECT_NEAR(steps[2]["throughput_samples_per_s"].GetDouble(), 6400.0, 1e-6);
    EXPECT_TRUE(steps[0]["warmup"].GetBool());
}
