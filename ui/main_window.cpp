// Main window (see main_window.h).
#include "main_window.h"

#include <algorithm>

#include "charts_page.h"
#include "compare_page.h"
#include "format.h"
#include "launch_panel.h"
#include "ranks_page.h"
#include "run_browser_page.h"
#include "timeline_page.h"
#include "whatif_panel.h"

#include "timeline/timeline_palette.h"
#include "timeline/timeline_widget.h"

#include "lockstep/import/import.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDialog>
#include <QDateTime>
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
#include <QTabWidget>
#include <QTableWidget>
#include <QTimer>
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
// A run being recorded is re-read this often: a step or a few per read, and the reads (off the
// GUI thread, read-only) never hold the recorder back.
constexpr int kLivePollMs = 1000;

QString defaultWorkspace()
{
    return QDir::current().filePath(QStringLiteral("runs"));
}
} // namespace

MainWindow::MainWindow(const Options& options)
    : m_options(options)
    , m_loader(new RunLoader(this))
    , m_liveLoader(new RunLoader(this))
    , m_liveTimer(new QTimer(this))
    , m_pageList(new QListWidget(this))
    , m_stack(new QStackedWidget(this))
    , m_browser(new RunBrowserPage(this))
    , m_timeline(new TimelinePage(this))
    , m_ranks(new RanksPage(this))
    , m_charts(new ChartsPage(this))
    , m_compare(new ComparePage(this))
    , m_launch(new LaunchPanel(this))
    , m_whatif(new WhatIfPanel(this))
    , m_runBox(new QComboBox(this))
    , m_statusRuns(new QLabel(this))
{
    initLockstepResources();
    setWindowTitle(QStringLiteral("Lockstep"));
    setWindowIcon(QIcon(QStringLiteral(":/lockstep/icons/lockstep.svg")));
    setAcceptDrops(true);
    resize(1400, 860);

    setUpPages();
    setUpCentralAndToolbar();
    buildMenus();
    connectLoaders();
    connectPages();
    connectLaunch();
    restoreSettingsAndWorkspace();
}

