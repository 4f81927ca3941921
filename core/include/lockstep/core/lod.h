// Level of detail for the timeline, Qt-free (Tracy's and Perfetto's habit: the storage layer
// answers "what is visible at this resolution", the widget only paints).
//
// A lane's spans are sorted by start. The visible range comes from two binary searches (the
// lower one widened by the lane's longest span, so spans that started before the window but
// reach into it are found). Spans narrower than a pixel threshold are folded into one DrawItem
// that keeps how many spans it stands for and the longest of them. To keep a fully zoomed-out
// frame cheap on a 10-million-span lane, pre-folded levels (each merging neighbours closer
// than a coarser gap) let a query start from the coarsest level that is still finer than what
// one pixel shows, so the work follows what is on screen, not the trace size.
#pragma once

#include "lockstep/core/types.h"

#include <span>
#include <vector>

namespace lockstep::core {

struct DrawItem {
    TimeNs start = 0;
    TimeNs end = 0;
    uint32_t span = 0;        // index into the lane's span array when count == 1
    uint32_t count = 1;       // > 1: a folded item standing for `count` spans
    TimeNs maxDuration = 0;   // longest span folded into this item
};

class LaneLod {
public:
    LaneLod() = default;
    // `spans` must be sorted by start and outlive the LaneLod.
    explicit LaneLod(std::span<const Span> spans);

    // [first, last) indices of spans overlapping [t0, t1).
    std::pair<size_t, size_t> visibleRange(TimeNs t0, TimeNs t1) const;

    // Items to draw for [t0, t1) at nsPerPixel: spans at least minPixels wide are single items,
    // narrower neighbours (gap also under minPixels) fold into one item. Appends to `out`.
    void query(TimeNs t0, TimeNs t1, double nsPerPixel, double minPixels, std::vector<DrawItem>& out) const;

    size_t size() const { return m_spans.size(); }
    TimeNs maxDuration() const { return m_maxDuration; }

private:
    struct Level {
        TimeNs gap = 0;                 // neighbours closer than this were merged
        std::vector<DrawItem> items;    // sorted by start
        TimeNs maxItemLength = 0;
    };
    std::span<const Span> m_spans;
    TimeNs m_maxDuration = 0;
    std::vector<Level> m_levels;
};

// One LaneLod per lane of a normalized Run (spans sorted by lane, start).
class RunLod {
public:
    RunLod() = default;
    explicit RunLod(const Run& run);
    const LaneLod& lane(LaneId id) const { return m_lanes[id.v]; }
    size_t laneCount() const { return m_lanes.size(); }
    // Offset of a lane's first span in run.spans (DrawItem::span is lane-relative).
    size_t laneOffset(LaneId id) const { return m_offsets[id.v]; }

private:
    std::vector<LaneLod> m_lanes;
    std::vector<size_t> m_offsets;
};

} // namespace lockstep::core
