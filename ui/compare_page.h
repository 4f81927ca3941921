// The Compare page: two or more open runs stacked on one time axis (one TimelineWidget, so zoom
// and pan are shared and steps aligned by the widget, on the first steady step or a chosen one)
// and their metrics side by side against a chosen baseline, and what changed from the baseline to
// each run: configuration, the parts of the step that moved beyond noise, the spans that grew most.
#pragma once

#include "compare_model.h"
#include "run_loader.h"

#include <QWidget>

#include <functional>
#include <vector>

class QComboBox;
class QListWidget;
class QPlainTextEdit;
class QSpinBox;
class QTableView;
class QLabel;

namespace lockstep::ui {

class TimelineWidget;

class ComparePage : public QWidget {
    Q_OBJECT
public:
    explicit ComparePage(QWidget* parent = nullptr);
    // The open runs the user can choose from; newly opened runs are checked while fewer than
    // two are checked.
    void setOpenRuns(std::vector<LoadedRunPtr> runs);
    // Checks exactly the runs with these paths (in the open runs' order).
    void setChecked(const QStringList& paths);
    std::vector<LoadedRunPtr> comparedRuns() const { return m_compared; }

    CompareModel* model() const { return m_model; }
    QTableView* table() const { return m_table; }
    TimelineWidget* timeline() const { return m_timeline; }
    QListWidget* runList() const { return m_list; }
    QComboBox* baselineBox() const { return m_baseline; }
    QSpinBox* alignBox() const { return m_align; }
    // "What changed": core's diff (core/run_diff.h) of each compared run against the baseline,
    // computed in the thread pool (a diff of large runs takes seconds): the view says it is being
    // computed, and the text is applied when ready (changesReady). A newer request (other runs
    // checked, another baseline) supersedes one still running: its result is dropped.
    QPlainTextEdit* changesView() const { return m_changes; }
    // True while a diff is being computed for the current runs and baseline.
    bool changesPending() const { return m_changesPending; }
    void uncheckAll();

    // Tests only: called in the diff's worker thread before it computes (null: nothing), so a
    // test can hold the job and see the GUI thread go on.
    static void setDiffHookForTesting(std::function<void()> hook);

signals:
    // The "What changed" text for the current runs and baseline has been applied.
    void changesReady();

private:
    void refresh();
    void updateChanges();

    std::vector<LoadedRunPtr> m_open;
    std::vector<LoadedRunPtr> m_compared;
    QListWidget* m_list;
    TimelineWidget* m_timeline;
    CompareModel* m_model;
    QTableView* m_table;
    QLabel* m_hint;
    QComboBox* m_baseline;
    QSpinBox* m_align; // -1: the first steady step of each run
    QPlainTextEdit* m_changes;
    quint64 m_changesGeneration = 0; // the newest diff request; older results are dropped
    bool m_changesPending = false;
};

} // namespace lockstep::ui
