// What the timeline knows about one run, computed once in the loader's worker thread and kept:
// its level of detail (with each lane's sub-rows), its time alignment, its rows, per-step overlap
// strips, step boundaries, step stragglers and the rank × step heatmap. Painting only queries
// these structures for the visible window; nothing here loops over all spans per frame.
//
// The metrics themselves (alignment, unions, breakdowns, bucket states, stragglers, per-rank
// summaries) are core's (lockstep/core/analysis.h: core::analyze and core::RunIndex); this file
// only arranges them for drawing.
#pragma once

#include "lockstep/core/analysis.h"
#include "lockstep/core/lod.h"
#include "lockstep/core/run_overview.h"
#include "lockstep/core/types.h"

#include <memory>
#include <stop_token>
#include <vector>

namespace lockstep::ui {

struct StepSpan {
    int32_t step = 0;
    core::TimeNs start = 0; // absolute
    core::TimeNs end = 0;
};

// Per (rank, step) numbers of the rank × step heatmap, straight from core's analysis: step time
// (StepBreakdown::wall), the wait the rank caused (RankStepWait::waitCaused: the largest wait it
// caused on one bucket of the step) and its exposed communication (StepBreakdown::exposed).
// Dense, row-major by rank, in ms; NaN where the rank has no such step or the number is not
// applicable (wait and exposed communication on a 1-rank run).
struct RankStepMatrix {
    enum Metric { StepTime, WaitCaused, ExposedComm, CpuWait, MetricCount };
    std::vector<int32_t> ranks; // sorted
    std::vector<int32_t> steps; // sorted
    std::vector<float> values[MetricCount];
    float value(Metric m, size_t rankIndex, size_t stepIndex) const { return values[m][rankIndex * steps.size() + stepIndex]; }
    static const char* metricName(Metric m);
};

class TimelineRunModel {
public:
    // Builds the model of `run`: its level of detail (sub-row packing included), alignment,
    // rows, strips and heatmap (about a second for a 10 M-span run, so the loader calls it in
    // its worker thread). `analysis` is core::analyze(run), which the loader has already; the
    // overload without it computes it. Returns null when `stop` is requested before it finishes
    // (a load that a newer one superseded).
    static std::shared_ptr<const TimelineRunModel> build(std::shared_ptr<const core::Run> run,
                                                         std::shared_ptr<const core::RunAnalysis> analysis,
                                                         std::stop_token stop = {});
    static std::shared_ptr<const TimelineRunModel> build(std::shared_ptr<const core::Run> run);
    // The model of a run known by its stored overview (core/run_overview.h) before, or instead
    // of, its spans: `header` is the run's small tables (no spans), `analysis` its stored
    // analysis. The lanes draw the overview's items (exactly what the spans would draw, zoomed out
    // to each lane's fold gap: lod.h); the overlap strips colour whole steps by core's per-step
    // numbers; nothing that needs a span (selection, measuring, search, core::RunIndex) is
    // answered: detailed() is false. Null when the overview does not fit the run, or on `stop`.
    // With `detail`, the spans streamed for its windows replace the overview's items there
    // (core::overviewRun): exact at any zoom inside them.
    static std::shared_ptr<const TimelineRunModel> buildOverview(const core::Run& header,
                                                                 const core::RunOverview& overview,
                                                                 std::shared_ptr<const core::RunAnalysis> analysis,
                                                                 std::stop_token stop = {},
                                                                 const core::OverviewDetail* detail = nullptr);
    // An overview model's fold gap of `lane` (0 on a detailed model): exact at thresholds ≥ it.
    core::TimeNs overviewGap(core::LaneId lane) const { return lane.v < m_gaps.size() ? m_gaps[lane.v] : 0; }
    // Whether the spans of `lane` over [t0, t1) (absolute) are drawn exactly at any zoom: a
    // detailed model, or a streamed window that covers them.
    bool hasSpans(core::LaneId lane, core::TimeNs t0, core::TimeNs t1) const;
    // False for a model built from an overview: its run's spans stand for the overview's items.
    bool detailed() const { return !m_overview; }
    TimelineRunModel(const TimelineRunModel&) = delete;
    TimelineRunModel& operator=(const TimelineRunModel&) = delete;

