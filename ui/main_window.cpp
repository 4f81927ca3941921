// Main window (see main_window.h).
#include "main_window.h"

#include "charts_page.h"
#include "compare_page.h"
#include "launch_panel.h"
#include "run_browser_page.h"
#include "timeline_page.h"

#include "timeline/timeline_widget.h"

#ifdef LOCKSTEP_HAVE_IMPORT
#include "lockstep/import/import.h"
#endif

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QSettings>
#include <QSplitter>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTableWidget>
#include <QToolBar>
#include <QVBoxLayout>
#include <QtConcurrent>

// The icons are compiled into the static library; a static library's resources must be
// registered by name (outside any namespace) before first use.
static void initLockstepResources()
{
    Q_INIT_RESOURCE(lockstep);
}

namespace lockstep::ui {

namespace {
// Enough to find last week's runs; the menu stays short.
constexpr int kMaxRecent = 10;

QString defaultWorkspace()
{
    return QDir::current().filePath(QStringLiteral("runs"));
}
} // namespace

MainWindow::MainWindow(const Options& options)
    : m_options(options)
    , m_loader(new RunLoader(this))
    , m_pageList(new QListWidget(this))
    , m_stack(new QStackedWidget(this))
    , m_browser(new RunBrowserPage(this))
    , m_timeline(new TimelinePage(this))
    , m_charts(new ChartsPage(this))
    , m_compare(new ComparePage(this))
    , m_launch(new LaunchPanel(this))
    , m_runBox(new QComboBox(this))
    , m_statusRuns(new QLabel(this))
{
    initLockstepResources();
    setWindowTitle(QStringLiteral("Lockstep"));
    setWindowIcon(QIcon(QStringLiteral(":/lockstep/icons/lockstep.svg")));
    setAcceptDrops(true);
    resize(1400, 860);

    const struct { QString name; QString tip; QWidget* page; } pages[] = {
        {tr("Runs"), tr("Runs in the workspace folder (Ctrl+1)"), m_browser},
        {tr("Timeline"), tr("Gantt timeline of the current run (Ctrl+2)"), m_timeline},
        {tr("Charts"), tr("Breakdown, distribution, sweep and scaling charts (Ctrl+3)"), m_charts},
        {tr("Compare"), tr("Several runs on one time axis, metrics side by side (Ctrl+4)"), m_compare},
        {tr("Launch"), tr("Record a new run or a sweep (Ctrl+5)"), m_launch},
    };
    for (const auto& p : pages) {
        auto* item = new QListWidgetItem(p.name, m_pageList);
        item->setToolTip(p.tip);
        item->setSizeHint(QSize(110, 36));
        m_stack->addWidget(p.page);
    }
    m_pageList->setFixedWidth(120);
    m_pageList->setFrameShape(QFrame::NoFrame);
    m_pageList->setStyleSheet(QStringLiteral(
        "QListWidget{background:#1f2937;color:#e5e7eb;font-size:11pt;padding-top:6px}"
        "QListWidget::item{padding-left:12px;border-left:4px solid transparent}"
        "QListWidget::item:selected{background:#374151;color:white;border-left:4px solid #60a5fa}"
        "QListWidget::item:hover:!selected{background:#273244}"));
    connect(m_pageList, &QListWidget::currentRowChanged, m_stack, &QStackedWidget::setCurrentIndex);

    auto* central = new QWidget(this);
    auto* layout = new QHBoxLayout(central);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(0);
    layout->addWidget(m_pageList);
    layout->addWidget(m_stack, 1);
    setCentralWidget(central);

    auto* toolbar = addToolBar(tr("Run"));
    toolbar->setObjectName(QStringLiteral("runToolbar"));
    toolbar->setMovable(false);
    toolbar->addWidget(new QLabel(tr(" Current run: "), toolbar));
    m_runBox->setMinimumWidth(320);
    m_runBox->setToolTip(tr("The run shown in Timeline and Charts"));
    m_runBox->setPlaceholderText(tr("no run open — Ctrl+O or double-click in Runs"));
    toolbar->addWidget(m_runBox);
    connect(m_runBox, &QComboBox::activated, this, &MainWindow::setCurrentRun);

    statusBar()->addPermanentWidget(m_statusRuns);
    buildMenus();

    connect(m_loader, &RunLoader::runLoaded, this, [this](const QString& path, LoadedRunPtr run) {
        m_explicitPending.removeAll(path);
        addRun(run);
        if (m_comparePending.removeAll(path) > 0) {
            if (m_comparePending.isEmpty()) {
                m_compare->setChecked(m_compareSet);
                showPage(ComparePageIndex);
            }
            return;
        }
        showPage(TimelinePageIndex);
    });
    connect(m_loader, &RunLoader::loadFailed, this, [this](const QString& path, const QString& message) {
        const bool dialog = m_explicitPending.removeAll(path) > 0;
        if (m_comparePending.removeAll(path) > 0 && m_comparePending.isEmpty()) {
            m_compare->setChecked(m_compareSet);
            showPage(ComparePageIndex);
        }
        reportError(path, message, dialog);
    });
    connect(m_browser, &RunBrowserPage::openRequested, this, [this](const QString& path) { openFiles({path}, true); });
    connect(m_browser, &RunBrowserPage::compareRequested, this, &MainWindow::compareFiles);
    connect(m_browser, &RunBrowserPage::changeWorkspaceRequested, this, &MainWindow::chooseWorkspace);
    connect(m_browser, &RunBrowserPage::scanned, this,
            [this](int rows) { statusBar()->showMessage(tr("%1 files in %2").arg(rows).arg(m_workspace), 4000); });

    // Launch: a live timeline while recording, then the run in the browser and opened.
    connect(m_launch, &LaunchPanel::started, this, [this](const QString& out, bool) {
        statusBar()->showMessage(tr("Recording %1").arg(out));
    });
    connect(m_launch, &LaunchPanel::finished, this, [this](int code, const QString& message, const QStringList& outputs) {
        statusBar()->showMessage(message, 8000);
        m_browser->rescan();
        if (!outputs.isEmpty())
            openFiles(outputs, code == 0);
    });

    if (m_options.persistent) {
        QSettings settings;
        restoreGeometry(settings.value("window/geometry").toByteArray());
        restoreState(settings.value("window/state").toByteArray());
        m_recent = settings.value("recentFiles").toStringList();
        if (m_options.workspace.isEmpty())
            m_options.workspace = settings.value("workspace").toString();
    }
    updateRecentMenu();
    const QString ws = m_options.workspace.isEmpty() ? defaultWorkspace() : m_options.workspace;
    if (m_options.scanWorkspace) {
        setWorkspace(ws);
    } else {
        m_workspace = QDir(ws).absolutePath();
        m_launch->setWorkspace(m_workspace);
    }
    m_pageList->setCurrentRow(RunsPage);
    refreshPages();
}

MainWindow::~MainWindow() = default;

void MainWindow::buildMenus()
{
    QMenu* file = menuBar()->addMenu(tr("&File"));
    QAction* open = file->addAction(tr("&Open Run…"), this, &MainWindow::openDialog);
    open->setShortcut(QKeySequence::Open);
    open->setToolTip(tr("Open one or more run databases"));
    m_recentMenu = file->addMenu(tr("Open &Recent"));
    QAction* import = file->addAction(tr("&Import Trace…"), this, &MainWindow::importDialog);
    import->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_I));
    file->addSeparator();
    QAction* ws = file->addAction(tr("Set &Workspace…"), this, &MainWindow::chooseWorkspace);
    ws->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O));
    QAction* rescan = file->addAction(tr("Re&scan Workspace"), m_browser, &RunBrowserPage::rescan);
    rescan->setShortcut(QKeySequence(Qt::Key_F5));
    QAction* exportChart = file->addAction(tr("&Export Chart…"), m_charts, &ChartsPage::exportCurrentChart);
    exportChart->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
    file->addSeparator();
    QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    QMenu* view = menuBar()->addMenu(tr("&View"));
    const QString names[] = {tr("&Runs"), tr("&Timeline"), tr("&Charts"), tr("C&ompare"), tr("&Launch")};
    for (int i = 0; i < PageCount; ++i) {
        QAction* a = view->addAction(names[i], this, [this, i] { showPage(i); });
        a->setShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)));
    }
    view->addSeparator();
    QAction* fit = view->addAction(tr("&Fit All"), this, [this] {
        if (currentPage() == ComparePageIndex)
            m_compare->timeline()->fitAll();
        else
            m_timeline->fitAll();
    });
    fit->setShortcut(QKeySequence(Qt::Key_F));
    QAction* zoomStep = view->addAction(tr("&Zoom to Step"), m_timeline, &TimelinePage::zoomToStep);
    zoomStep->setShortcut(QKeySequence(Qt::Key_Z));
    QAction* filter = view->addAction(tr("Filter &Runs"), this, [this] {
        showPage(RunsPage);
        m_browser->filterEdit()->setFocus();
        m_browser->filterEdit()->selectAll();
    });
    filter->setShortcut(QKeySequence::Find);
    QAction* nextRun = view->addAction(tr("&Next Open Run"), this, [this] {
        if (!m_open.empty())
            setCurrentRun((m_runBox->currentIndex() + 1) % int(m_open.size()));
    });
    nextRun->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Tab));

    QMenu* run = menuBar()->addMenu(tr("&Run"));
    QAction* runAction = run->addAction(tr("&Run"), this, [this] {
        showPage(LaunchPageIndex);
        m_launch->startRun();
    });
    runAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    QAction* sweepAction = run->addAction(tr("&Sweep"), this, [this] {
        showPage(LaunchPageIndex);
        m_launch->startSweep();
    });
    sweepAction->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R));
    QAction* cancelAction = run->addAction(tr("&Cancel"), m_launch, &LaunchPanel::cancel);
    cancelAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Period));

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    QAction* shortcuts = help->addAction(tr("&Shortcuts"), this, &MainWindow::showShortcuts);
    shortcuts->setShortcut(QKeySequence::HelpContents);
    help->addAction(tr("&About Lockstep"), this, &MainWindow::showAbout);
}

