// The Gantt timeline: a custom-painted widget (not Qt Charts). Rows are grouped by rank, one
// lane per kind or stream, a lane as tall as its overlapping spans need (core/lod.h packs them
// into sub-rows). Drawing goes through core's level of detail, so a frame costs what is on
// screen, not the size of the run; a frame is built as flat draw lists (timeline_draw.h), then
// painted.
//
// Several runs can be shown stacked on one time axis (compare): each run's steps are aligned to
// a common origin (step `alignStep` of each run starts at t = 0, or the step given to
// setAlignStep) and zoom/pan are shared.
//
// What the user can do here, besides zoom and pan: select a span (its bucket is then linked
// across ranks: outlined on every rank, arrows from the late rank's launch, the arrival skew,
// the gradient-ready instants that made it ready); measure a time range (Shift+drag); search
// span names; move between spans with the arrow keys; collapse ranks and order them by the
// wait they caused or their step time; replay a step with a cursor.
#pragma once

#include "lockstep/core/types.h"
#include "host_groups.h"
#include "timeline_draw.h"

#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

class QScrollBar;

namespace lockstep::ui {

class TimelineRunModel;

struct TimelineRun {
    std::shared_ptr<const core::Run> run;
    QString label; // shown in the row header when several runs are stacked
    // Built off the GUI thread (LoadedRun::timeline). When null, setRuns builds it on the spot:
    // fine for small runs and tests, seconds for a 10 M-span run.
    std::shared_ptr<const TimelineRunModel> model;
};

struct SpanRef {
    int run = -1;      // index into the runs given to setRuns
    qint64 span = -1;  // index into run->spans
    bool valid() const { return run >= 0 && span >= 0; }
    friend bool operator==(SpanRef, SpanRef) = default;
};

// One row of the timeline, top to bottom (for tests, hit testing and embedding views).
// QuietStreams: a rank's nearly idle GPU streams (TimelineRunModel::RankLanes::quietLanes) folded
// into one row that draws the union of their spans; expanded, their lanes follow it.
// HostHeader: a run whose ranks ran on more than one host (RankInfo::host) gets one per host,
// above its ranks (host_groups.h); collapsed, the host's ranks are hidden. A run on one host has
// none.
enum class TimelineRowKind { RunHeader, RankHeader, Lane, QuietStreams, HostHeader };
struct TimelineRow {
    TimelineRowKind kind = TimelineRowKind::Lane;
    int run = 0;
    int rank = 0;
    int lane = -1;   // LaneId::v for lane rows, -1 for headers
    int top = 0;     // content y of the row's top (widget y = top - scroll)
    int height = 0;
    int subRows = 1; // lane rows: sub-rows of overlapping spans
    bool collapsed = false; // rank headers: the rank's lanes are hidden; QuietStreams: folded;
                            // host headers: the host's ranks are hidden
    int host = -1;          // index into hosts(run) of the row's host; -1 on a run on one host
};

enum class RankOrder { ByRank, ByWaitCaused, ByStepTime };

// The selected span's bucket on every rank (docs/design.md's arrival skew and wait caused come from
// core's straggler report).
struct LinkedBucket {
    int run = -1;
    int32_t step = core::kNoStep;
    int32_t bucket = core::kNoBucket;
    std::vector<SpanRef> spans;          // the bucket's all-reduce on each rank, by rank
    std::vector<int32_t> ranks;          // parallel to spans
    std::vector<size_t> readyInstants;   // its gradient-ready instants on every rank (run.instants)
    int32_t lateRank = -1;               // the last rank to launch it
    core::TimeNs skew = -1;              // max launch - min launch; -1 when unknown (one rank)
    core::TimeNs waitCaused = -1;        // core's wait caused by the late rank
    bool valid() const { return run >= 0 && !spans.empty(); }
};

class TimelineWidget : public QWidget {
    Q_OBJECT
public:
    explicit TimelineWidget(QWidget* parent = nullptr);
    ~TimelineWidget() override;

    void setRuns(std::vector<TimelineRun> runs);
    const std::vector<TimelineRun>& runs() const;
    // Replaces a run that grew (live view) without resetting the view.
    void updateRun(int index, TimelineRun run);

    // View, in aligned nanoseconds (see header comment).
    void setViewRange(core::TimeNs t0, core::TimeNs t1);
    std::pair<core::TimeNs, core::TimeNs> viewRange() const;
    void fitAll();
    void zoomToStep(int step);
    void zoomBy(double factor, double anchorFraction = 0.5);
    void panBy(double fractionOfView);
    // Aligns every run on this step instead of its first steady step (-1: back to the default).
    void setAlignStep(int step);
    int alignStepOverride() const;

