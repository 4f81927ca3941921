// Hit testing, mouse, wheel, keys and tooltips of the timeline (timeline_widget_impl.h).
#include "timeline_widget_impl.h"

#include "format.h"
#include "timeline_palette.h"
#include "host_groups.h"

#include "lockstep/core/step_stats.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace lockstep::ui {

using namespace timeline_detail;

const DrawSpan* TimelineWidget::Impl::hit(QPoint p) const
{
    if (p.x() < kGutterWidth || p.x() >= right() || p.y() < kRulerHeight)
        return nullptr;
    const int row = rowAt(p.y());
    if (row < 0 || rows[size_t(row)].kind != TimelineRowKind::Lane)
        return nullptr;
    const int inRow = p.y() - rowY(rows[size_t(row)]);
    if (inRow >= rows[size_t(row)].subRows * kLaneHeight)
        return nullptr; // the strip under the comm lane is not a span
    const uint32_t sub = uint32_t(inRow / kLaneHeight);
    const TimelineDrawList& list = build();
    const DrawSpan* best = nullptr;
    double bestDist = 3.0; // pointing within a few pixels of a thin span still hits it
    const double x = p.x() + 0.5;
    for (const DrawSpan& d : list.spans) {
        if (d.row != row || d.subRow != sub)
            continue;
        const double l = d.rect.left(), r = std::max(d.rect.right(), l + 1);
        const double dist = x < l ? l - x : x > r ? x - r : 0.0;
        if (dist < bestDist || (dist == 0 && best && bestDist == 0 && d.rect.width() < best->rect.width())) {
            best = &d;
            bestDist = dist;
        }
    }
    return best;
}

void TimelineWidget::wheelEvent(QWheelEvent* event)
{
    auto& d = *m_impl;
    const QPoint delta = event->angleDelta();
    if (event->modifiers() & Qt::ShiftModifier) {
        d.scrollBar->setValue(d.scroll() - delta.y() / 2);
    } else if (delta.y() != 0) {
        const double anchor = (event->position().x() - kGutterWidth) / d.areaWidth();
        zoomBy(std::pow(1.0015, delta.y()), std::clamp(anchor, 0.0, 1.0)); // 120 (one notch) ≈ 1.2×
    } else if (delta.x() != 0) {
        panBy(-delta.x() / 1200.0);
    }
    event->accept();
}

void TimelineWidget::mousePressEvent(QMouseEvent* event)
{
    auto& d = *m_impl;
    if (event->button() != Qt::LeftButton) {
        QWidget::mousePressEvent(event);
        return;
    }
    d.pressed = true;
    d.drag = Impl::Drag::None;
    d.shiftPress = event->modifiers() & Qt::ShiftModifier;
    d.pressPos = d.lastPos = event->position().toPoint();
    setFocus(Qt::MouseFocusReason);
    event->accept();
}