// The page list on the left and the stacked pages it switches between.
void MainWindow::setUpPages()
{
    const struct { QString name; QString tip; QWidget* page; } pages[] = {
        {tr("Runs"), tr("Runs in the workspace folder (Ctrl+1)"), m_browser},
        {tr("Timeline"), tr("Gantt timeline of the current run, its summary and details (Ctrl+2)"), m_timeline},
        {tr("Ranks"), tr("Rank × step heatmap and per-rank table of the current run (Ctrl+3)"), m_ranks},
        {tr("Charts"), tr("Breakdown, distribution, sweep and scaling charts (Ctrl+4)"), m_charts},
        {tr("Compare"), tr("Several runs on one time axis, metrics side by side (Ctrl+5)"), m_compare},
        {tr("Launch"), tr("Record a new run or a sweep (Ctrl+6)"), m_launch},
        {tr("What if"), tr("Predict the current run at another bucket cap, world size, link or compression (Ctrl+7)"), m_whatif},
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
    // The what-if model is built when its page is looked at (O(run), off the GUI thread), not for
    // every run opened.
    connect(m_pageList, &QListWidget::currentRowChanged, this, [this](int row) {
        if (row == WhatIfPageIndex)
            m_whatif->setRun(m_current);
        // Runs selected on the Runs page are the ones Charts and Compare show.
        if (row == ChartsPageIndex || row == ComparePageIndex) {
            QStringList selected;
            for (const QString& p : m_browser->selectedPaths())
                selected << QFileInfo(p).absoluteFilePath();
            if (selected.size() >= 2 && selected != m_compareSet)
                pickRuns(selected, row);
        }
    });
    // "Run it": the real run of the predicted configuration, through the Launch panel.
    connect(m_whatif, &WhatIfPanel::runRequested, this, [this](const LaunchSettings& settings) {
        m_launch->setSettings(settings);
        showPage(LaunchPageIndex);
        m_launch->startRun();
    });
}

// The list beside the pages, the current-run toolbar and the status bar's run count.
void MainWindow::setUpCentralAndToolbar()
{
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
}

// Runs loaded or failed (opened by the user, or picked for Compare), and runs being recorded.
void MainWindow::connectLoaders()
{
    connect(m_loader, &RunLoader::runLoaded, this, [this](const QString& path, LoadedRunPtr loaded) {
        m_explicitPending.removeAll(path);
        LoadedRunPtr run = loaded;
        if (loaded->path != path) { // shards stitched into one run: it is known by the path asked for
            auto copy = std::make_shared<LoadedRun>(*loaded);
            copy->path = path;
            run = copy;
        }
        // Still being recorded: follow it.
        if (run->summary().config.status == core::RunStatus::Running) {
            if (!m_live.contains(path))
                m_live.insert(path, {path});
            m_liveTimer->start();
        } else {
            m_live.remove(path);
        }
        addRun(run);
        if (m_comparePending.removeAll(path) > 0) {
            if (m_comparePending.isEmpty())
                applyPicked();
            return;
        }
        showPage(TimelinePageIndex);
    });
    connect(m_loader, &RunLoader::loadFailed, this, [this](const QString& path, const QString& message) {
        // The spans of a run shown from its overview: it stays open, saying why they are missing.
        auto open = std::find_if(m_open.begin(), m_open.end(), [&](const LoadedRunPtr& r) { return r->path == path; });
        if (open != m_open.end() && (*open)->detailPending) {
            auto copy = std::make_shared<LoadedRun>(**open);
            copy->detailPending = false;
            copy->detailError = message;
            replaceInPlace(*open, copy);
            emit runDetailed(copy);
        }
        const bool dialog = m_explicitPending.removeAll(path) > 0;
        if (m_comparePending.removeAll(path) > 0 && m_comparePending.isEmpty())
            applyPicked();
        reportError(path, message, dialog);
    });
    // Runs being recorded: re-read off the GUI thread, grown in place on the Timeline page.
    m_liveTimer->setInterval(kLivePollMs);
    connect(m_liveTimer, &QTimer::timeout, this, &MainWindow::pollLive);
    connect(m_liveLoader, &RunLoader::runLoaded, this, &MainWindow::liveRunLoaded);
    // A big run opens from its overview, then its spans arrive: whether the user opened it or the
    // live view re-read it once it was merged.
    connect(m_loader, &RunLoader::detailLoaded, this, &MainWindow::runDetailLoaded);
    connect(m_liveLoader, &RunLoader::detailLoaded, this, &MainWindow::runDetailLoaded);
}

// The pages' requests: show a place in the timeline, open or compare runs, change the workspace.
void MainWindow::connectPages()
{
    // The Timeline page's word to the user (a step number that is not in the run).
    connect(m_timeline, &TimelinePage::message, this, [this](const QString& text) { statusBar()->showMessage(text, 8000); });
    connect(m_ranks, &RanksPage::showInTimeline, this, [this](int rank, int step) {
        showPage(TimelinePageIndex);
        m_timeline->jumpTo(rank, step);
    });
    connect(m_browser, &RunBrowserPage::openRequested, this, [this](const QString& path) { openFiles({path}, true); });
    connect(m_browser, &RunBrowserPage::compareRequested, this, &MainWindow::compareFiles);
    connect(m_browser, &RunBrowserPage::changeWorkspaceRequested, this, &MainWindow::chooseWorkspace);
    connect(m_browser, &RunBrowserPage::scanned, this,
            [this](int rows) { statusBar()->showMessage(tr("%1 files in %2").arg(rows).arg(m_workspace), 4000); });
}

void MainWindow::connectLaunch()
{
    // Launch: a live timeline while recording, then the run in the browser and opened.
    connect(m_launch, &LaunchPanel::started, this, [this](const QString& out, bool) {
        statusBar()->showMessage(tr("Recording %1").arg(out));
    });
    // The run the Launch panel records grows on the Timeline page too (the panel reads it).
    connect(m_launch, &LaunchPanel::liveRunUpdated, this, [this](LoadedRunPtr run) {
        if (m_current && m_current->path != run->path && !m_launchLive)
            return; // the user is looking at another run: leave it
        m_launchLive = true;
        m_timeline->updateLiveRun(run);
        m_timeline->setLive(true, tr("● recording"));
    });
    connect(m_launch, &LaunchPanel::finished, this, [this](int code, const QString& message, const QStringList& outputs) {
        statusBar()->showMessage(message, 8000);
        if (m_launchLive) {
            m_launchLive = false;
            m_timeline->setLive(false);
        }
        m_browser->rescan();
        if (!outputs.isEmpty())
            openFiles(outputs, code == 0);
    });
}

// The window's geometry, recent files and workspace from the settings (persistent windows only),
// then the Runs page.
void MainWindow::restoreSettingsAndWorkspace()
{
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
    QAction* close = file->addAction(tr("&Close Run"), this, &MainWindow::closeCurrentRun);
    close->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_W));
    close->setToolTip(tr("Close the current run: it leaves every page"));
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
    const QString names[] = {tr("&Runs"), tr("&Timeline"), tr("Ran&ks"), tr("&Charts"), tr("C&ompare"), tr("&Launch"), tr("&What If")};
    for (int i = 0; i < PageCount; ++i) {
        QAction* a = view->addAction(names[i], this, [this, i] { showPage(i); });
        a->setShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)));
    }
    view->addSeparator();
    QAction* fit = view->addAction(tr("&Fit All"), this, [this] {
        if (currentPage() == ComparePageIndex)
            m_compare->timeline()->fitAll();
        else if (currentPage() == WhatIfPageIndex)
            m_whatif->timeline()->fitAll();
        else
            m_timeline->fitAll();
    });
    fit->setShortcut(QKeySequence(Qt::Key_F));
    QAction* zoomStep = view->addAction(tr("&Zoom to Step"), m_timeline, &TimelinePage::zoomToStep);
    zoomStep->setShortcut(QKeySequence(Qt::Key_Z));
    // Ctrl+F finds what the page shows: span names on the Timeline, runs elsewhere.
    QAction* find = view->addAction(tr("&Find"), this, [this] {
        if (currentPage() == TimelinePageIndex) {
            m_timeline->focusSearch();
            return;
        }
        showPage(RunsPage);
        m_browser->filterEdit()->setFocus();
        m_browser->filterEdit()->selectAll();
    });
    find->setShortcut(QKeySequence::Find);
    QAction* nextRun = view->addAction(tr("&Next Open Run"), this, [this] {
        if (!m_open.empty())
            setCurrentRun((m_runBox->currentIndex() + 1) % int(m_open.size()));
    });
    nextRun->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Tab));

    QMenu* run = menuBar()->addMenu(tr("&Run"));
    // Whichever form the Launch page shows: a built-in model's run or the user's script recorded.
    QAction* runAction = run->addAction(tr("&Run / Record"), this, [this] {
        showPage(LaunchPageIndex);
        m_launch->startShown();
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
    QAction* shortcuts = help->addAction(tr("&Shortcuts and Colours"), this, &MainWindow::showShortcuts);
    shortcuts->setShortcut(QKeySequence::HelpContents);
    help->addAction(tr("&About Lockstep"), this, &MainWindow::showAbout);
}

QList<QPair<QString, QString>> MainWindow::shortcutList()
{
    return {
        {"Ctrl+O", tr("Open run files (also: drop files on the window)")},
        {"Ctrl+I", tr("Import a torch.profiler or Nsight Systems trace")},
        {"Ctrl+W", tr("Close the current run")},
        {"Ctrl+Shift+O", tr("Set the workspace folder")},
        {"F5", tr("Rescan the workspace")},
        {"Ctrl+1 … Ctrl+7", tr("Runs, Timeline, Ranks, Charts, Compare, Launch, What if")},
        {"Ctrl+Tab", tr("Next open run")},
        {"Ctrl+F", tr("Timeline: search span names; elsewhere: filter the runs")},
        {tr("Enter / Shift+Enter"), tr("Search box: next / previous match; Esc clears it")},
        {"F", tr("Timeline: fit all")},
        {"Z", tr("Timeline: zoom to the step in the step box")},
        {tr("Step box: number, Enter"), tr("Timeline: zoom to that step; a number that is not a step of the run is refused, with the run's steps in the status bar")},
        {tr("0 … 9"), tr("Timeline: zoom to that step; digits typed within a second make one number (1, 2 = step 12)")},
        {"W / S", tr("Timeline: zoom in / out (at the mouse)")},
        {"A / D", tr("Timeline: pan left / right")},
        {tr("← / →"), tr("Timeline: previous / next span of the selected span's lane")},
        {tr("↑ / ↓"), tr("Timeline: the span nearest in time on the lane above / below")},
        {"C / E", tr("Timeline: collapse / expand all ranks")},
        {"O", tr("Timeline: show / fold every rank's nearly idle GPU streams (the \"other streams\" row)")},
        {"H", tr("Timeline: hide / show the ranks of every host (a run on several hosts)")},
        {"Esc", tr("Timeline: clear the selection and the measured range")},
        {tr("Wheel"), tr("Timeline: zoom at the mouse")},
        {tr("Shift+wheel"), tr("Timeline: scroll the ranks up and down")},
        {tr("Drag"), tr("Timeline: pan (and scroll the ranks)")},
        {tr("Shift+drag"), tr("Timeline: measure a time range: its length, and each rank's breakdown of it in Details")},
        {tr("Shift+click"), tr("Timeline: clear the measured range")},
        {tr("Click"), tr("Timeline: select a span (its bucket is shown on every rank); a folded group zooms in")},
        {tr("Click a rank name"), tr("Timeline: collapse or expand that rank")},
        {tr("Click a host row"), tr("Timeline: hide or show that host's ranks (a run on several hosts)")},
        {tr("Click \"other streams\""), tr("Timeline: show or fold that rank's nearly idle GPU streams (each under 5 % of its busiest stream's time)")},
        {tr("Click a kernel row"), tr("Kernels: outline those kernels in the timeline; double-click or Enter also goes to the first")},
        {tr("Double-click"), tr("Timeline: zoom to the span; on the ruler, to the step")},
        {tr("Click a bucket row"), tr("Summary: show that bucket of the chosen step on every rank")},
        {tr("Click a heatmap cell"), tr("Ranks: show that rank and step in the timeline")},
        {tr("Space"), tr("Replay: play / pause (when the Play button has focus)")},
        {"Ctrl+E", tr("Export the chosen chart (PNG, SVG)")},
        {"Ctrl+R", tr("Launch: run the built-in model, or record your script (the form shown)")},
        {"Ctrl+Shift+R", tr("Launch: sweep over the bucket list")},
        {"Ctrl+.", tr("Launch: cancel")},
        {tr("↑ / ↓, Page Up / Down"), tr("What if: step the focused field; on the bucket slider a quarter / a whole octave")},
        {"F1", tr("This list, and what each colour means")},
        {"Ctrl+Q", tr("Quit")},
    };
}

QList<QPair<QColor, QString>> MainWindow::colourLegend()
{
    using core::SpanKind;
    QList<QPair<QColor, QString>> out = {
        {palette::spanKindColor(SpanKind::DataLoad), tr("data loading (not training work)")},
        {palette::spanKindColor(SpanKind::Forward), tr("forward; also compute only in the breakdowns")},
        {palette::spanKindColor(SpanKind::Backward), tr("backward")},
        {palette::spanKindColor(SpanKind::Optimizer), tr("optimizer step")},
        {palette::spanKindColor(SpanKind::Wait), tr("wait for buckets: the training thread blocked at the end of backward")},
    };
    for (int b = 0; b < palette::kBucketColorCount; ++b)
        out.append({palette::bucketColor(b),
                    tr("all-reduce of bucket %1, and of buckets %2, %3, %4 with diagonal lines, dots, horizontal "
                       "lines over the colour (%5 buckets told apart before anything repeats)")
                        .arg(b)
                        .arg(b + palette::kBucketColorCount)
                        .arg(b + 2 * palette::kBucketColorCount)
                        .arg(b + 3 * palette::kBucketColorCount)
                        .arg(palette::kBucketStyleCount)});
    out += {
        {palette::spanKindColor(SpanKind::Kernel), tr("GPU kernel (compute)")},
        {palette::spanKindColor(SpanKind::Memcpy), tr("memcpy; also memory only in the breakdowns")},
        {palette::spanKindColor(SpanKind::Memset), tr("memset")},
        {palette::spanKindColor(SpanKind::Other), tr("other: neither compute, communication nor memory")},
        {palette::overlappedColor(), tr("strip under the comm lane: communication hidden behind compute (overlapped)")},
        {palette::exposedColor(), tr("strip under the comm lane: exposed communication (no compute beside it)")},
        {palette::idleColor(), tr("idle in the breakdowns")},
        {palette::stragglerFill(), tr("rank header: the step's late rank (\"late · others waited X\")")},
        {palette::stragglerColor(), tr("the run's straggler, when the evidence names one")},
        {palette::gradReadyTick(), tr("tick: a gradient became ready")},
        {palette::measureEdge(), tr("Shift+drag: the measured range")},
        {palette::searchMatch(), tr("search match")},
    };
    return out;
}

void MainWindow::showShortcuts()
{
    QDialog dialog(this);
    dialog.setWindowTitle(tr("Shortcuts and colours"));
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
    // The colours: a swatch and its meaning (the timeline has no room for a legend of its own).
    const auto legend = colourLegend();
    auto* colours = new QTableWidget(int(legend.size()), 2, &dialog);
    colours->setObjectName(QStringLiteral("colourLegend"));
    colours->setHorizontalHeaderLabels({tr("Colour"), tr("Meaning")});
    for (int i = 0; i < legend.size(); ++i) {
        auto* swatch = new QTableWidgetItem;
        swatch->setBackground(legend[i].first);
        swatch->setToolTip(legend[i].first.name());
        colours->setItem(i, 0, swatch);
        colours->setItem(i, 1, new QTableWidgetItem(legend[i].second));
    }
    colours->verticalHeader()->hide();
    colours->horizontalHeader()->setStretchLastSection(true);
    colours->setEditTriggers(QAbstractItemView::NoEditTriggers);
    colours->setColumnWidth(0, 60);
    auto* tabs = new QTabWidget(&dialog);
    tabs->addTab(table, tr("Shortcuts"));
    tabs->addTab(colours, tr("Colours"));
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, &dialog);
    connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    auto* layout = new QVBoxLayout(&dialog);
    layout->addWidget(tabs);
    layout->addWidget(buttons);
    dialog.resize(680, 640);
    dialog.exec();
}

