// Analyses: pure functions over a loaded Run, exactly as docs/design.md ("Vocabulary and exact metric
// definitions") defines each metric. `lockstep report`, `report --json`, the timeline, the
// summary panel and the charts all read these results; nothing else computes a metric.
//
// What is here, and who uses it:
//  - steadySteps(): which steps run-level numbers use, and why (the warm-up rule, stated).
//  - alignStep()/alignmentOrigin(): where a run's t = 0 is when runs are compared.
//  - stepBreakdown(): per (rank, step) the five parts of the step's window W that add up to |W|:
//    compute-only, overlapped, exposed communication, memory-only, idle.
//  - RunIndex: the same breakdown for ONE (rank, step) or any time range of one rank without
//    analysing the whole run (details panel, measure tool), and the per-rank C / M / Mem unions
//    the timeline draws as overlap strips.
//  - bucketStats(), bucketStatesAt(): per (rank, step, bucket) statistics; bucket states at an
//    instant (replay).
//  - stragglers(): arrival skew, late rank, wait caused (mean over the other ranks) and
//    rank-time lost (the sum) per bucket; the step straggler; the run straggler with the evidence
//    that it clears the run's own noise.
//  - analyze(): all of the above at once (each computed once) plus the run summary and per-rank
//    summaries; summarize() is its summary alone.
//  - comparison.h (included): configuration signatures, like-for-like grouping, scaling.
//
// Analyses that compare ranks expect clock-corrected times (RunReader::load does that).
// Not applicable values are NaN (JSON null, "—" on screen); see RunSummary::multiRank.
#pragma once

#include "lockstep/core/comparison.h"
#include "lockstep/core/intervals.h"
#include "lockstep/core/result.h"
#include "lockstep/core/types.h"

#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

