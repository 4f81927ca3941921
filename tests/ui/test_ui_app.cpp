// The desktop app as a user meets it, offscreen: opening a valid and a broken run file, the run
// browser over a workspace, the charts page rendering and exporting, the compare page with two
// runs, keyboard shortcuts, and `lockstep-ui --screenshot` for every view (the real binary).
#include "charts_page.h"
#include "compare_page.h"
#include "kernel_panel.h"
#include "run_loader.h"
#include "timeline/timeline_model.h"

#include "lockstep/core/step_stats.h"
#include "lockstep/core/summary_store.h"
#include "lockstep/import/import.h"

#include <chrono>
#include <filesystem>
#include <QPlainTextEdit>
#include "format.h"
#include "ranks_page.h"
#include "summary_panel.h"
#include "launch_panel.h"
#include "main_window.h"
#include "run_browser_page.h"
#include "screenshot.h"
#include "timeline_page.h"
#include "ui_test_support.h"

#include "timeline/rank_heatmap.h"
#include "timeline/timeline_palette.h"
#include "timeline/timeline_widget.h"

#include <QAction>
#include <QApplication>
#include <QAbstractBarSeries>
#include <QBarCategoryAxis>
#include <QBarSet>
#include <QBoxPlotSeries>
#include <QBoxSet>
#include <QChart>
#include <QChartView>
#include <QDir>
#include <QDropEvent>
#include <QFile>
#include <QMimeData>
#include <QSettings>
#include <QLineEdit>
#include <QProcess>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QLabel>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QScopeGuard>
#include <QComboBox>
#include <QSemaphore>
#include <QThread>
#include <QThreadPool>

#include <atomic>

#include <sqlite3.h>
#include <QTest>
#include <QAbstractItemView>

using namespace lockstep;
using namespace lockstep::ui;

namespace {
qint64 countPixels(const QImage& image, QColor c)
{
    const QImage img = image.convertToFormat(QImage::Format_RGB32);
    qint64 n = 0;
    for (int y = 0; y < img.height(); ++y)
        for (int x = 0; x < img.width(); ++x)
            n += (img.pixel(x, y) | 0xff000000u) == (c.rgb() | 0xff000000u);
    return n;
}
} // namespace

class TestUiApp : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void opensValidRun();
    void brokenRunGivesClearErrorNoCrash();
    void browserListsWorkspace();
    void chartsRenderAndExport();
    void chartLegendsAreReadable();
    void pagesFitA1024x700Window();
    void compareTwoRuns();
    void shortcutsAndPages();
    void failedRunWithoutSteps();
    void dragAndDropOpens();
    void settingsPersist();
    void importTrace();
    void screenshotEachView_data();
    void screenshotEachView();
    void screenshotErrors();
    void helpWithoutDisplay();
    void timelinePageSearchSummaryAndRanks();
    void clocksInTheSummary();
    void stepBoxRefusesWhatIsNotAStep();
    void closeRun();
    void liveRunGrowsOnTheTimeline();
    void userStringsArePlainText();
    void quietGpuStreamsFoldIntoOneRow();
    void kernelRowClickOutlinesItsKernels();
    void whatChangedIsComputedOffTheGuiThread();
    void aBigRunOpensFromItsOverviewThenItsSpans();
    void aFollowedRunThatEndsBigGetsItsSpans();

private:
    QString importedGpuRun();
    bool showGpuRun(MainWindow& w, TimelinePage::SideTab tab, QString* error);
    MainWindow::Options options() const;
    QTemporaryDir m_dir;
    QString m_runA, m_runB, m_foreign;
};

void TestUiApp::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true); // QSettings go to a test location
    QVERIFY(m_dir.isValid());
    m_runA = m_dir.filePath("alpha.db");
    m_runB = m_dir.filePath("beta.db");
    m_foreign = m_dir.filePath("foreign.db");
    QCOMPARE(uitest::makeRunFile(m_runA, 2, 10, 4, 0.35, 25, "alpha"), QString());
    QCOMPARE(uitest::makeRunFile(m_runB, 2, 10, 6, 0.9, 4, "beta", 1), QString());
    uitest::writeForeignFile(m_foreign);
}

MainWindow::Options TestUiApp::options() const
{
    MainWindow::Options o;
    o.persistent = false;
    o.workspace = m_dir.path();
    o.scanWorkspace = false;
    return o;
}

void TestUiApp::opensValidRun()
{
    MainWindow w(options());
    w.setErrorDialogsEnabled(false);
    w.resize(1200, 800);
    w.show();
    QSignalSpy opened(&w, &MainWindow::runOpened);
    w.openFiles({m_runA});
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 20000);
    QCOMPARE(int(w.openRuns().size()), 1);
    QVERIFY(w.currentRun());
    QCOMPARE(w.currentRun()->summary().worldSize, 2);
    QCOMPARE(w.currentPage(), int(MainWindow::TimelinePageIndex));
    QCOMPARE(w.timelinePage()->timeline()->runs().size(), size_t(1));
    QVERIFY(w.timelinePage()->timeline()->rowCount() >= 2); // at least one row per rank
    QVERIFY(w.recentFiles().contains(QFileInfo(m_runA).absoluteFilePath()));
    // Opening the same file again replaces it rather than adding a second copy.
    w.openFiles({m_runA});
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 2, 20000);
    QCOMPARE(int(w.openRuns().size()), 1);
    // The timeline page draws something.
    QApplication::processEvents();
    const QImage img = w.timelinePage()->grab().toImage();
    QVERIFY(uitest::distinctColors(img) > 10);
}

void TestUiApp::brokenRunGivesClearErrorNoCrash()
{
    MainWindow w(options());
    w.setErrorDialogsEnabled(false);
    QSignalSpy failed(&w, &MainWindow::openFailed);
    w.openFiles({m_foreign, m_dir.filePath("does-not-exist.db")});
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 2, 20000);
    QVERIFY(w.openRuns().empty());
    for (const auto& call : failed) {
        const QString message = call.at(1).toString();
        QVERIFY2(!message.isEmpty(), "an error needs a message");
    }
    QVERIFY(w.lastError().contains(".db"));
    // Blocking open reports the same.
    QString error;
    QVERIFY(!w.openFilesBlocking({m_foreign}, &error));
    QVERIFY2(error.contains("foreign.db"), qPrintable(error));
    // A truncated copy of a real run: still an error, not a crash.
    const QString truncated = m_dir.filePath("truncated.sqlite");
    {
        QFile in(m_runA), out(truncated);
        QVERIFY(in.open(QIODevice::ReadOnly) && out.open(QIODevice::WriteOnly));
        out.write(in.read(in.size() / 3));
    }
    w.openFiles({truncated});
    QTRY_COMPARE_WITH_TIMEOUT(failed.count() + int(w.openRuns().size()), 3, 20000);
    QFile::remove(truncated);
}

void TestUiApp::browserListsWorkspace()
{
    MainWindow w(options());
    w.setErrorDialogsEnabled(false);
    RunBrowserPage* page = w.browserPage();
    QSignalSpy scanned(page, &RunBrowserPage::scanned);
    w.setWorkspace(m_dir.path());
    QTRY_COMPARE_WITH_TIMEOUT(scanned.count(), 1, 20000);
    QCOMPARE(page->model()->rowCount(), 3);
    int warnings = 0;
    for (int r = 0; r < page->model()->rowCount(); ++r)
        warnings += page->model()->index(r, RunBrowserModel::Status).data().toString().startsWith(QStringLiteral("⚠"));
    QCOMPARE(warnings, 1);
    page->filterEdit()->setText("beta");
    QCOMPARE(page->proxy()->rowCount(), 1);
    // Double-click opens the run.
    QSignalSpy opened(&w, &MainWindow::runOpened);
    const QModelIndex idx = page->proxy()->index(0, 0);
    emit page->view()->doubleClicked(idx);
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 20000);
    QCOMPARE(w.currentRun()->label, QString("beta"));
    // Select both runs and compare them.
    page->filterEdit()->clear();
    page->view()->selectAll();
    QCOMPARE(page->selectedPaths().size(), 2); // the foreign row is not a run
    w.compareFiles(page->selectedPaths());
    QTRY_COMPARE_WITH_TIMEOUT(w.currentPage(), int(MainWindow::ComparePageIndex), 20000);
    QCOMPARE(int(w.comparePage()->comparedRuns().size()), 2);
    QCOMPARE(int(w.chartsPage()->pickedRuns().size()), 2); // the same runs for the charts
    // The selection on the Runs page is what Charts and Compare show: a fresh window, both runs
    // selected on the Runs page (none open yet), then the Charts page opened.
    MainWindow w2(options());
    w2.setErrorDialogsEnabled(false);
    QSignalSpy scanned2(w2.browserPage(), &RunBrowserPage::scanned);
    w2.setWorkspace(m_dir.path());
    QTRY_COMPARE_WITH_TIMEOUT(scanned2.count(), 1, 20000);
    w2.browserPage()->view()->selectAll();
    QCOMPARE(w2.browserPage()->selectedPaths().size(), 2);
    QCOMPARE(int(w2.openRuns().size()), 0);
    w2.showPage(MainWindow::ChartsPageIndex);
    QTRY_COMPARE_WITH_TIMEOUT(int(w2.chartsPage()->pickedRuns().size()), 2, 20000);
    QCOMPARE(w2.currentPage(), int(MainWindow::ChartsPageIndex));
    QCOMPARE(int(w2.comparePage()->comparedRuns().size()), 2);
    // A pick made on the Charts page stays while the Runs page's selection is the same.
    w2.chartsPage()->setPicked({QFileInfo(m_runA).absoluteFilePath()});
    w2.showPage(MainWindow::RunsPage);
    w2.showPage(MainWindow::ChartsPageIndex);
    QCOMPARE(int(w2.chartsPage()->pickedRuns().size()), 1);
    QCOMPARE(int(w.comparePage()->comparedRuns().size()), 2);
}

