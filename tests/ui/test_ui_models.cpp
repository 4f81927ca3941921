// The UI's item models over real run files: the run browser (scan of a workspace with two runs
// and a foreign file, sorting, filtering, error rows, unique names), the compare metrics model
// (values, differences, baseline), the summary's bucket table and the Ranks page's rank table,
// each checked by QAbstractItemModelTester; the loader's cancellation; plus the launch panel's
// pure parts (argument lists, progress lines, shard discovery).
#include "compare_model.h"
#include "format.h"
#include "kernel_panel.h"
#include "launch_panel.h"
#include "ranks_page.h"
#include "summary_panel.h"
#include "timeline/timeline_model.h"
#include "run_browser_model.h"
#include "run_loader.h"
#include "ui_test_support.h"

#include <chrono>
#include <filesystem>
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QLabel>
#include <QImage>
#include <QTableView>
#include <QDir>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

#include "lockstep/core/run_db.h"

using namespace lockstep;
using namespace lockstep::ui;

class TestUiModels : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void summarizeValidAndForeign();
    void browserScansWorkspace();
    void browserScanInBackgroundUsesCache();
    void browserSortAndFilter();
    void compareModelDifferences();
    void loaderReportsResultsAndErrors();
    void loaderCancelsSupersededLoads();
    void browserNamesAreUniqueAndColumnsFilled();
    void summaryPanelAndBucketTable();
    void summaryShowsDiagnosticsAndUnknownSizes();
    void rankTable();
    void hugeWorldSizeOpensWithoutRunawayMemory();
    void launchArguments();
    void liveFilesFindShards();
    void kernelTableOfADeviceRun();

private:
    QTemporaryDir m_dir;
    QString m_runA, m_runB, m_foreign;
};

void TestUiModels::initTestCase()
{
    QVERIFY(m_dir.isValid());
    m_runA = m_dir.filePath("alpha.db");
    m_runB = m_dir.filePath("beta.db");
    m_foreign = m_dir.filePath("notes.db");
    QCOMPARE(uitest::makeRunFile(m_runA, 2, 8, 4, 0.3, 25, "alpha"), QString());
    QCOMPARE(uitest::makeRunFile(m_runB, 4, 8, 6, 0.8, 4, "beta", 1), QString());
    uitest::writeForeignFile(m_foreign);
}

void TestUiModels::summarizeValidAndForeign()
{
    const BrowserEntry ok = summarizeFile(m_runA);
    QVERIFY2(ok.ok(), qPrintable(ok.error));
    QCOMPARE(ok.summary->worldSize, 2);
    QCOMPARE(QString::fromStdString(ok.summary->config.name), QString("alpha"));
    QVERIFY(ok.summary->stepTimeMs > 0);

    const BrowserEntry bad = summarizeFile(m_foreign);
    QVERIFY(!bad.ok());
    QVERIFY2(bad.error.contains("not", Qt::CaseInsensitive), qPrintable(bad.error));
    QVERIFY(!bad.error.startsWith(m_foreign)); // the row names the file; the message does not repeat it

    const BrowserEntry missing = summarizeFile(m_dir.filePath("missing.db"));
    QVERIFY(!missing.ok());
    QVERIFY(!missing.error.isEmpty());
}

void TestUiModels::browserScansWorkspace()
{
    WorkspaceScanner scanner;
    auto entries = scanner.scanBlocking(m_dir.path());
    QCOMPARE(int(entries.size()), 3);
    RunBrowserModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setEntries(entries);
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(model.columnCount(), int(RunBrowserModel::ColumnCount));
    int okRows = 0, errorRows = 0;
    for (int r = 0; r < model.rowCount(); ++r) {
        const QString status = model.index(r, RunBrowserModel::Status).data().toString();
        if (status.startsWith(QStringLiteral("⚠"))) {
            ++errorRows;
            QCOMPARE(model.index(r, RunBrowserModel::Name).data().toString(), QString("notes.db"));
            QVERIFY(model.index(r, RunBrowserModel::Name).data(Qt::ToolTipRole).toString().contains("notes.db"));
        } else {
            ++okRows;
            QCOMPARE(status, QString("completed"));
            QVERIFY(model.index(r, RunBrowserModel::StepTime).data().toString().endsWith("ms"));
            QVERIFY(model.index(r, RunBrowserModel::Overlap).data().toString().endsWith("%"));
        }
    }
    QCOMPARE(okRows, 2);
    QCOMPARE(errorRows, 1);
    model.setEntries({}); // wholesale reset to empty, checked by the tester
    QCOMPARE(model.rowCount(), 0);
}

