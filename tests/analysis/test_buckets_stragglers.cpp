// Bucket statistics (ready, launch, duration, bytes, algbw, busbw) and stragglers (arrival skew,
// late rank, wait caused, step and run stragglers with the 5% threshold), hand-derived.
#include "lockstep/core/analysis.h"
#include "run_builder.h"

#include <QtTest/QtTest>

#include <array>

using namespace lockstep::core;
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
Run threeRankRun(TimeNs length, TimeNs period, int32_t warmup,
                 const std::vector<std::array<std::array<TimeNs, 3>, 2>>& launches)
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

// Launch offsets within the step, [step][bucket][rank]:
//  step 0: bucket 0: 100 130 110 -> skew 30, late rank 1, wait (130-100)+(130-110) = 50
//          bucket 1: 300 300 340 -> skew 40, late rank 2, wait 40 + 40 = 80
//          -> step straggler rank 2 (80 > 50)
//  step 1: bucket 0: 100 160 100 -> skew 60, late rank 1, wait 60 + 60 = 120
//          bucket 1: 300 300 300 -> skew 0, late rank 0 (tie: lowest rank), wait 0
//          -> step straggler rank 1 (120)
//  step 2: bucket 0: 100 150 100 -> late rank 1, wait 100
//          bucket 1: 300 300 310 -> late rank 2, wait 20
//          -> step straggler rank 1 (100)
// Over steps 0..2: rank 1 is straggler in 2 steps, caused 50 + 120 + 100 = 270, mean 90;
// rank 2 in 1 step, caused 80 + 0 + 20 = 100, mean 33.3; rank 0 caused 0.
const std::vector<std::array<std::array<TimeNs, 3>, 2>> kLaunches = {
    {{{100, 130, 110}, {300, 300, 340}}},
    {{{100, 160, 100}, {300, 300, 300}}},
    {{{100, 150, 100}, {300, 300, 310}}},
};
} // namespace

class TestBucketsStragglers : public QObject {
    Q_OBJECT
private slots:
    void bucketStatistics()
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
        QCOMPARE(v.size(), size_t(5));
        // Sorted by (rank, step, bucket).
        QCOMPARE(v[0].rank, 0);
        QCOMPARE(v[0].bucket, 0);
        QCOMPARE(v[4].rank, 2);
        QCOMPARE(v[4].bucket, 1);

        const BucketStat& a = *find(v, 0, 0, 0);
        QCOMPARE(a.ready, TimeNs(15));
        QCOMPARE(a.launch, TimeNs(20));
        QCOMPARE(a.completion, TimeNs(30));
        QCOMPARE(a.readyToLaunch, TimeNs(5));
        QCOMPARE(a.duration, TimeNs(10));
        QCOMPARE(a.bytes, int64_t(1000));
        QCOMPARE(a.algbwGBps, 100.0);
        QCOMPARE(a.busbwGBps, 100.0 * 4.0 / 3.0);

        const BucketStat& c = *find(v, 0, 0, 1);
        QCOMPARE(c.ready, TimeNs(-1));
        QCOMPARE(c.readyToLaunch, TimeNs(-1));
        QCOMPARE(c.bytes, int64_t(3000));
        QCOMPARE(c.algbwGBps, 150.0);
        QCOMPARE(c.busbwGBps, 200.0);

        const BucketStat& d = *find(v, 1, 0, 1);
        QCOMPARE(d.launch, TimeNs(40));
        QCOMPARE(d.completion, TimeNs(70));
        QCOMPARE(d.duration, TimeNs(30));
        QCOMPARE(d.bytes, int64_t(3000));
        QCOMPARE(d.algbwGBps, 100.0);
        QCOMPARE(d.readyToLaunch, TimeNs(5));

