// The Ranks page, for runs with many ranks: the rank × step heatmap (step time, wait caused or
// exposed communication, core's numbers) and a sortable table of core's per-rank summaries.
// Clicking a cell or a row asks the timeline to show that rank (and step).
#pragma once

#include "run_loader.h"

#include <QAbstractTableModel>
#include <QWidget>

class QComboBox;
class QLabel;
class QSortFilterProxyModel;
class QTableView;

namespace lockstep::ui {

class RankHeatmap;

// One row per rank: core::RankSummary (means over the rank's steady steps).
class RankTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Rank, StepTime, ComputeOnly, Overlapped, Exposed, Idle, WaitCaused, StepsLate, CpuTime, CpuWait, ColumnCount };
    static constexpr int SortRole = Qt::UserRole + 1;
    static constexpr int RankRole = Qt::UserRole + 2;

    explicit RankTableModel(QObject* parent = nullptr);
    void setRun(LoadedRunPtr run);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    LoadedRunPtr m_run;
    std::vector<int32_t> m_stragglers;
};

class RanksPage : public QWidget {
    Q_OBJECT
public:
    explicit RanksPage(QWidget* parent = nullptr);
    void setRun(LoadedRunPtr run);

    RankHeatmap* heatmap() const { return m_heatmap; }
    RankTableModel* rankModel() const { return m_model; }

signals:
    // Show `rank` in the timeline; `step` >= 0: zoomed to that step.
    void showInTimeline(int rank, int step);

private:
    LoadedRunPtr m_run;
    QComboBox* m_metric;
    QLabel* m_title;
    RankHeatmap* m_heatmap;
    RankTableModel* m_model;
    QSortFilterProxyModel* m_proxy;
    QTableView* m_table;
};

} // namespace lockstep::ui