void TimelineWidget::leaveEvent(QEvent* event)
{
    m_impl->mousePos = QPoint(-1, -1); // W/S zoom about the centre again
    QWidget::leaveEvent(event);
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* event)
{
    auto& d = *m_impl;
    const QPoint pos = event->position().toPoint();
    d.mousePos = pos;
    if (!d.pressed || !(event->buttons() & Qt::LeftButton))
        return;
    if (d.drag == Impl::Drag::None && (pos - d.pressPos).manhattanLength() >= kDragThreshold)
        d.drag = d.shiftPress && d.pressPos.x() >= kGutterWidth ? Impl::Drag::Measure : Impl::Drag::Pan;
    if (d.drag == Impl::Drag::Measure) {
        setMeasureRange(std::pair{timeForX(d.pressPos.x()), timeForX(std::clamp(pos.x(), kGutterWidth, d.right()))});
    } else if (d.drag == Impl::Drag::Pan) {
        const int dx = pos.x() - d.lastPos.x();
        const int dy = pos.y() - d.lastPos.y();
        if (dx != 0) {
            const TimeNs shift = TimeNs(std::llround(-dx * d.nsPerPixel()));
            setViewRange(d.t0 + shift, d.t1 + shift);
        }
        if (dy != 0)
            d.scrollBar->setValue(d.scroll() - dy);
        d.lastPos = pos;
    }
    event->accept();
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent* event)
{
    auto& d = *m_impl;
    if (event->button() != Qt::LeftButton || !d.pressed) {
        QWidget::mouseReleaseEvent(event);
        return;
    }
    d.pressed = false;
    const QPoint pos = event->position().toPoint();
    if (d.drag == Impl::Drag::Measure) // where the button comes up ends the range
        setMeasureRange(std::pair{timeForX(d.pressPos.x()), timeForX(std::clamp(pos.x(), kGutterWidth, d.right()))});
    if (d.drag != Impl::Drag::None) {
        d.drag = Impl::Drag::None;
        return;
    }
    if (pos.y() < kRulerHeight)
        return;
    if (d.shiftPress) {
        setMeasureRange(std::nullopt); // Shift+click without a drag clears the measurement
        return;
    }
    // A click on a host header (anywhere: it carries nothing in time) collapses or expands the host.
    if (const int row = d.rowAt(pos.y()); row >= 0 && d.rows[size_t(row)].kind == TimelineRowKind::HostHeader) {
        const TimelineRow r = d.rows[size_t(row)];
        setHostCollapsed(r.run, r.host, !r.collapsed);
        return;
    }
    // A click on a rank header's gutter collapses or expands the rank.
    if (pos.x() < kGutterWidth) {
        const int row = d.rowAt(pos.y());
        if (row >= 0 && d.rows[size_t(row)].kind == TimelineRowKind::RankHeader) {
            const TimelineRow& r = d.rows[size_t(row)];
            setCollapsed(r.run, r.rank, !r.collapsed);
        } else if (row >= 0 && d.rows[size_t(row)].kind == TimelineRowKind::QuietStreams) {
            const TimelineRow r = d.rows[size_t(row)];
            setStreamsFolded(r.run, r.rank, !r.collapsed);
        }
        return;
    }
    const DrawSpan* it = d.hit(pos);
    if (!it) {
        select({});
    } else if (it->count > 1) {
        // A folded item: zoom onto it. A fold that already fills much of the view (zoomed
        // out, whole steps fold into one item) zooms 4x at the click instead, so every click
        // makes progress.
        const TimeNs len = std::max<TimeNs>(it->end - it->start, kMinViewNs);
        const TimeNs start = d.aligned(it->run, it->start);
        if (len * 3 > d.t1 - d.t0)
            zoomBy(4.0, (pos.x() - kGutterWidth) / d.areaWidth());
        else
            setViewRange(start - len / 10, start + len + len / 10);
    } else {
        select(SpanRef{it->run, qint64(it->span)});
    }
    event->accept();
}

void TimelineWidget::mouseDoubleClickEvent(QMouseEvent* event)
{
    auto& d = *m_impl;
    const QPoint pos = event->position().toPoint();
    if (pos.y() < kRulerHeight && pos.x() >= kGutterWidth && !d.models.empty()) {
        // The step under the pointer in the ruler (steps of the first run, aligned).
        const TimelineRunModel& m = *d.models.front();
        const TimeNs t = d.absolute(0, timeForX(pos.x()));
        const auto& steps = m.steps();
        auto it = std::upper_bound(steps.begin(), steps.end(), t, [](TimeNs v, const StepSpan& s) { return v < s.start; });
        if (it != steps.begin()) {
            --it;
            if (t <= it->end) {
                zoomToStep(it->step);
                event->accept();
                return;
            }
        }
    }
    if (const DrawSpan* it = d.hit(pos); it && it->count == 1) {
        const TimeNs len = std::max<TimeNs>(it->end - it->start, kMinViewNs);
        setViewRange(d.aligned(it->run, it->start) - len / 4, d.aligned(it->run, it->end) + len / 4);
    }
    event->accept();
}