    void select(SpanRef ref);
    SpanRef selection() const;
    const LinkedBucket& linkedBucket() const;
    // Selects bucket `bucket` of `step` of run `run` (rank `rank`'s all-reduce, or the first
    // rank's) and brings it into view. False when there is no such all-reduce.
    bool selectBucket(int run, int32_t step, int32_t bucket, int32_t rank = -1);

    // Replay: a vertical cursor; what is right of it is dimmed.
    void setReplayCursor(std::optional<core::TimeNs> t);
    std::optional<core::TimeNs> replayCursor() const;

    // Measure: an aligned time range, shaded, its length written over it (Shift+drag sets it).
    void setMeasureRange(std::optional<std::pair<core::TimeNs, core::TimeNs>> range);
    std::optional<std::pair<core::TimeNs, core::TimeNs>> measureRange() const;

    // Search: spans whose name contains `text` (case-insensitive) are outlined, or with `exact`
    // spans named exactly `text` (a kernel's row: "Memcpy DtoH" without "Memcpy DtoH (Device ->
    // Pinned)"); the matches, in time order over all runs, for next/previous. An empty text clears it.
    int setSearchText(const QString& text, bool exact = false);
    const std::vector<SpanRef>& searchMatches() const;
    // Selects match `index` and brings it into view.
    void showSearchMatch(int index);

    // Rows: collapsing a rank hides its lanes; the order of ranks within a run.
    void setCollapsed(int run, int rank, bool collapsed);
    bool isCollapsed(int run, int rank) const;
    // Hosts (runs whose ranks ran on several hosts): the run's hosts with their ranks (one group
    // for a run on one host, which then has no host rows), and collapsing a host, which hides its
    // ranks under its header row (a click on the header, or H for every host).
    const std::vector<HostGroup>& hosts(int run) const;
    void setHostCollapsed(int run, int host, bool collapsed);
    bool isHostCollapsed(int run, int host) const;
    void toggleAllHostsCollapsed();
    void setAllCollapsed(bool collapsed);
    // The "other streams" row of a rank (its nearly idle GPU streams): folded by default, and
    // again on every setRuns. setStreamsFolded on a rank without quiet streams does nothing.
    void setStreamsFolded(int run, int rank, bool folded);
    bool streamsFolded(int run, int rank) const;
    // O: expands every rank's quiet streams if any is folded, else folds them all.
    void toggleAllStreamsFolded();
    void setRankOrder(RankOrder order);
    // Expands the rank and scrolls its rows into view.
    void revealRank(int run, int rank);
    int scrollOffset() const;
    void setScrollOffset(int y);
    QScrollBar* verticalScrollBar() const;

    // The draw lists of the current view (built if needed, without painting) and the overlay.
    const TimelineDrawList& drawList() const;
    TimelineOverlay overlay() const;
    // Items drawn in the last paint (for tests and the frame-time benchmark).
    qint64 lastFrameItemCount() const;
    // Drops the cached draw lists: the next paint builds them again, as the first paint of a view
    // does (the frame-time benchmark repeats a slow frame with it).
    void forgetDrawList();
    // All rows: run headers (only when several runs), rank headers and lane rows.
    int rowCount() const;
    std::vector<TimelineRow> rows() const;
    int rankRowCount() const; // rank header rows over all runs
    // Aligned [start, end] of step `step` over all ranks of all runs; nullopt if absent.
    std::optional<std::pair<core::TimeNs, core::TimeNs>> stepRange(int step) const;
    // Widget x of an aligned time at the current view, and back.
    double xForTime(core::TimeNs aligned) const;
    core::TimeNs timeForX(double x) const;
    // Centre pixel of a span at the current view (its row, sub-row and time); (-1, -1) if not shown.
    QPoint spanCenter(SpanRef ref) const;
    // The per-run model (alignment, LOD, strips); nullptr for a bad index.
    const TimelineRunModel* runModel(int index) const;
    // The lanes of run `index` with a row on screen (scrolled into view, not folded away).
    std::vector<core::LaneId> visibleLanes(int index) const;
    // Nanoseconds per pixel of the time area at the current view.
    double nsPerPixel() const;
    QSize sizeHint() const override;
    static constexpr int kGutterWidth = 132;
    static constexpr int kRulerHeight = 30;
    // Spans narrower than this many pixels fold into one item (Tracy folds below ~3 px).
    static constexpr double kMinPixels = 3.0;
    static constexpr int kLaneHeight = 22; // one sub-row

signals:
    void selectionChanged(lockstep::ui::SpanRef ref);
    void viewRangeChanged(qint64 t0, qint64 t1);
    void measureRangeChanged();
    // Digit keys typed a step number (several digits within a second make one number).
    void stepRequested(int step);
    void rowsChanged();

protected:
    void paintEvent(QPaintEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void leaveEvent(QEvent* event) override;
    bool event(QEvent* event) override; // tooltips

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace lockstep::ui
