// Bucket statistics (ready, launch, duration, bytes, algbw, busbw) and stragglers (arrival skew,
// late rank, wait caused as the mean over the other ranks, rank-time lost as the sum, step
// stragglers, the run straggler and its evidence), hand-derived; and the noise test on
// synthetic runs with and without an injected straggler.
#include "lockstep/core/analysis.h"
#include "lockstep/core/diagnostics.h"
#include "lockstep/core/report.h"
#include "lockstep/core/synthetic.h"
#include "run_builder.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>

using namespace lockstep::core;
namespace core = lockstep::core; // gtest's Test::Run hides core::Run inside TEST bodies
using lockstep::test::RunBuilder;

namespace {
const BucketStat* find(const std::vector<BucketStat>& v, int32_t rank, int32_t step, int32_t bucket)
{
    for (const BucketStat& b : v)
        if (b.rank == rank && b.step == step && b.bucket == bucket)
            return &b;
    return nullptr;
}

// Three ranks; each rank's comm lane gets one Comm span per (step, bucket) launched at the
// given time and lasting 50. Steps are [s*period, s*period + length) on every rank.
using Launches = std::vector<std::array<std::array<TimeNs, 3>, 2>>;
Run threeRankRun(TimeNs length, TimeNs period, int32_t warmup, const Launches& launches)
{
    RunBuilder b(3, warmup);
    std::array<LaneId, 3> comm{};
    for (int32_t r = 0; r < 3; ++r) {
        b.lane(r, LaneKind::Compute);
        comm[r] = b.lane(r, LaneKind::Comm);
    }
    b.bucket(0, 1000).bucket(1, 1000);
    for (int32_t s = 0; s < static_cast<int32_t>(launches.size()); ++s) {
        for (int32_t r = 0; r < 3; ++r) {
            b.step(r, s, s * period, s * period + length);
            for (int32_t k = 0; k < 2; ++k) {
                const TimeNs t = s * period + launches[s][k][r];
                b.span(comm[r], SpanKind::Comm, t, t + 50, s, k, 1000);
            }
        }
    }
    return b.build();
}

// Launch offsets within the step, [step][bucket][rank]. Wait caused = mean over the 2 other
// ranks of (late launch - their launch); rank-time lost = the sum:
//  step 0: bucket 0: 100 130 110 -> skew 30, late rank 1, lost 30 + 20 = 50, wait 25
//          bucket 1: 300 300 340 -> skew 40, late rank 2, lost 40 + 40 = 80, wait 40
//          -> step straggler rank 2 (40 > 25)
//  step 1: bucket 0: 100 160 100 -> skew 60, late rank 1, lost 120, wait 60
//          bucket 1: 300 300 300 -> skew 0, late rank 0 (tie: lowest rank), wait 0
//          -> step straggler rank 1 (60)
//  step 2: bucket 0: 100 150 100 -> late rank 1, lost 100, wait 50
//          bucket 1: 300 300 310 -> late rank 2, lost 20, wait 10
//          -> step straggler rank 1 (50)
// Per step, a rank's wait is its largest bucket wait: rank 1: 25, 60, 50 (sum 135, mean 45);
// rank 2: 40, 0, 10 (mean 50/3); rank 0: 0.
// Lateness = launch - mean launch of the other two, on the step's most skewed bucket:
//  step 0 (bucket 1, skew 40): rank 0 -20, rank 1 -20, rank 2 +40
//  step 1 (bucket 0, skew 60): rank 0 -30, rank 1 +60, rank 2 -30
//  step 2 (bucket 0, skew 50): rank 0 -25, rank 1 +50, rank 2 -25
// Candidate rank 1 (straggler in 2 of 3 steps): median lateness 50; the others' lateness
// {-20, -30, -25, 40, -30, -25} has median -25 and absolute deviations {5, 5, 0, 65, 5, 0},
// MAD 5, so sigma = 1.4826 x 5 = 7.413; the noise floor is 2 standard errors of a difference
// of medians over n = 3 steps of N = 3 ranks: 2 x 1.2533 x sigma x 3/2 / sqrt(3) = 16.09; 50 - (-25) = 75
// clears it. Chance: 3 x P(Binomial(3, 1/3) >= 2) = 3 x 7/27 = 7/9: far above 5%.
const Launches kLaunches = {
    {{{100, 130, 110}, {300, 300, 340}}},
    {{{100, 160, 100}, {300, 300, 300}}},
    {{{100, 150, 100}, {300, 300, 310}}},
};
} // namespace

