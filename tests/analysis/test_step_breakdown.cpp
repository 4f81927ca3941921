// Per-step breakdown (the five parts: compute-only, overlapped, exposed, memory-only, idle), the
// interval algebra, device work by its launching step, and RunIndex's per-step / per-range
// queries, on hand-built timelines. Every expected number is derived in the comments.
#include "lockstep/core/analysis.h"
#include "lockstep/core/synthetic.h"
#include "run_builder.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace lockstep::core;
namespace core = lockstep::core; // gtest's Test::Run hides core::Run inside TEST bodies
using lockstep::test::RunBuilder;

namespace {
const StepBreakdown* find(const std::vector<StepBreakdown>& v, int32_t rank, int32_t step)
{
    for (const StepBreakdown& b : v)
        if (b.rank == rank && b.step == step)
            return &b;
    return nullptr;
}
// docs/design.md: the five parts add up to the wall.
void expectPartsAddUp(const StepBreakdown& b)
{
    EXPECT_EQ(b.computeOnly + b.overlapped + b.exposed + b.memoryOnly + b.idle, b.wall)
        << "rank " << b.rank << " step " << b.step;
}
void expectSameBreakdown(const StepBreakdown& a, const StepBreakdown& b)
{
    EXPECT_EQ(a.start, b.start);
    EXPECT_EQ(a.end, b.end);
    EXPECT_EQ(a.wall, b.wall);
    EXPECT_EQ(a.compute, b.compute);
    EXPECT_EQ(a.communication, b.communication);
    EXPECT_EQ(a.memory, b.memory);
    EXPECT_EQ(a.computeOnly, b.computeOnly);
    EXPECT_EQ(a.overlapped, b.overlapped);
    EXPECT_EQ(a.exposed, b.exposed);
    EXPECT_EQ(a.memoryOnly, b.memoryOnly);
    EXPECT_EQ(a.idle, b.idle);
    EXPECT_EQ(a.window, b.window);
    EXPECT_EQ(a.steady, b.steady);
}
using Set = std::vector<Interval>;
} // namespace

TEST(Classification, EveryKindIsInExactlyOneCategory)
{
    // HTA's classification: memcpy and memset are memory, never compute.
    EXPECT_EQ(spanCategory(SpanKind::Kernel), SpanCategory::Compute);
    EXPECT_EQ(spanCategory(SpanKind::Backward), SpanCategory::Compute);
    EXPECT_EQ(spanCategory(SpanKind::CpuOp), SpanCategory::Compute);
    EXPECT_EQ(spanCategory(SpanKind::CommKernel), SpanCategory::Communication);
    EXPECT_EQ(spanCategory(SpanKind::Comm), SpanCategory::Communication);
    EXPECT_EQ(spanCategory(SpanKind::Memcpy), SpanCategory::Memory);
    EXPECT_EQ(spanCategory(SpanKind::Memset), SpanCategory::Memory);
    EXPECT_EQ(spanCategory(SpanKind::Wait), SpanCategory::Other);
    EXPECT_EQ(spanCategory(SpanKind::DataLoad), SpanCategory::Other);
    for (int k = 0; k < kSpanKindCount; ++k) {
        const auto kind = static_cast<SpanKind>(k);
        EXPECT_EQ(int(isCompute(kind)) + int(isCommunication(kind)) + int(isMemory(kind))
                      + int(spanCategory(kind) == SpanCategory::Other),
                  1)
            << spanKindName(kind);
    }
}

