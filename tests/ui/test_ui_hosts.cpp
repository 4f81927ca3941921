// Ranks grouped by host (issue 30 item 2, the app side): a run file whose four ranks ran on two
// hosts (core's synthetic run, its ranks' hosts set, written by core's writer and read back from
// SQLite) shows a header row per host in the timeline that a click or H collapses, and host
// bands in the rank heatmap; the same run on one host looks exactly as it does without hosts.
#include "run_loader.h"
#include "timeline/rank_heatmap.h"
#include "timeline/timeline_model.h"
#include "timeline/timeline_palette.h"
#include "timeline/timeline_widget.h"

#include "lockstep/core/run_db.h"
#include "lockstep/core/synthetic.h"

#include <QImage>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <functional>

using namespace lockstep;
using namespace lockstep::ui;

namespace {
// With LOCKSTEP_SCREENSHOT_DIR set, what the test looked at is saved there (as in test_timeline).
void maybeSave(QWidget& w, const QString& name)
{
    const QString dir = qEnvironmentVariable("LOCKSTEP_SCREENSHOT_DIR");
    if (!dir.isEmpty())
        w.grab().toImage().save(dir + QLatin1Char('/') + name + QStringLiteral(".png"));
}
} // namespace

class TestUiHosts : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void timelineHostRows();
    void collapseByClickAndKey();
    void oneHostLooksAsBefore();
    void heatmapGroupsByHost();

private:
    // Four ranks; rank r on host(r); rank 3 a straggler. Written to a file and loaded back.
    LoadedRunPtr runOnHosts(const QString& file, const std::function<std::string(int)>& host);
    QTemporaryDir m_dir;
    LoadedRunPtr m_twoHosts; // ranks 0, 2 on "node-a"; 1, 3 on "node-b" (interleaved)
};

LoadedRunPtr TestUiHosts::runOnHosts(const QString& file, const std::function<std::string(int)>& host)
{
    core::SyntheticParams p;
    p.worldSize = 4;
    p.steps = 8;
    p.buckets = 3;
    p.stragglerRank = 3;
    p.stragglerDelayNs = 3'000'000;
    core::Run run = core::makeSyntheticRun(p);
    for (core::RankInfo& r : run.ranks)
        r.host = host(r.rank);
    const QString path = m_dir.filePath(file);
    const auto saved = core::saveRun(run, path.toStdString(), core::RunWriter::Mode::Overwrite);
    if (!saved)
        qFatal("saveRun: %s", saved.error().message.c_str());
    auto loaded = loadAndAnalyze(path);
    if (!loaded)
        qFatal("load: %s", loaded.error().message.c_str());
    return *loaded;
}

void TestUiHosts::initTestCase()
{
    QVERIFY(m_dir.isValid());
    m_twoHosts = runOnHosts(QStringLiteral("two-hosts.db"), [](int r) { return r % 2 == 0 ? "node-a" : "node-b"; });
    // The hosts came back from the file.
    QCOMPARE(m_twoHosts->run->ranks.size(), size_t(4));
    QCOMPARE(QString::fromStdString(m_twoHosts->run->ranks[3].host), QStringLiteral("node-b"));
}

void TestUiHosts::timelineHostRows()
{
    TimelineWidget w;
    w.resize(1400, 1000);
    w.setRuns({TimelineRun{m_twoHosts->run, m_twoHosts->label, m_twoHosts->timeline}});
    const auto& hosts = w.hosts(0);
    QCOMPARE(hosts.size(), size_t(2));
    QCOMPARE(hosts[0].name, QStringLiteral("node-a"));
    QCOMPARE(hosts[0].ranks, (std::vector<int32_t>{0, 2}));
    QCOMPARE(hosts[1].ranks, (std::vector<int32_t>{1, 3}));
    // Headers in order: host node-a, ranks 0 and 2, host node-b, ranks 1 and 3.
    std::vector<std::pair<TimelineRowKind, int>> headers;
    for (const TimelineRow& r : w.rows()) {
        if (r.kind == TimelineRowKind::HostHeader)
            headers.push_back({r.kind, r.host});
        else if (r.kind == TimelineRowKind::RankHeader) {
            headers.push_back({r.kind, r.rank});
            QCOMPARE(r.host, r.rank % 2);
        }
    }
    const std::vector<std::pair<TimelineRowKind, int>> want = {
        {TimelineRowKind::HostHeader, 0}, {TimelineRowKind::RankHeader, 0}, {TimelineRowKind::RankHeader, 2},
        {TimelineRowKind::HostHeader, 1}, {TimelineRowKind::RankHeader, 1}, {TimelineRowKind::RankHeader, 3}};
    QVERIFY(headers == want);
    // The header names its host and ranks, drawn in the host header's colour.
    QStringList labels;
    for (const DrawText& t : w.drawList().gutterLabels)
        labels << t.text;
    QVERIFY2(labels.join('|').contains(QStringLiteral("node-b · ranks 1, 3")), qPrintable(labels.join('|')));
    const std::vector<TimelineRow> rows = w.rows();
    const auto second = *std::find_if(rows.begin(), rows.end(), [](const TimelineRow& r) {
        return r.kind == TimelineRowKind::HostHeader && r.host == 1;
    });
    const QImage img = w.grab().toImage();
    QCOMPARE(QColor(img.pixel(w.width() - 40, second.top - w.scrollOffset() + second.height / 2)), palette::hostHeaderBackground());
}

