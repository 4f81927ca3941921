// Per-step means, step-to-step spreads, step-time quartiles and per-span bandwidth (see
// step_stats.h; the rules are docs/metrics.md's "Spread, quartiles and per-span bandwidth").
#include "lockstep/core/step_stats.h"

#include "analysis_internal.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace lockstep::core {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kToMs = 1e-6;

} // namespace

double quantile(std::span<const double> sorted, double q)
{
    if (sorted.empty())
        return kNaN;
    const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(sorted.size() - 1, lo + 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

Quartiles quartiles(std::vector<double> values)
{
    values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return std::isnan(v); }), values.end());
    Quartiles out;
    if (values.empty())
        return out;
    std::sort(values.begin(), values.end());
    out.count = static_cast<int32_t>(values.size());
    out.min = values.front();
    out.q1 = quantile(values, 0.25);
    out.median = quantile(values, 0.5);
    out.q3 = quantile(values, 0.75);
    out.max = values.back();
    return out;
}

Spread spreadOf(std::span<const double> values)
{
    Spread s;
    double sum = 0;
    for (double v : values)
        if (!std::isnan(v)) {
            sum += v;
            ++s.count;
        }
    if (s.count == 0)
        return s;
    s.mean = sum / s.count;
    double sq = 0;
    for (double v : values)
        if (!std::isnan(v))
            sq += (v - s.mean) * (v - s.mean);
    s.sd = s.count > 1 ? std::sqrt(sq / (s.count - 1)) : 0.0;
    return s;
}

std::vector<StepMean> stepMeans(const Run& run, const RunAnalysis& analysis)
{
    struct Acc {
        double wall = 0, computeOnly = 0, overlapped = 0, exposed = 0, memoryOnly = 0, idle = 0, comm = 0;
        int32_t n = 0;
        bool warmup = false;
    };
    std::map<int32_t, Acc> perStep;
    for (const StepBreakdown& b : analysis.steps) {
        Acc& a = perStep[b.step];
        a.warmup = b.warmup;
        if (b.window == StepWindow::NoDeviceWork)
            continue; // no window: says nothing about the step's time (as the run's means)
        a.wall += static_cast<double>(b.wall);
        a.computeOnly += static_cast<double>(b.computeOnly);
        a.overlapped += static_cast<double>(b.overlapped);
        a.exposed += static_cast<double>(b.exposed);
        a.memoryOnly += static_cast<double>(b.memoryOnly);
        a.idle += static_cast<double>(b.idle);
        a.comm += static_cast<double>(b.communication);
        ++a.n;
    }
    // Samples of all ranks per step, as RunSummary::throughput counts them.
    std::map<int32_t, double> samples;
    for (const Step& st : run.steps)
        samples[st.step] += static_cast<double>(st.samples > 0 ? st.samples : run.config.batchPerRank);
    const bool multiRank = analysis.summary.multiRank;
    std::vector<StepMean> out;
    out.reserve(perStep.size());
    for (const auto& [step, a] : perStep) {
        StepMean m;
        m.step = step;
        m.steady = analysis.steady.contains(step);
        m.warmup = a.warmup;
        m.ranks = a.n;
        const double n = a.n > 0 ? a.n : kNaN;
        m.wallMs = a.wall / n * kToMs;
        m.computeOnlyMs = a.computeOnly / n * kToMs;
        m.overlappedMs = a.overlapped / n * kToMs;
        m.exposedMs = a.exposed / n * kToMs;
        m.memoryOnlyMs = a.memoryOnly / n * kToMs;
        m.idleMs = a.idle / n * kToMs;
        m.overlapRatio = multiRank && a.comm > 0 ? a.overlapped / a.comm : kNaN;
        auto it = samples.find(step);
        m.throughput = it != samples.end() && it->second > 0 && m.wallMs > 0 ? it->second / (m.wallMs * 1e-3) : kNaN;
        out.push_back(m);
    }
    return out;
}

StepSpread stepSpread(std::span<const StepMean> steps)
{
    std::vector<double> wall, overlap, throughput;
    for (const StepMean& m : steps) {
        if (!m.steady || m.ranks == 0)
            continue;
        wall.push_back(m.wallMs);
        overlap.push_back(m.overlapRatio);
        throughput.push_back(m.throughput);
    }
    return {spreadOf(wall), spreadOf(overlap), spreadOf(throughput)};
}

std::vector<RankStepTimes> rankStepTimes(const RunAnalysis& analysis)
{
    std::map<int32_t, std::vector<double>> perRank;
    for (const StepBreakdown& b : analysis.steps)
        if (b.steady && b.window != StepWindow::NoDeviceWork)
            perRank[b.rank].push_back(static_cast<double>(b.wall) * kToMs);
    std::vector<RankStepTimes> out;
    for (auto& [rank, v] : perRank)
        out.push_back({rank, quartiles(std::move(v))});
    return out;
}

SpanBandwidth spanBandwidth(const Run& run, std::span<const BucketStat> stats, const Span& span)
{
    SpanBandwidth bw;
    bw.worldSize = detail::worldSizeOf(run);
    const bool comm = isCommunication(span.kind);
    const bool copy = !comm && (span.kind == SpanKind::Memcpy || span.kind == SpanKind::Memset);
    bw.applicable = (comm && bw.worldSize > 1) || copy;
    if (!bw.applicable)
        return bw;
    bw.bytes = span.bytes;
    bw.duration = span.duration();
    if (comm && span.step != kNoStep && span.bucket != kNoBucket && span.lane.v < run.lanes.size()) {
        const std::tuple<int32_t, int32_t, int32_t> key{run.lanes[span.lane.v].rank, span.step, span.bucket};
        auto it = std::lower_bound(stats.begin(), stats.end(), key, [](const BucketStat& s, const auto& k) {
            return std::tie(s.rank, s.step, s.bucket) < k;
        });
        if (it != stats.end() && std::tie(it->rank, it->step, it->bucket) == key) {
            bw.collective = true;
            bw.bytes = it->bytes;
            bw.duration = it->duration;
            bw.algbwGBps = it->algbwGBps;
            bw.busbwGBps = it->busbwGBps;
            return bw;
        }
    }
    // bytes per ns is GB/s (1e9 bytes per second), as BucketStat's.
    if (bw.bytes > 0 && bw.duration > 0)
        bw.algbwGBps = static_cast<double>(bw.bytes) / static_cast<double>(bw.duration);
    if (comm)
        bw.busbwGBps = bw.algbwGBps * detail::busBandwidthFactor(bw.worldSize);
    return bw;
}

} // namespace lockstep::core
