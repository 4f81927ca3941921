// Per-step breakdown (compute, communication, overlapped, exposed, idle, overlap ratio) and the
// interval helpers, on hand-built timelines. Every expected number is derived in the comments.
#include "lockstep/core/analysis.h"
#include "run_builder.h"

#include <QtTest/QtTest>

#include <cmath>

using namespace lockstep::core;
using lockstep::test::RunBuilder;

namespace {
const StepBreakdown* find(const std::vector<StepBreakdown>& v, int32_t rank, int32_t step)
{
    for (const StepBreakdown& b : v)
        if (b.rank == rank && b.step == step)
            return &b;
    return nullptr;
}
// The four parts of DESIGN.md add up to the wall: computeOnly + overlapped + exposed + idle.
void checkParts(const StepBreakdown& b)
{
    QCOMPARE(b.computeOnly + b.overlapped + b.exposed + b.idle, b.wall);
}
} // namespace

class TestStepBreakdown : public QObject {
    Q_OBJECT
private slots:
    void intervalHelpers()
    {
        // Clip to [1, 25): [5,15) [0,3)->[1,3) [2,4) [20,30)->[20,25) [14,16)
        // Union: [1,4) [5,16) [20,25) -> lengths 3 + 11 + 5 = 19.
        const auto u = unionClipped({{5, 15}, {0, 3}, {2, 4}, {20, 30}, {14, 16}}, 1, 25);
        QCOMPARE(u.size(), size_t(3));
        QCOMPARE(u[0].start, TimeNs(1));
        QCOMPARE(u[0].end, TimeNs(4));
        QCOMPARE(u[1].start, TimeNs(5));
        QCOMPARE(u[1].end, TimeNs(16));
        QCOMPARE(u[2].end, TimeNs(25));
        QCOMPARE(totalLength(u), TimeNs(19));
        // With {[3,6), [10,21)}: [3,4)=1, [5,6)=1, [10,16)=6, [20,21)=1 -> 9.
        QCOMPARE(intersectionLength(u, {{3, 6}, {10, 21}}), TimeNs(9));
        // Touching intervals merge; an interval fully outside the window disappears.
        const auto t = unionClipped({{0, 5}, {5, 10}, {50, 60}}, 0, 20);
        QCOMPARE(t.size(), size_t(1));
        QCOMPARE(totalLength(t), TimeNs(10));
        QVERIFY(unionClipped({}, 0, 10).empty());
    }

    void partialOverlap()
    {
        // W = [0,100). Compute: forward [10,40), backward [40,70) -> C = [10,70), |C| = 60.
        // Comm [60,90) -> |M| = 30. C ∩ M = [60,70) = 10. Exposed = 30 - 10 = 20.
        // Compute-only = 60 - 10 = 50. |C ∪ M| = [10,90) = 80 -> idle = 20. Ratio = 10/30.
        RunBuilder b;
        const auto c = b.lane(0, LaneKind::Compute);
        const auto m = b.lane(0, LaneKind::Comm);
        b.span(c, SpanKind::Forward, 10, 40).span(c, SpanKind::Backward, 40, 70);
        b.span(m, SpanKind::Comm, 60, 90, 0, 0, 100);
        b.step(0, 0, 0, 100);
        const auto v = stepBreakdown(b.build());
        QCOMPARE(v.size(), size_t(1));
        const StepBreakdown& s = v[0];
        QCOMPARE(s.wall, TimeNs(100));
        QCOMPARE(s.compute, TimeNs(60));
        QCOMPARE(s.communication, TimeNs(30));
        QCOMPARE(s.overlapped, TimeNs(10));
        QCOMPARE(s.exposed, TimeNs(20));
        QCOMPARE(s.computeOnly, TimeNs(50));
        QCOMPARE(s.idle, TimeNs(20));
        QCOMPARE(s.overlapRatio, 10.0 / 30.0);
        checkParts(s);
    }