void TestUiApp::chartsRenderAndExport()
{
    MainWindow w(options());
    w.resize(1300, 850);
    QString error;
    QVERIFY2(w.openFilesBlocking({m_runA, m_runB}, &error), qPrintable(error));
    w.setCurrentRun(0);
    w.showPage(MainWindow::ChartsPageIndex);
    w.show();
    QApplication::processEvents();
    ChartsPage* charts = w.chartsPage();
    for (int id = 0; id < ChartsPage::ChartCount; ++id) {
        QVERIFY(!charts->chart(ChartsPage::ChartId(id))->series().isEmpty());
        const QImage img = charts->renderChart(ChartsPage::ChartId(id), QSize(640, 400));
        QVERIFY2(uitest::distinctColors(img) > 20, qPrintable(QString("chart %1 looks blank").arg(id)));
    }
    // Breakdown: five stacked sets (compute only, overlapped, exposed, memory only, idle: core's
    // five parts), one bar per step.
    auto* bars = qobject_cast<QAbstractBarSeries*>(charts->chart(ChartsPage::Breakdown)->series().first());
    QVERIFY(bars);
    QCOMPARE(bars->count(), 5);
    QCOMPARE(bars->barSets().first()->count(), 10);
    // Warm-up steps are labelled "(n)": drawn, but left out of the run's numbers.
    const int warmup = w.currentRun()->run->config.warmupSteps;
    QVERIFY(warmup > 0 && warmup < 10);
    auto* steps = qobject_cast<QBarCategoryAxis*>(charts->chart(ChartsPage::Breakdown)->axes(Qt::Horizontal).first());
    QVERIFY(steps);
    QCOMPARE(steps->categories().first(), QStringLiteral("(0)"));
    QCOMPARE(steps->categories().at(warmup - 1), QStringLiteral("(%1)").arg(warmup - 1));
    QCOMPARE(steps->categories().at(warmup), QString::number(warmup));
    QVERIFY(steps->titleText().contains("warm-up"));
    // The numbers are core's, formatted: the mean-of-ranks bars are core::stepMeans, the box
    // plot's quartiles core::rankStepTimes (report --json's step_means, step_time_quartiles_ms).
    const auto means = core::stepMeans(*w.currentRun()->run, *w.currentRun()->analysis);
    QCOMPARE(int(means.size()), bars->barSets().first()->count());
    for (int i = 0; i < int(means.size()); ++i) {
        QCOMPARE(bars->barSets().at(0)->at(i), means[size_t(i)].computeOnlyMs);
        QCOMPARE(bars->barSets().at(2)->at(i), means[size_t(i)].exposedMs);
        QCOMPARE(bars->barSets().at(4)->at(i), means[size_t(i)].idleMs);
    }
    auto* box = qobject_cast<QBoxPlotSeries*>(charts->chart(ChartsPage::Distribution)->series().first());
    QVERIFY(box);
    const auto quartiles = core::rankStepTimes(*w.currentRun()->analysis);
    QCOMPARE(box->count(), int(quartiles.size()));
    for (int r = 0; r < box->count(); ++r) {
        const core::Quartiles& q = quartiles[size_t(r)].stepTimeMs;
        QCOMPARE(box->boxSets().at(r)->at(QBoxSet::LowerExtreme), q.min);
        QCOMPARE(box->boxSets().at(r)->at(QBoxSet::LowerQuartile), q.q1);
        QCOMPARE(box->boxSets().at(r)->at(QBoxSet::Median), q.median);
        QCOMPARE(box->boxSets().at(r)->at(QBoxSet::UpperQuartile), q.q3);
        QCOMPARE(box->boxSets().at(r)->at(QBoxSet::UpperExtreme), q.max);
    }
    charts->setRank(1);
    QVERIFY(charts->chartTitle(ChartsPage::Breakdown).contains("rank 1"));
    // Export to PNG and SVG.
    const QString png = m_dir.filePath("chart.png"), svg = m_dir.filePath("chart.svg");
    QVERIFY2(charts->exportChart(ChartsPage::Breakdown, png, &error), qPrintable(error));
    QVERIFY2(charts->exportChart(ChartsPage::Scaling, svg, &error), qPrintable(error));
    QImage loaded(png);
    QVERIFY(!loaded.isNull());
    QVERIFY(uitest::distinctColors(loaded) > 20);
    QFile svgFile(svg);
    QVERIFY(svgFile.open(QIODevice::ReadOnly));
    const QByteArray svgText = svgFile.readAll();
    QVERIFY(svgText.contains("<svg"));
    QVERIFY(svgText.size() > 2000);
    QVERIFY(!charts->exportChart(ChartsPage::Breakdown, "/nonexistent-dir/x.png", &error));
    QVERIFY(!error.isEmpty());
}

// A sweep of world sizes and bucket caps (two curves on the scaling chart): every legend entry
// of every chart is drawn whole, inside its chart, clear of the plot and of the other entries,
// at 1400x900 and at 1024x700 (Qt's one-row legend elided them all: "throughput · …"); curves
// are named by what their runs' names share, with what differs in braces.
void TestUiApp::chartLegendsAreReadable()
{
    QTemporaryDir dir;
    QStringList paths;
    for (const auto& [ranks, cap] : {std::pair{1, 1}, {1, 25}, {2, 1}, {2, 25}}) {
        const QString name = QStringLiteral("mlp-n%1-b%2").arg(ranks).arg(cap);
        paths << dir.filePath(name + ".db");
        QCOMPARE(uitest::makeRunFile(paths.back(), ranks, 10, 4, 0.4, cap, name), QString());
    }
    MainWindow w(options());
    w.setErrorDialogsEnabled(false);
    QString error;
    QVERIFY2(w.openFilesBlocking(paths, &error), qPrintable(error));
    w.setCurrentRun(2);
    w.showPage(MainWindow::ChartsPageIndex);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    ChartsPage* charts = w.chartsPage();
    auto names = [&](ChartsPage::ChartId id) {
        QStringList out;
        for (const auto& e : charts->legendEntries(id))
            out << e.name;
        out.sort();
        return out;
    };
    QCOMPARE(names(ChartsPage::Scaling), QStringList({"efficiency · mlp-n{1,2}-b1", "efficiency · mlp-n{1,2}-b25",
                                                      "throughput · mlp-n{1,2}-b1", "throughput · mlp-n{1,2}-b25"}));
    QCOMPARE(names(ChartsPage::BucketSweep), QStringList({"overlap · mlp-n2-b{1,25}", "step time · mlp-n2-b{1,25}"}));
    QCOMPARE(names(ChartsPage::Breakdown).size(), 5);
    for (const QSize size : {QSize(1400, 900), QSize(1024, 700)}) {
        w.resize(size);
        for (int i = 0; i < 5; ++i)
            QApplication::processEvents();
        QCOMPARE(w.size(), size);
        for (int id = 0; id < ChartsPage::ChartCount; ++id) {
            QChart* chart = charts->chart(ChartsPage::ChartId(id));
            const auto entries = charts->legendEntries(ChartsPage::ChartId(id));
            QVERIFY(!entries.empty());
            const QRectF bounds(QPointF(0, 0), chart->size());
            for (size_t i = 0; i < entries.size(); ++i) {
                const auto& e = entries[i];
                const QString where = QStringLiteral("%1x%2, chart %3, '%4'").arg(size.width()).arg(size.height()).arg(id).arg(e.name);
                QVERIFY2(e.shown == e.name && !e.shown.contains(QChar(0x2026)), qPrintable(where + " is elided: " + e.shown));
                QVERIFY2(bounds.contains(e.rect), qPrintable(where + " is outside its chart"));
                QVERIFY2(!e.rect.intersects(chart->plotArea()), qPrintable(where + " is drawn over the plot"));
                for (size_t j = i + 1; j < entries.size(); ++j)
                    QVERIFY2(!e.rect.intersects(entries[j].rect), qPrintable(where + " overlaps " + entries[j].name));
            }
        }
    }
    // The exported picture carries the legend (it is part of the chart, not of the page).
    const QImage img = charts->renderChart(ChartsPage::Scaling, charts->chartView(ChartsPage::Scaling)->size());
    const auto e = charts->legendEntries(ChartsPage::Scaling).front();
    QVERIFY(uitest::distinctColors(img.copy(e.rect.toRect())) > 3);
}