TEST(Buckets, Statistics)
{
    // World size 3: busbw = algbw × 2(3-1)/3 = algbw × 4/3. Buckets: 0 = 1000 B, 1 = 3000 B.
    RunBuilder b(3);
    const auto c0 = b.lane(0, LaneKind::Compute);
    const auto m0 = b.lane(0, LaneKind::Comm);
    const auto c1 = b.lane(1, LaneKind::Compute);
    const auto m1 = b.lane(1, LaneKind::Comm);
    const auto m2 = b.lane(2, LaneKind::Comm);
    const auto g2 = b.lane(2, LaneKind::GpuStream);
    b.bucket(1, 3000).bucket(0, 1000, {"w", "b"});
    // Rank 0, step 0, bucket 0: gradients ready at 10 and 15 -> ready = 15 (the last).
    // A marker instant at 18 and a ready instant of step 1 are not gradient-ready of this
    // step. Comm [20,30) with 1000 B: ready->launch 5, duration 10, algbw 1000/10 = 100 GB/s,
    // busbw 133.33.
    b.ready(c0, 10, 0, 0).ready(c0, 15, 0, 0).ready(c0, 18, 0, 0, InstantKind::Marker).ready(c0, 500, 1, 0);
    b.span(m0, SpanKind::Comm, 20, 30, 0, 0, 1000);
    // Rank 0, bucket 1: comm [40,60) without bytes -> the table's 3000 B; no ready instant
    // -> ready -1, ready->launch -1; algbw 3000/20 = 150, busbw 200.
    b.span(m0, SpanKind::Comm, 40, 60, 0, 1, 0);
    // Rank 1, bucket 1 recorded as two chunks [40,50) + [55,70), 1500 B each: one collective,
    // launch 40, completion 70, duration 30, bytes 3000, algbw 100. Ready at 35 -> 5.
    b.ready(c1, 35, 0, 1);
    b.span(m1, SpanKind::Comm, 55, 70, 0, 1, 1500).span(m1, SpanKind::Comm, 40, 50, 0, 1, 1500);
    // Rank 2, bucket 0: host comm [22,50) and a device comm kernel [25,45): the host span
    // wins (launch 22, duration 28). Untagged communication (no bucket) is ignored.
    b.span(m2, SpanKind::Comm, 22, 50, 0, 0, 1000).span(g2, SpanKind::CommKernel, 25, 45, 0, 0, 1000);
    b.span(m2, SpanKind::Comm, 100, 200, 0, kNoBucket, 5);
    // Rank 2, bucket 1: only a device comm kernel [60,80), 3000 B: used, duration 20.
    b.span(g2, SpanKind::CommKernel, 60, 80, 0, 1, 3000);
    for (int32_t r = 0; r < 3; ++r)
        b.step(r, 0, 0, 100);
    const auto v = bucketStats(b.build());
    ASSERT_EQ(v.size(), 5u);
    // Sorted by (rank, step, bucket).
    EXPECT_EQ(v[0].rank, 0);
    EXPECT_EQ(v[0].bucket, 0);
    EXPECT_EQ(v[4].rank, 2);
    EXPECT_EQ(v[4].bucket, 1);

    const BucketStat& a = *find(v, 0, 0, 0);
    EXPECT_EQ(a.ready, 15);
    EXPECT_EQ(a.launch, 20);
    EXPECT_EQ(a.completion, 30);
    EXPECT_EQ(a.readyToLaunch, 5);
    EXPECT_EQ(a.duration, 10);
    EXPECT_EQ(a.bytes, 1000);
    EXPECT_DOUBLE_EQ(a.algbwGBps, 100.0);
    EXPECT_DOUBLE_EQ(a.busbwGBps, 100.0 * 4.0 / 3.0);

    const BucketStat& c = *find(v, 0, 0, 1);
    EXPECT_EQ(c.ready, -1);
    EXPECT_EQ(c.readyToLaunch, -1);
    EXPECT_EQ(c.bytes, 3000);
    EXPECT_DOUBLE_EQ(c.algbwGBps, 150.0);
    EXPECT_DOUBLE_EQ(c.busbwGBps, 200.0);

    const BucketStat& d = *find(v, 1, 0, 1);
    EXPECT_EQ(d.launch, 40);
    EXPECT_EQ(d.completion, 70);
    EXPECT_EQ(d.duration, 30);
    EXPECT_EQ(d.bytes, 3000);
    EXPECT_DOUBLE_EQ(d.algbwGBps, 100.0);
    EXPECT_EQ(d.readyToLaunch, 5);

    const BucketStat& e = *find(v, 2, 0, 0);
    EXPECT_EQ(e.launch, 22);
    EXPECT_EQ(e.duration, 28);
    const BucketStat& f = *find(v, 2, 0, 1);
    EXPECT_EQ(f.launch, 60);
    EXPECT_EQ(f.duration, 20);
    EXPECT_DOUBLE_EQ(f.algbwGBps, 150.0);
}

