// What the timeline knows about one run, computed once when the run is given (off the paint
// path) and kept: its level of detail, its time alignment, its rows, per-step overlap strips,
// step boundaries and step stragglers. Painting only queries these structures for the visible
// window; nothing here loops over all spans per frame.
//
// The metrics themselves (alignment, unions, breakdowns, bucket states, stragglers) are core's;
// this file only arranges them for drawing.
#pragma once

#include "lockstep/core/analysis.h"
#include "lockstep/core/lod.h"
#include "lockstep/core/types.h"

#include <memory>
#include <vector>

namespace lockstep::ui {

// ---- Metrics come from core (lockstep/core/analysis.h): these names keep the widget's call
// sites while it moves to calling core directly. Alignment, the interval algebra, bucket states
// and the step breakdown are core's; nothing here computes a metric of its own.
using core::alignmentOrigin;
using core::alignStep;
using core::BucketState;
using core::bucketStateName;
using core::BucketStatus;
using core::bucketStatesAt;
using core::intersectIntervals;
using core::laneMaxDurations;
using core::RankUnions;
using core::stepAt;
using core::subtractIntervals;
// Thin adapters over core::RunIndex for callers that hold a Run but no model; each call builds
// an index (cheap on host runs, one pass over the GPU lanes otherwise). Prefer
// TimelineRunModel::index(). `found` is false when the rank has no such step.
RankUnions rankUnions(const core::Run& run, const std::vector<core::TimeNs>& laneMaxDuration, int32_t rank,
                      core::TimeNs lo, core::TimeNs hi);
core::StepBreakdown rankStepBreakdown(const core::Run& run, const std::vector<core::TimeNs>& laneMaxDuration,
                                      int32_t rank, int32_t step, bool* found = nullptr);

// ---- The cached per-run model of the widget. ----
struct StepSpan {
    int32_t step = 0;
    core::TimeNs start = 0; // absolute
    core::TimeNs end = 0;
};

class TimelineRunModel {
public:
    explicit TimelineRunModel(std::shared_ptr<const core::Run> run);
    // The model of `run`, built once and shared while anyone holds it: the timeline page and
    // the compare page showing one 10M-span run share one LOD. Runs are immutable values
    // (a live run that grows arrives as a new Run), so the run's address is a safe key while
    // the model (which holds the run) is alive. Thread-safe.
    static std::shared_ptr<const TimelineRunModel> shared(std::shared_ptr<const core::Run> run);
    TimelineRunModel(const TimelineRunModel&) = delete;
    TimelineRunModel& operator=(const TimelineRunModel&) = delete;

    const core::Run& run() const { return *m_run; }
    const std::shared_ptr<const core::Run>& runPtr() const { return m_run; }
    const core::RunLod& lod() const { return m_lod; }
    // Core's per-rank queries on this run (breakdown of a step or a range, C/M/Mem unions).
    const core::RunIndex& index() const { return *m_index; }
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
        std::vector<StepSpan> steps;     // this rank's steps, sorted by step
        // Per step (parallel to `steps`): overlapped and exposed communication time, for the
        // zoomed-out strip that colours whole steps by how much communication was exposed.
        std::vector<std::pair<core::TimeNs, core::TimeNs>> stepOverlap;
        core::TimeNs meanStepNs = 0;
        // Overlap strip pieces as spans (kind Comm), so LaneLod folds them like any lane.
        std::vector<core::Span> overlapped;
        std::vector<core::Span> exposed;
        core::LaneLod overlappedLod;
        core::LaneLod exposedLod;
    };
    const std::vector<std::unique_ptr<RankLanes>>& ranks() const { return m_ranks; }
    const RankLanes* rank(int32_t r) const;

    // Step windows over all ranks (min start, max end), sorted by step.
    const std::vector<StepSpan>& steps() const { return m_steps; }
    const StepSpan* step(int32_t s) const;
    // Step straggler per step (rank -1 when none), sorted by step.
    const std::vector<core::StepStraggler>& stepStragglers() const { return m_stragglers; }
    // Run-level stragglers (core::stragglers: the evidence must clear the run's noise).
    const std::vector<int32_t>& runStragglers() const { return m_runStragglers; }
    // [first, last) of run.instants on a lane.
    std::pair<size_t, size_t> laneInstants(core::LaneId lane) const { return m_laneInstants[lane.v]; }
    const std::vector<core::TimeNs>& laneMaxDurations() const { return m_index->laneMaxDurations(); }

private:
    std::shared_ptr<const core::Run> m_run;
    core::RunLod m_lod;
    std::unique_ptr<core::RunIndex> m_index;
    core::TimeNs m_origin = 0;
    int32_t m_alignStep = 0;
    core::TimeNs m_begin = 0;
    core::TimeNs m_end = 0;
    std::vector<std::unique_ptr<RankLanes>> m_ranks;
    std::vector<StepSpan> m_steps;
    std::vector<core::StepStraggler> m_stragglers;
    std::vector<int32_t> m_runStragglers;
    std::vector<std::pair<size_t, size_t>> m_laneInstants;
};

} // namespace lockstep::ui
