// Run browser page (see run_browser_page.h).
#include "run_browser_page.h"

#include <QDir>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>

namespace lockstep::ui {

RunBrowserPage::RunBrowserPage(QWidget* parent)
    : QWidget(parent)
    , m_scanner(new WorkspaceScanner(this))
    , m_model(new RunBrowserModel(this))
    , m_proxy(new QSortFilterProxyModel(this))
    , m_view(new QTableView(this))
    , m_filter(new QLineEdit(this))
    , m_folderLabel(new QLabel(this))
    , m_countLabel(new QLabel(this))
{
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(RunBrowserModel::SortRole);
    m_proxy->setFilterKeyColumn(-1); // any column matches
    m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
    m_proxy->setFilterRole(Qt::DisplayRole);

    m_view->setModel(m_proxy);
    m_view->setSortingEnabled(true);
    m_view->sortByColumn(RunBrowserModel::Date, Qt::DescendingOrder);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_view->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_view->setAlternatingRowColors(true);
    m_view->verticalHeader()->hide();
    m_view->verticalHeader()->setDefaultSectionSize(24);
    m_view->horizontalHeader()->setStretchLastSection(true);
    m_view->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    m_view->setWordWrap(false);
    m_view->setToolTip(tr("Double-click a run to open it"));

    m_filter->setPlaceholderText(tr("Filter runs (name, folder, model, backend, status…)"));
    m_filter->setClearButtonEnabled(true);
    m_filter->setToolTip(tr("Shows only rows where some column contains this text (Ctrl+F)"));
    connect(m_filter, &QLineEdit::textChanged, m_proxy, &QSortFilterProxyModel::setFilterFixedString);
    // The count says what the table shows: "3 of 12 runs" while a filter hides some.
    for (auto signal : {&QSortFilterProxyModel::rowsInserted, &QSortFilterProxyModel::rowsRemoved})
        connect(m_proxy, signal, this, &RunBrowserPage::updateCount);
    connect(m_proxy, &QSortFilterProxyModel::modelReset, this, &RunBrowserPage::updateCount);
    connect(m_proxy, &QSortFilterProxyModel::layoutChanged, this, &RunBrowserPage::updateCount);

    auto* change = new QPushButton(tr("Change…"), this);
    change->setToolTip(tr("Choose another workspace folder (File > Set Workspace)"));
    connect(change, &QPushButton::clicked, this, &RunBrowserPage::changeWorkspaceRequested);
    auto* rescanButton = new QPushButton(tr("Rescan"), this);
    rescanButton->setToolTip(tr("Read the workspace folder again (F5)"));
    connect(rescanButton, &QPushButton::clicked, this, &RunBrowserPage::rescan);

    auto* compare = new QPushButton(tr("Compare selected"), this);
    compare->setToolTip(tr("Open the selected runs and show them stacked in Compare"));
    connect(compare, &QPushButton::clicked, this, [this] {
        const QStringList paths = selectedPaths();
        if (!paths.isEmpty())
            emit compareRequested(paths);
    });

    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Workspace:"), this));
    top->addWidget(m_folderLabel, 1);
    top->addWidget(m_countLabel);
    top->addWidget(compare);
    top->addWidget(change);
    top->addWidget(rescanButton);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(m_filter);
    layout->addWidget(m_view, 1);
    m_folderLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_folderLabel->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred); // a long path never widens the window

    connect(m_view, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
        const QString path = index.data(RunBrowserModel::PathRole).toString();
        if (!path.isEmpty())
            emit openRequested(path);
    });
    connect(m_scanner, &WorkspaceScanner::scanFinished, this,
            [this](const QString& folder, const std::vector<BrowserEntry>& entries) {
                if (folder == m_workspace)
                    applyEntries(entries);
            });
}

QStringList RunBrowserPage::selectedPaths() const
{
    QStringList paths;
    for (const QModelIndex& idx : m_view->selectionModel()->selectedRows()) {
        const QModelIndex source = m_proxy->mapToSource(idx);
        const BrowserEntry& e = m_model->entries()[size_t(source.row())];
        if (e.ok())
            paths << e.path;
    }
    return paths;
}

void RunBrowserPage::setWorkspace(const QString& folder)
{
    m_workspace = QDir(folder).absolutePath();
    m_folderLabel->setText(QDir::toNativeSeparators(m_workspace));
    rescan();
}

void RunBrowserPage::rescan()
{
    if (m_workspace.isEmpty())
        return;
    m_countLabel->setText(tr("scanning…"));
    m_scanner->scan(m_workspace);
}

void RunBrowserPage::scanBlocking()
{
    applyEntries(m_scanner->scanBlocking(m_workspace));
}

void RunBrowserPage::updateCount()
{
    const auto& entries = m_model->entries();
    int bad = 0;
    for (const auto& e : entries)
        bad += e.ok() ? 0 : 1;
    const int total = int(entries.size()), shown = m_proxy->rowCount();
    QString text = shown == total ? tr("%n run file(s)", nullptr, total) : tr("%1 of %n run file(s)", nullptr, total).arg(shown);
    if (bad)
        text += tr(", %1 unreadable").arg(bad);
    m_countLabel->setText(text);
}

void RunBrowserPage::applyEntries(const std::vector<BrowserEntry>& entries)
{
    m_model->setEntries(entries, m_workspace);
    updateCount();
    m_view->resizeColumnsToContents();
    for (int c = 0; c < RunBrowserModel::ColumnCount - 1; ++c) // the last column stretches
        m_view->setColumnWidth(c, std::min(m_view->columnWidth(c) + 12, 360));
    emit scanned(int(entries.size()));
}

} // namespace lockstep::ui