// Issue 28: which bucket is exposed. Each instant of a rank's bucket communication belongs to
// one bucket (the oldest unfinished: a rank's all-reduces run one at a time in launch order), so
// the buckets' exposed times add up to the step's exposed bucket communication. Both ranks:
// step [0, 100), backward [0, 60); all-reduces b0 [20, 70), b1 [40, 90), b2 [95, 98),
// b3 [96, 97) (completes inside b2: owns nothing), a broadcast (no bucket) [99, 100).
//   b0 owns [20, 70): compute [20, 60) -> hidden 40, exposed 10
//   b1 owns [70, 90) (b0 holds [40, 70)): no compute -> hidden 0, exposed 20
//   b2 owns [95, 98): exposed 3;  b3 owns nothing: 0
//   buckets: 33; the step's exposed communication |M \ C| = [60, 90) + [95, 98) + [99, 100) = 34,
//   other 1 (the broadcast). Measured over each bucket's whole lifetime instead, b1 would read
//   30 and the buckets 43, more than the step's 34.
TEST(Buckets, ExposedAndHiddenAddUpToTheStep)
{
    constexpr TimeNs ms = 1'000'000; // the times above are milliseconds
    RunBuilder b(2, 0);
    for (int32_t r = 0; r < 2; ++r) {
        const LaneId compute = b.lane(r, LaneKind::Compute);
        const LaneId comm = b.lane(r, LaneKind::Comm);
        b.step(r, 0, 0, 100 * ms);
        b.span(compute, SpanKind::Backward, 0, 60 * ms, 0);
        b.span(comm, SpanKind::Comm, 20 * ms, 70 * ms, 0, 0, 1000);
        b.span(comm, SpanKind::Comm, 40 * ms, 90 * ms, 0, 1, 1000);
        b.span(comm, SpanKind::Comm, 95 * ms, 98 * ms, 0, 2, 1000);
        b.span(comm, SpanKind::Comm, 96 * ms, 97 * ms, 0, 3, 1000);
        b.span(comm, SpanKind::Comm, 99 * ms, 100 * ms, 0);
    }
    b.bucket(0, 1000).bucket(1, 1000).bucket(2, 1000).bucket(3, 1000);
    const core::Run run = b.build();
    const std::vector<BucketStat> stats = bucketStats(run);
    const TimeNs exposed[4] = {10, 20, 3, 0}, hidden[4] = {40, 0, 0, 0};
    for (int32_t r = 0; r < 2; ++r) {
        for (int32_t k = 0; k < 4; ++k) {
            const BucketStat* st = find(stats, r, 0, k);
            ASSERT_NE(st, nullptr) << "rank " << r << " bucket " << k;
            EXPECT_EQ(st->exposed, exposed[k] * ms) << "rank " << r << " bucket " << k;
            EXPECT_EQ(st->hidden, hidden[k] * ms) << "rank " << r << " bucket " << k;
        }
    }
    const RunAnalysis a = analyze(run);
    EXPECT_DOUBLE_EQ(a.summary.exposedCommMs, 34.0);
    EXPECT_DOUBLE_EQ(a.summary.bucketExposedMs, 33.0);
    ASSERT_EQ(a.summary.buckets.size(), 4u);
    EXPECT_DOUBLE_EQ(a.summary.buckets[1].meanExposedMs, 20.0);
    EXPECT_DOUBLE_EQ(a.summary.buckets[0].meanHiddenMs, 40.0);
    const std::string text = reportText(run, a);
    EXPECT_NE(text.find("buckets: 33.000 of the step's 34.000 ms exposed communication; other: 1.000 ms"), std::string::npos) << text;
}

TEST(Stragglers, OneRankIsNotApplicable)
{
    // N = 1: nothing crosses a link, so algbw and busbw are not defined (NaN, never a number
    // that looks like a bandwidth); skew 0; no wait; stragglers not applicable.
    RunBuilder b(1);
    const auto m = b.lane(0, LaneKind::Comm);
    b.span(m, SpanKind::Comm, 0, 10, 0, 0, 500).step(0, 0, 0, 20);
    const core::Run run = b.build();
    const auto v = bucketStats(run);
    ASSERT_EQ(v.size(), 1u);
    EXPECT_TRUE(std::isnan(v[0].algbwGBps));
    EXPECT_TRUE(std::isnan(v[0].busbwGBps));
    const StragglerReport rep = stragglers(run);
    ASSERT_EQ(rep.skews.size(), 1u);
    EXPECT_EQ(rep.skews[0].skew, 0);
    EXPECT_EQ(rep.skews[0].ranks, 1);
    EXPECT_EQ(rep.skews[0].waitCaused, 0);
    ASSERT_EQ(rep.perStep.size(), 1u);
    EXPECT_EQ(rep.perStep[0].rank, -1); // nobody caused any wait
    EXPECT_TRUE(rep.stragglers.empty());
    EXPECT_FALSE(rep.evidence.applicable);
    const RunSummary s = summarize(run);
    EXPECT_FALSE(s.multiRank);
    EXPECT_TRUE(std::isnan(s.overlapRatio));
    EXPECT_TRUE(std::isnan(s.exposedCommMs));
    EXPECT_TRUE(std::isnan(s.buckets[0].meanWaitCausedMs));
    EXPECT_TRUE(std::isnan(s.buckets[0].meanAlgbwGBps));
    EXPECT_TRUE(std::isnan(s.buckets[0].meanBusbwGBps));
    EXPECT_TRUE(std::isnan(s.buckets[0].meanSkewMs));
    EXPECT_EQ(rep.evidence.notApplicable, "1 rank");
}