namespace lockstep::core {

// ---------------------------------------------------------------------------------------------
// Steady steps
//
// Run-level numbers exclude the first warm-up steps: steps numbered below config.warmupSteps
// (runs recorded by Lockstep number steps from 0, so that is the first `--warmup` steps; an
// import stores the number of its first steady step there, see ImportOptions::warmupSteps).
// A run with no step past the warm-up uses every step instead of reporting nothing, and says so
// (fallback = true): never silently.
struct SteadySteps {
    int32_t warmupSteps = 0;     // the run's config.warmupSteps
    bool fallback = false;       // no step past the warm-up: `steps` holds every step
    std::vector<int32_t> steps;  // the steps run-level numbers use, ascending, distinct
    int32_t allSteps = 0;        // distinct steps in the run
    bool contains(int32_t step) const;
    // One sentence for reports: "steps 3-19 (17 steps; the first 3 are warm-up)", or
    // "no step past the warm-up (steps below 3): all 2 steps (0-1) are used".
    std::string describe() const;
};
SteadySteps steadySteps(const Run& run);

// ---------------------------------------------------------------------------------------------
// Alignment: the one place that decides where a run's t = 0 is. Runs are compared step against
// step: the first steady step of each run starts at aligned t = 0, so warm-up jitter and
// different launch times do not shift the comparison. A run without steps aligns on its first
// span.
int32_t alignStep(const Run& run);
TimeNs alignmentOrigin(const Run& run);

// ---------------------------------------------------------------------------------------------
// Step breakdown
//
// Which spans count (the one lane classification, docs/design.md):
//  - a rank that has a GpuStream lane with device work (isDeviceKind) follows the DEVICE rule:
//    C, M and Mem are that rank's device spans (host spans would count the same work twice,
//    shifted by the launch latency), taken BY TIME whatever step launched them; the windows of
//    consecutive steps TILE the rank's time: W_s runs from the first device work launched by
//    step s (Span::step, set from correlation ids by the importers and the CUPTI collector) to
//    the first device work launched by step s+1; the last window ends at the later of its last
//    device work and its host step's end. A GPU waiting for its host is idle inside the step.
//    Where the rank's collectives run on the host (no communication kernel, host collectives
//    with a bucket: gloo over CUDA tensors), its host collectives and the copies tagged with a
//    bucket (their staging) are M, and its training threads' work is C beside the kernels.
//  - every other rank follows the HOST rule: its spans on all lanes but GpuStream lanes, taken
//    by time inside the host window W = [step start, step end] (a span crossing the boundary is
//    split between the steps).
// Within the rule, spanCategory() says which of C (compute), M (communication) and Mem (memory)
// a span is in; "other" spans (data loading, the wait, annotations) are in none. Communication
// is judged against all of the rank's compute by time (Holistic Trace Analysis's rule), so in a
// pipelined job step s+1's compute hides step s's collective.
enum class StepWindow : uint8_t {
    Host = 0,         // W = the host step window
    Device = 1,       // W = the step's tiling device window (see above)
    NoDeviceWork = 2, // a device-rule rank launched nothing in this step: W is empty
};
const char* stepWindowName(StepWindow window);

// The window's totals and its five parts (intervals.h WindowParts: wall, compute, communication,
// memory, computeOnly, overlapped, exposed, memoryOnly, idle; the parts add up to wall exactly).
struct StepBreakdown : WindowParts {
    int32_t rank = 0;
    int32_t step = 0;         // kNoStep for a range breakdown
    TimeNs start = 0;         // W
    TimeNs end = 0;
    double overlapRatio = 0;  // overlapped / communication; NaN when communication == 0 or on a
                              // 1-rank run (not applicable: nothing to hide)
    bool warmup = false;      // step < config.warmupSteps
    bool steady = false;      // used for run-level numbers (SteadySteps::contains)
    StepWindow window = StepWindow::Host;
    int64_t cpuNs = -1;       // the step's Step::cpuNs and runqNs: its training thread on a CPU
    int64_t runqNs = -1;      // and waiting for one (-1 = not measured)
};
// Every (rank, step) of run.steps, sorted by (rank, step). O(spans + U log U) where U is the
// size of the per-rank unions (see analysis.cpp).
std::vector<StepBreakdown> stepBreakdown(const Run& run);

// C, M and Mem of one rank in some window, as sets (sorted, disjoint).
struct RankUnions {
    std::vector<Interval> compute; // C
    std::vector<Interval> comm;    // M
    std::vector<Interval> memory;  // Mem
};

// The longest span of each lane (indexed by lane id): a window query starts from a binary search
// on start and steps back by this much (spans are sorted by start, not by end).
std::vector<TimeNs> laneMaxDurations(const Run& run);

// Per-rank queries without analysing the whole run. Construction is one pass over the spans
// (lane extents, which ranks follow the device rule, each device step's window); every query
// then costs what lies inside its window. The index keeps a reference: the Run must outlive it
// and must not change. Thread-safe for concurrent queries (const).
class RunIndex {
public:
    explicit RunIndex(const Run& run);
    // The same with the lanes' longest spans already known (laneMaxDurations(run), or a level of
    // detail's): construction then reads each span's kind once (which rule each rank follows,
    // detail::rankRules) and the GPU lanes' spans for the windows.
    RunIndex(const Run& run, std::vector<TimeNs> laneMaxDuration);

    const Run& run() const { return *m_run; }
    // Ranks that own a lane or a step, ascending.
    const std::vector<int32_t>& ranks() const { return m_ranks; }
    // True when `rank` follows the device rule (see above).
    bool deviceRule(int32_t rank) const;
    // The lanes whose spans count for `rank` (device lanes under the device rule, with its host
    // lanes where its collectives run on the host; else the host lanes), in lane id order.
    std::span<const LaneId> countedLanes(int32_t rank) const;
    const std::vector<TimeNs>& laneMaxDurations() const { return m_laneMax; }

