// What the timeline draws over the cached lists on every paint: search matches, the selection and
// its linked bucket, the measured range, the replay cursor (timeline_widget_impl.h).
#include "timeline_widget_impl.h"

#include "format.h"
#include "timeline_palette.h"

#include <algorithm>
#include <limits>
#include <map>

namespace lockstep::ui {

using namespace timeline_detail;

std::pair<int, uint32_t> TimelineWidget::Impl::placeOf(SpanRef ref) const
{
    if (!ref.valid() || ref.run >= int(models.size()))
        return {-1, 0};
    const TimelineRunModel& m = *models[size_t(ref.run)];
    if (ref.span >= qint64(m.run().spans.size()))
        return {-1, 0};
    const core::Span& s = m.run().spans[size_t(ref.span)];
    if (s.lane.v >= laneRow[size_t(ref.run)].size())
        return {-1, 0};
    const int row = laneRow[size_t(ref.run)][s.lane.v];
    const size_t offset = m.lod().laneOffset(s.lane);
    return {row, m.lod().lane(s.lane).rowOf(size_t(ref.span) - offset)};
}

QRectF TimelineWidget::Impl::spanRect(SpanRef ref) const
{
    const auto [row, sub] = placeOf(ref);
    if (row < 0)
        return {};
    const core::Span& s = models[size_t(ref.run)]->run().spans[size_t(ref.span)];
    const double x0 = xAbs(ref.run, s.start);
    const double x1 = std::max(x0 + 2, xAbs(ref.run, s.end));
    const int top = rowY(rows[size_t(row)]) + int(sub) * kLaneHeight + 1;
    return QRectF(x0, top, x1 - x0, kLaneHeight - 2);
}

// A rect cut to the time area (a little past its edges, so outlines of spans that leave the
// view are not drawn at the border).
QRectF TimelineWidget::Impl::clipToArea(QRectF r) const
{
    const double a = std::max<double>(r.left(), kGutterWidth - 2), b = std::min<double>(r.right(), right() + 2);
    return QRectF(a, r.top(), std::max(0.0, b - a), r.height());
}

// The selected bucket on every rank: outlines, the wait of the early ranks as a bracket up
// to the late rank's launch, arrows from the late rank's launch to the others, and from each
// rank's last gradient-ready instant of the bucket to its launch.
void TimelineWidget::Impl::addLinkedBucket(TimelineOverlay& o, const QFontMetrics& smallFm) const
{
    if (!linked.valid())
        return;
    const int rightX = right();
    const int run = linked.run;
    const TimelineRunModel& m = *models[size_t(run)];
    const core::Run& r = m.run();
    TimeNs lateLaunch = std::numeric_limits<TimeNs>::min();
    QPointF lateAnchor(-1, -1);
    for (size_t k = 0; k < linked.spans.size(); ++k) {
        const core::Span& s = r.spans[size_t(linked.spans[k].span)];
        if (linked.ranks[k] == linked.lateRank || (linked.lateRank < 0 && s.start > lateLaunch)) {
            lateLaunch = s.start;
            const QRectF rect = spanRect(linked.spans[k]);
            if (!rect.isNull())
                lateAnchor = QPointF(xAbs(run, s.start), rect.center().y());
        }
    }
    for (size_t k = 0; k < linked.spans.size(); ++k) {
        const QRectF rect = spanRect(linked.spans[k]);
        if (rect.isNull())
            continue; // collapsed rank
        o.outlines.push_back({clipToArea(rect), palette::linkedOutline(), 1.5});
        const core::Span& s = r.spans[size_t(linked.spans[k].span)];
        if (linked.ranks[k] == linked.lateRank || lateAnchor.x() < 0)
            continue;
        const double xl = xAbs(run, s.start), xr = xAbs(run, lateLaunch);
        if (xr - xl >= 2)
            o.lines.push_back({QLineF(xl, rect.top() + 2, xr, rect.top() + 2), palette::flowArrow(), 2});
        o.arrows.push_back({lateAnchor, QPointF(xr, rect.center().y()), palette::flowArrow()});
    }
    // Gradient-ready instants of the bucket, and ready -> launch per rank.
    std::map<int32_t, TimeNs> lastReady;
    for (size_t idx : linked.readyInstants) {
        const core::Instant& in = r.instants[idx];
        const int32_t rank = r.lanes[in.lane.v].rank;
        lastReady[rank] = std::max(lastReady.count(rank) ? lastReady[rank] : in.ts, in.ts);
        const int row = laneRow[size_t(run)][in.lane.v];
        if (row < 0)
            continue;
        const double x = xAbs(run, in.ts);
        o.fills.push_back({QRectF(std::floor(x) - 1, rowY(rows[size_t(row)]), 3, kLaneHeight - 6), palette::flowArrow()});
    }
    for (size_t k = 0; k < linked.spans.size(); ++k) {
        auto ready = lastReady.find(linked.ranks[k]);
        const QRectF rect = spanRect(linked.spans[k]);
        if (ready == lastReady.end() || rect.isNull())
            continue;
        const core::Span& s = r.spans[size_t(linked.spans[k].span)];
        const double xr = xAbs(run, ready->second), xs = xAbs(run, s.start);
        if (xs - xr >= 6)
            o.arrows.push_back({QPointF(xr, rect.top() - 2), QPointF(xs, rect.top() + 3), palette::flowArrow()});
    }
    if (lateAnchor.x() >= 0 && linked.skew >= 0) {
        const QString text = QStringLiteral("skew %1 · late rank %2").arg(formatDuration(double(linked.skew))).arg(linked.lateRank);
        const int lw = smallFm.horizontalAdvance(text) + 8;
        const double x = std::clamp<double>(lateAnchor.x() + 4, kGutterWidth + 2, rightX - lw - 2);
        const QRectF box(x, lateAnchor.y() - kLaneHeight / 2.0 - 14, lw, 13);
        o.fills.push_back({box, palette::background()});
        o.labels.push_back({box, text, palette::headerText(), Qt::AlignCenter, DrawFont::Small});
    }
}

TimelineOverlay TimelineWidget::Impl::buildOverlay() const
{
    TimelineOverlay o;
    const TimelineDrawList& list = build();
    const int rightX = right();
    const int h = w->height();
    const QFontMetrics smallFm(smallFontOf(w->font()));

    // Search matches among the spans on screen.
    if (!searchText.isEmpty()) {
        for (const DrawSpan& d : list.spans) {
            if (d.count != 1 || size_t(d.run) >= searchNames.size())
                continue;
            const core::Span& s = models[size_t(d.run)]->run().spans[d.span];
            const auto& names = searchNames[size_t(d.run)];
            if (s.name.v < names.size() && names[s.name.v])
                o.outlines.push_back({d.rect.adjusted(-1, -1, 1, 1), palette::searchMatch(), 2});
        }
    }

    addLinkedBucket(o, smallFm);

    // The selection.
    if (selection.valid()) {
        const QRectF rect = spanRect(selection);
        if (!rect.isNull())
            o.outlines.push_back({clipToArea(rect.adjusted(-1, 0, 1, 0)), palette::selectionOutline(), 2});
    }

    // The measured range: shaded over every row, its length written at the top.
    if (measure) {
        const double x0 = std::max<double>(xFor(measure->first), kGutterWidth);
        const double x1 = std::min<double>(xFor(measure->second), rightX);
        if (x1 >= x0) {
            o.fills.push_back({QRectF(x0, kRulerHeight, std::max(1.0, x1 - x0), h - kRulerHeight), palette::measureFill()});
            o.lines.push_back({QLineF(x0, kRulerHeight, x0, h), palette::measureEdge(), 1});
            o.lines.push_back({QLineF(x1, kRulerHeight, x1, h), palette::measureEdge(), 1});
            const QString text = formatDuration(double(measure->second - measure->first));
            const int lw = smallFm.horizontalAdvance(text) + 8;
            const double cx = std::clamp((x0 + x1) / 2 - lw / 2.0, double(kGutterWidth), double(rightX - lw));
            const QRectF box(cx, kRulerHeight + 2, lw, 14);
            o.fills.push_back({box, palette::measureEdge()});
            o.labels.push_back({box, text, palette::textOn(palette::measureEdge()), Qt::AlignCenter, DrawFont::Small});
        }
    }

    // Replay cursor: what is right of it has not happened yet, so it is dimmed.
    if (cursor) {
        const double x = xFor(*cursor);
        if (x < rightX) {
            const double xc = std::max<double>(x, kGutterWidth);
            o.fills.push_back({QRectF(xc, kRulerHeight, rightX - xc, h - kRulerHeight), palette::replayDim()});
        }
        if (x >= kGutterWidth && x <= rightX)
            o.lines.push_back({QLineF(x, kRulerHeight, x, h), palette::replayCursor(), 2});
    }
    return o;
}

} // namespace lockstep::ui