    const core::Run& run() const { return *m_run; }
    const std::shared_ptr<const core::Run>& runPtr() const { return m_run; }
    const core::RunAnalysis& analysis() const { return *m_analysis; }
    const std::shared_ptr<const core::RunAnalysis>& analysisPtr() const { return m_analysis; }
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
        // Per step (parallel to `steps`): overlapped and exposed communication time from core's
        // step breakdown, for the zoomed-out strip that colours whole steps by the exposed share.
        std::vector<std::pair<core::TimeNs, core::TimeNs>> stepOverlap;
        core::TimeNs meanStepNs = 0;     // over the rank's steps, for the strip's detail switch
        // For ordering ranks (core's RankSummary): mean steady step time and mean wait caused
        // per steady step, ns; NaN when not applicable.
        double steadyStepNs = 0;
        double meanWaitCausedNs = 0;
        // Overlap strip pieces as spans (kind Comm), so LaneLod folds them like any lane.
        std::vector<core::Span> overlapped;
        std::vector<core::Span> exposed;
        core::LaneLod overlappedLod;
        core::LaneLod exposedLod;
        // Nearly idle GPU streams (a trace's dozens of streams that ran a copy or two): each
        // busy for less than kQuietStreamShare of the rank's busiest stream, carrying no
        // communication. The timeline folds them into one "other streams" row that draws the
        // union of their spans (`quietUnion`, as spans of kind Other, folded by `quietLod`).
        // Empty when fewer than two would fold: one row for one lane saves nothing. They are the
        // last GPU streams of `lanes`, in the same order.
        std::vector<core::LaneId> quietLanes;
        std::vector<core::Span> quietUnion;
        core::LaneLod quietLod;
        core::TimeNs quietBusyNs = 0; // the union's length; -1 when not known (an overview of folded lanes)
        const StepSpan* step(int32_t s) const; // nullptr when the rank has no such step
    };
    // A GPU stream is quiet when its busy time is below this share of the rank's busiest stream.
    static constexpr double kQuietStreamShare = 0.05;
    // Whether lane `lane` is one of its rank's quiet streams (folded by default).
    bool isQuietLane(core::LaneId lane) const { return lane.v < m_quietLane.size() && m_quietLane[lane.v]; }
    const std::vector<std::unique_ptr<RankLanes>>& ranks() const { return m_ranks; }
    const RankLanes* rank(int32_t r) const; // binary search

    // Step windows over all ranks (min start, max end), sorted by step.
    const std::vector<StepSpan>& steps() const { return m_steps; }
    const StepSpan* step(int32_t s) const;
    // Step straggler per step (rank -1 when none), sorted by step.
    const std::vector<core::StepStraggler>& stepStragglers() const { return m_analysis->stragglers.perStep; }
    // Run-level stragglers (core: the evidence must clear the run's noise).
    const std::vector<int32_t>& runStragglers() const { return m_analysis->stragglers.stragglers; }
    // Core's skew record of (step, bucket): arrival skew, late rank, wait caused; nullptr when
    // there is none (one rank, or not recorded).
    const core::BucketSkew* bucketSkew(int32_t step, int32_t bucket) const;
    const RankStepMatrix& rankStepMatrix() const { return m_matrix; }
    // Core's breakdown of (rank, step) from the analysis (stored or computed): nullptr when the
    // rank has no such step.
    const core::StepBreakdown* stepBreakdown(int32_t rank, int32_t step) const;
    // [first, last) of run.instants on a lane.
    std::pair<size_t, size_t> laneInstants(core::LaneId lane) const { return m_laneInstants[lane.v]; }
    const std::vector<core::TimeNs>& laneMaxDurations() const { return m_index->laneMaxDurations(); }

private:
    TimelineRunModel(std::shared_ptr<const core::Run> run, std::shared_ptr<const core::RunAnalysis> analysis);
    bool construct(std::stop_token stop, const core::RunOverview* overview = nullptr);
    void computeExtent();
    void indexInstants();
    std::unique_ptr<RankLanes> buildRank(int32_t rank, std::vector<const core::Lane*> lanes,
                                         const std::vector<const core::Step*>& steps);
    void buildMatrix();

    std::shared_ptr<const core::Run> m_run;
    std::shared_ptr<const core::RunAnalysis> m_analysis;
    std::vector<core::DrawItem> m_folded; // an overview's: what each of m_run's spans stands for
    bool m_overview = false;
    std::vector<core::LaneWork> m_work;   // by lane id: what each lane holds (the overview's, or counted)
    std::vector<core::TimeNs> m_gaps;     // an overview's fold gap, by lane id
    std::vector<std::pair<core::TimeNs, core::TimeNs>> m_detail; // a streamed window, by lane id (empty: none)
    core::RunLod m_lod;
    std::unique_ptr<core::RunIndex> m_index;
    core::TimeNs m_origin = 0;
    int32_t m_alignStep = 0;
    core::TimeNs m_begin = 0;
    core::TimeNs m_end = 0;
    std::vector<std::unique_ptr<RankLanes>> m_ranks;
    std::vector<StepSpan> m_steps;
    RankStepMatrix m_matrix;
    std::vector<std::pair<size_t, size_t>> m_laneInstants;
    std::vector<char> m_quietLane; // by lane id
};

} // namespace lockstep::ui
