// The Timeline page: the Gantt widget of the current run, the details of the selected span and,
// when the timeline library provides them, the replay controls. Also hosts the live view of a run
// being recorded (the widget is updated in place, the view kept).
#pragma once

#include "run_loader.h"

#include <QWidget>

class QLabel;
class QSpinBox;
class QTextBrowser;

namespace lockstep::ui {

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

    // Zooms to `step`, selects rank 0's largest bucket all-reduce of that step and, when replay
    // is available, puts the replay cursor at `replayFraction` of the step (screenshots, demos).
    void focusStep(int step, double replayFraction = 0.5);

public slots:
    void fitAll();
    void zoomToStep();

private:
    void showSelection();

    LoadedRunPtr m_run;
    TimelineWidget* m_timeline;
    QWidget* m_details = nullptr;     // SpanDetailsPanel when available
    QTextBrowser* m_fallbackDetails = nullptr;
    QWidget* m_replay = nullptr;
    QSpinBox* m_step;
    QLabel* m_title;
    QLabel* m_live;
    struct Extras;
    std::unique_ptr<Extras> m_extras;
};

} // namespace lockstep::ui