    // W of (rank, step); nullopt when the rank has no such step. An empty window (NoDeviceWork)
    // has start == end == the host step's start.
    std::optional<StepBreakdown> stepBreakdown(int32_t rank, int32_t step) const;
    // The five parts of any window [lo, hi) of one rank, by time (the measure tool): under the
    // device rule every device span of the rank that overlaps the window counts, whatever step
    // launched it. step = kNoStep, window = Host or Device after the rank's rule.
    StepBreakdown rangeBreakdown(int32_t rank, TimeNs lo, TimeNs hi) const;
    // C, M, Mem of `rank` clipped to [lo, hi), by time (overlap strips of a visible window).
    RankUnions unions(int32_t rank, TimeNs lo, TimeNs hi) const;
    // Exactly what stepBreakdown(rank, step) counts: the rank's spans clipped to the step's
    // window (host window, or the tiling device window). Empty when there is no such step.
    RankUnions stepUnions(int32_t rank, int32_t step) const;
    // The rank's communication span of `step` with the most bytes (the first in span order among
    // equals): what the app selects when it jumps to a step. Each lane of the rank is searched
    // from the step's host start (nothing the step launched starts before it): a host lane to the
    // host step's end (its work of the step starts inside it), a GPU stream until a span of a
    // later step starts after the host step's end (a stream runs its work in launch order).
    // Costs what the lanes hold in that window, not the run. Index into run().spans; nullopt
    // when the step has no communication on the rank.
    std::optional<size_t> largestCollective(int32_t rank, int32_t step) const;

private:
    struct RankEntry {
        int32_t rank = 0;
        bool device = false;
        bool hostCollectives = false; // device rule, collectives on the host (countedCategory)
        std::vector<LaneId> counted;
    };
    struct DeviceStep {
        int32_t rank, step;
        TimeNs first, last; // the step's tiling window on the rank
    };
    const RankEntry* entry(int32_t rank) const;
    const Step* findStep(int32_t rank, int32_t step) const;
    const DeviceStep* findDeviceStep(int32_t rank, int32_t step) const;
    RankUnions collect(const RankEntry& e, TimeNs lo, TimeNs hi) const;
    StepBreakdown partsOf(const RankEntry& e, const RankUnions& u, TimeNs lo, TimeNs hi) const;

    const Run* m_run;
    std::vector<int32_t> m_ranks;
    std::vector<RankEntry> m_entries; // parallel to m_ranks
    std::vector<TimeNs> m_laneMax;
    std::vector<DeviceStep> m_deviceSteps; // sorted by (rank, step)
    int32_t m_worldSize = 1;
    SteadySteps m_steady;
};

// ---------------------------------------------------------------------------------------------
// Buckets

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
    // The bucket's own time: [max(launch, the latest completion of the rank's buckets launched
    // before it), completion]. A rank's all-reduces run one at a time in launch order, so at any
    // moment the oldest unfinished one is what the rank waits for: every instant of the rank's
    // bucket communication is owned by exactly one bucket (docs/metrics.md "Buckets").
    TimeNs exposed = -1;       // |own ∩ M \ C|: communication with no compute of the rank (any
                               // step's) beside it; the buckets' exposed times add up to the
                               // rank's exposed bucket communication (-1 on 1 rank)
    TimeNs hidden = -1;        // |own ∩ M ∩ C| (-1 on 1 rank)
    TimeNs ownStart = -1;      // where its own time starts (its end is completion; -1 on 1 rank)
    int64_t bytes = 0;         // 0: unknown (the trace gives no size)
    double algbwGBps = 0;      // bytes / duration (GB/s, 1e9); NaN on 1 rank or without bytes
    double busbwGBps = 0;      // algbw * 2(N-1)/N
};
// Sorted by (rank, step, bucket).
std::vector<BucketStat> bucketStats(const Run& run);

// Buckets at a point in time (the replay's table).
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
    TimeNs launch = -1;     // absolute; -1 if no all-reduce recorded
    TimeNs completion = -1;
};
// States of every bucket of `rank` in `step` at absolute time t.
std::vector<BucketStatus> bucketStatesAt(const Run& run, int32_t rank, int32_t step, TimeNs t);
// The step of `rank` at absolute time t: the last one that started at or before t (the first
// step when t is before all). kNoStep if the rank has no steps.
int32_t stepAt(const Run& run, int32_t rank, TimeNs t);

