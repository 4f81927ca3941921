// The What-if page (ui/whatif_panel.h) on a real run: a 2-rank mlp recorded by `lockstep run`
// (real LibTorch training over gloo on 127.0.0.1), shown in a real main window offscreen. Every
// expected number is computed independently here with core's what-if model on the same file.
// Skips when the CLI was built without the runtime.
#include "main_window.h"
#include "format.h"
#include "launch_panel.h"
#include "run_browser_model.h"
#include "run_browser_page.h"
#include "timeline/timeline_widget.h"
#include "timeline_page.h"
#include "whatif_panel.h"
#include "ui_test_support.h"

#include "lockstep/core/run_db.h"
#include "lockstep/core/whatif.h"
#include "lockstep/import/import.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QFont>
#include <QLabel>
#include <QProcess>
#include <QPushButton>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

using namespace lockstep;
using namespace lockstep::ui;

namespace {
// Building the model and a prediction take milliseconds here; a loaded machine can stretch that.
constexpr int kWaitMs = 60'000;
} // namespace

class TestUiWhatIf : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void prefillsTheRecordedConfiguration();
    void changingTheCapPredictsItsLayout();
    void oneRankIsNotApplicable();
    void computeScaleIsPredictedButNotRun();
    void refusedRunShowsTheModelsError();
    void runItHandsTheConfigurationToTheLaunchPanel();
    void measureRunsAShortRunAndTheHeadlineGivesTheInterval();
    void runItIsOnlyForTheRuntimesRuns();
    void savedPredictionIsMarkedWhereRunsAreListed();

private:
    MainWindow::Options options() const;
    // A main window on the What-if page of `path`, its model built and first prediction shown.
    void openOnWhatIf(MainWindow& w, const QString& path);
    core::WhatIfModel independentModel() const;

    QTemporaryDir m_dir;
    QString m_run;
    QString m_skip;
};

MainWindow::Options TestUiWhatIf::options() const
{
    MainWindow::Options o;
    o.persistent = false;
    o.workspace = m_dir.path();
    o.scanWorkspace = false;
    return o;
}

void TestUiWhatIf::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(m_dir.isValid());
    // `lockstep --help` lists `run` only when the CLI was built with the runtime.
    QProcess help;
    help.start(lockstepCliPath(), {"--help"});
    QVERIFY(help.waitForFinished(20000));
    if (!QString::fromUtf8(help.readAllStandardOutput()).contains(QRegularExpression(QStringLiteral("(?m)^\\s+run\\b")))) {
        m_skip = QStringLiteral("the lockstep CLI has no `run` command (built without the runtime)");
        return;
    }
    // mlp 4 x 256 (+ head), first bucket cap 0.25 MiB, cap 25 MiB: bucket 0 = head + layer3
    // (40 B + 10 KiB + 1 KiB + 256 KiB >= 0.25 MiB), bucket 1 = layers 2, 1, 0: 2 buckets.
    m_run = m_dir.filePath(QStringLiteral("mlp-25.db"));
    QProcess run;
    run.start(lockstepCliPath(), {"run", "--nproc", "2", "--model", "mlp", "--layers", "4", "--width", "256", "--batch", "64",
                                  "--steps", "10", "--warmup", "2", "--threads", "1", "--bucket-mb", "25", "--first-bucket-mb",
                                  "0.25", "--progress", "none", "--out", m_run});
    QVERIFY(run.waitForFinished(240'000));
    QVERIFY2(run.exitCode() == 0, run.readAllStandardError().constData());
}

core::WhatIfModel TestUiWhatIf::independentModel() const
{
    auto run = core::loadRun(m_run.toStdString());
    if (!run)
        qFatal("cannot load %s: %s", qPrintable(m_run), run.error().message.c_str());
    auto model = core::WhatIfModel::build(*run);
    if (!model)
        qFatal("the model refused %s: %s", qPrintable(m_run), model.error().message.c_str());
    return *model;
}

void TestUiWhatIf::openOnWhatIf(MainWindow& w, const QString& path)
{
    w.setErrorDialogsEnabled(false);
    w.resize(1400, 860);
    QString error;
    QVERIFY2(w.openFilesBlocking({path}, &error), qPrintable(error));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w)); // the page keys reach an exposed window
    QSignalSpy ready(w.whatIfPanel(), &WhatIfPanel::modelReady);
    QTest::keyClick(&w, Qt::Key_7, Qt::ControlModifier); // Ctrl+7: the What-if page
    QCOMPARE(w.currentPage(), int(MainWindow::WhatIfPageIndex));
    QTRY_VERIFY_WITH_TIMEOUT(!w.whatIfPanel()->busy(), kWaitMs);
    QCOMPARE(ready.size(), 1);
}

