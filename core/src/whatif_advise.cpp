// `lockstep advise` (whatif.h, advise()): the bucket caps that minimize predicted step time, and
// a verdict that is never confidently wrong: change only when the gain clears the candidate's
// interval (whatif_error.h), keep only when the candidate is slower beyond it, otherwise "the
// recording cannot tell" and the measurement that would. Uses the model's public API only
// (predict, bucketSizes); the model itself is in whatif.cpp.
#include "lockstep/core/whatif.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace lockstep::core {

// ---- Advice ---------------------------------------------------------------------------------

namespace {

// advise's verdict (whatif.h, Advice::Verdict). The candidate is the fastest layout other than the
// recorded one; its interval is a bucket-cap change's (the held-out error widened by the
// recording's noise, and bounded by the prediction without contention). A change is advised only
// when the whole interval lies below the recorded caps' prediction; keeping is advised only when
// the whole interval lies above it; otherwise the recording cannot tell, and one short run at the
// candidate's caps can.
void judge(const WhatIfModel& model, Advice& a, const std::vector<size_t>& recordedLayout)
{
    const AdviceCandidate* other = nullptr;
    for (const AdviceCandidate& c : a.candidates)
        if (model.bucketSizes(c.config) != recordedLayout) {
            other = &c;
            break;
        }
    if (!other) {
        a.verdict = Advice::Verdict::Keep;
        a.candidate = a.current;
        a.candidateMs = a.predictedCurrentMs;
        a.confidenceNote = "every candidate gives the recorded bucket layout";
        a.confident = false;
        return;
    }
    a.candidate = other->config;
    a.candidateMs = other->numbers.stepTimeMs;
    a.candidateGainPct = a.predictedCurrentMs > 0 ? (a.predictedCurrentMs - a.candidateMs) / a.predictedCurrentMs * 100 : 0;
    // The interval of the candidate: re-predicted with the model's own steps (advise replays at
    // most 32 steady steps, the interval is relative, so the bounds scale with it).
    auto full = model.predict(a.candidate, PredictOptions{.keepTimeline = false, .maxSteadySteps = 32});
    a.interval = intervalFor({ChangeKind::BucketCap}, a.candidateMs, model.stepNoisePct());
    if (full && full->numbers.stepTimeMs > 0) {
        const double r = a.candidateMs / full->numbers.stepTimeMs;
        a.interval = full->interval;
        a.interval.lowMs *= r;
        a.interval.highMs *= r;
    }
    a.gainWithinError = !(std::fabs(a.candidateGainPct) > a.interval.halfWidthPct);
    char buf[400];
    const bool faster = a.interval.highMs < a.predictedCurrentMs;
    const bool slower = a.interval.lowMs > a.predictedCurrentMs;
    // More buckets than recorded cost one latency more each; a run that cannot tell its link's
    // latency (fewer than two bucket sizes moved after backward) predicts them as free.
    const bool moreBuckets = model.bucketSizes(a.candidate).size() > recordedLayout.size();
    const bool latencyUnknown = moreBuckets && model.link().fitted && !model.link().latencySeparable;
    if (faster && !latencyUnknown) {
        a.verdict = Advice::Verdict::Change;
    } else if (slower) {
        a.verdict = Advice::Verdict::Keep;
    } else {
        a.verdict = Advice::Verdict::CannotTell;
        if (latencyUnknown && faster)
            a.confidenceNote = "the candidate makes more buckets than recorded, and this recording cannot tell the "
                               "link's latency per bucket (fewer than two bucket sizes moved after backward)";
        else {
            std::snprintf(buf, sizeof buf,
                          "the candidate is predicted %.1f%% %s than the recorded caps, inside the model's error for "
                          "%s (a run of it is expected at %.1f to %.1f ms against %.1f ms predicted for the recorded "
                          "caps)",
                          std::fabs(a.candidateGainPct), a.candidateGainPct >= 0 ? "faster" : "slower",
                          describeKinds(a.interval.kinds).c_str(), a.interval.lowMs, a.interval.highMs,
                          a.predictedCurrentMs);
            a.confidenceNote = buf;
        }
        a.measureHint = "one short run at the candidate's caps, beside one at the recorded caps, tells: "
            + describe(a.candidate) + " against " + describe(a.current);
    }
    a.confident = a.verdict == Advice::Verdict::Change;
}

} // namespace