// ---------------------------------------------------------------------------------------------
// Stragglers (docs/design.md; the rule and its noise test are explained in stragglers.cpp)

struct BucketSkew {
    int32_t step = 0;
    int32_t bucket = 0;
    int32_t ranks = 0;        // ranks that launched this bucket in this step
    TimeNs skew = 0;          // max launch - min launch over ranks
    int32_t lateRank = -1;    // the last rank to launch (ties: the lower rank)
    TimeNs waitCaused = 0;    // MEAN over the other ranks of (late launch - their launch)
    TimeNs rankTimeLost = 0;  // the SUM over the other ranks of the same ("rank-time lost")
};
struct StepStraggler {
    int32_t step = 0;
    int32_t rank = -1;        // the rank that caused the most wait in this step (-1: none)
    TimeNs waitCaused = 0;    // the largest wait it caused on one bucket of the step (the waits
                              // of one step overlap in time, so they are not added up)
    TimeNs rankTimeLost = 0;  // rank-time lost on that same bucket
    TimeNs stepTime = 0;      // mean W over ranks (StepBreakdown::wall)
};
// One rank in one step.
struct RankStepWait {
    int32_t rank = 0;
    int32_t step = 0;
    TimeNs waitCaused = 0;    // the largest wait it caused on a bucket of the step (0: never late)
    double latenessNs = 0;    // its launch - the mean launch of the others, on the step's most
                              // skewed bucket (negative: early; NaN: not in that bucket)
};
struct RankStraggle {
    int32_t rank = 0;
    int stepsAsStraggler = 0;   // steady steps where this rank was the step straggler
    double meanWaitNs = 0;      // mean over steady steps of the wait this rank caused
    double meanWaitFraction = 0; // meanWaitNs / mean steady step time
    double medianLatenessNs = 0; // median over steady steps of RankStepWait::latenessNs
};
// Why the run has (or has no) straggler: every number the decision used.
// What the scheduler statistics say of the candidate's systematic delay (stragglers.cpp).
enum class StragglerCause {
    Unknown,  // not measured (imported traces, older files), or no delay to explain
    // Its extra run-queue wait + extra CPU time over the others' is at least half of it, and:
    CpuWait,  // the wait is the larger part: the machine ran it later
    CpuTime,  // the CPU time is: more work, or the same on a slower core
    Elsewhere // less than half: the delay is not on its training thread's CPU (I/O, other threads, network)
};
const char* stragglerCauseName(StragglerCause cause); // "unknown", "cpu-wait", "cpu-time", "elsewhere"
const char* stragglerCauseText(StragglerCause cause); // the sentence the report and the app show; "" if unknown

