// The Gantt timeline widget (see timeline_widget.h).
//
// A frame has two phases (Tracy's habit). Phase one builds flat draw lists (timeline_draw.h)
// for the visible window: spans from each lane's level of detail (core::LaneLod::query: two
// binary searches per sub-row plus the items on screen, spans narrower than kMinPixels folded),
// step lines, gradient-ready ticks, overlap strips and straggler marks from binary searches over
// per-run structures built once off the GUI thread (TimelineRunModel), with a pixel-skipping walk
// so dense marks cost at most one per pixel; labels are elided while building. The list is cached
// until the view changes (zoom, pan, scroll, size, rows). What changes without the view changing
// (selection and its linked bucket, search matches, the measured range, the replay cursor) is a
// small overlay rebuilt for every paint. Phase two paints both lists. Hit testing (clicks,
// tooltips, arrow keys) reads the cached list, so what the user points at is exactly what was
// drawn. No loop here runs over all spans of a run, except a search, which runs once per query.
#include "timeline_widget.h"

#include "format.h"
#include "time_axis.h"
#include "timeline_model.h"
#include "timeline_palette.h"

#include "lockstep/core/step_stats.h"

#include <QElapsedTimer>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QLocale>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QScrollBar>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace lockstep::ui {

using core::TimeNs;

namespace {
constexpr int kRunHeaderHeight = 22;
constexpr int kRankHeaderHeight = 18;
constexpr int kLaneHeight = TimelineWidget::kLaneHeight;
constexpr int kGutterWidth = TimelineWidget::kGutterWidth;
constexpr int kRulerHeight = TimelineWidget::kRulerHeight;
constexpr int kStripHeight = 6;   // overlapped/exposed strip under the comm lane
constexpr int kRowGap = 2;        // between a rank's block and the next header
constexpr double kMinPixels = 3.0; // narrower spans fold (Tracy folds below ~3 px)
constexpr TimeNs kMinViewNs = 200; // zooming further shows nothing new at ns resolution
constexpr double kKeyZoom = 1.25;  // W/S per press
constexpr double kKeyPan = 0.15;   // A/D per press, fraction of the view
constexpr int kDragThreshold = 4;  // pixels before a press becomes a drag, not a click
constexpr int kMinLabelPx = 34;    // spans narrower than this carry no text
constexpr double kMinStepPx = 6.0; // narrower steps get no boundary lines or ruler marks
constexpr int kDigitWindowMs = 1000; // digits typed within this time make one step number
constexpr int kFlowHead = 6;       // arrow head length, pixels
// Below this many pixels per step the overlap pieces of a step (a few per bucket) are sub-pixel;
// the strip then colours each whole step by its exposed share instead.
constexpr double kStripDetailPx = 30.0;

// lower_bound for a value known to be near `first`: exponential probing, then a binary search
// in the bracket. Walking marks left to right jumps a few pixels at a time, so this costs
// log(distance) probes in cache instead of log(n) cache misses over a multi-million array.
template <class It, class T, class Less>
It gallopLowerBound(It first, It last, const T& value, Less less)
{
    It lo = first;
    std::ptrdiff_t step = 1;
    while (last - lo > step && less(*(lo + step), value)) {
        lo += step;
        step *= 2;
    }
    return std::lower_bound(lo, last - lo > step ? lo + step : last, value, less);
}

// Calls f(step) for the steps overlapping [a0, a1] (absolute), at most one per `minPixels`: a
// step narrower than that hides the ones under it, found by a binary search instead of a walk,
// so a zoomed-out run of 35 000 steps costs a few thousand calls, not 35 000.
template <class F>
void forEachVisibleStep(const std::vector<StepSpan>& steps, TimeNs a0, TimeNs a1, double nsPerPixel, double minPixels, F&& f)
{
    auto it = std::lower_bound(steps.begin(), steps.end(), a0, [](const StepSpan& s, TimeNs t) { return s.end < t; });
    const TimeNs skip = std::max<TimeNs>(1, TimeNs(nsPerPixel * minPixels));
    while (it != steps.end() && it->start <= a1) {
        f(*it);
        it = gallopLowerBound(it + 1, steps.end(), it->start + skip,
                              [](const StepSpan& s, TimeNs t) { return s.start < t; });
    }
}

// The smallest of 1, 2, 5, 10, 20, 50, ... that is at least `n`: label every k-th step so that
// labels are regular (every 5th step, not whichever happened to fit).
int niceStride(double n)
{
    if (!(n > 1))
        return 1;
    for (int p = 1;; p *= 10) {
        for (int m : {1, 2, 5})
            if (m * p >= n)
                return m * p;
        if (p > 100'000'000)
            return p * 10;
    }
}

QFont smallFontOf(const QFont& base)
{
    QFont f = base;
    f.setPointSizeF(std::max(6.5, base.pointSizeF() * 0.85));
    return f;
}
} // namespace