void TestUiHosts::collapseByClickAndKey()
{
    TimelineWidget w;
    w.resize(1400, 1000);
    w.setRuns({TimelineRun{m_twoHosts->run, m_twoHosts->label, m_twoHosts->timeline}});
    QSignalSpy rowsChanged(&w, &TimelineWidget::rowsChanged);
    auto headerOf = [&](int host) {
        for (const TimelineRow& r : w.rows())
            if (r.kind == TimelineRowKind::HostHeader && r.host == host)
                return r;
        return TimelineRow{};
    };
    auto rankHeaders = [&] {
        std::vector<int> out;
        for (const TimelineRow& r : w.rows())
            if (r.kind == TimelineRowKind::RankHeader)
                out.push_back(r.rank);
        return out;
    };
    QCOMPARE(w.rankRowCount(), 4);
    // A click on node-b's header hides ranks 1 and 3; the header stays, marked collapsed.
    const TimelineRow b = headerOf(1);
    QTest::mouseClick(&w, Qt::LeftButton, {}, QPoint(600, b.top - w.scrollOffset() + b.height / 2));
    QVERIFY(rowsChanged.count() >= 1);
    QVERIFY(w.isHostCollapsed(0, 1));
    QCOMPARE(rankHeaders(), (std::vector<int>{0, 2}));
    QVERIFY(headerOf(1).collapsed);
    maybeSave(w, QStringLiteral("hosts_timeline_collapsed"));
    // A click again shows them.
    const TimelineRow b2 = headerOf(1);
    QTest::mouseClick(&w, Qt::LeftButton, {}, QPoint(100, b2.top - w.scrollOffset() + b2.height / 2));
    QVERIFY(!w.isHostCollapsed(0, 1));
    QCOMPARE(rankHeaders(), (std::vector<int>{0, 2, 1, 3}));
    // H collapses every host, H again shows them all.
    w.setFocus();
    QTest::keyClick(&w, Qt::Key_H);
    QVERIFY(w.isHostCollapsed(0, 0) && w.isHostCollapsed(0, 1));
    QCOMPARE(w.rankRowCount(), 0);
    QTest::keyClick(&w, Qt::Key_H);
    QCOMPARE(w.rankRowCount(), 4);
    // Going to a rank of a collapsed host shows its host.
    w.setHostCollapsed(0, 1, true);
    QCOMPARE(w.rankRowCount(), 2);
    w.revealRank(0, 3);
    QVERIFY(!w.isHostCollapsed(0, 1));
    QCOMPARE(w.rankRowCount(), 4);
}

void TestUiHosts::oneHostLooksAsBefore()
{
    // All four ranks on one host, and the same run with no host recorded: no host rows, and
    // the two timelines and heatmaps are the same pictures.
    const LoadedRunPtr one = runOnHosts(QStringLiteral("one-host.db"), [](int) { return "node-a"; });
    const LoadedRunPtr none = runOnHosts(QStringLiteral("no-host.db"), [](int) { return ""; });
    auto render = [](const LoadedRunPtr& run) {
        TimelineWidget w;
        w.resize(1200, 700);
        w.setRuns({TimelineRun{run->run, run->label, run->timeline}});
        for (const TimelineRow& r : w.rows()) {
            if (r.kind == TimelineRowKind::HostHeader || r.host != -1)
                return QImage();
        }
        return w.grab().toImage();
    };
    const QImage a = render(one), b = render(none);
    QVERIFY(!a.isNull() && !b.isNull());
    QCOMPARE(a, b);
    auto heat = [](const LoadedRunPtr& run) {
        RankHeatmap h;
        h.resize(700, 420);
        h.setModel(run->timeline);
        if (!h.hostBands().empty() || h.plotRect().left() != 64)
            return QImage();
        return h.grab().toImage();
    };
    const QImage ha = heat(one), hb = heat(none);
    QVERIFY(!ha.isNull() && !hb.isNull());
    QCOMPARE(ha, hb);
}

void TestUiHosts::heatmapGroupsByHost()
{
    RankHeatmap h;
    h.resize(700, 420);
    h.setModel(m_twoHosts->timeline);
    const auto bands = h.hostBands();
    QCOMPARE(bands.size(), size_t(2));
    QCOMPARE(bands[0].title, QStringLiteral("node-a · ranks 0, 2"));
    QCOMPARE(bands[1].title, QStringLiteral("node-b · ranks 1, 3"));
    maybeSave(h, QStringLiteral("hosts_heatmap"));
    const QRect plot = h.plotRect();
    QVERIFY(plot.left() > bands[0].rect.right()); // the labels sit left of the cells
    QCOMPARE(bands[0].rect.top(), plot.top());
    QVERIFY(bands[1].rect.top() > bands[0].rect.top());
    // The rows beside each band are that host's ranks: node-a's rows are ranks 0 and 2.
    for (size_t b = 0; b < bands.size(); ++b) {
        const QRect r = bands[b].rect;
        for (int y = r.top() + 1; y < r.bottom(); y += 4) {
            const RankHeatmap::Cell c = h.cellAt(QPoint(plot.center().x(), y));
            QVERIFY2(c.rank >= 0 && c.rank % 2 == int(b), qPrintable(QStringLiteral("y %1: rank %2").arg(y).arg(c.rank)));
        }
    }
}

QTEST_MAIN(TestUiHosts)
#include "test_ui_hosts.moc"
