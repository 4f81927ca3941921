// The selected span's bucket on every rank, the name search, and bringing a span into view
// (timeline_widget_impl.h).
#include "timeline_widget_impl.h"

#include "format.h"
#include "timeline_palette.h"

#include <algorithm>
#include <string>

namespace lockstep::ui {

using namespace timeline_detail;

std::optional<SpanRef> TimelineWidget::Impl::findComm(int run, int32_t rank, int32_t step, int32_t bucket) const
{
    const TimelineRunModel& m = *models[size_t(run)];
    const core::Run& r = m.run();
    const auto* rl = m.rank(rank);
    const StepSpan* st = rl ? rl->step(step) : nullptr;
    if (!st)
        return std::nullopt;
    // A bucket's all-reduce of step s starts inside the step's window; device kernels may run
    // late, so the search reaches one step length past it.
    const TimeNs len = std::max<TimeNs>(1, st->end - st->start);
    std::optional<SpanRef> best;
    for (core::LaneId lane : rl->lanes) {
        const auto [a, b] = r.laneSpanRange(lane);
        const TimeNs lo = st->start - m.laneMaxDurations()[lane.v];
        auto it = std::lower_bound(r.spans.begin() + ptrdiff_t(a), r.spans.begin() + ptrdiff_t(b), lo,
                                   [](const core::Span& s, TimeNs t) { return s.start < t; });
        for (; it != r.spans.begin() + ptrdiff_t(b) && it->start <= st->end + len; ++it) {
            if (!core::isCommunication(it->kind) || it->step != step || it->bucket != bucket)
                continue;
            const qint64 idx = qint64(it - r.spans.begin());
            if (!best || r.spans[size_t(best->span)].start > it->start)
                best = SpanRef{run, idx};
            break;
        }
    }
    return best;
}

void TimelineWidget::Impl::computeLinked()
{
    linked = LinkedBucket{};
    if (!selection.valid())
        return;
    const TimelineRunModel& m = *models[size_t(selection.run)];
    const core::Run& r = m.run();
    const core::Span& s = r.spans[size_t(selection.span)];
    if (!core::isCommunication(s.kind) || s.bucket < 0 || s.step == core::kNoStep)
        return;
    linked.run = selection.run;
    linked.step = s.step;
    linked.bucket = s.bucket;
    for (const auto& rl : m.ranks()) {
        if (auto ref = findComm(selection.run, rl->rank, s.step, s.bucket)) {
            linked.spans.push_back(*ref);
            linked.ranks.push_back(rl->rank);
        }
        // The gradient-ready instants that made the bucket ready on this rank.
        const StepSpan* st = rl->step(s.step);
        if (!st)
            continue;
        for (core::LaneId lane : rl->lanes) {
            const auto [ia, ib] = m.laneInstants(lane);
            auto it = std::lower_bound(r.instants.begin() + ptrdiff_t(ia), r.instants.begin() + ptrdiff_t(ib), st->start,
                                       [](const core::Instant& x, TimeNs t) { return x.ts < t; });
            for (; it != r.instants.begin() + ptrdiff_t(ib) && it->ts <= st->end; ++it)
                if (it->kind == core::InstantKind::GradReady && it->step == s.step && it->bucket == s.bucket)
                    linked.readyInstants.push_back(size_t(it - r.instants.begin()));
        }
    }
    // Skew and a late rank need two ranks that launched it (one rank: not applicable).
    if (const core::BucketSkew* k = m.bucketSkew(s.step, s.bucket); k && k->ranks > 1) {
        linked.lateRank = k->lateRank;
        linked.skew = k->skew;
        linked.waitCaused = k->waitCaused;
    }
}

void TimelineWidget::Impl::updateSearch()
{
    searchNames.assign(models.size(), {});
    searchMatches.clear();
    if (searchText.isEmpty())
        return;
    // Names are interned: match each distinct name once, then take the spans by name id.
    for (size_t ri = 0; ri < models.size(); ++ri) {
        if (!models[ri]->detailed())
            continue; // an overview has no spans to match (TimelinePage says so)
        const core::Run& r = models[ri]->run();
        auto& names = searchNames[ri];
        names.assign(r.strings.size(), 0);
        bool any = false;
        const std::string exactText = searchExact ? searchText.toStdString() : std::string();
        for (size_t i = 1; i < r.strings.size(); ++i) {
            const std::string& text = r.strings.texts()[i];
            if (searchExact) {
                names[i] = text == exactText ? 1 : 0;
                any = any || names[i];
                continue;
            }
            // A name longer than anything shown is searched in its shown part only.
            const QString shown = displayText(std::string_view(text), 4 * kMaxDisplayChars);
            names[i] = shown.contains(searchText, Qt::CaseInsensitive) ? 1 : 0;
            any = any || names[i];
        }
        if (!any)
            continue;
        for (size_t i = 0; i < r.spans.size(); ++i)
            if (names[r.spans[i].name.v])
                searchMatches.push_back(SpanRef{int(ri), qint64(i)});
    }
    auto startOf = [this](SpanRef ref) {
        return aligned(ref.run, models[size_t(ref.run)]->run().spans[size_t(ref.span)].start);
    };
    std::stable_sort(searchMatches.begin(), searchMatches.end(), [&](SpanRef a, SpanRef b) { return startOf(a) < startOf(b); });
}

void TimelineWidget::Impl::ensureVisible(SpanRef ref)
{
    if (!ref.valid())
        return;
    const TimelineRunModel& m = *models[size_t(ref.run)];
    const core::Span& s = m.run().spans[size_t(ref.span)];
    const int32_t rank = m.run().lanes[s.lane.v].rank;
    const bool quietHidden = m.isQuietLane(s.lane) && !streamsShown.count({ref.run, rank});
    const int host = hostOf(ref.run, rank);
    if (collapsed.count({ref.run, rank}) || quietHidden || hostsCollapsed.count({ref.run, host})) {
        collapsed.erase({ref.run, rank});
        hostsCollapsed.erase({ref.run, host});
        if (quietHidden)
            streamsShown.insert({ref.run, rank});
        relayout();
        emit w->rowsChanged();
    }
    const TimeNs a = aligned(ref.run, s.start), b = aligned(ref.run, s.end);
    if (a < t0 || b > t1) {
        const TimeNs len = t1 - t0;
        if (b - a > len) {
            const TimeNs pad = std::max<TimeNs>((b - a) / 10, kMinViewNs);
            w->setViewRange(a - pad, b + pad);
        } else {
            const TimeNs mid = a + (b - a) / 2;
            w->setViewRange(mid - len / 2, mid - len / 2 + len);
        }
    }
    const auto [row, sub] = placeOf(ref);
    if (row >= 0) {
        const int top = rows[size_t(row)].top + int(sub) * kLaneHeight;
        if (top - scroll() < kRulerHeight || top + kLaneHeight - scroll() > w->height())
            scrollBar->setValue(top - kRulerHeight - (w->height() - kRulerHeight) / 3);
    }
}

} // namespace lockstep::ui