TEST(Intervals, UnionLengthsAndAlgebra)
{
    // Clip to [1, 25): [5,15) [0,3)->[1,3) [2,4) [20,30)->[20,25) [14,16)
    // Union: [1,4) [5,16) [20,25) -> lengths 3 + 11 + 5 = 19.
    const Set u = unionClipped({{5, 15}, {0, 3}, {2, 4}, {20, 30}, {14, 16}}, 1, 25);
    EXPECT_EQ(u, (Set{{1, 4}, {5, 16}, {20, 25}}));
    EXPECT_EQ(totalLength(u), 19);
    // With {[3,6), [10,21)}: [3,4)=1, [5,6)=1, [10,16)=6, [20,21)=1 -> 9.
    const Set v{{3, 6}, {10, 21}};
    EXPECT_EQ(intersectionLength(u, v), 9);
    EXPECT_EQ(intersectIntervals(u, v), (Set{{3, 4}, {5, 6}, {10, 16}, {20, 21}}));
    // u \ v: [1,3) [6,10) [16,20)->nothing of u... u = [1,4) [5,16) [20,25):
    // [1,4) minus [3,6) -> [1,3); [5,16) minus [3,6),[10,21) -> [6,10); [20,25) minus [10,21) -> [21,25).
    EXPECT_EQ(subtractIntervals(u, v), (Set{{1, 3}, {6, 10}, {21, 25}}));
    EXPECT_EQ(lengthWithin(u, 2, 22), 2 + 11 + 2);
    EXPECT_EQ(clipTo(u, 2, 22), (Set{{2, 4}, {5, 16}, {20, 22}}));
    // Touching intervals merge; an interval fully outside the window disappears.
    const Set t = unionClipped({{0, 5}, {5, 10}, {50, 60}}, 0, 20);
    EXPECT_EQ(t, (Set{{0, 10}}));
    EXPECT_TRUE(unionClipped({}, 0, 10).empty());
}

TEST(Intervals, WindowPartsAddUp)
{
    // W = [0,100), C = [10,40) [50,70), M = [30,60), Mem = [55,80) [90,95). Elementary pieces:
    //   [0,10) none: idle 10          [10,30) C: compute-only 20    [30,40) C+M: overlapped 10
    //   [40,50) M: exposed 10         [50,55) C+M: overlapped 5     [55,60) C+M+Mem: overlapped 5
    //   [60,70) C+Mem: compute-only 10 [70,80) Mem: memory-only 10  [80,90) idle 10
    //   [90,95) Mem: memory-only 5    [95,100) idle 5
    // compute-only 30, overlapped 20, exposed 10, memory-only 15, idle 25: 100.
    // |C| 50, |M| 30, |Mem| 25 + 5 = 30.
    const Set c{{10, 40}, {50, 70}}, m{{30, 60}}, mem{{55, 80}, {90, 95}};
    const WindowParts p = windowParts(c, m, mem, 0, 100);
    EXPECT_EQ(p.wall, 100);
    EXPECT_EQ(p.compute, 50);
    EXPECT_EQ(p.communication, 30);
    EXPECT_EQ(p.memory, 30);
    EXPECT_EQ(p.computeOnly, 30);
    EXPECT_EQ(p.overlapped, 20);
    EXPECT_EQ(p.exposed, 10);
    EXPECT_EQ(p.memoryOnly, 15);
    EXPECT_EQ(p.idle, 25);
    // A sub-window [35, 58): C [35,40) [50,58) = 13, M [35,58) = 23, Mem [55,58) = 3;
    // overlapped [35,40) [50,58) = 13, exposed [40,50) = 10, compute-only 0, memory-only 0, idle 0.
    const WindowParts q = windowParts(c, m, mem, 35, 58);
    EXPECT_EQ(q.wall, 23);
    EXPECT_EQ(q.overlapped, 13);
    EXPECT_EQ(q.exposed, 10);
    EXPECT_EQ(q.memory, 3);
    EXPECT_EQ(q.idle + q.memoryOnly + q.computeOnly, 0);
    EXPECT_EQ(windowParts(c, m, mem, 5, 5).wall, 0);
}

TEST(StepBreakdown, PartialOverlap)
{
    // W = [0,100). Compute: forward [10,40), backward [40,70) -> C = [10,70), |C| = 60.
    // Comm [60,90) -> |M| = 30. C ∩ M = [60,70) = 10. Exposed = 30 - 10 = 20.
    // Compute-only = 60 - 10 = 50. |C ∪ M| = [10,90) = 80 -> idle 20. Ratio = 10/30.
    RunBuilder b(2);
    const auto c = b.lane(0, LaneKind::Compute);
    const auto m = b.lane(0, LaneKind::Comm);
    b.span(c, SpanKind::Forward, 10, 40).span(c, SpanKind::Backward, 40, 70);
    b.span(m, SpanKind::Comm, 60, 90, 0, 0, 100);
    b.step(0, 0, 0, 100);
    const auto v = stepBreakdown(b.build());
    ASSERT_EQ(v.size(), 1u);
    const StepBreakdown& s = v[0];
    EXPECT_EQ(s.wall, 100);
    EXPECT_EQ(s.compute, 60);
    EXPECT_EQ(s.communication, 30);
    EXPECT_EQ(s.overlapped, 10);
    EXPECT_EQ(s.exposed, 20);
    EXPECT_EQ(s.computeOnly, 50);
    EXPECT_EQ(s.memoryOnly, 0);
    EXPECT_EQ(s.idle, 20);
    EXPECT_DOUBLE_EQ(s.overlapRatio, 10.0 / 30.0);
    EXPECT_EQ(s.window, StepWindow::Host);
    expectPartsAddUp(s);
}