// A background scan fills the scanner's cache and a later scan answers from it while a file's
// modification time is unchanged: a run file rewritten with its old time still shows what the
// first scan read (a fresh scanner, the control, reads the new contents); a new time is read anew.
void TestUiModels::browserScanInBackgroundUsesCache()
{
    WorkspaceScanner scanner;
    QSignalSpy spy(&scanner, &WorkspaceScanner::scanFinished);
    scanner.scan(m_dir.path());
    scanner.scan(m_dir.path()); // supersedes the first: only one result arrives
    QTRY_COMPARE_WITH_TIMEOUT(spy.count(), 1, 20000);
    // Both jobs are done (the superseded one's end is delivered before busy() turns false): no
    // other result can come.
    QTRY_VERIFY_WITH_TIMEOUT(!scanner.busy(), 20000);
    QCoreApplication::processEvents();
    QCOMPARE(spy.count(), 1);
    const auto entries = spy.at(0).at(1).value<std::vector<BrowserEntry>>();
    QCOMPARE(int(entries.size()), 3);

    QTemporaryDir dir;
    const QString path = dir.filePath("cached.db");
    QCOMPARE(uitest::makeRunFile(path, 2, 8, 4, 0.3, 25, "first"), QString());
    const auto nameIn = [](const std::vector<BrowserEntry>& found) {
        return found.size() == 1 && found[0].ok() ? QString::fromStdString(found[0].summary->config.name) : QString("?");
    };
    scanner.scan(dir.path());
    QTRY_COMPARE_WITH_TIMEOUT(spy.count(), 2, 20000);
    QCOMPARE(nameIn(spy.at(1).at(1).value<std::vector<BrowserEntry>>()), QString("first"));
    const auto firstTime = std::filesystem::last_write_time(path.toStdString());
    QCOMPARE(uitest::makeRunFile(path, 2, 8, 4, 0.3, 25, "second"), QString());
    std::filesystem::last_write_time(path.toStdString(), firstTime);
    scanner.scan(dir.path());
    QTRY_COMPARE_WITH_TIMEOUT(spy.count(), 3, 20000);
    QCOMPARE(nameIn(spy.at(2).at(1).value<std::vector<BrowserEntry>>()), QString("first")); // from the cache
    QCOMPARE(nameIn(WorkspaceScanner().scanBlocking(dir.path())), QString("second"));      // the file did change
    std::filesystem::last_write_time(path.toStdString(), firstTime + std::chrono::seconds(2));
    scanner.scan(dir.path());
    QTRY_COMPARE_WITH_TIMEOUT(spy.count(), 4, 20000);
    QCOMPARE(nameIn(spy.at(3).at(1).value<std::vector<BrowserEntry>>()), QString("second")); // a new time: read anew
}

void TestUiModels::browserSortAndFilter()
{
    WorkspaceScanner scanner;
    RunBrowserModel model;
    model.setEntries(scanner.scanBlocking(m_dir.path()));
    QSortFilterProxyModel proxy;
    proxy.setSourceModel(&model);
    proxy.setSortRole(RunBrowserModel::SortRole);
    proxy.setFilterKeyColumn(-1);
    proxy.setFilterCaseSensitivity(Qt::CaseInsensitive);
    QAbstractItemModelTester tester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
    proxy.sort(RunBrowserModel::WorldSize, Qt::DescendingOrder);
    QCOMPARE(proxy.index(0, RunBrowserModel::Name).data().toString(), QString("beta"));
    proxy.sort(RunBrowserModel::BucketCap, Qt::AscendingOrder);
    // The foreign row sorts with an empty key, then 4 MiB (beta), then 25 MiB (alpha).
    QCOMPARE(proxy.index(2, RunBrowserModel::Name).data().toString(), QString("alpha"));
    // Configuration columns: header from the field's label, value by its unit (bytes).
    QCOMPARE(proxy.index(2, RunBrowserModel::BucketCap).data().toString(), QString("25.0 MiB"));
    QCOMPARE(model.headerData(RunBrowserModel::BucketCap, Qt::Horizontal).toString(), QString("Bucket cap"));
    QCOMPARE(model.headerData(RunBrowserModel::WorldSize, Qt::Horizontal).toString(), QString("World size"));
    QCOMPARE(model.headerData(RunBrowserModel::Backend, Qt::Horizontal).toString(), QString("Backend / device"));
    QCOMPARE(model.headerData(RunBrowserModel::Status, Qt::Horizontal).toString(), QString("Status"));
    proxy.setFilterFixedString("alph");
    QCOMPARE(proxy.rowCount(), 1);
    proxy.setFilterFixedString("not a");
    QCOMPARE(proxy.rowCount(), 1);
    QCOMPARE(proxy.index(0, RunBrowserModel::Name).data().toString(), QString("notes.db"));
    proxy.setFilterFixedString(QString());
    QCOMPARE(proxy.rowCount(), 3);
}

