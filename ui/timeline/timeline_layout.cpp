// The timeline's rows, top to bottom: a header per run when runs are stacked, a header per rank,
// its lanes (timeline_widget_impl.h); scrolling and which rows are visible.
#include "timeline_widget_impl.h"

#include "format.h"
#include "timeline_palette.h"
#include "host_groups.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lockstep::ui {

using namespace timeline_detail;

void TimelineWidget::Impl::computeOrigins()
{
    origins.assign(models.size(), 0);
    for (size_t i = 0; i < models.size(); ++i) {
        origins[i] = models[i]->origin();
        if (alignOverride >= 0)
            if (const StepSpan* s = models[i]->step(alignOverride))
                origins[i] = s->start;
    }
}

void TimelineWidget::Impl::relayout()
{
    rows.clear();
    laneRow.assign(models.size(), {});
    hosts.assign(models.size(), {});
    hostOfRank.assign(models.size(), {});
    int y = kRulerHeight;
    const bool stacked = runs.size() > 1;
    for (size_t ri = 0; ri < models.size(); ++ri) {
        const TimelineRunModel& m = *models[ri];
        laneRow[ri].assign(m.run().lanes.size(), -1);
        if (stacked) {
            rows.push_back({TimelineRowKind::RunHeader, int(ri), -1, -1, y, kRunHeaderHeight});
            y += kRunHeaderHeight;
        }
        std::vector<const TimelineRunModel::RankLanes*> ranks;
        for (const auto& rl : m.ranks())
            ranks.push_back(rl.get());
        // Worst first: the rank to look at is on top. Unknown values (NaN) go last.
        auto key = [this](const TimelineRunModel::RankLanes* r) {
            const double v = order == RankOrder::ByWaitCaused ? r->meanWaitCausedNs
                           : order == RankOrder::ByStepTime  ? r->steadyStepNs
                                                             : -double(r->rank);
            return std::isfinite(v) ? v : -std::numeric_limits<double>::infinity();
        };
        if (order != RankOrder::ByRank)
            std::stable_sort(ranks.begin(), ranks.end(), [&](auto* a, auto* b) { return key(a) > key(b); });
        std::vector<int32_t> rankNumbers;
        for (const auto& rl : m.ranks())
            rankNumbers.push_back(rl->rank);
        hosts[ri] = hostGroups(m.run(), rankNumbers);
        if (hosts[ri].size() < 2) {
            for (const auto* rl : ranks)
                y = addRankRows(ri, *rl, y);
            continue;
        }
        // Several hosts: a header per host, then its ranks in the chosen order.
        for (size_t h = 0; h < hosts[ri].size(); ++h)
            for (int32_t rank : hosts[ri][h].ranks)
                hostOfRank[ri][rank] = int(h);
        std::vector<std::vector<const TimelineRunModel::RankLanes*>> byHost(hosts[ri].size());
        for (const auto* rl : ranks)
            byHost[size_t(hostOf(int(ri), rl->rank))].push_back(rl);
        for (size_t h = 0; h < hosts[ri].size(); ++h) {
            TimelineRow header{TimelineRowKind::HostHeader, int(ri), -1, -1, y, kHostHeaderHeight};
            header.host = int(h);
            header.collapsed = hostsCollapsed.count({int(ri), int(h)}) > 0;
            rows.push_back(header);
            y += kHostHeaderHeight;
            if (header.collapsed) {
                y += kRowGap;
                continue;
            }
            for (const auto* rl : byHost[h])
                y = addRankRows(ri, *rl, y);
        }
    }
    contentHeight = y;
    ++version;
    frame.valid = false;
    updateScrollBar();
}

// A rank's header and, unless it is collapsed, its lanes (the quiet streams' row where the first
// of them would be); returns the y below them.
int TimelineWidget::Impl::addRankRows(size_t ri, const TimelineRunModel::RankLanes& rl, int y)
{
    const TimelineRunModel& m = *models[ri];
    const bool isCollapsed = collapsed.count({int(ri), rl.rank}) > 0;
    TimelineRow header{TimelineRowKind::RankHeader, int(ri), rl.rank, -1, y, kRankHeaderHeight};
    header.collapsed = isCollapsed;
    header.host = hostOf(int(ri), rl.rank);
    rows.push_back(header);
    y += kRankHeaderHeight;
    if (!isCollapsed) {
        const bool shown = streamsShown.count({int(ri), rl.rank}) > 0;
        for (core::LaneId lane : rl.lanes) {
            if (!rl.quietLanes.empty() && lane == rl.quietLanes.front()) {
                // The quiet streams' row, where the first of them would be.
                TimelineRow fold{TimelineRowKind::QuietStreams, int(ri), rl.rank, -1, y, kLaneHeight};
                fold.collapsed = !shown;
                fold.host = header.host;
                rows.push_back(fold);
                y += kLaneHeight;
            }
            if (!shown && m.isQuietLane(lane))
                continue;
            const int sub = int(m.lod().lane(lane).rowCount());
            const int h = sub * kLaneHeight + (lane == rl.stripLane ? kStripHeight : 0);
            TimelineRow row{TimelineRowKind::Lane, int(ri), rl.rank, int(lane.v), y, h};
            row.subRows = sub;
            row.host = header.host;
            laneRow[ri][lane.v] = int(rows.size());
            rows.push_back(row);
            y += h;
        }
    }
    return y + kRowGap;
}

int TimelineWidget::Impl::hostOf(int run, int32_t rank) const
{
    if (run < 0 || size_t(run) >= hostOfRank.size())
        return -1;
    const auto& m = hostOfRank[size_t(run)];
    const auto it = m.find(rank);
    return it != m.end() ? it->second : -1;
}

void TimelineWidget::Impl::updateScrollBar()
{
    const int maxScroll = std::max(0, contentHeight - w->height());
    const QSignalBlocker block(scrollBar);
    scrollBar->setRange(0, maxScroll);
    scrollBar->setPageStep(std::max(1, w->height() - kRulerHeight));
    scrollBar->setSingleStep(kLaneHeight);
    scrollBar->setVisible(maxScroll > 0);
    scrollBar->setGeometry(w->width() - scrollBar->sizeHint().width(), kRulerHeight, scrollBar->sizeHint().width(),
                           std::max(0, w->height() - kRulerHeight));
    frame.valid = false;
}

int TimelineWidget::Impl::rowAt(int y) const
{
    const int cy = y + scroll();
    auto it = std::upper_bound(rows.begin(), rows.end(), cy, [](int v, const TimelineRow& r) { return v < r.top; });
    if (it == rows.begin())
        return -1;
    --it;
    return cy < it->top + it->height ? int(it - rows.begin()) : -1;
}

std::pair<size_t, size_t> TimelineWidget::Impl::visibleRows() const
{
    const int top = scroll() + kRulerHeight, bottom = scroll() + w->height();
    auto first = std::lower_bound(rows.begin(), rows.end(), top,
                                  [](const TimelineRow& r, int v) { return r.top + r.height < v; });
    auto last = std::upper_bound(first, rows.end(), bottom, [](int v, const TimelineRow& r) { return v < r.top; });
    return {size_t(first - rows.begin()), size_t(last - rows.begin())};
}

} // namespace lockstep::ui
