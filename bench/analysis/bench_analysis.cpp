// Benchmarks of the analyses and the timeline's level of detail on a synthetic run of about
// 10 million spans (a different size can be given as the first argument).
// Prints `name: value unit` lines.
#include "lockstep/core/analysis.h"
#include "lockstep/core/lod.h"
#include "lockstep/core/synthetic.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

using namespace lockstep::core;
using Clock = std::chrono::steady_clock;

namespace {
double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
// CPU time of this process: on a machine shared with other jobs it says what the work costs
// when it gets a core to itself, next to the wall-clock figure.
double cpuSeconds()
{
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

template <class F>
double medianSeconds(int reps, F&& f)
{
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        const auto s = Clock::now();
        f(i);
        t.push_back(secondsSince(s));
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}
} // namespace

int main(int argc, char** argv)
{
    const int64_t spans = argc > 1 ? std::atoll(argv[1]) : 10'000'000;
    auto t = Clock::now();
    const double cpuSynthetic = cpuSeconds();
    Run run = makeSyntheticRunWithSpans(spans, 2);
    std::printf("synthetic_run_s: %.3f s (%zu spans, %zu instants)\n", secondsSince(t), run.spans.size(),
                run.instants.size());
    std::printf("synthetic_run_cpu_s: %.3f s\n", cpuSeconds() - cpuSynthetic);

    // All analyses together, as `lockstep report` and the app's summary need them: analyze()
    // computes each once (breakdown, bucket statistics, stragglers, summary, per-rank means).
    size_t sink = 0;
    const double cpu0 = cpuSeconds();
    t = Clock::now();
    const RunAnalysis analysis = analyze(run);
    const double tAll = secondsSince(t);
    const double cpuAll = cpuSeconds() - cpu0;
    const RunSummary& summary = analysis.summary;
    sink += analysis.steps.size() + analysis.buckets.size() + analysis.stragglers.skews.size() + summary.buckets.size();
    std::printf("analyses_10M_s: %.3f s\n", tAll);
    std::printf("analyses_10M_cpu_s: %.3f s\n", cpuAll);
    // The parts on their own (each call below recomputes what it needs).
    auto t2 = Clock::now();
    sink += stepBreakdown(run).size();
    std::printf("step_breakdown_s: %.3f s\n", secondsSince(t2));
    t2 = Clock::now();
    sink += bucketStats(run).size();
    std::printf("bucket_stats_s: %.3f s\n", secondsSince(t2));
    t2 = Clock::now();
    sink += stragglers(run).skews.size();
    std::printf("stragglers_s: %.3f s\n", secondsSince(t2));
    t2 = Clock::now();
    const RunIndex index(run);
    std::printf("run_index_build_s: %.3f s\n", secondsSince(t2));
    const double oneStep = medianSeconds(101, [&](int i) {
        const StepBreakdown& b = analysis.steps[analysis.steps.size() / 101 * i];
        sink += index.stepBreakdown(b.rank, b.step)->wall > 0;
    });
    std::printf("run_index_step_breakdown_ms: %.4f ms\n", oneStep * 1e3);
    std::printf("# %d steps, overlap %.3f, step %.3f ms, stragglers %zu\n", summary.steps, summary.overlapRatio,
                summary.stepTimeMs, summary.stragglers.size());

    // Level of detail: building every lane's levels for the whole run.
    t = Clock::now();
    double cpu = cpuSeconds();
    RunLod runLod(run);
    std::printf("lod_build_10M_s: %.3f s (%zu lanes)\n", secondsSince(t), runLod.laneCount());
    std::printf("lod_build_10M_cpu_s: %.3f s\n", cpuSeconds() - cpu);
    run = Run(); // free the memory before the single-lane run

    // Queries on one lane of about 10 M spans (a 1-rank run: its compute lane holds ~94%).
    Run one = makeSyntheticRunWithSpans(spans * 140 / 132 + 1000, 1);
    const auto [a, b] = one.laneSpanRange(LaneId{0});
    std::span<const Span> lane(one.spans.data() + a, b - a);
    t = Clock::now();
    LaneLod lod(lane);
    std::printf("lod_build_lane_s: %.3f s (%zu spans in the lane)\n", secondsSince(t), lane.size());
    const TimeNs t0 = lane.front().start, t1 = lane.back().end;
    constexpr double kPixels = 2000.0, kMinPixels = 3.0;
    std::vector<DrawItem> items;
    size_t outItems = 0;
    const double zoomedOut = medianSeconds(21, [&](int) {
        items.clear();
        lod.query(t0, t1, static_cast<double>(t1 - t0) / kPixels, kMinPixels, items);
        outItems = items.size();
    });
    std::printf("lod_query_zoomed_out_ms: %.3f ms (%zu items)\n", zoomedOut * 1e3, outItems);
    // Middle: a 1 s window (about 100 steps) over 2000 pixels: folded items are whole phases.
    const TimeNs mid = 1'000'000'000;
    const double zoomedMid = medianSeconds(101, [&](int i) {
        items.clear();
        const TimeNs w0 = t0 + (t1 - t0 - mid) / 101 * i;
        lod.query(w0, w0 + mid, static_cast<double>(mid) / kPixels, kMinPixels, items);
        outItems = items.size();
    });
    std::printf("lod_query_mid_ms: %.4f ms (%zu items)\n", zoomedMid * 1e3, outItems);
    // Zoomed in: a 2 ms window (1 µs per pixel) at spread-out positions.
    const TimeNs window = static_cast<TimeNs>(kPixels * 1000.0);
    const double zoomedIn = medianSeconds(101, [&](int i) {
        items.clear();
        const TimeNs w0 = t0 + (t1 - t0 - window) / 101 * i;
        lod.query(w0, w0 + window, 1000.0, kMinPixels, items);
        outItems = items.size();
    });
    std::printf("lod_query_zoomed_in_ms: %.4f ms (%zu items)\n", zoomedIn * 1e3, outItems);
    // Visible range alone: many calls per sample so the clock's resolution does not dominate.
    constexpr int kCalls = 1000;
    const double vr = medianSeconds(21, [&](int rep) {
        for (int i = 0; i < kCalls; ++i) {
            const TimeNs w0 = t0 + (t1 - t0 - window) / kCalls * ((i * 7919 + rep) % kCalls);
            const auto r = lod.visibleRange(w0, w0 + window);
            sink += r.second - r.first;
        }
    });
    std::printf("visible_range_us: %.3f us\n", vr / kCalls * 1e6);

    // A lane as a big run's streamed window leaves it (run_overview.h): one long folded overview
    // item (10 s, a thousand spans), then the window's million spans of 1 µs with 1 µs gaps.
    // Zoomed in at the window's end (100 ns a pixel: finer than any level), a query must not
    // walk the million spans that the long item's length reaches back over.
    {
        std::vector<Span> hybrid;
        std::vector<DrawItem> folded;
        Span longItem;
        longItem.start = 0;
        longItem.end = 10'000'000'000;
        hybrid.push_back(longItem);
        folded.push_back(DrawItem{.start = 0, .end = longItem.end, .span = 0, .count = 1000, .maxDuration = 1'000'000, .row = 0});
        for (int i = 0; i < 1'000'000; ++i) {
            Span sp;
            sp.start = longItem.end + TimeNs(i) * 2000;
            sp.end = sp.start + 1000;
            hybrid.push_back(sp);
            folded.push_back(DrawItem{.start = sp.start, .end = sp.end, .span = 0, .count = 1, .maxDuration = 1000, .row = 0});
        }
        const LaneLod hlod(hybrid, folded);
        constexpr double kNs = 100.0;
        const TimeNs end = hybrid.back().end, w = static_cast<TimeNs>(kPixels * kNs);
        const double afterLong = medianSeconds(21, [&](int i) {
            items.clear();
            hlod.query(end - w - i * 1000, end - i * 1000, kNs, kMinPixels, items);
            outItems = items.size();
        });
        std::printf("lod_query_after_long_item_ms: %.4f ms (%zu items)\n", afterLong * 1e3, outItems);
    }
    return sink == 0 ? 1 : 0;
}
