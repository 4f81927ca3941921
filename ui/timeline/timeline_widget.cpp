// The Gantt timeline widget (see timeline_widget.h).
//
// A frame has two phases (Tracy's habit): build flat draw lists for the visible window from
// each lane's level of detail (core::LaneLod::query: two binary searches plus the items that
// are on screen, spans narrower than kMinPixels folded), then paint them. The draw list of the
// last frame is kept; hit testing (clicks, tooltips) reads it, so what the user points at is
// exactly what was drawn. Everything else that is painted (steps, gradient-ready ticks, overlap
// strips, straggler marks) also comes from binary searches over per-run structures built once
// in setRuns (TimelineRunModel), with a pixel-skipping walk so dense marks cost at most one
// per pixel. No loop here runs over all spans of a run.
#include "timeline_widget.h"

#include "time_axis.h"
#include "timeline_model.h"
#include "timeline_palette.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QLocale>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <limits>

namespace lockstep::ui {

using core::TimeNs;

namespace {
constexpr int kRunHeaderHeight = 22;
constexpr int kRankHeaderHeight = 18;
constexpr int kLaneHeight = 22;
constexpr int kStripHeight = 6;   // overlapped/exposed strip under the comm lane
constexpr int kRowGap = 2;        // between a rank's block and the next header
constexpr double kMinPixels = 3.0; // narrower spans fold (STYLE.md: ~3 px)
constexpr TimeNs kMinViewNs = 200; // zooming further shows nothing new at ns resolution
constexpr double kKeyZoom = 1.25;  // W/S per press
constexpr double kKeyPan = 0.15;   // A/D per press, fraction of the view
constexpr int kDragThreshold = 4;  // pixels before a press becomes a drag, not a click
constexpr int kMinLabelPx = 34;    // spans narrower than this carry no text
constexpr double kMinStepPx = 6.0; // narrower steps get no boundary lines or ruler marks
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
} // namespace

struct TimelineWidget::Impl {
    struct DrawnItem {
        float x0 = 0, x1 = 0;
        int row = 0;
        int run = 0;
        uint32_t lane = 0;
        size_t span = 0;      // global span index when count == 1
        uint32_t count = 1;
        TimeNs start = 0, end = 0, maxDuration = 0; // absolute times
        QColor color;
    };
    struct Frame {
        TimeNs t0 = 0, t1 = 0;
        int width = -1, height = -1, scrollY = -1;
        quint64 version = 0;
        std::vector<DrawnItem> items;
        bool valid = false;
    };

    std::vector<TimelineRun> runs;
    std::vector<std::shared_ptr<const TimelineRunModel>> models;
    std::vector<TimelineRow> rows;
    int contentHeight = kRulerHeight;
    quint64 version = 1;

    TimeNs t0 = 0, t1 = 1'000'000;
    int scrollY = 0;
    SpanRef selection;
    std::optional<TimeNs> cursor;

    Frame frame;
    qint64 lastItems = 0;

    // Mouse state.
    QPoint pressPos;
    QPoint lastPos;
    bool pressed = false;
    bool dragging = false;
    QPoint mousePos{-1, -1};

