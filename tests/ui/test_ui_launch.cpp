// Launching a real 2-rank run from the Launch panel: fields set, Run clicked, the `lockstep` CLI
// records it (gloo over 127.0.0.1), the progress bar and live timeline follow, and the finished
// run appears in the browser and opens. Skips when the CLI was built without the runtime.
#include "launch_panel.h"
#include "main_window.h"
#include "run_browser_page.h"
#include "ui_test_support.h"

#include "timeline/timeline_widget.h"

#include <QPlainTextEdit>
#include <QApplication>
#include <QDir>
#include <QProcess>
#include <QRegularExpression>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace lockstep;
using namespace lockstep::ui;

class TestUiLaunch : public QObject {
    Q_OBJECT
private slots:
    void launchTwoRankRun();
    void cancelStopsTheRun();

private:
    bool cliHasRun();
};

bool TestUiLaunch::cliHasRun()
{
    // `lockstep run --help` would print the top-level help and succeed even without `run`;
    // the list of sub-commands says whether it is there.
    QProcess p;
    p.start(lockstepCliPath(), {"--help"});
    if (!p.waitForFinished(20000))
        return false;
    const QString help = QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError());
    return help.contains(QRegularExpression(QStringLiteral("(?m)^\\s+run\\b")));
}

void TestUiLaunch::launchTwoRankRun()
{
    QStandardPaths::setTestModeEnabled(true);
    if (!cliHasRun())
        QSKIP("the lockstep CLI has no `run` command (built without the runtime)");
    QTemporaryDir dir;
    MainWindow::Options o;
    o.persistent = false;
    o.workspace = dir.path();
    MainWindow w(o);
    w.setErrorDialogsEnabled(false);
    w.resize(1200, 800);
    w.show();
    w.showPage(MainWindow::LaunchPageIndex);

    LaunchPanel* panel = w.launchPanel();
    LaunchSettings s;
    s.name = "from-panel";
    s.training.model = "mlp";
    s.training.layers = 2;
    s.training.width = 64;
    s.worldSize = 2;
    s.bucketMb = "1";
    s.training.steps = 16;
    s.training.batch = 16;
    // A 150 ms straggler keeps the run recording for a few seconds, so the live view (re-read
    // every second) sees it grow.
    s.training.stragglerRank = 1;
    s.training.stragglerMs = 150;
    panel->setSettings(s);
    QSignalSpy finished(panel, &LaunchPanel::finished);
    QSignalSpy live(panel, &LaunchPanel::liveRunUpdated);
    QSignalSpy opened(&w, &MainWindow::runOpened);
    QTest::mouseClick(panel->runButton(), Qt::LeftButton);
    QVERIFY(panel->isRunning() || finished.count() == 1);
    QVERIFY(!panel->runButton()->isEnabled() || finished.count() == 1);
    QTRY_VERIFY_WITH_TIMEOUT(live.count() >= 1 || finished.count() == 1, 240000);
    QVERIFY2(live.count() >= 1, "the live view never read the run while it recorded");
    {
        const auto partial = live.at(0).at(0).value<LoadedRunPtr>();
        QVERIFY(partial->run->spans.size() > 0);
        QVERIFY(partial->summary.steps <= 16);
        QApplication::processEvents();
        const QImage img = panel->liveTimeline()->grab().toImage();
        img.save(QDir::temp().filePath("lockstep-ui-test-live.png"));
        QVERIFY(uitest::distinctColors(img) > 8);
    }
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 240000);
    const int code = finished.at(0).at(0).toInt();
    QVERIFY2(code == 0, qPrintable(finished.at(0).at(1).toString() + "\n" + panel->log()->toPlainText()));
    const QString out = dir.filePath("from-panel.db");
    QCOMPARE(finished.at(0).at(2).toStringList(), QStringList{out});
    QCOMPARE(panel->progressBar()->value(), panel->progressBar()->maximum());

    // It shows up in the browser and opens.
    QTRY_VERIFY_WITH_TIMEOUT(opened.count() >= 1, 30000);
    QCOMPARE(w.currentRun()->summary.worldSize, 2);
    QCOMPARE(w.currentRun()->summary.steps, 16);
    QCOMPARE(w.currentRun()->summary.stragglers, std::vector<int32_t>{1});
    QTRY_VERIFY_WITH_TIMEOUT(w.browserPage()->model()->rowCount() == 1, 30000);
    QCOMPARE(w.browserPage()->model()->index(0, RunBrowserModel::Name).data().toString(), QString("from-panel"));
    QCOMPARE(w.browserPage()->model()->index(0, RunBrowserModel::Status).data().toString(), QString("completed"));
}

void TestUiLaunch::cancelStopsTheRun()
{
    if (!cliHasRun())
        QSKIP("the lockstep CLI has no `run` command (built without the runtime)");
    QTemporaryDir dir;
    LaunchPanel panel;
    panel.setWorkspace(dir.path());
    LaunchSettings s;
    s.name = "cancelled";
    s.training.layers = 2;
    s.training.width = 64;
    s.training.steps = 100000; // would take far longer than the test
    panel.setSettings(s);
    QSignalSpy finished(&panel, &LaunchPanel::finished);
    panel.startRun();
    QVERIFY(panel.isRunning());
    QTest::qWait(1500);
    panel.cancel();
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 30000);
    QVERIFY(finished.at(0).at(0).toInt() != 0);
    QVERIFY(!panel.isRunning());
    QVERIFY(panel.runButton()->isEnabled());
}

QTEST_MAIN(TestUiLaunch)
#include "test_ui_launch.moc"