TEST(StepBreakdown, SpanCrossingStepBoundaryAndEmptySteps)
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
    RunBuilder b(2, 1); // warm-up 1: step 0 is warm-up, the rest are steady
    const auto c = b.lane(0, LaneKind::Compute);
    const auto m = b.lane(0, LaneKind::Comm);
    b.span(c, SpanKind::Backward, 80, 130).span(c, SpanKind::Forward, 150, 160);
    b.span(m, SpanKind::Comm, 90, 140);
    b.step(0, 2, 200, 300).step(0, 0, 0, 100).step(0, 1, 100, 200).step(0, 3, 300, 300);
    const auto v = stepBreakdown(b.build());
    ASSERT_EQ(v.size(), 4u);
    EXPECT_EQ(v[0].step, 0); // sorted by (rank, step)
    EXPECT_EQ(v[3].step, 3);

    const StepBreakdown& s0 = *find(v, 0, 0);
    EXPECT_EQ(s0.compute, 20);
    EXPECT_EQ(s0.communication, 10);
    EXPECT_EQ(s0.overlapped, 10);
    EXPECT_EQ(s0.exposed, 0);
    EXPECT_EQ(s0.computeOnly, 10);
    EXPECT_EQ(s0.idle, 80);
    EXPECT_DOUBLE_EQ(s0.overlapRatio, 1.0);
    EXPECT_TRUE(s0.warmup);
    EXPECT_FALSE(s0.steady);
    expectPartsAddUp(s0);

    const StepBreakdown& s1 = *find(v, 0, 1);
    EXPECT_EQ(s1.compute, 40);
    EXPECT_EQ(s1.communication, 40);
    EXPECT_EQ(s1.overlapped, 30);
    EXPECT_EQ(s1.exposed, 10);
    EXPECT_EQ(s1.computeOnly, 10);
    EXPECT_EQ(s1.idle, 50);
    EXPECT_DOUBLE_EQ(s1.overlapRatio, 0.75);
    EXPECT_FALSE(s1.warmup);
    EXPECT_TRUE(s1.steady);
    expectPartsAddUp(s1);

    const StepBreakdown& s2 = *find(v, 0, 2);
    EXPECT_EQ(s2.compute, 0);
    EXPECT_EQ(s2.communication, 0);
    EXPECT_EQ(s2.idle, 100);
    EXPECT_TRUE(std::isnan(s2.overlapRatio));

    const StepBreakdown& s3 = *find(v, 0, 3);
    EXPECT_EQ(s3.wall, 0);
    EXPECT_EQ(s3.compute, 0);
    EXPECT_EQ(s3.idle, 0);
}

TEST(StepBreakdown, NestedComputeIsAUnion)
{
    // W = [0,100). Compute lane: forward [0,50), a nested cpu op [10,20), backward [40,80)
    // overlapping forward, a wait [90,95) (other) and data [95,100) (other).
    // A host-thread lane of the same rank: cpu op [70,90).
    // C = [0,90) = 90 (not 50+10+40+20 = 120: it is a union). Comm [85,95): M = 10,
    // C ∩ M = [85,90) = 5, exposed 5, compute-only 85, |C ∪ M| = [0,95) -> idle 5.
    RunBuilder b(2);
    const auto c = b.lane(0, LaneKind::Compute);
    const auto h = b.lane(0, LaneKind::HostThread);
    const auto m = b.lane(0, LaneKind::Comm);
    b.span(c, SpanKind::Forward, 0, 50).span(c, SpanKind::CpuOp, 10, 20).span(c, SpanKind::Backward, 40, 80);
    b.span(c, SpanKind::Wait, 90, 95).span(c, SpanKind::DataLoad, 95, 100);
    b.span(h, SpanKind::CpuOp, 70, 90);
    b.span(m, SpanKind::Comm, 85, 95);
    b.step(0, 0, 0, 100);
    const auto v = stepBreakdown(b.build());
    EXPECT_EQ(v[0].compute, 90);
    EXPECT_EQ(v[0].communication, 10);
    EXPECT_EQ(v[0].overlapped, 5);
    EXPECT_EQ(v[0].exposed, 5);
    EXPECT_EQ(v[0].computeOnly, 85);
    EXPECT_EQ(v[0].idle, 5);
    EXPECT_DOUBLE_EQ(v[0].overlapRatio, 0.5);
    expectPartsAddUp(v[0]);
}

