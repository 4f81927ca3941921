// The Kernels tab (kernel_panel.h).
#include "kernel_panel.h"

#include "timeline/format.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>

namespace lockstep::ui {

void KernelTableModel::setRows(std::vector<core::KernelRow> rows)
{
    beginResetModel();
    m_rows = std::move(rows);
    endResetModel();
}

int KernelTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int KernelTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant KernelTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || size_t(index.row()) >= m_rows.size())
        return {};
    const core::KernelRow& r = m_rows[size_t(index.row())];
    if (role == Qt::DisplayRole) {
        switch (Column(index.column())) {
        case Name: return displayText(r.name, 120);
        case Category: return QString::fromLatin1(core::spanCategoryName(r.category));
        case Count: return QString::number(r.countPerStep, 'f', r.countPerStep < 10 ? 1 : 0);
        case Total: return formatMs(r.totalMsPerStep);
        case Mean: return formatMs(r.meanMs);
        case Share: return formatPercent(r.shareOfStep);
        case ColumnCount: break;
        }
    }
    if (role == Qt::UserRole) { // the value sorted by
        switch (Column(index.column())) {
        case Name: return QString::fromStdString(r.name);
        case Category: return QString::fromLatin1(core::spanCategoryName(r.category));
        case Count: return r.countPerStep;
        case Total: return r.totalMsPerStep;
        case Mean: return r.meanMs;
        case Share: return r.shareOfStep;
        case ColumnCount: break;
        }
    }
    if (role == Qt::ToolTipRole && index.column() == Name)
        return displayText(r.name, 2000) + tr("\n(%1; double-click or Enter: find these in the timeline)")
                                              .arg(QString::fromLatin1(core::spanKindName(r.kind)));
    if (role == Qt::TextAlignmentRole)
        return index.column() <= Category ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

QVariant KernelTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal)
        return {};
    static const char* kTitles[] = {"Kernel", "Category", "Count", "Total", "Mean", "Share"};
    static const char* kTips[] = {"the kernel's name (copies and memsets by their kind)",
                                  "compute, communication or memory, as the step breakdown counts it",
                                  "launches per steady step and rank",
                                  "their summed time per steady step and rank",
                                  "mean duration of one",
                                  "total as a share of the mean step time (streams run at once: shares may add "
                                  "up to more than 100 %)"};
    if (role == Qt::DisplayRole && section >= 0 && section < ColumnCount)
        return tr(kTitles[section]);
    if (role == Qt::ToolTipRole && section >= 0 && section < ColumnCount)
        return tr(kTips[section]);
    return {};
}

KernelPanel::KernelPanel(QWidget* parent)
    : QWidget(parent)
    , m_rank(new QComboBox(this))
    , m_hint(new QLabel(this))
    , m_table(new QTableView(this))
    , m_model(new KernelTableModel(this))
    , m_proxy(new QSortFilterProxyModel(this))
{
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(Qt::UserRole);
    m_table->setModel(m_proxy);
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(KernelTableModel::Total, Qt::DescendingOrder);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(20);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->horizontalHeader()->setSectionResizeMode(KernelTableModel::Name, QHeaderView::Stretch);
    m_hint->setWordWrap(true);
    m_hint->setTextFormat(Qt::PlainText);
    m_rank->setToolTip(tr("Every rank (per-rank means) or one rank"));
    connect(m_rank, &QComboBox::activated, this, [this] {
        m_stale = true;
        refresh();
    });
    const auto activate = [this](const QModelIndex& index) {
        const QModelIndex source = m_proxy->mapToSource(index);
        if (source.isValid() && size_t(source.row()) < m_model->rows().size())
            emit kernelActivated(QString::fromStdString(m_model->rows()[size_t(source.row())].name));
    };
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& index) {
        const QModelIndex source = m_proxy->mapToSource(index);
        if (source.isValid() && size_t(source.row()) < m_model->rows().size())
            emit kernelSelected(QString::fromStdString(m_model->rows()[size_t(source.row())].name));
    });
    connect(m_table, &QTableView::activated, this, activate);
    connect(m_table, &QTableView::doubleClicked, this, activate);
    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Ranks:"), this));
    top->addWidget(m_rank, 1);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(top);
    layout->addWidget(m_hint);
    layout->addWidget(m_table, 1);
}

void KernelPanel::setRun(LoadedRunPtr run)
{
    m_run = std::move(run);
    {
        QSignalBlocker block(m_rank);
        m_rank->clear();
        m_rank->addItem(tr("all ranks"), -1);
        if (m_run)
            for (const core::RankInfo& r : m_run->run->ranks)
                m_rank->addItem(tr("rank %1").arg(r.rank), r.rank);
    }
    m_stale = true;
    if (isVisible())
        refresh();
}

void KernelPanel::showEvent(QShowEvent* event)
{
    QWidget::showEvent(event);
    refresh();
}

void KernelPanel::refresh()
{
    if (!m_stale)
        return;
    m_stale = false;
    if (!m_run) {
        m_model->setRows({});
        m_hint->setText(tr("No run is open."));
        return;
    }
    if (!m_run->detailed) { // the table is counted from spans
        m_model->setRows({});
        m_hint->setText(waitingForSpans(*m_run));
        return;
    }
    core::KernelTableOptions options;
    options.rank = m_rank->currentData().toInt();
    std::vector<core::KernelRow> rows = core::kernelTable(*m_run->run, *m_run->analysis, options);
    m_hint->setText(rows.empty() ? tr("This run has no device work (kernels, copies, memsets): a CPU run's work is "
                                      "in the timeline's compute lanes.")
                                 : tr("Device work by name over the steady steps, largest total first. Click a row to "
                                      "outline those kernels in the timeline; double-click to go to the first."));
    m_model->setRows(std::move(rows));
    m_table->resizeColumnsToContents();
    m_table->horizontalHeader()->setSectionResizeMode(KernelTableModel::Name, QHeaderView::Stretch);
}

} // namespace lockstep::ui