void MainWindow::showAbout()
{
    QMessageBox::about(this, tr("About Lockstep"),
                       tr("<h3>Lockstep " LOCKSTEP_VERSION "</h3>"
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
        // A run `lockstep run` is still recording exists only as its rank shards: open those,
        // as one run, and follow it.
        const QStringList files = QFileInfo::exists(path) ? QStringList{path} : liveFilesFor(path);
        if (files.size() > 1 || (files.size() == 1 && files.front() != path))
            m_live.insert(path, files);
        m_loader->load(files.isEmpty() ? QStringList{path} : files, path);
    }
}

void MainWindow::compareFiles(const QStringList& paths)
{
    pickRuns(paths, ComparePageIndex);
}

void MainWindow::pickRuns(const QStringList& paths, int page)
{
    m_compareSet.clear();
    for (const QString& p : paths)
        m_compareSet << QFileInfo(p).absoluteFilePath();
    m_pickPage = page;
    QStringList missing;
    for (const QString& p : m_compareSet)
        if (std::none_of(m_open.begin(), m_open.end(), [&](const LoadedRunPtr& r) { return r->path == p; }))
            missing << p;
    m_comparePending = missing;
    if (missing.isEmpty())
        applyPicked();
    else
        openFiles(missing, true);
}

void MainWindow::applyPicked()
{
    m_compare->setChecked(m_compareSet);
    m_charts->setPicked(m_compareSet);
    showPage(m_pickPage);
}

bool MainWindow::openFilesBlocking(const QStringList& paths, QString* error, bool firstView)
{
    for (const QString& p : paths) {
        const QString path = QFileInfo(p).absoluteFilePath();
        auto run = firstView ? loadFirstView(QStringList{path}) : loadAndAnalyze(path);
        if (!run) {
            const QString message = QString::fromStdString(run.error().message);
            reportError(path, message, false);
            if (error)
                *error = QStringLiteral("%1: %2").arg(path, message);
            return false;
        }
        addRun(*run);
        if ((*run)->detailPending)
            m_loader->loadDetailOf(*run, path);
    }
    return true;
}

bool MainWindow::detailPending() const
{
    return std::any_of(m_open.begin(), m_open.end(), [](const LoadedRunPtr& r) { return r->detailPending; });
}

bool MainWindow::replaceInPlace(LoadedRunPtr& open, LoadedRunPtr run)
{
    const bool current = m_current == open;
    open = run;
    if (current) {
        // In place: the view, the rank order and what is folded stay as the user left them.
        m_current = run;
        m_timeline->updateLiveRun(run);
    }
    return current;
}

void MainWindow::runDetailLoaded(const QString& path, LoadedRunPtr run)
{
    auto it = std::find_if(m_open.begin(), m_open.end(), [&](const LoadedRunPtr& r) { return r->path == path; });
    if (it == m_open.end() || (*it)->detailed)
        return; // closed, or opened again meanwhile
    if (run->path != path) {
        auto copy = std::make_shared<LoadedRun>(*run);
        copy->path = path;
        run = copy;
    }
    const bool current = replaceInPlace(*it, run);
    if (current)
        m_ranks->setRun(run);
    // The charts are drawn from the analysis, which the spans do not change: they keep the run
    // they have until the next change of runs (rebuilding them would hold the GUI thread ~60 ms
    // at 10 M spans, a visible stall while the user pans).
    m_compare->setOpenRuns(m_open);
    if (current && currentPage() == WhatIfPageIndex)
        m_whatif->setRun(m_current);
    statusBar()->showMessage(tr("%1: its %2 spans are loaded").arg(run->label, formatCount(run->summary().spans)), 6000);
    emit runDetailed(run);
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
    if (!run->indexHint.isEmpty())
        statusBar()->showMessage(run->indexHint, 20000);
    else
        statusBar()->showMessage(tr("Opened %1 (%2, %3 steps, %4 spans)")
                                     .arg(run->label)
                                     .arg(formatRanks(run->summary().worldSize))
                                     .arg(formatCount(run->summary().steps))
                                     .arg(formatCount(run->summary().spans)),
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

void MainWindow::closeCurrentRun()
{
    if (!m_current)
        return;
    const QString path = m_current->path;
    m_open.erase(std::remove(m_open.begin(), m_open.end(), m_current), m_open.end());
    m_live.remove(path);
    m_current = m_open.empty() ? nullptr : m_open.back();
    refreshPages();
    if (!m_current)
        setWindowTitle(QStringLiteral("Lockstep"));
    statusBar()->showMessage(tr("Closed %1").arg(QFileInfo(path).fileName()), 4000);
}

void MainWindow::pollLive()
{
    if (m_live.isEmpty()) {
        m_liveTimer->stop();
        return;
    }
    for (auto it = m_live.constBegin(); it != m_live.constEnd(); ++it) {
        // The launcher merges the shards into the run file at the end: once that file is a
        // run, read it instead.
        QStringList files = liveFilesFor(it.key());
        if (files.isEmpty())
            files = it.value();
        // Read again only what changed: a crashed rank's shard says "running" forever, and
        // re-reading an unchanged file every second would only cost CPU.
        QDateTime newest;
        for (const QString& f : files)
            newest = std::max(newest, QFileInfo(f).lastModified());
        for (const QString& f : files)
            newest = std::max(newest, QFileInfo(f + QStringLiteral("-wal")).lastModified());
        if (m_liveStamp.value(it.key()) == newest && m_liveFiles.value(it.key()) == files)
            continue;
        m_liveStamp.insert(it.key(), newest);
        m_liveFiles.insert(it.key(), files);
        m_liveLoader->load(files, it.key());
    }
}

void MainWindow::liveRunLoaded(const QString& path, LoadedRunPtr loaded)
{
    if (!m_live.contains(path))
        return; // closed meanwhile
    // The run keeps the path it was opened as (a shard's stitched run carries the first shard's).
    auto run = std::make_shared<LoadedRun>(*loaded);
    run->path = path;
    const bool current = m_current && m_current->path == path;
    auto it = std::find_if(m_open.begin(), m_open.end(), [&](const LoadedRunPtr& r) { return r->path == path; });
    if (it != m_open.end())
        *it = run;
    const bool done = run->summary().config.status != core::RunStatus::Running;
    if (done) {
        m_live.remove(path);
        m_liveStamp.remove(path);
        m_liveFiles.remove(path);
    }
    if (current) {
        m_current = run;
        m_timeline->updateLiveRun(run);
        m_timeline->setLive(!done, tr("● recording"));
        m_ranks->setRun(run);
    }
    if (done) {
        statusBar()->showMessage(tr("%1 finished recording (%2)").arg(run->label, QString::fromLatin1(core::runStatusName(run->summary().config.status))), 8000);
        refreshPages();
    }
}

void MainWindow::refreshPages()
{
    {
        QSignalBlocker block(m_runBox);
        m_runBox->clear();
        int currentIndex = -1;
        for (size_t i = 0; i < m_open.size(); ++i) {
            m_runBox->addItem(QStringLiteral("%1  (%2)").arg(m_open[i]->label, displayText(QFileInfo(m_open[i]->path).fileName(), 60)));
            m_runBox->setItemData(int(i), plainToolTip(m_open[i]->path), Qt::ToolTipRole);
            if (m_open[i] == m_current)
                currentIndex = int(i);
        }
        m_runBox->setCurrentIndex(currentIndex);
    }
    if (m_timeline->run() != m_current) {
        m_timeline->setRun(m_current);
        m_timeline->setLive(m_current && m_live.contains(m_current->path), tr("● recording"));
        m_ranks->setRun(m_current);
    }
    m_charts->setRuns(m_current, m_open);
    m_compare->setOpenRuns(m_open);
    if (currentPage() == WhatIfPageIndex)
        m_whatif->setRun(m_current);
    m_statusRuns->setText(m_open.empty() ? tr("no run open")
                          : m_open.size() == 1 ? tr("1 run open") : tr("%1 runs open").arg(m_open.size()));
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
        a->setToolTip(plainToolTip(path));
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
    const QStringList files = QFileDialog::getOpenFileNames(
        this, tr("Import traces (one file per rank)"), QString(),
        tr("Traces (*.json *.json.gz *.pt.trace.json *.sqlite);;All files (*)"));
    if (!files.isEmpty())
        importFiles(files);
}

bool MainWindow::importFiles(const QStringList& files)
{
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
