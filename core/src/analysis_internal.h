// Pieces the analysis sources share (not installed): the dense rank index, the world size rule,
// and the analyses with their inputs passed in, so analyze() computes each input once.
#pragma once

#include "lockstep/core/analysis.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace lockstep::core::detail {

// Dense index for each rank that owns a lane or a step, plus the lane -> dense index map.
struct RankIndex {
    std::vector<int32_t> ranks;    // dense index -> rank number, sorted
    std::vector<int32_t> laneRank; // lane index -> dense index (-1: none)
    int32_t find(int32_t rank) const
    {
        auto it = std::lower_bound(ranks.begin(), ranks.end(), rank);
        return it != ranks.end() && *it == rank ? static_cast<int32_t>(it - ranks.begin()) : -1;
    }
};
RankIndex indexRanks(const Run& run);
// config.worldSize when set, else the number of ranks that recorded anything.
int32_t worldSizeOf(const Run& run);
// busbw = algbw x 2(N-1)/N (the nccl-tests convention); NaN on one rank, where nothing crosses a link.
inline double busBandwidthFactor(int32_t worldSize)
{
    return worldSize > 1 ? 2.0 * (worldSize - 1) / worldSize : std::numeric_limits<double>::quiet_NaN();
}

// What a span of a rank counts as under the rank's rule (docs/design.md, "Categories"):
//  - host rule: every span on a lane that is not a GPU stream, by its kind;
//  - device rule: device work on GPU streams by its kind, except a copy or memset tagged with a
//    bucket, which is that collective's staging (gloo over CUDA tensors) and so communication;
//    host spans count only on a rank whose collectives run on the host (no communication
//    kernel): its host collectives are communication, and its training threads' work (compute
//    on host lanes that are not communication lanes) is compute beside the kernels.
inline SpanCategory countedCategory(bool deviceRule, bool hostCollectives, LaneKind lane, const Span& s)
{
    if (!deviceRule)
        return lane == LaneKind::GpuStream ? SpanCategory::Other : spanCategory(s.kind);
    if (lane == LaneKind::GpuStream) {
        if (!isDeviceKind(s.kind))
            return SpanCategory::Other;
        if ((s.kind == SpanKind::Memcpy || s.kind == SpanKind::Memset) && s.bucket >= 0)
            return SpanCategory::Communication;
        return spanCategory(s.kind);
    }
    if (!hostCollectives)
        return SpanCategory::Other;
    const SpanCategory c = spanCategory(s.kind);
    if (c == SpanCategory::Communication || (c == SpanCategory::Compute && lane != LaneKind::Comm))
        return c;
    return SpanCategory::Other;
}

// Which rule each rank (dense index) follows: device rule when it has a GPU stream lane with
// device work; host collectives when, under the device rule, it has no communication kernel
// but host collectives tagged with a bucket.
struct RankRules {
    std::vector<char> device;
    std::vector<char> hostCollectives;
};
RankRules rankRules(const Run& run, const RankIndex& idx);

// The tiling windows of one device-rule rank (docs/design.md, "Windows"): per step with device
// work, first = the first start of device work it launched, last = the last end; hostEnd = the
// host step's end (the last window ends at the later of the two). Returns [start, end) per
// entry, in the order given (ascending step).
struct DeviceExtent {
    int32_t step;
    TimeNs first, last, hostEnd;
};
std::vector<Interval> tilingWindows(const std::vector<DeviceExtent>& extents);

std::vector<StepBreakdown> stepBreakdownWith(const Run& run, const SteadySteps& steady);
// bucketStats() with the caller's index (analyze() shares one); index is needed only where the
// run has more than one rank (exposed and hidden time), null otherwise.
std::vector<BucketStat> bucketStatsWith(const Run& run, const RunIndex* index);
StragglerReport stragglersWith(const Run& run, const std::vector<BucketStat>& stats,
                               const std::vector<StepBreakdown>& breakdown, const SteadySteps& steady);

} // namespace lockstep::core::detail