TEST(Stragglers, RanksWithUnalignedClocksGetNoVerdict)
{
    // The same lag that names rank 1 in RunStragglerThreshold, in a trace whose timestamps count
    // from each profiler's start: lateness between ranks is unknown, so no verdict, and why.
    const Launches lag(6, {{{100, 130, 100}, {300, 330, 300}}});
    core::Run run = threeRankRun(500, 1000, 0, lag);
    ASSERT_EQ(stragglers(run).stragglers, std::vector<int32_t>{1});
    run.diagnostics.push_back(makeDiagnostic(DiagnosticKind::RelativeTimestamps, 3));
    const StragglerReport rep = stragglers(run);
    EXPECT_TRUE(rep.stragglers.empty());
    EXPECT_FALSE(rep.evidence.applicable);
    EXPECT_NE(rep.evidence.notApplicable.find("clocks are not comparable"), std::string::npos);
}

TEST(Stragglers, SkewLateRankWaitAndRankTimeLost)
{
    const StragglerReport rep = stragglers(threeRankRun(1000, 1000, 0, kLaunches));
    ASSERT_EQ(rep.skews.size(), 6u);
    // Sorted by (step, bucket).
    EXPECT_EQ(rep.skews[0].step, 0);
    EXPECT_EQ(rep.skews[0].bucket, 0);
    EXPECT_EQ(rep.skews[0].ranks, 3);
    EXPECT_EQ(rep.skews[0].skew, 30);
    EXPECT_EQ(rep.skews[0].lateRank, 1);
    EXPECT_EQ(rep.skews[0].rankTimeLost, 50);
    EXPECT_EQ(rep.skews[0].waitCaused, 25);
    EXPECT_EQ(rep.skews[1].skew, 40);
    EXPECT_EQ(rep.skews[1].lateRank, 2);
    EXPECT_EQ(rep.skews[1].rankTimeLost, 80);
    EXPECT_EQ(rep.skews[1].waitCaused, 40);
    EXPECT_EQ(rep.skews[2].skew, 60);
    EXPECT_EQ(rep.skews[2].waitCaused, 60);
    EXPECT_EQ(rep.skews[2].rankTimeLost, 120);
    EXPECT_EQ(rep.skews[3].skew, 0);
    EXPECT_EQ(rep.skews[3].lateRank, 0); // all equal: the lowest rank
    EXPECT_EQ(rep.skews[3].waitCaused, 0);
    for (const BucketSkew& sk : rep.skews)
        EXPECT_LE(sk.waitCaused, sk.skew); // a mean over the others is never more than the skew

    ASSERT_EQ(rep.perStep.size(), 3u);
    EXPECT_EQ(rep.perStep[0].rank, 2);
    EXPECT_EQ(rep.perStep[0].waitCaused, 40);
    EXPECT_EQ(rep.perStep[0].rankTimeLost, 80);
    EXPECT_EQ(rep.perStep[0].stepTime, 1000);
    EXPECT_EQ(rep.perStep[1].rank, 1);
    EXPECT_EQ(rep.perStep[1].waitCaused, 60);
    EXPECT_EQ(rep.perStep[2].rank, 1);
    EXPECT_EQ(rep.perStep[2].waitCaused, 50);

    ASSERT_EQ(rep.perRank.size(), 3u);
    EXPECT_EQ(rep.perRank[1].stepsAsStraggler, 2);
    EXPECT_DOUBLE_EQ(rep.perRank[1].meanWaitNs, 45.0);
    EXPECT_DOUBLE_EQ(rep.perRank[1].meanWaitFraction, 0.045);
    EXPECT_DOUBLE_EQ(rep.perRank[1].medianLatenessNs, 50.0);
    EXPECT_EQ(rep.perRank[2].stepsAsStraggler, 1);
    EXPECT_DOUBLE_EQ(rep.perRank[2].meanWaitNs, 50.0 / 3.0);
    EXPECT_EQ(rep.perRank[0].stepsAsStraggler, 0);
    EXPECT_DOUBLE_EQ(rep.perRank[0].meanWaitNs, 0.0);

    // Per (rank, step): rank 2 in step 0 caused 40 and was 40 late; rank 0 in step 2 was -25.
    ASSERT_EQ(rep.perRankStep.size(), 9u);
    EXPECT_EQ(rep.perRankStep[6].rank, 2);
    EXPECT_EQ(rep.perRankStep[6].step, 0);
    EXPECT_EQ(rep.perRankStep[6].waitCaused, 40);
    EXPECT_DOUBLE_EQ(rep.perRankStep[6].latenessNs, 40.0);
    EXPECT_DOUBLE_EQ(rep.perRankStep[2].latenessNs, -25.0);

    // Evidence: rank 1 is late in 2 of 3 steps, which chance explains (7/9), clears the noise
    // floor, but its mean wait is 45 / 1000 = 4.5% < 5%: no run straggler.
    const StragglerEvidence& e = rep.evidence;
    EXPECT_TRUE(e.applicable);
    EXPECT_EQ(e.candidate, 1);
    EXPECT_EQ(e.steadySteps, 3);
    EXPECT_EQ(e.stepsLate, 2);
    EXPECT_FALSE(e.mostSteps); // a majority, but 7/9 > 5% chance
    EXPECT_DOUBLE_EQ(e.meanWaitNs, 45.0);
    EXPECT_DOUBLE_EQ(e.waitFraction, 0.045);
    EXPECT_FALSE(e.waitAboveThreshold);
    EXPECT_NEAR(e.noiseSpreadNs, 1.4826 * 5, 1e-9);
    EXPECT_NEAR(e.noiseFloorNs, 2 * 1.2533 * 1.4826 * 5 * 1.5 / std::sqrt(3.0), 1e-9); // N/(N-1) = 3/2
    EXPECT_DOUBLE_EQ(e.latenessAboveOthersNs, 75.0);
    EXPECT_TRUE(e.clearsNoise);
    EXPECT_NEAR(e.chance, 7.0 / 9.0, 1e-12);
    EXPECT_FALSE(e.straggler);
    EXPECT_TRUE(rep.stragglers.empty());
}

