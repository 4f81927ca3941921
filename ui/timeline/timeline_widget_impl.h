// The timeline widget's private state and what its source files share (not installed; the
// widget's interface is timeline_widget.h).
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
//
// The widget is split by concern, one purpose per file (Tracy's TracyView_*.cpp habit):
//   timeline_widget.cpp      the public interface and phase two, painting the lists
//   timeline_layout.cpp      the rows top to bottom, scrolling, which rows are visible
//   timeline_draw_lists.cpp  phase one: the cached draw lists of the visible window
//   timeline_overlay.cpp     what is drawn over them on every paint: selection, linked bucket,
//                            search matches, measured range, replay cursor
//   timeline_selection.cpp   the linked bucket, the search, bringing a span into view
//   timeline_input.cpp       hit testing, mouse, wheel, keys and tooltips
#pragma once

#include "timeline_widget.h"

#include "timeline_model.h"

#include <QElapsedTimer>
#include <QFont>
#include <QFontMetrics>
#include <QScrollBar>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace lockstep::ui {

using core::TimeNs;

namespace timeline_detail {
inline constexpr int kRunHeaderHeight = 22;
inline constexpr int kRankHeaderHeight = 18;
inline constexpr int kHostHeaderHeight = 20;
inline constexpr int kLaneHeight = TimelineWidget::kLaneHeight;
inline constexpr int kGutterWidth = TimelineWidget::kGutterWidth;
inline constexpr int kRulerHeight = TimelineWidget::kRulerHeight;
inline constexpr int kStripHeight = 6;   // overlapped/exposed strip under the comm lane
inline constexpr int kRowGap = 2;        // between a rank's block and the next header
inline constexpr double kMinPixels = TimelineWidget::kMinPixels;
inline constexpr TimeNs kMinViewNs = 200; // zooming further shows nothing new at ns resolution
inline constexpr double kKeyZoom = 1.25;  // W/S per press
inline constexpr double kKeyPan = 0.15;   // A/D per press, fraction of the view
inline constexpr int kDragThreshold = 4;  // pixels before a press becomes a drag, not a click
inline constexpr int kMinLabelPx = 34;    // spans narrower than this carry no text
inline constexpr double kMinStepPx = 6.0; // narrower steps get no boundary lines or ruler marks
inline constexpr int kDigitWindowMs = 1000; // digits typed within this time make one step number
inline constexpr int kFlowHead = 6;       // arrow head length, pixels
// Below this many pixels per step the overlap pieces of a step (a few per bucket) are sub-pixel;
// the strip then colours each whole step by its exposed share instead.
inline constexpr double kStripDetailPx = 30.0;

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
inline int niceStride(double n)
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

inline QFont smallFontOf(const QFont& base)
{
    QFont f = base;
    f.setPointSizeF(std::max(6.5, base.pointSizeF() * 0.85));
    return f;
}
} // namespace timeline_detail

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
    std::vector<std::vector<HostGroup>> hosts;  // per run (relayout): its hosts, one when one host
    std::set<std::pair<int, int>> hostsCollapsed; // (run, host index)
    std::vector<std::unordered_map<int32_t, int>> hostOfRank; // per run: rank -> host index (several hosts only)
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
    int addRankRows(size_t run, const TimelineRunModel::RankLanes& rl, int y);
    int hostOf(int run, int32_t rank) const; // index into hosts[run]; -1: one host, or not found
    void updateScrollBar();
    int rowAt(int y) const;
    std::pair<size_t, size_t> visibleRows() const;
    const TimelineDrawList& build() const;
    void buildRows(TimelineDrawList& list, const QFontMetrics& baseFm, const QFontMetrics& smallFm, const QFontMetrics& boldFm) const;
    void buildTimeArea(TimelineDrawList& list, const QFontMetrics& smallFm) const;
    void buildStepLines(TimelineDrawList& list) const;
    void buildSpans(TimelineDrawList& list, const QFontMetrics& smallFm) const;
    void buildQuietStreams(TimelineDrawList& list) const;
    void buildReadyTicks(TimelineDrawList& list) const;
    void buildStrips(TimelineDrawList& list) const;
    void buildLateMarks(TimelineDrawList& list, const QFontMetrics& smallFm) const;
    void buildRuler(TimelineDrawList& list, const QFontMetrics& smallFm) const;
    TimelineOverlay buildOverlay() const;
    void addLinkedBucket(TimelineOverlay& o, const QFontMetrics& smallFm) const;
    QRectF clipToArea(QRectF r) const;
    const DrawSpan* hit(QPoint p) const;
    // Where a span is drawn: its row index and sub-row, or row -1 when hidden.
    std::pair<int, uint32_t> placeOf(SpanRef ref) const;
    QRectF spanRect(SpanRef ref) const;
    void computeLinked();
    void updateSearch();
    std::optional<SpanRef> findComm(int run, int32_t rank, int32_t step, int32_t bucket) const;
    void ensureVisible(SpanRef ref);
    void moveSelection(int key); // the arrow keys
};

} // namespace lockstep::ui
