// Launching a real 2-rank run from the Launch panel: fields set, Run clicked, the `lockstep` CLI
// records it (gloo over 127.0.0.1), the progress bar and live timeline follow, and the finished
// run appears in the browser and opens. Skips when the CLI was built without the runtime.
// "Your script": the recorder's own test job (tests/python/ddp_job.py, PyTorch DDP on Debian's
// torch, gloo) recorded by `lockstep record` from the panel, live and to the end, and a script
// that raises; skips when the CLI was built without the Python recorder.
#include "launch_panel.h"
#include "main_window.h"
#include "run_browser_page.h"
#include "ui_test_support.h"

#include "timeline/timeline_widget.h"

#include "lockstep/core/run_db.h"
#include "lockstep/job/flags.h"

#include <QAction>
#include <QCheckBox>
#include <QFile>
#include <QFileInfo>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QApplication>
#include <QSpinBox>
#include <QTableWidget>
#include <QDir>
#include <QProcess>
#include <QRegularExpression>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <climits>

using namespace lockstep;
using namespace lockstep::ui;

class TestUiLaunch : public QObject {
    Q_OBJECT
private slots:
    void formIsBuiltFromTheFlagTable();
    void launchTwoRankRun();
    void sweepLiveViewFollowsThePointInProgress();
    void cancelStopsTheRun();
    void scriptFormArgumentsAndChecks();
    void recordScriptFromThePanel();
    void failingScriptEndsWithItsMessage();

private:
    bool cliHasRun() { return cliHas(QStringLiteral("run")); }
    bool cliHasRecord() { return cliHas(QStringLiteral("record")); }
    bool cliHas(const QString& command);
};

bool TestUiLaunch::cliHas(const QString& command)
{
    // `lockstep run --help` would print the top-level help and succeed even without `run`;
    // the list of sub-commands says whether it is there.
    QProcess p;
    p.start(lockstepCliPath(), {"--help"});
    if (!p.waitForFinished(20000))
        return false;
    const QString help = QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError());
    return help.contains(QRegularExpression(QStringLiteral("(?m)^\\s+%1\\b").arg(command)));
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
    QSignalSpy phases(panel, &LaunchPanel::phaseShown);
    QTest::mouseClick(panel->runButton(), Qt::LeftButton);
    QVERIFY(panel->isRunning() || finished.count() == 1);
    QVERIFY(!panel->runButton()->isEnabled() || finished.count() == 1);
    // The first reads may come before any step is committed (a shard holds its configuration
    // from the start, its spans from the end of step 0): wait for one with spans.
    auto liveWithSpans = [&]() -> LoadedRunPtr {
        for (const auto& call : live)
            if (const auto r = call.at(0).value<LoadedRunPtr>(); !r->run->spans.empty())
                return r;
        return nullptr;
    };
    QTRY_VERIFY_WITH_TIMEOUT(liveWithSpans() || finished.count() == 1, 240000);
    QVERIFY2(liveWithSpans(), "the live view never read the run's spans while it recorded");
    {
        const auto partial = liveWithSpans();
        QVERIFY(partial->run->spans.size() > 0);
        QVERIFY(partial->summary().steps <= 16);
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
    // Issue 28: before the first step the bar said where the job was, in order, not "starting…".
    QStringList said;
    for (const auto& call : phases)
        said << call.at(0).toString();
    const auto at = [&](const QString& what) {
        for (int i = 0; i < said.size(); ++i)
            if (said[i].startsWith(what))
                return i;
        return -1;
    };
    const int starting = at("starting workers"), rendezvous = at("rendezvous"), warmUp = at("warm-up"),
              first = at(QStringLiteral("step 1/%1").arg(s.training.steps));
    QVERIFY2(starting >= 0 && starting < rendezvous && rendezvous < warmUp && warmUp < first, qPrintable(said.join(" | ")));

    // It shows up in the browser and opens.
    QTRY_VERIFY_WITH_TIMEOUT(opened.count() >= 1, 30000);
    QCOMPARE(w.currentRun()->summary().worldSize, 2);
    QCOMPARE(w.currentRun()->summary().steps, 16);
    QCOMPARE(w.currentRun()->summary().stragglers, std::vector<int32_t>{1});
    QTRY_VERIFY_WITH_TIMEOUT(w.browserPage()->model()->rowCount() == 1, 30000);
    QCOMPARE(w.browserPage()->model()->index(0, RunBrowserModel::Name).data().toString(), QString("from-panel"));
    QCOMPARE(w.browserPage()->model()->index(0, RunBrowserModel::Status).data().toString(), QString("completed"));
}