void TestUiWhatIf::prefillsTheRecordedConfiguration()
{
    if (!m_skip.isEmpty())
        QSKIP(qPrintable(m_skip));
    MainWindow w(options());
    openOnWhatIf(w, m_run);
    WhatIfPanel* panel = w.whatIfPanel();
    const core::WhatIfModel model = independentModel();
    // The recorded configuration, as the run says it: 25 MiB, first 0.25 MiB, 2 ranks, no
    // emulated link, no compression.
    QCOMPARE(model.recorded(), (core::WhatIfConfig{25ll << 20, 256ll << 10, 2, 0.0, "none"}));
    QCOMPARE(panel->config(), model.recorded());
    QCOMPARE(panel->bucketCapBox()->value(), 25.0);
    QCOMPARE(panel->firstBucketCapBox()->value(), 0.25);
    QCOMPARE(panel->worldSizeBox()->value(), 2);
    QCOMPARE(panel->linkBox()->text(), QStringLiteral("real link"));
    QCOMPARE(panel->compressBox()->currentText(), QStringLiteral("none"));
    // The recorded configuration's prediction is on screen: predicted over measured, labelled.
    QVERIFY(panel->shown().has_value());
    QVERIFY(panel->message().isEmpty());
    const auto& runs = panel->timeline()->runs();
    QCOMPARE(int(runs.size()), 2);
    QCOMPARE(runs[0].label, QStringLiteral("predicted: %1").arg(QString::fromStdString(core::describe(model.recorded()))));
    QCOMPARE(runs[1].label, QStringLiteral("measured"));
    QVERIFY(core::isPredicted(runs[0].run->config));
    QCOMPARE(runs[1].run.get(), w.currentRun()->run.get());
    // Measured column = the run's own summary; the consistency-check line is the model's replay (issue 29: not a confidence).
    QCOMPARE(panel->numbersTable()->item(WhatIfPanel::StepTimeRow, WhatIfPanel::MeasuredColumn)->text(),
             formatMs(model.measured().stepTimeMs));
    QCOMPARE(panel->numbersTable()->item(WhatIfPanel::BucketsRow, WhatIfPanel::MeasuredColumn)->text(), QStringLiteral("2"));
    bool selfErrorShown = false;
    const double self = model.selfErrorPct();
    const QString selfText = QStringLiteral("%1%2 %").arg(self > 0 ? "+" : self < 0 ? "−" : "").arg(std::fabs(self), 0, 'f', 1);
    for (QLabel* l : panel->findChildren<QLabel*>())
        selfErrorShown = selfErrorShown || (l->text().contains(QStringLiteral("Consistency check")) && l->text().contains(selfText));
    QVERIFY2(selfErrorShown, qPrintable(selfText));
    // A run of Lockstep's runtime can be run again.
    QVERIFY(panel->runItButton()->isEnabled());
    QVERIFY(panel->saveButton()->isEnabled());
    QVERIFY(uitest::distinctColors(panel->grab().toImage()) > 20);
}