QList<QPair<QString, QString>> MainWindow::shortcutList()
{
    return {
        {"Ctrl+O", tr("Open run files")},
        {"Ctrl+I", tr("Import a torch.profiler or Nsight Systems trace")},
        {"Ctrl+Shift+O", tr("Set the workspace folder")},
        {"F5", tr("Rescan the workspace")},
        {"Ctrl+1 … Ctrl+5", tr("Runs, Timeline, Charts, Compare, Launch")},
        {"Ctrl+F", tr("Filter the run browser")},
        {"Ctrl+Tab", tr("Next open run")},
        {"F", tr("Timeline: fit all")},
        {"Z", tr("Timeline: zoom to the chosen step")},
        {"W / S", tr("Timeline: zoom in / out")},
        {"A / D", tr("Timeline: pan left / right")},
        {tr("Wheel, drag"), tr("Timeline: zoom at the cursor, pan")},
        {tr("Click"), tr("Timeline: select a span, show its details")},
        {"Ctrl+E", tr("Export the chosen chart (PNG, SVG)")},
        {"Ctrl+R", tr("Launch: run")},
        {"Ctrl+Shift+R", tr("Launch: sweep over the bucket list")},
        {"Ctrl+.", tr("Launch: cancel")},
        {"F1", tr("This list")},
        {"Ctrl+Q", tr("Quit")},
    };
}