// Every training flag of the job library's table has its widget, with the table's range,
// choices and help; what the form says is what the arguments say; clearing a fault clears it.
void TestUiLaunch::formIsBuiltFromTheFlagTable()
{
    LaunchPanel panel;
    int widgets = 0;
    for (const job::Flag& f : job::trainingFlags()) {
        if (f.scope != job::FlagScope::Training || f.name == "--bucket-mb")
            continue;
        const QString name = QString::fromUtf8(f.name.data(), qsizetype(f.name.size()));
        QWidget* w = panel.flagWidget(name);
        QVERIFY2(w, qPrintable(name));
        ++widgets;
        QVERIFY2(w->toolTip().contains(name), qPrintable(name));
        QVERIFY2(w->toolTip().contains(QString::fromUtf8(f.help.data(), qsizetype(f.help.size()))), qPrintable(name));
        switch (f.type) {
        case job::FlagType::Integer: {
            auto* box = qobject_cast<QSpinBox*>(w);
            QVERIFY2(box, qPrintable(name));
            QCOMPARE(box->minimum(), int(f.intMin));
            QCOMPARE(box->maximum(), int(std::min<int64_t>(f.intMax, INT_MAX)));
            break;
        }
        case job::FlagType::Number:
            QVERIFY2(qobject_cast<QDoubleSpinBox*>(w), qPrintable(name));
            QCOMPARE(qobject_cast<QDoubleSpinBox*>(w)->maximum(), f.max);
            break;
        case job::FlagType::Choice: {
            auto* combo = qobject_cast<QComboBox*>(w);
            QVERIFY2(combo, qPrintable(name));
            QCOMPARE(combo->count(), int(f.choices.size()));
            break;
        }
        case job::FlagType::Switch:
            QVERIFY2(qobject_cast<QCheckBox*>(w), qPrintable(name));
            break;
        default:
            break;
        }
    }
    QCOMPARE(widgets, 24); // the table's Training flags but --bucket-mb (the run's own field)
    // The form's defaults are the table's: no argument beyond the run's own.
    LaunchSettings s = panel.settings();
    QCOMPARE(runArguments(s, "a.db"), (QStringList{"run", "--nproc", "2", "--out", "a.db", "--progress", "protocol"}));
    // A straggler and a link speed set, then cleared: nothing of them is left in the arguments.
    s.training.stragglerRank = 1;
    s.training.stragglerMs = 150;
    s.training.linkGbps = 2.5;
    panel.setSettings(s);
    QVERIFY(panel.flagWidget("--straggler")->isEnabled());
    QVERIFY(runArguments(panel.settings(), "a.db").contains("1:150"));
    s.training.stragglerRank = -1;
    s.training.linkGbps = 0;
    panel.setSettings(s);
    QVERIFY(!panel.flagWidget("--straggler")->isEnabled());
    const QStringList cleared = runArguments(panel.settings(), "a.db");
    QVERIFY2(!cleared.contains("--straggler") && !cleared.contains("--link-gbps"), qPrintable(cleared.join(' ')));
    QCOMPARE(panel.settings().training.stragglerMs, 0.0);
    // The table's rules are checked before anything starts.
    s.training.stragglerRank = 5;
    s.training.stragglerMs = 10;
    panel.setSettings(s);
    QSignalSpy finished(&panel, &LaunchPanel::finished);
    panel.startRun();
    QVERIFY(!panel.isRunning());
    QVERIFY2(panel.statusLabel()->text().contains("rank 5 does not exist"), qPrintable(panel.statusLabel()->text()));
}