void TestUiWhatIf::changingTheCapPredictsItsLayout()
{
    if (!m_skip.isEmpty())
        QSKIP(qPrintable(m_skip));
    MainWindow w(options());
    openOnWhatIf(w, m_run);
    WhatIfPanel* panel = w.whatIfPanel();
    const core::WhatIfModel model = independentModel();
    QSignalSpy shown(panel, &WhatIfPanel::predictionShown);
    // Cap 0.5 MiB: bucket 0 as before, then layers 2 and 1 (2 x 257 KiB = 514 KiB >= 0.5 MiB),
    // then layer 0 alone: 3 buckets (tests/whatif/test_whatif_real.cpp derives the same layout).
    panel->bucketCapBox()->setValue(0.5);
    QTRY_VERIFY_WITH_TIMEOUT(!panel->busy() && panel->shown() && panel->shown()->config.bucketCapBytes == 512 << 10, kWaitMs);
    const core::WhatIfConfig cfg = panel->config();
    QCOMPARE(cfg.bucketCapBytes, int64_t{512} << 10);
    QCOMPARE(int(model.bucketSizes(cfg).size()), 3);
    const auto expected = model.predict(cfg, WhatIfPanel::predictOptions());
    QVERIFY2(expected, expected ? "" : expected.error().message.c_str());
    QCOMPARE(panel->shown()->numbers.buckets, 3);
    QCOMPARE(panel->numbersTable()->item(WhatIfPanel::BucketsRow, WhatIfPanel::PredictedColumn)->text(), QStringLiteral("3"));
    QCOMPARE(panel->numbersTable()->item(WhatIfPanel::BucketsRow, WhatIfPanel::DiffColumn)->text(), QStringLiteral("+1"));
    QCOMPARE(panel->shown()->numbers.stepTimeMs, expected->numbers.stepTimeMs);
    QCOMPARE(panel->numbersTable()->item(WhatIfPanel::StepTimeRow, WhatIfPanel::PredictedColumn)->text(),
             formatMs(expected->numbers.stepTimeMs));
    QCOMPARE(panel->numbersTable()->item(WhatIfPanel::StepTimeRow, WhatIfPanel::DiffColumn)->text(),
             formatSignedMs(expected->numbers.stepTimeMs - model.measured().stepTimeMs));
    // The headline: the gain over the recorded configuration, model against model.
    core::PredictOptions numbersOnly = WhatIfPanel::predictOptions();
    numbersOnly.keepTimeline = false;
    const double base = model.predict(model.recorded(), numbersOnly)->numbers.stepTimeMs;
    const double gain = base - expected->numbers.stepTimeMs;
    QVERIFY2(panel->headline()->text().contains(formatMs(std::fabs(gain))), qPrintable(panel->headline()->text()));
    QVERIFY2(panel->headline()->text().contains(gain > 0 ? QStringLiteral("faster") : QStringLiteral("slower")),
             qPrintable(panel->headline()->text()));
    // The slider followed the spin box: 0.5 MiB is one octave above 0.25 MiB, 4 quarter steps.
    QCOMPARE(panel->bucketSlider()->value(), 4);
    // The stacked timeline shows the new prediction.
    QCOMPARE(panel->timeline()->runs()[0].label,
             QStringLiteral("predicted: %1").arg(QString::fromStdString(core::describe(cfg))));

    // A fast sweep of the slider: every position reaches the page, the last one is what is shown
    // (changes made while one prediction runs collapse into the newest).
    shown.clear();
    for (int p = 0; p <= 12; ++p)
        panel->bucketSlider()->setValue(p); // 0.25 MiB ... 2 MiB
    QTRY_VERIFY_WITH_TIMEOUT(!panel->busy(), kWaitMs);
    QCOMPARE(panel->shown()->config.bucketCapBytes, int64_t{2} << 20);
    QVERIFY2(shown.size() <= 13, qPrintable(QString::number(shown.size())));
    const auto two = model.predict(panel->config(), WhatIfPanel::predictOptions());
    QCOMPARE(panel->shown()->numbers.stepTimeMs, two->numbers.stepTimeMs);
}

void TestUiWhatIf::oneRankIsNotApplicable()
{
    if (!m_skip.isEmpty())
        QSKIP(qPrintable(m_skip));
    MainWindow w(options());
    openOnWhatIf(w, m_run);
    WhatIfPanel* panel = w.whatIfPanel();
    panel->worldSizeBox()->setValue(1);
    QTRY_VERIFY_WITH_TIMEOUT(!panel->busy() && panel->shown() && panel->shown()->config.worldSize == 1, kWaitMs);
    // docs/design.md: a 1-rank run has no communication to hide: overlap and exposed communication are
    // "not applicable", never numbers; the measured 2-rank run keeps its numbers.
    QTableWidget* t = panel->numbersTable();
    QCOMPARE(t->item(WhatIfPanel::OverlapRow, WhatIfPanel::PredictedColumn)->text(), QStringLiteral("n/a"));
    QCOMPARE(t->item(WhatIfPanel::ExposedRow, WhatIfPanel::PredictedColumn)->text(), QStringLiteral("n/a"));
    QVERIFY(t->item(WhatIfPanel::OverlapRow, WhatIfPanel::MeasuredColumn)->text() != QStringLiteral("n/a"));
    QCOMPARE(t->item(WhatIfPanel::OverlapRow, WhatIfPanel::DiffColumn)->text(), QString());
    const core::WhatIfModel model = independentModel();
    const auto one = model.predict(panel->config(), WhatIfPanel::predictOptions());
    QCOMPARE(t->item(WhatIfPanel::StepTimeRow, WhatIfPanel::PredictedColumn)->text(), formatMs(one->numbers.stepTimeMs));
}

