// Phase one of a timeline frame: the flat draw lists of the visible window, cached until the view
// changes (timeline_widget_impl.h).
#include "timeline_widget_impl.h"

#include "format.h"
#include "time_axis.h"
#include "timeline_palette.h"
#include "host_groups.h"


#include <algorithm>
#include <cmath>

namespace lockstep::ui {

using namespace timeline_detail;

const TimelineDrawList& TimelineWidget::Impl::build() const
{
    if (frame.valid && frame.t0 == t0 && frame.t1 == t1 && frame.width == w->width() && frame.height == w->height()
        && frame.scroll == scroll() && frame.version == version)
        return frame.list;
    frame.t0 = t0;
    frame.t1 = t1;
    frame.width = w->width();
    frame.height = w->height();
    frame.scroll = scroll();
    frame.version = version;
    frame.valid = true;
    TimelineDrawList& list = frame.list;
    list = TimelineDrawList{};
    const QFont base = w->font();
    QFont bold = base;
    bold.setBold(true);
    const QFontMetrics baseFm(base), smallFm(smallFontOf(base)), boldFm(bold);
    buildRows(list, baseFm, smallFm, boldFm);
    buildTimeArea(list, smallFm);
    buildRuler(list, smallFm);
    return list;
}

void TimelineWidget::Impl::buildRows(TimelineDrawList& list, const QFontMetrics& baseFm, const QFontMetrics& smallFm,
                                     const QFontMetrics& boldFm) const
{
    const int width = w->width();
    const auto [first, last] = visibleRows();
    for (size_t ri = first; ri < last; ++ri) {
        const TimelineRow& row = rows[ri];
        const int top = rowY(row);
        const QRectF full(0, top, width, row.height);
        const QRectF gutter(0, top, kGutterWidth, row.height);
        const TimelineRunModel& m = *models[size_t(row.run)];
        switch (row.kind) {
        case TimelineRowKind::RunHeader: {
            list.rowFills.push_back({full, palette::runHeaderBackground()});
            const TimelineRun& tr = runs[size_t(row.run)];
            const QString label = tr.label.isEmpty() ? displayText(m.run().config.name) : displayText(tr.label);
            const QRectF r = full.adjusted(8, 0, -8, 0);
            list.gutterLabels.push_back({r, boldFm.elidedText(label, Qt::ElideRight, int(r.width())), palette::headerText(),
                                         Qt::AlignVCenter | Qt::AlignLeft, DrawFont::Bold});
            break;
        }
        case TimelineRowKind::HostHeader: {
            list.rowFills.push_back({full, palette::hostHeaderBackground()});
            list.rowLines.push_back({QLineF(0, top + 0.5, width, top + 0.5), palette::separatorLine()});
            // ▸ collapsed, ▾ expanded, as a rank's: the row is the click target that toggles it.
            const auto& hs = hosts[size_t(row.run)];
            const QString name = QStringLiteral("%1 %2").arg(row.collapsed ? QChar(0x25b8) : QChar(0x25be))
                                     .arg(size_t(row.host) < hs.size() ? hostTitle(hs[size_t(row.host)]) : QString());
            const QRectF r = full.adjusted(6, 0, -8, 0);
            list.gutterLabels.push_back({r, boldFm.elidedText(name, Qt::ElideRight, int(r.width())), palette::headerText(),
                                         Qt::AlignVCenter | Qt::AlignLeft, DrawFont::Bold});
            break;
        }
        case TimelineRowKind::RankHeader: {
            list.rowFills.push_back({full, palette::rankHeaderBackground()});
            // ▸ collapsed, ▾ expanded: the mark is the click target that toggles it.
            const QString name = QStringLiteral("%1 rank %2").arg(row.collapsed ? QChar(0x25b8) : QChar(0x25be)).arg(row.rank);
            const QRectF r = gutter.adjusted(6, 0, -4, 0);
            list.gutterLabels.push_back({r, boldFm.elidedText(name, Qt::ElideRight, int(r.width())), palette::headerText(),
                                         Qt::AlignVCenter | Qt::AlignLeft, DrawFont::Bold});
            const auto& rs = m.runStragglers();
            if (std::find(rs.begin(), rs.end(), row.rank) != rs.end()) {
                // The run's straggler, named where the eye starts reading a row.
                list.gutterLabels.push_back({gutter.adjusted(8, 0, -6, 0), QStringLiteral("straggler"), palette::stragglerColor(),
                                             Qt::AlignVCenter | Qt::AlignRight, DrawFont::Small});
            }
            break;
        }
        case TimelineRowKind::QuietStreams: {
            list.rowFills.push_back({gutter, palette::gutterBackground()});
            list.rowLines.push_back({QLineF(kGutterWidth, top + row.height - 0.5, width, top + row.height - 0.5), palette::gridLine()});
            const auto* rl = m.rank(row.rank);
            const int n = rl ? int(rl->quietLanes.size()) : 0;
            // ▸ folded, ▾ expanded, like a rank's name: the row's name is the click target.
            const QString name = QStringLiteral("%1 %2 other streams").arg(row.collapsed ? QChar(0x25b8) : QChar(0x25be)).arg(n);
            const QRectF r(8, top, kGutterWidth - 12, kLaneHeight);
            list.gutterLabels.push_back({r, baseFm.elidedText(name, Qt::ElideRight, int(r.width())), palette::laneText(),
                                         Qt::AlignVCenter | Qt::AlignLeft, DrawFont::Base});
            break;
        }
        case TimelineRowKind::Lane: {
            list.rowFills.push_back({gutter, palette::gutterBackground()});
            list.rowLines.push_back({QLineF(kGutterWidth, top + row.height - 0.5, width, top + row.height - 0.5), palette::gridLine()});
            const core::Lane& lane = m.run().lanes[size_t(row.lane)];
            const QRectF r(18, top, kGutterWidth - 22, kLaneHeight);
            QString name = displayText(lane.name);
            if (row.subRows > 1)
                name += QStringLiteral(" ×%1").arg(row.subRows); // rows of spans in flight at once
            list.gutterLabels.push_back({r, baseFm.elidedText(name, Qt::ElideRight, int(r.width())), palette::laneText(),
                                         Qt::AlignVCenter | Qt::AlignLeft, DrawFont::Base});
            break;
        }
        }
    }
    (void)smallFm;
    list.rowLines.push_back({QLineF(kGutterWidth - 0.5, kRulerHeight, kGutterWidth - 0.5, w->height()), palette::separatorLine()});
}

// The time area: step lines, spans with their labels, the quiet streams' rows, gradient-ready
// ticks, overlap strips and late-rank marks of the visible rows, in drawing order.
void TimelineWidget::Impl::buildTimeArea(TimelineDrawList& list, const QFontMetrics& smallFm) const
{
    buildStepLines(list);
    buildSpans(list, smallFm);
    buildQuietStreams(list);
    buildReadyTicks(list);
    buildStrips(list);
    buildLateMarks(list, smallFm);
}

// Step boundaries per rank block (each rank's own step starts).
void TimelineWidget::Impl::buildStepLines(TimelineDrawList& list) const
{
    const double npp = nsPerPixel();
    const auto [first, last] = visibleRows();
    for (size_t ri = first; ri < last; ++ri) {
        const TimelineRow& row = rows[ri];
        if (row.kind != TimelineRowKind::RankHeader || row.collapsed)
            continue;
        const TimelineRunModel& m = *models[size_t(row.run)];
        const auto* rl = m.rank(row.rank);
        if (!rl || rl->steps.empty())
            continue;
        const int blockTop = rowY(row) + row.height;
        int blockBottom = blockTop;
        for (size_t k = ri + 1; k < rows.size() && (rows[k].kind == TimelineRowKind::Lane || rows[k].kind == TimelineRowKind::QuietStreams); ++k)
            blockBottom = rowY(rows[k]) + rows[k].height;
        // Boundaries closer than a few pixels would only texture the rows: leave them out.
        forEachVisibleStep(rl->steps, absolute(row.run, t0), absolute(row.run, t1), npp, kMinStepPx, [&](const StepSpan& st) {
            if (double(st.end - st.start) / npp < kMinStepPx)
                return;
            const double x = xAbs(row.run, st.start);
            list.stepLines.push_back({QLineF(x, blockTop, x, blockBottom), palette::stepLine(), 1, Qt::DotLine});
        });
    }
}

// Spans, sub-row by sub-row, with their labels.
void TimelineWidget::Impl::buildSpans(TimelineDrawList& list, const QFontMetrics& smallFm) const
{
    const double npp = nsPerPixel();
    const int rightX = right();
    const auto [first, last] = visibleRows();
    std::vector<core::DrawItem> items;
    for (size_t ri = first; ri < last; ++ri) {
        const TimelineRow& row = rows[ri];
        if (row.kind != TimelineRowKind::Lane)
            continue;
        const TimelineRunModel& m = *models[size_t(row.run)];
        const core::LaneId lane{uint32_t(row.lane)};
        const core::LaneLod& lod = m.lod().lane(lane);
        const size_t offset = m.lod().laneOffset(lane);
        const core::Run& run = m.run();
        items.clear();
        lod.query(absolute(row.run, t0), absolute(row.run, t1), npp, kMinPixels, items);
        for (const core::DrawItem& it : items) {
            DrawSpan d;
            const double x0 = xAbs(row.run, it.start), x1 = xAbs(row.run, it.end);
            // Integer pixel edges: crisp, and the same colour everywhere inside the rect.
            const int px0 = int(std::floor(std::max<double>(x0, kGutterWidth - 2)));
            const int px1 = std::max(px0 + 1, int(std::ceil(std::min<double>(x1, rightX + 2))));
            const int top = rowY(row) + int(it.row) * kLaneHeight + 2;
            d.rect = QRectF(px0, top, px1 - px0, kLaneHeight - 4);
            d.row = int(ri);
            d.run = row.run;
            d.lane = lane.v;
            d.subRow = it.row;
            d.span = offset + it.span;
            d.count = it.count;
            d.start = it.start;
            d.end = it.end;
            d.maxDuration = it.maxDuration;
            const core::Span& s = run.spans[d.span];
            d.color = it.count == 1 ? palette::spanColor(s) : palette::foldedColor();
            if (it.count == 1 && core::isCommunication(s.kind))
                d.pattern = palette::bucketPattern(s.bucket);
            list.spans.push_back(d);
            if (px1 - px0 < kMinLabelPx)
                continue;
            QString text;
            QString shortText; // used when `text` would be cut
            if (it.count > 1) {
                text = QStringLiteral("%1 spans").arg(formatCount(qlonglong(it.count)));
            } else if (core::isCommunication(s.kind) && s.bucket >= 0) {
                text = s.bytes > 0 ? QStringLiteral("b%1 · %2").arg(s.bucket).arg(formatBytes(double(s.bytes)))
                                   : QStringLiteral("b%1").arg(s.bucket); // size unknown: no "0 B"
                shortText = QStringLiteral("b%1").arg(s.bucket);
            } else {
                text = displayText(run.strings.text(s.name));
            }
            // Text stays within the visible part of the span.
            const int vx0 = std::max(px0, kGutterWidth);
            const int vx1 = std::min(px1, rightX);
            const int avail = vx1 - vx0 - 6;
            if (avail < 14)
                continue;
            if (!shortText.isEmpty() && smallFm.horizontalAdvance(text) > avail)
                text = shortText;
            list.spanLabels.push_back({QRectF(vx0 + 3, top, avail, kLaneHeight - 4), smallFm.elidedText(text, Qt::ElideRight, avail),
                                       palette::textOn(d.color), Qt::AlignVCenter | Qt::AlignLeft, DrawFont::Small});
        }
    }
}

// The quiet streams' row: the union of their spans, folded below kMinPixels like a lane.
void TimelineWidget::Impl::buildQuietStreams(TimelineDrawList& list) const
{
    const double npp = nsPerPixel();
    const int rightX = right();
    const auto [first, last] = visibleRows();
    std::vector<core::DrawItem> items;
    for (size_t ri = first; ri < last; ++ri) {
        const TimelineRow& row = rows[ri];
        if (row.kind != TimelineRowKind::QuietStreams)
            continue;
        const auto* rl = models[size_t(row.run)]->rank(row.rank);
        if (!rl)
            continue;
        items.clear();
        rl->quietLod.query(absolute(row.run, t0), absolute(row.run, t1), npp, kMinPixels, items);
        const int top = rowY(row) + 2;
        for (const core::DrawItem& it : items) {
            const int px0 = int(std::floor(std::max<double>(xAbs(row.run, it.start), kGutterWidth - 2)));
            const int px1 = std::max(px0 + 1, int(std::ceil(std::min<double>(xAbs(row.run, it.end), rightX + 2))));
            list.strips.push_back({QRectF(px0, top, px1 - px0, kLaneHeight - 4), palette::quietStreamsColor()});
        }
    }
}

// Gradient-ready ticks (instants) at the top of their lane: at most one per 2 pixels.
void TimelineWidget::Impl::buildReadyTicks(TimelineDrawList& list) const
{
    const double npp = nsPerPixel();
    const int rightX = right();
    const auto [first, last] = visibleRows();
    for (size_t ri = first; ri < last; ++ri) {
        const TimelineRow& row = rows[ri];
        if (row.kind != TimelineRowKind::Lane)
            continue;
        const TimelineRunModel& m = *models[size_t(row.run)];
        const auto [ia, ib] = m.laneInstants(core::LaneId{uint32_t(row.lane)});
        if (ia >= ib)
            continue;
        const auto& inst = m.run().instants;
        const auto firstI = inst.begin() + ptrdiff_t(ia), lastI = inst.begin() + ptrdiff_t(ib);
        const TimeNs a0 = absolute(row.run, t0), a1 = absolute(row.run, t1);
        auto it = std::lower_bound(firstI, lastI, a0, [](const core::Instant& x, TimeNs t) { return x.ts < t; });
        // Zoomed out this far the ticks would merge into one dark band that says nothing and
        // costs a cache miss per pixel on a multi-million array: leave them out.
        const auto end = std::upper_bound(it, lastI, a1, [](TimeNs t, const core::Instant& x) { return t < x.ts; });
        if (end - it > 4 * (rightX - kGutterWidth))
            continue;
        const int top = rowY(row);
        while (it != lastI && it->ts <= a1) {
            const double x = xAbs(row.run, it->ts);
            list.ticks.push_back({QRectF(std::floor(x), top + 1, 1, 6), palette::gradReadyTick()});
            const TimeNs tNext = absolute(row.run, t0 + TimeNs(std::ceil((std::floor(x) + 2 - kGutterWidth) * npp)));
            it = gallopLowerBound(it + 1, lastI, tNext, [](const core::Instant& x, TimeNs t) { return x.ts < t; });
        }
    }
}

// Overlap strips: where communication hides behind compute, and where it is exposed. A
// collapsed rank shows the zoomed-out form (one colour per step) in its header.
void TimelineWidget::Impl::buildStrips(TimelineDrawList& list) const
{
    const double npp = nsPerPixel();
    const int rightX = right();
    const auto [first, last] = visibleRows();
    std::vector<core::DrawItem> strip;
    for (size_t ri = first; ri < last; ++ri) {
        const TimelineRow& row = rows[ri];
        const TimelineRunModel& m = *models[size_t(row.run)];
        const auto* rl = m.rank(row.rank);
        if (!rl || rl->stepOverlap.empty())
            continue;
        int y = 0, hh = kStripHeight - 1;
        // An overview has no pieces: its strip is the per-step one at every zoom.
        bool detail = m.detailed() && double(rl->meanStepNs) / npp >= kStripDetailPx;
        if (row.kind == TimelineRowKind::Lane && int(rl->stripLane.v) == row.lane) {
            y = rowY(row) + row.subRows * kLaneHeight;
            list.strips.push_back({QRectF(kGutterWidth, y, rightX - kGutterWidth, hh), palette::stripBackground()});
        } else if (row.kind == TimelineRowKind::RankHeader && row.collapsed) {
            y = rowY(row) + row.height - 5;
            hh = 4;
            detail = false;
        } else {
            continue;
        }
        const TimeNs a0 = absolute(row.run, t0), a1 = absolute(row.run, t1);
        if (!detail) {
            forEachVisibleStep(rl->steps, a0, a1, npp, 1.0, [&](const StepSpan& st) {
                const size_t k = size_t(&st - rl->steps.data());
                const auto [ov, ex] = rl->stepOverlap[k];
                if (ov + ex <= 0)
                    return;
                // Whole pixels, at least two wide: the next sampled step is at most a pixel
                // and a bit further, so sub-pixel steps leave no gaps between samples.
                const int x0 = int(std::floor(xAbs(row.run, st.start)));
                const int x1 = std::max(x0 + 2, int(std::ceil(xAbs(row.run, st.end))));
                list.strips.push_back({QRectF(x0, y, x1 - x0, hh), palette::exposedShare(double(ex) / double(ov + ex))});
            });
            continue;
        }
        for (int pass = 0; pass < 2; ++pass) {
            strip.clear();
            (pass == 0 ? rl->overlappedLod : rl->exposedLod).query(a0, a1, npp, 1.0, strip);
            const QColor c = pass == 0 ? palette::overlappedColor() : palette::exposedColor();
            for (const core::DrawItem& s : strip) {
                const double x0 = xAbs(row.run, s.start);
                const double x1 = std::max(x0 + 1, xAbs(row.run, s.end));
                list.strips.push_back({QRectF(x0, y, x1 - x0, hh), c});
            }
        }
    }
}

// Late-rank marks in the rank header: the rank that held the others back in each step.
void TimelineWidget::Impl::buildLateMarks(TimelineDrawList& list, const QFontMetrics& smallFm) const
{
    const double npp = nsPerPixel();
    const int rightX = right();
    const auto [first, last] = visibleRows();
    for (size_t ri = first; ri < last; ++ri) {
        const TimelineRow& row = rows[ri];
        if (row.kind != TimelineRowKind::RankHeader)
            continue;
        const int top = rowY(row);
        const TimelineRunModel& m = *models[size_t(row.run)];
        const auto& strag = m.stepStragglers();
        const auto* rl = m.rank(row.rank);
        if (strag.empty() || !rl)
            continue;
        const int markH = row.collapsed ? row.height - 9 : row.height - 6;
        forEachVisibleStep(rl->steps, absolute(row.run, t0), absolute(row.run, t1), npp, 1.0, [&](const StepSpan& st) {
            auto sIt = std::lower_bound(strag.begin(), strag.end(), st.step,
                                        [](const core::StepStraggler& s, int32_t v) { return s.step < v; });
            if (sIt == strag.end() || sIt->step != st.step || sIt->rank != row.rank || sIt->waitCaused <= 0)
                return;
            const double x0 = xAbs(row.run, st.start);
            const double x1 = xAbs(row.run, st.end);
            const int px0 = int(std::floor(x0));
            const int px1 = std::max(px0 + 2, int(std::ceil(x1)));
            list.marks.push_back({QRectF(px0, top + 3, px1 - px0, markH), palette::stragglerFill()});
            if (x1 - x0 >= 8)
                list.marks.push_back({QRectF(x0, top + 2, 4.0, markH + 2), palette::stragglerColor()});
            const double vis0 = std::max<double>(x0, kGutterWidth) + 7;
            const double vis1 = std::min<double>(x1, rightX) - 3;
            if (vis1 - vis0 > 50) {
                // The step's late rank, not "straggler": every step has a last rank, and the word is
                // kept for the run's verdict (the gutter's label), which needs evidence.
                const QString text = QStringLiteral("late · others waited %1").arg(formatDuration(double(sIt->waitCaused)));
                list.markLabels.push_back({QRectF(vis0, top, vis1 - vis0, row.height - (row.collapsed ? 4 : 0)),
                                           smallFm.elidedText(text, Qt::ElideRight, int(vis1 - vis0)), palette::stragglerText(),
                                           Qt::AlignVCenter | Qt::AlignLeft, DrawFont::Small});
            }
        });
    }
}

void TimelineWidget::Impl::buildRuler(TimelineDrawList& list, const QFontMetrics& smallFm) const
{
    const int width = w->width();
    const int rightX = right();
    const double npp = nsPerPixel();
    list.rulerFills.push_back({QRectF(0, 0, width, kRulerHeight), palette::rulerBackground()});
    list.rulerLines.push_back({QLineF(0, kRulerHeight - 0.5, width, kRulerHeight - 0.5), palette::separatorLine()});
    TimeNs tickStep = 1;
    const auto ticks = rulerTicks(t0, t1, npp, 12.0, &tickStep);
    for (const Tick& t : ticks) {
        const double x = xFor(t.t);
        list.rulerLines.push_back({QLineF(x, kRulerHeight - (t.major ? 9 : 4), x, kRulerHeight - 1), palette::rulerTick()});
        if (!t.major)
            continue;
        // A label that would run past the right edge is left out rather than cut.
        const QString label = formatTickLabel(t.t, tickStep);
        const int lw = smallFm.horizontalAdvance(label);
        if (x + 3 + lw > rightX)
            continue;
        list.rulerLabels.push_back({QRectF(x + 3, 0, lw + 2, 14), label, palette::rulerText(), Qt::AlignVCenter | Qt::AlignLeft,
                                    DrawFont::Small});
    }
    // Step marks and numbers of the first run (the runs are aligned on steps, so they agree).
    if (!models.empty()) {
        const TimelineRunModel& m = *models.front();
        const auto& steps = m.steps();
        if (!steps.empty()) {
            // Every k-th step is labelled, k the smallest of 1, 2, 5, 10, … for which the widest
            // label fits: labels are regular, never a random subset.
            double meanStepPx = 0;
            int n = 0;
            forEachVisibleStep(steps, absolute(0, t0), absolute(0, t1), npp, 1.0, [&](const StepSpan& st) {
                meanStepPx += double(st.end - st.start) / npp;
                ++n;
            });
            meanStepPx = n > 0 ? meanStepPx / n : 0;
            const bool longLabels = meanStepPx > smallFm.horizontalAdvance(QStringLiteral("step %1").arg(steps.back().step)) + 10;
            const int widest = smallFm.horizontalAdvance(longLabels ? QStringLiteral("step %1").arg(steps.back().step)
                                                                    : QString::number(steps.back().step));
            const int stride = meanStepPx > 0 ? niceStride((widest + 8) / meanStepPx) : 1;
            // A step that starts left of the view has its label pulled to the view's edge; when
            // the next label would run into it, the pulled one gives way (the next one is where
            // its step is).
            bool lastPulled = false;
            double lastRight = -1e9;
            forEachVisibleStep(steps, absolute(0, t0), absolute(0, t1), npp, kMinStepPx, [&](const StepSpan& st) {
                const double x0 = xAbs(0, st.start);
                if (double(st.end - st.start) / npp >= kMinStepPx)
                    list.rulerLines.push_back({QLineF(x0, 15, x0, kRulerHeight - 1), palette::stepLine()});
                if (st.step % stride != 0)
                    return;
                const QString label = longLabels ? QStringLiteral("step %1").arg(st.step) : QString::number(st.step);
                const int lw = smallFm.horizontalAdvance(label);
                const double lx = std::max<double>(x0, kGutterWidth) + 3;
                if (lx + lw > rightX)
                    return;
                if (lx < lastRight + 4) {
                    if (!lastPulled)
                        return;
                    list.rulerLabels.pop_back();
                }
                list.rulerLabels.push_back({QRectF(lx, 15, lw + 2, kRulerHeight - 16), label, palette::stepLabelText(),
                                            Qt::AlignVCenter | Qt::AlignLeft, DrawFont::Small});
                lastRight = lx + lw;
                lastPulled = x0 < kGutterWidth;
            });
        }
    }
    list.cornerLabels.push_back({QRectF(8, 0, kGutterWidth - 12, kRulerHeight),
                                 QStringLiteral("%1 / px").arg(formatDuration(npp, 2)), palette::laneText(), Qt::AlignVCenter | Qt::AlignLeft,
                                 DrawFont::Small});
}

} // namespace lockstep::ui