    void spanCrossingStepBoundaryAndEmptySteps()
    {
        // Steps [0,100), [100,200), [200,300) (no spans at all), and a zero-width step 3 at 300.
        // Backward [80,130) and comm [90,140) cross the boundary at 100; forward [150,160).
        // Step 0: C = [80,100) = 20, M = [90,100) = 10, overlap 10, exposed 0, compute-only 10,
        //         |C ∪ M| = 20 -> idle 80, ratio 1.
        // Step 1: C = [100,130) + [150,160) = 40, M = [100,140) = 40, C ∩ M = [100,130) = 30,
        //         exposed 10, compute-only 10, |C ∪ M| = [100,140) + [150,160) = 50 -> idle 50,
        //         ratio 0.75.
        // Step 2: nothing: idle 100, ratio NaN (no communication).
        // Step 3: |W| = 0: everything 0.
        RunBuilder b(1, 1); // warm-up 1: step 0 is warm-up, the rest are steady
        const auto c = b.lane(0, LaneKind::Compute);
        const auto m = b.lane(0, LaneKind::Comm);
        b.span(c, SpanKind::Backward, 80, 130).span(c, SpanKind::Forward, 150, 160);
        b.span(m, SpanKind::Comm, 90, 140);
        b.step(0, 2, 200, 300).step(0, 0, 0, 100).step(0, 1, 100, 200).step(0, 3, 300, 300);
        const auto v = stepBreakdown(b.build());
        QCOMPARE(v.size(), size_t(4));
        QCOMPARE(v[0].step, 0); // sorted by (rank, step)
        QCOMPARE(v[3].step, 3);

        const StepBreakdown& s0 = *find(v, 0, 0);
        QCOMPARE(s0.compute, TimeNs(20));
        QCOMPARE(s0.communication, TimeNs(10));
        QCOMPARE(s0.overlapped, TimeNs(10));
        QCOMPARE(s0.exposed, TimeNs(0));
        QCOMPARE(s0.computeOnly, TimeNs(10));
        QCOMPARE(s0.idle, TimeNs(80));
        QCOMPARE(s0.overlapRatio, 1.0);
        QVERIFY(s0.warmup);
        checkParts(s0);

        const StepBreakdown& s1 = *find(v, 0, 1);
        QCOMPARE(s1.compute, TimeNs(40));
        QCOMPARE(s1.communication, TimeNs(40));
        QCOMPARE(s1.overlapped, TimeNs(30));
        QCOMPARE(s1.exposed, TimeNs(10));
        QCOMPARE(s1.computeOnly, TimeNs(10));
        QCOMPARE(s1.idle, TimeNs(50));
        QCOMPARE(s1.overlapRatio, 0.75);
        QVERIFY(!s1.warmup);
        checkParts(s1);

        const StepBreakdown& s2 = *find(v, 0, 2);
        QCOMPARE(s2.compute, TimeNs(0));
        QCOMPARE(s2.communication, TimeNs(0));
        QCOMPARE(s2.idle, TimeNs(100));
        QVERIFY(std::isnan(s2.overlapRatio));

        const StepBreakdown& s3 = *find(v, 0, 3);
        QCOMPARE(s3.wall, TimeNs(0));
        QCOMPARE(s3.compute, TimeNs(0));
        QCOMPARE(s3.idle, TimeNs(0));
    }

    void nestedComputeIsAUnion()
    {
        // W = [0,100). Compute lane: forward [0,50), a nested cpu op [10,20), backward [40,80)
        // overlapping forward, a wait [90,95) (not compute) and data [95,100) (not compute).
        // A host-thread lane of the same rank: cpu op [70,90).
        // C = [0,90) = 90 (not 50+10+40+20 = 120: it is a union). Comm [85,95): M = 10,
        // C ∩ M = [85,90) = 5, exposed 5, compute-only 85, |C ∪ M| = [0,95) -> idle 5.
        RunBuilder b;
        const auto c = b.lane(0, LaneKind::Compute);
        const auto h = b.lane(0, LaneKind::HostThread);
        const auto m = b.lane(0, LaneKind::Comm);
        b.span(c, SpanKind::Forward, 0, 50).span(c, SpanKind::CpuOp, 10, 20).span(c, SpanKind::Backward, 40, 80);
        b.span(c, SpanKind::Wait, 90, 95).span(c, SpanKind::DataLoad, 95, 100);
        b.span(h, SpanKind::CpuOp, 70, 90);
        b.span(m, SpanKind::Comm, 85, 95);
        b.step(0, 0, 0, 100);
        const auto v = stepBreakdown(b.build());
        QCOMPARE(v[0].compute, TimeNs(90));
        QCOMPARE(v[0].communication, TimeNs(10));
        QCOMPARE(v[0].overlapped, TimeNs(5));
        QCOMPARE(v[0].exposed, TimeNs(5));
        QCOMPARE(v[0].computeOnly, TimeNs(85));
        QCOMPARE(v[0].idle, TimeNs(5));
        QCOMPARE(v[0].overlapRatio, 0.5);
        checkParts(v[0]);
    }

