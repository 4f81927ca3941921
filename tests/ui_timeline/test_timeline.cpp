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
#include <QApplication>
#include <QImage>
#include <QSignalSpy>
#include <QTest>
#include <QToolTip>
#include <QWheelEvent>

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
    void detailsPanel();
    void replayBucketStates();
    void replayControllerAndBar();
    void bucketStatusModelTester();
    void badInput();
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
    QVERIFY(panel.summaryText().contains(QStringLiteral("busbw")));
    QVERIFY(panel.summaryText().contains(QStringLiteral("bucket: 2")));
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

QTEST_MAIN(TestTimeline)
#include "test_timeline.moc"
