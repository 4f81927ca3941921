// How fast the what-if model answers: building it from a run, one prediction, and `advise`, on
// synthetic runs of three sizes (a What-if panel must answer a slider within a frame or two).
// The synthetic runs carry per-parameter sizes (param_numel), so predictions re-bucket
// parameter by parameter as they do on recorded runs. Prints `name: value unit` lines.
#include "lockstep/core/synthetic.h"
#include "lockstep/core/whatif.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

using namespace lockstep::core;
using Clock = std::chrono::steady_clock;

namespace {

double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

template <class F>
double medianMs(int reps, F&& f)
{
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        const auto s = Clock::now();
        f(i);
        t.push_back(msSince(s));
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

struct Size {
    const char* name;
    int32_t world, steps, buckets, segments;
};

} // namespace

int main()
{
    // small: a typical recorded run (2 ranks, 20 steps, 64 parameters); medium: 8 ranks, 50
    // steps, 128 parameters; large: 64 ranks, 100 steps, 256 parameters (~2.5 M spans).
    const Size sizes[] = {{"small", 2, 20, 8, 8}, {"medium", 8, 50, 16, 8}, {"large", 64, 100, 16, 16}};
    for (const Size& s : sizes) {
        SyntheticParams p;
        p.worldSize = s.world;
        p.steps = s.steps;
        p.buckets = s.buckets;
        p.backwardSegmentsPerBucket = s.segments;
        Run run = makeSyntheticRun(p);
        std::vector<std::vector<int64_t>> numel;
        for (const Bucket& b : run.buckets)
            numel.emplace_back(b.params.size(), b.bytes / 4 / static_cast<int64_t>(b.params.size()));
        run.config.extra[kParamNumelKey] = formatParamNumel(numel);
        for (Bucket& b : run.buckets)
            b.bytes = numel[b.index].front() * 4 * static_cast<int64_t>(b.params.size());

        std::optional<WhatIfModel> model;
        const double buildMs = medianMs(3, [&](int) {
            auto m = WhatIfModel::build(run);
            if (!m) {
                std::fprintf(stderr, "build failed: %s\n", m.error().message.c_str());
                std::exit(1);
            }
            model = std::move(*m);
        });
        const int64_t caps[] = {1 << 20, 4 << 20, 25 << 20, 100 << 20};
        int32_t sink = 0;
        const double predictMs = medianMs(9, [&](int i) {
            WhatIfConfig c = model->recorded();
            c.bucketCapBytes = caps[i % 4];
            auto pred = model->predict(c);
            sink += pred ? pred->numbers.buckets : 0;
        });
        const double numbersMs = medianMs(9, [&](int i) {
            WhatIfConfig c = model->recorded();
            c.bucketCapBytes = caps[i % 4];
            auto pred = model->predict(c, PredictOptions{.keepTimeline = false});
            sink += pred ? pred->numbers.buckets : 0;
        });
        const auto t = Clock::now();
        auto advice = advise(*model);
        const double adviseMs = msSince(t);
        std::printf("# %s: %d ranks, %d steps, %zu parameters, %zu spans, %zu instants (sink %d)\n", s.name, s.world,
                    s.steps, static_cast<size_t>(s.buckets) * s.segments, run.spans.size(), run.instants.size(), sink);
        std::printf("whatif_build_ms_%s: %.2f ms\n", s.name, buildMs);
        std::printf("whatif_predict_ms_%s: %.2f ms\n", s.name, predictMs);
        std::printf("whatif_predict_numbers_only_ms_%s: %.2f ms\n", s.name, numbersMs);
        std::printf("whatif_advise_ms_%s: %.2f ms (%zu layouts)\n", s.name, adviseMs,
                    advice ? advice->candidates.size() : size_t{0});
    }
    return 0;
}