// A sweep of two bucket caps: the live view follows the run in progress (the second point's file
// once it starts), and the results land in a table, one row per run, sortable by number.
void TestUiLaunch::sweepLiveViewFollowsThePointInProgress()
{
    if (!cliHasRun())
        QSKIP("the lockstep CLI has no `run` command (built without the runtime)");
    QTemporaryDir dir;
    LaunchPanel panel;
    panel.setWorkspace(dir.path());
    LaunchSettings s;
    s.name = "sweep";
    s.worldSize = 2;
    s.bucketMb = "1,4";
    s.training.layers = 2;
    s.training.width = 64;
    s.training.steps = 12;
    s.training.batch = 16;
    // 150 ms of extra compute per step keeps each point recording for a few seconds.
    s.training.stragglerRank = 1;
    s.training.stragglerMs = 150;
    panel.setSettings(s);
    QSignalSpy finished(&panel, &LaunchPanel::finished);
    QSignalSpy live(&panel, &LaunchPanel::liveRunUpdated);
    panel.startSweep();
    QVERIFY(panel.isRunning());
    const QString second = QDir(dir.filePath("sweep")).filePath("mlp-n2-b4.db");
    QTRY_VERIFY_WITH_TIMEOUT(panel.liveRunFile() == second || finished.count() == 1, 240000);
    QCOMPARE(panel.liveRunFile(), second);
    // A live read of the second point's run arrives while it records.
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1
                                 || (!live.isEmpty()
                                     && live.last().at(0).value<LoadedRunPtr>()->run->config.bucketCapBytes == 4 << 20),
                             240000);
    QVERIFY2(!live.isEmpty() && live.last().at(0).value<LoadedRunPtr>()->run->config.bucketCapBytes == 4 << 20,
             "the live view never showed the sweep's second run");
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 240000);
    QCOMPARE(finished.at(0).at(0).toInt(), 0);
    QCOMPARE(finished.at(0).at(2).toStringList().size(), 2);
    QTableWidget* table = panel.sweepTable();
    QTRY_COMPARE_WITH_TIMEOUT(table->rowCount(), 2, 30000);
    QTRY_VERIFY_WITH_TIMEOUT(table->item(1, 4) != nullptr, 30000);
    for (int row = 0; row < 2; ++row) {
        QCOMPARE(table->item(row, 1)->data(Qt::DisplayRole).toInt(), 2); // ranks, stored as a number
        QVERIFY(table->item(row, 4)->data(Qt::DisplayRole).toDouble() > 0); // step time in ms
    }
    table->sortItems(2, Qt::DescendingOrder); // bucket cap
    QCOMPARE(table->item(0, 2)->data(Qt::DisplayRole).toDouble(), 4.0);
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
    // Cancelled once it trains: the progress bar has counted a step from the ranks' progress lines.
    QTRY_VERIFY_WITH_TIMEOUT(panel.progressBar()->value() > 0, 60000);
    panel.cancel();
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 30000);
    // The launcher ended on the SIGTERM (128 + 15), as every interrupted command does, keeping
    // the completed steps in the run file marked failed, "interrupted".
    QCOMPARE(finished.at(0).at(0).toInt(), 143);
    QVERIFY(!panel.isRunning());
    QVERIFY(panel.runButton()->isEnabled());
    auto run = core::loadRun(panel.outputPath().toStdString());
    QVERIFY2(run.has_value(), run ? "" : run.error().message.c_str());
    QCOMPARE(run->config.status, core::RunStatus::Failed);
    QCOMPARE(QString::fromStdString(run->config.failureCause), QString("interrupted"));
    QVERIFY(!run->steps.empty());
}

