// Analyses: pure functions over a loaded Run, exactly as DESIGN.md defines each metric.
// Analyses that compare ranks expect clock-corrected times (RunReader::load does that).
#pragma once

#include "lockstep/core/types.h"

#include <string>
#include <vector>

namespace lockstep::core {

// Per (rank, step): W = [step start, step end].
// C = union of compute spans in W, M = union of communication spans in W (clipped to W).
// On a rank that has GpuStream lanes with spans, only device spans count (DESIGN.md: on GPU,
// every kernel that is not communication); otherwise host spans.
struct StepBreakdown {
    int32_t rank = 0;
    int32_t step = 0;
    TimeNs start = 0;
    TimeNs end = 0;
    TimeNs wall = 0;          // |W|
    TimeNs compute = 0;       // |C|
    TimeNs communication = 0; // |M|
    TimeNs overlapped = 0;    // |C ∩ M|
    TimeNs exposed = 0;       // |M \ C|
    TimeNs computeOnly = 0;   // |C \ M|
    TimeNs idle = 0;          // |W| - |C ∪ M|
    double overlapRatio = 0;  // overlapped / communication; NaN when communication == 0
    bool warmup = false;      // step < warmupSteps
};
// Sorted by (rank, step).
std::vector<StepBreakdown> stepBreakdown(const Run& run);

// Per (rank, step, bucket).
struct BucketStat {
    int32_t rank = 0;
    int32_t step = 0;
    int32_t bucket = 0;
    TimeNs ready = -1;        // last gradient-ready instant of the bucket; -1 if none recorded
    TimeNs launch = 0;
    TimeNs completion = 0;
    TimeNs readyToLaunch = -1; // launch - ready; -1 if ready unknown
    TimeNs duration = 0;
    int64_t bytes = 0;
    double algbwGBps = 0;      // bytes / duration (GB/s, 1e9)
    double busbwGBps = 0;      // algbw * 2(N-1)/N
};
std::vector<BucketStat> bucketStats(const Run& run);

struct BucketSkew {
    int32_t step = 0;
    int32_t bucket = 0;
    TimeNs skew = 0;         // max launch - min launch over ranks
    int32_t lateRank = -1;   // the last rank to launch
    TimeNs waitCaused = 0;   // sum over other ranks of (late launch - their launch)
};
struct StepStraggler {
    int32_t step = 0;
    int32_t rank = -1;       // the rank that caused the most wait in this step
    TimeNs waitCaused = 0;   // the largest wait it caused on one bucket of the step (waits of
                             // one step overlap in time; see analysis.cpp)
    TimeNs stepTime = 0;     // mean step wall over ranks
};
struct RankStraggle {
    int32_t rank = 0;
    int stepsAsStraggler = 0;   // steady steps where this rank was the step straggler
    double meanWaitNs = 0;      // mean over steady steps of the wait this rank caused
    double meanWaitFraction = 0; // meanWaitNs / mean steady step time
};
struct StragglerReport {
    std::vector<BucketSkew> skews;        // sorted by (step, bucket)
    std::vector<StepStraggler> perStep;   // sorted by step
    std::vector<RankStraggle> perRank;    // sorted by rank
    std::vector<int32_t> stragglers;      // run stragglers: straggler in most steady steps and
                                          // mean wait >= 5% of step time
};
StragglerReport stragglers(const Run& run);

// Mean of per-bucket statistics over ranks and steady steps.
struct BucketSummary {
    int32_t bucket = 0;
    int64_t bytes = 0;
    int32_t params = 0;
    double meanReadyToLaunchMs = 0;
    double meanDurationMs = 0;
    double meanAlgbwGBps = 0;
    double meanBusbwGBps = 0;
    double meanSkewMs = 0;
};

struct RunSummary {
    std::string name;
    std::string model;
    std::string source;
    std::string backend;
    std::string device;
    RunStatus status = RunStatus::Running;
    std::string failureCause;
    int32_t worldSize = 0;
    int64_t bucketCapBytes = 0;
    int64_t batchPerRank = 0;
    int32_t steps = 0;          // steps present (max over ranks of completed steps)
    int32_t steadySteps = 0;
    // Means over steady steps and ranks:
    double stepTimeMs = 0;
    double computeMs = 0;
    double commMs = 0;
    double overlappedMs = 0;
    double exposedCommMs = 0;
    double idleMs = 0;
    double overlapRatio = 0;    // sum overlapped / sum communication over steady steps (NaN if none)
    double throughput = 0;      // samples/s = samples per step (all ranks) / mean step time
    std::vector<int32_t> stragglers;
    std::vector<BucketSummary> buckets;
    int64_t spans = 0;
    int64_t diagnostics = 0;    // sum of diagnostic counts
    std::vector<double> stragglerWaitMs; // parallel to stragglers: mean wait each caused per steady step
};
RunSummary summarize(const Run& run);

// Scaling efficiency over runs of one model (DESIGN.md). N0 is the smallest world size present.
enum class ScalingMode { Weak, Strong };
struct ScalingPoint {
    std::string name;
    int32_t worldSize = 0;
    double throughput = 0;     // samples/s
    double stepTimeMs = 0;
    double efficiency = 0;     // weak: thr(N) / (N * thr(N0) / N0); strong: T(N0)*N0 / (T(N)*N)
};
// Points sorted by world size; several runs at one world size each get a point.
std::vector<ScalingPoint> scalingEfficiency(const std::vector<RunSummary>& runs, ScalingMode mode);

// Interval helpers the analyses are built on (exposed for tests and the UI).
struct Interval {
    TimeNs start = 0;
    TimeNs end = 0;
};
// Sorted, disjoint union of intervals, each clipped to [lo, hi).
std::vector<Interval> unionClipped(std::vector<Interval> intervals, TimeNs lo, TimeNs hi);
TimeNs totalLength(const std::vector<Interval>& sortedDisjoint);
TimeNs intersectionLength(const std::vector<Interval>& a, const std::vector<Interval>& b);

} // namespace lockstep::core