TEST(StepBreakdown, ZeroCommunicationGivesNaNRatio)
{
    // W = [0,10): forward [0,4), optimizer [6,8): C = 6, M = 0 -> ratio NaN, idle 4.
    RunBuilder b(2);
    const auto c = b.lane(0, LaneKind::Compute);
    b.lane(0, LaneKind::Comm); // a comm lane with nothing on it
    b.span(c, SpanKind::Forward, 0, 4).span(c, SpanKind::Optimizer, 6, 8);
    b.step(0, 0, 0, 10);
    const auto v = stepBreakdown(b.build());
    EXPECT_EQ(v[0].compute, 6);
    EXPECT_EQ(v[0].communication, 0);
    EXPECT_EQ(v[0].exposed, 0);
    EXPECT_EQ(v[0].idle, 4);
    EXPECT_TRUE(std::isnan(v[0].overlapRatio));
}

TEST(StepBreakdown, OneRankHasNoOverlapRatio)
{
    // A 1-rank run has nothing to hide: the ratio is not applicable (NaN) even with a
    // communication span (a world of one copies locally), and that local all-reduce is not
    // communication (docs/design.md: no communication to hide). W = [0,100), forward [0,60), comm
    // [50,70): communication 0, overlapped 0, exposed 0, compute-only 60, idle 40 (the local
    // copy's [60,70) included): the parts still add up.
    RunBuilder b(1);
    const auto c = b.lane(0, LaneKind::Compute);
    const auto m = b.lane(0, LaneKind::Comm);
    b.span(c, SpanKind::Forward, 0, 60).span(m, SpanKind::Comm, 50, 70);
    b.step(0, 0, 0, 100);
    const auto v = stepBreakdown(b.build());
    EXPECT_TRUE(std::isnan(v[0].overlapRatio));
    EXPECT_EQ(v[0].communication, 0);
    EXPECT_EQ(v[0].overlapped, 0);
    EXPECT_EQ(v[0].exposed, 0);
    EXPECT_EQ(v[0].computeOnly, 60);
    EXPECT_EQ(v[0].idle, 40);
    expectPartsAddUp(v[0]);
}

TEST(StepBreakdown, RanksDoNotMix)
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
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[0].rank, 0);
    EXPECT_EQ(v[0].compute, 50);
    EXPECT_EQ(v[0].communication, 20);
    EXPECT_EQ(v[0].overlapped, 10);
    EXPECT_EQ(v[1].rank, 1);
    EXPECT_EQ(v[1].compute, 10);
    EXPECT_EQ(v[1].communication, 100);
    EXPECT_EQ(v[1].exposed, 90);
    EXPECT_EQ(v[1].idle, 0);
}