void TestUiWhatIf::computeScaleIsPredictedButNotRun()
{
    if (!m_skip.isEmpty())
        QSKIP(qPrintable(m_skip));
    MainWindow w(options());
    openOnWhatIf(w, m_run);
    WhatIfPanel* panel = w.whatIfPanel();
    QCOMPARE(panel->computeBox()->value(), 1.0);
    QVERIFY(panel->runItButton()->isEnabled());
    // Compute twice as fast: the page shows the model's prediction at that scale, faster than the
    // recorded configuration's, and names the scale in the timeline's label.
    panel->computeBox()->setValue(0.5);
    QTRY_VERIFY_WITH_TIMEOUT(!panel->busy() && panel->shown() && panel->shown()->config.computeScale == 0.5, kWaitMs);
    const core::WhatIfModel model = independentModel();
    const auto half = model.predict(panel->config(), WhatIfPanel::predictOptions());
    QVERIFY2(half, half ? "" : half.error().message.c_str());
    QCOMPARE(panel->shown()->numbers.stepTimeMs, half->numbers.stepTimeMs);
    QVERIFY(half->numbers.stepTimeMs < model.measured().stepTimeMs);
    QVERIFY2(panel->timeline()->runs()[0].label.contains(QStringLiteral("compute x0.5")),
             qPrintable(panel->timeline()->runs()[0].label));
    // A hypothetical device cannot be launched: the button says why; back at x1 it can.
    QVERIFY(!panel->runItButton()->isEnabled());
    QVERIFY2(panel->runItButton()->toolTip().contains(QStringLiteral("hypothetical")),
             qPrintable(panel->runItButton()->toolTip()));
    panel->computeBox()->setValue(1.0);
    QTRY_VERIFY_WITH_TIMEOUT(!panel->busy() && panel->shown() && panel->shown()->config.computeScale == 1.0, kWaitMs);
    QVERIFY(panel->runItButton()->isEnabled());
}

void TestUiWhatIf::refusedRunShowsTheModelsError()
{
    // An imported torch.profiler trace of a GPU rank: a compute kernel on stream 7 and an NCCL
    // all-reduce on stream 20 inside ProfilerStep#0. The model replays host timelines only.
    const QString trace = m_dir.filePath(QStringLiteral("gpu-rank0.json"));
    {
        QFile f(trace);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"json({"traceEvents": [
 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 100, "tid": 100, "ts": 1000, "dur": 1000},
 {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100, "tid": 100, "ts": 1010, "dur": 50, "args": {"External id": 11}},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": 1020, "dur": 5, "args": {"correlation": 1, "External id": 11}},
 {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 1100, "dur": 400, "args": {"device": 0, "stream": 7, "correlation": 1}},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": 1200, "dur": 5, "args": {"correlation": 2}},
 {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", "pid": 0, "tid": 20, "ts": 1300, "dur": 400, "args": {"device": 0, "stream": 20, "correlation": 2}}
], "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1}})json");
    }
    const QString imported = m_dir.filePath(QStringLiteral("gpu-imported.db"));
    auto stats = core::importTraces({trace.toStdString()}, imported.toStdString(), core::ImportOptions{});
    QVERIFY2(stats, stats ? "" : stats.error().message.c_str());
    auto run = core::loadRun(imported.toStdString());
    QVERIFY(run);
    const auto refused = core::WhatIfModel::build(*run);
    QVERIFY2(!refused, "the model was expected to refuse an imported GPU trace");

    MainWindow w(options());
    openOnWhatIf(w, imported);
    WhatIfPanel* panel = w.whatIfPanel();
    QVERIFY(!panel->model());
    QVERIFY2(panel->message().contains(QString::fromStdString(refused.error().message)), qPrintable(panel->message()));
    QVERIFY(!panel->shown());
    QVERIFY(!panel->runItButton()->isEnabled());
    QVERIFY(!panel->saveButton()->isEnabled());
    QVERIFY(!panel->bucketCapBox()->isEnabled());
    // Not blank: the message is painted.
    QVERIFY(uitest::distinctColors(panel->grab().toImage()) > 4);
}