struct TimelineWidget::Impl {
    TimelineWidget* w = nullptr;
    QScrollBar* scrollBar = nullptr;

    std::vector<TimelineRun> runs;
    std::vector<std::shared_ptr<const TimelineRunModel>> models;
    std::vector<TimeNs> origins; // per run: absolute time of aligned 0
    int alignOverride = -1;
    std::vector<TimelineRow> rows;
    // Per run, per lane: index of its row, -1 when hidden (collapsed rank).
    std::vector<std::vector<int>> laneRow;
    std::set<std::pair<int, int>> collapsed; // (run, rank)
    std::set<std::pair<int, int>> streamsShown; // (run, rank) whose quiet streams are expanded
    RankOrder order = RankOrder::ByRank;
    int contentHeight = kRulerHeight;
    quint64 version = 1;

    TimeNs t0 = 0, t1 = 1'000'000;
    SpanRef selection;
    LinkedBucket linked;
    std::optional<TimeNs> cursor;
    std::optional<std::pair<TimeNs, TimeNs>> measure;
    QString searchText;
    bool searchExact = false; // whole names only (a kernel's row), not a case-insensitive part
    std::vector<std::vector<char>> searchNames; // per run, per StringId: matches
    std::vector<SpanRef> searchMatches;

    struct Frame {
        TimeNs t0 = 0, t1 = 0;
        int width = -1, height = -1, scroll = -1;
        quint64 version = 0;
        bool valid = false;
        TimelineDrawList list;
    };
    mutable Frame frame;
    qint64 lastItems = 0;

    // Mouse and keys.
    enum class Drag { None, Pan, Measure };
    QPoint pressPos, lastPos;
    bool pressed = false;
    Drag drag = Drag::None;
    bool shiftPress = false;
    QPoint mousePos{-1, -1};
    QString digits;
    qint64 lastDigitMs = -1; // when the last digit was typed (ms; -1: none yet)
    QElapsedTimer sinceCreated;

    // ---- geometry ----
    int scroll() const { return scrollBar->value(); }
    int right() const { return w->width() - (scrollBar->isHidden() ? 0 : scrollBar->width()); }
    double areaWidth() const { return std::max(1, right() - kGutterWidth); }
    double nsPerPixel() const { return double(t1 - t0) / areaWidth(); }
    double xFor(TimeNs aligned) const { return kGutterWidth + double(aligned - t0) / nsPerPixel(); }
    TimeNs aligned(int run, TimeNs absolute) const { return absolute - origins[size_t(run)]; }
    TimeNs absolute(int run, TimeNs alignedT) const { return alignedT + origins[size_t(run)]; }
    double xAbs(int run, TimeNs absoluteT) const { return xFor(aligned(run, absoluteT)); }
    int rowY(const TimelineRow& r) const { return r.top - scroll(); }

    void computeOrigins();
    void relayout();
    void updateScrollBar();
    int rowAt(int y) const;
    std::pair<size_t, size_t> visibleRows() const;
    const TimelineDrawList& build() const;
    void buildRows(TimelineDrawList& list, const QFontMetrics& baseFm, const QFontMetrics& smallFm, const QFontMetrics& boldFm) const;
    void buildTimeArea(TimelineDrawList& list, const QFontMetrics& smallFm) const;
    void buildRuler(TimelineDrawList& list, const QFontMetrics& smallFm) const;
    TimelineOverlay buildOverlay() const;
    const DrawSpan* hit(QPoint p) const;
    // Where a span is drawn: its row index and sub-row, or row -1 when hidden.
    std::pair<int, uint32_t> placeOf(SpanRef ref) const;
    QRectF spanRect(SpanRef ref) const;
    void computeLinked();
    void updateSearch();
    std::optional<SpanRef> findComm(int run, int32_t rank, int32_t step, int32_t bucket) const;
    void ensureVisible(SpanRef ref);
};

