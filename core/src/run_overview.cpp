// A run's stored overview (see run_overview.h).
#include "lockstep/core/run_overview.h"

#include <algorithm>
#include <limits>

namespace lockstep::core {

size_t RunOverview::items() const
{
    size_t n = 0;
    for (const LaneOverview& l : lanes)
        n += l.items.size();
    return n;
}

LaneWork laneWork(const Run& run, LaneId lane)
{
    LaneWork w;
    const auto [first, last] = run.laneSpanRange(lane);
    w.spans = static_cast<int64_t>(last - first);
    for (size_t i = first; i < last; ++i) {
        w.communicates = w.communicates || isCommunication(run.spans[i].kind);
        w.busyNs += run.spans[i].duration();
    }
    return w;
}

RunOverview buildRunOverview(const Run& run, std::stop_token stop, size_t budget)
{
    RunOverview out;
    out.lanes.resize(run.lanes.size());
    const size_t perLane = std::max(kOverviewMinLaneItems, budget / std::max<size_t>(1, run.lanes.size()));
    for (size_t i = 0; i < run.lanes.size(); ++i) {
        if (stop.stop_requested())
            return {};
        const LaneId id{static_cast<uint32_t>(i)};
        LaneOverview& lane = out.lanes[i];
        lane.work = laneWork(run, id);
        const auto [first, last] = run.laneSpanRange(id);
        const LaneLod lod(std::span<const Span>(run.spans.data() + first, last - first));
        lane.rows = lod.rowCount();
        for (const DrawItem& d : lod.overview(perLane, lane.gap)) {
            const Span& s = run.spans[first + d.span];
            lane.items.push_back(OverviewItem{.start = d.start, .end = d.end, .maxDuration = d.maxDuration,
                                              .count = d.count, .row = d.row, .bytes = s.bytes, .name = s.name,
                                              .step = s.step, .bucket = s.bucket, .kind = s.kind});
        }
    }
    return out;
}

RunReader::LaneWindow detailRange(const LaneOverview& lane, LaneId id, TimeNs t0, TimeNs t1)
{
    // No item starts in a gap between items: [t0, t1) itself can be part of the range.
    RunReader::LaneWindow w{id, t0, std::max(t1, t0 + 1)};
    for (const OverviewItem& it : lane.items)
        if (it.end > t0 && it.start < t1) {
            w.start = std::min(w.start, it.start);
            w.end = std::max(w.end, it.end);
        }
    // Widen until no item straddles an edge (a few rounds: items of one row never overlap).
    for (bool changed = true; changed;) {
        changed = false;
        for (const OverviewItem& it : lane.items) {
            if (it.start < w.start && it.end > w.start) {
                w.start = it.start;
                changed = true;
            }
            if (it.start < w.end && it.end > w.end) {
                w.end = it.end;
                changed = true;
            }
        }
    }
    return w;
}

namespace {
bool itemFits(const LaneOverview& lane, const OverviewItem& it, size_t names)
{
    return it.end >= it.start && it.count >= 1 && it.maxDuration >= 0 && it.maxDuration <= it.end - it.start
        && it.row < lane.rows && it.name.v < names && static_cast<uint8_t>(it.kind) <= static_cast<uint8_t>(SpanKind::Other);
}

Span spanOf(const OverviewItem& it, LaneId lane)
{
    return Span{.start = it.start, .end = it.end, .bytes = it.bytes, .lane = lane, .name = it.name, .step = it.step,
                .bucket = it.bucket, .kind = it.kind};
}

DrawItem drawOf(const OverviewItem& it)
{
    return DrawItem{.start = it.start, .end = it.end, .span = 0, .count = it.count, .maxDuration = it.maxDuration, .row = it.row};
}
} // namespace

bool overviewRun(const RunOverview& overview, Run& run, std::vector<DrawItem>& folded, const OverviewDetail* detail)
{
    if (overview.lanes.size() != run.lanes.size())
        return false;
    const size_t names = run.strings.size();
    for (const LaneOverview& lane : overview.lanes) {
        if (lane.rows < 1 || lane.rows > LaneLod::kMaxRows || lane.gap < 0)
            return false;
        for (size_t k = 0; k < lane.items.size(); ++k)
            if (!itemFits(lane, lane.items[k], names) || (k > 0 && lane.items[k].start < lane.items[k - 1].start))
                return false;
    }
    // Each lane's detail window, if any (the last one given wins).
    std::vector<int> windowOf(run.lanes.size(), -1);
    if (detail) {
        if (detail->spans.size() != detail->windows.size())
            return false;
        for (size_t w = 0; w < detail->windows.size(); ++w) {
            const RunReader::LaneWindow& win = detail->windows[w];
            if (win.lane.v >= run.lanes.size())
                return false;
            for (const OverviewItem& it : overview.lanes[win.lane.v].items)
                if ((it.start < win.start && it.end > win.start) || (it.start < win.end && it.end > win.end))
                    return false; // it would cut an item: its spans would be drawn twice or not at all
            for (const Span& s : detail->spans[w])
                if (s.start < win.start || s.start >= win.end || s.end < s.start || s.name.v >= names)
                    return false;
            windowOf[win.lane.v] = static_cast<int>(w);
        }
    }
    std::vector<Span> spans;
    std::vector<DrawItem> items;
    spans.reserve(overview.items());
    items.reserve(overview.items());
    for (size_t i = 0; i < overview.lanes.size(); ++i) {
        const LaneId id{static_cast<uint32_t>(i)};
        const LaneOverview& lane = overview.lanes[i];
        if (windowOf[i] < 0) {
            for (const OverviewItem& it : lane.items) {
                spans.push_back(spanOf(it, id));
                items.push_back(drawOf(it));
            }
            continue;
        }
        const RunReader::LaneWindow& win = detail->windows[static_cast<size_t>(windowOf[i])];
        const std::vector<Span>& own = detail->spans[static_cast<size_t>(windowOf[i])];
        // The items before the window, and the rows' ends they leave (a row's end is the latest end
        // of its spans so far, which its last items carry): lod.cpp's first fit resumes from there.
        std::vector<TimeNs> rowEnd;
        size_t k = 0;
        for (; k < lane.items.size() && lane.items[k].start < win.start; ++k) {
            const OverviewItem& it = lane.items[k];
            if (it.row >= rowEnd.size())
                rowEnd.resize(it.row + 1, std::numeric_limits<TimeNs>::min());
            rowEnd[it.row] = std::max(rowEnd[it.row], it.end);
            spans.push_back(spanOf(it, id));
            items.push_back(drawOf(it));
        }
        for (const Span& s : own) {
            uint32_t row = 0;
            while (row < rowEnd.size() && rowEnd[row] > s.start)
                ++row;
            if (row == rowEnd.size()) {
                if (rowEnd.size() < LaneLod::kMaxRows)
                    rowEnd.push_back(std::numeric_limits<TimeNs>::min());
                else
                    row = static_cast<uint32_t>(std::min_element(rowEnd.begin(), rowEnd.end()) - rowEnd.begin());
            }
            rowEnd[row] = std::max(rowEnd[row], s.end);
            if (row >= lane.rows)
                return false; // the spans are not the ones the overview was made from
            Span copy = s;
            copy.lane = id;
            spans.push_back(copy);
            const TimeNs end = std::max(s.end, s.start);
            items.push_back(DrawItem{.start = s.start, .end = end, .span = 0, .count = 1, .maxDuration = end - s.start, .row = row});
        }
        while (k < lane.items.size() && lane.items[k].start < win.end)
            ++k; // the items the spans stand in for
        for (; k < lane.items.size(); ++k) {
            spans.push_back(spanOf(lane.items[k], id));
            items.push_back(drawOf(lane.items[k]));
        }
    }
    run.spans = std::move(spans);
    folded = std::move(items);
    return true;
}

} // namespace lockstep::core