// The arrow keys: Left / Right the previous / next span of the selected span's lane, Up / Down
// the span nearest in time on the lane above / below.
void TimelineWidget::Impl::moveSelection(int key)
{
    if (key == Qt::Key_Left || key == Qt::Key_Right) {
        // The previous / next span of the selected span's lane (start order).
        SpanRef next;
        if (selection.valid()) {
            const core::Run& r = models[size_t(selection.run)]->run();
            const auto [a, b] = r.laneSpanRange(r.spans[size_t(selection.span)].lane);
            const qint64 n = selection.span + (key == Qt::Key_Left ? -1 : 1);
            if (n >= qint64(a) && n < qint64(b))
                next = SpanRef{selection.run, n};
        } else {
            for (const DrawSpan& s : build().spans)
                if (s.count == 1) {
                    next = SpanRef{s.run, qint64(s.span)};
                    break;
                }
        }
        if (next.valid()) {
            w->select(next);
            ensureVisible(next);
        }
        return;
    }
    // The span nearest in time on the lane above / below (headers and collapsed ranks are
    // skipped).
    if (!selection.valid())
        return;
    const int row = placeOf(selection).first;
    if (row < 0)
        return;
    const core::Span& cur = models[size_t(selection.run)]->run().spans[size_t(selection.span)];
    const TimeNs t = aligned(selection.run, cur.start);
    for (int k = row + (key == Qt::Key_Up ? -1 : 1); k >= 0 && k < int(rows.size()); k += key == Qt::Key_Up ? -1 : 1) {
        const TimelineRow& target = rows[size_t(k)];
        if (target.kind != TimelineRowKind::Lane)
            continue;
        const core::Run& r = models[size_t(target.run)]->run();
        const auto [a, b] = r.laneSpanRange(core::LaneId{uint32_t(target.lane)});
        if (a == b)
            continue;
        const TimeNs want = absolute(target.run, t);
        auto it = std::lower_bound(r.spans.begin() + ptrdiff_t(a), r.spans.begin() + ptrdiff_t(b), want,
                                   [](const core::Span& s, TimeNs v) { return s.start < v; });
        if (it == r.spans.begin() + ptrdiff_t(b) || (it != r.spans.begin() + ptrdiff_t(a) && want - (it - 1)->start < it->start - want))
            --it;
        const SpanRef next{target.run, qint64(it - r.spans.begin())};
        w->select(next);
        ensureVisible(next);
        return;
    }
}

void TimelineWidget::keyPressEvent(QKeyEvent* event)
{
    auto& d = *m_impl;
    if (event->modifiers() & (Qt::ControlModifier | Qt::AltModifier | Qt::MetaModifier)) {
        // Ctrl+digit and friends belong to the window's shortcuts, not to the timeline.
        QWidget::keyPressEvent(event);
        return;
    }
    double anchor = 0.5;
    if (d.mousePos.x() >= kGutterWidth && rect().contains(d.mousePos))
        anchor = (d.mousePos.x() - kGutterWidth) / d.areaWidth();
    const int key = event->key();
    if (key >= Qt::Key_0 && key <= Qt::Key_9) {
        // Digits typed within a second of each other make one number: 1 then 2 is step 12. The
        // time is the key event's own (when it was typed, not when it is handled); a platform
        // that gives none (0) gets the time it is handled.
        if (!d.sinceCreated.isValid())
            d.sinceCreated.start();
        const qint64 now = event->timestamp() != 0 ? qint64(event->timestamp()) : d.sinceCreated.elapsed();
        if (d.lastDigitMs < 0 || now < d.lastDigitMs || now - d.lastDigitMs > kDigitWindowMs || d.digits.size() >= 9)
            d.digits.clear();
        d.digits += QChar(u'0' + (key - Qt::Key_0));
        d.lastDigitMs = now;
        const int step = d.digits.toInt();
        zoomToStep(step);
        emit stepRequested(step);
        event->accept();
        return;
    }
    switch (key) {
    case Qt::Key_W: zoomBy(kKeyZoom, anchor); break;
    case Qt::Key_S: zoomBy(1.0 / kKeyZoom, anchor); break;
    case Qt::Key_A: panBy(-kKeyPan); break;
    case Qt::Key_D: panBy(kKeyPan); break;
    case Qt::Key_F: fitAll(); break;
    case Qt::Key_C: setAllCollapsed(true); break;
    case Qt::Key_E: setAllCollapsed(false); break;
    case Qt::Key_O: toggleAllStreamsFolded(); break;
    case Qt::Key_H: toggleAllHostsCollapsed(); break;
    case Qt::Key_Escape:
        select({});
        setMeasureRange(std::nullopt);
        break;
    case Qt::Key_Left:
    case Qt::Key_Right:
    case Qt::Key_Up:
    case Qt::Key_Down:
        d.moveSelection(key);
        break;
    default:
        QWidget::keyPressEvent(event);
        return;
    }
    event->accept();
}