// At 1024x700 the window is 1024x700: no page asks for more room than that (the Timeline page's
// tool row and the What-if page's knobs made it at least 1191 pixels wide, the rest off screen),
// and the Timeline page's title, elided, keeps its full text in its tooltip.
void TestUiApp::pagesFitA1024x700Window()
{
    MainWindow w(options());
    w.setErrorDialogsEnabled(false);
    QString error;
    QVERIFY2(w.openFilesBlocking({m_runA, m_runB}, &error), qPrintable(error));
    w.resize(1024, 700);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    for (int page = 0; page < MainWindow::PageCount; ++page) {
        w.showPage(page);
        QApplication::processEvents();
        QVERIFY2(w.minimumSizeHint().width() <= 1024, qPrintable(QStringLiteral("page %1 needs %2 pixels").arg(page).arg(w.minimumSizeHint().width())));
        QCOMPARE(w.size(), QSize(1024, 700));
    }
}

void TestUiApp::compareTwoRuns()
{
    MainWindow w(options());
    w.resize(1300, 850);
    QString error;
    QVERIFY2(w.openFilesBlocking({m_runA, m_runB}, &error), qPrintable(error));
    w.showPage(MainWindow::ComparePageIndex);
    w.show();
    ComparePage* page = w.comparePage();
    QCOMPARE(int(page->comparedRuns().size()), 2); // newly opened runs join until two are compared
    QCOMPARE(page->timeline()->runs().size(), size_t(2));
    QVERIFY(page->timeline()->rowCount() >= 4); // two runs × two ranks
    CompareModel* model = page->model();
    QCOMPARE(model->columnCount(), 4);
    QCOMPARE(model->rowCount(), int(CompareModel::MetricCount));
    const QString diff = model->index(CompareModel::Comm, 3).data().toString();
    // Beta communicates more: the difference in ms, and in percent beside it.
    QVERIFY2(diff.startsWith("+") && diff.contains(" ms (+") && diff.endsWith("%)"), qPrintable(diff));
    QVERIFY(model->index(CompareModel::Comm, 3).data(Qt::ForegroundRole).isValid());
    QCOMPARE(model->index(CompareModel::Stragglers, 2).data().toString(), QString("rank 1"));
    // What changed (core's diff, baseline alpha -> beta): the bucket cap first among the settings,
    // the parts of the step, the straggler verdicts, the spans that changed.
    if (page->changesPending()) // computed in the thread pool: wait for it to be applied
        QVERIFY(QSignalSpy(page, &ComparePage::changesReady).wait());
    const QString changes = page->changesView()->toPlainText();
    QVERIFY2(changes.contains("What changed in the configuration"), qPrintable(changes));
    QVERIFY2(changes.contains("bucket_cap_bytes: 26214400 -> 4194304"), qPrintable(changes));
    QVERIFY2(changes.contains("straggler: none -> rank 1"), qPrintable(changes));
    QVERIFY2(changes.contains("Work whose time changed most"), qPrintable(changes));
    // Unchecking one leaves a single run: no difference columns.
    page->setChecked({QFileInfo(m_runA).absoluteFilePath()});
    QCOMPARE(int(page->comparedRuns().size()), 1);
    QCOMPARE(model->columnCount(), 2);
    QApplication::processEvents();
    QVERIFY(uitest::distinctColors(page->grab().toImage()) > 10);
}

void TestUiApp::shortcutsAndPages()
{
    MainWindow w(options());
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    for (int page = 0; page < MainWindow::PageCount; ++page) {
        QTest::keyClick(&w, Qt::Key(Qt::Key_1 + page), Qt::ControlModifier);
        QCOMPARE(w.currentPage(), page);
    }
    // The colour legend names every span kind the timeline paints and both overlap strips, each
    // with its own colour where they mean different things.
    const auto legend = MainWindow::colourLegend();
    QStringList meanings;
    for (const auto& [colour, meaning] : legend)
        meanings << meaning;
    for (const char* m : {"forward", "backward", "optimizer", "wait for buckets", "all-reduce of bucket 0", "exposed",
                          "overlapped", "late rank", "memcpy", "gradient became ready"})
        QVERIFY2(meanings.filter(QString::fromUtf8(m)).size() >= 1, m);
    const auto colourOf = [&](const char* m) {
        for (const auto& [colour, meaning] : legend)
            if (meaning.contains(QString::fromUtf8(m)))
                return colour;
        return QColor();
    };
    QVERIFY(colourOf("strip under the comm lane: exposed") != colourOf("strip under the comm lane: communication hidden"));
    QVERIFY(colourOf("wait for buckets") != colourOf("backward"));
    // Every listed shortcut names a key and an action; the menus carry the same keys.
    const auto list = MainWindow::shortcutList();
    QVERIFY(list.size() >= 10);
    QStringList menuKeys;
    for (QAction* a : w.findChildren<QAction*>())
        if (!a->shortcut().isEmpty())
            menuKeys << a->shortcut().toString();
    for (const QString& k : {"Ctrl+O", "Ctrl+1", "Ctrl+6", "Ctrl+7", "F", "Ctrl+E", "F1", "Ctrl+R", "Ctrl+W", "Ctrl+F"})
        QVERIFY2(menuKeys.contains(k), qPrintable(k));
    // Help > Shortcuts lists every key the menus carry (the page keys as one "Ctrl+1 … Ctrl+7"
    // row) and the timeline's keys and gestures.
    QStringList listed;
    for (const auto& [keys, what] : list)
        listed << keys;
    for (const QString& k : menuKeys) {
        if (QRegularExpression("^Ctrl\\+[1-7]$").match(k).hasMatch())
            continue;
        QVERIFY2(listed.contains(k), qPrintable(k + " is not in Help > Shortcuts"));
    }
    for (const QString& k : {"Ctrl+1 … Ctrl+7", "W / S", "A / D", "C / E", "Esc", "0 … 9", "← / →", "↑ / ↓", "Shift+drag",
                             "Shift+wheel", "Click a rank name", "Click a heatmap cell", "Double-click"})
        QVERIFY2(listed.contains(k), qPrintable(k));
}

void TestUiApp::failedRunWithoutSteps()
{
    // A run whose ranks died before the first step: every page must still show it.
    core::Run run;
    run.config.name = "died";
    run.config.model = "mlp";
    run.config.worldSize = 2;
    run.config.status = core::RunStatus::Failed;
    run.config.failureCause = "rank 1 failed at step 0: out of memory";
    run.ranks = {core::RankInfo{.rank = 0}, core::RankInfo{.rank = 1}};
    const QString path = m_dir.filePath("died.sqlite");
    auto saved = core::saveRun(run, path.toStdString(), core::RunWriter::Mode::Overwrite);
    QVERIFY2(saved, saved ? "" : saved.error().message.c_str());
    MainWindow w(options());
    w.resize(1200, 800);
    QString error;
    QVERIFY2(w.openFilesBlocking({path, m_runA}, &error), qPrintable(error));
    w.setCurrentRun(0);
    w.show();
    for (int page = 0; page < MainWindow::PageCount; ++page) {
        w.showPage(page);
        QApplication::processEvents();
        QVERIFY(uitest::distinctColors(w.grab().toImage()) > 4);
    }
    QVERIFY(w.chartsPage()->chartTitle(ChartsPage::Breakdown).contains("no recorded steps"));
    QVERIFY(w.chartsPage()->chartTitle(ChartsPage::Breakdown).contains("out of memory"));
    // The run without steps does not pull the cross-run charts to zero.
    const auto sweep = w.chartsPage()->chartTitle(ChartsPage::BucketSweep);
    QVERIFY2(!sweep.contains("2 runs"), qPrintable(sweep));
    QFile::remove(path);
}

void TestUiApp::dragAndDropOpens()
{
    MainWindow w(options());
    w.setErrorDialogsEnabled(false);
    w.show();
    QSignalSpy opened(&w, &MainWindow::runOpened);
    QMimeData mime;
    mime.setUrls({QUrl::fromLocalFile(m_runA), QUrl::fromLocalFile(m_runB)});
    QDragEnterEvent enter(QPoint(50, 50), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&w, &enter);
    QVERIFY(enter.isAccepted());
    QDropEvent drop(QPointF(50, 50), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&w, &drop);
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 2, 20000);
    QCOMPARE(int(w.openRuns().size()), 2);
}