TEST(Stragglers, RunStragglerThreshold)
{
    // Six steps in which rank 1 launches both buckets 30 late: wait 30 per step (see
    // UniformLagCountsOncePerStep), late in 6 of 6 steps (chance 3 x (1/3)^6 = 0.41%), lateness
    // +30 against the others' -15 with no spread (floor 0). So it is a run straggler iff
    // 30 / step time >= 5%, i.e. step time <= 600.
    const Launches lag(6, {{{100, 130, 100}, {300, 330, 300}}});
    EXPECT_EQ(stragglers(threeRankRun(500, 1000, 0, lag)).stragglers, std::vector<int32_t>{1}); // 6%
    EXPECT_EQ(stragglers(threeRankRun(600, 1000, 0, lag)).stragglers, std::vector<int32_t>{1}); // 5.0%
    EXPECT_TRUE(stragglers(threeRankRun(601, 1000, 0, lag)).stragglers.empty());               // 4.99%
    EXPECT_NEAR(stragglers(threeRankRun(600, 1000, 0, lag)).evidence.chance, 3.0 / 729.0, 1e-12);
}

TEST(Stragglers, WarmupStepsAreExcluded)
{
    // Warm-up 1: steady steps 1 and 2. Rank 1 is the straggler in both, waits 60 and 50 ->
    // mean 55 = 5.5%. Rank 2 was the straggler only in step 0 (warm-up): 0 steady steps, waits
    // 0 and 10 -> mean 5. Lateness: rank 1 {60, 50}, median 55; the others {-30, -25, -30, -25}:
    // median -27.5, deviations all 2.5, MAD 2.5, sigma 3.7065, floor over n = 2 steps
    // 2 x 1.2533 x 3.7065 x 3/2 / sqrt(2) = 9.9 (N/(N-1) = 3/2 for three ranks): cleared by 82.5. But 2 of 2 steps is what
    // chance gives 3 x (1/3)^2 = 1/3 of the time: not named.
    const StragglerReport rep = stragglers(threeRankRun(1000, 1000, 1, kLaunches));
    EXPECT_EQ(rep.perRank[1].stepsAsStraggler, 2);
    EXPECT_DOUBLE_EQ(rep.perRank[1].meanWaitNs, 55.0);
    EXPECT_EQ(rep.perRank[2].stepsAsStraggler, 0);
    EXPECT_DOUBLE_EQ(rep.perRank[2].meanWaitNs, 5.0);
    EXPECT_DOUBLE_EQ(rep.evidence.latenessAboveOthersNs, 82.5);
    EXPECT_NEAR(rep.evidence.noiseFloorNs, 2 * 1.2533 * 1.4826 * 2.5 * 1.5 / std::sqrt(2.0), 1e-9);
    EXPECT_NEAR(rep.evidence.chance, 1.0 / 3.0, 1e-12); // 3 x (1/3)^2
    EXPECT_TRUE(rep.evidence.waitAboveThreshold);
    EXPECT_TRUE(rep.evidence.clearsNoise);
    EXPECT_FALSE(rep.evidence.mostSteps);
    EXPECT_TRUE(rep.stragglers.empty());
    EXPECT_EQ(rep.perStep.size(), 3u); // per-step results still cover warm-up steps
}

