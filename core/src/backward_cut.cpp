// The backward cut rule (see backward_cut.h).
#include "lockstep/core/backward_cut.h"

#include <algorithm>

namespace lockstep::core {

std::vector<BackwardSegment> cutBackward(TimeNs start, std::span<const GradientReady> gradients, TimeNs end)
{
    std::vector<BackwardSegment> segments;
    if (gradients.empty()) {
        segments.push_back({start, std::max(start, end), kNoStage});
        return segments;
    }
    TimeNs cut = start;
    for (size_t i = 0; i < gradients.size(); ++i) {
        const GradientReady& g = gradients[i];
        const bool last = i + 1 == gradients.size();
        if (!last && gradients[i + 1].stage == g.stage)
            continue; // the module's next gradient extends this segment
        const TimeNs to = last ? std::max(g.ts, end) : g.ts;
        segments.push_back({cut, std::max(cut, to), g.stage});
        cut = std::max(cut, g.ts);
    }
    return segments;
}

} // namespace lockstep::core