struct StragglerEvidence {
    bool applicable = false;     // false on 1-rank runs, runs without bucket collectives and runs
                                 // whose ranks' clocks are not comparable
    std::string notApplicable;   // why not, when !applicable: "1 rank", ...
    int32_t candidate = -1;      // the rank that was the step straggler most often (-1: none)
    int steadySteps = 0;         // steady steps with collectives
    int stepsLate = 0;           // of which the candidate was the step straggler
    double meanWaitNs = 0;       // the wait it caused, mean over steady steps
    double meanStepNs = 0;       // mean steady step time
    double waitFraction = 0;     // meanWaitNs / meanStepNs
    double latenessAboveOthersNs = 0; // its median lateness - the others' median lateness
    double noiseSpreadNs = 0;    // sigma: robust spread (1.4826 x MAD) of the other ranks' lateness
    double noiseFloorNs = 0;     // 2 standard errors of the difference of median latenesses over
                                 // the n steady steps of N ranks: 2 x 1.2533 x sigma x N/(N-1) / sqrt(n)
    double systematicDelayNs = 0; // how late it is itself: latenessAboveOthersNs x (N-1) / N
    double delayFraction = 0;    // systematicDelayNs / meanStepNs
    double rankSpreadNs = 0;     // standard deviation of the other ranks' median latenesses (NaN: < 2 others)
    double rankFloorNs = 0;      // 2 x rankSpreadNs x sqrt(1 + 1/k) over k others (0: fewer than 2 others)
    double chance = 1;           // probability that noise alone makes some rank late this often
    // How far the candidate's clock may sit from the others' (clock_sync.h): its uncertainty
    // against rank 0 plus the largest of the other ranks'. 0 when all share one clock.
    double clockUncertaintyNs = 0;
    double clockFloorNs = 0;     // the same in the lead's units: clockUncertaintyNs x N/(N-1)
    bool mostSteps = false;      // stepsLate > steadySteps / 2 and chance <= 5%
    bool waitAboveThreshold = false; // waitFraction >= 5% and delayFraction >= 5%
    // latenessAboveOthersNs > 0 and >= clockFloorNs + each floor (noise, rank): a lead the
    // clocks alone could produce is no evidence
    bool clearsNoise = false;
    // The lead clears the floors but not the clock's uncertainty on top of them: the verdict is
    // "none (clock +-...)", the clocks stand in the way
    bool withinClock = false;
    bool straggler = false;      // all three
    double confidence() const { return 1.0 - chance; }
    // The cause, from the kernel's scheduler statistics of each rank's training thread
    // (Step::cpuNs, runqNs; stragglers.cpp, "The cause"): means per steady step with collectives,
    // the candidate's and the mean over the other ranks of theirs; NaN where not measured.
    double cpuMs = std::numeric_limits<double>::quiet_NaN();        // time on a CPU
    double othersCpuMs = std::numeric_limits<double>::quiet_NaN();
    double runqMs = std::numeric_limits<double>::quiet_NaN();       // runnable, waiting for a CPU
    double othersRunqMs = std::numeric_limits<double>::quiet_NaN();
    StragglerCause cause = StragglerCause::Unknown;
    // The cause explains a verdict and never makes one: it is stated for a straggler, or for a
    // candidate whose systematic delay is of the size that matters (>= 5 % of the step) — not for
    // a delay so small that any explanation of it would read as a finding.
    bool causeWorthStating() const
    {
        return cause != StragglerCause::Unknown && candidate >= 0 && (straggler || delayFraction >= 0.05);
    }
};
struct StragglerReport {
    std::vector<BucketSkew> skews;        // sorted by (step, bucket)
    std::vector<StepStraggler> perStep;   // sorted by step
    std::vector<RankStepWait> perRankStep; // sorted by (rank, step)
    std::vector<RankStraggle> perRank;    // sorted by rank
    std::vector<int32_t> stragglers;      // the run straggler, if the evidence names one
    StragglerEvidence evidence;
};
StragglerReport stragglers(const Run& run);

// ---------------------------------------------------------------------------------------------
// Summary

// Means over steady steps and ranks, per bucket.
struct BucketSummary {
    int32_t bucket = 0;
    int64_t bytes = 0;              // 0: unknown (shown "unknown", JSON null)
    int32_t params = 0;             // 0: unknown (an imported trace names no parameters)
    std::vector<std::string> paramNames;
    double meanReadyToLaunchMs = 0; // NaN when no gradient-ready instant was recorded
    double meanDurationMs = 0;
    double meanExposedMs = 0;       // mean BucketStat::exposed; NaN on 1-rank runs
    double meanHiddenMs = 0;        // mean BucketStat::hidden; NaN on 1-rank runs
    double meanAlgbwGBps = 0;       // bytes / meanDurationMs; NaN on 1-rank runs or without bytes
    double meanBusbwGBps = 0;       // algbw x 2(N-1)/N; NaN likewise
    double meanSkewMs = 0;          // NaN on 1-rank runs
    double meanWaitCausedMs = 0;    // NaN on 1-rank runs
    int32_t lateRank = -1;          // the rank that launched it last most often (-1: none)
};

