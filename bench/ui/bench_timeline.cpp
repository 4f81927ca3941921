// Timeline frame time on a 10-million-span run (DESIGN.md target: <= 16 ms per pan/zoom frame).
// A frame is what the user waits for after a wheel notch or a drag: the draw lists rebuilt from
// the level of detail for the new window, then painted. Each measured render follows a view
// change, so the widget's frame cache never answers for free.
//
// Run with QT_QPA_PLATFORM=offscreen. LOCKSTEP_BENCH_SPANS overrides the span count.
#include "timeline_widget.h"

#include "lockstep/core/synthetic.h"

#include <QElapsedTimer>
#include <QImage>
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

    ui::TimelineWidget w;
    w.resize(1600, 900);
    clock.restart();
    w.setRuns({{run, QStringLiteral("10M")}});
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
    std::printf("timeline_set_runs_s: %.2f s\n", setRunsS);
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

QTEST_MAIN(BenchTimeline)
#include "bench_timeline.moc"