// ---------------------------------------------------------------------------------------------
// Layout

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
        for (const auto* rl : ranks) {
            const bool isCollapsed = collapsed.count({int(ri), rl->rank}) > 0;
            TimelineRow header{TimelineRowKind::RankHeader, int(ri), rl->rank, -1, y, kRankHeaderHeight};
            header.collapsed = isCollapsed;
            rows.push_back(header);
            y += kRankHeaderHeight;
            if (!isCollapsed) {
                const bool shown = streamsShown.count({int(ri), rl->rank}) > 0;
                for (core::LaneId lane : rl->lanes) {
                    if (!rl->quietLanes.empty() && lane == rl->quietLanes.front()) {
                        // The quiet streams' row, where the first of them would be.
                        TimelineRow fold{TimelineRowKind::QuietStreams, int(ri), rl->rank, -1, y, kLaneHeight};
                        fold.collapsed = !shown;
                        rows.push_back(fold);
                        y += kLaneHeight;
                    }
                    if (!shown && m.isQuietLane(lane))
                        continue;
                    const int sub = int(m.lod().lane(lane).rowCount());
                    const int h = sub * kLaneHeight + (lane == rl->stripLane ? kStripHeight : 0);
                    TimelineRow row{TimelineRowKind::Lane, int(ri), rl->rank, int(lane.v), y, h};
                    row.subRows = sub;
                    laneRow[ri][lane.v] = int(rows.size());
                    rows.push_back(row);
                    y += h;
                }
            }
            y += kRowGap;
        }
    }
    contentHeight = y;
    ++version;
    frame.valid = false;
    updateScrollBar();
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

// ---------------------------------------------------------------------------------------------
// Phase one: draw lists

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