        const BucketStat& e = *find(v, 2, 0, 0);
        QCOMPARE(e.launch, TimeNs(22));
        QCOMPARE(e.duration, TimeNs(28));
        const BucketStat& f = *find(v, 2, 0, 1);
        QCOMPARE(f.launch, TimeNs(60));
        QCOMPARE(f.duration, TimeNs(20));
        QCOMPARE(f.algbwGBps, 150.0);
    }

    void oneRankHasNoBusTraffic()
    {
        // N = 1: busbw = algbw × 0 = 0; skew 0; no straggler.
        RunBuilder b(1);
        const auto m = b.lane(0, LaneKind::Comm);
        b.span(m, SpanKind::Comm, 0, 10, 0, 0, 500).step(0, 0, 0, 20);
        const Run run = b.build();
        const auto v = bucketStats(run);
        QCOMPARE(v.size(), size_t(1));
        QCOMPARE(v[0].algbwGBps, 50.0);
        QCOMPARE(v[0].busbwGBps, 0.0);
        const StragglerReport rep = stragglers(run);
        QCOMPARE(rep.skews.size(), size_t(1));
        QCOMPARE(rep.skews[0].skew, TimeNs(0));
        QCOMPARE(rep.skews[0].waitCaused, TimeNs(0));
        QCOMPARE(rep.perStep.size(), size_t(1));
        QCOMPARE(rep.perStep[0].rank, -1); // nobody caused any wait
        QVERIFY(rep.stragglers.empty());
    }

    void skewLateRankAndWait()
    {
        const StragglerReport rep = stragglers(threeRankRun(1000, 1000, 0, kLaunches));
        QCOMPARE(rep.skews.size(), size_t(6));
        // Sorted by (step, bucket).
        QCOMPARE(rep.skews[0].step, 0);
        QCOMPARE(rep.skews[0].bucket, 0);
        QCOMPARE(rep.skews[0].skew, TimeNs(30));
        QCOMPARE(rep.skews[0].lateRank, 1);
        QCOMPARE(rep.skews[0].waitCaused, TimeNs(50));
        QCOMPARE(rep.skews[1].skew, TimeNs(40));
        QCOMPARE(rep.skews[1].lateRank, 2);
        QCOMPARE(rep.skews[1].waitCaused, TimeNs(80));
        QCOMPARE(rep.skews[2].skew, TimeNs(60));
        QCOMPARE(rep.skews[2].waitCaused, TimeNs(120));
        QCOMPARE(rep.skews[3].skew, TimeNs(0));
        QCOMPARE(rep.skews[3].lateRank, 0); // all equal: the lowest rank
        QCOMPARE(rep.skews[3].waitCaused, TimeNs(0));

        QCOMPARE(rep.perStep.size(), size_t(3));
        QCOMPARE(rep.perStep[0].rank, 2);
        QCOMPARE(rep.perStep[0].waitCaused, TimeNs(80));
        QCOMPARE(rep.perStep[0].stepTime, TimeNs(1000));
        QCOMPARE(rep.perStep[1].rank, 1);
        QCOMPARE(rep.perStep[1].waitCaused, TimeNs(120));
        QCOMPARE(rep.perStep[2].rank, 1);
        QCOMPARE(rep.perStep[2].waitCaused, TimeNs(100));

        QCOMPARE(rep.perRank.size(), size_t(3));
        QCOMPARE(rep.perRank[1].stepsAsStraggler, 2);
        QCOMPARE(rep.perRank[1].meanWaitNs, 90.0);
        QCOMPARE(rep.perRank[1].meanWaitFraction, 0.09);
        QCOMPARE(rep.perRank[2].stepsAsStraggler, 1);
        QCOMPARE(rep.perRank[2].meanWaitNs, 100.0 / 3.0);
        QCOMPARE(rep.perRank[0].stepsAsStraggler, 0);
        QCOMPARE(rep.perRank[0].meanWaitNs, 0.0);
        // Rank 1: straggler in most steps (2 of 3) and 90 / 1000 = 9% >= 5%.
        QCOMPARE(rep.stragglers, std::vector<int32_t>{1});
    }

    void runStragglerThreshold()
    {
        // Same launches, longer steps: rank 1's mean wait is 90, so it is a run straggler iff
        // 90 / step time >= 0.05, i.e. step time <= 1800.
        QCOMPARE(stragglers(threeRankRun(1700, 2000, 0, kLaunches)).stragglers, std::vector<int32_t>{1}); // 5.3%
        QCOMPARE(stragglers(threeRankRun(1800, 2000, 0, kLaunches)).stragglers, std::vector<int32_t>{1}); // 5.0%
        QVERIFY(stragglers(threeRankRun(1801, 2000, 0, kLaunches)).stragglers.empty()); // 4.997%
        QVERIFY(stragglers(threeRankRun(1900, 2000, 0, kLaunches)).stragglers.empty()); // 4.7%
    }

    void warmupStepsAreExcluded()
    {
        // Warm-up 1: steady steps 1 and 2. Rank 1 is straggler in both, caused (120 + 100) / 2
        // = 110 -> 11%. Rank 2 was straggler only in step 0 (warm-up): 0 steady steps.
        const StragglerReport rep = stragglers(threeRankRun(1000, 1000, 1, kLaunches));
        QCOMPARE(rep.perRank[1].stepsAsStraggler, 2);
        QCOMPARE(rep.perRank[1].meanWaitNs, 110.0);
        QCOMPARE(rep.perRank[2].stepsAsStraggler, 0);
        QCOMPARE(rep.perRank[2].meanWaitNs, 10.0); // (0 + 20) / 2
        QCOMPARE(rep.stragglers, std::vector<int32_t>{1});
        QCOMPARE(rep.perStep.size(), size_t(3)); // per-step results still cover warm-up steps
    }

    void uniformLagCountsOncePerStep()
    {
        // Rank 1 launches both buckets 30 late: each bucket's wait is 30 + 30 = 60. The waits
        // overlap in time, so the step's wait is the larger, 60 (a sum would say 120).
        // Step length 1500: 60 / 1500 = 4% < 5%, no run straggler (120 would have been 8%).
        const std::vector<std::array<std::array<TimeNs, 3>, 2>> lag = {{{{100, 130, 100}, {300, 330, 300}}}};
        const StragglerReport rep = stragglers(threeRankRun(1500, 2000, 0, lag));
        QCOMPARE(rep.perStep.size(), size_t(1));
        QCOMPARE(rep.perStep[0].rank, 1);
        QCOMPARE(rep.perStep[0].waitCaused, TimeNs(60));
        QCOMPARE(rep.perRank[1].meanWaitNs, 60.0);
        QVERIFY(rep.stragglers.empty());
        // Step length 1000: 6% -> straggler.
        QCOMPARE(stragglers(threeRankRun(1000, 2000, 0, lag)).stragglers, std::vector<int32_t>{1});
    }

    void stepStragglerTieGoesToLowerRank()
    {
        // One step: bucket 0 launches 0 10 0 -> rank 1 causes 20; bucket 1 launches 100 100 110
        // -> rank 2 causes 20. Equal: the lower rank (1) is the step straggler. Both caused a
        // mean of 20 per step; only rank 1 is straggler in the most steps.
        const StragglerReport rep = stragglers(threeRankRun(100, 1000, 0, {{{{0, 10, 0}, {100, 100, 110}}}}));
        QCOMPARE(rep.perStep.size(), size_t(1));
        QCOMPARE(rep.perStep[0].rank, 1);
        QCOMPARE(rep.perStep[0].waitCaused, TimeNs(20));
        QCOMPARE(rep.stragglers, std::vector<int32_t>{1}); // 20 / 100 = 20%
    }
};

QTEST_GUILESS_MAIN(TestBucketsStragglers)
#include "test_buckets_stragglers.moc"