void TestUiApp::settingsPersist()
{
    QCoreApplication::setOrganizationName("LockstepTest");
    QCoreApplication::setApplicationName("ui_app_settings");
    QSettings().clear();
    QTemporaryDir ws;
    {
        MainWindow::Options o;
        o.workspace = ws.path();
        MainWindow w(o);
        w.setErrorDialogsEnabled(false);
        w.show();
        QString error;
        QVERIFY(w.openFilesBlocking({m_runA}, &error));
        w.resize(1111, 777);
        w.close(); // closeEvent writes geometry, recent files and workspace
    }
    MainWindow again;
    QCOMPARE(again.workspace(), QDir(ws.path()).absolutePath());
    QVERIFY(again.recentFiles().contains(QFileInfo(m_runA).absoluteFilePath()));
    QVERIFY(!QSettings().value("window/geometry").toByteArray().isEmpty());
    QSettings().clear();
}

void TestUiApp::importTrace()
{
    MainWindow w(options());
    w.setErrorDialogsEnabled(false);
    // A minimal torch.profiler trace: two profiler steps with host operators in them.
    const QString trace = m_dir.filePath("tiny.pt.trace.json");
    {
        QFile f(trace);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"schemaVersion": 1, "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 1000, "dur": 900},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1100, "dur": 300},
  {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 1500, "dur": 100},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 2000, "dur": 900},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 2100, "dur": 300}
]})");
    }
    QSignalSpy finished(&w, &MainWindow::importFinished);
    QSignalSpy opened(&w, &MainWindow::runOpened);
    if (!w.importFiles({trace}))
        QSKIP("this build has no trace importers");
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
    QVERIFY2(finished.at(0).at(1).toString().isEmpty(), qPrintable(finished.at(0).at(1).toString()));
    QVERIFY(QFile::exists(finished.at(0).at(0).toString()));
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 30000);
    QCOMPARE(QString::fromStdString(w.currentRun()->run->config.source), QString("kineto"));
    QVERIFY(!w.currentRun()->run->spans.empty());
    // Garbage in: a clear error, nothing opened.
    const QString junk = m_dir.filePath("junk.json");
    {
        QFile f(junk);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("definitely not a trace");
    }
    QVERIFY(w.importFiles({junk}));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, 30000);
    QVERIFY(!finished.at(1).at(1).toString().isEmpty());
    QCOMPARE(opened.count(), 1);
    QFile::remove(finished.at(0).at(0).toString());
}

void TestUiApp::screenshotEachView_data()
{
    QTest::addColumn<QString>("view");
    for (const QString& v : screenshotViews())
        QTest::newRow(qPrintable(v)) << v;
}

void TestUiApp::screenshotEachView()
{
    QFETCH(QString, view);
    const QString out = m_dir.filePath("shot-" + view + ".png");
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove("QT_QPA_PLATFORM"); // the binary must pick offscreen by itself for --screenshot
    p.setProcessEnvironment(env);
    p.start(LOCKSTEP_UI_EXE, {"--screenshot", out, "--view", view, "--size", "1200x760", m_runA, m_runB});
    QVERIFY(p.waitForFinished(60000));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    QImage img(out);
    QVERIFY(!img.isNull());
    QCOMPARE(img.size(), QSize(1200, 760));
    QVERIFY(imageHasContent(img, 16));
    QVERIFY(uitest::distinctColors(img) > 16);
    // What each view is for is in the picture: the summary's five-part bar (overlapped and
    // exposed communication), the heatmap's ramp, the timeline's bucket colours.
    auto has = [&](QColor c) {
        for (int y = 0; y < img.height(); ++y)
            for (int x = 0; x < img.width(); ++x)
                if (img.pixel(x, y) == c.rgb())
                    return true;
        return false;
    };
    if (view == "summary") {
        QVERIFY(has(palette::overlappedColor()));
        QVERIFY(has(palette::exposedColor()));
    } else if (view == "ranks") {
        QVERIFY(has(palette::heatRamp(0.0)) || has(palette::heatRamp(1.0)));
    } else if (view == "timeline") {
        QVERIFY(has(palette::bucketColor(0)));
    }
}

void TestUiApp::screenshotErrors()
{
    auto run = [&](const QStringList& args) {
        QProcess p;
        p.start(LOCKSTEP_UI_EXE, args);
        p.waitForFinished(60000);
        return std::make_pair(p.exitCode(), QString::fromUtf8(p.readAllStandardError()));
    };
    auto [rc1, err1] = run({"--screenshot", m_dir.filePath("x.png"), "--view", "timeline", m_foreign});
    QVERIFY(rc1 != 0);
    QVERIFY2(err1.contains("foreign.db"), qPrintable(err1));
    auto [rc2, err2] = run({"--screenshot", m_dir.filePath("x.png"), "--view", "nonsense", m_runA});
    QVERIFY(rc2 != 0);
    QVERIFY2(err2.contains("unknown view"), qPrintable(err2));
    auto [rc3, err3] = run({"--screenshot", m_dir.filePath("x.png"), "--view", "compare", m_runA});
    QVERIFY(rc3 != 0);
    QVERIFY(!QFile::exists(m_dir.filePath("x.png")));
}

void TestUiApp::helpWithoutDisplay()
{
    // No display at all (no X, no Wayland, no platform chosen): --help and --version still work.
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    for (const char* v : {"QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"})
        env.remove(v);
    p.setProcessEnvironment(env);
    p.start(LOCKSTEP_UI_EXE, {"--help"});
    QVERIFY(p.waitForFinished(30000));
    QCOMPARE(p.exitCode(), 0);
    const QString out = QString::fromUtf8(p.readAllStandardOutput());
    QVERIFY2(out.contains("--screenshot") && out.contains("summary") && out.contains("ranks"), qPrintable(out));
    p.start(LOCKSTEP_UI_EXE, {"--version"});
    QVERIFY(p.waitForFinished(30000));
    QCOMPARE(p.exitCode(), 0);
    QVERIFY(QString::fromUtf8(p.readAllStandardOutput()).contains(QStringLiteral(LOCKSTEP_VERSION)));
}

