// The Timeline page: the Gantt widget of the current run with, beside it, the run summary (and
// its bucket table) and the details of the selection (a span, its bucket across ranks, or a
// measured range) over the replay's bucket states. Above it: fit, step, rank order, collapse,
// and span search. Also hosts the live view of a run being recorded (the widget is updated in
// place, the view kept).
#pragma once

#include "run_loader.h"
#include "step_box.h"

#include <QWidget>

class QComboBox;
class QHBoxLayout;
class QLabel;
class QLineEdit;
class QSplitter;
class QTabWidget;
class QTimer;
class QToolButton;

namespace lockstep::ui {

class RunLoader;

class BucketStatusView;
class KernelPanel;
class ReplayBar;
class ReplayController;
class SpanDetailsPanel;
class SummaryPanel;
class TimelineWidget;

class TimelinePage : public QWidget {
    Q_OBJECT
public:
    explicit TimelinePage(QWidget* parent = nullptr);
    ~TimelinePage() override;

    void setRun(LoadedRunPtr run);
    // Live view: replaces the run without resetting zoom/pan.
    void updateLiveRun(LoadedRunPtr run);
    void setLive(bool live, const QString& text = {});
    LoadedRunPtr run() const { return m_run; }
    TimelineWidget* timeline() const { return m_timeline; }
    SummaryPanel* summaryPanel() const { return m_summary; }
    SpanDetailsPanel* detailsPanel() const { return m_details; }
    ReplayController* replay() const { return m_replay; }
    StepBox* stepBox() const { return m_step; }
    QLineEdit* searchEdit() const { return m_search; }
    QLabel* searchCount() const { return m_searchCount; }

    // Zooms to `step`, selects rank 0's largest bucket all-reduce of that step (its bucket is
    // linked across ranks) and puts the replay cursor at `replayFraction` of the step
    // (screenshots, demos).
    void focusStep(int step, double replayFraction = 0.5);
    // Shows `rank` (expanded, scrolled to) and, when step >= 0, zooms to the step.
    void jumpTo(int rank, int step);
    enum SideTab { SummaryTab, DetailsTab, KernelsTab };
    void showSideTab(SideTab tab);
    KernelPanel* kernelPanel() const { return m_kernels; } // the Kernels tab (tests click its rows)
    // Width of the summary / details side panel, pixels (the summary screenshot widens it).
    void setSideWidth(int width);

signals:
    void message(const QString& text);

public slots:
    void fitAll();
    void zoomToStep();
    void focusSearch();
    void nextMatch();
    void previousMatch();

protected:
    bool eventFilter(QObject* watched, QEvent* event) override; // Esc in the search box

private:
    QHBoxLayout* buildToolRow();
    void buildPanes();
    void connectNavigation();
    void showSelection();
    void announce(const QString& text);
    void selectLargestCollective(int rank, int step);
    void runSearch();
    void updateSearchCount();

    LoadedRunPtr m_run;
    TimelineWidget* m_timeline;
    SummaryPanel* m_summary;
    SpanDetailsPanel* m_details;
    KernelPanel* m_kernels;
    ReplayController* m_replay;
    ReplayBar* m_replayBar;
    BucketStatusView* m_bucketStates;
    QTabWidget* m_side;
    QSplitter* m_split = nullptr;
    StepBox* m_step;
    QComboBox* m_order;
    QLineEdit* m_search;
    QLabel* m_searchCount;
    QTimer* m_searchTimer;
    int m_match = -1;
    QLabel* m_title;
    QLabel* m_live;
    QLabel* m_overviewNote; // shown while the run is drawn from its overview (LoadedRun::detailed)
    void updateOverviewNote();
public:
    // A window of spans is about to be asked for, or is being streamed (screenshots wait for it).
    bool streamingSpans() const;
    // Windows of spans streamed into the timeline since the page was made.
    int streamedWindows() const { return m_streamedWindows; }

private:
    // A run shown from its overview and too big to load whole: the spans of the lanes on screen
    // are streamed for a window around the view whenever the view is zoomed in past what the
    // overview draws exactly (RunLoader::loadWindowOf), debounced, newest request winning.
    void streamWindow();
    // The run is shown from its overview and too big to load whole: its spans are streamed.
    bool streamsSpans() const;
    // What the details panel says where selecting or measuring needs spans the run has not loaded.
    QString needsSpansText() const;
    RunLoader* m_windowLoader;
    QTimer* m_windowTimer;
    QString m_windowNote; // what streaming last said (shown in the overview note's tooltip)
    int m_streamedWindows = 0;
    QString m_lastMessage;
};

} // namespace lockstep::ui