void TimelineWidget::Impl::buildTimeArea(TimelineDrawList& list, const QFontMetrics& smallFm) const
{
    const double npp = nsPerPixel();
    const int rightX = right();
    const auto [first, last] = visibleRows();

    // Step boundaries per rank block (each rank's own step starts).
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

    // Spans, sub-row by sub-row, with their labels.
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
                text = QStringLiteral("%1 spans").arg(QLocale(QLocale::English).toString(qlonglong(it.count)));
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

    // The quiet streams' row: the union of their spans, folded below kMinPixels like a lane.
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

    // Gradient-ready ticks (instants) at the top of their lane: at most one per 2 pixels.
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

    // Overlap strips: where communication hides behind compute, and where it is exposed. A
    // collapsed rank shows the zoomed-out form (one colour per step) in its header.
    std::vector<core::DrawItem> strip;
    for (size_t ri = first; ri < last; ++ri) {
        const TimelineRow& row = rows[ri];
        const TimelineRunModel& m = *models[size_t(row.run)];
        const auto* rl = m.rank(row.rank);
        if (!rl || rl->stepOverlap.empty())
            continue;
        int y = 0, hh = kStripHeight - 1;
        bool detail = double(rl->meanStepNs) / npp >= kStripDetailPx;
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

    // Late-rank marks in the rank header: the rank that held the others back in each step.
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

// ---------------------------------------------------------------------------------------------
// Overlay: selection, linked bucket, search matches, measured range, replay cursor

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

TimelineOverlay TimelineWidget::Impl::buildOverlay() const
{
    TimelineOverlay o;
    const TimelineDrawList& list = build();
    const int rightX = right();
    const int h = w->height();
    const QFontMetrics smallFm(smallFontOf(w->font()));
    auto clipX = [&](QRectF r) {
        const double a = std::max<double>(r.left(), kGutterWidth - 2), b = std::min<double>(r.right(), rightX + 2);
        return QRectF(a, r.top(), std::max(0.0, b - a), r.height());
    };

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

    // The selected bucket on every rank: outlines, the wait of the early ranks as a bracket up
    // to the late rank's launch, arrows from the late rank's launch to the others, and from each
    // rank's last gradient-ready instant of the bucket to its launch.
    if (linked.valid()) {
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
            o.outlines.push_back({clipX(rect), palette::linkedOutline(), 1.5});
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

    // The selection.
    if (selection.valid()) {
        const QRectF rect = spanRect(selection);
        if (!rect.isNull())
            o.outlines.push_back({clipX(rect.adjusted(-1, 0, 1, 0)), palette::selectionOutline(), 2});
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

// ---------------------------------------------------------------------------------------------
// Linked bucket and search

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
    if (collapsed.count({ref.run, rank}) || quietHidden) {
        collapsed.erase({ref.run, rank});
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

// ---------------------------------------------------------------------------------------------

TimelineWidget::TimelineWidget(QWidget* parent)
    : QWidget(parent)
    , m_impl(std::make_unique<Impl>())
{
    auto& d = *m_impl;
    d.w = this;
    d.scrollBar = new QScrollBar(Qt::Vertical, this);
    d.scrollBar->hide();
    connect(d.scrollBar, &QScrollBar::valueChanged, this, [this] { update(); });
    setFocusPolicy(Qt::StrongFocus);
    setMouseTracking(true);
    setAttribute(Qt::WA_OpaquePaintEvent);
    setMinimumSize(400, 120);
}

TimelineWidget::~TimelineWidget() = default;

void TimelineWidget::setRuns(std::vector<TimelineRun> runs)
{
    auto& d = *m_impl;
    d.runs.clear();
    d.models.clear();
    for (TimelineRun& r : runs) {
        if (!r.run && !r.model)
            continue; // a missing run is skipped, not a crash
        if (!r.model)
            r.model = TimelineRunModel::build(r.run);
        r.run = r.model->runPtr();
        d.models.push_back(r.model);
        d.runs.push_back(std::move(r));
    }
    d.selection = {};
    d.linked = {};
    d.measure.reset();
    d.collapsed.clear();
    d.streamsShown.clear(); // quiet streams start folded on every run switch
    d.computeOrigins();
    d.updateSearch();
    d.scrollBar->setValue(0);
    d.relayout();
    fitAll();
    updateGeometry();
    update();
    emit rowsChanged();
}

QSize TimelineWidget::sizeHint() const
{
    return QSize(900, std::clamp(m_impl->contentHeight + 8, 200, 700));
}

const std::vector<TimelineRun>& TimelineWidget::runs() const
{
    return m_impl->runs;
}

void TimelineWidget::updateRun(int index, TimelineRun run)
{
    auto& d = *m_impl;
    if (index < 0 || index >= int(d.runs.size()) || (!run.run && !run.model))
        return;
    if (!run.model)
        run.model = TimelineRunModel::build(run.run);
    run.run = run.model->runPtr();
    if (run.label.isEmpty())
        run.label = d.runs[size_t(index)].label;
    d.models[size_t(index)] = run.model;
    d.runs[size_t(index)] = std::move(run);
    if (d.selection.run == index && d.selection.span >= qint64(d.models[size_t(index)]->run().spans.size()))
        d.selection = {};
    d.computeOrigins();
    d.computeLinked();
    d.updateSearch();
    d.relayout();
    update();
    emit rowsChanged();
}

void TimelineWidget::setViewRange(TimeNs t0, TimeNs t1)
{
    auto& d = *m_impl;
    if (t1 < t0)
        std::swap(t0, t1);
    if (t1 - t0 < kMinViewNs) {
        const TimeNs mid = t0 + (t1 - t0) / 2;
        t0 = mid - kMinViewNs / 2;
        t1 = t0 + kMinViewNs;
    }
    if (t0 == d.t0 && t1 == d.t1)
        return;
    d.t0 = t0;
    d.t1 = t1;
    update();
    emit viewRangeChanged(t0, t1);
}

std::pair<TimeNs, TimeNs> TimelineWidget::viewRange() const
{
    return {m_impl->t0, m_impl->t1};
}

void TimelineWidget::fitAll()
{
    auto& d = *m_impl;
    if (d.models.empty()) {
        setViewRange(0, 1'000'000);
        return;
    }
    TimeNs lo = std::numeric_limits<TimeNs>::max(), hi = std::numeric_limits<TimeNs>::min();
    for (size_t i = 0; i < d.models.size(); ++i) {
        lo = std::min(lo, d.aligned(int(i), d.models[i]->alignedBegin() + d.models[i]->origin()));
        hi = std::max(hi, d.aligned(int(i), d.models[i]->alignedEnd() + d.models[i]->origin()));
    }
    const TimeNs margin = std::max<TimeNs>((hi - lo) / 100, 1);
    setViewRange(lo - margin, hi + margin);
}

void TimelineWidget::setAlignStep(int step)
{
    auto& d = *m_impl;
    const TimeNs before = d.origins.empty() ? 0 : d.origins.front();
    d.alignOverride = step;
    d.computeOrigins();
    const TimeNs shift = d.origins.empty() ? 0 : d.origins.front() - before;
    d.frame.valid = false;
    // Keep the first run where it was on screen; the others move to their aligned place.
    setViewRange(d.t0 - shift, d.t1 - shift);
    update();
}

int TimelineWidget::alignStepOverride() const
{
    return m_impl->alignOverride;
}

std::optional<std::pair<TimeNs, TimeNs>> TimelineWidget::stepRange(int step) const
{
    const auto& d = *m_impl;
    bool any = false;
    TimeNs lo = std::numeric_limits<TimeNs>::max(), hi = std::numeric_limits<TimeNs>::min();
    for (size_t i = 0; i < d.models.size(); ++i) {
        if (const StepSpan* s = d.models[i]->step(step)) {
            any = true;
            lo = std::min(lo, d.aligned(int(i), s->start));
            hi = std::max(hi, d.aligned(int(i), s->end));
        }
    }
    if (!any)
        return std::nullopt;
    return std::pair{lo, hi};
}

void TimelineWidget::zoomToStep(int step)
{
    if (auto r = stepRange(step)) {
        const TimeNs margin = std::max<TimeNs>((r->second - r->first) / 40, 1);
        setViewRange(r->first - margin, r->second + margin);
    }
}

void TimelineWidget::zoomBy(double factor, double anchorFraction)
{
    auto& d = *m_impl;
    if (!(factor > 0) || !std::isfinite(factor))
        return;
    anchorFraction = std::clamp(anchorFraction, 0.0, 1.0);
    const double len = double(d.t1 - d.t0);
    const double anchor = double(d.t0) + len * anchorFraction;
    // factor > 1 zooms in (the view shrinks by factor), keeping the anchor's time in place.
    double newLen = std::max<double>(kMinViewNs, len / factor);
    newLen = std::min(newLen, 1e18);
    const TimeNs n0 = TimeNs(std::llround(anchor - newLen * anchorFraction));
    setViewRange(n0, n0 + TimeNs(std::llround(newLen)));
}

void TimelineWidget::panBy(double fractionOfView)
{
    auto& d = *m_impl;
    if (!std::isfinite(fractionOfView))
        return;
    const double raw = std::clamp(double(d.t1 - d.t0) * fractionOfView, -1e17, 1e17);
    const TimeNs shift = TimeNs(std::llround(raw));
    setViewRange(d.t0 + shift, d.t1 + shift);
}

void TimelineWidget::select(SpanRef ref)
{
    auto& d = *m_impl;
    if (ref.valid() && (ref.run >= int(d.models.size()) || ref.span >= qint64(d.models[size_t(ref.run)]->run().spans.size())))
        ref = {};
    if (!ref.valid())
        ref = {};
    if (ref == d.selection)
        return;
    d.selection = ref;
    d.computeLinked();
    update();
    emit selectionChanged(ref);
}

SpanRef TimelineWidget::selection() const
{
    return m_impl->selection;
}

const LinkedBucket& TimelineWidget::linkedBucket() const
{
    return m_impl->linked;
}

bool TimelineWidget::selectBucket(int run, int32_t step, int32_t bucket, int32_t rank)
{
    auto& d = *m_impl;
    if (run < 0 || run >= int(d.models.size()))
        return false;
    std::optional<SpanRef> ref;
    if (rank >= 0) {
        ref = d.findComm(run, rank, step, bucket);
    } else {
        for (const auto& rl : d.models[size_t(run)]->ranks())
            if ((ref = d.findComm(run, rl->rank, step, bucket)))
                break;
    }
    if (!ref)
        return false;
    select(*ref);
    d.ensureVisible(*ref);
    return true;
}

void TimelineWidget::setReplayCursor(std::optional<TimeNs> t)
{
    if (m_impl->cursor == t)
        return;
    m_impl->cursor = t;
    update();
}

std::optional<TimeNs> TimelineWidget::replayCursor() const
{
    return m_impl->cursor;
}

void TimelineWidget::setMeasureRange(std::optional<std::pair<TimeNs, TimeNs>> range)
{
    auto& d = *m_impl;
    if (range && range->second < range->first)
        std::swap(range->first, range->second);
    if (range == d.measure)
        return;
    d.measure = range;
    update();
    emit measureRangeChanged();
}

std::optional<std::pair<TimeNs, TimeNs>> TimelineWidget::measureRange() const
{
    return m_impl->measure;
}

int TimelineWidget::setSearchText(const QString& text, bool exact)
{
    auto& d = *m_impl;
    d.searchText = text;
    d.searchExact = exact;
    d.updateSearch();
    update();
    return int(d.searchMatches.size());
}

const std::vector<SpanRef>& TimelineWidget::searchMatches() const
{
    return m_impl->searchMatches;
}

void TimelineWidget::showSearchMatch(int index)
{
    auto& d = *m_impl;
    if (index < 0 || index >= int(d.searchMatches.size()))
        return;
    select(d.searchMatches[size_t(index)]);
    d.ensureVisible(d.searchMatches[size_t(index)]);
}

void TimelineWidget::setCollapsed(int run, int rank, bool collapsed)
{
    auto& d = *m_impl;
    const bool was = d.collapsed.count({run, rank}) > 0;
    if (was == collapsed)
        return;
    if (collapsed)
        d.collapsed.insert({run, rank});
    else
        d.collapsed.erase({run, rank});
    d.relayout();
    update();
    emit rowsChanged();
}

bool TimelineWidget::isCollapsed(int run, int rank) const
{
    return m_impl->collapsed.count({run, rank}) > 0;
}

void TimelineWidget::setAllCollapsed(bool collapsed)
{
    auto& d = *m_impl;
    d.collapsed.clear();
    if (collapsed)
        for (size_t ri = 0; ri < d.models.size(); ++ri)
            for (const auto& rl : d.models[ri]->ranks())
                d.collapsed.insert({int(ri), rl->rank});
    d.scrollBar->setValue(0);
    d.relayout();
    update();
    emit rowsChanged();
}

void TimelineWidget::setStreamsFolded(int run, int rank, bool folded)
{
    auto& d = *m_impl;
    if (run < 0 || run >= int(d.models.size()))
        return;
    const auto* rl = d.models[size_t(run)]->rank(rank);
    if (!rl || rl->quietLanes.empty() || (d.streamsShown.count({run, rank}) == 0) == folded)
        return;
    if (folded)
        d.streamsShown.erase({run, rank});
    else
        d.streamsShown.insert({run, rank});
    d.relayout();
    update();
    emit rowsChanged();
}

bool TimelineWidget::streamsFolded(int run, int rank) const
{
    return m_impl->streamsShown.count({run, rank}) == 0;
}

void TimelineWidget::toggleAllStreamsFolded()
{
    auto& d = *m_impl;
    std::set<std::pair<int, int>> all;
    for (size_t ri = 0; ri < d.models.size(); ++ri)
        for (const auto& rl : d.models[ri]->ranks())
            if (!rl->quietLanes.empty())
                all.insert({int(ri), rl->rank});
    if (all.empty())
        return;
    d.streamsShown = d.streamsShown == all ? std::set<std::pair<int, int>>{} : all;
    d.relayout();
    update();
    emit rowsChanged();
}

void TimelineWidget::setRankOrder(RankOrder order)
{
    auto& d = *m_impl;
    if (d.order == order)
        return;
    d.order = order;
    d.scrollBar->setValue(0);
    d.relayout();
    update();
    emit rowsChanged();
}

void TimelineWidget::revealRank(int run, int rank)
{
    auto& d = *m_impl;
    setCollapsed(run, rank, false);
    for (const TimelineRow& r : d.rows) {
        if (r.kind == TimelineRowKind::RankHeader && r.run == run && r.rank == rank) {
            d.scrollBar->setValue(r.top - kRulerHeight);
            break;
        }
    }
    update();
}

int TimelineWidget::scrollOffset() const
{
    return m_impl->scroll();
}

void TimelineWidget::setScrollOffset(int y)
{
    m_impl->scrollBar->setValue(y);
}

QScrollBar* TimelineWidget::verticalScrollBar() const
{
    return m_impl->scrollBar;
}

const TimelineDrawList& TimelineWidget::drawList() const
{
    return m_impl->build();
}

TimelineOverlay TimelineWidget::overlay() const
{
    return m_impl->buildOverlay();
}

qint64 TimelineWidget::lastFrameItemCount() const
{
    return m_impl->lastItems;
}

int TimelineWidget::rowCount() const
{
    return int(m_impl->rows.size());
}

std::vector<TimelineRow> TimelineWidget::rows() const
{
    return m_impl->rows;
}

int TimelineWidget::rankRowCount() const
{
    return int(std::count_if(m_impl->rows.begin(), m_impl->rows.end(),
                             [](const TimelineRow& r) { return r.kind == TimelineRowKind::RankHeader; }));
}

double TimelineWidget::xForTime(TimeNs aligned) const
{
    return m_impl->xFor(aligned);
}

TimeNs TimelineWidget::timeForX(double x) const
{
    return m_impl->t0 + TimeNs(std::llround((x - kGutterWidth) * m_impl->nsPerPixel()));
}

QPoint TimelineWidget::spanCenter(SpanRef ref) const
{
    const auto& d = *m_impl;
    const QRectF r = d.spanRect(ref);
    if (r.isNull())
        return {-1, -1};
    const double x0 = std::max<double>(kGutterWidth, r.left());
    const double x1 = std::min<double>(d.right() - 1, r.right());
    if (x1 < x0)
        return {-1, -1};
    return QPoint(int((x0 + x1) / 2), int(r.center().y()));
}

const TimelineRunModel* TimelineWidget::runModel(int index) const
{
    return index >= 0 && index < int(m_impl->models.size()) ? m_impl->models[size_t(index)].get() : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Phase two: painting the lists

namespace {
void paintTexts(QPainter& p, const std::vector<DrawText>& texts, const QFont fonts[3])
{
    int current = -1;
    for (const DrawText& t : texts) {
        if (int(t.font) != current) {
            current = int(t.font);
            p.setFont(fonts[current]);
        }
        p.setPen(t.color);
        p.drawText(t.rect, t.flags, t.text);
    }
}
// Rects on whole pixels are filled as integer rects: the raster engine's fastest path, and the
// same colour to the edge (no blending at fractional borders).
void fillRect(QPainter& p, const QRectF& r, const QColor& c)
{
    const QRect i = r.toRect();
    if (QRectF(i) == r)
        p.fillRect(i, c);
    else
        p.fillRect(r, c);
}
void paintFills(QPainter& p, const std::vector<DrawFill>& fills)
{
    for (const DrawFill& f : fills)
        fillRect(p, f.rect, f.color);
}
void paintLines(QPainter& p, const std::vector<DrawLine>& lines)
{
    for (const DrawLine& l : lines) {
        p.setPen(QPen(l.color, l.width, l.style));
        p.drawLine(l.line);
    }
}
void paintArrow(QPainter& p, const DrawArrow& a)
{
    p.setPen(QPen(a.color, 1.5));
    p.drawLine(a.from, a.to);
    const QLineF line(a.to, a.from);
    if (line.length() < 1)
        return;
    const QLineF unit = line.unitVector();
    const QPointF dir(unit.dx(), unit.dy());
    const QPointF normal(-dir.y(), dir.x());
    QPainterPath head;
    head.moveTo(a.to);
    head.lineTo(a.to + dir * kFlowHead + normal * (kFlowHead / 2.0));
    head.lineTo(a.to + dir * kFlowHead - normal * (kFlowHead / 2.0));
    head.closeSubpath();
    p.fillPath(head, a.color);
}
} // namespace

void TimelineWidget::paintEvent(QPaintEvent*)
{
    auto& d = *m_impl;
    const TimelineDrawList& list = d.build();
    const TimelineOverlay overlay = d.buildOverlay();
    QPainter p(this);
    const int w = width();
    const int h = height();
    const int rightX = d.right();
    QFont fonts[3] = {font(), smallFontOf(font()), font()};
    fonts[int(DrawFont::Bold)].setBold(true);

    p.fillRect(rect(), palette::background());
    // Rows, below the ruler.
    p.setClipRect(QRect(0, kRulerHeight, w, h - kRulerHeight));
    paintFills(p, list.rowFills);
    paintLines(p, list.rowLines);
    paintTexts(p, list.gutterLabels, fonts);
    // The time area.
    p.setClipRect(QRect(kGutterWidth, kRulerHeight, rightX - kGutterWidth, h - kRulerHeight));
    paintLines(p, list.stepLines);
    for (const DrawSpan& s : list.spans) {
        fillRect(p, s.rect, s.color);
        if (s.pattern != Qt::NoBrush)
            p.fillRect(s.rect, QBrush(palette::patternInk(s.color), s.pattern));
    }
    paintTexts(p, list.spanLabels, fonts);
    paintFills(p, list.ticks);
    paintFills(p, list.strips);
    paintFills(p, list.marks);
    paintTexts(p, list.markLabels, fonts);
    // Overlay.
    p.setRenderHint(QPainter::Antialiasing, true);
    paintFills(p, overlay.fills);
    paintLines(p, overlay.lines);
    p.setBrush(Qt::NoBrush);
    for (const DrawOutline& o : overlay.outlines) {
        p.setPen(QPen(o.color, o.width));
        p.drawRect(o.rect);
    }
    for (const DrawArrow& a : overlay.arrows)
        paintArrow(p, a);
    paintTexts(p, overlay.labels, fonts);
    p.setRenderHint(QPainter::Antialiasing, false);
    // Ruler on top, then its corner over the gutter.
    p.setClipRect(QRect(0, 0, w, kRulerHeight));
    paintFills(p, list.rulerFills);
    p.setClipRect(QRect(kGutterWidth, 0, rightX - kGutterWidth, kRulerHeight));
    paintLines(p, list.rulerLines);
    paintTexts(p, list.rulerLabels, fonts);
    p.setClipRect(QRect(0, 0, kGutterWidth, kRulerHeight));
    p.fillRect(QRect(0, 0, kGutterWidth, kRulerHeight - 1), palette::rulerBackground());
    paintTexts(p, list.cornerLabels, fonts);
    d.lastItems = qint64(list.itemCount());
}

void TimelineWidget::resizeEvent(QResizeEvent* event)
{
    m_impl->updateScrollBar();
    QWidget::resizeEvent(event);
}

// ---------------------------------------------------------------------------------------------
// Interaction

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
    case Qt::Key_Escape:
        select({});
        setMeasureRange(std::nullopt);
        break;
    case Qt::Key_Left:
    case Qt::Key_Right: {
        // The previous / next span of the selected span's lane (start order).
        SpanRef next;
        if (d.selection.valid()) {
            const core::Run& r = d.models[size_t(d.selection.run)]->run();
            const auto [a, b] = r.laneSpanRange(r.spans[size_t(d.selection.span)].lane);
            const qint64 n = d.selection.span + (key == Qt::Key_Left ? -1 : 1);
            if (n >= qint64(a) && n < qint64(b))
                next = SpanRef{d.selection.run, n};
        } else {
            for (const DrawSpan& s : d.build().spans)
                if (s.count == 1) {
                    next = SpanRef{s.run, qint64(s.span)};
                    break;
                }
        }
        if (next.valid()) {
            select(next);
            d.ensureVisible(next);
        }
        break;
    }
    case Qt::Key_Up:
    case Qt::Key_Down: {
        // The span nearest in time on the lane above / below (headers and collapsed ranks are
        // skipped).
        if (!d.selection.valid())
            break;
        const int row = d.placeOf(d.selection).first;
        if (row < 0)
            break;
        const core::Span& cur = d.models[size_t(d.selection.run)]->run().spans[size_t(d.selection.span)];
        const TimeNs t = d.aligned(d.selection.run, cur.start);
        for (int k = row + (key == Qt::Key_Up ? -1 : 1); k >= 0 && k < int(d.rows.size()); k += key == Qt::Key_Up ? -1 : 1) {
            const TimelineRow& target = d.rows[size_t(k)];
            if (target.kind != TimelineRowKind::Lane)
                continue;
            const core::Run& r = d.models[size_t(target.run)]->run();
            const auto [a, b] = r.laneSpanRange(core::LaneId{uint32_t(target.lane)});
            if (a == b)
                continue;
            const TimeNs want = d.absolute(target.run, t);
            auto it = std::lower_bound(r.spans.begin() + ptrdiff_t(a), r.spans.begin() + ptrdiff_t(b), want,
                                       [](const core::Span& s, TimeNs v) { return s.start < v; });
            if (it == r.spans.begin() + ptrdiff_t(b) || (it != r.spans.begin() + ptrdiff_t(a) && want - (it - 1)->start < it->start - want))
                --it;
            const SpanRef next{target.run, qint64(it - r.spans.begin())};
            select(next);
            d.ensureVisible(next);
            break;
        }
        break;
    }
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
                           .arg(formatDuration(double(rl ? rl->quietBusyNs : 0)))
                           .arg(names.join(QStringLiteral(", ")))
                           .arg(r.collapsed ? tr("show") : tr("fold"));
            } else if (r.kind == TimelineRowKind::Lane)
                text = displayText(run.lanes[size_t(r.lane)].name).toHtmlEscaped()
                     + (r.subRows > 1 ? tr("<br>%1 rows: up to %1 spans of this lane run at once").arg(r.subRows) : QString());
        } else if (const DrawSpan* it = d.hit(pos)) {
            if (it->count > 1) {
                text = tr("%1 spans too small to show, longest %2<br>click to zoom in")
                           .arg(it->count)
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
            if (const auto b = m.index().stepBreakdown(r.rank, step))
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
