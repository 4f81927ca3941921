// The UI's item models over real run files: the run browser (scan of a workspace with two runs
// and a foreign file, sorting, filtering, error rows) and the compare metrics model (values and
// differences), each checked by QAbstractItemModelTester; plus the launch panel's pure parts
// (argument lists, progress lines, shard discovery).
#include "compare_model.h"
#include "launch_panel.h"
#include "run_browser_model.h"
#include "run_loader.h"
#include "ui_test_support.h"

#include <QAbstractItemModelTester>
#include <QDir>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

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
    void launchArguments();
    void liveFilesFindShards();

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
    QCOMPARE(QString::fromStdString(ok.summary->name), QString("alpha"));
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

void TestUiModels::browserScanInBackgroundUsesCache()
{
    WorkspaceScanner scanner;
    QSignalSpy spy(&scanner, &WorkspaceScanner::scanFinished);
    scanner.scan(m_dir.path());
    scanner.scan(m_dir.path()); // supersedes the first: only one result arrives
    QTRY_COMPARE_WITH_TIMEOUT(spy.count(), 1, 20000);
    QTest::qWait(200);
    QCOMPARE(spy.count(), 1);
    const auto entries = spy.at(0).at(1).value<std::vector<BrowserEntry>>();
    QCOMPARE(int(entries.size()), 3);
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
    model.setRuns({(*a)->summary, (*b)->summary}, {"alpha", "beta"});
    QCOMPARE(model.rowCount(), int(CompareModel::MetricCount));
    QCOMPARE(model.columnCount(), 4); // metric, alpha, beta, Δ
    QCOMPARE(model.headerData(1, Qt::Horizontal).toString(), QString("alpha"));
    QCOMPARE(model.headerData(2, Qt::Horizontal).toString(), QString("beta"));
    QVERIFY(model.headerData(3, Qt::Horizontal).toString().startsWith(QStringLiteral("Δ")));

    const double stepA = model.index(CompareModel::StepTime, 1).data(CompareModel::ValueRole).toDouble();
    const double stepB = model.index(CompareModel::StepTime, 2).data(CompareModel::ValueRole).toDouble();
    QCOMPARE(stepA, (*a)->summary.stepTimeMs);
    QCOMPARE(stepB, (*b)->summary.stepTimeMs);
    const double diff = model.index(CompareModel::StepTime, 3).data(CompareModel::ValueRole).toDouble();
    QVERIFY(std::abs(diff - (stepB - stepA) / stepA) < 1e-9);
    const QString text = model.index(CompareModel::StepTime, 3).data().toString();
    QVERIFY2(text.endsWith("%"), qPrintable(text));
    // Beta communicates more: its comm difference is positive and red (worse).
    const double commDiff = model.index(CompareModel::Comm, 3).data(CompareModel::ValueRole).toDouble();
    QVERIFY(commDiff > 0.005);
    const auto brush = model.index(CompareModel::Comm, 3).data(Qt::ForegroundRole).value<QBrush>();
    QVERIFY(brush.color().red() > brush.color().green());
    // Three runs: two diff columns.
    model.setRuns({(*a)->summary, (*b)->summary, (*a)->summary}, {"alpha", "beta", "alpha again"});
    QCOMPARE(model.columnCount(), 6);
    QCOMPARE(model.index(CompareModel::StepTime, 5).data(CompareModel::ValueRole).toDouble(), 0.0);
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
    QCOMPARE(run->summary.worldSize, 2);
    QVERIFY(!run->breakdown.empty());
    QCOMPARE(failed.at(0).at(0).toString(), m_foreign);
    QVERIFY(!failed.at(0).at(1).toString().isEmpty());

    // Superseded requests for one key: only the newest answers.
    ok.clear();
    loader.load(QStringList{m_runA}, "live");
    loader.load(QStringList{m_runB}, "live");
    QTRY_COMPARE_WITH_TIMEOUT(loader.pendingJobs(), 0, 20000);
    QCOMPARE(ok.count(), 1);
    QCOMPARE(ok.at(0).at(1).value<LoadedRunPtr>()->summary.worldSize, 4);

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
    QCOMPARE((*both)->summary.worldSize, 4);
    // The same ranks in two files are not shards of one run: refused, naming the rank.
    auto twice = loadAndAnalyze(QStringList{s0, s0});
    QVERIFY(!twice);
    QVERIFY(twice.error().message.find("rank 0") != std::string::npos);
    QFile::remove(s0);
    QFile::remove(s1);
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
#include "test_ui_models.moc"
