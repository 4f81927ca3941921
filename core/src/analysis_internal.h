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

std::vector<StepBreakdown> stepBreakdownWith(const Run& run, const SteadySteps& steady);
StragglerReport stragglersWith(const Run& run, const std::vector<BucketStat>& stats,
                               const std::vector<StepBreakdown>& breakdown, const SteadySteps& steady);

} // namespace lockstep::core::detail
