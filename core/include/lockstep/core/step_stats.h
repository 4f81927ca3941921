// Statistics over steps and collectives that the charts, the details panel and `report --json`
// share (docs/metrics.md "Spread, quartiles and per-span bandwidth"): per-step means over ranks,
// the step-to-step spread of the run's numbers, each rank's step-time quartiles and the bandwidth
// of one span. Computed here once; the app only formats them.
#pragma once

#include "lockstep/core/analysis.h"

#include <limits>
#include <span>
#include <vector>

namespace lockstep::core {

// The q-quantile (0 <= q <= 1) of values sorted ascending, by linear interpolation between order
// statistics: position h = q (n - 1), x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h])
// (Hyndman and Fan's type 7: numpy's default, spreadsheets' QUARTILE.INC). NaN when empty.
double quantile(std::span<const double> sorted, double q);

// Five-number summary of some values (NaN values are left out): min, the quartiles by quantile()
// and max. count 0: all NaN.
struct Quartiles {
    int32_t count = 0;
    double min = std::numeric_limits<double>::quiet_NaN();
    double q1 = std::numeric_limits<double>::quiet_NaN();
    double median = std::numeric_limits<double>::quiet_NaN();
    double q3 = std::numeric_limits<double>::quiet_NaN();
    double max = std::numeric_limits<double>::quiet_NaN();
};
Quartiles quartiles(std::vector<double> values);

// Mean and sample standard deviation (divisor n - 1) of some values, NaN values left out: a
// step-to-step spread. One value: sd 0; none: mean and sd NaN.
struct Spread {
    int32_t count = 0;
    double mean = std::numeric_limits<double>::quiet_NaN();
    double sd = std::numeric_limits<double>::quiet_NaN();
};
Spread spreadOf(std::span<const double> values);

// One step over all ranks: the means over the ranks that have a window in it (a device-rule rank
// that launched nothing in the step has none and is left out, as in the run's means).
struct StepMean {
    int32_t step = 0;
    bool steady = false;     // SteadySteps::contains
    bool warmup = false;     // step < config.warmupSteps
    int32_t ranks = 0;       // ranks averaged (0: no rank has a window: the numbers are NaN)
    double wallMs = 0;       // mean |W|
    double computeOnlyMs = 0, overlappedMs = 0, exposedMs = 0, memoryOnlyMs = 0, idleMs = 0;
    // Sum of overlapped / sum of communication over the ranks (HTA's ratio, as the run's): NaN
    // without communication or on one rank.
    double overlapRatio = std::numeric_limits<double>::quiet_NaN();
    // Samples all ranks took in the step (Step::samples, else config.batchPerRank, as the run's
    // throughput) / wallMs: samples per second. NaN when no rank says how many it took.
    double throughput = std::numeric_limits<double>::quiet_NaN();
};
// Every step of the analysis, ascending.
std::vector<StepMean> stepMeans(const Run& run, const RunAnalysis& analysis);

// How much the run's numbers move from one steady step to the next: the spread over the steady
// steps' StepMeans (the charts' error bars, report --json's *_sd).
struct StepSpread {
    Spread stepTimeMs;   // of StepMean::wallMs
    Spread overlapRatio; // of StepMean::overlapRatio (steps without communication left out; NaN on 1 rank)
    Spread throughput;   // of StepMean::throughput (NaN when samples are unknown)
};
StepSpread stepSpread(std::span<const StepMean> steps);

// One rank's step-time distribution: quartiles of |W| in ms over its steady steps with a window
// (the rows the run's means use).
struct RankStepTimes {
    int32_t rank = 0;
    Quartiles stepTimeMs;
};
// Sorted by rank; only ranks with at least one such step.
std::vector<RankStepTimes> rankStepTimes(const RunAnalysis& analysis);

// The bandwidth of one span (the details panel and the timeline's tooltip; docs/metrics.md
// "Spread, quartiles and per-span bandwidth"):
//  - a span of a bucket's collective (communication carrying a step and a bucket whose
//    (rank, step, bucket) `stats` holds) shows the collective's: its BucketStat's bytes, duration
//    (launch to completion on the span's rank) and algbw / busbw, exactly `bucket_steps[].ranks[]`
//    of report --json (collective = true);
//  - any other communication span its own bytes over its own duration, busbw = algbw x 2(N-1)/N
//    with N the run's world size (config, else the ranks that recorded anything);
//  - communication on one rank crosses no link: not applicable;
//  - a copy or memset (not communication) its own bytes over its duration, on any world size, and
//    no busbw (no ring moves it);
//  - anything else: not applicable.
// algbw and busbw are NaN without bytes (0: unknown) or without duration.
struct SpanBandwidth {
    bool applicable = false;   // communication on a run of more than one rank, or a copy / memset
    bool collective = false;   // the numbers are the bucket collective's, not the span's own
    int32_t worldSize = 0;     // N
    int64_t bytes = 0;         // 0: unknown
    TimeNs duration = 0;
    double algbwGBps = std::numeric_limits<double>::quiet_NaN(); // bytes / duration, 1e9 B/s
    double busbwGBps = std::numeric_limits<double>::quiet_NaN();
};
// `stats`: bucketStats(run) (RunAnalysis::buckets), sorted by (rank, step, bucket).
SpanBandwidth spanBandwidth(const Run& run, std::span<const BucketStat> stats, const Span& span);

} // namespace lockstep::core