// The script form's argument list and checks, without a process: the script and its arguments
// after "--" (split as a shell would, no shell run), the CLI's checks before anything starts, and
// the form shown follows what is set and started.
void TestUiLaunch::scriptFormArgumentsAndChecks()
{
    QStandardPaths::setTestModeEnabled(true);
    QTemporaryDir dir;
    ScriptSettings s;
    s.script = "/work/train.py";
    // QProcess::splitCommand's words: double quotes keep spaces, """ is a literal quote; a single
    // quote and a $ are plain characters (no shell expands anything).
    s.arguments = R"(--lr 0.1  --tag "two words" it's a"""b $HOME)";
    s.worldSize = 3;
    QCOMPARE(recordArguments(s, "/ws/train-n3.db"),
             (QStringList{"record", "--nproc", "3", "--out", "/ws/train-n3.db", "--run-name", "train-n3", "--progress",
                          "protocol", "--", "/work/train.py", "--lr", "0.1", "--tag", "two words", "it's", "a\"b",
                          "$HOME"}));
    s.name = "my run";
    s.python = "/opt/venv/bin/python";
    s.quiet = true;
    s.arguments.clear();
    QCOMPARE(recordArguments(s, "/ws/my_run.db"),
             (QStringList{"record", "--nproc", "3", "--out", "/ws/my_run.db", "--run-name", "my run", "--progress",
                          "protocol", "--python", "/opt/venv/bin/python", "--quiet", "--", "/work/train.py"}));

    // The checks, each with the CLI's words.
    const QString py = dir.filePath("train.py");
    const QString txt = dir.filePath("train.txt");
    for (const QString& f : {py, txt}) {
        QFile file(f);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write("print('hi')\n");
    }
    ScriptSettings ok;
    ok.script = py;
    QCOMPARE(scriptProblem(ok), QString());
    auto problem = [&](auto change) {
        ScriptSettings b = ok;
        change(b);
        return scriptProblem(b);
    };
    QVERIFY(problem([](ScriptSettings& b) { b.script = " "; }).contains("choose a script"));
    const QString gone = dir.filePath("gone.py");
    QVERIFY(problem([&](ScriptSettings& b) { b.script = gone; }).contains("no such script: " + gone));
    QVERIFY(problem([&](ScriptSettings& b) { b.script = dir.path(); }).contains("no such script")); // a folder
    QVERIFY(problem([&](ScriptSettings& b) { b.script = txt; }).contains("not a Python script (.py)"));
    QVERIFY(problem([](ScriptSettings& b) { b.worldSize = 0; }).contains("--nproc"));
    QVERIFY(problem([](ScriptSettings& b) { b.worldSize = job::kMaxLocalRanks + 1; }).contains("--nproc"));
    QCOMPARE(problem([](ScriptSettings& b) { b.worldSize = job::kMaxLocalRanks; }), QString());
    QVERIFY(problem([&](ScriptSettings& b) { b.python = txt; }).contains("cannot be run"));

    // The panel: setting a script shows its form; a missing script is refused, nothing starts.
    LaunchPanel panel;
    panel.setWorkspace(dir.path());
    QCOMPARE(panel.mode(), LaunchMode::BuiltIn);
    QCOMPARE(panel.runButton()->text(), QString("Run"));
    ScriptSettings missing;
    missing.script = gone;
    missing.name = "never";
    panel.setScriptSettings(missing);
    QCOMPARE(panel.mode(), LaunchMode::Script);
    QCOMPARE(panel.runButton()->text(), QString("Record"));
    QVERIFY(panel.sweepButton()->isHidden());
    QSignalSpy started(&panel, &LaunchPanel::started);
    QSignalSpy finished(&panel, &LaunchPanel::finished);
    QTest::mouseClick(panel.runButton(), Qt::LeftButton);
    QVERIFY(!panel.isRunning());
    QVERIFY(panel.process() == nullptr);
    QCOMPARE(started.count(), 0);
    QCOMPARE(finished.count(), 0);
    QVERIFY2(panel.statusLabel()->text().contains("no such script"), qPrintable(panel.statusLabel()->text()));
    QVERIFY(!QFileInfo::exists(dir.filePath("never.db")));
    QCOMPARE(panel.scriptSettings().script, missing.script);
    // The built-in form's API keeps its meaning: its settings show its form.
    panel.setSettings(LaunchSettings{});
    QCOMPARE(panel.mode(), LaunchMode::BuiltIn);
    QVERIFY(!panel.sweepButton()->isHidden());
}