TEST(Stragglers, UniformLagCountsOncePerStep)
{
    // Rank 1 launches both buckets 30 late in each of 6 steps: each bucket's rank-time lost is
    // 30 + 30 = 60 and its wait 30 (the mean). The waits overlap in time, so the step's wait is
    // the larger, 30 (a sum over buckets would say 60). Lateness: rank 1 +30, ranks 0 and 2 -15
    // each (MAD 0, floor 0): it clears the noise. Step length 1000: 30 / 1000 = 3% < 5%: no
    // straggler.
    const Launches lag(6, {{{100, 130, 100}, {300, 330, 300}}});
    const StragglerReport rep = stragglers(threeRankRun(1000, 2000, 0, lag));
    ASSERT_EQ(rep.perStep.size(), 6u);
    EXPECT_EQ(rep.perStep[0].rank, 1);
    EXPECT_EQ(rep.perStep[0].waitCaused, 30);
    EXPECT_EQ(rep.perStep[0].rankTimeLost, 60);
    EXPECT_DOUBLE_EQ(rep.perRank[1].meanWaitNs, 30.0);
    EXPECT_DOUBLE_EQ(rep.evidence.latenessAboveOthersNs, 45.0);
    EXPECT_TRUE(rep.evidence.clearsNoise);
    EXPECT_TRUE(rep.stragglers.empty());
    // Step length 500: 6% -> straggler (6 of 6 steps: chance 0.41%).
    EXPECT_EQ(stragglers(threeRankRun(500, 2000, 0, lag)).stragglers, std::vector<int32_t>{1});
}

TEST(Stragglers, ATieIsNoise)
{
    // One step: bucket 0 launches 0 10 0 -> rank 1 waits 10 (lost 20); bucket 1 launches
    // 100 100 110 -> rank 2 waits 10. Equal: the lower rank (1) is the step straggler, 10% of
    // the 100-long step. One step is what chance gives 3 x 1/3 = 100% of the time: one step
    // proves nothing, not a straggler.
    const StragglerReport rep = stragglers(threeRankRun(100, 1000, 0, {{{{0, 10, 0}, {100, 100, 110}}}}));
    ASSERT_EQ(rep.perStep.size(), 1u);
    EXPECT_EQ(rep.perStep[0].rank, 1);
    EXPECT_EQ(rep.perStep[0].waitCaused, 10);
    EXPECT_TRUE(rep.evidence.waitAboveThreshold);
    EXPECT_DOUBLE_EQ(rep.evidence.chance, 1.0);
    EXPECT_FALSE(rep.evidence.mostSteps);
    EXPECT_TRUE(rep.stragglers.empty());
}

TEST(Stragglers, NoiseAloneNamesNobodyAndARealStragglerIsFound)
{
    // Synthetic 4-rank runs of 30 steps whose ranks start each step up to 30% of the step late
    // at random (noise, independent per rank and step): nobody is named, on every seed. With
    // a 1 ms (10% of the step) delay on rank 2 and 3% noise, rank 2 is named on every seed.
    for (uint64_t seed = 1; seed <= 10; ++seed) {
        SyntheticParams p;
        p.worldSize = 4;
        p.steps = 30;
        p.seed = seed;
        p.arrivalNoiseNs = 3'000'000;
        const StragglerReport noisy = stragglers(makeSyntheticRun(p));
        EXPECT_TRUE(noisy.stragglers.empty()) << "seed " << seed << ": rank " << noisy.evidence.candidate;
        p.arrivalNoiseNs = 300'000;
        p.stragglerRank = 2;
        p.stragglerDelayNs = 1'000'000;
        const StragglerReport real = stragglers(makeSyntheticRun(p));
        EXPECT_EQ(real.stragglers, std::vector<int32_t>{2}) << "seed " << seed;
        EXPECT_GT(real.evidence.confidence(), 0.99);
    }
}

TEST(Stragglers, JitterWaitsAreNotASystematicDelay)
{
    // Six steps of 1000; bucket 1 launches together (300, skew 0), so bucket 0 is each step's
    // most skewed. Rank 1 launches bucket 0 30 after the others in four steps and 210 after in
    // two (a rare stall, not a steady lag):
    //   wait caused per step: 30 x 4, 210 x 2 -> mean 90 = 9% of the step (>= 5%);
    //   lateness: rank 1 {30 x 4, 210 x 2}, median 30; the others {-15 x 8, -105 x 4}, median -15
    //   -> 45 above the others; systematic delay 45 x (3-1)/3 = 30 = 3% of the step (< 5%).
    //   late in 6 of 6 (chance 3 x (1/3)^6 = 0.41%); the others' MAD is 0 (8 of 12 at -15), so
    //   the noise floor is 0 and ranks 0 and 2 have the same median (-15): rank floor 0.
    // Most steps and clear of the noise, but the wait comes from two stalls: not a straggler.
    Launches l;
    for (int s = 0; s < 6; ++s)
        l.push_back({{{100, s % 3 == 2 ? 310 : 130, 100}, {300, 300, 300}}});
    const StragglerEvidence e = stragglers(threeRankRun(1000, 2000, 0, l)).evidence;
    EXPECT_EQ(e.candidate, 1);
    EXPECT_EQ(e.stepsLate, 6);
    EXPECT_TRUE(e.mostSteps);
    EXPECT_DOUBLE_EQ(e.meanWaitNs, 90.0);
    EXPECT_DOUBLE_EQ(e.waitFraction, 0.09);
    EXPECT_DOUBLE_EQ(e.latenessAboveOthersNs, 45.0);
    EXPECT_DOUBLE_EQ(e.systematicDelayNs, 30.0);
    EXPECT_DOUBLE_EQ(e.delayFraction, 0.03);
    EXPECT_FALSE(e.waitAboveThreshold);
    EXPECT_DOUBLE_EQ(e.noiseFloorNs, 0.0);
    EXPECT_DOUBLE_EQ(e.rankSpreadNs, 0.0);
    EXPECT_DOUBLE_EQ(e.rankFloorNs, 0.0);
    EXPECT_TRUE(e.clearsNoise);
    EXPECT_FALSE(e.straggler);
}

