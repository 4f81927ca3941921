// The Kernels tab beside the timeline: which kernels take the step (core's kernel table,
// core/kernels.h), for every rank or one, sortable; activating a row finds those kernels in the
// timeline (its search outlines them and steps through them); clicking a row outlines them.
#pragma once

#include "run_loader.h"

#include <QAbstractTableModel>
#include <QWidget>

#include "lockstep/core/kernels.h"

#include <vector>

class QComboBox;
class QLabel;
class QSortFilterProxyModel;
class QTableView;

namespace lockstep::ui {

class KernelTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Category, Count, Total, Mean, Share, ColumnCount };
    using QAbstractTableModel::QAbstractTableModel;
    void setRows(std::vector<core::KernelRow> rows);
    const std::vector<core::KernelRow>& rows() const { return m_rows; }
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    std::vector<core::KernelRow> m_rows;
};

class KernelPanel : public QWidget {
    Q_OBJECT
public:
    explicit KernelPanel(QWidget* parent = nullptr);
    void setRun(LoadedRunPtr run);
    KernelTableModel* model() const { return m_model; }
    QTableView* table() const { return m_table; }
    QComboBox* rankBox() const { return m_rank; }
    QLabel* hint() const { return m_hint; }

signals:
    // The user activated a row (double-click, Enter): the kernel's name, to find in the timeline.
    void kernelActivated(const QString& name);
    // The current row changed (a click, the arrow keys): the kernel's name, to outline in the
    // timeline without moving the view.
    void kernelSelected(const QString& name);

protected:
    void showEvent(QShowEvent* event) override;

private:
    void refresh(); // computes the table when shown and stale

    LoadedRunPtr m_run;
    bool m_stale = true;
    QComboBox* m_rank;
    QLabel* m_hint;
    QTableView* m_table;
    KernelTableModel* m_model;
    QSortFilterProxyModel* m_proxy;
};

} // namespace lockstep::ui
