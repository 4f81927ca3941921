// A run's stored overview (see run_overview.h).
#include "lockstep/core/run_overview.h"

#include <algorithm>

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

bool overviewRun(const RunOverview& overview, Run& run, std::vector<DrawItem>& folded)
{
    if (overview.lanes.size() != run.lanes.size())
        return false;
    const size_t names = run.strings.size();
    for (const LaneOverview& lane : overview.lanes) {
        if (lane.rows < 1 || lane.rows > LaneLod::kMaxRows || lane.gap < 0)
            return false;
        for (size_t k = 0; k < lane.items.size(); ++k) {
            const OverviewItem& it = lane.items[k];
            if (it.end < it.start || it.count < 1 || it.maxDuration < 0 || it.maxDuration > it.end - it.start
                || it.row >= lane.rows || it.name.v >= names || static_cast<uint8_t>(it.kind) > static_cast<uint8_t>(SpanKind::Other)
                || (k > 0 && it.start < lane.items[k - 1].start))
                return false;
        }
    }
    std::vector<Span> spans;
    std::vector<DrawItem> items;
    spans.reserve(overview.items());
    items.reserve(overview.items());
    for (size_t i = 0; i < overview.lanes.size(); ++i)
        for (const OverviewItem& it : overview.lanes[i].items) {
            spans.push_back(Span{.start = it.start, .end = it.end, .bytes = it.bytes, .lane = LaneId{static_cast<uint32_t>(i)},
                                 .name = it.name, .step = it.step, .bucket = it.bucket, .kind = it.kind});
            items.push_back(DrawItem{.start = it.start, .end = it.end, .span = 0, .count = it.count,
                                     .maxDuration = it.maxDuration, .row = it.row});
        }
    run.spans = std::move(spans);
    folded = std::move(items);
    return true;
}

} // namespace lockstep::core