    void relayout();
    double areaWidth(const QWidget* w) const { return std::max(1, w->width() - kGutterWidth); }
    double nsPerPixel(const QWidget* w) const { return double(t1 - t0) / areaWidth(w); }
    double xFor(const QWidget* w, TimeNs aligned) const
    {
        return kGutterWidth + double(aligned - t0) / nsPerPixel(w);
    }
    int rowAt(int y) const;
    void buildFrame(const QWidget* w);
    const DrawnItem* hit(const QWidget* w, QPoint p);
};

void TimelineWidget::Impl::relayout()
{
    rows.clear();
    int y = kRulerHeight;
    const bool stacked = runs.size() > 1;
    for (size_t ri = 0; ri < models.size(); ++ri) {
        const TimelineRunModel& m = *models[ri];
        if (stacked) {
            rows.push_back({TimelineRowKind::RunHeader, int(ri), -1, -1, y, kRunHeaderHeight});
            y += kRunHeaderHeight;
        }
        for (const auto& rl : m.ranks()) {
            rows.push_back({TimelineRowKind::RankHeader, int(ri), rl->rank, -1, y, kRankHeaderHeight});
            y += kRankHeaderHeight;
            for (core::LaneId lane : rl->lanes) {
                const int h = kLaneHeight + (lane == rl->stripLane ? kStripHeight : 0);
                rows.push_back({TimelineRowKind::Lane, int(ri), rl->rank, int(lane.v), y, h});
                y += h;
            }
            y += kRowGap;
        }
    }
    contentHeight = y;
    ++version;
    frame.valid = false;
}

int TimelineWidget::Impl::rowAt(int y) const
{
    const int cy = y + scrollY;
    auto it = std::upper_bound(rows.begin(), rows.end(), cy, [](int v, const TimelineRow& r) { return v < r.top; });
    if (it == rows.begin())
        return -1;
    --it;
    return cy < it->top + it->height ? int(it - rows.begin()) : -1;
}

void TimelineWidget::Impl::buildFrame(const QWidget* w)
{
    if (frame.valid && frame.t0 == t0 && frame.t1 == t1 && frame.width == w->width() && frame.height == w->height()
        && frame.scrollY == scrollY && frame.version == version)
        return;
    frame.items.clear();
    frame.t0 = t0;
    frame.t1 = t1;
    frame.width = w->width();
    frame.height = w->height();
    frame.scrollY = scrollY;
    frame.version = version;
    frame.valid = true;

    const double npp = nsPerPixel(w);
    std::vector<core::DrawItem> items;
    for (size_t ri = 0; ri < rows.size(); ++ri) {
        const TimelineRow& row = rows[ri];
        const int top = row.top - scrollY;
        if (row.kind != TimelineRowKind::Lane || top + row.height < kRulerHeight || top > w->height())
            continue;
        const TimelineRunModel& m = *models[row.run];
        const core::LaneId lane{uint32_t(row.lane)};
        const core::LaneLod& lod = m.lod().lane(lane);
        const size_t offset = m.lod().laneOffset(lane);
        const core::Run& run = m.run();
        items.clear();
        lod.query(m.toAbsolute(t0), m.toAbsolute(t1), npp, kMinPixels, items);
        for (const core::DrawItem& it : items) {
            DrawnItem d;
            d.x0 = float(xFor(w, m.toAligned(it.start)));
            d.x1 = float(xFor(w, m.toAligned(it.end)));
            d.row = int(ri);
            d.run = row.run;
            d.lane = lane.v;
            d.count = it.count;
            d.start = it.start;
            d.end = it.end;
            d.maxDuration = it.maxDuration;
            d.span = offset + it.span;
            // A folded item stands for consecutive spans of the lane (DrawItem::span is the first):
            // it takes the hue of the one in its middle, greyed, a fair sample of what it hides.
            const size_t sample = it.count > 1 ? d.span + it.count / 2 : d.span;
            const core::Span* ss = sample < offset + lod.size() ? &run.spans[sample] : nullptr;
            if (it.count == 1)
                d.color = ss ? palette::spanColor(*ss) : palette::spanKindColor(core::SpanKind::Other);
            else if (ss && core::isCommunication(ss->kind))
                d.color = palette::foldedCommColor(); // mixed buckets: no one bucket's colour
            else
                d.color = palette::foldedColor(ss ? palette::spanColor(*ss) : palette::spanKindColor(core::SpanKind::Other));
            frame.items.push_back(d);
        }
    }
}

const TimelineWidget::Impl::DrawnItem* TimelineWidget::Impl::hit(const QWidget* w, QPoint p)
{
    if (p.x() < kGutterWidth || p.y() < kRulerHeight)
        return nullptr;
    const int row = rowAt(p.y());
    if (row < 0 || rows[row].kind != TimelineRowKind::Lane)
        return nullptr;
    // The strip under the comm lane is not a span.
    const int top = rows[row].top - scrollY;
    if (p.y() >= top + kLaneHeight)
        return nullptr;
    buildFrame(w);
    const DrawnItem* best = nullptr;
    double bestDist = 3.0; // pointing within a few pixels of a thin span still hits it
    for (const DrawnItem& d : frame.items) {
        if (d.row != row)
            continue;
        const double x = p.x() + 0.5;
        const double dist = x < d.x0 ? d.x0 - x : x > std::max(d.x1, d.x0 + 1) ? x - std::max(d.x1, d.x0 + 1) : 0.0;
        if (dist < bestDist || (dist == 0 && best && bestDist == 0 && d.x1 - d.x0 < best->x1 - best->x0)) {
            best = &d;
            bestDist = dist;
        }
    }
    return best;
}

// ---------------------------------------------------------------------------------------------

TimelineWidget::TimelineWidget(QWidget* parent)
    : QWidget(parent)
    , m_impl(std::make_unique<Impl>())
{
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
        if (!r.run)
            continue; // a missing run is skipped, not a crash
        d.models.push_back(TimelineRunModel::shared(r.run));
        d.runs.push_back(std::move(r));
    }
    d.selection = {};
    d.scrollY = 0;
    d.relayout();
    fitAll();
    updateGeometry();
    update();
}

QSize TimelineWidget::sizeHint() const
{
    return QSize(900, std::max(200, m_impl->contentHeight + 8));
}