void TestUiModels::compareModelDifferences()
{
    auto a = loadAndAnalyze(m_runA);
    auto b = loadAndAnalyze(m_runB);
    QVERIFY(a && b);
    CompareModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setRuns({(*a)->summary(), (*b)->summary()}, {"alpha", "beta"});
    QCOMPARE(model.rowCount(), int(CompareModel::MetricCount));
    QCOMPARE(model.columnCount(), 4); // metric, alpha, beta, Δ
    QCOMPARE(model.headerData(1, Qt::Horizontal).toString(), QString("alpha (baseline)"));
    QCOMPARE(model.headerData(2, Qt::Horizontal).toString(), QString("beta"));
    QVERIFY(model.headerData(3, Qt::Horizontal).toString().startsWith(QStringLiteral("Δ")));

    const double stepA = model.index(CompareModel::StepTime, 1).data(CompareModel::ValueRole).toDouble();
    const double stepB = model.index(CompareModel::StepTime, 2).data(CompareModel::ValueRole).toDouble();
    QCOMPARE(stepA, (*a)->summary().stepTimeMs);
    QCOMPARE(stepB, (*b)->summary().stepTimeMs);
    const double diff = model.index(CompareModel::StepTime, 3).data(CompareModel::ValueRole).toDouble();
    QVERIFY(std::abs(diff - (stepB - stepA) / stepA) < 1e-9);
    // The difference in ms beside the percentage: "+x ms (+y %)" with x = stepB - stepA.
    const QString text = model.index(CompareModel::StepTime, 3).data().toString();
    QVERIFY2(text.endsWith("%)"), qPrintable(text));
    QVERIFY2(text.startsWith(ui::formatSignedMs(stepB - stepA)), qPrintable(text));
    // Beta communicates more: its comm difference is positive and red (worse).
    const double commDiff = model.index(CompareModel::Comm, 3).data(CompareModel::ValueRole).toDouble();
    QVERIFY(commDiff > 0.005);
    const auto brush = model.index(CompareModel::Comm, 3).data(Qt::ForegroundRole).value<QBrush>();
    QVERIFY(brush.color().red() > brush.color().green());
    // Beta as the baseline: alpha's difference is the opposite sign, and the columns move
    // (metric, alpha, Δ alpha, beta (baseline)).
    model.setBaseline(1);
    QCOMPARE(model.columnCount(), 4);
    QCOMPARE(model.valueColumn(0), 1);
    QCOMPARE(model.diffColumn(0), 2);
    QCOMPARE(model.valueColumn(1), 3);
    QCOMPARE(model.diffColumn(1), -1);
    QCOMPARE(model.headerData(3, Qt::Horizontal).toString(), QString("beta (baseline)"));
    QVERIFY(std::abs(model.index(CompareModel::StepTime, 2).data(CompareModel::ValueRole).toDouble() - (stepA - stepB) / stepB) < 1e-9);
    model.setBaseline(0);
    // Three runs: two diff columns.
    model.setRuns({(*a)->summary(), (*b)->summary(), (*a)->summary()}, {"alpha", "beta", "alpha again"});
    QCOMPARE(model.columnCount(), 6);
    QCOMPARE(model.index(CompareModel::StepTime, 5).data(CompareModel::ValueRole).toDouble(), 0.0);
    model.setBaseline(2);
    QCOMPARE(model.diffColumn(2), -1);
    QCOMPARE(model.index(CompareModel::StepTime, model.diffColumn(0)).data(CompareModel::ValueRole).toDouble(), 0.0);
    model.setRuns({}, {});
    QCOMPARE(model.rowCount(), 0);
}

