// Timeline frame time on a 10-million-span run (docs/design.md target: <= 16 ms per pan/zoom frame),
// and on a 1024-rank run from core's generator (issue 11: the timeline and the rank × step
// heatmap stay within a frame).
// A frame is what the user waits for after a wheel notch or a drag: the draw lists rebuilt from
// the level of detail for the new window, then painted. Each measured render follows a view
// change, so the widget's frame cache never answers for free. The per-run model (level of
// detail, sub-rows, strips, heatmap) is built once, in the loader's worker thread: its time is
// printed as timeline_model_build_s and is not on the GUI thread; timeline_set_runs_s is what
// the GUI thread spends taking the built model.
//
// Run with QT_QPA_PLATFORM=offscreen. LOCKSTEP_BENCH_SPANS overrides the span count.
#include "rank_heatmap.h"
#include "timeline_model.h"
#include "timeline_widget.h"

#include "lockstep/core/synthetic.h"

#include <QElapsedTimer>
#include <QImage>
#include <QScrollBar>
#include <QTest>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <vector>

using namespace lockstep;

class BenchTimeline : public QObject {
    Q_OBJECT
private slots:
    void frames();
    void manyRanks();
};

namespace {
double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}
double p95(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[std::min(v.size() - 1, v.size() * 95 / 100)];
}
} // namespace

