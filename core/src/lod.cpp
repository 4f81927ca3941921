// Level of detail for the timeline: sub-row packing, visible range, folding of sub-pixel spans,
// pre-folded levels.
//
// Sub-rows. A lane's spans are packed greedily in start order, each into the lowest sub-row whose
// last span has ended by the time it starts (first fit; the interval-partitioning sweep). For
// spans sorted by start this uses as few rows as any packing can: a span opens row k only when
// rows 0..k-1 are all busy at its start, i.e. k+1 spans overlap at that instant. Nested spans
// land one row below their parent, as call stacks are drawn. The usual lane (compute, a comm
// lane whose buckets run one after another) needs one row, found by one pass that checks the
// running end, and then stores nothing per span; only a lane with overlaps keeps a row number
// per span (one byte) and each row's member indices. Packing happens once, when the LaneLod is
// built (at load, off the GUI thread); zooming never moves a span to another row.
//
// Folding at a threshold T (= nsPerPixel × minPixels, the narrowest thing worth drawing alone)
// walks a row's items in start order with one pending "fold":
//  - an item at least T long that is a single span is drawn alone (the pending fold is flushed
//    first, so the output stays in start order);
//  - a narrow item joins the pending fold when the gap from the fold's end (the running maximum
//    of ends) is under T, else the pending fold is flushed and the item starts a new one. A fold
//    keeps its span count and longest span.
//
// Pre-folded levels. Folding at T visits every span in the window; fully zoomed out that is the
// whole lane (10 M spans, ~30 ms: too slow for a 16 ms frame). Level k of a row is the fold of
// the row at gap g_k (geometric, ×4). The fold is idempotent in this sense: for g ≤ T, folding a
// level-g list at T gives exactly the items that folding the raw spans at T gives. Why: a
// folded item of level g is a contiguous run of spans each narrower than g ≤ T with gaps under
// g ≤ T, so a fold at T merges them too, and its start and running end are those of the run;
// treating any folded item (count > 1) as narrow at T reproduces the raw walk step by step.
// So a query starts from the coarsest level whose gap ≤ T. Items in a window of width W at
// that level are at most about 4·W/T (groups are separated by gaps ≥ g ≥ T/4), i.e. about
// 4 × screen pixels / minPixels: the work follows the screen, not the trace.
// A level is kept only if it is at least a quarter smaller than the list it was folded from
// (a level that folds nothing would only cost memory); levels stop once a level has few items.
#include "lockstep/core/lod.h"

#include <algorithm>
#include <limits>

