// The Gantt timeline: a custom-painted widget (not Qt Charts). Rows are grouped by rank, one
// lane per kind or stream. Drawing goes through core's level of detail (core/lod.h), so a frame
// costs what is on screen, not the size of the run.
//
// Several runs can be shown stacked on one time axis (compare): each run's steps are aligned to
// a common origin (step `alignStep` of each run starts at t = 0) and zoom/pan are shared.
#pragma once

#include "lockstep/core/types.h"

#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

namespace lockstep::ui {

struct TimelineRun {
    std::shared_ptr<const core::Run> run;
    QString label; // shown in the row header when several runs are stacked
};

struct SpanRef {
    int run = -1;      // index into the runs given to setRuns
    qint64 span = -1;  // index into run->spans
    bool valid() const { return run >= 0 && span >= 0; }
    friend bool operator==(SpanRef, SpanRef) = default;
};

class TimelineRunModel;

// One row of the timeline, top to bottom (for tests, hit testing and embedding views).
enum class TimelineRowKind { RunHeader, RankHeader, Lane };
struct TimelineRow {
    TimelineRowKind kind = TimelineRowKind::Lane;
    int run = 0;
    int rank = 0;
    int lane = -1;   // LaneId::v for lane rows, -1 for headers
    int top = 0;     // widget y of the row's top (before vertical scrolling)
    int height = 0;
};

class TimelineWidget : public QWidget {
    Q_OBJECT
public:
    explicit TimelineWidget(QWidget* parent = nullptr);
    ~TimelineWidget() override;

    void setRuns(std::vector<TimelineRun> runs);
    const std::vector<TimelineRun>& runs() const;
    // Re-reads a run that grew (live view) without resetting the view.
    void updateRun(int index, std::shared_ptr<const core::Run> run);

    // View, in aligned nanoseconds (see header comment).
    void setViewRange(core::TimeNs t0, core::TimeNs t1);
    std::pair<core::TimeNs, core::TimeNs> viewRange() const;
    void fitAll();
    void zoomToStep(int step);
    void zoomBy(double factor, double anchorFraction = 0.5);
    void panBy(double fractionOfView);

    void select(SpanRef ref);
    SpanRef selection() const;

    // Replay: a vertical cursor; spans left of it are drawn as done, the rest dimmed.
    void setReplayCursor(std::optional<core::TimeNs> t);

    // Items drawn in the last paint (for tests and the frame-time benchmark).
    qint64 lastFrameItemCount() const;
    // All rows: run headers (only when several runs), rank headers and lane rows.
    int rowCount() const;

    // ---- Additions (not in the first contract) ----
    std::vector<TimelineRow> rows() const;
    int rankRowCount() const;              // rank header rows over all runs
    std::optional<core::TimeNs> replayCursor() const;
    // Aligned [start, end] of step `step` over all ranks of all runs; nullopt if absent.
    std::optional<std::pair<core::TimeNs, core::TimeNs>> stepRange(int step) const;
    // Widget x of an aligned time at the current view, and back.
    double xForTime(core::TimeNs aligned) const;
    core::TimeNs timeForX(double x) const;
    // Centre pixel of a span at the current view (its row and time); (-1, -1) if not shown.
    QPoint spanCenter(SpanRef ref) const;
    // The per-run model (alignment, LOD, strips); nullptr for a bad index.
    const TimelineRunModel* runModel(int index) const;
    // Wide as asked, tall enough for every row (so a QScrollArea around it scrolls rows).
    QSize sizeHint() const override;
    static constexpr int kGutterWidth = 132;
    static constexpr int kRulerHeight = 30;

signals:
    void selectionChanged(lockstep::ui::SpanRef ref);
    void viewRangeChanged(qint64 t0, qint64 t1);

protected:
    void paintEvent(QPaintEvent* event) override;
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
