// The Gantt timeline widget (timeline_widget.h): its public interface and phase two, painting the
// draw lists (timeline_widget_impl.h says how the widget is split).
#include "timeline_widget_impl.h"

#include "format.h"
#include "timeline_palette.h"

#include <QPainter>
#include <QPainterPath>

#include <algorithm>
#include <cmath>
#include <set>

namespace lockstep::ui {

using namespace timeline_detail;

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
    d.hostsCollapsed.clear();
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
    // An overview's spans stand for folded items, not the run's spans: nothing to select yet.
    if (ref.valid() && !d.models[size_t(ref.run)]->detailed())
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
    if (!collapsed)
        d.hostsCollapsed.clear(); // E: everything shown, hosts too
    if (collapsed)
        for (size_t ri = 0; ri < d.models.size(); ++ri)
            for (const auto& rl : d.models[ri]->ranks())
                d.collapsed.insert({int(ri), rl->rank});
    d.scrollBar->setValue(0);
    d.relayout();
    update();
    emit rowsChanged();
}

const std::vector<HostGroup>& TimelineWidget::hosts(int run) const
{
    static const std::vector<HostGroup> kNone;
    const auto& d = *m_impl;
    return run >= 0 && size_t(run) < d.hosts.size() ? d.hosts[size_t(run)] : kNone;
}

void TimelineWidget::setHostCollapsed(int run, int host, bool collapsed)
{
    auto& d = *m_impl;
    if (hosts(run).size() < 2 || host < 0 || size_t(host) >= hosts(run).size()
        || (d.hostsCollapsed.count({run, host}) > 0) == collapsed)
        return;
    if (collapsed)
        d.hostsCollapsed.insert({run, host});
    else
        d.hostsCollapsed.erase({run, host});
    d.relayout();
    update();
    emit rowsChanged();
}

bool TimelineWidget::isHostCollapsed(int run, int host) const
{
    return m_impl->hostsCollapsed.count({run, host}) > 0;
}

void TimelineWidget::toggleAllHostsCollapsed()
{
    auto& d = *m_impl;
    std::set<std::pair<int, int>> all;
    for (size_t ri = 0; ri < d.hosts.size(); ++ri)
        if (d.hosts[ri].size() > 1)
            for (size_t h = 0; h < d.hosts[ri].size(); ++h)
                all.insert({int(ri), int(h)});
    if (all.empty())
        return;
    d.hostsCollapsed = d.hostsCollapsed == all ? std::set<std::pair<int, int>>{} : all;
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
    setHostCollapsed(run, d.hostOf(run, rank), false);
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

std::vector<core::LaneId> TimelineWidget::visibleLanes(int index) const
{
    const auto& d = *m_impl;
    std::vector<core::LaneId> out;
    const auto [first, last] = d.visibleRows();
    for (size_t ri = first; ri < last; ++ri)
        if (d.rows[ri].kind == TimelineRowKind::Lane && d.rows[ri].run == index)
            out.push_back(core::LaneId{uint32_t(d.rows[ri].lane)});
    return out;
}

double TimelineWidget::nsPerPixel() const
{
    return m_impl->nsPerPixel();
}

qint64 TimelineWidget::lastFrameItemCount() const
{
    return m_impl->lastItems;
}

void TimelineWidget::forgetDrawList()
{
    m_impl->frame.valid = false;
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

} // namespace lockstep::ui