TEST(StepBreakdown, DeviceRuleUsesDeviceSpansAndMemoryIsItsOwnPart)
{
    // Rank 0 has GPU stream lanes with device work, so only device spans count (all launched in
    // step 0): stream A: kernel [20,50), comm kernel [40,70); stream B: memcpy [60,65).
    // Host forward [0,100) and host comm [0,100) are ignored.
    //   W = from its first device work to the later of its last device work and its host step's
    //   end (the last step): [20,100), wall 80.
    //   C = [20,50) = 30, M = [40,70) = 30, Mem = [60,65) = 5 (memory, not compute).
    //   overlapped [40,50) = 10, compute-only [20,40) = 20, exposed [50,70) = 20,
    //   memory-only = Mem \ (C ∪ M) = 0 (the copy runs under the all-reduce), idle [70,100) =
    //   30 (the GPU waiting for its host is idle inside the step). Ratio 10/30.
    // Rank 1 has a GPU stream lane without device work: the host rule. Forward [0,100),
    //   comm [50,60): C 100, M 10, overlap 10, ratio 1.
    RunBuilder b(2);
    const auto h0 = b.lane(0, LaneKind::Compute);
    const auto m0 = b.lane(0, LaneKind::Comm);
    const auto ga = b.lane(0, LaneKind::GpuStream);
    const auto gb = b.lane(0, LaneKind::GpuStream);
    const auto h1 = b.lane(1, LaneKind::Compute);
    const auto m1 = b.lane(1, LaneKind::Comm);
    const auto g1 = b.lane(1, LaneKind::GpuStream);
    b.span(h0, SpanKind::Forward, 0, 100).span(m0, SpanKind::Comm, 0, 100);
    b.span(ga, SpanKind::Kernel, 20, 50, 0).span(ga, SpanKind::CommKernel, 40, 70, 0);
    b.span(gb, SpanKind::Memcpy, 60, 65, 0);
    b.span(g1, SpanKind::Other, 0, 100); // an annotation on a GPU lane is not device work
    b.span(h1, SpanKind::Forward, 0, 100).span(m1, SpanKind::Comm, 50, 60);
    b.step(0, 0, 0, 100).step(1, 0, 0, 100);
    const core::Run run = b.build();
    const auto v = stepBreakdown(run);
    const StepBreakdown& g = *find(v, 0, 0);
    EXPECT_EQ(g.window, StepWindow::Device);
    EXPECT_EQ(g.start, 20);
    EXPECT_EQ(g.end, 100);
    EXPECT_EQ(g.wall, 80);
    EXPECT_EQ(g.compute, 30);
    EXPECT_EQ(g.communication, 30);
    EXPECT_EQ(g.memory, 5);
    EXPECT_EQ(g.overlapped, 10);
    EXPECT_EQ(g.exposed, 20);
    EXPECT_EQ(g.computeOnly, 20);
    EXPECT_EQ(g.memoryOnly, 0);
    EXPECT_EQ(g.idle, 30);
    EXPECT_DOUBLE_EQ(g.overlapRatio, 1.0 / 3.0);
    expectPartsAddUp(g);
    const StepBreakdown& h = *find(v, 1, 0);
    EXPECT_EQ(h.window, StepWindow::Host);
    EXPECT_EQ(h.compute, 100);
    EXPECT_EQ(h.communication, 10);
    EXPECT_DOUBLE_EQ(h.overlapRatio, 1.0);
    const RunIndex index(run);
    EXPECT_TRUE(index.deviceRule(0));
    EXPECT_FALSE(index.deviceRule(1));
    EXPECT_EQ(index.countedLanes(0).size(), 2u);
    EXPECT_EQ(index.countedLanes(1).size(), 2u); // compute and comm; the GPU lane is not counted
}

