// The details panel beside the timeline: everything known about the selected span, the
// bucket's parameters when it is a bucket all-reduce, and the breakdown of the step it belongs
// to on its rank (compute / overlapped / exposed / idle).
#pragma once

#include "lockstep/core/analysis.h"
#include "lockstep/core/types.h"

#include <QWidget>

#include <memory>
#include <optional>

class QLabel;
class QListWidget;

namespace lockstep::ui {

class SpanDetailsPanel : public QWidget {
    Q_OBJECT
public:
    explicit SpanDetailsPanel(QWidget* parent = nullptr);
    ~SpanDetailsPanel() override;

    // spanIndex < 0 (or out of range) clears the panel. The run must outlive the selection
    // (the panel keeps a pointer to it until the next call).
    void setSelection(const core::Run& run, qint64 spanIndex);
    void clear();

    // What is shown, for tests and for copying.
    QString summaryText() const;           // the key/value part, as plain text
    QStringList bucketParams() const;      // the bucket's parameter names (empty if none)
    std::optional<core::StepBreakdown> stepBreakdown() const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace lockstep::ui
