// The details panel beside the timeline: everything known about the selected span, the
// bucket's parameters and its arrival across ranks (skew, late rank, the wait it caused, from
// core's straggler report) when it is a bucket all-reduce, and the breakdown of the step it
// belongs to on its rank. Or, for a measured time range, the range's length and its breakdown
// on every rank.
#pragma once

#include "lockstep/core/analysis.h"
#include "lockstep/core/types.h"

#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

class QLabel;
class QListWidget;

namespace lockstep::ui {

class TimelineRunModel;

class SpanDetailsPanel : public QWidget {
    Q_OBJECT
public:
    explicit SpanDetailsPanel(QWidget* parent = nullptr);
    ~SpanDetailsPanel() override;

    // spanIndex < 0 (or out of range) clears the panel.
    void setSelection(const TimelineRunModel& model, qint64 spanIndex);
    // A measured range [t0, t1) in absolute time: its length and each rank's breakdown of it.
    void setRange(const TimelineRunModel& model, core::TimeNs t0, core::TimeNs t1);
    // `hint` replaces the "click a span" line (a run shown without its spans says why).
    void clear(const QString& hint = {});

    // What is shown, for tests and for copying.
    QString summaryText() const;           // the key/value part, as plain text
    QStringList bucketParams() const;      // the bucket's parameter names (empty if none)
    std::optional<core::StepBreakdown> stepBreakdown() const;
    // The measured range's breakdown per rank (empty unless setRange was the last call).
    const std::vector<core::StepBreakdown>& rangeBreakdown() const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace lockstep::ui