TEST(StepBreakdown, DeviceWorkBelongsToItsLaunchingStep)
{
    // Host steps 0 = [0,100), 1 = [100,200), 2 = [200,300) on a GPU rank (warm-up 0). The device
    // runs behind the host:
    //   step 0 launched: kernel [80,150) (outlives the host step), comm kernel [150,190)
    //   step 1 launched: kernel [190,260), memcpy on a copy stream [200,230), comm kernel
    //                    [240,300), memcpy [300,320)
    //   a kernel without a launching step [330,340) (counts in no step)
    //   step 2 launched nothing.
    // Step 0: W = [80,190), wall 110; C = [80,150) 70, M = [150,190) 40: compute-only 70,
    //   overlapped 0, exposed 40, idle 0. (By time, the host window [0,100) would have held
    //   only [80,100) of the kernel and no communication.)
    // Step 1: W = [190,320), wall 130; C = [190,260) 70, M = [240,300) 60, Mem = [200,230) +
    //   [300,320) = 50: overlapped [240,260) 20, compute-only 50, exposed [260,300) 40,
    //   memory-only [300,320) 20 ([200,230) lies under the kernel), idle 0: 50+20+40+20 = 130.
    // Step 2: no device work: window NoDeviceWork, wall 0.
    RunBuilder b(2);
    const auto host = b.lane(0, LaneKind::HostThread);
    const auto compute = b.lane(0, LaneKind::GpuStream);
    const auto copy = b.lane(0, LaneKind::GpuStream);
    const auto nccl = b.lane(0, LaneKind::GpuStream);
    b.span(host, SpanKind::CpuOp, 0, 300);
    b.span(compute, SpanKind::Kernel, 80, 150, 0).span(nccl, SpanKind::CommKernel, 150, 190, 0, 0, 64);
    b.span(compute, SpanKind::Kernel, 190, 260, 1).span(copy, SpanKind::Memcpy, 200, 230, 1);
    b.span(nccl, SpanKind::CommKernel, 240, 300, 1, 0, 64).span(copy, SpanKind::Memcpy, 300, 320, 1);
    b.span(compute, SpanKind::Kernel, 330, 340);
    b.step(0, 0, 0, 100).step(0, 1, 100, 200).step(0, 2, 200, 300);
    const core::Run run = b.build();
    const auto v = stepBreakdown(run);
    ASSERT_EQ(v.size(), 3u);
    const StepBreakdown& s0 = v[0];
    EXPECT_EQ(s0.window, StepWindow::Device);
    EXPECT_EQ(s0.start, 80);
    EXPECT_EQ(s0.end, 190);
    EXPECT_EQ(s0.computeOnly, 70);
    EXPECT_EQ(s0.overlapped, 0);
    EXPECT_EQ(s0.exposed, 40);
    EXPECT_EQ(s0.idle, 0);
    expectPartsAddUp(s0);
    const StepBreakdown& s1 = v[1];
    EXPECT_EQ(s1.start, 190);
    EXPECT_EQ(s1.end, 320);
    EXPECT_EQ(s1.wall, 130);
    EXPECT_EQ(s1.compute, 70);
    EXPECT_EQ(s1.communication, 60);
    EXPECT_EQ(s1.memory, 50);
    EXPECT_EQ(s1.overlapped, 20);
    EXPECT_EQ(s1.computeOnly, 50);
    EXPECT_EQ(s1.exposed, 40);
    EXPECT_EQ(s1.memoryOnly, 20);
    EXPECT_EQ(s1.idle, 0);
    expectPartsAddUp(s1);
    EXPECT_EQ(v[2].window, StepWindow::NoDeviceWork);
    EXPECT_EQ(v[2].wall, 0);
    EXPECT_TRUE(std::isnan(v[2].overlapRatio));

    // RunIndex answers each step alone with the same numbers, and its unions are the same sets.
    const RunIndex index(run);
    for (const StepBreakdown& b2 : v) {
        const auto one = index.stepBreakdown(b2.rank, b2.step);
        ASSERT_TRUE(one.has_value());
        expectSameBreakdown(*one, b2);
    }
    const RankUnions u1 = index.stepUnions(0, 1);
    EXPECT_EQ(u1.memory, (Set{{200, 230}, {300, 320}}));
    EXPECT_EQ(u1.comm, (Set{{240, 300}}));
    // By time, the range [100,200) of the device timeline holds step 0's kernel tail [100,150)
    // and comm kernel [150,190), and step 1's kernel [190,200): C 60, M 40, no overlap, idle 0.
    const StepBreakdown r = index.rangeBreakdown(0, 100, 200);
    EXPECT_EQ(r.step, kNoStep);
    EXPECT_EQ(r.compute, 60);
    EXPECT_EQ(r.communication, 40);
    EXPECT_EQ(r.idle, 0);
    EXPECT_FALSE(index.stepBreakdown(0, 7).has_value());
    // The summary counts the kernel that belongs to no step.
    EXPECT_EQ(summarize(run).deviceSpansWithoutStep, 1);
}