namespace lockstep::core {
namespace {

// Finest pre-folded gap (1 µs) and the factor between levels: with ×4 a query visits at most
// ~4× the items a perfectly matched level would give, and a 10 M-span lane needs ~15 levels to
// go from 1 µs to minutes.
constexpr TimeNs kFinestGapNs = 1024;
constexpr TimeNs kLevelFactor = 4;
// A level must shrink its source by at least this share to be worth storing.
constexpr double kMinShrink = 0.75;
// Below this many items a level is cheap to fold at query time; no coarser level is needed.
constexpr size_t kSmallLevel = 256;
// Items per entry of a list's reach (lod.h): a query starting at a block's first item walks at
// most this many items that end before the window; 8 bytes per 64 items.
constexpr size_t kReachBlock = 64;

// The running maximum of endOf(0..n-1), kept at the end of every block (and of the last one).
template <class EndOf>
std::vector<TimeNs> reachOf(size_t n, EndOf endOf)
{
    std::vector<TimeNs> reach;
    reach.reserve((n + kReachBlock - 1) / kReachBlock);
    TimeNs latest = std::numeric_limits<TimeNs>::min();
    for (size_t k = 0; k < n; ++k) {
        latest = std::max(latest, endOf(k));
        if ((k + 1) % kReachBlock == 0 || k + 1 == n)
            reach.push_back(latest);
    }
    return reach;
}

// The first item that may reach t0: the first of the first block whose reach is at least t0
// (every item of the blocks before ends before t0). An item ending exactly at t0 still counts
// when it has no length, as in the queries' own test.
size_t firstReaching(const std::vector<TimeNs>& reach, TimeNs t0)
{
    const auto b = std::partition_point(reach.begin(), reach.end(), [t0](TimeNs r) { return r < t0; });
    return static_cast<size_t>(b - reach.begin()) * kReachBlock;
}

// An item of the window [t0, ...): it ends after t0, or is an instant at t0.
inline bool reachesWindow(TimeNs start, TimeNs end, TimeNs t0)
{
    return end > t0 || (end == t0 && end == start);
}

// The fold described above; `emit` receives finished items in start order.
template <class Emit>
class Folder {
public:
    Folder(TimeNs threshold, Emit emit) : m_t(threshold), m_emit(emit) {}
    void add(const DrawItem& it)
    {
        const bool narrow = it.count > 1 || it.end - it.start < m_t;
        if (!narrow) {
            flush();
            m_emit(it);
            return;
        }
        if (m_have && it.start - m_cur.end < m_t) {
            m_cur.end = std::max(m_cur.end, it.end);
            m_cur.count += it.count;
            m_cur.maxDuration = std::max(m_cur.maxDuration, it.maxDuration);
            return;
        }
        flush();
        m_cur = it;
        m_have = true;
    }
    void flush()
    {
        if (m_have)
            m_emit(m_cur);
        m_have = false;
    }

private:
    TimeNs m_t;
    Emit m_emit;
    DrawItem m_cur;
    bool m_have = false;
};

inline DrawItem itemOf(const Span& s, size_t index)
{
    DrawItem it;
    it.start = s.start;
    it.end = std::max(s.end, s.start);
    it.span = static_cast<uint32_t>(index);
    it.count = 1;
    it.maxDuration = it.end - it.start;
    return it;
}

} // namespace

LaneLod::LaneLod(std::span<const Span> spans) : m_spans(spans)
{
    for (const Span& s : spans)
        m_maxDuration = std::max(m_maxDuration, s.end - s.start);
    pack();
    finishRows();
}

LaneLod::LaneLod(std::span<const Span> spans, std::span<const DrawItem> folded) : m_spans(spans), m_folded(folded)
{
    if (m_folded.size() != m_spans.size())
        m_folded = {};
    // The longest thing drawn: an item's whole extent (maxDuration(): callers that step back from
    // a start by it must find every item that reaches their time).
    for (size_t i = 0; i < m_spans.size(); ++i)
        m_maxDuration = std::max({m_maxDuration, m_spans[i].end - m_spans[i].start, m_folded.empty() ? 0 : m_folded[i].maxDuration});
    // The overview keeps the lane's own sub-rows: no packing again.
    uint32_t rows = 1;
    for (const DrawItem& it : m_folded)
        rows = std::max(rows, std::min(it.row, kMaxRows - 1) + 1);
    if (rows == 1) {
        m_rows.resize(1);
    } else {
        m_rows.resize(rows);
        m_rowOf.resize(m_folded.size());
        for (size_t i = 0; i < m_folded.size(); ++i) {
            const uint32_t row = std::min(m_folded[i].row, kMaxRows - 1);
            m_rowOf[i] = static_cast<uint8_t>(row);
            m_rows[row].members.push_back(static_cast<uint32_t>(i));
        }
        }
    finishRows();
}

DrawItem LaneLod::itemAt(size_t index) const
{
    if (m_folded.empty())
        return itemOf(m_spans[index], index);
    DrawItem it = m_folded[index];
    it.start = m_spans[index].start;
    it.end = std::max(m_spans[index].end, it.start);
    it.span = static_cast<uint32_t>(index);
    it.row = 0;
    return it;
}

std::vector<DrawItem> LaneLod::overview(size_t maxItems, TimeNs& gapOut) const
{
    // The lane folded at gap g, row by row (the fold of lod.cpp's header; at g = 0 nothing is
    // narrow, so it is the spans). The number of items only falls as g grows: the smallest g of
    // 0, 1 µs, 2 µs, 4 µs, ... that fits is found by bisection over the doublings.
    auto fold = [&](TimeNs g, auto emit) {
        for (uint32_t r = 0; r < m_rows.size(); ++r) {
            const Row& row = m_rows[r];
            Folder folder(g, [&emit, r](DrawItem it) {
                it.row = r;
                emit(it);
            });
            for (size_t k = 0; k < rowSize(row); ++k)
                folder.add(itemAt(spanAt(row, k)));
            folder.flush();
        }
    };
    auto countAt = [&](TimeNs g) {
        size_t n = 0;
        fold(g, [&n](const DrawItem&) { ++n; });
        return n;
    };
    TimeNs g = 0;
    if (countAt(0) > maxItems) {
        // Doublings of kFinestGapNs up to one past the lane's extent (there every row is one item).
        TimeNs first = 0, last = 0;
        for (size_t i = 0; i < m_spans.size(); ++i) {
            first = i == 0 ? m_spans[i].start : std::min(first, m_spans[i].start);
            last = std::max(last, m_spans[i].end);
        }
        int lo = 0, hi = 0;
        while (hi < 52 && (kFinestGapNs << hi) <= last - first)
            ++hi;
        while (lo < hi) { // the smallest k in [lo, hi] whose fold fits; hi always does or is the last
            const int mid = (lo + hi) / 2;
            if (countAt(kFinestGapNs << mid) <= maxItems)
                hi = mid;
            else
                lo = mid + 1;
        }
        g = kFinestGapNs << lo;
    }
    gapOut = g;
    std::vector<DrawItem> out;
    fold(g, [&out](const DrawItem& it) { out.push_back(it); });
    std::stable_sort(out.begin(), out.end(), [](const DrawItem& a, const DrawItem& b) { return a.start < b.start; });
    return out;
}

void LaneLod::pack()
{
    // One pass answers the usual case: no span starts before the running end of the ones before.
    TimeNs runningEnd = std::numeric_limits<TimeNs>::min();
    bool overlaps = false;
    for (const Span& s : m_spans) {
        if (s.start < runningEnd) {
            overlaps = true;
            break;
        }
        runningEnd = std::max(runningEnd, s.end);
    }
    if (!overlaps) {
        m_rows.resize(1);
        return;
    }
    // First fit over the rows' running ends (a handful of rows: a linear scan beats a heap).
    std::vector<TimeNs> rowEnd;
    m_rowOf.resize(m_spans.size());
    for (size_t i = 0; i < m_spans.size(); ++i) {
        const Span& s = m_spans[i];
        uint32_t row = 0;
        while (row < rowEnd.size() && rowEnd[row] > s.start)
            ++row;
        if (row == rowEnd.size()) {
            if (rowEnd.size() < kMaxRows) {
                rowEnd.push_back(std::numeric_limits<TimeNs>::min());
                m_rows.emplace_back();
            } else {
                row = static_cast<uint32_t>(std::min_element(rowEnd.begin(), rowEnd.end()) - rowEnd.begin());
                ++m_overflow;
            }
        }
        rowEnd[row] = std::max(rowEnd[row], s.end);
        m_rowOf[i] = static_cast<uint8_t>(row);
        m_rows[row].members.push_back(static_cast<uint32_t>(i));
    }
}

void LaneLod::finishRows()
{
    // The lane's own reach only when it differs from its one row's (visibleRange).
    if (m_rows.size() > 1)
        m_reach = reachOf(m_spans.size(), [this](size_t i) { return std::max(m_spans[i].end, m_spans[i].start); });
    for (Row& row : m_rows)
        buildLevels(row);
}

void LaneLod::buildLevels(Row& row)
{
    TimeNs first = 0, last = 0;
    const size_t n = rowSize(row);
    // The row's extent and its reach, in one pass.
    row.reach = reachOf(n, [&](size_t k) {
        const Span& s = m_spans[spanAt(row, k)];
        if (k == 0 || s.start < first)
            first = s.start;
        last = std::max(last, s.end);
        return std::max(s.end, s.start);
    });
    const TimeNs extent = last - first;

    // Count first, materialize only a level that is worth keeping: most fine gaps fold nothing
    // on a lane of wide spans, and building a 10 M-item list just to drop it would dominate.
    size_t sourceSize = n;
    const std::vector<DrawItem>* source = nullptr; // null: the row's raw spans
    auto feed = [&](auto& folder) {
        if (source) {
            for (const DrawItem& it : *source)
                folder.add(it);
        } else {
            for (size_t k = 0; k < n; ++k)
                folder.add(itemAt(spanAt(row, k)));
        }
        folder.flush();
    };
    for (TimeNs gap = kFinestGapNs; sourceSize > kSmallLevel; gap *= kLevelFactor) {
        size_t count = 0;
        Folder counter(gap, [&count](const DrawItem&) { ++count; });
        feed(counter);
        if (static_cast<double>(count) <= kMinShrink * static_cast<double>(sourceSize)) {
            Level level;
            level.gap = gap;
            level.items.reserve(count);
            Folder builder(gap, [&level](const DrawItem& it) { level.items.push_back(it); });
            feed(builder);
            level.reach = reachOf(level.items.size(), [&level](size_t k) { return level.items[k].end; });
            row.levels.push_back(std::move(level));
            source = &row.levels.back().items;
            sourceSize = count;
        }
        if (gap > extent || gap > std::numeric_limits<TimeNs>::max() / kLevelFactor)
            break;
    }
}

// Spans are sorted by start, so spans starting at or after t1 are out, and every span before the
// first block that reaches t0 ends before t0. The range between the two searches can still hold
// spans that end before t0 (in that block, or nested under a long one); callers clip while drawing.
std::pair<size_t, size_t> LaneLod::visibleRange(TimeNs t0, TimeNs t1) const
{
    if (m_spans.empty() || t1 <= t0)
        return {0, 0};
    const std::vector<TimeNs>& reach = m_rows.size() == 1 ? m_rows[0].reach : m_reach; // one row: the lane's own
    auto first = m_spans.begin() + static_cast<std::ptrdiff_t>(std::min(firstReaching(reach, t0), m_spans.size()));
    auto last = std::lower_bound(first, m_spans.end(), t1,
                                 [](const Span& s, TimeNs t) { return s.start < t; });
    // Trim the leading spans of the margin that end before the window (cheap, and exact for
    // lanes without nesting).
    while (first != last && first->end <= t0 && first->end > first->start)
        ++first;
    return {static_cast<size_t>(first - m_spans.begin()), static_cast<size_t>(last - m_spans.begin())};
}

void LaneLod::query(TimeNs t0, TimeNs t1, double nsPerPixel, double minPixels, std::vector<DrawItem>& out) const
{
    if (m_spans.empty() || t1 <= t0)
        return;
    const double td = std::max(0.0, nsPerPixel * minPixels);
    const TimeNs threshold = td >= 9.0e18 ? std::numeric_limits<TimeNs>::max() / 2 : static_cast<TimeNs>(td);
    for (uint32_t r = 0; r < m_rows.size(); ++r)
        queryRow(r, t0, t1, threshold, out);
}

void LaneLod::queryRow(uint32_t rowIndex, TimeNs t0, TimeNs t1, TimeNs threshold, std::vector<DrawItem>& out) const
{
    const Row& row = m_rows[rowIndex];
    Folder folder(threshold, [&out, rowIndex](DrawItem it) {
        it.row = rowIndex;
        out.push_back(it);
    });

    // The coarsest level that is still no coarser than the threshold.
    const Level* level = nullptr;
    for (const Level& l : row.levels) {
        if (l.gap <= threshold)
            level = &l;
    }
    if (!level) {
        const size_t n = rowSize(row);
        auto startOf = [&](size_t k) { return m_spans[spanAt(row, k)].start; };
        // From the first block that reaches t0, a binary search over the row's starts for t1.
        const size_t a = std::min(firstReaching(row.reach, t0), n);
        size_t last = a, hiB = n;
        while (last < hiB) {
            const size_t mid = last + (hiB - last) / 2;
            if (startOf(mid) < t1)
                last = mid + 1;
            else
                hiB = mid;
        }
        for (size_t k = a; k < last; ++k) {
            const size_t i = spanAt(row, k);
            const Span& s = m_spans[i];
            if (!reachesWindow(s.start, std::max(s.end, s.start), t0))
                continue; // in the first block but ended before the window
            folder.add(itemAt(i));
        }
        folder.flush();
        return;
    }
    const auto& items = level->items;
    auto first = items.begin() + static_cast<std::ptrdiff_t>(std::min(firstReaching(level->reach, t0), items.size()));
    auto last = std::lower_bound(first, items.end(), t1,
                                 [](const DrawItem& it, TimeNs t) { return it.start < t; });
    for (auto it = first; it != last; ++it) {
        if (!reachesWindow(it->start, it->end, t0))
            continue; // in the first block but ended before the window
        folder.add(*it);
    }
    folder.flush();
}

RunLod::RunLod(const Run& run)
{
    m_lanes.resize(run.lanes.size());
    m_offsets.assign(run.lanes.size(), 0);
    for (size_t i = 0; i < run.lanes.size(); ++i) {
        const auto [first, last] = run.laneSpanRange(LaneId{static_cast<uint32_t>(i)});
        m_offsets[i] = first;
        m_lanes[i] = LaneLod(std::span<const Span>(run.spans.data() + first, last - first));
    }
}

RunLod::RunLod(const Run& run, std::span<const DrawItem> folded)
{
    if (folded.size() != run.spans.size()) {
        *this = RunLod(run);
        return;
    }
    m_lanes.resize(run.lanes.size());
    m_offsets.assign(run.lanes.size(), 0);
    for (size_t i = 0; i < run.lanes.size(); ++i) {
        const auto [first, last] = run.laneSpanRange(LaneId{static_cast<uint32_t>(i)});
        m_offsets[i] = first;
        m_lanes[i] = LaneLod(std::span<const Span>(run.spans.data() + first, last - first), folded.subspan(first, last - first));
    }
}

} // namespace lockstep::core