void TestUiModels::loaderReportsResultsAndErrors()
{
    RunLoader loader;
    QSignalSpy ok(&loader, &RunLoader::runLoaded);
    QSignalSpy failed(&loader, &RunLoader::loadFailed);
    loader.load(m_runA);
    loader.load(m_foreign);
    QTRY_COMPARE_WITH_TIMEOUT(ok.count() + failed.count(), 2, 20000);
    QCOMPARE(ok.count(), 1);
    QCOMPARE(failed.count(), 1);
    const auto run = ok.at(0).at(1).value<LoadedRunPtr>();
    QCOMPARE(run->summary().worldSize, 2);
    QVERIFY(!run->analysis->steps.empty());
    QCOMPARE(failed.at(0).at(0).toString(), m_foreign);
    QVERIFY(!failed.at(0).at(1).toString().isEmpty());

    // Superseded requests for one key: only the newest answers.
    ok.clear();
    loader.load(QStringList{m_runA}, "live");
    loader.load(QStringList{m_runB}, "live");
    QTRY_COMPARE_WITH_TIMEOUT(loader.pendingJobs(), 0, 20000);
    QCOMPARE(ok.count(), 1);
    QCOMPARE(ok.at(0).at(1).value<LoadedRunPtr>()->summary().worldSize, 4);

    // Shards: two files holding different ranks of one run, read as one run by core's stitching
    // rule (core::loadShards, the rule of `lockstep merge`).
    core::SyntheticParams params;
    params.worldSize = 4;
    params.steps = 4;
    params.buckets = 3;
    const core::Run whole = core::makeSyntheticRun(params);
    const auto part = [&](int lo, int hi) {
        core::Run r;
        r.config = whole.config;
        r.strings = whole.strings;
        r.buckets = whole.buckets;
        std::vector<int> laneMap(whole.lanes.size(), -1);
        for (const core::Lane& l : whole.lanes) {
            if (l.rank < lo || l.rank >= hi)
                continue;
            laneMap[l.id.v] = int(r.lanes.size());
            core::Lane c = l;
            c.id = core::LaneId{uint32_t(r.lanes.size())};
            r.lanes.push_back(c);
        }
        for (core::Span sp : whole.spans)
            if (laneMap[sp.lane.v] >= 0) {
                sp.lane = core::LaneId{uint32_t(laneMap[sp.lane.v])};
                r.spans.push_back(sp);
            }
        for (core::Instant in : whole.instants)
            if (laneMap[in.lane.v] >= 0) {
                in.lane = core::LaneId{uint32_t(laneMap[in.lane.v])};
                r.instants.push_back(in);
            }
        for (const core::Step& st : whole.steps)
            if (st.rank >= lo && st.rank < hi)
                r.steps.push_back(st);
        for (const core::RankInfo& rk : whole.ranks)
            if (rk.rank >= lo && rk.rank < hi)
                r.ranks.push_back(rk);
        return r;
    };
    const QString s0 = m_dir.filePath("shard0.sqlite"), s1 = m_dir.filePath("shard1.sqlite");
    QVERIFY(core::saveRun(part(0, 2), s0.toStdString(), core::RunWriter::Mode::Overwrite));
    QVERIFY(core::saveRun(part(2, 4), s1.toStdString(), core::RunWriter::Mode::Overwrite));
    auto both = loadAndAnalyze(QStringList{s1, s0});
    QVERIFY2(both, both ? "" : both.error().message.c_str());
    QCOMPARE((*both)->run->lanes.size(), whole.lanes.size());
    QCOMPARE((*both)->run->spans.size(), whole.spans.size());
    QCOMPARE((*both)->summary().worldSize, 4);
    // The same ranks in two files are not shards of one run: refused, naming the rank.
    auto twice = loadAndAnalyze(QStringList{s0, s0});
    QVERIFY(!twice);
    QVERIFY(twice.error().message.find("rank 0") != std::string::npos);
    QFile::remove(s0);
    QFile::remove(s1);
}