// Means over this rank's steady steps (the per-rank table, the heatmap's rows).
struct RankSummary {
    int32_t rank = 0;
    int32_t steps = 0;
    double stepTimeMs = 0;
    double computeMs = 0, commMs = 0, memoryMs = 0;
    double computeOnlyMs = 0, overlappedMs = 0, exposedCommMs = 0, memoryOnlyMs = 0, idleMs = 0;
    double overlapRatio = 0;      // NaN: no communication or 1-rank run
    int stepsAsStraggler = 0;
    double meanWaitCausedMs = 0;  // NaN on 1-rank runs
    // Its training thread per steady step (Step::cpuNs, runqNs): time on a CPU and time waiting
    // for one; NaN when not measured.
    double cpuMs = std::numeric_limits<double>::quiet_NaN();
    double runqMs = std::numeric_limits<double>::quiet_NaN();
};

struct RunSummary {
    // As recorded (its name defaulting to the file's stem, run_db.cpp): the run's identity and
    // settings live here only (name, model, backend, status, bucket cap...), and the report's
    // "config" iterates its field table (fields.h).
    RunConfig config;
    // Not config.worldSize: the ranks the run has when the configuration does not say (0, an
    // imported trace), else the configuration's.
    int32_t worldSize = 0;
    int32_t steps = 0;          // steps present (max over ranks of completed steps)
    int32_t steadySteps = 0;    // steps used for the means (see steady)
    SteadySteps steady;
    bool multiRank = false;     // world size > 1: overlap, exposed and stragglers apply
    std::string window;         // "host", "device" or "host+device" (which StepWindow rules)
    // Means over steady steps and ranks:
    double stepTimeMs = 0;
    double computeMs = 0;
    double commMs = 0;
    double memoryMs = 0;
    double computeOnlyMs = 0;
    double overlappedMs = 0;    // NaN on 1-rank runs
    double exposedCommMs = 0;   // NaN on 1-rank runs
    // The part of exposedCommMs the buckets own: mean over steady (rank, step) of the exposed
    // part of every bucket's own time inside the step's window W, whatever step launched it.
    // exposedCommMs - bucketExposedMs (>= 0) is communication outside DDP's buckets (a broadcast,
    // the user's own collectives). NaN on 1-rank runs.
    double bucketExposedMs = 0;
    double memoryOnlyMs = 0;
    double idleMs = 0;
    double overlapRatio = 0;    // sum overlapped / sum communication over steady steps; NaN if
                                // no communication or a 1-rank run
    double throughput = 0;      // samples/s = samples per step (all ranks) / mean step time; NaN:
                                // the samples are unknown (an imported trace)
    std::vector<int32_t> stragglers;
    std::vector<double> stragglerWaitMs; // parallel to stragglers: mean wait each caused per steady step
    StragglerEvidence straggler;
    std::vector<BucketSummary> buckets;
    int64_t spans = 0;
    int64_t diagnostics = 0;    // sum of diagnostic counts
    int64_t deviceSpansWithoutStep = 0; // device work that belongs to no step (not in any W)
    ConfigSignature signature;  // what makes runs comparable (comparison.h)
};

struct RunAnalysis {
    SteadySteps steady;
    std::vector<StepBreakdown> steps;   // stepBreakdown()
    std::vector<BucketStat> buckets;    // bucketStats()
    StragglerReport stragglers;         // stragglers()
    std::vector<RankSummary> ranks;     // sorted by rank
    RunSummary summary;
};
// Everything, each part computed once.
RunAnalysis analyze(const Run& run);
// The same, giving up with ErrorCode::Cancelled (kCancelled, run_db.h) once `stop` is requested (between analyses).
Result<RunAnalysis> analyze(const Run& run, std::stop_token stop);
RunSummary summarize(const Run& run);

} // namespace lockstep::core
