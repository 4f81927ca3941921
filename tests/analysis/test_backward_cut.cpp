// core::cutBackward, the one backward cut rule both recorders use (the runtime's and the
// PyTorch recorder's), on hand-written gradient sequences. Every expected segment is derived in
// the comment beside it.
#include "lockstep/core/backward_cut.h"

#include <gtest/gtest.h>

#include <ostream>
#include <vector>

namespace lockstep::core {
// Failure messages print segments, not bytes.
void PrintTo(const BackwardSegment& s, std::ostream* os)
{
    *os << "[" << s.start << ", " << s.end << ") stage " << s.stage;
}
} // namespace lockstep::core

using namespace lockstep::core;

namespace {
using Segments = std::vector<BackwardSegment>;
Segments cut(TimeNs start, std::vector<GradientReady> gradients, TimeNs end)
{
    return cutBackward(start, gradients, end);
}
} // namespace

// Backward called at 100; gradients of stages 3, 3, 2, 3, 1, 1 at 110 .. 160.
//  - 3 at 110 and 120: one module twice in a row, one segment [100, 120) (from the call: the
//    loss's backward goes to the head).
//  - 2 at 130: [120, 130). 3 again at 140: interleaved, a second segment of 3, [130, 140).
//  - 1 at 150 and 160, the last: [140, max(160, end)). With the end of backward at 175 (the
//    PyTorch recorder) that is [140, 175); with the last gradient's 160 as the end (the
//    runtime) it is [140, 160).
TEST(BackwardCut, InterleavedStages)
{
    const std::vector<GradientReady> g = {{110, 3}, {120, 3}, {130, 2}, {140, 3}, {150, 1}, {160, 1}};
    EXPECT_EQ(cut(100, g, 175), (Segments{{100, 120, 3}, {120, 130, 2}, {130, 140, 3}, {140, 175, 1}}));
    EXPECT_EQ(cut(100, g, 160), (Segments{{100, 120, 3}, {120, 130, 2}, {130, 140, 3}, {140, 160, 1}}));
}

// One stage: gradients at 5, 9, 12 after the call at 0 merge into one segment, [0, 20) with the
// end of backward at 20, [0, 12) with the last gradient as the end.
TEST(BackwardCut, OneStage)
{
    const std::vector<GradientReady> g = {{5, 0}, {9, 0}, {12, 0}};
    EXPECT_EQ(cut(0, g, 20), (Segments{{0, 20, 0}}));
    EXPECT_EQ(cut(0, g, 12), (Segments{{0, 12, 0}}));
}

// No gradient: backward as a whole, [50, 80) with no stage; an end before the call (a recorder
// that saw no end) gives the empty [50, 50), never an inverted segment.
TEST(BackwardCut, NoGradients)
{
    EXPECT_EQ(cut(50, {}, 80), (Segments{{50, 80, kNoStage}}));
    EXPECT_EQ(cut(50, {}, 40), (Segments{{50, 50, kNoStage}}));
}

// An end before the last gradient (the PyTorch recorder closes a backward it saw no end of at
// its last logged gradient, which need not be the latest stamp): the last segment still runs to
// its gradient.
// Stage 1 at 10: [0, 10). Stage 0 at 30, last, end 25: [10, max(30, 25)) = [10, 30).
TEST(BackwardCut, EndBeforeLastGradient)
{
    EXPECT_EQ(cut(0, {{10, 1}, {30, 0}}, 25), (Segments{{0, 10, 1}, {10, 30, 0}}));
}

// A gradient stamped before the backward call (a stamp moved back to its bucket's launch): its
// segment is empty at the call, [100, 100), and the next cut does not move back in time: stage
// 1 at 120, last, end 130: [100, 130).
TEST(BackwardCut, CutsNeverMoveBack)
{
    EXPECT_EQ(cut(100, {{90, 2}, {120, 1}}, 130), (Segments{{100, 100, 2}, {100, 130, 1}}));
}