// The recorder's test job, 2 ranks of PyTorch DDP, recorded from the panel: the live timeline grows
// while it trains, the run ends with exit 0, opens with 2 ranks and DDP's buckets, and the script
// and its arguments are remembered.
void TestUiLaunch::recordScriptFromThePanel()
{
    QStandardPaths::setTestModeEnabled(true);
    if (!cliHasRecord())
        QSKIP("the lockstep CLI has no `record` command (built without the Python recorder)");
    QTemporaryDir dir;
    MainWindow::Options o;
    o.persistent = false;
    o.workspace = dir.path();
    MainWindow w(o);
    w.setErrorDialogsEnabled(false);
    w.resize(1400, 860);
    w.show();
    w.showPage(MainWindow::LaunchPageIndex);

    LaunchPanel* panel = w.launchPanel();
    ScriptSettings s;
    s.script = QStringLiteral(LOCKSTEP_DDP_JOB);
    // 4 Linear(256, 256) of 257 KiB each in 0.25 MiB buckets (the first one too; DDP's default
    // first bucket, 1 MiB, would hold them all): several buckets. 400 ms per step keeps the 10
    // steps recording for about 4 s, so the live view (re-read every second) sees the run grow.
    s.arguments = "--steps 10 --layers 4 --width 256 --bucket-mb 0.25 --first-bucket-mb 0.25 --sleep-ms 400";
    s.worldSize = 2;
    s.name = "my-script";
    panel->setScriptSettings(s);
    QSignalSpy finished(panel, &LaunchPanel::finished);
    QSignalSpy live(panel, &LaunchPanel::liveRunUpdated);
    QSignalSpy opened(&w, &MainWindow::runOpened);
    // The window at the last live read before the end, for a look (docs/screenshots/launch-record.png).
    const QString shot = QDir::temp().filePath("lockstep-ui-test-record.png");
    connect(panel, &LaunchPanel::liveRunUpdated, &w, [&] { w.grab().save(shot); });
    // The Run menu's Ctrl+R starts the form shown.
    QAction* runAction = nullptr;
    for (QAction* a : w.findChildren<QAction*>())
        if (a->shortcut() == QKeySequence(Qt::CTRL | Qt::Key_R))
            runAction = a;
    QVERIFY(runAction);
    runAction->trigger();
    QVERIFY(panel->process() && panel->process()->arguments().startsWith("record"));
    QVERIFY(panel->isRunning() || finished.count() == 1);
    QVERIFY(!panel->runButton()->isEnabled() || finished.count() == 1);
    // Remembered for the next time (QSettings, in test mode).
    {
        LaunchPanel next;
        QCOMPARE(next.scriptSettings().script, s.script);
        QCOMPARE(next.scriptSettings().arguments, s.arguments);
    }

    auto liveWithSpans = [&]() -> LoadedRunPtr {
        for (const auto& call : live)
            if (const auto r = call.at(0).value<LoadedRunPtr>(); !r->run->spans.empty())
                return r;
        return nullptr;
    };
    QTRY_VERIFY_WITH_TIMEOUT(liveWithSpans() || finished.count() == 1, 240000);
    QVERIFY2(liveWithSpans(), qPrintable("the live view never read the script's spans while it recorded\n"
                                         + panel->log()->toPlainText()));
    {
        const auto partial = liveWithSpans();
        QVERIFY(partial->summary().steps < 10); // read before the end
        QApplication::processEvents();
        QVERIFY(uitest::distinctColors(panel->liveTimeline()->grab().toImage()) > 8);
    }
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 240000);
    const int code = finished.at(0).at(0).toInt();
    QVERIFY2(code == 0, qPrintable(finished.at(0).at(1).toString() + "\n" + panel->log()->toPlainText()));
    const QString out = dir.filePath("my-script.db");
    QCOMPARE(finished.at(0).at(2).toStringList(), QStringList{out});
    QVERIFY(panel->progressBar()->maximum() > 0); // no longer busy
    QCOMPARE(panel->progressBar()->value(), panel->progressBar()->maximum());
    // The script's own output reached the log (the launcher prefixes it by rank).
    QVERIFY2(panel->log()->toPlainText().contains("rank 1 trained 10 steps"), qPrintable(panel->log()->toPlainText()));

    QTRY_VERIFY_WITH_TIMEOUT(opened.count() >= 1, 30000);
    const LoadedRunPtr run = w.currentRun();
    QCOMPARE(run->path, out);
    QCOMPARE(run->summary().worldSize, 2);
    QCOMPARE(run->summary().steps, 10);
    QCOMPARE(run->summary().config.name, std::string("my-script"));
    // Every Linear(256, 256) fills a 0.25 MiB bucket by itself: more than one bucket.
    QVERIFY2(run->run->buckets.size() > 1, qPrintable(QString::number(run->run->buckets.size())));
}

// A script that raises: the job ends with the script's status, the CLI's verdict in the status
// and the script's traceback in the log.
void TestUiLaunch::failingScriptEndsWithItsMessage()
{
    QStandardPaths::setTestModeEnabled(true);
    if (!cliHasRecord())
        QSKIP("the lockstep CLI has no `record` command (built without the Python recorder)");
    QTemporaryDir dir;
    LaunchPanel panel;
    panel.setWorkspace(dir.path());
    ScriptSettings s;
    s.script = QStringLiteral(LOCKSTEP_DDP_JOB);
    s.arguments = "--steps 4 --layers 2 --width 64 --fail-at 1";
    s.name = "raises";
    panel.setScriptSettings(s);
    QSignalSpy finished(&panel, &LaunchPanel::finished);
    panel.startShown();
    QVERIFY(panel.isRunning());
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 240000);
    const QString message = finished.at(0).at(1).toString();
    const QString log = panel.log()->toPlainText();
    // An uncaught exception: Python exits with 1, and `lockstep record` with the script's status.
    QCOMPARE(finished.at(0).at(0).toInt(), 1);
    QVERIFY2(message.contains("FAILED"), qPrintable(message + "\n" + log));
    QCOMPARE(panel.statusLabel()->text(), message);
    QVERIFY2(log.contains("RuntimeError: injected failure at step 1"), qPrintable(log));
    QVERIFY(panel.runButton()->isEnabled());
}

QTEST_MAIN(TestUiLaunch)
#include "test_ui_launch.moc"