void TestUiModels::loaderCancelsSupersededLoads()
{
    // A stop requested before the work starts: the load gives up and says why.
    std::stop_source stop;
    stop.request_stop();
    auto cancelled = loadAndAnalyze(QStringList{m_runA}, stop.get_token());
    QVERIFY(!cancelled);
    QVERIFY2(cancelled.error().code == core::ErrorCode::Cancelled, cancelled.error().message.c_str());
    // A second request for one key while the first still runs: the first is told to stop (its
    // token), only the second answers. A 300 k-span run takes long enough to still be running.
    const QString big = m_dir.filePath("big.db");
    {
        core::Run run = core::makeSyntheticRunWithSpans(300'000, 2);
        run.config.name = "big";
        QVERIFY(core::saveRun(run, big.toStdString(), core::RunWriter::Mode::Overwrite));
    }
    RunLoader loader;
    QSignalSpy ok(&loader, &RunLoader::runLoaded);
    QSignalSpy failed(&loader, &RunLoader::loadFailed);
    loader.load(QStringList{big}, "same");
    loader.load(QStringList{m_runA}, "same");
    QCOMPARE(loader.cancelledJobs(), quint64(1));
    QTRY_COMPARE_WITH_TIMEOUT(loader.pendingJobs(), 0, 60000);
    QCOMPARE(ok.count(), 1);
    QCOMPARE(failed.count(), 0); // the cancelled job's "cancelled" is dropped with it
    QCOMPARE(ok.at(0).at(1).value<LoadedRunPtr>()->label, QString("alpha"));
    QVERIFY(ok.at(0).at(1).value<LoadedRunPtr>()->timeline); // built in the worker thread
    QFile::remove(big);
}

void TestUiModels::browserNamesAreUniqueAndColumnsFilled()
{
    // Two runs that call themselves "alpha", in two folders, one of them with the same file name.
    QTemporaryDir ws;
    QDir(ws.path()).mkpath("sweep");
    const QString a1 = ws.filePath("alpha.db"), a2 = ws.filePath("sweep/alpha.db"), a3 = ws.filePath("sweep/other.db");
    QCOMPARE(uitest::makeRunFile(a1, 2, 8, 4, 0.3, 25, "alpha"), QString());
    QCOMPARE(uitest::makeRunFile(a2, 2, 8, 4, 0.3, 25, "alpha"), QString());
    QCOMPARE(uitest::makeRunFile(a3, 4, 8, 4, 0.3, 25, "alpha", 1), QString());
    WorkspaceScanner scanner;
    RunBrowserModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setEntries(scanner.scanBlocking(ws.path()), ws.path());
    QCOMPARE(model.rowCount(), 3);
    QSet<QString> names;
    for (int r = 0; r < 3; ++r)
        names.insert(model.index(r, RunBrowserModel::Name).data().toString());
    QCOMPARE(names.size(), 3); // every row's name is unique
    for (int r = 0; r < 3; ++r) {
        const QString path = model.index(r, 0).data(RunBrowserModel::PathRole).toString();
        const QString name = model.index(r, RunBrowserModel::Name).data().toString();
        QVERIFY2(name.startsWith("alpha"), qPrintable(name));
        QCOMPARE(model.index(r, RunBrowserModel::Folder).data().toString(), path.contains("/sweep/") ? QString("sweep") : QString("./"));
        QCOMPARE(model.index(r, RunBrowserModel::Steps).data().toString(), QString("8 (5 steady)"));
        QVERIFY(model.index(r, RunBrowserModel::Throughput).data().toString().endsWith("/s"));
        QVERIFY(model.index(r, RunBrowserModel::ModelSize).data().toString().contains("buckets=4"));
        // Core's verdict, as the report says it.
        const auto summary = core::summarize(*core::loadRun(path.toStdString()));
        QCOMPARE(model.index(r, RunBrowserModel::Straggler).data().toString(),
                 summary.stragglers.empty() ? QString("none") : QString("rank %1").arg(summary.stragglers.front()));
    }
    // A 100 000-character run name is cut for display.
    const QString longName = ws.filePath("long.db");
    QCOMPARE(uitest::makeRunFile(longName, 2, 4, 2, 0.3, 25, QString(100'000, QChar('x'))), QString());
    model.setEntries(scanner.scanBlocking(ws.path()), ws.path());
    for (int r = 0; r < model.rowCount(); ++r)
        QVERIFY(model.index(r, RunBrowserModel::Name).data().toString().size() <= 2 * ui::kMaxDisplayChars);
}

void TestUiModels::summaryPanelAndBucketTable()
{
    auto loaded = loadAndAnalyze(m_runB); // 4 ranks, 6 buckets, rank 1 launches 3 ms late
    QVERIFY(loaded);
    const core::RunSummary& s = (*loaded)->summary();
    SummaryPanel panel;
    QAbstractItemModelTester tester(panel.bucketModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    panel.setRun(*loaded);
    const QString text = panel.summaryText();
    // Every number is core's: step time, the five parts, overlap.
    QVERIFY2(text.contains(ui::formatMs(s.stepTimeMs)), qPrintable(text));
    for (double part : {s.computeOnlyMs, s.overlappedMs, s.exposedCommMs, s.memoryOnlyMs, s.idleMs})
        QVERIFY2(text.contains(ui::formatMs(part)), qPrintable(ui::formatMs(part) + " in " + text));
    QVERIFY(text.contains(ui::formatPercent(s.overlapRatio)));
    // The straggler verdict with its evidence (steps late, the wait it caused).
    const core::StragglerEvidence& e = s.straggler;
    if (e.straggler) {
        QVERIFY2(text.contains(QString("rank %1").arg(e.candidate)), qPrintable(text));
        QVERIFY(text.contains(QString("late in %1 of %2 steady steps").arg(e.stepsLate).arg(e.steadySteps)));
        QVERIFY(text.contains(ui::formatDuration(e.meanWaitNs)));
    } else {
        QVERIFY2(text.contains("Straggler: none"), qPrintable(text));
    }
    // The bucket table: one row per bucket of core's summary, sortable, rows name their bucket.
    BucketTableModel* model = panel.bucketModel();
    QCOMPARE(model->rowCount(), int(s.buckets.size()));
    QCOMPARE(model->rowCount(), 6);
    for (int r = 0; r < model->rowCount(); ++r) {
        const core::BucketSummary& b = s.buckets[size_t(r)];
        QCOMPARE(model->index(r, BucketTableModel::Bytes).data().toString(), ui::formatBytes(double(b.bytes)));
        QCOMPARE(model->index(r, BucketTableModel::Duration).data().toString(), ui::formatMs(b.meanDurationMs));
        QCOMPARE(model->index(r, BucketTableModel::LateRank).data().toInt(), b.lateRank);
        QCOMPARE(model->index(r, BucketTableModel::Exposed).data().toString(), ui::formatMs(b.meanExposedMs));
        QCOMPARE(model->index(r, BucketTableModel::Hidden).data().toString(), ui::formatMs(b.meanHiddenMs));
    }
    // Issue 28: which bucket is exposed. Sorted by exposed time, the top row is the bucket that
    // leaves the most communication uncovered, and the column adds up to the buckets' share of
    // the step's exposed communication (every bucket is in every steady step of this run).
    double exposedSum = 0, mostExposed = 0;
    for (const auto& b : s.buckets) {
        exposedSum += b.meanExposedMs;
        mostExposed = std::max(mostExposed, b.meanExposedMs);
    }
    QVERIFY2(mostExposed > 0, "the run exposes some communication");
    QVERIFY2(std::abs(exposedSum - s.bucketExposedMs) < 1e-9 * std::max(1.0, exposedSum),
             qPrintable(QString("%1 vs %2").arg(exposedSum).arg(s.bucketExposedMs)));
    QVERIFY(s.bucketExposedMs <= s.exposedCommMs + 1e-9);
    panel.bucketTable()->sortByColumn(BucketTableModel::Exposed, Qt::DescendingOrder);
    QCOMPARE(panel.bucketProxy()->index(0, BucketTableModel::Exposed).data(BucketTableModel::SortRole).toDouble(),
             mostExposed);
    panel.bucketTable()->sortByColumn(BucketTableModel::Duration, Qt::DescendingOrder);
    double longest = 0;
    for (const auto& b : s.buckets)
        longest = std::max(longest, b.meanDurationMs);
    const QModelIndex top = panel.bucketProxy()->index(0, BucketTableModel::Duration);
    QCOMPARE(top.data(BucketTableModel::SortRole).toDouble(), longest);
    QSignalSpy activated(&panel, &SummaryPanel::bucketActivated);
    emit panel.bucketTable()->clicked(top);
    QCOMPARE(activated.count(), 1);
    QCOMPARE(activated.at(0).at(0).toInt(), top.data(BucketTableModel::BucketRole).toInt());
    panel.setRun(nullptr);
    QCOMPARE(model->rowCount(), 0);
}

// docs/design.md: what a rule left out is shown, and a size the run does not give reads
// "unknown", never "0 B" or 0 parameters. A real H100 recording (tests/data/gpu/) whose bucket 0
// is made sizeless the way an imported trace is.
void TestUiModels::summaryShowsDiagnosticsAndUnknownSizes()
{
    auto run = core::loadRun(LOCKSTEP_SOURCE_DIR "/tests/data/gpu/record-nccl-1.db");
    QVERIFY(run.has_value());
    QVERIFY(!run->diagnostics.empty());
    for (core::Bucket& b : run->buckets)
        if (b.index == 0) {
            b.bytes = 0;
            b.params.clear();
        }
    for (core::Span& s : run->spans)
        if (s.bucket == 0)
            s.bytes = 0;
    const std::string kind = run->diagnostics.front().kind;
    auto loaded = analyzeRun(std::move(*run), QStringLiteral("record-nccl-1.db"));
    QVERIFY(loaded.has_value());
    SummaryPanel panel;
    panel.setRun(*loaded);
    const QString text = panel.summaryText();
    QVERIFY2(text.contains(QStringLiteral("Diagnostics")), qPrintable(text));
    QVERIFY2(text.contains(QString::fromStdString(kind)), qPrintable(text));
    BucketTableModel* model = panel.bucketModel();
    QVERIFY(model->rowCount() > 1);
    QCOMPARE(model->index(0, BucketTableModel::Bytes).data().toString(), QStringLiteral("unknown"));
    QCOMPARE(model->index(0, BucketTableModel::Params).data().toString(), QStringLiteral("unknown"));
    QVERIFY(model->index(1, BucketTableModel::Bytes).data().toString() != QStringLiteral("unknown"));
    // One rank: no bandwidth, no skew.
    QCOMPARE(model->index(1, BucketTableModel::Busbw).data().toString(), QStringLiteral("—"));
    QCOMPARE(model->index(1, BucketTableModel::Skew).data().toString(), QStringLiteral("—"));
}

void TestUiModels::rankTable()
{
    auto loaded = loadAndAnalyze(m_runB);
    QVERIFY(loaded);
    RankTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setRun(*loaded);
    const auto& ranks = (*loaded)->analysis->ranks;
    QCOMPARE(model.rowCount(), 4);
    QSortFilterProxyModel proxy;
    proxy.setSourceModel(&model);
    proxy.setSortRole(RankTableModel::SortRole);
    proxy.sort(RankTableModel::WaitCaused, Qt::DescendingOrder);
    // Core's per-rank mean wait caused: the rank that caused the most is on top.
    const auto most = std::max_element(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) {
        return a.meanWaitCausedMs < b.meanWaitCausedMs;
    });
    QCOMPARE(proxy.index(0, 0).data(RankTableModel::RankRole).toInt(), most->rank);
    QCOMPARE(most->rank, 1); // the rank that launches late
    QCOMPARE(proxy.index(0, RankTableModel::WaitCaused).data().toString(), ui::formatMs(most->meanWaitCausedMs));
    model.setRun(nullptr);
    QCOMPARE(model.rowCount(), 0);
}

namespace {
// Peak resident memory of this process so far (VmHWM), MiB.
double peakRssMib()
{
    QFile f("/proc/self/status");
    if (!f.open(QIODevice::ReadOnly))
        return -1;
    for (const QByteArray& line : f.readAll().split('\n'))
        if (line.startsWith("VmHWM:"))
            return line.mid(6).trimmed().split(' ').front().toDouble() / 1024.0;
    return -1;
}
} // namespace

void TestUiModels::hugeWorldSizeOpensWithoutRunawayMemory()
{
    // A run that claims two billion ranks and numbers its second rank 1 999 999 999 (a corrupt
    // or hostile file): every page sizes by the ranks present, never by the claimed world size.
    core::SyntheticParams p;
    p.worldSize = 2;
    p.steps = 6;
    core::Run run = core::makeSyntheticRun(p);
    run.config.worldSize = 2'000'000'000;
    constexpr int32_t kFar = 1'999'999'999;
    for (core::Lane& l : run.lanes)
        if (l.rank == 1)
            l.rank = kFar;
    for (core::Step& s : run.steps)
        if (s.rank == 1)
            s.rank = kFar;
    for (core::RankInfo& r : run.ranks)
        if (r.rank == 1)
            r.rank = kFar;
    run.normalize();
    const QString path = m_dir.filePath("huge-world.db");
    QVERIFY(core::saveRun(run, path.toStdString(), core::RunWriter::Mode::Overwrite));
    const double before = peakRssMib();
    auto loaded = loadAndAnalyze(path);
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    SummaryPanel summary;
    summary.setRun(*loaded);
    RanksPage ranks;
    ranks.resize(900, 600);
    ranks.setRun(*loaded);
    QCOMPARE(ranks.rankModel()->rowCount(), 2);
    QCOMPARE(int((*loaded)->timeline->rankStepMatrix().ranks.size()), 2);
    QImage img(ranks.size(), QImage::Format_RGB32);
    ranks.render(&img);
    const double grown = peakRssMib() - before;
    QVERIFY2(grown < 200, qPrintable(QStringLiteral("peak memory grew by %1 MiB").arg(grown)));
    QFile::remove(path);
}

void TestUiModels::launchArguments()
{
    LaunchSettings s;
    s.training.model = "transformer";
    s.worldSize = 3;
    s.bucketMb = "1, 4,25";
    s.training.steps = 7;
    s.training.stragglerRank = 1;
    s.training.stragglerMs = 20;
    s.training.linkGbps = 2.5;
    const QStringList run = runArguments(s, "/w/x y.db");
    QCOMPARE(run.first(), QString("run"));
    QVERIFY(run.contains("/w/x y.db")); // one argument, spaces and all: no shell involved
    QCOMPARE(run.at(run.indexOf("--nproc") + 1), QString("3"));
    QCOMPARE(run.at(run.indexOf("--bucket-mb") + 1), QString("1"));
    QCOMPARE(run.at(run.indexOf("--model") + 1), QString("transformer"));
    QCOMPARE(run.at(run.indexOf("--straggler") + 1), QString("1:20"));
    QCOMPARE(run.at(run.indexOf("--link-gbps") + 1), QString("2.5"));
    QCOMPARE(run.at(run.indexOf("--steps") + 1), QString("7"));
    const QStringList sweep = sweepArguments(s, "/w/sweep");
    QCOMPARE(sweep.first(), QString("sweep"));
    QCOMPARE(sweep.at(sweep.indexOf("--bucket-mb") + 1), QString("1,4,25"));
    QCOMPARE(sweep.at(sweep.indexOf("--out-dir") + 1), QString("/w/sweep"));
    s.training.stragglerRank = -1;
    s.training.linkGbps = 0;
    const QStringList plain = runArguments(s, "a.db");
    QVERIFY(!plain.contains("--straggler"));
    QVERIFY(!plain.contains("--link-gbps"));
}

void TestUiModels::liveFilesFindShards()
{
    QTemporaryDir dir;
    const QString out = dir.filePath("live.db");
    QVERIFY(liveFilesFor(out).isEmpty());
    QDir(dir.path()).mkpath(".live.db.shards-abc123");
    const QString shard = dir.filePath(".live.db.shards-abc123/rank-0.db");
    QCOMPARE(uitest::makeRunFile(shard, 1, 3, 2, 0.3, 25, "live"), QString());
    QCOMPARE(liveFilesFor(out), QStringList{shard});
    QCOMPARE(uitest::makeRunFile(out, 1, 3, 2, 0.3, 25, "live"), QString());
    QCOMPARE(liveFilesFor(out), QStringList{QFileInfo(out).absoluteFilePath()});
}

QTEST_MAIN(TestUiModels)
// The Kernels tab on a device run written to a real run file: one rank, steps 0-3 (step 0 warm-up),
// per step two 1 ms "gemm" kernels, one 0.5 ms "relu" and a 0.25 ms copy, in a 4 ms step.
// Hand-derived: gemm 2 per step, 2 ms per step, 50 % of the step; relu 0.5 ms, 12.5 %.
void TestUiModels::kernelTableOfADeviceRun()
{
    core::Run run;
    run.config.name = "gpu-kernels";
    run.config.worldSize = 1;
    run.config.device = "cuda";
    run.config.warmupSteps = 1;
    run.config.status = core::RunStatus::Completed;
    run.ranks.push_back(core::RankInfo{.rank = 0, .host = "h", .device = "cuda:0"});
    run.lanes.push_back(core::Lane{.id = {0}, .rank = 0, .kind = core::LaneKind::Compute, .name = "compute"});
    run.lanes.push_back(core::Lane{.id = {1}, .rank = 0, .kind = core::LaneKind::GpuStream, .device = 0, .stream = 7,
                                   .name = "stream 7"});
    const core::StringId gemm = run.strings.intern("gemm");
    const core::StringId relu = run.strings.intern("relu");
    const core::StringId copy = run.strings.intern("Memcpy HtoD");
    const core::StringId fwd = run.strings.intern("forward");
    constexpr core::TimeNs ms = 1'000'000;
    for (int32_t step = 0; step < 4; ++step) {
        const core::TimeNs t = 1'000 * ms + step * 4 * ms;
        run.steps.push_back(core::Step{.rank = 0, .step = step, .start = t, .end = t + 4 * ms, .samples = 8});
        run.spans.push_back(core::Span{.start = t, .end = t + 3 * ms, .lane = {0}, .name = fwd, .step = step,
                                       .kind = core::SpanKind::Forward});
        run.spans.push_back(core::Span{.start = t, .end = t + ms, .lane = {1}, .name = gemm, .step = step, .kind = core::SpanKind::Kernel});
        run.spans.push_back(core::Span{.start = t + ms, .end = t + 2 * ms, .lane = {1}, .name = gemm, .step = step,
                                       .kind = core::SpanKind::Kernel});
        run.spans.push_back(core::Span{.start = t + 2 * ms, .end = t + 2 * ms + ms / 2, .lane = {1}, .name = relu,
                                       .step = step, .kind = core::SpanKind::Kernel});
        run.spans.push_back(core::Span{.start = t + 3 * ms, .end = t + 3 * ms + ms / 4, .bytes = 1 << 20, .lane = {1},
                                       .name = copy, .step = step, .kind = core::SpanKind::Memcpy});
    }
    run.normalize();
    const QString path = m_dir.filePath("gpu-kernels.db");
    QVERIFY(core::saveRun(run, path.toStdString(), core::RunWriter::Mode::Overwrite).has_value());
    auto loaded = loadAndAnalyze(path);
    QVERIFY2(loaded, loaded ? "" : loaded.error().message.c_str());
    KernelPanel panel;
    QAbstractItemModelTester tester(panel.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    panel.setRun(*loaded);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    const auto& rows = panel.model()->rows();
    QCOMPARE(int(rows.size()), 3);
    QCOMPARE(QString::fromStdString(rows[0].name), QString("gemm"));
    QCOMPARE(rows[0].countPerStep, 2.0);
    QCOMPARE(rows[0].totalMsPerStep, 2.0);
    const double step = (*loaded)->summary().stepTimeMs;
    QVERIFY2(std::abs(rows[0].shareOfStep - 2.0 / step) < 1e-9, qPrintable(QString::number(step)));
    QCOMPARE(QString::fromStdString(rows[1].name), QString("relu"));
    QCOMPARE(rows[1].meanMs, 0.5);
    QCOMPARE(rows[2].category, core::SpanCategory::Memory);
    QCOMPARE(panel.rankBox()->count(), 2); // all ranks, rank 0
    // Activating the top row names the kernel (the timeline page searches for it).
    QSignalSpy activated(&panel, &KernelPanel::kernelActivated);
    panel.table()->setFocus();
    panel.table()->setCurrentIndex(panel.table()->model()->index(0, 0));
    QTest::keyClick(panel.table(), Qt::Key_Return);
    QCOMPARE(activated.count(), 1);
    QCOMPARE(activated.at(0).at(0).toString(), QString("gemm"));
    // A CPU run has none, and says so.
    auto cpu = loadAndAnalyze(m_runA);
    QVERIFY(cpu);
    panel.setRun(*cpu);
    QCOMPARE(panel.model()->rowCount(), 0);
    QVERIFY(panel.hint()->text().contains("no device work"));
}

#include "test_ui_models.moc"