void TestUiApp::clocksInTheSummary()
{
    // The GPU recording of 2 ranks on one host (schema 3, no boot ids, both on host "vm"): one
    // clock, said in the Summary, no verdict from the clock. The same file as if rank 1 were on
    // another host: its stored offsets apply with +-5.140 ms, more than the lead they make, and
    // the verdict says "none (clock +-...)" (core's numbers: tests/db/test_clock_sync.cpp).
    const QString fixture = QStringLiteral(LOCKSTEP_TEST_DATA_DIR "/gpu/record-gloo-cuda-2.db");
    const QString copy = m_dir.filePath("two-hosts.db");
    QVERIFY(QFile::copy(fixture, copy));
    QVERIFY(QFile::setPermissions(copy, QFile::permissions(copy) | QFileDevice::WriteOwner));
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(copy.toUtf8().constData(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db, "UPDATE ranks SET host = 'vm2' WHERE rank = 1", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    for (const bool twoHosts : {false, true}) {
        MainWindow w(options());
        w.setErrorDialogsEnabled(false);
        QString error;
        QVERIFY2(w.openFilesBlocking({twoHosts ? copy : fixture}, &error), qPrintable(error));
        const QString text = w.timelinePage()->summaryPanel()->summaryText();
        if (twoHosts) {
            QVERIFY2(text.contains(QString::fromUtf8("Straggler: none (clock \u00b15.14 ms)")), qPrintable(text));
            QVERIFY2(text.contains(QString::fromUtf8("offsets within \u00b15.14 ms")), qPrintable(text));
        } else {
            QVERIFY2(text.contains("by host name"), qPrintable(text));
            QVERIFY2(!text.contains(QString::fromUtf8("clock \u00b1")), qPrintable(text));
        }
    }
}

void TestUiApp::timelinePageSearchSummaryAndRanks()
{
    MainWindow w(options());
    w.setErrorDialogsEnabled(false);
    w.resize(1400, 860);
    QString error;
    QVERIFY2(w.openFilesBlocking({m_runB}, &error), qPrintable(error));
    w.showPage(MainWindow::TimelinePageIndex);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    TimelinePage* page = w.timelinePage();
    // The summary beside the timeline is the run's (core's numbers).
    QVERIFY(page->summaryPanel()->summaryText().contains(formatMs(w.currentRun()->summary().stepTimeMs)));
    // Ctrl+F on the Timeline page searches span names; Enter goes to the first match.
    QTest::keyClick(&w, Qt::Key_F, Qt::ControlModifier);
    QVERIFY(page->searchEdit()->hasFocus());
    QTest::keyClicks(page->searchEdit(), "forward");
    QTest::keyClick(page->searchEdit(), Qt::Key_Return);
    const int matches = int(page->timeline()->searchMatches().size());
    QVERIFY(matches > 0);
    QCOMPARE(page->searchCount()->text(), QStringLiteral("1 of %1").arg(matches));
    QCOMPARE(page->timeline()->selection(), page->timeline()->searchMatches().front());
    // The step box follows the selection.
    const core::Run& runB = *w.currentRun()->run;
    QCOMPARE(page->stepBox()->value(), runB.spans[size_t(page->timeline()->selection().span)].step);
    QTest::keyClick(page->searchEdit(), Qt::Key_Escape);
    QVERIFY(page->searchEdit()->text().isEmpty());
    // Elsewhere Ctrl+F filters the runs.
    w.showPage(MainWindow::ChartsPageIndex);
    QTest::keyClick(&w, Qt::Key_F, Qt::ControlModifier);
    QCOMPARE(w.currentPage(), int(MainWindow::RunsPage));
    w.showPage(MainWindow::TimelinePageIndex);
    // A row of the bucket table selects that bucket of the chosen step, linked on every rank.
    page->stepBox()->setValue(5);
    const QModelIndex row = page->summaryPanel()->bucketProxy()->index(2, 0);
    const int bucket = row.data(BucketTableModel::BucketRole).toInt();
    emit page->summaryPanel()->bucketTable()->clicked(row);
    const auto& linked = page->timeline()->linkedBucket();
    QVERIFY(linked.valid());
    QCOMPARE(linked.bucket, bucket);
    QCOMPARE(linked.step, 5);
    QCOMPARE(int(linked.spans.size()), w.currentRun()->summary().worldSize); // on every rank
    // Digit keys in the timeline update the step box.
    page->timeline()->setFocus();
    QTest::keyClick(page->timeline(), Qt::Key_6);
    QCOMPARE(page->stepBox()->value(), 6);
    // The Ranks page: a heatmap click shows that rank and step in the timeline.
    w.showPage(MainWindow::RanksPageIndex);
    RankHeatmap* heat = w.ranksPage()->heatmap();
    QApplication::processEvents();
    const QRect plot = heat->plotRect();
    // Beta has 2 ranks and 10 steps: rank 1 is the lower half, step 3 the fourth tenth.
    const QPoint cell(plot.left() + plot.width() * 35 / 100, plot.top() + plot.height() * 3 / 4);
    const RankHeatmap::Cell c = heat->cellAt(cell);
    QCOMPARE(c.rank, 1);
    QCOMPARE(c.step, 3);
    QTest::mouseClick(heat, Qt::LeftButton, Qt::NoModifier, cell);
    QCOMPARE(w.currentPage(), int(MainWindow::TimelinePageIndex));
    QCOMPARE(page->stepBox()->value(), 3);
    // ... and the selection, which Details shows, is that rank's collective of that step.
    const core::Span& picked = runB.spans[size_t(page->timeline()->selection().span)];
    QCOMPARE(picked.step, 3);
    QCOMPARE(runB.lanes[picked.lane.v].rank, 1);
    const auto r3 = *page->timeline()->stepRange(3);
    const auto [t0, t1] = page->timeline()->viewRange();
    QVERIFY(t0 <= r3.first && r3.second <= t1);
}

// The step box takes a step number and Enter goes there; a text that is not one of the run's
// steps ("99" on a 10-step run, "1 2") is refused and the status bar says why, the step and the
// view unchanged (a QSpinBox dropped the keys and went to step 1 or 9 without a word).
void TestUiApp::stepBoxRefusesWhatIsNotAStep()
{
    MainWindow w(options());
    w.setErrorDialogsEnabled(false);
    w.resize(1400, 860);
    QString error;
    QVERIFY2(w.openFilesBlocking({m_runB}, &error), qPrintable(error));
    w.showPage(MainWindow::TimelinePageIndex);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    TimelinePage* page = w.timelinePage();
    StepBox* box = page->stepBox();
    QCOMPARE(box->maximum(), 9);
    box->setValue(4);
    page->zoomToStep();
    const auto view4 = page->timeline()->viewRange();
    QSignalSpy values(box, &QSpinBox::valueChanged);
    auto type = [&](const QString& text) {
        box->setFocus();
        box->selectAll();
        QTest::keyClicks(box, text);
    };
    type("99");
    QCOMPARE(box->text(), QStringLiteral("step 99")); // every key typed is kept
    QTest::keyClick(box, Qt::Key_Return);
    QCOMPARE(box->value(), 4);
    QCOMPARE(box->text(), QStringLiteral("step 4"));
    QCOMPARE(values.count(), 0);
    QCOMPARE(page->timeline()->viewRange(), view4);
    QCOMPARE(w.statusBar()->currentMessage(), QStringLiteral("no step 99: this run has steps 0–9"));
    type("1 2");
    QCOMPARE(box->text(), QStringLiteral("step 1 2"));
    QTest::keyClick(box, Qt::Key_Enter);
    QCOMPARE(box->value(), 4);
    QCOMPARE(values.count(), 0);
    QCOMPARE(w.statusBar()->currentMessage(), QStringLiteral("“1 2” is not a step number: this run has steps 0–9"));
    // Leaving the box with such a text says it too (the box goes back to its step).
    type("x");
    w.statusBar()->clearMessage();
    page->timeline()->setFocus();
    QCOMPARE(box->value(), 4);
    QVERIFY(w.statusBar()->currentMessage().contains("is not a step number"));
    // A step of the run: nothing moves while it is typed, Enter goes there, and the status bar
    // says where (a refusal's message does not stay beside the step it did not refuse).
    type("7");
    QCOMPARE(box->value(), 4);
    QTest::keyClick(box, Qt::Key_Return);
    QCOMPARE(box->value(), 7);
    QCOMPARE(values.count(), 1);
    QCOMPARE(w.statusBar()->currentMessage(), QStringLiteral("step 7 (this run has steps 0–9)"));
    const auto r7 = *page->timeline()->stepRange(7);
    const auto [t0, t1] = page->timeline()->viewRange();
    QVERIFY(t0 <= r7.first && r7.second <= t1 && t1 - t0 < 2 * (r7.second - r7.first));
    // Digit keys in the timeline that make a step the run does not have say so too.
    page->timeline()->setFocus();
    QTest::keyClick(page->timeline(), Qt::Key_4);
    QTest::keyClick(page->timeline(), Qt::Key_2);
    QCOMPARE(box->value(), 4);
    QCOMPARE(w.statusBar()->currentMessage(), QStringLiteral("no step 42: this run has steps 0–9"));
}

void TestUiApp::closeRun()
{
    MainWindow w(options());
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QString error;
    QVERIFY(w.openFilesBlocking({m_runA, m_runB}, &error));
    QCOMPARE(w.currentRun()->label, QString("beta"));
    QTest::keyClick(&w, Qt::Key_W, Qt::ControlModifier);
    QCOMPARE(int(w.openRuns().size()), 1);
    QCOMPARE(w.currentRun()->label, QString("alpha"));
    QCOMPARE(w.timelinePage()->run(), w.currentRun());
    w.closeCurrentRun();
    QVERIFY(w.openRuns().empty());
    QVERIFY(!w.currentRun());
    QCOMPARE(w.timelinePage()->timeline()->rowCount(), 0);
    QCOMPARE(w.comparePage()->comparedRuns().size(), size_t(0));
}

void TestUiApp::liveRunGrowsOnTheTimeline()
{
    // A run still being written (status "running"): opened, it is followed, and its new steps
    // show on the Timeline page without the user doing anything; once it completes, following
    // stops.
    const QString path = m_dir.filePath("growing.db");
    auto write = [&](int steps, core::RunStatus status) {
        core::SyntheticParams p;
        p.worldSize = 2;
        p.steps = steps;
        core::Run run = core::makeSyntheticRun(p);
        run.config.name = "growing";
        run.config.status = status;
        return core::saveRun(run, path.toStdString(), core::RunWriter::Mode::Overwrite).has_value();
    };
    QVERIFY(write(3, core::RunStatus::Running));
    // Each rewrite gets a later modification time than the one before (set, not waited for):
    // what the follower polls for.
    auto stamp = std::filesystem::last_write_time(path.toStdString());
    const auto rewrite = [&](int steps, core::RunStatus status) {
        if (!write(steps, status))
            return false;
        stamp += std::chrono::seconds(2);
        std::filesystem::last_write_time(path.toStdString(), stamp);
        return true;
    };
    MainWindow w(options());
    w.setErrorDialogsEnabled(false);
    QSignalSpy opened(&w, &MainWindow::runOpened);
    w.openFiles({path});
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 20000);
    QCOMPARE(w.liveRuns(), QStringList{QFileInfo(path).absoluteFilePath()});
    QCOMPARE(w.timelinePage()->run()->summary().steps, 3);
    QVERIFY(rewrite(7, core::RunStatus::Running));
    QTRY_COMPARE_WITH_TIMEOUT(w.timelinePage()->run()->summary().steps, 7, 20000);
    QCOMPARE(w.timelinePage()->timeline()->runModel(0)->steps().size(), size_t(7));
    QVERIFY(rewrite(9, core::RunStatus::Completed));
    QTRY_VERIFY_WITH_TIMEOUT(w.liveRuns().isEmpty(), 20000);
    QCOMPARE(w.timelinePage()->run()->summary().steps, 9);
    QFile::remove(path);
}

// Issue 31: a run with a stored analysis and overview opens from them (no spans: the first frame),
// draws at the fitted view exactly the spans its detailed model draws, tells the pages that need
// spans to wait, and is replaced in place, the view kept, once its spans are loaded. A run over the
// detail limit stays on its overview and says why.
void TestUiApp::aBigRunOpensFromItsOverviewThenItsSpans()
{
    const QString path = m_dir.filePath("overview.db");
    // 2 M spans on 32 lanes: each lane's 62 k spans fold to fit the overview's budget.
    auto counts = core::writeSyntheticRun(core::bigRunParams(2'000'000, 16), path.toStdString());
    QVERIFY2(counts, counts ? "" : counts.error().message.c_str());
    {
        // Without a stored analysis and overview it is loaded whole, and the app says how to make
        // it open fast.
        MainWindow w(options());
        w.setErrorDialogsEnabled(false);
        QString error;
        QVERIFY2(w.openFilesBlocking({path}, &error, true), qPrintable(error));
        QVERIFY(w.currentRun()->detailed);
        QVERIFY2(w.currentRun()->indexHint.contains("lockstep index"), qPrintable(w.currentRun()->indexHint));
        QVERIFY(w.statusBar()->currentMessage().contains("lockstep index"));
    }
    QVERIFY(core::storeSummaries(path.toStdString())); // what merge, import and `lockstep index` do
    // A rect, and inside the time area its colour and span count (an item cut by the view's edge
    // may count spans beyond it: the LOD's levels do the same).
    struct Drawn {
        QRectF rect;
        uint32_t count;
        QRgb color;
        bool inside;
        bool operator==(const Drawn& o) const
        {
            return rect == o.rect && inside == o.inside && (!inside || (count == o.count && color == o.color));
        }
    };
    // Each lane's overview is exact at thresholds down to its fold gap (core/run_overview.h); the
    // views compared: the whole run, and two windows whose pixel is at least the largest gap
    // (the area is under 2,000 pixels wide), one at a quarter of the run, one at three quarters.
    auto stored = core::loadAnalyzedRun(path.toStdString(), core::AnalyzedRunOptions{.parts = core::kSummaryOverview});
    QVERIFY(stored && stored->stored);
    core::TimeNs maxGap = 0;
    for (const core::LaneOverview& l : stored->overview.lanes)
        maxGap = std::max(maxGap, l.gap);
    QVERIFY(maxGap > 0); // the lanes did fold
    QVERIFY(maxGap < 20'000'000); // the step view below folds finer than every lane's gap
    auto drawn = [maxGap](MainWindow& w) {
        TimelineWidget* t = w.timelinePage()->timeline();
        std::vector<Drawn> out;
        QImage image(t->size(), QImage::Format_ARGB32_Premultiplied);
        for (int view = 0; view < 3; ++view) {
            t->fitAll();
            if (view > 0) {
                const TimelineRunModel* m = t->runModel(0);
                const core::TimeNs at = m->alignedBegin() + (m->alignedEnd() - m->alignedBegin()) * (view == 1 ? 1 : 3) / 4;
                t->setViewRange(at, at + maxGap * 2000);
            }
            t->render(&image);
            const TimelineRunModel* m = t->runModel(0);
            const core::TimeNs a = m->toAbsolute(t->viewRange().first), b = m->toAbsolute(t->viewRange().second);
            for (const DrawSpan& d : t->drawList().spans)
                out.push_back({d.rect, d.count, d.color.rgb(), d.start >= a && d.end <= b});
        }
        t->fitAll();
        return out;
    };
    // What the timeline draws zoomed in on one step (far below the overview's fold gaps).
    auto drawnAtStep = [](MainWindow& w) {
        TimelineWidget* t = w.timelinePage()->timeline();
        QImage image(t->size(), QImage::Format_ARGB32_Premultiplied);
        t->render(&image);
        const TimelineRunModel* m = t->runModel(0);
        const core::TimeNs a = m->toAbsolute(t->viewRange().first), b = m->toAbsolute(t->viewRange().second);
        std::vector<Drawn> out;
        for (const DrawSpan& d : t->drawList().spans)
            out.push_back({d.rect, d.count, d.color.rgb(), d.start >= a && d.end <= b});
        return out;
    };
    std::vector<Drawn> fromOverview, streamed;
    {
        qputenv("LOCKSTEP_MAX_DETAIL_SPANS", "1000");
        const auto restore = qScopeGuard([] { qunsetenv("LOCKSTEP_MAX_DETAIL_SPANS"); });
        MainWindow w(options());
        w.setErrorDialogsEnabled(false);
        w.resize(1400, 900);
        w.show();
        QSignalSpy opened(&w, &MainWindow::runOpened);
        w.openFiles({path});
        QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 20000);
        const LoadedRunPtr run = w.currentRun();
        QVERIFY(!run->detailed);
        QVERIFY(!run->detailPending); // over the limit of 1000 spans
        QVERIFY(run->run->spans.empty());
        QVERIFY(!run->timeline->detailed());
        QCOMPARE(run->summary().spans, qint64(counts->spans));
        QApplication::processEvents();
        fromOverview = drawn(w);
        QVERIFY2(fromOverview.size() > 200, qPrintable(QString::number(fromOverview.size())));
        // A folded item of the overview stands for many spans.
        QVERIFY(std::any_of(fromOverview.begin(), fromOverview.end(), [](const Drawn& d) { return d.count > 1; }));
        // Pages that need spans say so; the summary's numbers are there.
        w.timelinePage()->showSideTab(TimelinePage::KernelsTab);
        QApplication::processEvents();
        const QString hint = w.timelinePage()->kernelPanel()->hint()->text();
        QVERIFY2(hint.contains("more than the app loads"), qPrintable(hint));
        QVERIFY(run->summary().stepTimeMs > 0);
        // Nothing is selected from an overview.
        w.timelinePage()->timeline()->select(SpanRef{0, 0});
        QVERIFY(!w.timelinePage()->timeline()->selection().valid());
        // Zoomed in on a step, far past what the overview draws exactly: the spans of the lanes on
        // screen are streamed in around the view, into the drawing model only.
        w.timelinePage()->timeline()->zoomToStep(20);
        // The overview alone would fold here.
        QVERIFY(double(maxGap) > w.timelinePage()->timeline()->nsPerPixel() * TimelineWidget::kMinPixels);
        QTRY_VERIFY_WITH_TIMEOUT(w.timelinePage()->timeline()->runModel(0) != run->timeline.get()
                                     && !w.timelinePage()->streamingSpans(),
                                 60000);
        QCOMPARE(w.timelinePage()->run(), run);
        const TimelineRunModel* shown = w.timelinePage()->timeline()->runModel(0);
        QVERIFY(!shown->detailed());
        const auto [v0, v1] = w.timelinePage()->timeline()->viewRange();
        // Every lane on screen that the overview does not draw exactly at this zoom has its spans.
        const double threshold = w.timelinePage()->timeline()->nsPerPixel() * TimelineWidget::kMinPixels;
        int needed = 0;
        for (core::LaneId lane : w.timelinePage()->timeline()->visibleLanes(0))
            if (double(shown->overviewGap(lane)) > threshold) {
                ++needed;
                QVERIFY(shown->hasSpans(lane, shown->toAbsolute(v0), shown->toAbsolute(v1)));
            }
        QVERIFY(needed > 0);
        streamed = drawnAtStep(w);
        QVERIFY(streamed.size() > 100);
    }
    MainWindow w(options());
    w.setErrorDialogsEnabled(false);
    w.resize(1400, 900);
    w.show();
    QSignalSpy opened(&w, &MainWindow::runOpened);
    QSignalSpy detailed(&w, &MainWindow::runDetailed);
    QString error;
    QVERIFY2(w.openFilesBlocking({path}, &error, true), qPrintable(error));
    QVERIFY(!w.currentRun()->detailed);
    QVERIFY(w.currentRun()->detailPending);
    w.showPage(MainWindow::TimelinePageIndex);
    QApplication::processEvents();
    // (The spans may arrive meanwhile: the overview and they draw the same, which is the point.)
    QCOMPARE(drawn(w), fromOverview);
    QTRY_COMPARE_WITH_TIMEOUT(detailed.count(), 1, 60000);
    QVERIFY(w.currentRun()->detailed);
    QCOMPARE(w.currentRun()->run->spans.size(), size_t(counts->spans));
    QCOMPARE(int(w.openRuns().size()), 1);
    QApplication::processEvents();
    // The detailed model draws, at the same view, exactly what the overview drew, and on the step
    // exactly what the streamed spans drew.
    QCOMPARE(drawn(w), fromOverview);
    w.timelinePage()->timeline()->zoomToStep(20);
    QCOMPARE(drawnAtStep(w), streamed);
    w.timelinePage()->timeline()->select(SpanRef{0, 0});
    QVERIFY(w.timelinePage()->timeline()->selection().valid());
}