void MainWindow::showShortcuts()
{
    QDialog dialog(this);
    dialog.setWindowTitle(tr("Keyboard shortcuts"));
    const auto list = shortcutList();
    auto* table = new QTableWidget(int(list.size()), 2, &dialog);
    table->setHorizontalHeaderLabels({tr("Keys"), tr("Action")});
    for (int i = 0; i < list.size(); ++i) {
        table->setItem(i, 0, new QTableWidgetItem(list[i].first));
        table->setItem(i, 1, new QTableWidgetItem(list[i].second));
    }
    table->verticalHeader()->hide();
    table->horizontalHeader()->setStretchLastSection(true);
    table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table->resizeColumnsToContents();
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, &dialog);
    connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    auto* layout = new QVBoxLayout(&dialog);
    layout->addWidget(table);
    layout->addWidget(buttons);
    dialog.resize(520, 560);
    dialog.exec();
}

void MainWindow::showAbout()
{
    QMessageBox::about(this, tr("About Lockstep"),
                       tr("<h3>Lockstep 0.1.0</h3>"
                          "<p>A profiler and visualizer for data-parallel (DDP) training: when backward "
                          "computed each gradient, when each bucket's all-reduce ran, how much of it hid "
                          "behind computation, and which rank held the others back.</p>"
                          "<p>Qt %1, Qt Charts.</p>")
                           .arg(QString::fromLatin1(qVersion())));
}