TEST(Stragglers, ALagWithinTheOtherRanksSpreadIsNotNamed)
{
    // 30 steps of 1000, bucket 1 together, bucket 0 launched at 100 (rank 0), 200 (rank 1) and
    // 160 (rank 2) every step: healthy ranks 0 and 2 sit 60 apart for the whole run.
    //   rank 1 is late in 30 of 30; wait = mean(200-100, 200-160) = 70 = 7%.
    //   lateness: rank 1 200 - 130 = 70; rank 0 100 - 180 = -80; rank 2 160 - 150 = 10.
    //   the others pooled {-80 x 30, 10 x 30}: median -35 -> 105 above; delay 105 x 2/3 = 70.
    //   step floor: every deviation from -35 is 45, sigma = 1.4826 x 45 = 66.717,
    //   2 x 1.2533 x 66.717 x 3/2 / sqrt(30) = 45.80 < 105 (the old test named rank 1).
    //   rank floor: the others' medians -80 and 10, sd = sqrt(45^2 + 45^2) = 63.640,
    //   2 x 63.640 x sqrt(1 + 1/2) = 155.88 > 105: rank 1 is no further from them than they are
    //   from each other. Not named.
    Launches spread(30, {{{100, 200, 160}, {300, 300, 300}}});
    const StragglerEvidence e = stragglers(threeRankRun(1000, 2000, 0, spread)).evidence;
    EXPECT_EQ(e.candidate, 1);
    EXPECT_TRUE(e.mostSteps);
    EXPECT_TRUE(e.waitAboveThreshold);
    EXPECT_DOUBLE_EQ(e.latenessAboveOthersNs, 105.0);
    EXPECT_NEAR(e.systematicDelayNs, 70.0, 1e-9);
    EXPECT_NEAR(e.noiseFloorNs, 2 * 1.2533 * 1.4826 * 45 * 1.5 / std::sqrt(30.0), 1e-9);
    EXPECT_NEAR(e.rankSpreadNs, std::sqrt(2.0) * 45, 1e-9);
    EXPECT_NEAR(e.rankFloorNs, 2 * std::sqrt(2.0) * 45 * std::sqrt(1.5), 1e-9);
    EXPECT_FALSE(e.clearsNoise);
    EXPECT_FALSE(e.straggler);

    // The same lag with the healthy ranks 10 apart (100 and 110): rank 1's lateness
    // 200 - 105 = 95, rank 0 100 - 155 = -55, rank 2 110 - 150 = -40; pooled median -47.5 ->
    // 142.5 above (delay 95 = 9.5%, wait mean(100, 90) = 95); sigma 1.4826 x 7.5, step floor
    // 2 x 1.2533 x 11.12 x 3/2 / sqrt(30) = 7.63; the others' medians -55 and -40: sd 10.607, rank floor 25.98. Named.
    Launches close(30, {{{100, 200, 110}, {300, 300, 300}}});
    const StragglerReport named = stragglers(threeRankRun(1000, 2000, 0, close));
    EXPECT_DOUBLE_EQ(named.evidence.latenessAboveOthersNs, 142.5);
    EXPECT_NEAR(named.evidence.systematicDelayNs, 95.0, 1e-9);
    EXPECT_NEAR(named.evidence.rankFloorNs, 2 * std::sqrt(2.0) * 7.5 * std::sqrt(1.5), 1e-9);
    EXPECT_TRUE(named.evidence.clearsNoise);
    EXPECT_EQ(named.stragglers, std::vector<int32_t>{1});
}