// A run followed while it records that ends as a big file with a stored overview: the live view
// re-reads it, gets the overview first and then its spans (the live loader's second answer used to
// be dropped, leaving "loading spans…" for ever).
void TestUiApp::aFollowedRunThatEndsBigGetsItsSpans()
{
    const QString path = m_dir.filePath("followed.db");
    QVERIFY(core::writeSyntheticRun(core::bigRunParams(1'500'000, 8), path.toStdString()));
    QVERIFY(core::storeSummaries(path.toStdString()));
    // Marked as still recording (the status is not part of what the stored analysis describes).
    auto setStatus = [&](const char* status) {
        sqlite3* db = nullptr;
        if (sqlite3_open(path.toUtf8().constData(), &db) != SQLITE_OK)
            return false;
        const QByteArray sql = QByteArray("UPDATE run SET status = '") + status + "'";
        const bool ok = sqlite3_exec(db, sql.constData(), nullptr, nullptr, nullptr) == SQLITE_OK;
        sqlite3_close(db);
        return ok;
    };
    QVERIFY(setStatus("running"));
    MainWindow w(options());
    w.setErrorDialogsEnabled(false);
    QSignalSpy opened(&w, &MainWindow::runOpened);
    QSignalSpy detailed(&w, &MainWindow::runDetailed);
    w.openFiles({path});
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 20000);
    QVERIFY(!w.liveRuns().isEmpty());
    QTRY_COMPARE_WITH_TIMEOUT(detailed.count(), 1, 60000); // the first open's spans
    // It ends: the live view reads it again, from its overview, then its spans.
    QVERIFY(setStatus("completed"));
    auto stamp = std::filesystem::last_write_time(path.toStdString());
    std::filesystem::last_write_time(path.toStdString(), stamp + std::chrono::seconds(2));
    QTRY_VERIFY_WITH_TIMEOUT(w.liveRuns().isEmpty(), 30000);
    QTRY_VERIFY_WITH_TIMEOUT(w.currentRun()->detailed, 60000);
    QCOMPARE(w.currentRun()->summary().config.status, core::RunStatus::Completed);
    QCOMPARE(w.currentRun()->run->spans.size(), size_t(w.currentRun()->summary().spans));
    QCOMPARE(w.timelinePage()->run(), w.currentRun());
}

