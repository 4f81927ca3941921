// The Ranks page (see ranks_page.h).
#include "ranks_page.h"

#include "format.h"
#include "timeline/rank_heatmap.h"
#include "timeline/timeline_palette.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace lockstep::ui {

RankTableModel::RankTableModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void RankTableModel::setRun(LoadedRunPtr run)
{
    beginResetModel();
    m_run = std::move(run);
    m_stragglers = m_run ? m_run->summary().stragglers : std::vector<int32_t>{};
    endResetModel();
}

int RankTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !m_run ? 0 : int(m_run->analysis->ranks.size());
}

int RankTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant RankTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal)
        return {};
    if (role == Qt::DisplayRole) {
        switch (section) {
        case Rank: return tr("Rank");
        case StepTime: return tr("Step time");
        case ComputeOnly: return tr("Compute only");
        case Overlapped: return tr("Overlapped");
        case Exposed: return tr("Exposed comm");
        case Idle: return tr("Idle");
        case WaitCaused: return tr("Wait caused");
        case StepsLate: return tr("Steps late");
        case CpuTime: return tr("CPU");
        case CpuWait: return tr("CPU wait");
        }
    }
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case WaitCaused: return tr("Mean over steady steps of the wait this rank caused the others");
        case StepsLate: return tr("Steady steps in which this rank arrived last (the step's late rank); the run's straggler verdict asks for more");
        case CpuTime: return tr("Mean over steady steps of the time the training thread ran on a CPU (the kernel's "
                                "scheduler statistics; — where not recorded)");
        case CpuWait: return tr("Mean over steady steps of the time the training thread was ready to run but waited "
                                "for a CPU: a rank the machine slowed waits longer");
        }
        return tr("Means over this rank's steady steps; click a row to show the rank in the timeline");
    }
    return {};
}

QVariant RankTableModel::data(const QModelIndex& index, int role) const
{
    if (!m_run || !checkIndex(index, CheckIndexOption::IndexIsValid))
        return {};
    const core::RankSummary& r = m_run->analysis->ranks[size_t(index.row())];
    auto value = [&](int column) -> double {
        switch (column) {
        case Rank: return r.rank;
        case StepTime: return r.stepTimeMs;
        case ComputeOnly: return r.computeOnlyMs;
        case Overlapped: return r.overlappedMs;
        case Exposed: return r.exposedCommMs;
        case Idle: return r.idleMs;
        case WaitCaused: return r.meanWaitCausedMs;
        case StepsLate: return r.stepsAsStraggler;
        case CpuTime: return r.cpuMs;
        case CpuWait: return r.runqMs;
        }
        return std::nan("");
    };
    if (role == RankRole)
        return r.rank;
    if (role == SortRole) {
        const double v = value(index.column());
        return std::isfinite(v) ? v : -1.0;
    }
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
        case Rank: return std::find(m_stragglers.begin(), m_stragglers.end(), r.rank) != m_stragglers.end()
                            ? tr("%1 (straggler)").arg(r.rank) : QString::number(r.rank);
        case StepsLate: return m_run->summary().multiRank ? QVariant(r.stepsAsStraggler) : QVariant(QStringLiteral("—"));
        default: {
            const double v = value(index.column());
            return std::isfinite(v) ? formatMs(v) : QStringLiteral("—");
        }
        }
    }
    if (role == Qt::TextAlignmentRole)
        return index.column() == Rank ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ForegroundRole && index.column() == Rank
        && std::find(m_stragglers.begin(), m_stragglers.end(), r.rank) != m_stragglers.end())
        return palette::stragglerColor();
    return {};
}

RanksPage::RanksPage(QWidget* parent)
    : QWidget(parent)
    , m_metric(new QComboBox(this))
    , m_title(new QLabel(this))
    , m_heatmap(new RankHeatmap(this))
    , m_model(new RankTableModel(this))
    , m_proxy(new QSortFilterProxyModel(this))
    , m_table(new QTableView(this))
{
    for (int m = 0; m < RankStepMatrix::MetricCount; ++m)
        m_metric->addItem(QString::fromUtf8(RankStepMatrix::metricName(RankStepMatrix::Metric(m))), m);
    m_metric->setToolTip(tr("What the heatmap's cells show"));
    connect(m_metric, &QComboBox::currentIndexChanged, this,
            [this](int i) { m_heatmap->setMetric(RankStepMatrix::Metric(m_metric->itemData(i).toInt())); });
    m_heatmap->setToolTip(QString());
    connect(m_heatmap, &RankHeatmap::cellClicked, this, &RanksPage::showInTimeline);

    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(RankTableModel::SortRole);
    m_table->setModel(m_proxy);
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(RankTableModel::WaitCaused, Qt::DescendingOrder);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(20);
    m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    // Sized from the rows on screen and the first 100, not all 1000 of a 1024-rank run: measuring
    // every row's text held the GUI thread 27 ms each time the table was filled.
    m_table->horizontalHeader()->setResizeContentsPrecision(100);
    connect(m_table, &QTableView::clicked, this,
            [this](const QModelIndex& index) { emit showInTimeline(index.data(RankTableModel::RankRole).toInt(), -1); });

    QFont bold = m_title->font();
    bold.setBold(true);
    m_title->setFont(bold);
    m_title->setTextFormat(Qt::PlainText); // the run's name is text, never markup
    auto* bar = new QHBoxLayout;
    bar->addWidget(m_title, 1);
    bar->addWidget(new QLabel(tr("Cells:"), this));
    bar->addWidget(m_metric);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(m_heatmap);
    split->addWidget(m_table);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(bar);
    layout->addWidget(split, 1);
    setRun(nullptr);
}

void RanksPage::setRun(LoadedRunPtr run)
{
    m_run = std::move(run);
    // Many ranks are looked at for the one that holds the others back: the wait each caused is
    // the first picture; a 1-rank run has only step time.
    const int metric = m_run && m_run->summary().multiRank ? RankStepMatrix::WaitCaused : RankStepMatrix::StepTime;
    m_metric->setCurrentIndex(m_metric->findData(metric));
    m_heatmap->setMetric(RankStepMatrix::Metric(metric));
    m_heatmap->setModel(m_run ? m_run->timeline : nullptr);
    m_model->setRun(m_run);
    m_title->setText(m_run ? tr("%1 — %2 (click a cell to show that rank and step in the timeline)")
                                 .arg(m_run->label)
                                 .arg(formatRanks(qint64(m_run->analysis->ranks.size())))
                           : tr("No run open"));
}

} // namespace lockstep::ui