void MainWindow::showPage(int page)
{
    if (page >= 0 && page < PageCount)
        m_pageList->setCurrentRow(page);
}

int MainWindow::currentPage() const
{
    return m_stack->currentIndex();
}

void MainWindow::setWorkspace(const QString& folder)
{
    m_workspace = QDir(folder).absolutePath();
    m_browser->setWorkspace(m_workspace);
    m_launch->setWorkspace(m_workspace);
    if (m_options.persistent)
        QSettings().setValue("workspace", m_workspace);
}

void MainWindow::chooseWorkspace()
{
    const QString folder = QFileDialog::getExistingDirectory(this, tr("Workspace folder"), m_workspace);
    if (!folder.isEmpty())
        setWorkspace(folder);
}

void MainWindow::openDialog()
{
    const QStringList files = QFileDialog::getOpenFileNames(this, tr("Open runs"), m_workspace,
                                                            tr("Run databases (*.db *.sqlite);;All files (*)"));
    if (!files.isEmpty())
        openFiles(files, true);
}

void MainWindow::openFiles(const QStringList& paths, bool explicitly)
{
    for (const QString& p : paths) {
        const QString path = QFileInfo(p).absoluteFilePath();
        if (explicitly)
            m_explicitPending << path;
        statusBar()->showMessage(tr("Loading %1…").arg(path));
        m_loader->load(path);
    }
}

void MainWindow::compareFiles(const QStringList& paths)
{
    m_compareSet.clear();
    for (const QString& p : paths)
        m_compareSet << QFileInfo(p).absoluteFilePath();
    m_comparePending = m_compareSet;
    openFiles(m_compareSet, true);
}

bool MainWindow::openFilesBlocking(const QStringList& paths, QString* error)
{
    for (const QString& p : paths) {
        const QString path = QFileInfo(p).absoluteFilePath();
        auto run = loadAndAnalyze(path);
        if (!run) {
            const QString message = QString::fromStdString(run.error().message);
            reportError(path, message, false);
            if (error)
                *error = QStringLiteral("%1: %2").arg(path, message);
            return false;
        }
        addRun(*run);
    }
    return true;
}

void MainWindow::reportError(const QString& path, const QString& message, bool dialog)
{
    m_lastError = QStringLiteral("%1: %2").arg(QFileInfo(path).fileName(), message);
    statusBar()->showMessage(tr("⚠ Cannot open %1").arg(m_lastError), 15000);
    emit openFailed(path, message);
    if (dialog && m_errorDialogs)
        QMessageBox::warning(this, tr("Cannot open run"), tr("<b>%1</b><br><br>%2").arg(path.toHtmlEscaped(), message.toHtmlEscaped()));
}

void MainWindow::addRun(LoadedRunPtr run)
{
    // Opening a file again replaces it (it may have grown or been re-recorded).
    auto it = std::find_if(m_open.begin(), m_open.end(), [&](const LoadedRunPtr& r) { return r->path == run->path; });
    if (it != m_open.end())
        *it = run;
    else
        m_open.push_back(run);
    m_current = run;
    addRecent(run->path);
    statusBar()->showMessage(tr("Opened %1 (%2 ranks, %3 steps, %4 spans)")
                                 .arg(run->label)
                                 .arg(run->summary.worldSize)
                                 .arg(run->summary.steps)
                                 .arg(run->summary.spans),
                             6000);
    refreshPages();
    emit runOpened(run);
}

void MainWindow::setCurrentRun(int index)
{
    if (index < 0 || size_t(index) >= m_open.size())
        return;
    m_current = m_open[size_t(index)];
    refreshPages();
}

void MainWindow::refreshPages()
{
    {
        QSignalBlocker block(m_runBox);
        m_runBox->clear();
        int currentIndex = -1;
        for (size_t i = 0; i < m_open.size(); ++i) {
            m_runBox->addItem(QStringLiteral("%1  (%2)").arg(m_open[i]->label, QFileInfo(m_open[i]->path).fileName()));
            m_runBox->setItemData(int(i), m_open[i]->path, Qt::ToolTipRole);
            if (m_open[i] == m_current)
                currentIndex = int(i);
        }
        m_runBox->setCurrentIndex(currentIndex);
    }
    if (m_timeline->run() != m_current)
        m_timeline->setRun(m_current);
    m_charts->setRuns(m_current, m_open);
    m_compare->setOpenRuns(m_open);
    m_statusRuns->setText(m_open.empty() ? tr("no run open") : tr("%1 runs open").arg(m_open.size()));
    if (m_current)
        setWindowTitle(QStringLiteral("%1 — Lockstep").arg(m_current->label));
}