const std::vector<TimelineRun>& TimelineWidget::runs() const
{
    return m_impl->runs;
}

void TimelineWidget::updateRun(int index, std::shared_ptr<const core::Run> run)
{
    auto& d = *m_impl;
    if (index < 0 || index >= int(d.runs.size()) || !run)
        return;
    d.runs[index].run = run;
    d.models[index] = TimelineRunModel::shared(std::move(run));
    if (d.selection.run == index && d.selection.span >= qint64(d.models[index]->run().spans.size()))
        d.selection = {};
    d.relayout();
    update();
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
    for (const auto& m : d.models) {
        lo = std::min(lo, m->alignedBegin());
        hi = std::max(hi, m->alignedEnd());
    }
    const TimeNs margin = std::max<TimeNs>((hi - lo) / 100, 1);
    setViewRange(lo - margin, hi + margin);
}

std::optional<std::pair<TimeNs, TimeNs>> TimelineWidget::stepRange(int step) const
{
    bool any = false;
    TimeNs lo = std::numeric_limits<TimeNs>::max(), hi = std::numeric_limits<TimeNs>::min();
    for (const auto& m : m_impl->models) {
        if (const StepSpan* s = m->step(step)) {
            any = true;
            lo = std::min(lo, m->toAligned(s->start));
            hi = std::max(hi, m->toAligned(s->end));
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
    if (ref.valid() && (ref.run >= int(d.models.size()) || ref.span >= qint64(d.models[ref.run]->run().spans.size())))
        ref = {};
    if (!ref.valid())
        ref = {};
    if (ref == d.selection)
        return;
    d.selection = ref;
    update();
    emit selectionChanged(ref);
}

SpanRef TimelineWidget::selection() const
{
    return m_impl->selection;
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
    return m_impl->xFor(this, aligned);
}

TimeNs TimelineWidget::timeForX(double x) const
{
    return m_impl->t0 + TimeNs(std::llround((x - kGutterWidth) * m_impl->nsPerPixel(this)));
}

QPoint TimelineWidget::spanCenter(SpanRef ref) const
{
    const auto& d = *m_impl;
    if (!ref.valid() || ref.run >= int(d.models.size()))
        return {-1, -1};
    const TimelineRunModel& m = *d.models[ref.run];
    if (ref.span >= qint64(m.run().spans.size()))
        return {-1, -1};
    const core::Span& s = m.run().spans[size_t(ref.span)];
    for (const TimelineRow& r : d.rows) {
        if (r.kind == TimelineRowKind::Lane && r.run == ref.run && r.lane == int(s.lane.v)) {
            const double x0 = std::max<double>(kGutterWidth, xForTime(m.toAligned(s.start)));
            const double x1 = std::min<double>(width() - 1, xForTime(m.toAligned(s.end)));
            if (x1 < x0)
                return {-1, -1};
            return QPoint(int((x0 + x1) / 2), r.top - d.scrollY + kLaneHeight / 2);
        }
    }
    return {-1, -1};
}

const TimelineRunModel* TimelineWidget::runModel(int index) const
{
    return index >= 0 && index < int(m_impl->models.size()) ? m_impl->models[index].get() : nullptr;
}

// ---------------------------------------------------------------------------------------------
// Painting

void TimelineWidget::paintEvent(QPaintEvent*)
{
    auto& d = *m_impl;
    QPainter p(this);
    const int w = width();
    const int h = height();
    p.fillRect(rect(), palette::background());
    d.buildFrame(this);
    qint64 drawn = 0;
    const double npp = d.nsPerPixel(this);
    const QFont baseFont = font();
    QFont smallFont = baseFont;
    smallFont.setPointSizeF(std::max(6.5, baseFont.pointSizeF() * 0.85));
    QFont boldFont = baseFont;
    boldFont.setBold(true);
    const QFontMetrics smallFm(smallFont);

    // Rows clip below the ruler.
    p.save();
    p.setClipRect(QRect(0, kRulerHeight, w, h - kRulerHeight));

    // Row backgrounds, gutter and headers.
    for (size_t ri = 0; ri < d.rows.size(); ++ri) {
        const TimelineRow& row = d.rows[ri];
        const int top = row.top - d.scrollY;
        if (top + row.height < kRulerHeight || top > h)
            continue;
        const QRect full(0, top, w, row.height);
        const QRect gutter(0, top, kGutterWidth, row.height);
        switch (row.kind) {
        case TimelineRowKind::RunHeader: {
            p.fillRect(full, palette::runHeaderBackground());
            p.setPen(QColor(0x20, 0x24, 0x2a));
            p.setFont(boldFont);
            const TimelineRun& tr = d.runs[row.run];
            QString label = tr.label.isEmpty() ? QString::fromStdString(tr.run->config.name) : tr.label;
            p.drawText(full.adjusted(8, 0, -8, 0), Qt::AlignVCenter | Qt::AlignLeft, label);
            break;
        }
        case TimelineRowKind::RankHeader:
            p.fillRect(full, palette::rankHeaderBackground());
            p.setPen(QColor(0x30, 0x34, 0x3a));
            p.setFont(boldFont);
            p.drawText(gutter.adjusted(8, 0, -4, 0), Qt::AlignVCenter | Qt::AlignLeft,
                       QStringLiteral("rank %1").arg(row.rank));
            {
                const auto& rs = d.models[row.run]->runStragglers();
                if (std::find(rs.begin(), rs.end(), row.rank) != rs.end()) {
                    // The run's straggler, named where the eye starts reading a row.
                    p.setFont(smallFont);
                    p.setPen(palette::stragglerColor());
                    p.drawText(gutter.adjusted(8, 0, -6, 0), Qt::AlignVCenter | Qt::AlignRight, QStringLiteral("straggler"));
                }
            }
            break;
        case TimelineRowKind::Lane: {
            p.fillRect(gutter, palette::gutterBackground());
            p.setPen(palette::gridLine());
            p.drawLine(kGutterWidth, top + row.height - 1, w, top + row.height - 1);
            p.setPen(QColor(0x50, 0x56, 0x60));
            p.setFont(baseFont);
            const core::Lane& lane = d.models[row.run]->run().lanes[size_t(row.lane)];
            p.drawText(QRect(18, top, kGutterWidth - 22, kLaneHeight), Qt::AlignVCenter | Qt::AlignLeft,
                       p.fontMetrics().elidedText(QString::fromStdString(lane.name), Qt::ElideRight, kGutterWidth - 22));
            break;
        }
        }
    }
    p.setPen(QColor(0xc8, 0xcc, 0xd2));
    p.drawLine(kGutterWidth - 1, kRulerHeight, kGutterWidth - 1, h);

    // Time area.
    p.setClipRect(QRect(kGutterWidth, kRulerHeight, w - kGutterWidth, h - kRulerHeight));

    // Step boundaries per rank block (each rank's own step starts), then spans over them.
    for (size_t ri = 0; ri < d.rows.size(); ++ri) {
        const TimelineRow& row = d.rows[ri];
        if (row.kind != TimelineRowKind::RankHeader)
            continue;
        const TimelineRunModel& m = *d.models[row.run];
        const auto* rl = m.rank(row.rank);
        if (!rl || rl->steps.empty())
            continue;
        int blockTop = row.top - d.scrollY;
        int blockBottom = blockTop + row.height;
        for (size_t k = ri + 1; k < d.rows.size() && d.rows[k].kind == TimelineRowKind::Lane; ++k)
            blockBottom = d.rows[k].top - d.scrollY + d.rows[k].height;
        if (blockBottom < kRulerHeight || blockTop > h)
            continue;
        p.setPen(QPen(palette::stepLine(), 1, Qt::DotLine));
        // Boundaries closer than a few pixels would only texture the rows: leave them out.
        forEachVisibleStep(rl->steps, m.toAbsolute(d.t0), m.toAbsolute(d.t1), npp, kMinStepPx, [&](const StepSpan& st) {
            if (double(st.end - st.start) / npp < kMinStepPx)
                return;
            const double x = d.xFor(this, m.toAligned(st.start));
            p.drawLine(QPointF(x, blockTop + row.height), QPointF(x, blockBottom));
            ++drawn;
        });
    }

    // Spans.
    p.setPen(Qt::NoPen);
    for (const Impl::DrawnItem& it : d.frame.items) {
        const TimelineRow& row = d.rows[it.row];
        const int top = row.top - d.scrollY + 2;
        const int hh = kLaneHeight - 4;
        // Integer pixel edges: crisp, and the same colour everywhere inside the rect.
        int x0 = int(std::floor(std::max<float>(it.x0, kGutterWidth - 2)));
        int x1 = int(std::ceil(std::min<float>(it.x1, w + 2)));
        if (x1 <= x0)
            x1 = x0 + 1;
        p.fillRect(QRect(x0, top, x1 - x0, hh), it.color);
        ++drawn;
        const int pw = x1 - x0;
        if (pw >= kMinLabelPx) {
            QString text;
            QString shortText; // used when `text` would be cut
            const core::Run& run = d.models[it.run]->run();
            if (it.count > 1) {
                text = QStringLiteral("%1 spans").arg(QLocale(QLocale::English).toString(qlonglong(it.count)));
            } else {
                const core::Span& s = run.spans[it.span];
                if (core::isCommunication(s.kind) && s.bucket >= 0) {
                    text = QStringLiteral("b%1 · %2").arg(s.bucket).arg(formatBytes(double(s.bytes)));
                    shortText = QStringLiteral("b%1").arg(s.bucket);
                }
                else
                    text = QString::fromStdString(run.strings.text(s.name));
            }
            // Text stays within the visible part of the span.
            const int vx0 = std::max(x0, kGutterWidth);
            const int vx1 = std::min(x1, w);
            const int avail = vx1 - vx0 - 6;
            if (avail >= 14) {
                if (!shortText.isEmpty() && smallFm.horizontalAdvance(text) > avail)
                    text = shortText;
                p.setFont(smallFont);
                p.setPen(palette::textOn(it.color));
                p.drawText(QRect(vx0 + 3, top, avail, hh), Qt::AlignVCenter | Qt::AlignLeft,
                           smallFm.elidedText(text, Qt::ElideRight, avail));
                p.setPen(Qt::NoPen);
            }
        }
    }

    // Gradient-ready ticks (instants) at the top of their lane: at most one per 2 pixels.
    for (size_t ri = 0; ri < d.rows.size(); ++ri) {
        const TimelineRow& row = d.rows[ri];
        const int top = row.top - d.scrollY;
        if (row.kind != TimelineRowKind::Lane || top + row.height < kRulerHeight || top > h)
            continue;
        const TimelineRunModel& m = *d.models[row.run];
        const auto [ia, ib] = m.laneInstants(core::LaneId{uint32_t(row.lane)});
        if (ia >= ib)
            continue;
        const auto& inst = m.run().instants;
        const auto first = inst.begin() + ia, last = inst.begin() + ib;
        const TimeNs a0 = m.toAbsolute(d.t0), a1 = m.toAbsolute(d.t1);
        auto it = std::lower_bound(first, last, a0, [](const core::Instant& x, TimeNs t) { return x.ts < t; });
        // Zoomed out this far the ticks would merge into one dark band that says nothing and
        // costs a cache miss per pixel on a multi-million array: leave them out.
        const auto end = std::upper_bound(it, last, a1, [](TimeNs t, const core::Instant& x) { return t < x.ts; });
        if (end - it > 4 * (w - kGutterWidth))
            continue;
        const QColor tickColor(0x2a, 0x2e, 0x36);
        while (it != last && it->ts <= a1) {
            const double x = d.xFor(this, m.toAligned(it->ts));
            p.fillRect(QRectF(std::floor(x), top + 1, 1, 6), tickColor);
            ++drawn;
            const TimeNs tNext = m.toAbsolute(d.t0 + TimeNs(std::ceil((std::floor(x) + 2 - kGutterWidth) * npp)));
            it = gallopLowerBound(it + 1, last, tNext, [](const core::Instant& x, TimeNs t) { return x.ts < t; });
        }
    }

    // Overlap strips: green where communication hides behind compute, red where it is exposed.
    std::vector<core::DrawItem> strip;
    for (size_t ri = 0; ri < d.rows.size(); ++ri) {
        const TimelineRow& row = d.rows[ri];
        if (row.kind != TimelineRowKind::Lane)
            continue;
        const TimelineRunModel& m = *d.models[row.run];
        const auto* rl = m.rank(row.rank);
        if (!rl || int(rl->stripLane.v) != row.lane || (rl->overlapped.empty() && rl->exposed.empty()))
            continue;
        const int y = row.top - d.scrollY + kLaneHeight;
        if (y + kStripHeight < kRulerHeight || y > h)
            continue;
        p.fillRect(QRect(kGutterWidth, y, w - kGutterWidth, kStripHeight - 1), QColor(0xee, 0xef, 0xf1));
        const TimeNs a0 = m.toAbsolute(d.t0), a1 = m.toAbsolute(d.t1);
        if (double(rl->meanStepNs) / npp < kStripDetailPx) {
            // Zoomed out: one colour per step, green (all hidden) to red (all exposed).
            forEachVisibleStep(rl->steps, a0, a1, npp, 1.0, [&](const StepSpan& st) {
                const size_t k = size_t(&st - rl->steps.data());
                const auto [ov, ex] = rl->stepOverlap[k];
                if (ov + ex <= 0)
                    return;
                const double f = double(ex) / double(ov + ex);
                const QColor g = palette::overlappedColor(), r = palette::exposedColor();
                const QColor c = QColor::fromRgbF(g.redF() + (r.redF() - g.redF()) * f, g.greenF() + (r.greenF() - g.greenF()) * f,
                                                  g.blueF() + (r.blueF() - g.blueF()) * f);
                // Whole pixels, at least two wide: the next sampled step is at most a pixel
                // and a bit further, so sub-pixel steps leave no gaps between samples.
                const int x0 = int(std::floor(d.xFor(this, m.toAligned(st.start))));
                const int x1 = std::max(x0 + 2, int(std::ceil(d.xFor(this, m.toAligned(st.end)))));
                p.fillRect(QRect(x0, y, x1 - x0, kStripHeight - 1), c);
                ++drawn;
            });
            continue;
        }
        for (int pass = 0; pass < 2; ++pass) {
            strip.clear();
            (pass == 0 ? rl->overlappedLod : rl->exposedLod).query(a0, a1, npp, 1.0, strip);
            const QColor c = pass == 0 ? palette::overlappedColor() : palette::exposedColor();
            for (const core::DrawItem& s : strip) {
                const double x0 = d.xFor(this, m.toAligned(s.start));
                const double x1 = std::max(x0 + 1, d.xFor(this, m.toAligned(s.end)));
                p.fillRect(QRectF(x0, y, x1 - x0, kStripHeight - 1), c);
                ++drawn;
            }
        }
    }

    // Straggler marks in the rank header: the rank that held the others back in each step.
    for (size_t ri = 0; ri < d.rows.size(); ++ri) {
        const TimelineRow& row = d.rows[ri];
        if (row.kind != TimelineRowKind::RankHeader)
            continue;
        const int top = row.top - d.scrollY;
        if (top + row.height < kRulerHeight || top > h)
            continue;
        const TimelineRunModel& m = *d.models[row.run];
        const auto& strag = m.stepStragglers();
        const auto* rl = m.rank(row.rank);
        if (strag.empty() || !rl)
            continue;
        forEachVisibleStep(rl->steps, m.toAbsolute(d.t0), m.toAbsolute(d.t1), npp, 1.0, [&](const StepSpan& st) {
            auto sIt = std::lower_bound(strag.begin(), strag.end(), st.step,
                                        [](const core::StepStraggler& s, int32_t v) { return s.step < v; });
            if (sIt == strag.end() || sIt->step != st.step || sIt->rank != row.rank || sIt->waitCaused <= 0)
                return;
            const double x0 = d.xFor(this, m.toAligned(st.start));
            const double x1 = d.xFor(this, m.toAligned(st.end));
            const int px0 = int(std::floor(x0));
            const int px1 = std::max(px0 + 2, int(std::ceil(x1)));
            p.fillRect(QRect(px0, top + 3, px1 - px0, row.height - 6), palette::stragglerFill());
            if (x1 - x0 >= 8)
                p.fillRect(QRectF(x0, top + 2, 4.0, row.height - 4), palette::stragglerColor());
            ++drawn;
            const double vis0 = std::max<double>(x0, kGutterWidth) + 7;
            const double vis1 = std::min<double>(x1, w) - 3;
            if (vis1 - vis0 > 50) {
                p.setFont(smallFont);
                p.setPen(palette::stragglerColor().darker(130));
                const QString text = QStringLiteral("straggler · others waited %1").arg(formatDuration(double(sIt->waitCaused)));
                p.drawText(QRectF(vis0, top, vis1 - vis0, row.height), Qt::AlignVCenter | Qt::AlignLeft,
                           smallFm.elidedText(text, Qt::ElideRight, int(vis1 - vis0)));
                p.setPen(Qt::NoPen);
            }
        });
    }

    // Selection outline.
    if (d.selection.valid()) {
        const QPoint c = spanCenter(d.selection);
        if (c.x() >= 0) {
            const TimelineRunModel& m = *d.models[d.selection.run];
            const core::Span& s = m.run().spans[size_t(d.selection.span)];
            const double x0 = d.xFor(this, m.toAligned(s.start));
            const double x1 = std::max(x0 + 2, d.xFor(this, m.toAligned(s.end)));
            const int top = c.y() - kLaneHeight / 2 + 1;
            p.setBrush(Qt::NoBrush);
            p.setPen(QPen(palette::selectionOutline(), 2));
            p.drawRect(QRectF(std::max<double>(x0, kGutterWidth - 2) - 1, top, std::min<double>(x1, w + 2) - std::max<double>(x0, kGutterWidth - 2) + 2,
                              kLaneHeight - 2));
            p.setPen(Qt::NoPen);
        }
    }

    // Replay cursor: what is right of it has not happened yet, so it is dimmed.
    if (d.cursor) {
        const double x = d.xFor(this, *d.cursor);
        if (x < w) {
            const double xc = std::max<double>(x, kGutterWidth);
            p.fillRect(QRectF(xc, kRulerHeight, w - xc, h - kRulerHeight), QColor(0xfb, 0xfb, 0xfa, 170));
        }
        if (x >= kGutterWidth && x <= w) {
            p.setPen(QPen(palette::replayCursor(), 2));
            p.drawLine(QPointF(x, kRulerHeight), QPointF(x, h));
            p.setPen(Qt::NoPen);
        }
    }
    p.restore();

    // Ruler on top.
    const QRect ruler(0, 0, w, kRulerHeight);
    p.fillRect(ruler, QColor(0xf4, 0xf5, 0xf7));
    p.setPen(QColor(0xc8, 0xcc, 0xd2));
    p.drawLine(0, kRulerHeight - 1, w, kRulerHeight - 1);
    p.setClipRect(QRect(kGutterWidth, 0, w - kGutterWidth, kRulerHeight));
    TimeNs tickStep = 1;
    const auto ticks = rulerTicks(d.t0, d.t1, npp, 12.0, &tickStep);
    p.setFont(smallFont);
    for (const Tick& t : ticks) {
        const double x = d.xFor(this, t.t);
        p.setPen(QColor(0x90, 0x96, 0xa0));
        p.drawLine(QPointF(x, kRulerHeight - (t.major ? 9 : 4)), QPointF(x, kRulerHeight - 1));
        if (t.major) {
            p.setPen(QColor(0x30, 0x34, 0x3a));
            p.drawText(QPointF(x + 3, 11), formatTickLabel(t.t, tickStep));
        }
        ++drawn;
    }
    // Step numbers of the first run (the runs are aligned on steps, so they agree).
    if (!d.models.empty()) {
        const TimelineRunModel& m = *d.models.front();
        double lastRight = -1e9;
        forEachVisibleStep(m.steps(), m.toAbsolute(d.t0), m.toAbsolute(d.t1), npp, kMinStepPx, [&](const StepSpan& st) {
            const double x0 = d.xFor(this, m.toAligned(st.start));
            const double x1 = d.xFor(this, m.toAligned(st.end));
            if (x1 - x0 < kMinStepPx)
                return;
            const QString label = QStringLiteral("step %1").arg(st.step);
            const QString shortLabel = QString::number(st.step);
            const double lx = std::max<double>(x0, kGutterWidth) + 3;
            p.setPen(palette::stepLine());
            p.drawLine(QPointF(x0, 13), QPointF(x0, kRulerHeight - 1));
            ++drawn;
            if (lx <= lastRight + 4 || x1 - lx < 8)
                return;
            const int lw = smallFm.horizontalAdvance(label);
            const int sw = smallFm.horizontalAdvance(shortLabel);
            const bool room = x1 - lx > lw + 2;
            if (room || x1 - lx > sw + 2) {
                p.setPen(QColor(0x28, 0x50, 0x80));
                p.drawText(QPointF(lx, kRulerHeight - 4), room ? label : shortLabel);
                lastRight = lx + (room ? lw : sw);
            }
        });
    }
    p.setClipping(false);
    p.fillRect(QRect(0, 0, kGutterWidth, kRulerHeight - 1), QColor(0xf4, 0xf5, 0xf7));
    p.setPen(QColor(0x60, 0x66, 0x70));
    p.setFont(smallFont);
    p.drawText(QRect(8, 0, kGutterWidth - 12, kRulerHeight), Qt::AlignVCenter | Qt::AlignLeft,
               QStringLiteral("%1 / px").arg(formatDuration(npp, 2)));
    d.lastItems = drawn;
}

// ---------------------------------------------------------------------------------------------
// Interaction

void TimelineWidget::wheelEvent(QWheelEvent* event)
{
    auto& d = *m_impl;
    const QPoint delta = event->angleDelta();
    if (event->modifiers() & Qt::ShiftModifier) {
        const int maxScroll = std::max(0, d.contentHeight - height());
        d.scrollY = std::clamp(d.scrollY - delta.y() / 2, 0, maxScroll);
        update();
    } else if (delta.y() != 0) {
        const double anchor = (event->position().x() - kGutterWidth) / d.areaWidth(this);
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
    d.dragging = false;
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
    if (!d.dragging && (pos - d.pressPos).manhattanLength() >= kDragThreshold)
        d.dragging = true;
    if (d.dragging) {
        const int dx = pos.x() - d.lastPos.x();
        const int dy = pos.y() - d.lastPos.y();
        if (dx != 0) {
            const TimeNs shift = TimeNs(std::llround(-dx * d.nsPerPixel(this)));
            setViewRange(d.t0 + shift, d.t1 + shift);
        }
        if (dy != 0) {
            const int maxScroll = std::max(0, d.contentHeight - height());
            d.scrollY = std::clamp(d.scrollY - dy, 0, maxScroll);
            update();
        }
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
    if (d.dragging) {
        d.dragging = false;
        return;
    }
    const QPoint pos = event->position().toPoint();
    if (pos.y() < kRulerHeight)
        return;
    const Impl::DrawnItem* it = d.hit(this, pos);
    if (!it) {
        select({});
    } else if (it->count > 1) {
        // A folded item: zoom onto it. A fold that already fills much of the view (zoomed
        // out, whole steps fold into one item) zooms 4x at the click instead, so every click
        // makes progress.
        const TimelineRunModel& m = *d.models[it->run];
        const TimeNs len = std::max<TimeNs>(it->end - it->start, kMinViewNs);
        if (len * 3 > d.t1 - d.t0)
            zoomBy(4.0, (pos.x() - kGutterWidth) / d.areaWidth(this));
        else
            setViewRange(m.toAligned(it->start) - len / 10, m.toAligned(it->start) + len + len / 10);
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
        const TimeNs t = m.toAbsolute(timeForX(pos.x()));
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
    if (const Impl::DrawnItem* it = d.hit(this, pos); it && it->count == 1) {
        const TimelineRunModel& m = *d.models[it->run];
        const TimeNs len = std::max<TimeNs>(it->end - it->start, kMinViewNs);
        setViewRange(m.toAligned(it->start) - len / 4, m.toAligned(it->end) + len / 4);
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
        anchor = (d.mousePos.x() - kGutterWidth) / d.areaWidth(this);
    switch (event->key()) {
    case Qt::Key_W: zoomBy(kKeyZoom, anchor); break;
    case Qt::Key_S: zoomBy(1.0 / kKeyZoom, anchor); break;
    case Qt::Key_A: panBy(-kKeyPan); break;
    case Qt::Key_D: panBy(kKeyPan); break;
    case Qt::Key_F: fitAll(); break;
    case Qt::Key_Escape: select({}); break;
    default:
        if (event->key() >= Qt::Key_0 && event->key() <= Qt::Key_9) {
            zoomToStep(event->key() - Qt::Key_0);
            break;
        }
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
    if (pos.x() >= kGutterWidth && pos.y() >= kRulerHeight && row >= 0) {
        const TimelineRow& r = d.rows[row];
        const TimelineRunModel& m = *d.models[r.run];
        const core::Run& run = m.run();
        if (const Impl::DrawnItem* it = d.hit(this, pos)) {
            if (it->count > 1) {
                text = QStringLiteral("%1 spans too small to show, longest %2\nclick to zoom in")
                           .arg(it->count)
                           .arg(formatDuration(double(it->maxDuration)));
            } else {
                const core::Span& s = run.spans[it->span];
                QStringList lines;
                lines << QStringLiteral("<b>%1</b>").arg(QString::fromStdString(run.strings.text(s.name)).toHtmlEscaped());
                lines << QStringLiteral("kind: %1").arg(QString::fromUtf8(core::spanKindName(s.kind)));
                lines << QStringLiteral("duration: %1").arg(formatDuration(double(s.duration())));
                if (s.step != core::kNoStep)
                    lines << QStringLiteral("step: %1").arg(s.step);
                if (s.bucket != core::kNoBucket)
                    lines << QStringLiteral("bucket: %1").arg(s.bucket);
                if (s.bytes > 0) {
                    lines << QStringLiteral("bytes: %1").arg(formatBytes(double(s.bytes)));
                    if (s.duration() > 0)
                        lines << QStringLiteral("bandwidth: %1").arg(formatBandwidth(double(s.bytes) / double(s.duration())));
                }
                text = lines.join(QStringLiteral("<br>"));
            }
        } else if (r.kind == TimelineRowKind::Lane && pos.y() >= r.top - d.scrollY + kLaneHeight) {
            const int32_t step = stepAt(run, r.rank, m.toAbsolute(timeForX(pos.x())));
            bool found = false;
            const core::StepBreakdown b = rankStepBreakdown(run, m.laneMaxDurations(), r.rank, step, &found);
            if (found)
                text = QStringLiteral("rank %1 step %2: communication %3, overlapped %4, exposed %5")
                           .arg(r.rank)
                           .arg(step)
                           .arg(formatDuration(double(b.communication)), formatDuration(double(b.overlapped)),
                                formatDuration(double(b.exposed)));
        } else if (r.kind == TimelineRowKind::RankHeader) {
            const int32_t step = stepAt(run, r.rank, m.toAbsolute(timeForX(pos.x())));
            for (const core::StepStraggler& s : m.stepStragglers())
                if (s.step == step && s.rank == r.rank)
                    text = QStringLiteral("rank %1 was the straggler of step %2: the other ranks waited %3 for it")
                               .arg(r.rank)
                               .arg(step)
                               .arg(formatDuration(double(s.waitCaused)));
        }
    }
    if (text.isEmpty())
        QToolTip::hideText();
    else
        QToolTip::showText(help->globalPos(), text, this);
    return true;
}

} // namespace lockstep::ui