    void zeroCommunicationGivesNaNRatio()
    {
        // W = [0,10): forward [0,4), optimizer [6,8): C = 6, M = 0 -> ratio NaN, idle 4.
        RunBuilder b;
        const auto c = b.lane(0, LaneKind::Compute);
        b.lane(0, LaneKind::Comm); // a comm lane with nothing on it
        b.span(c, SpanKind::Forward, 0, 4).span(c, SpanKind::Optimizer, 6, 8);
        b.step(0, 0, 0, 10);
        const auto v = stepBreakdown(b.build());
        QCOMPARE(v[0].compute, TimeNs(6));
        QCOMPARE(v[0].communication, TimeNs(0));
        QCOMPARE(v[0].exposed, TimeNs(0));
        QCOMPARE(v[0].idle, TimeNs(4));
        QVERIFY(std::isnan(v[0].overlapRatio));
    }

    void ranksDoNotMix()
    {
        // Two ranks with the same window [0,100). Rank 1's communication [0,100) must not
        // appear in rank 0's numbers. Rank 0: forward [0,50), comm [40,60): C 50, M 20,
        // overlap 10. Rank 1: forward [0,10), comm [0,100): C 10, M 100, overlap 10, exposed 90.
        RunBuilder b(2);
        const auto c0 = b.lane(0, LaneKind::Compute);
        const auto m0 = b.lane(0, LaneKind::Comm);
        const auto c1 = b.lane(1, LaneKind::Compute);
        const auto m1 = b.lane(1, LaneKind::Comm);
        b.span(c0, SpanKind::Forward, 0, 50).span(m0, SpanKind::Comm, 40, 60);
        b.span(c1, SpanKind::Forward, 0, 10).span(m1, SpanKind::Comm, 0, 100);
        b.step(1, 0, 0, 100).step(0, 0, 0, 100);
        const auto v = stepBreakdown(b.build());
        QCOMPARE(v.size(), size_t(2));
        QCOMPARE(v[0].rank, 0);
        QCOMPARE(v[0].compute, TimeNs(50));
        QCOMPARE(v[0].communication, TimeNs(20));
        QCOMPARE(v[0].overlapped, TimeNs(10));
        QCOMPARE(v[1].rank, 1);
        QCOMPARE(v[1].compute, TimeNs(10));
        QCOMPARE(v[1].communication, TimeNs(100));
        QCOMPARE(v[1].exposed, TimeNs(90));
        QCOMPARE(v[1].idle, TimeNs(0));
    }