Result<Advice> advise(const WhatIfModel& model, const AdviseOptions& options)
{
    constexpr int64_t kMiB = 1 << 20;
    Advice a;
    a.current = model.recorded();
    a.notes = model.notes();
    // Default grids: powers of two around PyTorch's defaults (25 MiB, first 1 MiB), plus the
    // recorded caps; beyond the whole gradient every cap gives the same single bucket.
    std::vector<int64_t> caps = options.bucketCaps, firsts = options.firstBucketCaps;
    if (caps.empty())
        for (int64_t c : {kMiB / 4, kMiB / 2, kMiB, 2 * kMiB, 4 * kMiB, 8 * kMiB, 16 * kMiB, 25 * kMiB, 32 * kMiB,
                          64 * kMiB, 100 * kMiB, 128 * kMiB, 256 * kMiB})
            caps.push_back(c);
    if (firsts.empty())
        for (int64_t c : {kMiB / 4, kMiB / 2, kMiB, 2 * kMiB, 4 * kMiB, 8 * kMiB})
            firsts.push_back(c);
    for (int64_t c : caps)
        if (c <= 0)
            return fail("bucket caps must be positive");
    for (int64_t c : firsts)
        if (c <= 0)
            return fail("first-bucket caps must be positive");
    // The recorded configuration is always a candidate: it wins ties, so a change is advised
    // only when the model predicts a gain.
    std::vector<std::pair<int64_t, int64_t>> grid{{a.current.bucketCapBytes, a.current.firstBucketCapBytes}};
    for (int64_t c : caps)
        for (int64_t f : firsts)
            grid.emplace_back(c, f);

    // Each candidate replays at most kAdviseSteadySteps steady steps: enough that the per-step
    // noise averages out (its standard error shrinks as 1/sqrt(steps)), few enough that a long
    // run's advice takes seconds. The candidates are compared with each other, the first of them
    // being the recorded caps, over the same steps.
    constexpr int32_t kAdviseSteadySteps = 32;
    a.measuredStepMs = model.measured().stepTimeMs;
    a.replayedMs = model.replayed().stepTimeMs;
    a.selfErrorPct = model.selfErrorPct();
    // Caps that give the same bucket layout give the same prediction: each layout is evaluated
    // once, under the first (cap, first cap) that produced it.
    std::set<std::vector<size_t>> seen;
    for (const auto& [cap, first] : grid) {
        WhatIfConfig c = a.current;
        c.bucketCapBytes = cap;
        c.firstBucketCapBytes = first;
        if (!seen.insert(model.bucketSizes(c)).second)
            continue;
        auto pred = model.predict(
            c, PredictOptions{.keepTimeline = false, .maxSteadySteps = kAdviseSteadySteps, .boundContention = false});
        if (!pred)
            return std::unexpected(pred.error());
        a.candidates.push_back(AdviceCandidate{c, pred->numbers});
    }
    const std::vector<size_t> recordedLayout = model.bucketSizes(a.current);
    a.predictedCurrentMs = a.candidates.front().numbers.stepTimeMs;
    std::stable_sort(a.candidates.begin(), a.candidates.end(), [](const AdviceCandidate& x, const AdviceCandidate& y) {
        return x.numbers.stepTimeMs < y.numbers.stepTimeMs;
    });
    a.best = a.candidates.front().config;
    a.predictedBestMs = a.candidates.front().numbers.stepTimeMs;
    a.gainMs = a.predictedCurrentMs - a.predictedBestMs;
    a.gainPct = a.predictedCurrentMs > 0 ? a.gainMs / a.predictedCurrentMs * 100 : 0;
    judge(model, a, recordedLayout);
    return a;
}

} // namespace lockstep::core
