// Metrics of several runs side by side. Rows are metrics, columns are runs; every run after the
// first gets an extra column with its difference to the first in percent, green when it is
// better and red when it is worse (what "better" means depends on the metric).
#pragma once

#include "lockstep/core/analysis.h"

#include <QAbstractTableModel>
#include <QStringList>

#include <vector>

namespace lockstep::ui {

class CompareModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Metric { StepTime, Compute, Comm, Overlapped, Exposed, Idle, OverlapPct, Throughput, Stragglers, MetricCount };
    static constexpr int ValueRole = Qt::UserRole + 1; // the raw number (double) of a cell

    explicit CompareModel(QObject* parent = nullptr);
    void setRuns(std::vector<core::RunSummary> runs, QStringList labels);

    // Column layout: 0 = metric name; then per run i: value column, and for i >= 1 a diff column.
    int valueColumn(int run) const;
    int diffColumn(int run) const; // -1 for run 0
    static double metricValue(const core::RunSummary& s, Metric m);
    // (value - base) / base, NaN when undefined.
    static double relativeDifference(double base, double value);
    static bool lowerIsBetter(Metric m);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<core::RunSummary> m_runs;
    QStringList m_labels;
};

} // namespace lockstep::ui