void BenchTimeline::frames()
{
    const int64_t spans = qEnvironmentVariableIsSet("LOCKSTEP_BENCH_SPANS")
        ? qEnvironmentVariable("LOCKSTEP_BENCH_SPANS").toLongLong() : 10'000'000;
    QElapsedTimer clock;
    clock.start();
    auto run = std::make_shared<const core::Run>(core::makeSyntheticRunWithSpans(spans, 2));
    const double makeS = clock.nsecsElapsed() / 1e9;

    clock.restart();
    const auto model = ui::TimelineRunModel::build(run); // the loader's worker thread does this
    const double modelS = clock.nsecsElapsed() / 1e9;
    ui::TimelineWidget w;
    w.resize(1600, 900);
    clock.restart();
    w.setRuns({{run, QStringLiteral("10M"), model}});
    const double setRunsS = clock.nsecsElapsed() / 1e9;

    QImage img(w.size(), QImage::Format_ARGB32_Premultiplied);
    // Wall time is what the user sees; on a shared, loaded machine it also counts the time the
    // scheduler gave to other processes, so CPU time of this thread is printed beside it.
    std::vector<double> cpu;
    auto frame = [&] {
        QElapsedTimer t;
        timespec c0{}, c1{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        t.start();
        w.render(&img);
        const double ms = t.nsecsElapsed() / 1e6;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        cpu.push_back((c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) / 1e6);
        return ms;
    };

    // Fit all: nudge the view between renders so every render rebuilds its draw lists.
    std::vector<double> fit;
    qint64 fitItems = 0;
    for (int i = 0; i < 9; ++i) {
        w.fitAll();
        w.panBy(i % 2 ? 1e-4 : -1e-4);
        fit.push_back(frame());
        fitItems = w.lastFrameItemCount();
    }
    // Zoomed in on one step in the middle of the run.
    std::vector<double> zoomed;
    const int midStep = int(run->steps.back().step / 2);
    qint64 zoomItems = 0;
    for (int i = 0; i < 9; ++i) {
        w.zoomToStep(midStep + i);
        zoomed.push_back(frame());
        zoomItems = w.lastFrameItemCount();
    }
    // A session of navigation: from fit-all zoom in at the centre down to a step, pan both
    // ways, zoom back out; one render per input event.
    std::vector<double> nav;
    cpu.clear();
    w.fitAll();
    for (int i = 0; i < 30; ++i) {
        w.zoomBy(1.4, 0.5);
        nav.push_back(frame());
    }
    for (int i = 0; i < 20; ++i) {
        w.panBy(i < 10 ? 0.1 : -0.1);
        nav.push_back(frame());
    }
    for (int i = 0; i < 30; ++i) {
        w.zoomBy(1 / 1.4, 0.3);
        nav.push_back(frame());
        w.panBy(0.05);
        nav.push_back(frame());
    }

    if (qEnvironmentVariableIsSet("LOCKSTEP_BENCH_VERBOSE"))
        for (size_t i = 0; i < nav.size(); ++i)
            std::printf("# nav frame %zu: %.2f ms\n", i, nav[i]);
    std::printf("timeline_spans: %lld spans\n", static_cast<long long>(run->spans.size()));
    std::printf("timeline_make_run_s: %.2f s\n", makeS);
    std::printf("timeline_model_build_s: %.2f s (worker thread, core::analyze included)\n", modelS);
    std::printf("timeline_set_runs_s: %.4f s (GUI thread)\n", setRunsS);
    std::printf("timeline_frame_ms_fit_all: %.2f ms\n", median(fit));
    std::printf("timeline_frame_items_fit_all: %lld items\n", static_cast<long long>(fitItems));
    std::printf("timeline_frame_ms_zoomed: %.2f ms\n", median(zoomed));
    std::printf("timeline_frame_items_zoomed: %lld items\n", static_cast<long long>(zoomItems));
    std::printf("timeline_frame_ms_pan_median: %.2f ms\n", median(nav));
    std::printf("timeline_frame_ms_pan_p95: %.2f ms\n", p95(nav));
    std::printf("timeline_frame_ms_pan_max: %.2f ms\n", *std::max_element(nav.begin(), nav.end()));
    std::printf("timeline_frame_cpu_ms_pan_median: %.2f ms\n", median(cpu));
    std::printf("timeline_frame_cpu_ms_pan_p95: %.2f ms\n", p95(cpu));
    std::printf("timeline_frame_cpu_ms_pan_max: %.2f ms\n", *std::max_element(cpu.begin(), cpu.end()));
    std::fflush(stdout);
    if (qEnvironmentVariableIsSet("LOCKSTEP_SCREENSHOT_DIR")) {
        w.fitAll();
        w.render(&img);
        img.save(qEnvironmentVariable("LOCKSTEP_SCREENSHOT_DIR") + QStringLiteral("/bench_fit_all.png"));
        w.zoomToStep(midStep);
        w.render(&img);
        img.save(qEnvironmentVariable("LOCKSTEP_SCREENSHOT_DIR") + QStringLiteral("/bench_zoomed.png"));
        w.zoomBy(0.02);
        w.render(&img);
        img.save(qEnvironmentVariable("LOCKSTEP_SCREENSHOT_DIR") + QStringLiteral("/bench_mid.png"));
    }
    QVERIFY(median(fit) > 0);
}

// 1024 ranks from core's generator, one a straggler: the timeline (collapsed and expanded,
// scrolled through the ranks) and the heatmap, each frame after a change.
void BenchTimeline::manyRanks()
{
    core::SyntheticParams p;
    p.worldSize = 1024;
    p.steps = 20;
    p.buckets = 4;
    p.stragglerRank = 700;
    p.stragglerDelayNs = 2'000'000;
    QElapsedTimer clock;
    clock.start();
    auto run = std::make_shared<const core::Run>(core::makeSyntheticRun(p));
    const double makeS = clock.nsecsElapsed() / 1e9;
    clock.restart();
    const auto model = ui::TimelineRunModel::build(run);
    const double modelS = clock.nsecsElapsed() / 1e9;

    ui::TimelineWidget w;
    w.resize(1600, 900);
    w.setRuns({{run, QStringLiteral("1024 ranks"), model}});
    QImage img(w.size(), QImage::Format_ARGB32_Premultiplied);
    auto frame = [&] {
        QElapsedTimer t;
        t.start();
        w.render(&img);
        return t.nsecsElapsed() / 1e6;
    };
    std::vector<double> expanded, collapsed;
    for (int i = 0; i < 40; ++i) { // scroll through the ranks, zooming a little
        w.setScrollOffset(i * 997 % std::max(1, w.verticalScrollBar()->maximum()));
        w.zoomBy(i % 2 ? 1.1 : 1 / 1.1);
        expanded.push_back(frame());
    }
    w.setAllCollapsed(true);
    for (int i = 0; i < 40; ++i) {
        w.setScrollOffset(i * 397 % std::max(1, w.verticalScrollBar()->maximum() + 1));
        w.panBy(i % 2 ? 0.05 : -0.05);
        collapsed.push_back(frame());
    }
    w.setRankOrder(ui::RankOrder::ByWaitCaused);
    const double reorderMs = frame();

    // The heatmap's first frame is timed on its own: it is the one that builds the picture (the
    // widget gets its size), so a median of repaints would hide it and a max would not say why.
    // A second widget's first frame, after the first one's, tells what of that cost is the
    // process's once (memory the allocator hands out for the first time, font caches) and what
    // every new picture pays.
    auto heatmapFrame = [](ui::RankHeatmap& h, QImage& target) {
        QElapsedTimer t;
        t.start();
        h.render(&target);
        return t.nsecsElapsed() / 1e6;
    };
    ui::RankHeatmap h;
    h.resize(1400, 860);
    h.setModel(model);
    QImage himg(h.size(), QImage::Format_ARGB32_Premultiplied);
    // The target stands for the window's backing store, which exists and has been painted before
    // the heatmap's first frame: it is touched before the timing starts, so the page faults of
    // its first use (about 13 ms for these 4.8 MB on the 2-core VM) are not counted as the
    // heatmap's.
    himg.fill(Qt::white);
    std::vector<double> heat, heatMetric;
    for (int i = 0; i < 20; ++i)
        heat.push_back(heatmapFrame(h, himg));
    for (int i = 0; i < 12; ++i) { // switching the metric rebuilds the picture
        QElapsedTimer t;
        t.start();
        h.setMetric(ui::RankStepMatrix::Metric(i % ui::RankStepMatrix::MetricCount));
        h.render(&himg);
        heatMetric.push_back(t.nsecsElapsed() / 1e6);
    }
    double secondFirstMs = 0;
    {
        ui::RankHeatmap second;
        second.resize(h.size());
        second.setModel(model);
        secondFirstMs = heatmapFrame(second, himg);
    }
    std::printf("ranks_world_size: %d ranks\n", p.worldSize);
    std::printf("ranks_spans: %lld spans\n", static_cast<long long>(run->spans.size()));
    std::printf("ranks_make_run_s: %.2f s\n", makeS);
    std::printf("ranks_model_build_s: %.2f s (worker thread, core::analyze included)\n", modelS);
    std::printf("ranks_timeline_frame_ms_expanded_median: %.2f ms\n", median(expanded));
    std::printf("ranks_timeline_frame_ms_expanded_max: %.2f ms\n", *std::max_element(expanded.begin(), expanded.end()));
    std::printf("ranks_timeline_frame_ms_collapsed_median: %.2f ms\n", median(collapsed));
    std::printf("ranks_timeline_frame_ms_collapsed_max: %.2f ms\n", *std::max_element(collapsed.begin(), collapsed.end()));
    std::printf("ranks_timeline_frame_ms_reorder: %.2f ms\n", reorderMs);
    std::printf("ranks_heatmap_first_frame_ms: %.2f ms\n", heat.front());
    std::printf("ranks_heatmap_second_widget_first_frame_ms: %.2f ms\n", secondFirstMs);
    std::printf("ranks_heatmap_frame_ms_median: %.2f ms\n", median(heat));
    std::printf("ranks_heatmap_frame_ms_max: %.2f ms\n", *std::max_element(heat.begin(), heat.end()));
    std::printf("ranks_heatmap_metric_switch_ms_median: %.2f ms\n", median(heatMetric));
    std::fflush(stdout);
    if (qEnvironmentVariableIsSet("LOCKSTEP_SCREENSHOT_DIR")) {
        img.save(qEnvironmentVariable("LOCKSTEP_SCREENSHOT_DIR") + QStringLiteral("/bench_1024_ranks.png"));
        h.setMetric(ui::RankStepMatrix::WaitCaused);
        h.render(&himg);
        himg.save(qEnvironmentVariable("LOCKSTEP_SCREENSHOT_DIR") + QStringLiteral("/bench_1024_heatmap.png"));
    }
    QVERIFY(median(heat) > 0);
}

QTEST_MAIN(BenchTimeline)
#include "bench_timeline.moc"