void MainWindow::addRecent(const QString& path)
{
    m_recent.removeAll(path);
    m_recent.prepend(path);
    while (m_recent.size() > kMaxRecent)
        m_recent.removeLast();
    if (m_options.persistent)
        QSettings().setValue("recentFiles", m_recent);
    updateRecentMenu();
}

void MainWindow::updateRecentMenu()
{
    if (!m_recentMenu)
        return;
    m_recentMenu->clear();
    for (const QString& path : m_recent) {
        QAction* a = m_recentMenu->addAction(QFileInfo(path).fileName(), this, [this, path] { openFiles({path}, true); });
        a->setToolTip(path);
        a->setStatusTip(path);
    }
    m_recentMenu->setEnabled(!m_recent.isEmpty());
    if (!m_recent.isEmpty()) {
        m_recentMenu->addSeparator();
        m_recentMenu->addAction(tr("Clear"), this, [this] {
            m_recent.clear();
            if (m_options.persistent)
                QSettings().setValue("recentFiles", m_recent);
            updateRecentMenu();
        });
    }
}

void MainWindow::importDialog()
{
#ifdef LOCKSTEP_HAVE_IMPORT
    const QStringList files = QFileDialog::getOpenFileNames(
        this, tr("Import traces (one file per rank)"), QString(),
        tr("Traces (*.json *.json.gz *.pt.trace.json *.sqlite);;All files (*)"));
    if (!files.isEmpty())
        importFiles(files);
#else
    QMessageBox::information(this, tr("Import"), tr("This build has no trace importers."));
#endif
}

bool MainWindow::importFiles(const QStringList& files)
{
#ifdef LOCKSTEP_HAVE_IMPORT
    if (files.isEmpty())
        return false;
    QString stem = QFileInfo(files.front()).fileName();
    stem = stem.section('.', 0, 0);
    QDir().mkpath(m_workspace);
    QString out = QDir(m_workspace).filePath(stem + ".db");
    for (int i = 2; QFileInfo::exists(out); ++i)
        out = QDir(m_workspace).filePath(QStringLiteral("%1-%2.db").arg(stem).arg(i));
    statusBar()->showMessage(tr("Importing %1 file(s) into %2…").arg(files.size()).arg(out));
    std::vector<std::string> inputs;
    for (const QString& f : files)
        inputs.push_back(f.toStdString());
    // Importing a large trace takes seconds: off the GUI thread, the result comes back as a message.
    auto* watcher = new QFutureWatcher<QString>(this);
    connect(watcher, &QFutureWatcherBase::finished, this, [this, watcher, out] {
        watcher->deleteLater();
        const QString error = watcher->result();
        emit importFinished(out, error);
        if (!error.isEmpty()) {
            reportError(out, error, true);
            return;
        }
        m_browser->rescan();
        openFiles({out}, true);
    });
    watcher->setFuture(QtConcurrent::run([inputs, out]() -> QString {
        core::ImportOptions options;
        auto stats = core::importTraces(inputs, out.toStdString(), options);
        return stats ? QString() : QString::fromStdString(stats.error().message);
    }));
    return true;
#else
    (void)files;
    return false;
#endif
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    if (m_options.persistent) {
        QSettings settings;
        settings.setValue("window/geometry", saveGeometry());
        settings.setValue("window/state", saveState());
        settings.setValue("recentFiles", m_recent);
        settings.setValue("workspace", m_workspace);
    }
    QMainWindow::closeEvent(event);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event)
{
    if (event->mimeData()->hasUrls())
        event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event)
{
    QStringList files;
    for (const QUrl& url : event->mimeData()->urls())
        if (url.isLocalFile())
            files << url.toLocalFile();
    if (!files.isEmpty()) {
        openFiles(files, true);
        event->acceptProposedAction();
    }
}

} // namespace lockstep::ui
