// What the timeline knows about one run, computed once in the loader's worker thread and kept:
// its level of detail, its time alignment, its rows, per-step overlap strips, step boundaries,
// step stragglers and the rank × step heatmap. Painting only queries these structures for the
// visible window; nothing here loops over all spans per frame.
//
// Also the run-level helpers shared by the widget, the details panel and the replay views:
// alignment (one place), per-(rank, step) compute/communication unions, bucket states at a time.
#pragma once

#include "lockstep/core/analysis.h"
#include "lockstep/core/lod.h"
#include "lockstep/core/types.h"

#include <memory>
#include <stop_token>
#include <vector>

namespace lockstep::ui {

// ---- Alignment: the one place that decides where a run's t = 0 is. ----
// Runs are compared step against step: the first steady step (config.warmupSteps) of each run
// starts at aligned t = 0, so warm-up jitter and different launch times do not shift the
// comparison. A run shorter than its warm-up aligns on step 0; a run without steps on its
// first span.
int32_t alignStep(const core::Run& run);
core::TimeNs alignmentOrigin(const core::Run& run);

// ---- Per-rank compute and communication unions (DESIGN.md's C and M). ----
// Which lanes count follows core::stepBreakdown: on a rank that has GpuStream lanes with spans
// only device spans count, otherwise host spans.
struct RankUnions {
    std::vector<core::Interval> compute; // C, sorted and disjoint
    std::vector<core::Interval> comm;    // M, sorted and disjoint
};
// laneMaxDuration[lane] = the longest span of that lane (lets a window query start from a
// binary search; see LaneLod).
RankUnions rankUnions(const core::Run& run, const std::vector<core::TimeNs>& laneMaxDuration, int32_t rank,
                      core::TimeNs lo, core::TimeNs hi);
std::vector<core::TimeNs> laneMaxDurations(const core::Run& run);
// Sorted-disjoint set algebra.
std::vector<core::Interval> intersectIntervals(const std::vector<core::Interval>& a,
                                               const std::vector<core::Interval>& b);
std::vector<core::Interval> subtractIntervals(const std::vector<core::Interval>& a,
                                              const std::vector<core::Interval>& b);
// One rank's breakdown of one step, by the same definitions as core::stepBreakdown but for one
// (rank, step) only, so a details panel need not analyse the whole run. `found` false when the
// rank has no such step.
core::StepBreakdown rankStepBreakdown(const core::Run& run, const std::vector<core::TimeNs>& laneMaxDuration,
                                      int32_t rank, int32_t step, bool* found = nullptr);

// ---- Buckets at a point in time (replay). ----
enum class BucketState : uint8_t {
    Pending,  // some gradients not ready yet (ready < total)
    Waiting,  // all gradients ready, all-reduce not launched (an earlier bucket holds it back)
    InFlight, // launched, not complete
    Done,
};
const char* bucketStateName(BucketState state);
struct BucketStatus {
    int32_t bucket = 0;
    int64_t bytes = 0;
    int32_t ready = 0;  // gradients ready at the time asked
    int32_t total = 0;  // gradients of the bucket in this step
    BucketState state = BucketState::Pending;
    core::TimeNs launch = -1;     // absolute; -1 if no all-reduce recorded
    core::TimeNs completion = -1;
};
// States of every bucket of `rank` in `step` at absolute time t.
std::vector<BucketStatus> bucketStatesAt(const core::Run& run, int32_t rank, int32_t step, core::TimeNs t);
// The step of `rank` at absolute time t: the last one that started at or before t (the first
// step when t is before all). kNoStep if the rank has no steps.
int32_t stepAt(const core::Run& run, int32_t rank, core::TimeNs t);

// ---- The per-run model of the widget, built once off the GUI thread. ----
struct StepSpan {
    int32_t step = 0;
    core::TimeNs start = 0; // absolute
    core::TimeNs end = 0;
};

// Per (rank, step) numbers of the rank × step heatmap, from core's analyses: step time (the
// step's wall time), the wait the rank caused (the largest wait it caused on one bucket of the
// step, core's StepStraggler rule, 0 when it was late on none) and exposed communication.
// Dense, row-major by rank; NaN where the rank has no such step.
struct RankStepMatrix {
    enum Metric { StepTime, WaitCaused, ExposedComm, MetricCount };
    std::vector<int32_t> ranks; // sorted
    std::vector<int32_t> steps; // sorted
    std::vector<float> values[MetricCount]; // ms, [rankIndex * steps.size() + stepIndex]
    float value(Metric m, size_t rankIndex, size_t stepIndex) const { return values[m][rankIndex * steps.size() + stepIndex]; }
    static const char* metricName(Metric m);
};

class TimelineRunModel {
public:
    // Builds the model of `run`: its level of detail (sub-row packing included), alignment,
    // rows, strips and heatmap (about a second for a 10 M-span run, so the loader calls it in
    // its worker thread). `breakdown` and `stragglers` are core's analyses of the run
    // (core::stepBreakdown, core::stragglers): the loader has them already; the overload without
    // them computes them. Returns null when `stop` is requested before it finishes (a load that
    // a newer one superseded).
    static std::shared_ptr<const TimelineRunModel> build(std::shared_ptr<const core::Run> run,
                                                         const std::vector<core::StepBreakdown>& breakdown,
                                                         const core::StragglerReport& stragglers,
                                                         std::stop_token stop = {});
    static std::shared_ptr<const TimelineRunModel> build(std::shared_ptr<const core::Run> run);
    TimelineRunModel(const TimelineRunModel&) = delete;
    TimelineRunModel& operator=(const TimelineRunModel&) = delete;

