// Compare page (see compare_page.h).
#include "compare_page.h"
#include "format.h"

#include "timeline/timeline_widget.h"

#include "lockstep/core/run_diff.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QPushButton>
#include <QSpinBox>
#include <QLabel>
#include <QFontDatabase>
#include <QFutureWatcher>
#include <QtConcurrent>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QSet>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

namespace lockstep::ui {

ComparePage::ComparePage(QWidget* parent)
    : QWidget(parent)
    , m_list(new QListWidget(this))
    , m_timeline(new TimelineWidget(this))
    , m_model(new CompareModel(this))
    , m_table(new QTableView(this))
    , m_hint(new QLabel(this))
    , m_baseline(new QComboBox(this))
    , m_align(new QSpinBox(this))
    , m_changes(new QPlainTextEdit(this))
{
    m_changes->setReadOnly(true);
    m_changes->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_changes->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_changes->setObjectName(QStringLiteral("whatChanged"));
    m_changes->setToolTip(tr("What changed from the baseline to each run: the settings that differ, the parts of "
                             "the step that moved beyond noise, the spans whose time changed most (lockstep diff)"));
    m_list->setToolTip(tr("Check two or more open runs to compare them"));
    m_list->setMaximumWidth(220);
    m_table->setModel(m_model);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(22);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setAlternatingRowColors(true);
    m_table->horizontalHeader()->setStretchLastSection(false);
    m_table->setToolTip(tr("Differences are to the baseline run; green is better, red worse"));
    m_baseline->setToolTip(tr("The run the others are compared with"));
    m_baseline->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_baseline->setMinimumContentsLength(12);
    connect(m_baseline, &QComboBox::activated, this, [this](int i) {
        m_model->setBaseline(i);
        updateChanges();
    });
    m_align->setRange(-1, 1'000'000);
    m_align->setSpecialValueText(tr("first steady step"));
    m_align->setPrefix(tr("step "));
    m_align->setValue(-1);
    m_align->setToolTip(tr("Align the runs so that this step starts at the same time in each"));
    connect(m_align, &QSpinBox::valueChanged, this, [this](int step) { m_timeline->setAlignStep(step); });
    m_timeline->setFocusPolicy(Qt::StrongFocus);
    m_hint->setText(tr("Open two or more runs (File > Open, or double-click in the Runs page) and check them here."));
    m_hint->setWordWrap(true);

    auto* left = new QWidget(this);
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    auto* uncheck = new QPushButton(tr("Uncheck all"), left);
    uncheck->setToolTip(tr("Remove every run from the comparison"));
    connect(uncheck, &QPushButton::clicked, this, &ComparePage::uncheckAll);
    leftLayout->addWidget(new QLabel(tr("Runs to compare:"), left));
    leftLayout->addWidget(m_list, 1);
    leftLayout->addWidget(uncheck);
    leftLayout->addWidget(new QLabel(tr("Baseline:"), left));
    leftLayout->addWidget(m_baseline);
    leftLayout->addWidget(new QLabel(tr("Align at:"), left));
    leftLayout->addWidget(m_align);
    leftLayout->addWidget(m_hint);

    auto* right = new QSplitter(Qt::Vertical, this);
    right->addWidget(m_timeline);
    right->addWidget(m_table);
    right->addWidget(m_changes);
    right->setStretchFactor(0, 1);
    right->setStretchFactor(1, 0);
    right->setCollapsible(0, false);

    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(left);
    split->addWidget(right);
    split->setStretchFactor(1, 1);
    split->setSizes({200, 1000});
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(split);

    connect(m_list, &QListWidget::itemChanged, this, [this](QListWidgetItem*) { refresh(); });
}

void ComparePage::setOpenRuns(std::vector<LoadedRunPtr> runs)
{
    QSet<QString> checked, known;
    for (int i = 0; i < m_list->count(); ++i) {
        known.insert(m_list->item(i)->data(Qt::UserRole).toString());
        if (m_list->item(i)->checkState() == Qt::Checked)
            checked.insert(m_list->item(i)->data(Qt::UserRole).toString());
    }
    m_open = std::move(runs);
    QSignalBlocker block(m_list);
    m_list->clear();
    for (const auto& r : m_open) {
        auto* item = new QListWidgetItem(r->label, m_list); // label: already cut to a sane length
        item->setData(Qt::UserRole, r->path);
        item->setToolTip(plainToolTip(r->path));
        item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
        bool check = checked.contains(r->path);
        if (!known.contains(r->path) && checked.size() < 2) {
            check = true; // new runs join the comparison until two are compared
            checked.insert(r->path);
        }
        item->setCheckState(check ? Qt::Checked : Qt::Unchecked);
    }
    block.unblock();
    refresh();
}

void ComparePage::setChecked(const QStringList& paths)
{
    {
        QSignalBlocker block(m_list);
        for (int i = 0; i < m_list->count(); ++i) {
            QListWidgetItem* item = m_list->item(i);
            item->setCheckState(paths.contains(item->data(Qt::UserRole).toString()) ? Qt::Checked : Qt::Unchecked);
        }
    }
    refresh();
}

void ComparePage::uncheckAll()
{
    {
        QSignalBlocker block(m_list);
        for (int i = 0; i < m_list->count(); ++i)
            m_list->item(i)->setCheckState(Qt::Unchecked);
    }
    refresh();
}

void ComparePage::refresh()
{
    m_compared.clear();
    for (int i = 0; i < m_list->count(); ++i)
        if (m_list->item(i)->checkState() == Qt::Checked && size_t(i) < m_open.size())
            m_compared.push_back(m_open[size_t(i)]);
    std::vector<TimelineRun> timelineRuns;
    std::vector<core::RunSummary> summaries;
    QStringList labels;
    for (const auto& r : m_compared) {
        timelineRuns.push_back(TimelineRun{r->run, r->label, r->timeline});
        summaries.push_back(r->summary());
        labels << r->label;
    }
    m_timeline->setRuns(std::move(timelineRuns));
    m_timeline->setAlignStep(m_align->value());
    m_timeline->fitAll();
    const int baseline = std::max(0, std::min(m_baseline->currentIndex(), int(m_compared.size()) - 1));
    {
        QSignalBlocker block(m_baseline);
        m_baseline->clear();
        m_baseline->addItems(labels);
        m_baseline->setCurrentIndex(m_compared.empty() ? -1 : baseline);
    }
    m_model->setRuns(std::move(summaries), labels);
    m_model->setBaseline(baseline);
    m_table->resizeColumnsToContents();
    for (int c = 0; c < m_model->columnCount(); ++c)
        m_table->setColumnWidth(c, m_table->columnWidth(c) + 16);
    // The table is as tall as its rows; the timeline gets the rest.
    // (sizes from hints: before the first show the header and rows have no geometry yet)
    const int height = m_table->horizontalHeader()->sizeHint().height() + 2 * m_table->frameWidth() + 6
                     + m_model->rowCount() * m_table->verticalHeader()->defaultSectionSize()
                     + m_table->horizontalScrollBar()->sizeHint().height();
    m_table->setFixedHeight(std::max(height, 60));
    m_hint->setVisible(m_compared.size() < 2);
    updateChanges();
}

namespace {
std::function<void()>& diffHook()
{
    static std::function<void()> hook;
    return hook;
}
} // namespace

void ComparePage::setDiffHookForTesting(std::function<void()> hook)
{
    diffHook() = std::move(hook);
}

void ComparePage::updateChanges()
{
    const quint64 generation = ++m_changesGeneration; // a job still running is now stale
    const int baseline = m_baseline->currentIndex();
    if (m_compared.size() < 2 || baseline < 0 || size_t(baseline) >= m_compared.size()) {
        m_changesPending = false;
        m_changes->setPlainText(tr("Check two runs to see what changed between them."));
        emit changesReady();
        return;
    }
    // What changed compares spans: a run shown from its overview has none yet.
    for (const LoadedRunPtr& r : m_compared)
        if (!r->detailed) {
            m_changesPending = false;
            m_changes->setPlainText(tr("%1: %2").arg(r->label, waitingForSpans(*r)));
            emit changesReady();
            return;
        }
    // The runs are immutable and shared: the job keeps them alive while it works.
    std::vector<LoadedRunPtr> runs = m_compared;
    m_changesPending = true;
    m_changes->setPlainText(tr("Computing what changed…"));
    auto* watcher = new QFutureWatcher<std::string>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, generation] {
        watcher->deleteLater();
        if (generation != m_changesGeneration)
            return; // superseded: other runs or another baseline were chosen meanwhile
        m_changesPending = false;
        m_changes->setPlainText(QString::fromStdString(watcher->result()));
        emit changesReady();
    });
    std::function<void()> hook = diffHook();
    watcher->setFuture(QtConcurrent::run([runs = std::move(runs), baseline, hook = std::move(hook)] {
        if (hook)
            hook();
        const LoadedRun& base = *runs[size_t(baseline)];
        std::string text;
        for (size_t i = 0; i < runs.size(); ++i) {
            if (int(i) == baseline)
                continue;
            const LoadedRun& other = *runs[i];
            if (!text.empty())
                text += "\n\n";
            text += core::diffText(core::diffRuns(*base.run, *base.analysis, *other.run, *other.analysis));
        }
        return text;
    }));
}

} // namespace lockstep::ui
