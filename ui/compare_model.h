// Metrics of several runs side by side. Rows are metrics, columns are runs; every run but the
// baseline (the first by default, any one by choice) gets an extra column with its difference to
// the baseline, in the metric's unit and in percent ("+1.20 ms (+3.4 %)"), green when it is
// better and red when it is worse (what "better" means depends on the metric). Numbers are
// core's run summaries; "—" where core says not applicable (one rank).
#pragma once

#include "lockstep/core/analysis.h"

#include <QAbstractTableModel>
#include <QStringList>

#include <vector>

namespace lockstep::ui {

class CompareModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Metric { StepTime, ComputeOnly, Overlapped, Exposed, MemoryOnly, Idle, Comm, OverlapPct, Throughput, Stragglers, MetricCount };
    static constexpr int ValueRole = Qt::UserRole + 1; // the raw number (double) of a cell

    explicit CompareModel(QObject* parent = nullptr);
    void setRuns(std::vector<core::RunSummary> runs, QStringList labels);
    // The run the others are compared with (an index into the runs; clamped).
    void setBaseline(int run);
    int baseline() const { return m_baseline; }

    // Column layout: 0 = metric name; then per run i its value column and, unless i is the
    // baseline, its difference column right after it.
    int valueColumn(int run) const;
    int diffColumn(int run) const; // -1 for the baseline
    static double metricValue(const core::RunSummary& s, Metric m);
    // (value - base) / base, NaN when undefined.
    static double relativeDifference(double base, double value);
    static bool lowerIsBetter(Metric m);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    // (run, is diff column) of a column >= 1.
    std::pair<int, bool> columnRun(int column) const;

    std::vector<core::RunSummary> m_runs;
    QStringList m_labels;
    int m_baseline = 0;
};

} // namespace lockstep::ui
