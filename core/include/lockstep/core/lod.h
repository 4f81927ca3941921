// Level of detail for the timeline, Qt-free (Tracy's and Perfetto's habit: the storage layer
// answers "what is visible at this resolution", the widget only paints).
//
// A lane's spans are sorted by start. Spans of one lane may overlap in time (three bucket
// all-reduces in flight at once, nested host operators of an imported trace): drawn on one row
// they would paint over each other, so each lane is packed once, when its LaneLod is built, into
// sub-rows in which no two spans overlap (Perfetto's depth for async slices). The widget draws a
// lane as that many rows.
//
// Per sub-row, the visible range comes from two binary searches: one over the row's running
// maximum of ends, kept every 64 items (the first block that reaches the window: spans that
// started before it but reach into it are found, and one long span does not widen the search),
// one over starts.
// Spans narrower than a pixel threshold are folded into one DrawItem that keeps how many spans it
// stands for and the longest of them. To keep a fully zoomed-out frame cheap on a
// 10-million-span lane, pre-folded levels (each merging neighbours closer than a coarser gap)
// let a query start from the coarsest level that is still finer than what one pixel shows, so
// the work follows what is on screen, not the trace size.
#pragma once

#include "lockstep/core/types.h"

#include <span>
#include <vector>

namespace lockstep::core {

struct DrawItem {
    TimeNs start = 0;
    TimeNs end = 0;
    uint32_t span = 0;        // lane-relative index of the span (the first one when folded)
    uint32_t count = 1;       // > 1: a folded item standing for `count` spans
    TimeNs maxDuration = 0;   // longest span folded into this item
    uint32_t row = 0;         // the lane's sub-row the item is drawn in
};

class LaneLod {
public:
    // More sub-rows than this would make one lane taller than a screen; spans that find every
    // row busy go to the row that frees up first (they overlap there, and overflowSpans() says
    // how many did). Sixteen is more than any DDP comm lane or sane call stack needs.
    static constexpr uint32_t kMaxRows = 16;

    LaneLod() = default;
    // `spans` must be sorted by start and outlive the LaneLod. Packs the lane into sub-rows and
    // builds each row's pre-folded levels.
    explicit LaneLod(std::span<const Span> spans);
    // A lane known by its overview (run_overview.h): `spans` stand for the items of a stored
    // fold, `folded` parallel to them says what each stands for (its span count, longest span
    // and sub-row). Sorted by start; both outlive the LaneLod. A query at a threshold at least
    // the fold's gap answers exactly what the lane's own spans would (the fold is idempotent,
    // lod.cpp); finer, it draws the overview's items.
    LaneLod(std::span<const Span> spans, std::span<const DrawItem> folded);

    // [first, last) indices of spans overlapping [t0, t1), over all sub-rows.
    std::pair<size_t, size_t> visibleRange(TimeNs t0, TimeNs t1) const;

    // Items to draw for [t0, t1) at nsPerPixel, sub-row by sub-row (sorted by row, then start):
    // spans at least minPixels wide are single items, narrower neighbours of one row (gap also
    // under minPixels) fold into one item. Appends to `out`.
    void query(TimeNs t0, TimeNs t1, double nsPerPixel, double minPixels, std::vector<DrawItem>& out) const;

    size_t size() const { return m_spans.size(); }
    TimeNs maxDuration() const { return m_maxDuration; }
    // Sub-rows of the lane: 1 for a lane whose spans never overlap (and for an empty lane).
    uint32_t rowCount() const { return m_rows.empty() ? 1 : static_cast<uint32_t>(m_rows.size()); }
    // The sub-row of the lane's span `index` (lane-relative).
    uint32_t rowOf(size_t index) const { return m_rowOf.empty() ? 0 : m_rowOf[index]; }
    // Spans placed on a row where they overlap another (the lane needed more than kMaxRows).
    size_t overflowSpans() const { return m_overflow; }

    // The lane folded at the smallest gap (0, or 1 µs doubled) at which, over all sub-rows, it has
    // at most `maxItems` items (the spans when they fit; one item per row at worst), sorted by
    // start, `row` set, `span` the lane-relative index of the item's first span. `gap` receives
    // that gap: queries at thresholds ≥ gap on the items give exactly what queries on the lane
    // give.
    std::vector<DrawItem> overview(size_t maxItems, TimeNs& gap) const;

private:
    // reach[b]: the latest end among a list's items [0, 64·(b+1)), a running maximum, so sorted:
    // every item before block b ends at or before reach[b - 1]. A query starts at the first block
    // whose reach is at least the window's start (lod.cpp, firstReaching).
    using Reach = std::vector<TimeNs>;
    struct Level {
        TimeNs gap = 0;                 // neighbours closer than this were merged
        std::vector<DrawItem> items;    // sorted by start
        Reach reach;
    };
    struct Row {
        // Lane-relative indices of the row's spans, sorted by start. Empty with one row: the
        // row is the whole lane (the common case costs no index).
        std::vector<uint32_t> members;
        Reach reach;
        std::vector<Level> levels;
    };
    size_t rowSize(const Row& row) const { return m_rows.size() == 1 ? m_spans.size() : row.members.size(); }
    size_t spanAt(const Row& row, size_t k) const { return m_rows.size() == 1 ? k : row.members[k]; }
    void pack();
    void finishRows(); // the lane's reach and every row's reach and levels, once rows are known
    void buildLevels(Row& row);
    void queryRow(uint32_t rowIndex, TimeNs t0, TimeNs t1, TimeNs threshold, std::vector<DrawItem>& out) const;

    DrawItem itemAt(size_t index) const;

    std::span<const Span> m_spans;
    std::span<const DrawItem> m_folded; // empty: m_spans are the lane's own spans
    TimeNs m_maxDuration = 0;
    Reach m_reach; // over m_spans when the lane has several rows (visibleRange; else its row's)
    std::vector<Row> m_rows;
    std::vector<uint8_t> m_rowOf; // per span; empty when the lane has one row
    size_t m_overflow = 0;
};

// One LaneLod per lane of a normalized Run (spans sorted by lane, start).
class RunLod {
public:
    RunLod() = default;
    explicit RunLod(const Run& run);
    // The LOD of a run whose spans stand for overview items (run_overview.h): `folded` is
    // parallel to run.spans.
    RunLod(const Run& run, std::span<const DrawItem> folded);
    const LaneLod& lane(LaneId id) const { return m_lanes[id.v]; }
    size_t laneCount() const { return m_lanes.size(); }
    // Offset of a lane's first span in run.spans (DrawItem::span is lane-relative).
    size_t laneOffset(LaneId id) const { return m_offsets[id.v]; }

private:
    std::vector<LaneLod> m_lanes;
    std::vector<size_t> m_offsets;
};

} // namespace lockstep::core