QTEST_MAIN(TestUiApp)
// Issue 26 item 2: a run's name (and path) with markup was rendered as rich text in the Timeline
// and What-if titles (an <img src=...> loaded a local file). Every label that shows it shows it as
// text, and no tooltip or item tooltip carries it as markup, on every page.
void TestUiApp::userStringsArePlainText()
{
    const QString markup = QStringLiteral("<img src=/nonexistent/x.png><b>evil</b>");
    QDir().mkpath(m_dir.filePath("<i>folder<i>"));
    const QString path = m_dir.filePath("<i>folder<i>/<b>run<b>.db");
    QCOMPARE(uitest::makeRunFile(path, 2, 8, 4, 0.4, 25, markup), QString());
    MainWindow w(options());
    w.setErrorDialogsEnabled(false);
    w.resize(1200, 800);
    w.show();
    QString error;
    QVERIFY2(w.openFilesBlocking({path, m_runA}, &error), qPrintable(error));
    w.setCurrentRun(0);
    const auto isMarkup = [](const QString& s) { return s.contains(QLatin1String("<img")) || s.contains(QLatin1String("<b>run")); };
    int shown = 0;
    QStringList problems;
    for (int page = 0; page < MainWindow::PageCount; ++page) {
        w.showPage(MainWindow::Page(page));
        QApplication::processEvents();
        for (QLabel* label : w.findChildren<QLabel*>()) {
            if (!isMarkup(label->text()))
                continue;
            ++shown;
            if (label->textFormat() != Qt::PlainText)
                problems << QStringLiteral("page %1: a label shows the name as markup: %2").arg(page).arg(label->text());
        }
        for (QWidget* widget : w.findChildren<QWidget*>())
            if (isMarkup(widget->toolTip()))
                problems << QStringLiteral("page %1: a tooltip carries markup: %2").arg(page).arg(widget->toolTip());
        for (QAbstractItemView* view : w.findChildren<QAbstractItemView*>()) {
            const QAbstractItemModel* m = view->model();
            if (!m)
                continue;
            for (int r = 0; r < m->rowCount(); ++r)
                for (int c = 0; c < m->columnCount(); ++c)
                    if (const QString tip = m->data(m->index(r, c), Qt::ToolTipRole).toString(); isMarkup(tip))
                        problems << QStringLiteral("page %1: an item tooltip carries markup: %2").arg(page).arg(tip);
            for (int c = 0; c < m->columnCount(); ++c)
                if (const QString tip = m->headerData(c, Qt::Horizontal, Qt::ToolTipRole).toString(); isMarkup(tip))
                    problems << QStringLiteral("page %1: a header tooltip carries markup: %2").arg(page).arg(tip);
        }
    }
    problems.removeDuplicates();
    QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1Char('\n'))));
    QVERIFY2(shown >= 2, "the name was expected in the Timeline and What-if titles");
}

#include "test_ui_app.moc"

// The real torch.profiler trace of two ranks sharing an H100 (tests/data/gpu), imported once.
QString TestUiApp::importedGpuRun()
{
    const QString out = m_dir.filePath("kineto-gloo2.db");
    if (QFile::exists(out))
        return out;
    const std::string data = LOCKSTEP_TEST_DATA_DIR "/gpu/";
    auto stats = core::importTraces({data + "kineto-gloo2-rank-0.json.gz", data + "kineto-gloo2-rank-1.json.gz"}, out.toStdString());
    return stats ? out : QString();
}

// Opens that run in `w` on the Timeline page with `tab` beside it, shown and exposed.
bool TestUiApp::showGpuRun(MainWindow& w, TimelinePage::SideTab tab, QString* error)
{
    const QString path = importedGpuRun();
    if (path.isEmpty()) {
        *error = "importing tests/data/gpu's kineto-gloo2 pair failed";
        return false;
    }
    w.setErrorDialogsEnabled(false);
    w.resize(1400, 900);
    if (!w.openFilesBlocking({path}, error))
        return false;
    w.showPage(MainWindow::TimelinePageIndex);
    w.timelinePage()->showSideTab(tab);
    w.show();
    if (!QTest::qWaitForWindowExposed(&w)) {
        *error = "the window was not exposed";
        return false;
    }
    return true;
}

