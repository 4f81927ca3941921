// The run summary beside the timeline (issue: "tells the truth at a glance"): step time, the
// five-part breakdown of the step, overlap and exposed communication, the straggler with its
// evidence and the wait it caused, and a sortable per-bucket table whose rows select the bucket
// in the timeline. Every number is core's (core::analyze); nothing here computes a metric.
#pragma once

#include "run_loader.h"

#include <QAbstractTableModel>
#include <QWidget>

class QLabel;
class QSortFilterProxyModel;
class QTableView;

namespace lockstep::ui {

// One row per bucket of core's run summary (means over steady steps and ranks).
class BucketTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Bucket, Bytes, Params, ReadyToLaunch, Duration, Exposed, Hidden, Algbw, Busbw, Skew, WaitCaused, LateRank, ColumnCount };
    static constexpr int SortRole = Qt::UserRole + 1;   // raw numbers for sorting
    static constexpr int BucketRole = Qt::UserRole + 2; // the bucket index of a row

    explicit BucketTableModel(QObject* parent = nullptr);
    void setSummary(const core::RunSummary* summary); // nullptr clears; the summary must outlive it

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<core::BucketSummary> m_rows;
    bool m_multiRank = false;
};

class SummaryPanel : public QWidget {
    Q_OBJECT
public:
    explicit SummaryPanel(QWidget* parent = nullptr);
    void setRun(LoadedRunPtr run);

    // The text shown (tests read it; it is what the user reads).
    QString summaryText() const;
    BucketTableModel* bucketModel() const { return m_buckets; }
    QSortFilterProxyModel* bucketProxy() const { return m_proxy; }
    QTableView* bucketTable() const { return m_table; }

signals:
    // A row of the bucket table was clicked: show this bucket in the timeline.
    void bucketActivated(int bucket);

private:
    LoadedRunPtr m_run;
    QLabel* m_text;
    QWidget* m_bar;
    BucketTableModel* m_buckets;
    QSortFilterProxyModel* m_proxy;
    QTableView* m_table;
};

} // namespace lockstep::ui
