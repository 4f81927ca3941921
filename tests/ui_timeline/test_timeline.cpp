// The timeline widget, offscreen, on synthetic runs: it renders (not blank, one header per rank,
// every bucket's colour), zooms and pans around the right anchor, selects what is clicked, and
// the details panel and the replay views report what the run says. Set
// LOCKSTEP_SCREENSHOT_DIR to also write the rendered images as PNGs.
#include "format.h"
#include "rank_heatmap.h"
#include "replay.h"
#include "span_details.h"
#include "time_axis.h"
#include "timeline_model.h"
#include "timeline_palette.h"
#include "timeline_widget.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/synthetic.h"

#include <QAbstractItemModelTester>
#include <QLabel>
#include <QRegularExpression>
#include <QScrollBar>
#include <QSpinBox>
#include <QToolButton>
#include <QApplication>
#include <QImage>
#include <QSignalSpy>
#include <QTest>
#include <QToolTip>
#include <QWheelEvent>

#include <array>
#include <algorithm>
#include <cmath>
#include <set>

using namespace lockstep;
using lockstep::ui::SpanRef;
using lockstep::ui::TimelineRowKind;
using lockstep::ui::TimelineWidget;

namespace {

std::shared_ptr<const core::Run> makeRun(int world, int steps = 6, int straggler = -1, int buckets = 4, uint64_t seed = 1)
{
    core::SyntheticParams p;
    p.worldSize = world;
    p.steps = steps;
    p.buckets = buckets;
    p.backwardSegmentsPerBucket = 3;
    p.stragglerRank = straggler;
    p.stragglerDelayNs = straggler >= 0 ? 1'500'000 : 0;
    p.seed = seed;
    return std::make_shared<const core::Run>(core::makeSyntheticRun(p));
}

core::Run makeSyntheticRunForTest()
{
    core::SyntheticParams p;
    p.worldSize = 1;
    p.steps = 4;
    p.buckets = 2;
    return core::makeSyntheticRun(p);
}

QImage renderWidget(QWidget& w)
{
    QImage img(w.size(), QImage::Format_ARGB32_Premultiplied);
    img.fill(Qt::transparent);
    w.render(&img);
    return img.convertToFormat(QImage::Format_RGB32);
}

void maybeSave(const QImage& img, const QString& name)
{
    const QString dir = qEnvironmentVariable("LOCKSTEP_SCREENSHOT_DIR");
    if (!dir.isEmpty())
        img.save(dir + QLatin1Char('/') + name + QStringLiteral(".png"));
}

qint64 countColor(const QImage& img, QColor c, QRect area = {})
{
    if (area.isNull())
        area = img.rect();
    const QRgb want = c.rgb() | 0xff000000u;
    qint64 n = 0;
    for (int y = area.top(); y <= area.bottom(); ++y) {
        const QRgb* line = reinterpret_cast<const QRgb*>(img.constScanLine(y));
        for (int x = area.left(); x <= area.right(); ++x)
            n += (line[x] | 0xff000000u) == want;
    }
    return n;
}

// A comm span of `rank` for (step, bucket).
qint64 findComm(const core::Run& run, int rank, int step, int bucket)
{
    for (size_t i = 0; i < run.spans.size(); ++i) {
        const core::Span& s = run.spans[i];
        if (s.kind == core::SpanKind::Comm && s.step == step && s.bucket == bucket && run.lanes[s.lane.v].rank == rank)
            return qint64(i);
    }
    return -1;
}

void sendWheel(QWidget* w, QPoint pos, int dy)
{
    QWheelEvent ev(QPointF(pos), QPointF(w->mapToGlobal(pos)), QPoint(), QPoint(0, dy), Qt::NoButton, Qt::NoModifier,
                   Qt::NoScrollPhase, false);
    QApplication::sendEvent(w, &ev);
}

void sendMouse(QWidget* w, QEvent::Type type, QPoint pos, Qt::MouseButton button, Qt::MouseButtons buttons)
{
    QMouseEvent ev(type, QPointF(pos), QPointF(w->mapToGlobal(pos)), button, buttons, Qt::NoModifier);
    QApplication::sendEvent(w, &ev);
}

} // namespace

class TestTimeline : public QObject {
    Q_OBJECT
private slots:
    void timeAxis();
    void render_data();
    void render();
    void compareStacksAndAligns();
    void zoomAroundAnchor();
    void wheelZoomAtCursor();
    void panKeysAndDrag();
    void fitAllAndZoomToStep();
    void clickSelects();
    void clickFoldedZoomsIn();
    void tooltips();
    void rankBreakdownMatchesCore();
    void gpuStreamLanes();
    void quietStreamsFoldByTheRule();
    void detailsPanel();
    void detailsPanelOneRankAndUnknownSize();
    void replayBucketStates();
    void replayControllerAndBar();
    void bucketStatusModelTester();
    void badInput();
    // Issue 11.
    void overlappingAllReducesArePackedAndFullyVisible();
    void drawListsWithoutPainting();
    void bucketLinkedAcrossRanks();
    void measureRangeWithShiftDrag();
    void searchSpanNames();
    void arrowKeysMoveBetweenSpansAndLanes();
    void digitKeysTypeStepNumbers();
    void collapseOrderAndScrollManyRanks();
    void heatmapKeepsMaximaAndJumps();
    void heatmapEveryPixelIsItsCellsMaximum();
    void paletteSafeForColourBlindness();
    void hugeNamesStayCheap();
    void replayPlaysOnAFreshRunAndStopClears();
};

