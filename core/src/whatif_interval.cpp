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
// Two independent errors: the half-width is the root of their squares' sum. The rows themselves
// combine as intervalFor says (the repeat's spread once, each changed kind's excess over it in
// quadrature: independent, an assumption: the bench changes one kind at a time).
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
    // Every real run of a prediction differs from the model as a repeat of the recorded
    // configuration does (the None row: the machine's run-to-run spread), and a change adds the
    // model's own error of that kind on top: each changed kind contributes the part of its row
    // beyond the repeat's, so a kind whose row was read off fewer pairs than its spread shows
    // never narrows the interval below a repeat's, and several kinds changed at once count the
    // machine's spread once.
    const double repeat = heldOutError(ChangeKind::None).p90AbsPct;
    double sumSq = repeat * repeat;
    for (ChangeKind k : iv.kinds) {
        if (k == ChangeKind::None)
            continue;
        double e = heldOutError(k).p90AbsPct;
        if (e < 0) {
            iv.measured = false;
            e = widest;
        }
        sumSq += std::max(0.0, e * e - repeat * repeat);
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
    // Steady steps' step time, each the mean over the ranks that completed it; and the CPU wait
    // (runq) of the rank-steps that measured it, over their step time.
    std::map<int32_t, std::pair<double, int>> perStep; // step -> (sum ns, ranks)
    double waitSum = 0, waitTime = 0;
    for (const Step& s : run.steps) {
        if (s.step < run.config.warmupSteps || s.end <= s.start)
            continue;
        auto& acc = perStep[s.step];
        acc.first += static_cast<double>(s.end - s.start);
        ++acc.second;
        if (s.runqNs >= 0) {
            waitSum += static_cast<double>(s.runqNs);
            waitTime += static_cast<double>(s.end - s.start);
        }
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
    if (mean <= 0)
        return std::numeric_limits<double>::quiet_NaN();
    const double sampling = kZ90 * std::sqrt(var / n) / mean * 100;
    // A busier machine than the table's: its runs of one configuration differ by about the CPU
    // wait it adds (the held-out pass at load 9: runs waited most of their steps and differed by
    // 58 % at the 90th percentile; at the table's load, ~5 % wait and 16-23 %).
    const double waitPct = waitTime > 0 ? waitSum / waitTime * 100 : 0;
    return std::hypot(sampling, std::max(0.0, waitPct - kTableCpuWaitPct));
}

} // namespace lockstep::core