    void gpuRuleUsesDeviceSpansOnly()
    {
        // Rank 0 has GPU stream lanes with spans, so only device spans count:
        //   stream A: kernel [20,50), comm kernel [40,70); stream B: memcpy [60,65).
        //   Host forward [0,100) and host comm [0,100) are ignored.
        //   C = [20,50) + [60,65) = 35, M = [40,70) = 30, C ∩ M = [40,50) + [60,65) = 15,
        //   exposed 15, compute-only 20, |C ∪ M| = [20,70) = 50 -> idle 50, ratio 0.5.
        // Rank 1 has an empty GPU stream lane: host spans count. Forward [0,100), comm [50,60):
        //   C 100, M 10, overlap 10, exposed 0, ratio 1.
        RunBuilder b(2);
        const auto h0 = b.lane(0, LaneKind::Compute);
        const auto m0 = b.lane(0, LaneKind::Comm);
        const auto ga = b.lane(0, LaneKind::GpuStream);
        const auto gb = b.lane(0, LaneKind::GpuStream);
        const auto h1 = b.lane(1, LaneKind::Compute);
        const auto m1 = b.lane(1, LaneKind::Comm);
        b.lane(1, LaneKind::GpuStream);
        b.span(h0, SpanKind::Forward, 0, 100).span(m0, SpanKind::Comm, 0, 100);
        b.span(ga, SpanKind::Kernel, 20, 50).span(ga, SpanKind::CommKernel, 40, 70);
        b.span(gb, SpanKind::Memcpy, 60, 65);
        b.span(h1, SpanKind::Forward, 0, 100).span(m1, SpanKind::Comm, 50, 60);
        b.step(0, 0, 0, 100).step(1, 0, 0, 100);
        const auto v = stepBreakdown(b.build());
        const StepBreakdown& g = *find(v, 0, 0);
        QCOMPARE(g.compute, TimeNs(35));
        QCOMPARE(g.communication, TimeNs(30));
        QCOMPARE(g.overlapped, TimeNs(15));
        QCOMPARE(g.exposed, TimeNs(15));
        QCOMPARE(g.computeOnly, TimeNs(20));
        QCOMPARE(g.idle, TimeNs(50));
        QCOMPARE(g.overlapRatio, 0.5);
        const StepBreakdown& h = *find(v, 1, 0);
        QCOMPARE(h.compute, TimeNs(100));
        QCOMPARE(h.communication, TimeNs(10));
        QCOMPARE(h.overlapRatio, 1.0);
    }

    void unsortedRunGivesTheSameAnswer()
    {
        // A Run that was not normalized (spans out of order) is analysed as if it were.
        RunBuilder b;
        const auto c = b.lane(0, LaneKind::Compute);
        const auto m = b.lane(0, LaneKind::Comm);
        b.span(m, SpanKind::Comm, 60, 90);
        b.span(c, SpanKind::Backward, 40, 70).span(c, SpanKind::Forward, 10, 40);
        b.step(0, 0, 0, 100);
        const auto v = stepBreakdown(b.run()); // deliberately not normalized
        QCOMPARE(v[0].compute, TimeNs(60));
        QCOMPARE(v[0].overlapped, TimeNs(10));
        QCOMPARE(v[0].idle, TimeNs(20));
    }

    void malformedSpansAreIgnoredNotFatal()
    {
        // A span on a lane that does not exist, an inverted span (end < start) and a zero-length
        // one: none of them may crash or count. Only forward [0,10) counts: C = 10 of W = 20.
        RunBuilder b;
        const auto c = b.lane(0, LaneKind::Compute);
        b.span(c, SpanKind::Forward, 0, 10).span(c, SpanKind::Backward, 15, 12).span(c, SpanKind::Optimizer, 18, 18);
        b.span(LaneId{42}, SpanKind::Comm, 0, 20, 0, 0, 100);
        b.ready(LaneId{42}, 5, 0, 0);
        b.step(0, 0, 0, 20).step(0, 1, 30, 25); // step 1 ends before it starts
        const Run run = b.build();
        const auto v = stepBreakdown(run);
        QCOMPARE(v.size(), size_t(2));
        QCOMPARE(v[0].compute, TimeNs(10));
        QCOMPARE(v[0].communication, TimeNs(0));
        QCOMPARE(v[0].idle, TimeNs(10));
        QCOMPARE(v[1].wall, TimeNs(0));
        QVERIFY(bucketStats(run).empty());
        QVERIFY(stragglers(run).stragglers.empty());
        const RunSummary s = summarize(run);
        QCOMPARE(s.steps, 2);
    }

    void stepWithoutLanesIsAllIdle()
    {
        // A step of a rank that has no lane at all (a rank that recorded nothing but steps).
        RunBuilder b(2);
        const auto c = b.lane(0, LaneKind::Compute);
        b.span(c, SpanKind::Forward, 0, 10);
        b.step(0, 0, 0, 10).step(1, 0, 0, 10);
        const auto v = stepBreakdown(b.build());
        QCOMPARE(v.size(), size_t(2));
        QCOMPARE(v[1].rank, 1);
        QCOMPARE(v[1].idle, TimeNs(10));
        QCOMPARE(v[0].compute, TimeNs(10));
    }
};

QTEST_GUILESS_MAIN(TestStepBreakdown)
#include "test_step_breakdown.moc"