    const core::Run& run() const { return *m_run; }
    const std::shared_ptr<const core::Run>& runPtr() const { return m_run; }
    const core::RunLod& lod() const { return m_lod; }
    core::TimeNs origin() const { return m_origin; }
    int32_t alignStep() const { return m_alignStep; }
    core::TimeNs toAligned(core::TimeNs t) const { return t - m_origin; }
    core::TimeNs toAbsolute(core::TimeNs aligned) const { return aligned + m_origin; }
    // Aligned extent of everything in the run.
    core::TimeNs alignedBegin() const { return m_begin - m_origin; }
    core::TimeNs alignedEnd() const { return m_end - m_origin; }

    struct RankLanes {
        int32_t rank = 0;
        std::vector<core::LaneId> lanes; // display order: compute, comm, GPU streams, threads
        core::LaneId stripLane;          // the lane row that carries the overlap strip
        core::LaneId commLane;           // where bucket all-reduces are drawn (== stripLane when any)
        bool hasCommLane = false;
        std::vector<StepSpan> steps;     // this rank's steps, sorted by step
        // Per step (parallel to `steps`): overlapped and exposed communication time from core's
        // step breakdown, for the zoomed-out strip that colours whole steps by the exposed share.
        std::vector<std::pair<core::TimeNs, core::TimeNs>> stepOverlap;
        core::TimeNs meanStepNs = 0;     // over the rank's steps, for the strip's detail switch
        // For ordering ranks: mean steady step time (core's breakdown) and mean wait caused per
        // steady step (core's straggler report); NaN when unknown.
        double steadyStepNs = 0;
        double meanWaitCausedNs = 0;
        // Overlap strip pieces as spans (kind Comm), so LaneLod folds them like any lane.
        std::vector<core::Span> overlapped;
        std::vector<core::Span> exposed;
        core::LaneLod overlappedLod;
        core::LaneLod exposedLod;
        const StepSpan* step(int32_t s) const; // nullptr when the rank has no such step
    };
    const std::vector<std::unique_ptr<RankLanes>>& ranks() const { return m_ranks; }
    const RankLanes* rank(int32_t r) const; // binary search

    // Step windows over all ranks (min start, max end), sorted by step.
    const std::vector<StepSpan>& steps() const { return m_steps; }
    const StepSpan* step(int32_t s) const;
    // Step straggler per step (rank -1 when none), sorted by step.
    const std::vector<core::StepStraggler>& stepStragglers() const { return m_stragglers.perStep; }
    // Run-level stragglers (DESIGN.md's rule, core's verdict).
    const std::vector<int32_t>& runStragglers() const { return m_stragglers.stragglers; }
    // Core's straggler report: per (step, bucket) arrival skew, late rank and wait caused.
    const core::StragglerReport& stragglerReport() const { return m_stragglers; }
    // The skew record of (step, bucket); nullptr when there is none (one rank, or not recorded).
    const core::BucketSkew* bucketSkew(int32_t step, int32_t bucket) const;
    const RankStepMatrix& rankStepMatrix() const { return m_matrix; }
    // [first, last) of run.instants on a lane.
    std::pair<size_t, size_t> laneInstants(core::LaneId lane) const { return m_laneInstants[lane.v]; }
    const std::vector<core::TimeNs>& laneMaxDurations() const { return m_laneMaxDuration; }

private:
    explicit TimelineRunModel(std::shared_ptr<const core::Run> run);
    bool construct(const std::vector<core::StepBreakdown>& breakdown, const core::StragglerReport& stragglers,
                   std::stop_token stop);

    std::shared_ptr<const core::Run> m_run;
    core::RunLod m_lod;
    core::TimeNs m_origin = 0;
    int32_t m_alignStep = 0;
    core::TimeNs m_begin = 0;
    core::TimeNs m_end = 0;
    std::vector<std::unique_ptr<RankLanes>> m_ranks;
    std::vector<StepSpan> m_steps;
    core::StragglerReport m_stragglers;
    RankStepMatrix m_matrix;
    std::vector<std::pair<size_t, size_t>> m_laneInstants;
    std::vector<core::TimeNs> m_laneMaxDuration;
};

} // namespace lockstep::ui
