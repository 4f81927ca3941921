// Benchmarks of the analyses and the timeline's level of detail on a synthetic run of about
// 10 million spans (a different size can be given as the first argument).
// Prints `name: value unit` lines (scripts/bench.sh collects them).
#include "lockstep/core/analysis.h"
#include "lockstep/core/lod.h"
#include "lockstep/core/synthetic.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace lockstep::core;
using Clock = std::chrono::steady_clock;

namespace {
double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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
    Run run = makeSyntheticRunWithSpans(spans, 2);
    std::printf("synthetic_run_s: %.3f s (%zu spans, %zu instants)\n", secondsSince(t), run.spans.size(),
                run.instants.size());

    // All analyses together, as `lockstep report` and the app's summary need them.
    size_t sink = 0;
    t = Clock::now();
    const auto breakdown = stepBreakdown(run);
    const double tBreakdown = secondsSince(t);
    auto t2 = Clock::now();
    const auto stats = bucketStats(run);
    const double tBuckets = secondsSince(t2);
    t2 = Clock::now();
    const auto strag = stragglers(run);
    const double tStrag = secondsSince(t2);
    t2 = Clock::now();
    const RunSummary summary = summarize(run);
    const double tSummary = secondsSince(t2);
    const double tAll = secondsSince(t);
    sink += breakdown.size() + stats.size() + strag.skews.size() + summary.buckets.size();
    std::printf("analyses_10M_s: %.3f s\n", tAll);
    std::printf("step_breakdown_s: %.3f s\n", tBreakdown);
    std::printf("bucket_stats_s: %.3f s\n", tBuckets);
    std::printf("stragglers_s: %.3f s\n", tStrag);
    std::printf("summarize_s: %.3f s\n", tSummary);
    std::printf("# %d steps, overlap %.3f, step %.3f ms, stragglers %zu\n", summary.steps, summary.overlapRatio,
                summary.stepTimeMs, summary.stragglers.size());
    (void)sink;
    return 0;
}