TEST(Stragglers, TheCauseFromTheTrainingThreadsSchedulerStatistics)
{
    // Rank 1 launches both buckets 30 late in 6 of 6 steps of 500 (RunStragglerThreshold): named;
    // its lateness +30 against the others' -15 is 45 above them, a systematic delay of
    // 45 x 2/3 = 30. Half of it is 15: a cause must carry at least that.
    const Launches lag(6, {{{100, 130, 100}, {300, 330, 300}}});
    const auto withSched = [&](int64_t cpu1, int64_t runq1) {
        core::Run run = threeRankRun(500, 1000, 0, lag);
        for (Step& st : run.steps) {
            // Ranks 0 and 2 ran 400 and 420 on a CPU and waited 10 and 20 for one: others'
            // means 410 and 15.
            st.cpuNs = st.rank == 1 ? cpu1 : st.rank == 0 ? 400 : 420;
            st.runqNs = st.rank == 1 ? runq1 : st.rank == 0 ? 10 : 20;
        }
        return run;
    };
    constexpr double kNsToMs = 1e-6;
    {
        // Rank 1 waited 45 for a CPU, 30 more than the others: the machine ran it later.
        const core::Run run = withSched(410, 45);
        const StragglerReport rep = stragglers(run);
        ASSERT_EQ(rep.stragglers, std::vector<int32_t>{1});
        EXPECT_NEAR(rep.evidence.systematicDelayNs, 30.0, 1e-9);
        EXPECT_NEAR(rep.evidence.cpuMs, 410 * kNsToMs, 1e-15);
        EXPECT_NEAR(rep.evidence.othersCpuMs, 410 * kNsToMs, 1e-15);
        EXPECT_NEAR(rep.evidence.runqMs, 45 * kNsToMs, 1e-15);
        EXPECT_NEAR(rep.evidence.othersRunqMs, 15 * kNsToMs, 1e-15);
        EXPECT_EQ(rep.evidence.cause, StragglerCause::CpuWait);
        EXPECT_STREQ(stragglerCauseName(rep.evidence.cause), "cpu-wait");
        // The per-rank means of the summary are the same numbers.
        const RunAnalysis a = analyze(run);
        ASSERT_EQ(a.ranks.size(), 3u);
        EXPECT_NEAR(a.ranks[2].cpuMs, 420 * kNsToMs, 1e-15);
        EXPECT_NEAR(a.ranks[1].runqMs, 45 * kNsToMs, 1e-15);
    }
    // 20 more CPU time than the others (>= 15), the same wait: more work or a slower core.
    EXPECT_EQ(stragglers(withSched(430, 15)).evidence.cause, StragglerCause::CpuTime);
    // 10 more CPU and 5 more wait: together 15, half of the 30: on its CPU, CPU time the larger.
    EXPECT_EQ(stragglers(withSched(420, 20)).evidence.cause, StragglerCause::CpuTime);
    // 5 more CPU and 3 more wait: 8 < 15: the delay is elsewhere.
    EXPECT_EQ(stragglers(withSched(415, 18)).evidence.cause, StragglerCause::Elsewhere);
    // Less CPU time but a much longer wait: -5 + 25 = 20 >= 15, the wait names it.
    EXPECT_EQ(stragglers(withSched(405, 40)).evidence.cause, StragglerCause::CpuWait);
    // Not measured on one rank: no numbers, no cause; the verdict does not change.
    core::Run partial = withSched(410, 45);
    for (Step& st : partial.steps)
        if (st.rank == 2)
            st.cpuNs = st.runqNs = -1;
    const StragglerReport rep = stragglers(partial);
    EXPECT_EQ(rep.stragglers, std::vector<int32_t>{1});
    EXPECT_TRUE(std::isnan(rep.evidence.cpuMs));
    EXPECT_EQ(rep.evidence.cause, StragglerCause::Unknown);
    EXPECT_TRUE(std::isnan(analyze(partial).ranks[2].cpuMs));
}

TEST(Stragglers, TheClocksUncertaintyRaisesTheFloors)
{
    // RunStragglerThreshold's lag at a 500 step: rank 1 is 30 late every step; its lateness +30
    // against the others' -15, a lead of 45 over floors of 0. The clocks: rank 0 is the
    // reference (0), rank 1 uncertain by 10, rank 2 by u2. The candidate's clock may sit
    // 10 + u2 from another's, which moves the lead by that x N/(N-1) = 1.5: with u2 = 20 the
    // clock floor is 45 and the lead just clears it; with u2 = 21 it is 46.5 and nobody is named
    // ("none (clock +-31)"). Ranks that share one clock (all 0) change nothing.
    const Launches lag(6, {{{100, 130, 100}, {300, 330, 300}}});
    for (const TimeNs u2 : {0, 20, 21}) {
        core::Run run = threeRankRun(500, 1000, 0, lag);
        ASSERT_EQ(run.ranks.size(), 3u);
        run.ranks[1].clockUncertaintyNs = u2 == 0 ? 0 : 10;
        run.ranks[2].clockUncertaintyNs = u2;
        const StragglerReport rep = stragglers(run);
        const StragglerEvidence& e = rep.evidence;
        EXPECT_DOUBLE_EQ(e.latenessAboveOthersNs, 45.0);
        EXPECT_DOUBLE_EQ(e.clockUncertaintyNs, u2 == 0 ? 0.0 : 10.0 + u2) << u2;
        EXPECT_DOUBLE_EQ(e.clockFloorNs, e.clockUncertaintyNs * 1.5) << u2;
        EXPECT_EQ(e.straggler, u2 != 21) << u2;
        EXPECT_EQ(e.withinClock, u2 == 21) << u2;
        EXPECT_EQ(rep.stragglers, u2 == 21 ? std::vector<int32_t>{} : std::vector<int32_t>{1}) << u2;
        // Issue 26: waits across clocks that disagree by a sizeable part of the step (here 30 or
        // 31 of a 500 step, 6 %) come with a warning in the report; one clock, none.
        const std::string text = reportText(run, analyze(run));
        EXPECT_EQ(text.find("clocks can disagree by") != std::string::npos, u2 != 0) << text;
    }
}