TEST(StepBreakdown, PipelinedNextStepComputeHidesThisStepsCollective)
{
    // A two-step pipelined job (TorchRec style), 2 ranks with the same device work (hand-derived,
    // docs/design.md "Windows" and "Parts by time, names by launch"):
    //   step 0 launched: kernel [0,40) on stream A, all-reduce kernel [40,100) on stream B (bucket 0)
    //   step 1 launched: input-permute kernel [60,80) on stream C (runs during step 0's
    //                    all-reduce), kernel [100,140) on A, all-reduce [140,170) on B (bucket 0)
    //   host steps 0 = [0,50), 1 = [50,150).
    // Windows tile: W0 = [0, 60) (to step 1's first device work), W1 = [60, max(170, 150)) =
    // [60,170). C = [0,40) [60,80) [100,140), M = [40,100) [140,170), by time whatever step
    // launched them:
    //   W0: wall 60, C 40, M [40,60) 20: compute-only 40, overlapped 0, exposed 20, idle 0.
    //   W1: wall 110, C [60,80)+[100,140) 60, M [60,100)+[140,170) 70: overlapped [60,80) 20,
    //       compute-only 40, exposed [80,100)+[140,170) 50, idle 0 (40+20+50 = 110).
    // Step 0's collective [40,100) minus all compute: 60 - 20 = 40 exposed (launch attribution
    // names it step 0, bucket 0); step 1's [140,170): 30. Judged only against its own step's
    // compute (the old rule) step 0's collective would have been all 60 exposed.
    RunBuilder b(2);
    for (int32_t rank = 0; rank < 2; ++rank) {
        const auto a = b.lane(rank, LaneKind::GpuStream);
        const auto n = b.lane(rank, LaneKind::GpuStream);
        const auto c = b.lane(rank, LaneKind::GpuStream);
        b.span(a, SpanKind::Kernel, 0, 40, 0).span(n, SpanKind::CommKernel, 40, 100, 0, 0, 64);
        b.span(c, SpanKind::Kernel, 60, 80, 1).span(a, SpanKind::Kernel, 100, 140, 1);
        b.span(n, SpanKind::CommKernel, 140, 170, 1, 0, 64);
        b.step(rank, 0, 0, 50).step(rank, 1, 50, 150);
    }
    const core::Run run = b.build();
    const auto v = stepBreakdown(run);
    ASSERT_EQ(v.size(), 4u);
    for (int32_t rank = 0; rank < 2; ++rank) {
        const StepBreakdown& s0 = *find(v, rank, 0);
        EXPECT_EQ(s0.window, StepWindow::Device);
        EXPECT_EQ(s0.start, 0);
        EXPECT_EQ(s0.end, 60);
        EXPECT_EQ(s0.computeOnly, 40);
        EXPECT_EQ(s0.overlapped, 0);
        EXPECT_EQ(s0.exposed, 20);
        EXPECT_EQ(s0.idle, 0);
        expectPartsAddUp(s0);
        const StepBreakdown& s1 = *find(v, rank, 1);
        EXPECT_EQ(s1.start, 60);
        EXPECT_EQ(s1.end, 170);
        EXPECT_EQ(s1.compute, 60);
        EXPECT_EQ(s1.communication, 70);
        EXPECT_EQ(s1.overlapped, 20);
        EXPECT_EQ(s1.computeOnly, 40);
        EXPECT_EQ(s1.exposed, 50);
        EXPECT_EQ(s1.idle, 0);
        expectPartsAddUp(s1);
        EXPECT_EQ(s0.end, s1.start); // no gap, no overlap
    }
    // The run index (details panel, strips, measure tool) says the same.
    const RunIndex index(run);
    for (const StepBreakdown& b2 : v) {
        const auto one = index.stepBreakdown(b2.rank, b2.step);
        ASSERT_TRUE(one.has_value());
        expectSameBreakdown(*one, b2);
    }
    EXPECT_EQ(index.stepUnions(0, 1).compute, (Set{{60, 80}, {100, 140}}));
    // Per bucket: the collective minus all of the rank's compute.
    const auto stats = bucketStats(run);
    ASSERT_EQ(stats.size(), 4u);
    EXPECT_EQ(stats[0].step, 0);
    EXPECT_EQ(stats[0].duration, 60);
    EXPECT_EQ(stats[0].exposed, 40);
    EXPECT_EQ(stats[1].step, 1);
    EXPECT_EQ(stats[1].exposed, 30);
}

TEST(StepBreakdown, UnsortedRunGivesTheSameAnswer)
{
    // A Run that was not normalized (spans out of order) is analysed as if it were.
    RunBuilder b(2);
    const auto c = b.lane(0, LaneKind::Compute);
    const auto m = b.lane(0, LaneKind::Comm);
    b.span(m, SpanKind::Comm, 60, 90);
    b.span(c, SpanKind::Backward, 40, 70).span(c, SpanKind::Forward, 10, 40);
    b.step(0, 0, 0, 100);
    const auto v = stepBreakdown(b.run()); // deliberately not normalized
    EXPECT_EQ(v[0].compute, 60);
    EXPECT_EQ(v[0].overlapped, 10);
    EXPECT_EQ(v[0].idle, 20);
}