void TestTimeline::timeAxis()
{
    QCOMPARE(ui::niceTickStep(3.2), core::TimeNs(5));
    QCOMPARE(ui::niceTickStep(12), core::TimeNs(20));
    QCOMPARE(ui::niceTickStep(45000), core::TimeNs(50000));
    QCOMPARE(ui::niceTickStep(100), core::TimeNs(100));
    QCOMPARE(ui::formatDuration(12'500'000), QStringLiteral("12.5 ms"));
    QCOMPARE(ui::formatDuration(830), QStringLiteral("830 ns"));
    QCOMPARE(ui::formatDuration(1'250'000'000), QStringLiteral("1.25 s"));
    QCOMPARE(ui::formatDuration(4'200), QStringLiteral("4.2 µs"));
    QCOMPARE(ui::formatBytes(4.0 * 1024 * 1024), QStringLiteral("4.0 MiB"));
    QCOMPARE(ui::formatBytes(1536), QStringLiteral("1.5 KiB"));
    QCOMPARE(ui::formatBytes(512), QStringLiteral("512 B"));
    QCOMPARE(ui::formatMs(12.5), QStringLiteral("12.5 ms"));
    QCOMPARE(ui::formatMs(std::nan("")), QStringLiteral("—"));
    QCOMPARE(ui::formatSignedMs(-0.35), QStringLiteral("−350 µs"));
    QCOMPARE(ui::formatTickLabel(2'000'000, 100'000), QStringLiteral("2 ms"));
    QCOMPARE(ui::formatTickLabel(2'500'000, 100'000), QStringLiteral("2.5 ms"));
    QCOMPARE(ui::formatTickLabel(182'625'000'000, 5'000'000), QStringLiteral("182.625 s"));
    QCOMPARE(ui::formatTickLabel(-20'000'000, 1'000'000), QStringLiteral("-20 ms"));
    core::TimeNs step = 0;
    const auto ticks = ui::rulerTicks(0, 10'000'000, 10'000, 12, &step);
    QCOMPARE(step, core::TimeNs(200'000)); // 12 px at 10 µs/px = 120 µs -> 200 µs
    QVERIFY(ticks.front().major && ticks.front().t == 0);
    QCOMPARE(int(ticks.size()), 51);
}

void TestTimeline::render_data()
{
    QTest::addColumn<int>("world");
    QTest::newRow("2 ranks") << 2;
    QTest::newRow("4 ranks") << 4;
}

void TestTimeline::render()
{
    QFETCH(int, world);
    const auto run = makeRun(world, 6, world - 1);
    TimelineWidget w;
    w.resize(1400, 160 + world * 80);
    w.setRuns({{run, QStringLiteral("synthetic")}});

    // One rank header per rank, each followed by its compute and comm lanes.
    QCOMPARE(w.rankRowCount(), world);
    QCOMPARE(w.rowCount(), world * 3);
    const auto rows = w.rows();
    int ranksSeen = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
        if (rows[i].kind != TimelineRowKind::RankHeader)
            continue;
        QCOMPARE(rows[i].rank, ranksSeen++);
        QCOMPARE(rows[i + 1].kind, TimelineRowKind::Lane);
        QCOMPARE(run->lanes[size_t(rows[i + 1].lane)].kind, core::LaneKind::Compute);
        QCOMPARE(run->lanes[size_t(rows[i + 2].lane)].kind, core::LaneKind::Comm);
    }

    // Fit all: not blank, headers painted where the rows say.
    QImage img = renderWidget(w);
    maybeSave(img, QStringLiteral("timeline_fit_%1ranks").arg(world));
    QVERIFY(w.lastFrameItemCount() > 0);
    const qint64 background = countColor(img, ui::palette::background());
    QVERIFY2(background < qint64(img.width()) * img.height() * 8 / 10, "the image is mostly background");
    for (const auto& r : rows) {
        if (r.kind != TimelineRowKind::RankHeader)
            continue;
        QCOMPARE(QColor(img.pixel(TimelineWidget::kGutterWidth + 2, r.top + 1)), ui::palette::rankHeaderBackground());
    }

    // Zoomed to a steady step: every bucket's colour is on screen, in the comm lanes.
    w.zoomToStep(3);
    img = renderWidget(w);
    maybeSave(img, QStringLiteral("timeline_step3_%1ranks").arg(world));
    for (const core::Bucket& b : run->buckets) {
        const qint64 n = countColor(img, ui::palette::bucketColor(b.index));
        QVERIFY2(n > 50, qPrintable(QStringLiteral("bucket %1 colour: %2 pixels").arg(b.index).arg(n)));
    }
    // Overlap strips: both overlapped and exposed communication are shaded; the straggler is marked.
    QVERIFY(countColor(img, ui::palette::overlappedColor()) > 20);
    QVERIFY(countColor(img, ui::palette::exposedColor()) > 20);
    QVERIFY(countColor(img, ui::palette::stragglerColor()) > 10);
    // The straggler mark sits in the straggler's header row, not in the others'.
    const auto strag = core::stragglers(*run).perStep;
    int stragRank = -1;
    for (const auto& s : strag)
        if (s.step == 3)
            stragRank = s.rank;
    QCOMPARE(stragRank, world - 1);
    for (const auto& r : rows) {
        if (r.kind != TimelineRowKind::RankHeader)
            continue;
        const QRect headerArea(TimelineWidget::kGutterWidth, r.top, img.width() - TimelineWidget::kGutterWidth, r.height);
        const qint64 marks = countColor(img, ui::palette::stragglerColor(), headerArea);
        if (r.rank == stragRank)
            QVERIFY(marks > 5);
        else
            QCOMPARE(marks, qint64(0));
    }
}

void TestTimeline::compareStacksAndAligns()
{
    const auto a = makeRun(2, 6, -1, 4, 1);
    auto bRun = core::makeSyntheticRun([] {
        core::SyntheticParams p;
        p.worldSize = 2;
        p.steps = 6;
        p.buckets = 2;
        p.stepNs = 14'000'000;
        p.seed = 7;
        return p;
    }());
    for (core::Span& s : bRun.spans) { // a run recorded much later: alignment must hide that
        s.start += 5'000'000'000;
        s.end += 5'000'000'000;
    }
    for (core::Step& s : bRun.steps) {
        s.start += 5'000'000'000;
        s.end += 5'000'000'000;
    }
    for (core::Instant& i : bRun.instants)
        i.ts += 5'000'000'000;
    const auto b = std::make_shared<const core::Run>(std::move(bRun));
    TimelineWidget w;
    w.resize(1400, 500);
    w.setRuns({{a, QStringLiteral("A")}, {b, QStringLiteral("B")}});
    const auto rows = w.rows();
    QCOMPARE(int(std::count_if(rows.begin(), rows.end(), [](const auto& r) { return r.kind == TimelineRowKind::RunHeader; })), 2);
    QCOMPARE(w.rankRowCount(), 4);
    // Both runs' step 3 (warm-up 3) start at aligned 0.
    for (int i = 0; i < 2; ++i) {
        const auto* m = w.runModel(i);
        QVERIFY(m);
        QCOMPARE(m->alignStep(), 3);
        QCOMPARE(m->toAligned(m->step(3)->start), core::TimeNs(0));
    }
    QCOMPARE(w.stepRange(3)->first, core::TimeNs(0));
    // A second widget given run A's model (built once, as the loader does) uses it as is.
    const auto modelA = ui::TimelineRunModel::build(a);
    TimelineWidget other, third;
    other.setRuns({{a, QStringLiteral("A again"), modelA}});
    third.setRuns({{a, QStringLiteral("A a third time"), modelA}});
    QCOMPARE(other.runModel(0), modelA.get());
    QCOMPARE(third.runModel(0), other.runModel(0));
    const QImage img = renderWidget(w);
    maybeSave(img, QStringLiteral("timeline_compare"));
    QVERIFY(countColor(img, ui::palette::runHeaderBackground()) > 1000);
}

void TestTimeline::zoomAroundAnchor()
{
    TimelineWidget w;
    w.resize(1200, 300);
    w.setRuns({{makeRun(2), {}}});
    w.setViewRange(0, 10'000'000);
    QSignalSpy spy(&w, &TimelineWidget::viewRangeChanged);
    w.zoomBy(2.0, 0.25);
    auto [t0, t1] = w.viewRange();
    QCOMPARE(t1 - t0, core::TimeNs(5'000'000));
    QCOMPARE(t0 + (t1 - t0) / 4, core::TimeNs(2'500'000)); // the anchor's time stays put
    QCOMPARE(spy.count(), 1);
    w.zoomBy(0.5, 0.25);
    QCOMPARE(w.viewRange(), std::pair(core::TimeNs(0), core::TimeNs(10'000'000)));
    // W / S zoom in / out about the centre when the mouse is elsewhere.
    QTest::keyClick(&w, Qt::Key_W);
    std::tie(t0, t1) = w.viewRange();
    QVERIFY(t1 - t0 < 10'000'000);
    QVERIFY(std::abs((t0 + t1) / 2 - 5'000'000) <= 1);
    QTest::keyClick(&w, Qt::Key_S);
    std::tie(t0, t1) = w.viewRange();
    QVERIFY(std::abs((t1 - t0) - 10'000'000) <= 2);
}

void TestTimeline::wheelZoomAtCursor()
{
    TimelineWidget w;
    w.resize(1200, 300);
    w.setRuns({{makeRun(2), {}}});
    w.setViewRange(0, 10'680'000);
    const int x = TimelineWidget::kGutterWidth + 300;
    const core::TimeNs before = w.timeForX(x);
    sendWheel(&w, QPoint(x, 100), 120);
    auto [t0, t1] = w.viewRange();
    QVERIFY(t1 - t0 < 10'680'000);
    QVERIFY2(std::abs(w.timeForX(x) - before) < (t1 - t0) / 500, "the time under the cursor moved");
    sendWheel(&w, QPoint(x, 100), -240);
    std::tie(t0, t1) = w.viewRange();
    QVERIFY(t1 - t0 > 10'680'000);
    QVERIFY(std::abs(w.timeForX(x) - before) < (t1 - t0) / 500);
}

void TestTimeline::panKeysAndDrag()
{
    TimelineWidget w;
    w.resize(1200, 300);
    w.setRuns({{makeRun(2), {}}});
    w.setViewRange(0, 10'000'000);
    QTest::keyClick(&w, Qt::Key_D);
    QCOMPARE(w.viewRange(), std::pair(core::TimeNs(1'500'000), core::TimeNs(11'500'000)));
    QTest::keyClick(&w, Qt::Key_A);
    QTest::keyClick(&w, Qt::Key_A);
    QCOMPARE(w.viewRange(), std::pair(core::TimeNs(-1'500'000), core::TimeNs(8'500'000)));

    // Dragging right by 100 px moves the view left by 100 px worth of time.
    w.setViewRange(0, 10'680'000);
    const double npp = 10'680'000.0 / (w.width() - TimelineWidget::kGutterWidth);
    const QPoint p0(600, 100);
    sendMouse(&w, QEvent::MouseButtonPress, p0, Qt::LeftButton, Qt::LeftButton);
    sendMouse(&w, QEvent::MouseMove, p0 + QPoint(50, 0), Qt::NoButton, Qt::LeftButton);
    sendMouse(&w, QEvent::MouseMove, p0 + QPoint(100, 0), Qt::NoButton, Qt::LeftButton);
    QSignalSpy sel(&w, &TimelineWidget::selectionChanged);
    sendMouse(&w, QEvent::MouseButtonRelease, p0 + QPoint(100, 0), Qt::LeftButton, Qt::NoButton);
    const auto [t0, t1] = w.viewRange();
    QVERIFY2(std::abs(t0 + core::TimeNs(100 * npp)) < core::TimeNs(2 * npp), qPrintable(QString::number(t0)));
    QCOMPARE(t1 - t0, core::TimeNs(10'680'000));
    QCOMPARE(sel.count(), 0); // a drag is not a click
}

void TestTimeline::fitAllAndZoomToStep()
{
    const auto run = makeRun(2, 8);
    TimelineWidget w;
    w.resize(1200, 300);
    w.setRuns({{run, {}}});
    w.setViewRange(0, 1000);
    w.fitAll();
    QVERIFY(w.sizeHint().height() >= w.rows().back().top + w.rows().back().height);
    auto [t0, t1] = w.viewRange();
    for (int s = 0; s < 8; ++s) {
        const auto r = w.stepRange(s);
        QVERIFY(r);
        QVERIFY(t0 <= r->first && r->second <= t1);
    }
    w.zoomToStep(5);
    std::tie(t0, t1) = w.viewRange();
    const auto r5 = *w.stepRange(5);
    QVERIFY(t0 <= r5.first && r5.second <= t1);
    QVERIFY(t1 - t0 < (r5.second - r5.first) * 12 / 10);
    // Digit keys zoom to that step; double-click on the ruler zooms to the step under it.
    QTest::keyClick(&w, Qt::Key_2);
    const auto r2 = *w.stepRange(2);
    std::tie(t0, t1) = w.viewRange();
    QVERIFY(t0 <= r2.first && r2.second <= t1 && t1 - t0 < (r2.second - r2.first) * 12 / 10);
    w.fitAll();
    const auto r6 = *w.stepRange(6);
    const int x = int(w.xForTime((r6.first + r6.second) / 2));
    QTest::mouseDClick(&w, Qt::LeftButton, Qt::NoModifier, QPoint(x, 10));
    std::tie(t0, t1) = w.viewRange();
    QVERIFY(t0 <= r6.first && r6.second <= t1 && t1 - t0 < (r6.second - r6.first) * 12 / 10);
    // Out of range: nothing happens.
    w.zoomToStep(99);
    QCOMPARE(w.viewRange(), std::pair(t0, t1));
}

void TestTimeline::clickSelects()
{
    const auto run = makeRun(2);
    TimelineWidget w;
    w.resize(1400, 300);
    w.setRuns({{run, {}}});
    w.zoomToStep(4);
    const qint64 span = findComm(*run, 1, 4, 1);
    QVERIFY(span >= 0);
    const QPoint c = w.spanCenter(SpanRef{0, span});
    QVERIFY(c.x() > TimelineWidget::kGutterWidth);
    QSignalSpy spy(&w, &TimelineWidget::selectionChanged);
    QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, c);
    QCOMPARE(spy.count(), 1);
    const SpanRef got = qvariant_cast<SpanRef>(spy.at(0).at(0));
    QCOMPARE(got.run, 0);
    QCOMPARE(got.span, span);
    QCOMPARE(w.selection(), (SpanRef{0, span}));
    // The selection is outlined.
    const QImage img = renderWidget(w);
    maybeSave(img, QStringLiteral("timeline_selected"));
    QVERIFY(countColor(img, ui::palette::selectionOutline(), QRect(c.x() - 200, c.y() - 15, 400, 30)) > 20);
    // Escape clears it.
    QTest::keyClick(&w, Qt::Key_Escape);
    QCOMPARE(spy.count(), 2);
    QVERIFY(!w.selection().valid());
}

void TestTimeline::clickFoldedZoomsIn()
{
    const auto run = makeRun(2, 60);
    TimelineWidget w;
    w.resize(700, 300);
    w.setRuns({{run, {}}});
    // Find a folded item on rank 0's compute lane exactly as the widget queries it.
    const auto* m = w.runModel(0);
    std::vector<core::DrawItem> items;
    double fitNpp = 0;
    {
        const auto [t0, t1] = w.viewRange();
        fitNpp = double(t1 - t0) / (w.width() - TimelineWidget::kGutterWidth);
        m->lod().lane(core::LaneId{0}).query(m->toAbsolute(t0), m->toAbsolute(t1), fitNpp, 3.0, items);
    }
    // At fit-all neighbouring steps fold together: the click zooms 4x there. Zoom in once so
    // a fold is a part of a step, then the click zooms onto exactly that fold.
    auto folded = std::find_if(items.begin(), items.end(), [&](const core::DrawItem& it) {
        return it.count > 1 && (it.end - it.start) / fitNpp > 6;
    });
    QVERIFY(folded != items.end());
    {
        const int x = int(w.xForTime(m->toAligned((folded->start + folded->end) / 2)));
        const auto [f0, f1] = w.viewRange();
        QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, QPoint(x, w.rows()[1].top + 10));
        const auto [g0, g1] = w.viewRange();
        QVERIFY(g1 - g0 <= (f1 - f0) / 3);
    }
    w.zoomToStep(30);
    w.zoomBy(0.1);
    const auto [t0, t1] = w.viewRange();
    const double npp = double(t1 - t0) / (w.width() - TimelineWidget::kGutterWidth);
    items.clear();
    m->lod().lane(core::LaneId{0}).query(m->toAbsolute(t0), m->toAbsolute(t1), npp, 3.0, items);
    folded = std::find_if(items.begin(), items.end(), [&](const core::DrawItem& it) {
        return it.count > 1 && (it.end - it.start) / npp > 6 && (it.end - it.start) * 3 < t1 - t0;
    });
    QVERIFY(folded != items.end());
    const int x = int(w.xForTime(m->toAligned((folded->start + folded->end) / 2)));
    int y = -1;
    for (const auto& r : w.rows())
        if (r.kind == TimelineRowKind::Lane && r.lane == 0)
            y = r.top + 10;
    QSignalSpy sel(&w, &TimelineWidget::selectionChanged);
    QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, QPoint(x, y));
    const auto [n0, n1] = w.viewRange();
    QVERIFY(n1 - n0 < (t1 - t0) / 2);
    QVERIFY(n0 <= m->toAligned(folded->start) && m->toAligned(folded->end) <= n1);
    QCOMPARE(sel.count(), 0);
}

void TestTimeline::tooltips()
{
    const auto run = makeRun(2, 40);
    TimelineWidget w;
    w.resize(1400, 300);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.setRuns({{run, {}}});
    w.zoomToStep(4);
    const qint64 span = findComm(*run, 0, 4, 1);
    const QPoint c = w.spanCenter(SpanRef{0, span});
    QHelpEvent help(QEvent::ToolTip, c, w.mapToGlobal(c));
    QApplication::sendEvent(&w, &help);
    QVERIFY2(QToolTip::isVisible(), "no tooltip over a span");
    QVERIFY(QToolTip::text().contains(QStringLiteral("bucket: 1")));
    QVERIFY(QToolTip::text().contains(QStringLiteral("bandwidth")));
    // Zoomed out, the compute lane is folded: the tooltip says how many spans hide there.
    w.fitAll();
    int y = -1;
    for (const auto& r : w.rows())
        if (r.kind == TimelineRowKind::Lane && r.lane == 0)
            y = r.top + 10;
    const QPoint f(TimelineWidget::kGutterWidth + 400, y);
    QHelpEvent help2(QEvent::ToolTip, f, w.mapToGlobal(f));
    QApplication::sendEvent(&w, &help2);
    QVERIFY2(QToolTip::text().contains(QStringLiteral("spans too small to show, longest")), qPrintable(QToolTip::text()));
    QToolTip::hideText();
}

void TestTimeline::rankBreakdownMatchesCore()
{
    const auto run = makeRun(4, 5, 2);
    const auto all = core::stepBreakdown(*run);
    QCOMPARE(int(all.size()), 4 * 5);
    // The per-(rank, step) numbers the details panel and tooltips show are core's RunIndex's,
    // the same as core's whole-run breakdown.
    TimelineWidget w;
    w.setRuns({{run, {}}});
    const auto* m = w.runModel(0);
    for (const core::StepBreakdown& b : all) {
        const auto mine = m->index().stepBreakdown(b.rank, b.step);
        QVERIFY(mine);
        QCOMPARE(mine->compute, b.compute);
        QCOMPARE(mine->communication, b.communication);
        QCOMPARE(mine->overlapped, b.overlapped);
        QCOMPARE(mine->exposed, b.exposed);
        QCOMPARE(mine->idle, b.idle);
    }
    // The strips cover exactly the overlapped and exposed time of each rank.
    for (const auto& rl : m->ranks()) {
        core::TimeNs ov = 0, ex = 0, wantOv = 0, wantEx = 0;
        for (const auto& s : rl->overlapped)
            ov += s.duration();
        for (const auto& s : rl->exposed)
            ex += s.duration();
        for (const auto& b : all)
            if (b.rank == rl->rank) {
                wantOv += b.overlapped;
                wantEx += b.exposed;
            }
        QCOMPARE(ov, wantOv);
        QCOMPARE(ex, wantEx);
        QVERIFY(ex > 0 && ov > 0);
    }
}

void TestTimeline::gpuStreamLanes()
{
    // A rank with a CUDA stream: its lane gets a row after compute and comm, and C and M come
    // from the device spans only (core::stepBreakdown's GPU rule), offset here so that the
    // host-only and device-only answers differ.
    core::Run run = core::makeSyntheticRun([] {
        core::SyntheticParams p;
        p.worldSize = 2;
        p.steps = 5;
        p.buckets = 3;
        return p;
    }());
    const size_t hostSpans = run.spans.size();
    for (int r = 0; r < 2; ++r) {
        core::Lane lane;
        lane.id = core::LaneId{uint32_t(run.lanes.size())};
        lane.rank = r;
        lane.kind = core::LaneKind::GpuStream;
        lane.device = r;
        lane.stream = 7;
        lane.name = "stream 7";
        run.lanes.push_back(lane);
    }
    const core::StringId kernel = run.strings.intern("gemm");
    const core::StringId nccl = run.strings.intern("ncclAllReduce");
    for (size_t i = 0; i < hostSpans; ++i) {
        const core::Span s = run.spans[i];
        const core::Lane& host = run.lanes[s.lane.v];
        core::Span d = s;
        d.lane = core::LaneId{uint32_t(4 + host.rank)};
        if (s.kind == core::SpanKind::Backward || s.kind == core::SpanKind::Forward) {
            d.kind = core::SpanKind::Kernel;
            d.name = kernel;
            d.end = s.start + s.duration() / 2; // kernels shorter than the host ops
        } else if (s.kind == core::SpanKind::Comm) {
            d.kind = core::SpanKind::CommKernel;
            d.name = nccl;
            d.start += s.duration() / 3;
        } else {
            continue;
        }
        run.spans.push_back(d);
    }
    run.normalize();
    const auto shared = std::make_shared<const core::Run>(std::move(run));
    TimelineWidget w;
    w.resize(1400, 400);
    w.setRuns({{shared, {}}});
    QCOMPARE(w.rankRowCount(), 2);
    QCOMPARE(w.rowCount(), 2 * 4);
    const auto rows = w.rows();
    QCOMPARE(shared->lanes[size_t(rows[3].lane)].kind, core::LaneKind::GpuStream);
    for (const core::StepBreakdown& b : core::stepBreakdown(*shared)) {
        const auto mine = w.runModel(0)->index().stepBreakdown(b.rank, b.step);
        QVERIFY(mine);
        QCOMPARE(mine->compute, b.compute);
        QCOMPARE(mine->overlapped, b.overlapped);
        QCOMPARE(mine->exposed, b.exposed);
    }
    w.zoomToStep(3);
    const QImage img = renderWidget(w);
    maybeSave(img, QStringLiteral("timeline_gpu"));
    QVERIFY(countColor(img, ui::palette::spanKindColor(core::SpanKind::Kernel)) > 100);
}

// Issue 28: which GPU streams fold into the "other streams" row. On one rank: a busy stream (a
// kernel per forward/backward span), two streams busy under 5 % of it (one tiny kernel each), one
// at about 10 % and one tiny stream that communicates. The two quiet ones fold, the others keep
// their rows; with only one quiet stream nothing folds (one row for one lane saves nothing).
void TestTimeline::quietStreamsFoldByTheRule()
{
    for (const int quietCount : {2, 1}) {
        core::Run run = makeSyntheticRunForTest();
        const size_t hostSpans = run.spans.size();
        auto addLane = [&](int stream) {
            core::Lane lane;
            lane.id = core::LaneId{uint32_t(run.lanes.size())};
            lane.rank = 0;
            lane.kind = core::LaneKind::GpuStream;
            lane.stream = stream;
            lane.name = "stream " + std::to_string(stream);
            run.lanes.push_back(lane);
            return lane.id;
        };
        const core::LaneId busy = addLane(7), tenth = addLane(9), comm = addLane(11);
        std::vector<core::LaneId> quiet;
        for (int k = 0; k < quietCount; ++k)
            quiet.push_back(addLane(20 + k));
        const core::StringId kernel = run.strings.intern("gemm");
        core::TimeNs busyNs = 0;
        for (size_t i = 0; i < hostSpans; ++i) {
            core::Span d = run.spans[i];
            if (d.kind != core::SpanKind::Backward && d.kind != core::SpanKind::Forward)
                continue;
            d.lane = busy;
            d.kind = core::SpanKind::Kernel;
            d.name = kernel;
            busyNs += d.duration();
            run.spans.push_back(d);
        }
        const core::TimeNs t0 = run.steps.front().start;
        auto tiny = [&](core::LaneId lane, core::TimeNs at, core::TimeNs len, core::SpanKind kind) {
            core::Span d;
            d.lane = lane;
            d.start = t0 + at;
            d.end = t0 + at + len;
            d.kind = kind;
            d.name = kernel;
            d.step = run.steps.front().step;
            run.spans.push_back(d);
        };
        tiny(tenth, 1000, busyNs / 10, core::SpanKind::Kernel);
        tiny(comm, 2000, busyNs / 1000, core::SpanKind::CommKernel);
        for (size_t k = 0; k < quiet.size(); ++k)
            tiny(quiet[k], 3000 + core::TimeNs(k) * 500, busyNs / 1000, core::SpanKind::Kernel);
        run.normalize();
        const auto shared = std::make_shared<const core::Run>(std::move(run));
        TimelineWidget w;
        w.resize(1400, 600);
        w.setRuns({{shared, {}}});
        const auto& rl = *w.runModel(0)->ranks().front();
        const auto rows = w.rows();
        auto hasRow = [&](core::LaneId lane) {
            return std::any_of(rows.begin(), rows.end(), [&](const auto& r) { return r.kind == TimelineRowKind::Lane && r.lane == int(lane.v); });
        };
        const int foldRows = int(std::count_if(rows.begin(), rows.end(), [](const auto& r) { return r.kind == TimelineRowKind::QuietStreams; }));
        QVERIFY(hasRow(busy) && hasRow(tenth) && hasRow(comm));
        if (quietCount == 2) {
            QCOMPARE(rl.quietLanes, quiet);
            QCOMPARE(foldRows, 1);
            QVERIFY(!hasRow(quiet[0]) && !hasRow(quiet[1]));
            // The two tiny kernels overlap (500 ns apart): the row draws their union, not the sum.
            QVERIFY(busyNs / 1000 > 500);
            QCOMPARE(rl.quietBusyNs, busyNs / 1000 + 500);
            QCOMPARE(rl.quietUnion.size(), size_t(1));
            w.setStreamsFolded(0, 0, false);
            QVERIFY(w.rows().size() == rows.size() + 2);
        } else {
            QVERIFY(rl.quietLanes.empty());
            QCOMPARE(foldRows, 0);
            QVERIFY(hasRow(quiet[0]));
        }
    }
}

void TestTimeline::detailsPanel()
{
    const auto run = makeRun(2, 6, 1);
    const auto model = ui::TimelineRunModel::build(run);
    ui::SpanDetailsPanel panel;
    panel.resize(360, 600);
    const qint64 span = findComm(*run, 0, 4, 2);
    QVERIFY(span >= 0);
    panel.setSelection(*model, span);
    QStringList want;
    for (const auto& p : run->buckets[2].params)
        want << QString::fromStdString(p);
    QVERIFY(!want.isEmpty());
    QCOMPARE(panel.bucketParams(), want);
    QVERIFY(panel.summaryText().contains(QStringLiteral("bucket: 2")));
    // The bandwidth is core's, of the collective (report --json's bucket_steps[].ranks[]).
    const core::BucketStat* stat = nullptr;
    for (const core::BucketStat& st : model->analysis().buckets)
        if (st.rank == 0 && st.step == 4 && st.bucket == 2)
            stat = &st;
    QVERIFY(stat && std::isfinite(stat->busbwGBps));
    QVERIFY2(panel.summaryText().contains(QStringLiteral("busbw: %1 (N = 2)").arg(ui::formatBandwidth(stat->busbwGBps))),
             qPrintable(panel.summaryText()));
    QVERIFY2(panel.summaryText().contains(QStringLiteral("algbw: %1").arg(ui::formatBandwidth(stat->algbwGBps))),
             qPrintable(panel.summaryText()));
    // The bucket across ranks: core's skew record of (step 4, bucket 2).
    const core::BucketSkew* skew = model->bucketSkew(4, 2);
    QVERIFY(skew);
    QVERIFY2(panel.summaryText().contains(QStringLiteral("arrival skew: %1").arg(ui::formatDuration(double(skew->skew)))),
             qPrintable(panel.summaryText()));
    QVERIFY(panel.summaryText().contains(QStringLiteral("late rank: %1").arg(skew->lateRank)));
    const auto b = panel.stepBreakdown();
    QVERIFY(b);
    for (const auto& c : core::stepBreakdown(*run))
        if (c.rank == 0 && c.step == 4) {
            QCOMPARE(b->overlapped, c.overlapped);
            QCOMPARE(b->exposed, c.exposed);
            QCOMPARE(b->idle, c.idle);
        }
    panel.show();
    QImage img(panel.size(), QImage::Format_RGB32);
    img.fill(Qt::white);
    panel.render(&img);
    maybeSave(img, QStringLiteral("span_details"));
    // A compute span has no bucket parameters; a bad index clears.
    panel.setSelection(*model, 0);
    QVERIFY(panel.bucketParams().isEmpty());
    panel.setSelection(*model, qint64(run->spans.size()) + 5);
    QVERIFY(panel.summaryText().isEmpty());
    QVERIFY(!panel.stepBreakdown());
}

// docs/design.md: one rank has nothing to communicate (no bandwidth, no skew anywhere), and a
// size the run does not give reads "unknown", never 0 B.
void TestTimeline::detailsPanelOneRankAndUnknownSize()
{
    const auto one = makeRun(1, 6);
    const auto oneModel = ui::TimelineRunModel::build(one);
    ui::SpanDetailsPanel panel;
    const qint64 span = findComm(*one, 0, 4, 2);
    QVERIFY(span >= 0);
    QVERIFY(one->spans[size_t(span)].bytes > 0);
    panel.setSelection(*oneModel, span);
    const QString text = panel.summaryText();
    QVERIFY2(text.contains(QStringLiteral("bandwidth: not applicable (one rank)")), qPrintable(text));
    QVERIFY2(!text.contains(QStringLiteral("busbw")) && !text.contains(QStringLiteral("algbw")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("arrival skew: not applicable (one rank)")), qPrintable(text));
    // Two ranks, a collective whose size the run does not give (an imported trace without it).
    auto two = std::make_shared<core::Run>(*makeRun(2, 6));
    const qint64 c = findComm(*two, 0, 4, 2);
    QVERIFY(c >= 0);
    // Neither the span nor the bucket table gives it (core takes the table's size for a
    // collective whose spans carry none).
    two->spans[size_t(c)].bytes = 0;
    for (core::Bucket& b : two->buckets)
        if (b.index == 2)
            b.bytes = 0;
    const auto twoModel = ui::TimelineRunModel::build(std::shared_ptr<const core::Run>(two));
    panel.setSelection(*twoModel, c);
    const QString t2 = panel.summaryText();
    QVERIFY2(t2.contains(QStringLiteral("bytes: unknown")), qPrintable(t2));
    QVERIFY2(!t2.contains(QStringLiteral("busbw")) && !t2.contains(QStringLiteral("0 B")), qPrintable(t2));
}

void TestTimeline::replayBucketStates()
{
    const auto run = makeRun(2, 6, 1);
    TimelineWidget w;
    w.resize(1400, 300);
    w.setRuns({{run, {}}});
    ui::ReplayController replay;
    replay.setTimeline(&w);
    QVERIFY(replay.setStep(4));
    w.zoomToStep(4);
    ui::BucketStatusView view;
    view.setRun(run);
    view.setRank(0);
    view.follow(&replay);
    const auto* m = w.runModel(0);
    const core::Span& b0 = run->spans[size_t(findComm(*run, 0, 4, 0))];

    // In the middle of bucket 0's all-reduce it is in flight.
    replay.setCursor(m->toAligned((b0.start + b0.end) / 2));
    QCOMPARE(view.stateOf(0), std::optional(core::BucketState::InFlight));
    QCOMPARE(view.model()->currentStep(), 4);
    // At the step's start nothing is ready yet; at its end everything is done.
    replay.setCursor(m->toAligned(m->rank(0)->steps[4].start));
    QCOMPARE(view.stateOf(0), std::optional(core::BucketState::Pending));
    QCOMPARE(view.model()->statuses()[0].ready, 0);
    replay.setCursor(m->toAligned(m->rank(0)->steps[4].end));
    for (const auto& s : view.model()->statuses())
        QCOMPARE(s.state, core::BucketState::Done);
    // Bucket 0 launches the moment its last gradient is ready: 1 ns before, one is missing.
    const auto st = core::bucketStatesAt(*run, 0, 4, b0.start - 1);
    QCOMPARE(st[0].ready, st[0].total - 1);
    QCOMPARE(st[0].state, core::BucketState::Pending);

    // The cursor is drawn and what is right of it is dimmed.
    replay.setCursor(m->toAligned((b0.start + b0.end) / 2));
    const QImage img = renderWidget(w);
    maybeSave(img, QStringLiteral("timeline_replay"));
    {
        ui::ReplayBar bar(&replay);
        bar.setStepRange(0, 5);
        bar.resize(700, 34);
        view.resize(360, 160);
        maybeSave(renderWidget(bar), QStringLiteral("replay_bar"));
        maybeSave(renderWidget(view), QStringLiteral("bucket_status"));
    }
    QVERIFY(countColor(img, ui::palette::replayCursor()) > 50);
    QCOMPARE(w.replayCursor(), replay.cursor());

    // A bucket whose gradients are all ready but which waits for the previous one exists in this
    // run (one communication stream, buckets in order): the replay shows it as waiting.
    bool sawWaiting = false;
    const auto& steps = m->rank(0)->steps;
    for (core::TimeNs t = steps[4].start; t < steps[4].end && !sawWaiting; t += 20'000)
        for (const auto& s : core::bucketStatesAt(*run, 0, 4, t))
            sawWaiting = sawWaiting || s.state == core::BucketState::Waiting;
    QVERIFY(sawWaiting);
}

void TestTimeline::replayControllerAndBar()
{
    const auto run = makeRun(2);
    TimelineWidget w;
    w.setRuns({{run, {}}});
    ui::ReplayController replay;
    replay.setTimeline(&w);
    ui::ReplayBar bar(&replay);
    bar.setStepRange(0, 5);
    QVERIFY(replay.setStep(3));
    const auto [r0, r1] = replay.range();
    QCOMPARE(replay.cursor(), std::optional(r0));
    replay.setSpeed(0.001);
    QSignalSpy spy(&replay, &ui::ReplayController::cursorChanged);
    replay.advance(1'000'000'000); // one second of wall time = 1 ms of the run
    QCOMPARE(*replay.cursor(), r0 + 1'000'000);
    QCOMPARE(spy.count(), 1);
    replay.setFraction(1.0);
    QCOMPARE(*replay.cursor(), r1);
    replay.play(); // at the end: starts again from the step's start
    QVERIFY(replay.isPlaying());
    QCOMPARE(*replay.cursor(), r0);
    QTRY_VERIFY_WITH_TIMEOUT(*replay.cursor() > r0, 2000); // the timer moves it
    replay.pause();
    QVERIFY(!replay.isPlaying());
    replay.stop();
    QVERIFY(!w.replayCursor());
    QVERIFY(!replay.setStep(99));
}

void TestTimeline::bucketStatusModelTester()
{
    const auto run = makeRun(2);
    ui::BucketStatusModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(model.rowCount(), 0);
    model.setRun(run);
    model.setRank(1);
    const core::TimeNs origin = core::alignmentOrigin(*run);
    const auto& steps = run->steps;
    for (core::TimeNs t = steps.front().start; t < steps.back().end; t += 700'000)
        model.setAlignedTime(t - origin);
    QCOMPARE(model.rowCount(), int(run->buckets.size()));
    QCOMPARE(model.columnCount(), int(ui::BucketStatusModel::ColumnCount));
    QVERIFY(model.data(model.index(0, ui::BucketStatusModel::StateColumn)).toString().size() > 0);
    model.setRun(makeRun(2, 4, -1, 2));
    QCOMPARE(model.rowCount(), 2);
    model.setAlignedTime(std::nullopt);
    QCOMPARE(model.rowCount(), 0);
    model.setRun(nullptr);
    QCOMPARE(model.rowCount(), 0);
}

void TestTimeline::badInput()
{
    TimelineWidget w;
    w.resize(800, 200);
    // Nothing given, a null run, an empty run, a run without steps: no crash, sane rows.
    QImage img = renderWidget(w);
    QCOMPARE(w.rowCount(), 0);
    w.setRuns({{nullptr, QStringLiteral("missing")}});
    QCOMPARE(w.rowCount(), 0);
    img = renderWidget(w);
    w.setRuns({{std::make_shared<const core::Run>(), {}}});
    img = renderWidget(w);
    QCOMPARE(w.rankRowCount(), 0);
    auto noSteps = core::makeSyntheticRun(core::SyntheticParams{});
    noSteps.steps.clear();
    w.setRuns({{std::make_shared<const core::Run>(std::move(noSteps)), {}}});
    img = renderWidget(w);
    QCOMPARE(w.rankRowCount(), 2);
    QVERIFY(!w.stepRange(0));
    w.select(SpanRef{3, 5}); // out of range: ignored
    QVERIFY(!w.selection().valid());
    w.zoomBy(0);
    w.zoomBy(std::numeric_limits<double>::infinity());
    const auto [t0, t1] = w.viewRange();
    QVERIFY(t1 > t0);
    for (int i = 0; i < 200; ++i) // zooming in forever stops at a minimum width
        w.zoomBy(10);
    const auto [z0, z1] = w.viewRange();
    QVERIFY(z1 - z0 >= 100);
    img = renderWidget(w);
    w.panBy(std::numeric_limits<double>::quiet_NaN());
    w.panBy(1e300);
    img = renderWidget(w);
    // A lane whose id breaks the invariant is left out, not indexed past the end.
    auto broken = core::makeSyntheticRun(core::SyntheticParams{});
    broken.lanes[1].id = core::LaneId{99};
    w.setRuns({{std::make_shared<const core::Run>(std::move(broken)), {}}});
    img = renderWidget(w);
    QCOMPARE(w.rankRowCount(), 2);
    QCOMPARE(w.rowCount(), 2 + 3);
}

namespace {

// A 2-rank run written by hand: one step [0, 35 ms) (from a base of 1 s); on each rank's comm
// lane three bucket all-reduces in flight at once, as 1 MiB buckets give:
//   b0 [0, 22.8 ms), b1 [5, 25 ms), b2 [9, 30 ms)   (rank 1: each launched 0.5 ms later)
// and a compute lane with forward [0, 10 ms) and backward [10, 28 ms).
std::shared_ptr<const core::Run> overlappingRun()
{
    constexpr core::TimeNs base = 1'000'000'000, ms = 1'000'000;
    core::Run run;
    run.config.name = "overlap";
    run.config.worldSize = 2;
    run.config.warmupSteps = 0;
    const core::StringId allreduce = run.strings.intern("allreduce");
    const core::StringId fwd = run.strings.intern("forward");
    const core::StringId bwd = run.strings.intern("backward");
    for (int r = 0; r < 2; ++r) {
        core::RankInfo info;
        info.rank = r;
        run.ranks.push_back(info);
        for (auto kind : {core::LaneKind::Compute, core::LaneKind::Comm}) {
            core::Lane lane;
            lane.id = core::LaneId{uint32_t(run.lanes.size())};
            lane.rank = r;
            lane.kind = kind;
            lane.name = kind == core::LaneKind::Compute ? "compute" : "comm";
            run.lanes.push_back(lane);
        }
        const core::TimeNs late = r * ms / 2;
        auto span = [&](core::LaneId lane, core::TimeNs a, core::TimeNs b, core::SpanKind kind, core::StringId name, int bucket) {
            core::Span s;
            s.start = base + a;
            s.end = base + b;
            s.lane = lane;
            s.kind = kind;
            s.name = name;
            s.step = 0;
            s.bucket = bucket;
            s.bytes = bucket >= 0 ? (1 << 20) : 0;
            run.spans.push_back(s);
        };
        const core::LaneId compute{uint32_t(2 * r)}, comm{uint32_t(2 * r + 1)};
        span(compute, 0, 10 * ms, core::SpanKind::Forward, fwd, -1);
        span(compute, 10 * ms, 28 * ms, core::SpanKind::Backward, bwd, -1);
        span(comm, late, 22'800'000 + late, core::SpanKind::Comm, allreduce, 0);
        span(comm, 5 * ms + late, 25 * ms + late, core::SpanKind::Comm, allreduce, 1);
        span(comm, 9 * ms + late, 30 * ms + late, core::SpanKind::Comm, allreduce, 2);
        core::Step st;
        st.rank = r;
        st.step = 0;
        st.start = base;
        st.end = base + 35 * ms;
        st.samples = 32;
        run.steps.push_back(st);
    }
    for (int b = 0; b < 3; ++b) {
        core::Bucket bucket;
        bucket.index = b;
        bucket.bytes = 1 << 20;
        bucket.params = {"layer" + std::to_string(b) + ".weight"};
        run.buckets.push_back(bucket);
    }
    run.normalize();
    return std::make_shared<const core::Run>(std::move(run));
}

// Share of the pixels of row y between x0 and x1 that have colour c.
double shareOf(const QImage& img, int y, int x0, int x1, QColor c)
{
    int n = 0, hit = 0;
    for (int x = x0; x <= x1; ++x, ++n)
        hit += QColor(img.pixel(x, y)) == c ? 1 : 0;
    return n > 0 ? double(hit) / n : 0.0;
}

// The lane row of `run`'s lane `lane`.
const ui::TimelineRow* laneRow(const std::vector<ui::TimelineRow>& rows, int lane)
{
    for (const auto& r : rows)
        if (r.kind == TimelineRowKind::Lane && r.lane == lane)
            return &r;
    return nullptr;
}

} // namespace

void TestTimeline::overlappingAllReducesArePackedAndFullyVisible()
{
    const auto run = overlappingRun();
    TimelineWidget w;
    w.resize(1400, 300);
    w.setRuns({{run, QStringLiteral("overlap")}});
    // Rank 0's comm lane holds three spans in flight at once: three sub-rows, 3 × 22 px tall
    // plus the 6 px strip.
    const auto rows = w.rows();
    const ui::TimelineRow* comm = laneRow(rows, 1);
    QVERIFY(comm);
    QCOMPARE(comm->subRows, 3);
    QCOMPARE(comm->height, 3 * TimelineWidget::kLaneHeight + 6);
    QCOMPARE(laneRow(rows, 0)->subRows, 1); // forward, backward: one row
    w.setViewRange(-1'000'000, 36'000'000);
    const QImage img = renderWidget(w);
    maybeSave(img, QStringLiteral("timeline_overlapping_allreduces"));
    const auto* m = w.runModel(0);
    // Each all-reduce is painted over its full extent in its own sub-row: from its launch to
    // its completion (bucket 0's 22.8 ms, not the 5 ms until bucket 1 starts), in its colour.
    // y = 1 px inside the span's top edge, above where a label's glyphs go.
    for (int b = 0; b < 3; ++b) {
        const qint64 idx = findComm(*run, 0, 0, b);
        QVERIFY(idx >= 0);
        const core::Span& s = run->spans[size_t(idx)];
        const int x0 = int(std::ceil(w.xForTime(m->toAligned(s.start)))) + 1;
        const int x1 = int(std::floor(w.xForTime(m->toAligned(s.end)))) - 1;
        const int y = comm->top + b * TimelineWidget::kLaneHeight + 3;
        const double share = shareOf(img, y, x0, x1, ui::palette::bucketColor(b));
        QVERIFY2(share > 0.99, qPrintable(QStringLiteral("bucket %1: %2 of [%3, %4] in its colour").arg(b).arg(share).arg(x0).arg(x1)));
        // Its centre is where the widget says, in its sub-row.
        QCOMPARE(w.spanCenter(SpanRef{0, idx}).y(), comm->top + b * TimelineWidget::kLaneHeight + TimelineWidget::kLaneHeight / 2);
    }
    // At t = 20 ms all three are in flight: three different colours stacked at one x.
    const int x20 = int(w.xForTime(m->toAligned(run->steps[0].start + 20'000'000)));
    for (int b = 0; b < 3; ++b)
        QCOMPARE(QColor(img.pixel(x20, comm->top + b * TimelineWidget::kLaneHeight + 3)), ui::palette::bucketColor(b));
    // Clicking the lower part of b0's bar (where b1 would have covered it) selects b0.
    const int xb0 = int(w.xForTime(m->toAligned(run->steps[0].start + 20'000'000)));
    QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, QPoint(xb0, comm->top + 10));
    QCOMPARE(w.selection(), (SpanRef{0, findComm(*run, 0, 0, 0)}));
    QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, QPoint(xb0, comm->top + 2 * TimelineWidget::kLaneHeight + 10));
    QCOMPARE(w.selection(), (SpanRef{0, findComm(*run, 0, 0, 2)}));
}

void TestTimeline::drawListsWithoutPainting()
{
    const auto run = overlappingRun();
    TimelineWidget w;
    w.resize(1400, 300);
    w.setRuns({{run, {}}});
    w.setViewRange(-1'000'000, 36'000'000);
    // Nothing painted yet: the lists are built on demand, and tell what would be drawn.
    const ui::TimelineDrawList& list = w.drawList();
    QCOMPARE(w.lastFrameItemCount(), qint64(0));
    // 2 ranks × (2 compute + 3 comm) spans, none folded at 26 µs per pixel.
    QCOMPARE(int(list.spans.size()), 10);
    const auto* m = w.runModel(0);
    const double npp = 37'000'000.0 / (1400 - TimelineWidget::kGutterWidth);
    for (const ui::DrawSpan& d : list.spans) {
        QCOMPARE(d.count, 1u);
        const core::Span& s = run->spans[d.span];
        // Width = duration / (ns per pixel), to the pixel rounding of both edges.
        QVERIFY(std::abs(d.rect.width() - double(s.duration()) / npp) <= 2.0);
        QCOMPARE(d.rect.left(), std::floor(w.xForTime(m->toAligned(s.start))));
        QCOMPARE(d.color, ui::palette::spanColor(s));
        QCOMPARE(int(d.subRow), int(m->lod().lane(s.lane).rowOf(d.span - m->lod().laneOffset(s.lane))));
    }
    // Labels: the buckets say "b<index> · 1.0 MiB"; the lane with sub-rows says so in the gutter.
    int bucketLabels = 0;
    for (const ui::DrawText& t : list.spanLabels)
        bucketLabels += t.text.contains(QStringLiteral(" · 1.0 MiB")) ? 1 : 0;
    QCOMPARE(bucketLabels, 6);
    bool gutterSaysRows = false;
    for (const ui::DrawText& t : list.gutterLabels)
        gutterSaysRows = gutterSaysRows || t.text == QStringLiteral("comm ×3");
    QVERIFY(gutterSaysRows);
    // The lists are cached: the same view gives the same object, a new view rebuilds it.
    QCOMPARE(&w.drawList(), &list);
    // [26, 36 ms): forward and b0, b1 have ended; backward (to 28 ms) and b2 (to 30 ms) remain.
    w.setViewRange(26'000'000, 36'000'000);
    QCOMPARE(int(w.drawList().spans.size()), 4);
    // Painting paints exactly these lists.
    renderWidget(w);
    QCOMPARE(w.lastFrameItemCount(), qint64(w.drawList().itemCount()));
}

void TestTimeline::bucketLinkedAcrossRanks()
{
    // 4 ranks, rank 2 launches every bucket 1.5 ms late.
    const auto run = makeRun(4, 6, 2);
    TimelineWidget w;
    w.resize(1400, 600);
    w.setRuns({{run, {}}});
    w.zoomToStep(4);
    const qint64 span = findComm(*run, 0, 4, 1);
    w.select(SpanRef{0, span});
    const ui::LinkedBucket& linked = w.linkedBucket();
    QVERIFY(linked.valid());
    QCOMPARE(linked.step, 4);
    QCOMPARE(linked.bucket, 1);
    QCOMPARE(int(linked.spans.size()), 4); // bucket 1 of step 4 on every rank
    for (size_t k = 0; k < linked.spans.size(); ++k) {
        QCOMPARE(linked.spans[k], (SpanRef{0, findComm(*run, linked.ranks[k], 4, 1)}));
    }
    // Arrival skew, late rank and wait caused are core's.
    const core::BucketSkew* skew = w.runModel(0)->bucketSkew(4, 1);
    QVERIFY(skew);
    QCOMPARE(linked.lateRank, skew->lateRank);
    QCOMPARE(linked.lateRank, 2);
    QCOMPARE(linked.skew, skew->skew);
    QCOMPARE(linked.waitCaused, skew->waitCaused);
    // Its gradient-ready instants on every rank: the bucket's parameters, once per rank.
    QCOMPARE(int(linked.readyInstants.size()), 4 * int(run->buckets[1].params.size()));
    // Drawn: an outline on each rank, an arrow from the late rank's launch to each other rank
    // (3), an arrow from the last ready instant to the launch per rank where they are apart,
    // and the skew written beside the late rank.
    const ui::TimelineOverlay o = w.overlay();
    int linkedOutlines = 0;
    for (const auto& out : o.outlines)
        linkedOutlines += out.color == ui::palette::linkedOutline() ? 1 : 0;
    QVERIFY(linkedOutlines >= 4);
    QVERIFY(o.arrows.size() >= 3);
    bool skewLabel = false;
    for (const auto& t : o.labels)
        skewLabel = skewLabel || t.text == QStringLiteral("skew %1 · late rank 2").arg(ui::formatDuration(double(skew->skew)));
    QVERIFY(skewLabel);
    // The arrows from the late rank start at its launch.
    const auto* m = w.runModel(0);
    const double lateX = w.xForTime(m->toAligned(run->spans[size_t(findComm(*run, 2, 4, 1))].start));
    int fromLate = 0;
    for (const auto& a : o.arrows)
        fromLate += std::abs(a.from.x() - lateX) < 1.0 ? 1 : 0;
    QCOMPARE(fromLate, 3);
    const QImage img = renderWidget(w);
    maybeSave(img, QStringLiteral("timeline_linked_bucket"));
    QVERIFY(countColor(img, ui::palette::flowArrow()) > 50);
    // A compute span has no bucket: nothing linked.
    w.select(SpanRef{0, 0});
    QVERIFY(!w.linkedBucket().valid());
    // selectBucket finds a rank's all-reduce of (step, bucket).
    QVERIFY(w.selectBucket(0, 3, 2, 1));
    QCOMPARE(w.selection(), (SpanRef{0, findComm(*run, 1, 3, 2)}));
    QVERIFY(!w.selectBucket(0, 99, 2));
}

void TestTimeline::measureRangeWithShiftDrag()
{
    const auto run = makeRun(2, 6);
    TimelineWidget w;
    w.resize(1200, 300);
    w.setRuns({{run, {}}});
    w.setViewRange(0, 10'680'000);
    const double npp = 10'680'000.0 / (1200 - TimelineWidget::kGutterWidth);
    QSignalSpy spy(&w, &TimelineWidget::measureRangeChanged);
    const QPoint a(TimelineWidget::kGutterWidth + 100, 80), b(TimelineWidget::kGutterWidth + 600, 80);
    QMouseEvent press(QEvent::MouseButtonPress, QPointF(a), QPointF(w.mapToGlobal(a)), Qt::LeftButton, Qt::LeftButton, Qt::ShiftModifier);
    QApplication::sendEvent(&w, &press);
    for (int x = a.x() + 10; x < b.x() + 50; x += 50) {
        QMouseEvent move(QEvent::MouseMove, QPointF(x, 80), QPointF(w.mapToGlobal(QPoint(x, 80))), Qt::NoButton, Qt::LeftButton,
                         Qt::ShiftModifier);
        QApplication::sendEvent(&w, &move);
    }
    QMouseEvent release(QEvent::MouseButtonRelease, QPointF(b), QPointF(w.mapToGlobal(b)), Qt::LeftButton, Qt::NoButton, Qt::ShiftModifier);
    QApplication::sendEvent(&w, &release);
    const auto range = w.measureRange();
    QVERIFY(range);
    // 500 px at the view's ns per pixel; the view itself did not move.
    QVERIFY(std::abs(double(range->second - range->first) - 500 * npp) <= 2 * npp);
    QCOMPARE(w.viewRange(), std::pair(core::TimeNs(0), core::TimeNs(10'680'000)));
    QVERIFY(spy.count() >= 1);
    // Its length is written over it.
    bool label = false;
    for (const auto& t : w.overlay().labels)
        label = label || t.text == ui::formatDuration(double(range->second - range->first));
    QVERIFY(label);
    const QImage img = renderWidget(w);
    maybeSave(img, QStringLiteral("timeline_measure"));
    // The range's breakdown on each rank (core::RunIndex): the five parts add up to its length.
    const auto model = ui::TimelineRunModel::build(run);
    ui::SpanDetailsPanel panel;
    panel.setRange(*model, model->toAbsolute(range->first), model->toAbsolute(range->second));
    QCOMPARE(int(panel.rangeBreakdown().size()), 2);
    for (const core::StepBreakdown& p : panel.rangeBreakdown()) {
        QCOMPARE(p.computeOnly + p.overlapped + p.exposed + p.memoryOnly + p.idle, range->second - range->first);
        QVERIFY(p.computeOnly > 0);
    }
    QVERIFY(panel.summaryText().contains(ui::formatDuration(double(range->second - range->first))));
    // Esc clears it.
    QTest::keyClick(&w, Qt::Key_Escape);
    QVERIFY(!w.measureRange());
}

void TestTimeline::searchSpanNames()
{
    const auto run = makeRun(2, 6);
    TimelineWidget w;
    w.resize(1400, 300);
    w.setRuns({{run, {}}});
    // Every span whose name contains "forward" (case-insensitive), counted independently.
    qint64 want = 0;
    for (const core::Span& s : run->spans)
        want += QString::fromStdString(run->strings.text(s.name)).contains("FORWARD", Qt::CaseInsensitive) ? 1 : 0;
    QVERIFY(want > 0);
    QCOMPARE(w.setSearchText(QStringLiteral("FORWARD")), int(want));
    const auto& matches = w.searchMatches();
    // In time order.
    for (size_t i = 1; i < matches.size(); ++i)
        QVERIFY(run->spans[size_t(matches[i - 1].span)].start <= run->spans[size_t(matches[i].span)].start);
    w.showSearchMatch(int(matches.size()) - 1);
    QCOMPARE(w.selection(), matches.back());
    const auto [t0, t1] = w.viewRange();
    const core::Span& last = run->spans[size_t(matches.back().span)];
    const auto* m = w.runModel(0);
    QVERIFY(t0 <= m->toAligned(last.start) && m->toAligned(last.end) <= t1);
    // On screen the matches are outlined.
    w.zoomToStep(2);
    int outlined = 0;
    for (const auto& o : w.overlay().outlines)
        outlined += o.color == ui::palette::searchMatch() ? 1 : 0;
    QVERIFY(outlined >= 2); // step 2's forward on each rank
    QCOMPARE(w.setSearchText(QStringLiteral("no such span")), 0);
    QCOMPARE(w.setSearchText(QString()), 0);
}

void TestTimeline::arrowKeysMoveBetweenSpansAndLanes()
{
    const auto run = makeRun(2, 6);
    TimelineWidget w;
    w.resize(1400, 300);
    w.setRuns({{run, {}}});
    w.zoomToStep(3);
    const qint64 start = findComm(*run, 0, 3, 1);
    w.select(SpanRef{0, start});
    QTest::keyClick(&w, Qt::Key_Right);
    QCOMPARE(w.selection(), (SpanRef{0, start + 1})); // the next span of the lane
    QCOMPARE(run->spans[size_t(start + 1)].lane, run->spans[size_t(start)].lane);
    QTest::keyClick(&w, Qt::Key_Left);
    QTest::keyClick(&w, Qt::Key_Left);
    QCOMPARE(w.selection(), (SpanRef{0, start - 1}));
    // Down: rank 1's compute lane (the next lane row), the span nearest in time.
    QTest::keyClick(&w, Qt::Key_Right);
    QTest::keyClick(&w, Qt::Key_Down);
    const core::Span& sel = run->spans[size_t(w.selection().span)];
    QCOMPARE(run->lanes[sel.lane.v].rank, 1);
    QCOMPARE(run->lanes[sel.lane.v].kind, core::LaneKind::Compute);
    const core::TimeNs t = run->spans[size_t(start)].start;
    const auto [a, b] = run->laneSpanRange(sel.lane);
    for (size_t i = a; i < b; ++i) // no span of that lane starts nearer in time
        QVERIFY(std::abs(run->spans[i].start - t) >= std::abs(sel.start - t));
    QTest::keyClick(&w, Qt::Key_Up);
    QCOMPARE(run->lanes[run->spans[size_t(w.selection().span)].lane.v].rank, 0);
    QCOMPARE(run->lanes[run->spans[size_t(w.selection().span)].lane.v].kind, core::LaneKind::Comm);
}

void TestTimeline::digitKeysTypeStepNumbers()
{
    const auto run = makeRun(2, 20);
    TimelineWidget w;
    w.resize(1200, 300);
    w.setRuns({{run, {}}});
    QSignalSpy spy(&w, &TimelineWidget::stepRequested);
    // Digits typed at the times their key events carry (ms), as a platform stamps them.
    const auto typeAt = [&](Qt::Key key, quint64 ms) {
        QKeyEvent press(QEvent::KeyPress, key, Qt::NoModifier, QString(QChar(u'0' + (key - Qt::Key_0))));
        press.setTimestamp(ms);
        QApplication::sendEvent(&w, &press);
    };
    typeAt(Qt::Key_1, 10'000);
    typeAt(Qt::Key_2, 10'900);
    QCOMPARE(spy.count(), 2);
    QCOMPARE(spy.at(1).at(0).toInt(), 12); // within a second: one number
    const auto r12 = *w.stepRange(12);
    const auto [t0, t1] = w.viewRange();
    QVERIFY(t0 <= r12.first && r12.second <= t1 && t1 - t0 < (r12.second - r12.first) * 12 / 10);
    typeAt(Qt::Key_7, 12'000);
    QCOMPARE(spy.last().at(0).toInt(), 7); // a pause of 1.1 s starts a new number
    typeAt(Qt::Key_1, 12'500);
    QCOMPARE(spy.last().at(0).toInt(), 71); // and the next digit within a second joins it
    // Key events without a time of their own (QTest's) are timed as they are handled.
    QTest::keyClick(&w, Qt::Key_1);
    QTest::keyClick(&w, Qt::Key_3);
    QCOMPARE(spy.last().at(0).toInt(), 13);
}

void TestTimeline::collapseOrderAndScrollManyRanks()
{
    // 64 ranks from core's generator, rank 40 the straggler.
    core::SyntheticParams p;
    p.worldSize = 64;
    p.steps = 6;
    p.buckets = 3;
    p.stragglerRank = 40;
    p.stragglerDelayNs = 2'000'000;
    const auto run = std::make_shared<const core::Run>(core::makeSyntheticRun(p));
    TimelineWidget w;
    w.resize(1200, 500);
    w.setRuns({{run, {}}});
    QCOMPARE(w.rankRowCount(), 64);
    // Too tall for the widget: a scroll bar, and the rows below the fold are reachable.
    QVERIFY(!w.verticalScrollBar()->isHidden());
    QVERIFY(w.verticalScrollBar()->maximum() > 0);
    sendWheel(&w, QPoint(600, 200), -240); // plain wheel zooms; Shift+wheel scrolls
    QCOMPARE(w.scrollOffset(), 0);
    QWheelEvent ev(QPointF(600, 200), QPointF(w.mapToGlobal(QPoint(600, 200))), QPoint(), QPoint(0, -240), Qt::NoButton,
                   Qt::ShiftModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(&w, &ev);
    QCOMPARE(w.scrollOffset(), 120);
    // Collapse all: one header row per rank, short enough to fit 500 px? 64 × 20 = 1280: no, still scrolls.
    QTest::keyClick(&w, Qt::Key_C);
    QCOMPARE(w.rowCount(), 64);
    QTest::keyClick(&w, Qt::Key_E);
    QCOMPARE(w.rowCount(), 64 * 3);
    // A click on a rank's name collapses it; another expands it.
    const auto rows = w.rows();
    const ui::TimelineRow& r3 = *std::find_if(rows.begin(), rows.end(), [](const auto& r) {
        return r.kind == TimelineRowKind::RankHeader && r.rank == 0;
    });
    w.setScrollOffset(0);
    QTest::mouseClick(&w, Qt::LeftButton, Qt::NoModifier, QPoint(30, r3.top + 5));
    QVERIFY(w.isCollapsed(0, 0));
    QCOMPARE(w.rowCount(), 64 * 3 - 2);
    // Ordered by the wait each rank caused (core's per-rank means): the straggler comes first.
    w.setAllCollapsed(false);
    w.setRankOrder(ui::RankOrder::ByWaitCaused);
    const auto ordered = w.rows();
    QCOMPARE(ordered.front().kind, TimelineRowKind::RankHeader);
    QCOMPARE(ordered.front().rank, 40);
    w.setRankOrder(ui::RankOrder::ByRank);
    QCOMPARE(w.rows().front().rank, 0);
    // revealRank scrolls rank 50 into view.
    w.revealRank(0, 50);
    for (const auto& r : w.rows())
        if (r.kind == TimelineRowKind::RankHeader && r.rank == 50)
            QVERIFY(r.top - w.scrollOffset() >= TimelineWidget::kRulerHeight && r.top - w.scrollOffset() < w.height());
    const QImage img = renderWidget(w);
    maybeSave(img, QStringLiteral("timeline_64_ranks"));
}

void TestTimeline::heatmapKeepsMaximaAndJumps()
{
    // 256 ranks in a 200-pixel-tall plot: several ranks per pixel row. Rank 200 straggles.
    core::SyntheticParams p;
    p.worldSize = 256;
    p.steps = 8;
    p.buckets = 2;
    p.stragglerRank = 200;
    p.stragglerDelayNs = 3'000'000;
    const auto run = std::make_shared<const core::Run>(core::makeSyntheticRun(p));
    const auto model = ui::TimelineRunModel::build(run);
    const ui::RankStepMatrix& mx = model->rankStepMatrix();
    QCOMPARE(int(mx.ranks.size()), 256);
    QCOMPARE(int(mx.steps.size()), 8);
    // The matrix holds core's numbers.
    for (const core::RankStepWait& wt : model->analysis().stragglers.perRankStep)
        QCOMPARE(mx.value(ui::RankStepMatrix::WaitCaused, size_t(wt.rank), size_t(wt.step)), float(double(wt.waitCaused) / 1e6));
    ui::RankHeatmap h;
    h.resize(700, 200 + 30 + 26);
    h.setModel(model);
    h.setMetric(ui::RankStepMatrix::WaitCaused);
    QVERIFY(h.plotRect().height() < 256);
    // Every rank lands in some pixel row, and a row shows the largest value of its ranks: the
    // straggler's wait is on screen, not hidden under a neighbour's zero.
    const QRect plot = h.plotRect();
    const int x = plot.left() + int((5.5 / 8.0) * plot.width());
    int y = -1;
    for (int py = plot.top(); py <= plot.bottom() && y < 0; ++py)
        if (h.cellAt(QPoint(x, py)).rank == 200)
            y = py;
    QVERIFY(y >= 0);
    const ui::RankHeatmap::Cell c = h.cellAt(QPoint(x, y));
    QCOMPARE(c.rank, 200);
    QCOMPARE(c.step, 5);
    QVERIFY(c.ranksCovered > 1);
    QCOMPARE(c.value, mx.value(ui::RankStepMatrix::WaitCaused, 200, 5));
    const QImage img = renderWidget(h);
    maybeSave(img, QStringLiteral("heatmap_256_ranks"));
    QCOMPARE(img.pixel(x, y), h.colorFor(c.value).rgb());
    // The straggler's row is the darkest: its colour is the far end of the scale.
    QVERIFY(QColor(img.pixel(x, y)).lightness() < QColor(img.pixel(x, plot.top() + 2)).lightness());
    // Clicking asks for that rank and step.
    QSignalSpy spy(&h, &ui::RankHeatmap::cellClicked);
    QTest::mouseClick(&h, Qt::LeftButton, Qt::NoModifier, QPoint(x, y));
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(0).toInt(), 200);
    QCOMPARE(spy.at(0).at(1).toInt(), 5);
    // One rank: wait and exposed are not applicable (NaN), step time is there.
    const auto one = ui::TimelineRunModel::build(makeRun(1, 4));
    QVERIFY(std::isnan(one->rankStepMatrix().value(ui::RankStepMatrix::WaitCaused, 0, 2)));
    QVERIFY(one->rankStepMatrix().value(ui::RankStepMatrix::StepTime, 0, 2) > 0);
}

// The picture against cellAt, pixel by pixel: cellAt finds the largest value of the cells under
// a point by its own loop over them, so every pixel inside the plot's frame must have the colour
// of that value. The shapes cover each way the picture is built and drawn: fewer steps than
// pixel columns (strips several pixels wide, each stretched from one image column), more steps
// than columns (the image is the picture), as many steps as about two thirds of the columns
// (strips of one and two pixels, uneven), and more pixel rows than ranks (rows repeated) as
// well as fewer (several ranks per row).
void TestTimeline::heatmapEveryPixelIsItsCellsMaximum()
{
    const auto fewRanks = ui::TimelineRunModel::build(makeRun(40, 9, 17));
    const auto manyRanks = ui::TimelineRunModel::build(makeRun(150, 9, 70, 2));
    const auto manySteps = ui::TimelineRunModel::build(makeRun(12, 450, 5, 2));
    // (The widget's minimum size makes the plot at least 104 pixels tall.)
    for (const auto& [model, plotSize] : {std::pair{fewRanks, QSize(700, 300)}, std::pair{manyRanks, QSize(500, 104)},
                                          std::pair{manySteps, QSize(300, 110)}, std::pair{manySteps, QSize(680, 120)}}) {
        ui::RankHeatmap h;
        h.resize(plotSize.width() + 64 + 10, plotSize.height() + 30 + 26); // the plot's margins
        h.setModel(model);
        QCOMPARE(h.plotRect().size(), plotSize);
        for (int m = 0; m < ui::RankStepMatrix::MetricCount; ++m) {
            h.setMetric(ui::RankStepMatrix::Metric(m));
            const QImage img = renderWidget(h);
            const QRect inside = h.plotRect().adjusted(1, 1, -1, -1); // the frame is drawn over the edge
            int wrong = 0;
            for (int y = inside.top(); y <= inside.bottom(); ++y)
                for (int x = inside.left(); x <= inside.right(); ++x)
                    wrong += img.pixel(x, y) != h.colorAt(QPoint(x, y)).rgb();
            QCOMPARE(wrong, 0);
            // Nine steps over 700 pixels: the first columns are step 0, a warm-up step (off the
            // colour scale), drawn in grey, never in the ramp's colour for its value.
            const QPoint first(inside.left() + 1, inside.top() + 1);
            const float v = h.cellAt(first).value;
            if (model == fewRanks && std::isfinite(v)) {
                QVERIFY(model->run().config.warmupSteps > 0);
                const QColor c(img.pixel(first));
                QVERIFY(c.red() == c.green() && c.green() == c.blue());
                QVERIFY(c.rgb() != h.colorFor(v).rgb());
            }
        }
    }
}

namespace {
// Colour as seen with a colour vision deficiency: Machado, Oliveira and Fernandes (2009),
// severity 1, applied in linear RGB; then CIELAB (D65). Written out independently of the
// palette so that the palette's claim is checked, not restated.
std::array<double, 3> labSeen(QColor c, int vision)
{
    static const double kMatrix[3][9] = {
        {1, 0, 0, 0, 1, 0, 0, 0, 1},                                                                 // normal
        {0.152286, 1.052583, -0.204868, 0.114503, 0.786281, 0.099216, -0.003882, -0.048116, 1.051998}, // protanopia
        {0.367322, 0.860646, -0.227968, 0.280085, 0.672501, 0.047413, -0.011820, 0.042940, 0.968881},  // deuteranopia
    };
    auto lin = [](double v) { return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4); };
    const double r = lin(c.redF()), g = lin(c.greenF()), b = lin(c.blueF());
    const double* m = kMatrix[vision];
    double rgb[3] = {m[0] * r + m[1] * g + m[2] * b, m[3] * r + m[4] * g + m[5] * b, m[6] * r + m[7] * g + m[8] * b};
    for (double& v : rgb)
        v = std::clamp(v, 0.0, 1.0);
    const double X = (0.4124 * rgb[0] + 0.3576 * rgb[1] + 0.1805 * rgb[2]) / 0.95047;
    const double Y = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2];
    const double Z = (0.0193 * rgb[0] + 0.1192 * rgb[1] + 0.9505 * rgb[2]) / 1.08883;
    auto f = [](double t) { return t > 0.008856 ? std::cbrt(t) : 7.787 * t + 16.0 / 116.0; };
    return {116 * f(Y) - 16, 500 * (f(X) - f(Y)), 200 * (f(Y) - f(Z))};
}
double minDistance(QColor a, QColor b)
{
    double d = 1e9;
    for (int v = 0; v < 3; ++v) {
        const auto x = labSeen(a, v), y = labSeen(b, v);
        d = std::min(d, std::hypot(x[0] - y[0], x[1] - y[1], x[2] - y[2]));
    }
    return d;
}
} // namespace

void TestTimeline::paletteSafeForColourBlindness()
{
    // The claim of timeline_palette.h: buckets differ from each other, and from the signal
    // colours, the folded grey and the background, by >= 25 CIELAB units for normal vision,
    // protanopia and deuteranopia. 25 is about ten just-noticeable differences: told apart at a
    // glance, not by study.
    constexpr double kMin = 25.0;
    const QColor signalColors[] = {ui::palette::overlappedColor(), ui::palette::exposedColor(), ui::palette::stragglerColor(),
                              ui::palette::foldedColor(), ui::palette::background()};
    for (int a = 0; a < ui::palette::kBucketColorCount; ++a) {
        for (int b = a + 1; b < ui::palette::kBucketColorCount; ++b)
            QVERIFY2(minDistance(ui::palette::bucketColor(a), ui::palette::bucketColor(b)) >= kMin,
                     qPrintable(QStringLiteral("buckets %1 and %2").arg(a).arg(b)));
        for (const QColor& s : signalColors)
            QVERIFY2(minDistance(ui::palette::bucketColor(a), s) >= kMin,
                     qPrintable(QStringLiteral("bucket %1 vs %2").arg(a).arg(s.name())));
    }
    // Past six buckets the pattern tells them apart: 24 buckets, each its own colour and pattern.
    for (int a = 0; a < ui::palette::kBucketStyleCount; ++a)
        for (int b = a + 1; b < ui::palette::kBucketStyleCount; ++b)
            QVERIFY2(ui::palette::bucketColor(a) != ui::palette::bucketColor(b)
                         || ui::palette::bucketPattern(a) != ui::palette::bucketPattern(b),
                     qPrintable(QStringLiteral("buckets %1 and %2 look the same").arg(a).arg(b)));
    QCOMPARE(ui::palette::bucketPattern(0), Qt::NoBrush);
    QVERIFY(ui::palette::bucketPattern(6) != Qt::NoBrush);
    // The three signal colours differ from each other as much.
    QVERIFY(minDistance(ui::palette::overlappedColor(), ui::palette::exposedColor()) >= kMin);
    QVERIFY(minDistance(ui::palette::overlappedColor(), ui::palette::stragglerColor()) >= kMin);
    QVERIFY(minDistance(ui::palette::exposedColor(), ui::palette::stragglerColor()) >= kMin);
    // Folded groups are neutral (grey): one colour for every fold.
    const QColor f = ui::palette::foldedColor();
    QVERIFY(std::abs(f.red() - f.blue()) < 16 && std::abs(f.green() - f.blue()) < 16);
}

void TestTimeline::hugeNamesStayCheap()
{
    // A 50 MB event name and a 100 000-character lane name: drawing, tooltips and the details
    // panel cut them before laying text out, so a frame stays fast and the widget's width fixed.
    // Checked by what is laid out (no text past the cut), not by a wall-clock bound: frame times
    // are the benchmarks' (docs/design.md "Performance targets").
    core::Run run = core::makeSyntheticRun(core::SyntheticParams{});
    const std::string huge(50'000'000, 'e');
    const core::StringId name = run.strings.intern(huge);
    for (core::Span& s : run.spans)
        if (s.kind == core::SpanKind::Forward)
            s.name = name;
    run.lanes[0].name = std::string(100'000, 'L');
    run.config.name = std::string(100'000, 'R');
    const auto shared = std::make_shared<const core::Run>(std::move(run));
    TimelineWidget w;
    w.resize(1200, 300);
    w.setRuns({{shared, QString(100'000, QChar('R'))}});
    w.zoomToStep(3);
    const QImage img = renderWidget(w);
    QCOMPARE(w.width(), 1200);
    QVERIFY(!w.drawList().spanLabels.empty());
    QVERIFY(!w.drawList().gutterLabels.empty());
    for (const ui::DrawText& t : w.drawList().spanLabels)
        QVERIFY(t.text.size() <= ui::kMaxDisplayChars + 1);
    for (const ui::DrawText& t : w.drawList().gutterLabels)
        QVERIFY(t.text.size() <= ui::kMaxDisplayChars + 1);
    // The details panel of such a span.
    qint64 fwd = -1;
    for (size_t i = 0; i < shared->spans.size() && fwd < 0; ++i)
        if (shared->spans[i].kind == core::SpanKind::Forward)
            fwd = qint64(i);
    ui::SpanDetailsPanel panel;
    panel.resize(360, 500);
    panel.setSelection(*w.runModel(0), fwd);
    panel.show();
    QApplication::processEvents();
    QVERIFY(panel.width() < 1000);
    // The panel shows the span's name and its lane's, both cut: neither whole name is laid out.
    QString shown = panel.summaryText();
    for (const QLabel* label : panel.findChildren<QLabel*>())
        shown += u'\n' + label->text();
    qsizetype longest = 0;
    for (auto it = QRegularExpression(QStringLiteral("e{20,}")).globalMatch(shown); it.hasNext();)
        longest = std::max(longest, it.next().capturedLength());
    QVERIFY2(longest >= 20, qPrintable(shown.left(400)));                             // the name is shown
    QVERIFY2(longest <= ui::kMaxDisplayChars, qPrintable(QString::number(longest))); // cut
    QVERIFY2(!shown.contains(QString(1000, QChar('L'))), "the lane's name is cut too");
    QVERIFY2(shown.size() < 20'000, qPrintable(QString::number(shown.size())));
    // Search finds the span by its (whole) name.
    QVERIFY(w.setSearchText(QStringLiteral("eee")) > 0);
}

void TestTimeline::replayPlaysOnAFreshRunAndStopClears()
{
    const auto run = makeRun(2, 8);
    TimelineWidget w;
    w.resize(1200, 300);
    w.setRuns({{run, {}}});
    ui::ReplayController replay;
    replay.setTimeline(&w);
    // Play with no step chosen: the first steady step (the one runs align on), not nothing.
    replay.play();
    QVERIFY(replay.isPlaying());
    QCOMPARE(replay.step(), w.runModel(0)->alignStep());
    QVERIFY(w.replayCursor());
    bool dimmed = false;
    for (const auto& f : w.overlay().fills)
        dimmed = dimmed || f.color == ui::palette::replayDim();
    QVERIFY(dimmed);
    // Stop removes the cursor and the dimming with it.
    QSignalSpy cleared(&replay, &ui::ReplayController::cursorCleared);
    replay.stop();
    QVERIFY(!replay.isPlaying());
    QVERIFY(!w.replayCursor());
    QCOMPARE(cleared.count(), 1);
    for (const auto& f : w.overlay().fills)
        QVERIFY(f.color != ui::palette::replayDim());
    // The bucket table without a cursor shows the chosen step as it ended.
    ui::BucketStatusView view;
    view.setRun(run);
    view.follow(&replay);
    view.setStep(5);
    QCOMPARE(view.model()->currentStep(), 5);
    QCOMPARE(view.model()->rowCount(), int(run->buckets.size()));
    for (const auto& s : view.model()->statuses())
        QCOMPARE(s.state, core::BucketState::Done);
    // The bar's Play button on a fresh controller plays the step in the bar's box.
    ui::ReplayController fresh;
    fresh.setTimeline(&w);
    ui::ReplayBar bar(&fresh);
    bar.setStepRange(0, 7);
    bar.findChild<QSpinBox*>()->setValue(6);
    QToolButton* play = nullptr;
    for (auto* b : bar.findChildren<QToolButton*>())
        if (b->text() == QStringLiteral("Play"))
            play = b;
    QVERIFY(play);
    play->click();
    QVERIFY(fresh.isPlaying());
    QCOMPARE(fresh.step(), 6);
    fresh.stop();
}

QTEST_MAIN(TestTimeline)
#include "test_timeline.moc"
