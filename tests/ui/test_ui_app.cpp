// The desktop app as a user meets it, offscreen: opening a valid and a broken run file, the run
// browser over a workspace, the charts page rendering and exporting, the compare page with two
// runs, keyboard shortcuts, and `lockstep-ui --screenshot` for every view (the real binary).
#include "charts_page.h"
#include "compare_page.h"
#include "launch_panel.h"
#include "main_window.h"
#include "run_browser_page.h"
#include "screenshot.h"
#include "timeline_page.h"
#include "ui_test_support.h"

#include "timeline/timeline_widget.h"

#include <QAction>
#include <QApplication>
#include <QAbstractBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QDir>
#include <QDropEvent>
#include <QFile>
#include <QMimeData>
#include <QSettings>
#include <QLineEdit>
#include <QProcess>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

using namespace lockstep;
using namespace lockstep::ui;

class TestUiApp : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void opensValidRun();
    void brokenRunGivesClearErrorNoCrash();
    void browserListsWorkspace();
    void chartsRenderAndExport();
    void compareTwoRuns();
    void shortcutsAndPages();
    void failedRunWithoutSteps();
    void dragAndDropOpens();
    void settingsPersist();
    void importTrace();
    void screenshotEachView_data();
    void screenshotEachView();
    void screenshotErrors();

private:
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
    charts->setRank(1);
    QVERIFY(charts->chart(ChartsPage::Breakdown)->title().contains("rank 1"));
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
    // Every listed shortcut names a key and an action; the menus carry the same keys.
    const auto list = MainWindow::shortcutList();
    QVERIFY(list.size() >= 10);
    QStringList menuKeys;
    for (QAction* a : w.findChildren<QAction*>())
        if (!a->shortcut().isEmpty())
            menuKeys << a->shortcut().toString();
    for (const QString& k : {"Ctrl+O", "Ctrl+1", "Ctrl+5", "F", "Ctrl+E", "F1", "Ctrl+R"})
        QVERIFY2(menuKeys.contains(k), qPrintable(k));
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
    QVERIFY(w.chartsPage()->chart(ChartsPage::Breakdown)->title().contains("no recorded steps"));
    QVERIFY(w.chartsPage()->chart(ChartsPage::Breakdown)->title().contains("out of memory"));
    // The run without steps does not pull the cross-run charts to zero.
    const auto sweep = w.chartsPage()->chart(ChartsPage::BucketSweep)->title();
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
    for (const char* v : {"timeline", "charts", "compare", "browser", "launch"})
        QTest::newRow(v) << QString(v);
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

QTEST_MAIN(TestUiApp)
#include "test_ui_app.moc"