TEST(StepBreakdown, MalformedSpansAreIgnoredNotFatal)
{
    // A span on a lane that does not exist, an inverted span (end < start) and a zero-length
    // one: none of them may crash or count. Only forward [0,10) counts: C = 10 of W = 20.
    RunBuilder b(2);
    const auto c = b.lane(0, LaneKind::Compute);
    b.span(c, SpanKind::Forward, 0, 10).span(c, SpanKind::Backward, 15, 12).span(c, SpanKind::Optimizer, 18, 18);
    b.span(LaneId{42}, SpanKind::Comm, 0, 20, 0, 0, 100);
    b.ready(LaneId{42}, 5, 0, 0);
    b.step(0, 0, 0, 20).step(0, 1, 30, 25); // step 1 ends before it starts
    const core::Run run = b.build();
    const auto v = stepBreakdown(run);
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[0].compute, 10);
    EXPECT_EQ(v[0].communication, 0);
    EXPECT_EQ(v[0].idle, 10);
    EXPECT_EQ(v[1].wall, 0);
    EXPECT_TRUE(bucketStats(run).empty());
    EXPECT_TRUE(stragglers(run).stragglers.empty());
    EXPECT_EQ(summarize(run).steps, 2);
    const RunIndex index(run);
    EXPECT_EQ(index.stepBreakdown(0, 1)->wall, 0);
}

TEST(StepBreakdown, StepWithoutLanesIsAllIdle)
{
    // A step of a rank that has no lane at all (a rank that recorded nothing but steps).
    RunBuilder b(2);
    const auto c = b.lane(0, LaneKind::Compute);
    b.span(c, SpanKind::Forward, 0, 10);
    b.step(0, 0, 0, 10).step(1, 0, 0, 10);
    const core::Run run = b.build();
    const auto v = stepBreakdown(run);
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[1].rank, 1);
    EXPECT_EQ(v[1].idle, 10);
    EXPECT_EQ(v[0].compute, 10);
    EXPECT_EQ(RunIndex(run).stepBreakdown(1, 0)->idle, 10);
}

TEST(RunIndex, AgreesWithTheWholeRunBreakdownOnASyntheticRun)
{
    // One step breakdown: the per-step query, the whole-run analysis and a range breakdown over
    // a host step's window give the same numbers on every (rank, step).
    SyntheticParams p;
    p.worldSize = 3;
    p.steps = 8;
    p.stragglerRank = 1;
    p.stragglerDelayNs = 1'000'000;
    const core::Run run = makeSyntheticRun(p);
    const RunIndex index(run);
    const auto all = stepBreakdown(run);
    ASSERT_EQ(all.size(), 24u);
    for (const StepBreakdown& b : all) {
        const auto one = index.stepBreakdown(b.rank, b.step);
        ASSERT_TRUE(one.has_value());
        expectSameBreakdown(*one, b);
        expectPartsAddUp(b);
        StepBreakdown range = index.rangeBreakdown(b.rank, b.start, b.end);
        range.step = b.step;
        range.steady = b.steady;
        expectSameBreakdown(range, b);
        const RankUnions u = index.stepUnions(b.rank, b.step);
        EXPECT_EQ(totalLength(u.compute), b.compute);
        EXPECT_EQ(intersectionLength(u.compute, u.comm), b.overlapped);
    }
}

TEST(SteadySteps, FallbackIsStated)
{
    RunBuilder b(2, 3);
    const auto c = b.lane(0, LaneKind::Compute);
    b.span(c, SpanKind::Forward, 0, 10);
    b.step(0, 0, 0, 10).step(0, 1, 10, 20).step(1, 1, 10, 20);
    const SteadySteps s = steadySteps(b.build());
    EXPECT_TRUE(s.fallback);
    EXPECT_EQ(s.steps, (std::vector<int32_t>{0, 1}));
    EXPECT_NE(s.describe().find("no step past the warm-up"), std::string::npos) << s.describe();
    RunBuilder d(2, 1);
    d.step(0, 0, 0, 10).step(0, 1, 10, 20).step(0, 2, 20, 30);
    const SteadySteps t = steadySteps(d.build());
    EXPECT_FALSE(t.fallback);
    EXPECT_EQ(t.steps, (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(t.describe(), "steps 1-2 (2 steady steps; 1 warm-up step, numbered below 1, left out)");
    EXPECT_EQ(alignStep(d.build()), 1);
}