bool TimelineWidget::event(QEvent* event)
{
    if (event->type() != QEvent::ToolTip)
        return QWidget::event(event);
    auto& d = *m_impl;
    auto* help = static_cast<QHelpEvent*>(event);
    const QPoint pos = help->pos();
    QString text;
    const int row = d.rowAt(pos.y());
    if (pos.y() >= kRulerHeight && row >= 0) {
        const TimelineRow& r = d.rows[size_t(row)];
        const TimelineRunModel& m = *d.models[size_t(r.run)];
        const core::Run& run = m.run();
        const int inRow = pos.y() - d.rowY(r);
        if (r.kind == TimelineRowKind::HostHeader && size_t(r.host) < d.hosts[size_t(r.run)].size())
            text = tr("%1<br>%2 ranks on this host. Click to %3 them; H: every host's")
                       .arg(hostTitle(d.hosts[size_t(r.run)][size_t(r.host)]).toHtmlEscaped())
                       .arg(d.hosts[size_t(r.run)][size_t(r.host)].ranks.size())
                       .arg(r.collapsed ? tr("show") : tr("hide"));
        if (pos.x() < kGutterWidth) {
            if (r.kind == TimelineRowKind::RankHeader)
                text = r.collapsed ? tr("rank %1: click to show its lanes").arg(r.rank) : tr("rank %1: click to collapse").arg(r.rank);
            else if (r.kind == TimelineRowKind::QuietStreams) {
                const auto* rl = m.rank(r.rank);
                QStringList names;
                for (core::LaneId id : rl ? rl->quietLanes : std::vector<core::LaneId>{})
                    names << displayText(run.lanes[id.v].name).toHtmlEscaped();
                if (names.size() > 12)
                    names = names.mid(0, 12) << tr("… %1 more").arg(names.size() - 12);
                text = tr("%1 GPU streams, each busy less than %2 % of this rank's busiest stream, folded into one row "
                          "(the union of their spans, busy %3 in all).<br>%4<br>Click to %5 them; O: every rank's")
                           .arg(rl ? rl->quietLanes.size() : 0)
                           .arg(TimelineRunModel::kQuietStreamShare * 100.0)
                           .arg(rl && rl->quietBusyNs >= 0 ? formatDuration(double(rl->quietBusyNs)) : tr("not known until the spans are loaded"))
                           .arg(names.join(QStringLiteral(", ")))
                           .arg(r.collapsed ? tr("show") : tr("fold"));
            } else if (r.kind == TimelineRowKind::Lane)
                text = displayText(run.lanes[size_t(r.lane)].name).toHtmlEscaped()
                     + (r.subRows > 1 ? tr("<br>%1 rows: up to %1 spans of this lane run at once").arg(r.subRows) : QString());
        } else if (const DrawSpan* it = d.hit(pos)) {
            if (it->count > 1 && !m.detailed()) {
                text = tr("%1 spans, longest %2, drawn from the run's overview<br>%3")
                           .arg(formatCount(qlonglong(it->count)))
                           .arg(formatDuration(double(it->maxDuration)))
                           .arg(tr("their detail is drawn once the run's spans are loaded"));
            } else if (it->count > 1) {
                text = tr("%1 spans too small to show, longest %2<br>click to zoom in")
                           .arg(formatCount(qlonglong(it->count)))
                           .arg(formatDuration(double(it->maxDuration)));
            } else {
                const core::Span& s = run.spans[it->span];
                QStringList lines;
                lines << QStringLiteral("<b>%1</b>").arg(displayText(run.strings.text(s.name)).toHtmlEscaped());
                lines << tr("kind: %1").arg(QString::fromUtf8(core::spanKindName(s.kind)));
                lines << tr("duration: %1").arg(formatDuration(double(s.duration())));
                if (s.step != core::kNoStep)
                    lines << tr("step: %1").arg(s.step);
                if (s.bucket != core::kNoBucket)
                    lines << tr("bucket: %1").arg(s.bucket);
                if (s.bytes > 0) {
                    lines << tr("bytes: %1").arg(formatBytes(double(s.bytes)));
                    // Core's (a bucket's collective: the collective's; one rank: none).
                    const core::SpanBandwidth bw = core::spanBandwidth(run, m.analysis().buckets, s);
                    if (bw.applicable && std::isfinite(bw.algbwGBps))
                        lines << tr("bandwidth: %1").arg(formatBandwidth(bw.algbwGBps));
                }
                text = lines.join(QStringLiteral("<br>"));
            }
        } else if (r.kind == TimelineRowKind::Lane && inRow >= r.subRows * kLaneHeight) {
            const int32_t step = core::stepAt(run, r.rank, d.absolute(r.run, timeForX(pos.x())));
            if (const core::StepBreakdown* b = m.stepBreakdown(r.rank, step))
                text = tr("rank %1 step %2: communication %3, overlapped %4, exposed %5")
                           .arg(r.rank)
                           .arg(step)
                           .arg(formatDuration(double(b->communication)), formatDuration(double(b->overlapped)),
                                formatDuration(double(b->exposed)));
        } else if (r.kind == TimelineRowKind::QuietStreams) {
            text = tr("%1 nearly idle GPU streams folded: the union of their spans. Click the row's name (or press O) to show them")
                       .arg(m.rank(r.rank) ? m.rank(r.rank)->quietLanes.size() : 0);
        } else if (r.kind == TimelineRowKind::RankHeader) {
            const int32_t step = core::stepAt(run, r.rank, d.absolute(r.run, timeForX(pos.x())));
            const auto& strag = m.stepStragglers();
            auto sIt = std::lower_bound(strag.begin(), strag.end(), step,
                                        [](const core::StepStraggler& s, int32_t v) { return s.step < v; });
            if (sIt != strag.end() && sIt->step == step && sIt->rank == r.rank) {
                const auto& rs = m.runStragglers();
                QStringList named;
                for (int32_t k : rs)
                    named << tr("rank %1").arg(k);
                text = tr("rank %1 arrived last in step %2: the other ranks waited %3 for it.\n"
                          "Every step has a last rank; the run's straggler verdict (%4) asks for more evidence.")
                           .arg(r.rank)
                           .arg(step)
                           .arg(formatDuration(double(sIt->waitCaused)))
                           .arg(named.isEmpty() ? tr("none") : named.join(QStringLiteral(", ")));
            }
        }
    }
    if (text.isEmpty())
        QToolTip::hideText();
    else
        QToolTip::showText(help->globalPos(), text, this);
    return true;
}

} // namespace lockstep::ui