void TestUiWhatIf::runItHandsTheConfigurationToTheLaunchPanel()
{
    if (!m_skip.isEmpty())
        QSKIP(qPrintable(m_skip));
    MainWindow w(options());
    openOnWhatIf(w, m_run);
    WhatIfPanel* panel = w.whatIfPanel();
    panel->setConfig(core::WhatIfConfig{4ll << 20, 512ll << 10, 2, 2.0, "fp16"});
    QTRY_VERIFY_WITH_TIMEOUT(!panel->busy(), kWaitMs);
    QVERIFY(panel->runItButton()->isEnabled());
    QSignalSpy finished(w.launchPanel(), &LaunchPanel::finished);
    QTest::mouseClick(panel->runItButton(), Qt::LeftButton);
    QCOMPARE(w.currentPage(), int(MainWindow::LaunchPageIndex));
    const LaunchSettings s = w.launchPanel()->settings();
    // The configuration's knobs ...
    QCOMPARE(s.worldSize, 2);
    QCOMPARE(s.bucketMb, QStringLiteral("4"));
    QCOMPARE(s.training.firstBucketMb, 0.5);
    QCOMPARE(s.training.linkGbps, 2.0);
    QCOMPARE(s.training.compress, std::string("fp16"));
    // ... and everything else as the recorded run was trained (its command line above).
    QCOMPARE(s.training.model, std::string("mlp"));
    QCOMPARE(s.training.layers, 4);
    QCOMPARE(s.training.width, 256);
    QCOMPARE(s.training.batch, 64);
    QCOMPARE(s.training.steps, 10);
    QCOMPARE(s.training.warmup, 2);
    QCOMPARE(s.training.threads, 1);
    QCOMPARE(s.training.optimizer, std::string("sgd"));
    QVERIFY2(s.name.startsWith(QStringLiteral("mlp-25-check-b4-f0.5-n2-l2-fp16-")), qPrintable(s.name));
    // The run started; it is not waited for.
    QTRY_VERIFY_WITH_TIMEOUT(w.launchPanel()->isRunning() || !finished.isEmpty(), 10'000);
    if (w.launchPanel()->isRunning()) {
        w.launchPanel()->cancel();
        QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 60'000);
    }
}

void TestUiWhatIf::measureRunsAShortRunAndTheHeadlineGivesTheInterval()
{
    if (!m_skip.isEmpty())
        QSKIP(qPrintable(m_skip));
    MainWindow w(options());
    openOnWhatIf(w, m_run);
    WhatIfPanel* panel = w.whatIfPanel();
    // The recorded configuration: nothing to measure.
    QTRY_VERIFY_WITH_TIMEOUT(!panel->busy() && panel->shown(), kWaitMs);
    QVERIFY(!panel->measureButton()->isEnabled());
    // Another cap: the headline gives the prediction's interval, the one predict() gives.
    panel->setConfig(core::WhatIfConfig{1ll << 20, 512ll << 10, 2, 0.0, "none"});
    QTRY_VERIFY_WITH_TIMEOUT(!panel->busy() && panel->shown() && panel->shown()->config.bucketCapBytes == 1 << 20,
                             kWaitMs);
    const auto expected = independentModel().predict(panel->config(), WhatIfPanel::predictOptions());
    QVERIFY(expected.has_value());
    QCOMPARE(panel->shown()->interval.lowMs, expected->interval.lowMs);
    QVERIFY2(panel->headline()->text().contains(formatMs(expected->interval.lowMs)), qPrintable(panel->headline()->text()));
    QVERIFY2(panel->headline()->text().contains(QStringLiteral("90 %")), qPrintable(panel->headline()->text()));
    QVERIFY2(panel->headline()->text().contains(QStringLiteral("bucket-cap changes")), qPrintable(panel->headline()->text()));
    // The self-replay error is shown as a consistency check, not as confidence.
    QVERIFY2(panel->findChildren<QLabel*>().size() > 0, "labels");
    bool consistency = false;
    for (QLabel* l : panel->findChildren<QLabel*>())
        consistency = consistency || l->text().contains(QStringLiteral("Consistency check"));
    QVERIFY(consistency);
    // Measure: the same configuration through the Launch page, 12 steady steps after at most 4
    // warm-up steps (the recorded run: 10 steps, 2 warm-up).
    QVERIFY(panel->measureButton()->isEnabled());
    QSignalSpy finished(w.launchPanel(), &LaunchPanel::finished);
    QTest::mouseClick(panel->measureButton(), Qt::LeftButton);
    QCOMPARE(w.currentPage(), int(MainWindow::LaunchPageIndex));
    const LaunchSettings s = w.launchPanel()->settings();
    QCOMPARE(s.bucketMb, QStringLiteral("1"));
    QCOMPARE(s.training.warmup, 2);
    QCOMPARE(s.training.steps, 2 + WhatIfPanel::kMeasureSteps);
    QVERIFY2(s.name.contains(QStringLiteral("-measure-b1-")), qPrintable(s.name));
    QTRY_VERIFY_WITH_TIMEOUT(w.launchPanel()->isRunning() || !finished.isEmpty(), 10'000);
    if (w.launchPanel()->isRunning()) {
        w.launchPanel()->cancel();
        QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 60'000);
    }
}

void TestUiWhatIf::runItIsOnlyForTheRuntimesRuns()
{
    if (!m_skip.isEmpty())
        QSKIP(qPrintable(m_skip));
    // The recorded run as the Python recorder (`lockstep record`) would label it: the model
    // predicts it, but the runtime cannot launch a user's script again.
    auto run = core::loadRun(m_run.toStdString());
    QVERIFY(run);
    run->config.source = "pytorch";
    const QString path = m_dir.filePath(QStringLiteral("as-recorded-by-python.db"));
    QVERIFY(core::saveRun(*run, path.toStdString(), core::RunWriter::Mode::Overwrite));
    MainWindow w(options());
    openOnWhatIf(w, path);
    WhatIfPanel* panel = w.whatIfPanel();
    QVERIFY(panel->shown().has_value());
    QVERIFY(!panel->runItButton()->isEnabled());
    QVERIFY2(panel->runItButton()->toolTip().contains(QStringLiteral("recorded by 'pytorch', not by Lockstep's runtime")),
             qPrintable(panel->runItButton()->toolTip()));
    QVERIFY(!panel->launchSettings(panel->config()));
    QVERIFY(panel->saveButton()->isEnabled()); // its prediction can still be saved
}

void TestUiWhatIf::savedPredictionIsMarkedWhereRunsAreListed()
{
    if (!m_skip.isEmpty())
        QSKIP(qPrintable(m_skip));
    QTemporaryDir ws;
    MainWindow w(options());
    openOnWhatIf(w, m_run);
    WhatIfPanel* panel = w.whatIfPanel();
    panel->bucketCapBox()->setValue(1.0);
    QTRY_VERIFY_WITH_TIMEOUT(!panel->busy() && panel->shown()->config.bucketCapBytes == 1 << 20, kWaitMs);
    const QString saved = QDir(ws.path()).filePath(QStringLiteral("mlp.predict-b1.db"));
    QCOMPARE(panel->savePrediction(saved, false), QString());
    // Whole or absent, never over an existing file unless asked.
    QVERIFY(!panel->savePrediction(saved, false).isEmpty());
    QCOMPARE(panel->savePrediction(saved, true), QString());
    auto back = core::loadRun(saved.toStdString());
    QVERIFY(back);
    QVERIFY(core::isPredicted(back->config));

    // The run browser marks it: "[predicted]" before its name, italic, and says so in its tooltip.
    QFile::copy(m_run, QDir(ws.path()).filePath(QStringLiteral("mlp-25.db")));
    RunBrowserPage* browser = w.browserPage();
    browser->setWorkspace(ws.path());
    browser->scanBlocking();
    RunBrowserModel* model = browser->model();
    QCOMPARE(model->rowCount(), 2);
    int marked = 0;
    for (int row = 0; row < model->rowCount(); ++row) {
        const QModelIndex name = model->index(row, RunBrowserModel::Name);
        const bool predicted = model->data(name, RunBrowserModel::PathRole).toString() == QFileInfo(saved).absoluteFilePath();
        QCOMPARE(model->data(name).toString().startsWith(QStringLiteral("[predicted] ")), predicted);
        QCOMPARE(model->data(name, Qt::FontRole).value<QFont>().italic(), predicted);
        QCOMPARE(model->data(name, Qt::ToolTipRole).toString().contains(predictedToolTip()), predicted);
        marked += predicted;
    }
    QCOMPARE(marked, 1);
    // Opened, it is marked wherever the app names a run: its label (run box, Compare, chart
    // legends) and the Timeline page's title.
    QString error;
    QVERIFY2(w.openFilesBlocking({saved}, &error), qPrintable(error));
    QVERIFY(w.currentRun()->label.startsWith(QStringLiteral("[predicted] ")));
    w.showPage(MainWindow::TimelinePageIndex);
    QCOMPARE(w.timelinePage()->timeline()->runs()[0].label, w.currentRun()->label);
    QVERIFY(w.windowTitle().startsWith(QStringLiteral("[predicted] ")));
}

QTEST_MAIN(TestUiWhatIf)
#include "test_ui_whatif.moc"