// Issue 28: a rank's nearly idle GPU streams (each busy less than 5 % of its busiest stream's
// time) fold into one "other streams" row that draws the union of their spans; a click on its
// name, or O, shows them; a run switch folds them again; finding a span in one shows it.
void TestUiApp::quietGpuStreamsFoldIntoOneRow()
{
    MainWindow w(options());
    QString error;
    QVERIFY2(showGpuRun(w, TimelinePage::SummaryTab, &error), qPrintable(error));
    TimelineWidget* tl = w.timelinePage()->timeline();
    const TimelineRunModel& m = *tl->runModel(0);
    const core::Run& run = m.run();
    // The rule, checked lane by lane against the run's own spans.
    int quietTotal = 0;
    for (const auto& rl : m.ranks()) {
        std::map<uint32_t, core::TimeNs> busy;
        core::TimeNs busiest = 0;
        for (core::LaneId id : rl->lanes) {
            if (run.lanes[id.v].kind != core::LaneKind::GpuStream)
                continue;
            const auto [a, b] = run.laneSpanRange(id);
            for (size_t i = a; i < b; ++i)
                busy[id.v] += run.spans[i].duration();
            busiest = std::max(busiest, busy[id.v]);
        }
        QVERIFY(busiest > 0);
        for (const auto& [lane, t] : busy) {
            const bool quiet = m.isQuietLane(core::LaneId{lane});
            if (quiet)
                QVERIFY2(double(t) < TimelineRunModel::kQuietStreamShare * double(busiest), qPrintable(QString::fromStdString(run.lanes[lane].name)));
        }
        QVERIFY2(rl->quietLanes.size() >= 2, qPrintable(QStringLiteral("rank %1: %2 quiet").arg(rl->rank).arg(rl->quietLanes.size())));
        quietTotal += int(rl->quietLanes.size());
        qInfo("rank %d: %zu of %zu lanes folded (union %lld ns)", rl->rank, rl->quietLanes.size(), rl->lanes.size(),
              static_cast<long long>(rl->quietBusyNs));
    }
    // Folded: one "other streams" row per rank, and none of the quiet lanes has a row.
    auto countRows = [&](TimelineRowKind kind) {
        const auto rows = tl->rows();
        return int(std::count_if(rows.begin(), rows.end(), [&](const TimelineRow& r) { return r.kind == kind; }));
    };
    auto quietLaneRows = [&] {
        int n = 0;
        for (const TimelineRow& r : tl->rows())
            n += r.kind == TimelineRowKind::Lane && m.isQuietLane(core::LaneId{uint32_t(r.lane)});
        return n;
    };
    QCOMPARE(countRows(TimelineRowKind::QuietStreams), int(m.ranks().size()));
    QCOMPARE(quietLaneRows(), 0);
    const int foldedRows = tl->rowCount();
    TimelineRow fold;
    for (const TimelineRow& r : tl->rows())
        if (r.kind == TimelineRowKind::QuietStreams && r.rank == m.ranks().front()->rank)
            fold = r;
    QVERIFY(fold.collapsed);
    // The row draws the union of the quiet spans: its colour is on screen, in that row only.
    tl->fitAll();
    tl->setScrollOffset(0);
    QVERIFY(fold.top + fold.height < tl->height());
    const QImage folded = tl->grab().toImage();
    QVERIFY(countPixels(folded.copy(0, fold.top, folded.width(), fold.height), palette::quietStreamsColor()) > 100);
    QCOMPARE(countPixels(folded.copy(0, 0, folded.width(), fold.top), palette::quietStreamsColor()), 0);
    // A click on rank 0's row name expands it: its quiet lanes get rows.
    const QPoint at(20, fold.top - tl->scrollOffset() + fold.height / 2);
    QSignalSpy rowsChanged(tl, &TimelineWidget::rowsChanged);
    QTest::mouseClick(tl, Qt::LeftButton, Qt::NoModifier, at);
    QCOMPARE(rowsChanged.count(), 1);
    QVERIFY(!tl->streamsFolded(0, fold.rank));
    QCOMPARE(quietLaneRows(), int(m.ranks().front()->quietLanes.size()));
    QCOMPARE(tl->rowCount(), foldedRows + int(m.ranks().front()->quietLanes.size()));
    QTest::mouseClick(tl, Qt::LeftButton, Qt::NoModifier, at);
    QVERIFY(tl->streamsFolded(0, fold.rank));
    QCOMPARE(tl->rowCount(), foldedRows);
    // O: every rank's, then back.
    tl->setFocus();
    QTest::keyClick(tl, Qt::Key_O);
    QCOMPARE(quietLaneRows(), quietTotal);
    QTest::keyClick(tl, Qt::Key_O);
    QCOMPARE(quietLaneRows(), 0);
    // A run switch (the same file opened again) starts folded.
    QTest::keyClick(tl, Qt::Key_O);
    QCOMPARE(quietLaneRows(), quietTotal);
    tl->setRuns({TimelineRun{nullptr, QString(), w.currentRun()->timeline}});
    QCOMPARE(quietLaneRows(), 0);
    QCOMPARE(tl->rowCount(), foldedRows);
    // Finding a span on a quiet stream shows that rank's quiet streams.
    const core::LaneId quiet = m.ranks().back()->quietLanes.front();
    const auto [a, b] = run.laneSpanRange(quiet);
    if (a < b) {
        tl->select(SpanRef{0, qint64(a)});
        QTest::keyClick(tl, Qt::Key_Right); // moves along the lane and brings the span into view
        QVERIFY(!tl->streamsFolded(0, m.ranks().back()->rank));
        QVERIFY(tl->spanCenter(tl->selection()).x() >= 0);
    }
}

// Issue 28: a click on a row of the Kernels tab outlines those kernels in the timeline (its
// search) without moving the view; a double-click also goes to the first.
void TestUiApp::kernelRowClickOutlinesItsKernels()
{
    MainWindow w(options());
    QString error;
    QVERIFY2(showGpuRun(w, TimelinePage::KernelsTab, &error), qPrintable(error));
    KernelPanel* panel = w.timelinePage()->kernelPanel();
    QVERIFY(panel->model()->rowCount() > 1);
    TimelineWidget* tl = w.timelinePage()->timeline();
    QVERIFY(tl->searchMatches().empty());
    const auto view = tl->viewRange();
    QTableView* table = panel->table();
    const QModelIndex second = table->model()->index(1, KernelTableModel::Count);
    const QString name = table->model()->index(1, KernelTableModel::Name).data().toString();
    QTest::mouseClick(table->viewport(), Qt::LeftButton, Qt::NoModifier, table->visualRect(second).center());
    const auto& matches = tl->searchMatches();
    QVERIFY2(!matches.empty(), qPrintable(name));
    const core::Run& run = tl->runModel(0)->run();
    // Exactly that kernel's spans: every one of them, and nothing else.
    size_t named = 0;
    for (const core::Span& s : run.spans)
        named += run.strings.text(s.name) == name.toStdString();
    QCOMPARE(matches.size(), named);
    for (const SpanRef& ref : matches)
        QCOMPARE(QString::fromStdString(std::string(run.strings.text(run.spans[size_t(ref.span)].name))), name);
    QCOMPARE(w.timelinePage()->searchEdit()->text(), name);
    QVERIFY(tl->viewRange() == view); // a click outlines, it does not move the view
    QVERIFY(!tl->selection().valid());
    QTest::mouseDClick(table->viewport(), Qt::LeftButton, Qt::NoModifier, table->visualRect(second).center());
    QVERIFY(tl->selection().valid()); // the first of them, selected and in view
    QCOMPARE(tl->selection(), matches.front());
}

// Issue 28: Compare's "What changed" is computed in the thread pool. The diff's job is held at
// its start (a hook run in the job's thread) while the GUI thread goes on: the page says it is
// computing, a second request supersedes the first, and when both jobs are let go only the
// newest result is applied.
void TestUiApp::whatChangedIsComputedOffTheGuiThread()
{
    auto a = loadAndAnalyze(m_runA);
    auto b = loadAndAnalyze(m_runB);
    QVERIFY(a && b);
    QSemaphore entered, release;
    std::atomic<int> onGuiThread{0};
    QThread* gui = QThread::currentThread();
    ComparePage::setDiffHookForTesting([&] {
        if (QThread::currentThread() == gui) {
            ++onGuiThread; // computed where it must not be: let it through, the test fails below
            return;
        }
        entered.release();
        release.acquire();
    });
    auto reset = qScopeGuard([&] {
        release.release(8);
        QThreadPool::globalInstance()->waitForDone();
        ComparePage::setDiffHookForTesting({});
    });
    ComparePage page;
    QSignalSpy ready(&page, &ComparePage::changesReady);
    page.setOpenRuns({*a, *b});
    QCOMPARE(int(page.comparedRuns().size()), 2);
    // setOpenRuns returned while the job is held: the GUI thread was not waiting for it. (The
    // bound only turns a job that never starts into a failure instead of a hang.)
    QCOMPARE(onGuiThread.load(), 0);
    QVERIFY(entered.tryAcquire(1, 60000)); // the job is in its thread, held
    QVERIFY(page.changesPending());
    QVERIFY2(page.changesView()->toPlainText().contains("Computing"), qPrintable(page.changesView()->toPlainText()));
    QCOMPARE(ready.count(), 0);
    // The GUI thread handles events meanwhile: another baseline is a new request.
    page.baselineBox()->setCurrentIndex(1);
    emit page.baselineBox()->activated(1);
    QCOMPARE(onGuiThread.load(), 0);
    QVERIFY(entered.tryAcquire(1, 60000)); // the second job, held too
    release.release(2);
    QThreadPool::globalInstance()->waitForDone(); // both jobs have finished
    QCoreApplication::sendPostedEvents(); // their results reach the page
    QApplication::processEvents();
    QCOMPARE(ready.count(), 1); // the first, superseded, was dropped
    QVERIFY(!page.changesPending());
    const QString changes = page.changesView()->toPlainText();
    // Baseline beta -> alpha: the bucket cap back from 4 MiB to 25 MiB.
    QVERIFY2(changes.contains("bucket_cap_bytes: 4194304 -> 26214400"), qPrintable(changes));
}
