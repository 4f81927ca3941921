// The interval every what-if prediction carries (whatif_error.h): the held-out error of the kinds
// of change it makes, widened by the recording's own step-to-step noise.
//
// Why these two parts, combined in quadrature:
//  - the held-out rows are the model's error against real runs of configurations it was not
//    fitted to, on models nobody tuned it against; they already hold the run-to-run drift of the
//    machine they were measured on (a prediction pair is two runs);
//  - the recording's noise is what this recording adds: the model replays its steps, so their
//    sampling error (the standard error of the mean of its steady steps, at 90 %: 1.645 of it)
//    moves every prediction from it. A calm, long recording adds little; a short noisy one more.
// Two independent errors: the half-width is the root of their squares' sum. Several kinds changed
// at once (caps and world size): their rows are added in quadrature as well (independent, an
// assumption: the bench changes one kind at a time).
#include "lockstep/core/whatif.h"
#include "lockstep/core/whatif_error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace lockstep::core {

const HeldOutError& heldOutError(ChangeKind kind)
{
    for (const HeldOutError& row : kHeldOutErrors)
        if (row.kind == kind)
            return row;
    return kHeldOutErrors.front();
}

std::string describeKinds(const std::vector<ChangeKind>& kinds)
{
    std::string out;
    for (ChangeKind k : kinds)
        out += (out.empty() ? "" : ", ") + std::string(heldOutError(k).label);
    return out.empty() ? std::string(heldOutError(ChangeKind::None).label) : out;
}

PredictionInterval intervalFor(const std::vector<ChangeKind>& kinds, double predictedMs, double noisePct)
{
    PredictionInterval iv;
    iv.kinds = kinds.empty() ? std::vector<ChangeKind>{ChangeKind::None} : kinds;
    double widest = 0;
    for (const HeldOutError& row : kHeldOutErrors)
        widest = std::max(widest, row.p90AbsPct);
    double sumSq = 0;
    for (ChangeKind k : iv.kinds) {
        double e = heldOutError(k).p90AbsPct;
        if (e < 0) {
            iv.measured = false;
            e = widest;
        }
        sumSq += e * e;
    }
    iv.heldOutPct = std::sqrt(sumSq);
    iv.noisePct = std::isfinite(noisePct) && noisePct > 0 ? noisePct : 0;
    iv.halfWidthPct = std::hypot(iv.heldOutPct, iv.noisePct);
    const double e = iv.halfWidthPct / 100;
    iv.lowMs = predictedMs / (1 + e);
    iv.highMs = e < 1 ? predictedMs / (1 - e) : std::numeric_limits<double>::infinity();
    return iv;
}

std::vector<ChangeKind> changeKinds(const WhatIfConfig& recorded, const WhatIfConfig& c)
{
    std::vector<ChangeKind> kinds;
    if (c.bucketCapBytes != recorded.bucketCapBytes || c.firstBucketCapBytes != recorded.firstBucketCapBytes)
        kinds.push_back(ChangeKind::BucketCap);
    if (c.linkGbps != recorded.linkGbps)
        kinds.push_back(ChangeKind::LinkSpeed);
    if (c.worldSize != recorded.worldSize)
        kinds.push_back(ChangeKind::WorldSize);
    if (c.computeScale != 1.0)
        kinds.push_back(ChangeKind::ComputeScale);
    if (c.compress != recorded.compress)
        kinds.push_back(ChangeKind::Compression);
    return kinds;
}

double stepNoisePct(const Run& run)
{
    // Steady steps' step time, each the mean over the ranks that completed it.
    std::map<int32_t, std::pair<double, int>> perStep; // step -> (sum ns, ranks)
    for (const Step& s : run.steps) {
        if (s.step < run.config.warmupSteps || s.end <= s.start)
            continue;
        auto& acc = perStep[s.step];
        acc.first += static_cast<double>(s.end - s.start);
        ++acc.second;
    }
    const auto n = static_cast<double>(perStep.size());
    if (perStep.size() < 2)
        return std::numeric_limits<double>::quiet_NaN();
    double sum = 0, sumSq = 0;
    for (const auto& [step, acc] : perStep) {
        const double t = acc.first / acc.second;
        sum += t;
        sumSq += t * t;
    }
    const double mean = sum / n;
    const double var = std::max(0.0, (sumSq - n * mean * mean) / (n - 1));
    constexpr double kZ90 = 1.645; // two-sided 90 %, as the table's rows
    return mean > 0 ? kZ90 * std::sqrt(var / n) / mean * 100 : std::numeric_limits<double>::quiet_NaN();
}

} // namespace lockstep::core
