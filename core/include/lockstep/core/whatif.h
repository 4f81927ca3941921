// What if: predict a run under another configuration (bucket caps, world size, emulated link
// speed, compression) from one recorded run, without running it. The model of the step and the
// reasons behind it are in src/whatif.cpp (the essay; the fit in whatif_fit.cpp, the replay in
// whatif_replay.cpp); this header is the API the CLI (`lockstep predict`,
// `lockstep advise`) and the app's What-if panel use.
//
// Use: build a WhatIfModel once per recorded run (it indexes the run and fits the link, O(run)),
// then call predict() as often as a slider moves: each call replays the recorded steps under the
// new configuration and returns a predicted timeline (a Run that opens, compares and charts like
// any run, marked predicted) plus its numbers. Qt-free, no exceptions: errors are values.
#pragma once

#include "lockstep/core/analysis.h"
#include "lockstep/core/result.h"
#include "lockstep/core/types.h"
#include "lockstep/core/whatif_error.h"

#include <array>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::core {

// ---- What a recording carries for the model -------------------------------------------------
// Re-bucketing at another cap needs every parameter's size, which the bucket table (names and a
// total per bucket) does not give. Recorders store it in the run's config_extra under this key:
// element counts of every parameter in the bucket table's packing order (bucket 0's parameters
// first, each bucket's in its `params` order), comma-separated, e.g. "10,5120,512,262144,...".
// Without it the model regroups whole recorded buckets and says so in its notes.
inline constexpr const char* kParamNumelKey = "param_numel";
std::string formatParamNumel(const std::vector<std::vector<int64_t>>& numelPerBucket);
// Checks the list against the bucket table (one number per parameter, positive).
Result<std::vector<std::vector<int64_t>>> parseParamNumel(std::string_view text, const std::vector<Bucket>& buckets);

// The startup probe of the link: before training, the job's own all-reduce path timed at a few
// small bucket sizes while nothing else runs. A recording whose transfers after backward all have
// one size (the usual one big bucket) cannot tell the link's latency from its bandwidth; the
// probe can. Stored under this key as "bytes:ns,bytes:ns,...": a bucket's bytes on the wire (as
// the bucket table's) and the fastest time over kLinkProbeRepeats turns (the sizes take turns, so
// a burst of load hits each alike), from a barrier's release to the completion on the recording
// rank (noise only ever adds). Both recorders make it with these sizes: Lockstep's runtime
// (instrumentation/src/trainer_torch.cpp) through its own exchange path, the Python recorder
// (python/lockstep/_recorder.py, Recorder._probe_link) through the user's process group at attach.
inline constexpr const char* kLinkProbeKey = "link_probe";
inline constexpr std::array<int64_t, 3> kLinkProbeBytes{4 << 10, 64 << 10, 512 << 10};
inline constexpr int kLinkProbeRepeats = 15;
struct LinkProbePoint {
    int64_t bytes = 0;
    int64_t ns = 0;
};
std::string formatLinkProbe(const std::vector<LinkProbePoint>& points);
Result<std::vector<LinkProbePoint>> parseLinkProbe(std::string_view text);

// The startup probe of compute: ranks that share a host share its cores, caches and memory
// bandwidth, so each rank computes slower beside the others than alone, and a recording on one
// host cannot tell how much. Before training (before any gradient hook exists), when more than one
// rank runs on the host, each rank times one forward + loss + backward of the model on a fixed
// batch (after kComputeProbeWarmupPasses untimed passes, all ranks at once: a model's first passes
// run slow, and after a single one the transformer's timed passes took ~155 ms where training's
// steady forward + backward took 115-140 ms, alone and together alike): "alone", the host's ranks in turn (local rank
// 0, 1, ...) while the others wait in the process group's barrier, blocked; "together", all of them
// at once from a barrier's release. The phases take turns kComputeProbeRepeats times at most, fewer
// for a slow model (kComputeProbeBudgetMs / ((ranks + 1) * the slowest rank's warm-up pass), 1 to
// kComputeProbeRepeats), and the fastest of each is kept (noise only adds).
// A 1-rank run has no other rank on its host: with --threads N it starts a partner process (the
// same worker and flags, for the probe only) and the two take the turns. config_extra
// ["compute_probe_startup"] says what it cost ("865 ms, 2 turns") or why a 1-rank run has none.
// Stored under this key as "alone_ns:together_ns:ranks_on_host" (the processes that ran together:
// the host's ranks, or the rank and its partner); rank 0's is the run's. Lockstep's runtime makes
// it (instrumentation/src/trainer_torch.cpp); the Python recorder does not.
inline constexpr const char* kComputeProbeKey = "compute_probe";
inline constexpr int kComputeProbeWarmupPasses = 3;
inline constexpr int kComputeProbeRepeats = 5;
inline constexpr int64_t kComputeProbeBudgetMs = 900;
struct ComputeProbe {
    int64_t aloneNs = 0;
    int64_t togetherNs = 0;
    int32_t ranksOnHost = 0;
    friend bool operator==(const ComputeProbe&, const ComputeProbe&) = default;
};
std::string formatComputeProbe(const ComputeProbe& probe);
Result<ComputeProbe> parseComputeProbe(std::string_view text); // both times > 0, ranks >= 2

// ---- Predicted runs are marked ---------------------------------------------------------------
// A predicted run's RunConfig::source is kPredictedSource; extra["predicted_from"] names the
// recorded run and extra["predicted_config"] the configuration (describe()). The app shows the
// mark wherever isPredicted() holds.
inline constexpr const char* kPredictedSource = "predicted";
bool isPredicted(const RunConfig& config);

// A configuration to predict: the knobs of `lockstep run` that the model replays. linkGbps is
// the runtime's emulated link (`lockstep run --link-gbps`), 0 = none.
struct WhatIfConfig {
    int64_t bucketCapBytes = 25ll << 20;
    int64_t firstBucketCapBytes = 1ll << 20;
    int32_t worldSize = 2;
    double linkGbps = 0.0;
    std::string compress = "none"; // none | fp16 | bf16
    // Every duration of the training thread's own work (data, forward, backward, launches, the
    // write-back after the wait, optimizer, the gap between steps) times this: 0.5 = compute
    // twice as fast (a faster device), 2 = half as fast; communication keeps its fitted cost.
    double computeScale = 1.0;
    friend bool operator==(const WhatIfConfig&, const WhatIfConfig&) = default;
};
// "4 MiB buckets (first 1 MiB), 2 ranks, link 1 Gbit/s, fp16" — for names and tables.
std::string describe(const WhatIfConfig& config);

// The cost of one bucket's all-reduce on the real link, fitted from the run's own all-reduces
// (whatif.cpp, "Communication"): latencyNs per round of the algorithm, then the bytes each rank
// sends at nsPerByteBusy while backward still computes on some rank (the link shares the CPU or
// the GPU with it) and at nsPerByteIdle once every rank has finished backward.
struct LinkFit {
    bool fitted = false;           // false: nothing to fit (1-rank run, or every all-reduce hidden
                                   // under the recorded emulated link); real communication costs 0
    bool latencySeparable = false; // false: fewer than two bucket sizes moved while idle and no
                                   // usable startup probe: latency 0
    bool latencyFromProbe = false; // the latency is the startup probe's (kLinkProbeKey), not the run's
    double latencyNs = 0;          // per round
    double probeLatencyNs = std::numeric_limits<double>::quiet_NaN(); // the probe's, per round (NaN: none)
    double nsPerByteIdle = 0;      // per byte one rank sends, every rank done with backward
    double nsPerByteBusy = 0;      // the same while some rank is still in backward (>= idle)
    int samples = 0;               // all-reduces the fit used
    int busySamples = 0;           // of which moved (partly) during backward
    double stretchLow = 1;         // each step's own link speed, relative to the fit (its recorded
    double stretchHigh = 1;        //   transfer time / the fit's): 10th and 90th percentile
    double launchNs = 0;           // launch overhead on the training thread: launchNs + bytes *
    double launchNsPerByte = 0;    //   launchNsPerByte (dividing the bucket by the world size)
    // The share of its speed the training thread loses while a transfer runs during its backward
    // (whatif.cpp, "Contention"): min(w, 1 - w), w = nsPerByteIdle / nsPerByteBusy, so at most 1/2.
    double computeSlowdown = 0;
};
inline constexpr double kMaxComputeSlowdown = 0.9;

// The numbers the CLI prints and the panel shows; the same definitions as a measured run's
// summary (they come from summarize() of the predicted run).
struct WhatIfNumbers {
    double stepTimeMs = 0;    // mean over steady steps and ranks
    double overlapRatio = 0;  // NaN when there is no communication (one rank)
    double exposedCommMs = 0;
    double commMs = 0;
    double throughput = 0;    // samples/s, all ranks
    int32_t buckets = 0;
};

struct Prediction {
    WhatIfConfig config;
    WhatIfNumbers numbers;
    Run run;                        // the predicted timeline (empty when not asked for)
    std::vector<std::string> notes; // where this prediction extrapolates beyond the recording
    // Per-rank compute for fewer ranks on the recorded ranks' one host, from the startup compute
    // probe (kComputeProbeKey; whatif.cpp, "World sizes"): it multiplies config.computeScale in the
    // replay; 1 when not applied. config stays as asked.
    double hostComputeFactor = 1.0;
    // Where a real run of this configuration is expected to measure its mean step time (90 %):
    // the model's held-out error for the kinds of change made, widened by the recording's noise
    // (whatif_error.h). Not the self-replay error, which is exact by construction.
    PredictionInterval interval;
    // The same prediction with no contention between transfers and backward (phi = 0): the
    // contention strength is read off the link's rates, not off compute, so a configuration that
    // overlaps much more transfer with backward than the recording did is bounded by both
    // (whatif.cpp, "Contention"); NaN when the model has no contention to bound.
    double noContentionStepMs = std::numeric_limits<double>::quiet_NaN();
};

// The kinds of change `config` makes relative to `recorded` (empty: none).
std::vector<ChangeKind> changeKinds(const WhatIfConfig& recorded, const WhatIfConfig& config);
// A recording's noise, in % of its mean steady step time: 1.645 standard errors of the mean of its
// steady steps' step time (each the mean over ranks), combined in quadrature with the share of
// those steps its ranks waited for a CPU beyond kTableCpuWaitPct (whatif_error.h; 0 when the
// recording has no CPU-wait measurements); NaN with fewer than two steady steps.
double stepNoisePct(const Run& run);

struct PredictOptions {
    // false: numbers only; the predicted Run is built internally and dropped (saves a copy)
    bool keepTimeline = true;
    // > 0: replay the steps up to this many steady steps only (a long run's numbers in less
    // time: the replay costs O(spans replayed)); 0: every step
    int32_t maxSteadySteps = 0;
    // false: skip the second replay that bounds contention (Prediction::noContentionStepMs stays
    // NaN and the interval is the held-out error's alone); advise's grid does, and bounds the
    // candidate it names only
    bool boundContention = true;
};

class WhatIfModel {
public:
    // Indexes the run and fits its link. Needs a run recorded by a DDP recorder: a bucket table,
    // gradient-ready instants named by parameter, per-bucket communication spans. Refuses runs
    // with GPU stream lanes (the model replays host timelines) with a clear message.
    static Result<WhatIfModel> build(const Run& run);

    WhatIfConfig recorded() const;
    WhatIfNumbers measured() const;               // summarize() of the recorded run
    // The model's replay of the recorded configuration, and its error against measured(): how
    // far the model is from the truth on this very run (the communication fit's error).
    WhatIfNumbers replayed() const;
    // A consistency check only: the replay of the recorded configuration is exact by construction
    // up to the link fit, and says nothing about other configurations (Prediction::interval does).
    double selfErrorPct() const;                  // (replayed - measured) / measured * 100
    double stepNoisePct() const;                  // the recording's (stepNoisePct(run))
    const LinkFit& link() const;
    const std::vector<std::string>& notes() const; // about the recording as a whole
    int64_t gradientBytes() const;                 // all parameters' gradients, float32
    // The bucket layout a configuration gives: parameters per bucket, in launch order (cheap:
    // no replay; equal layouts predict equal numbers).
    std::vector<size_t> bucketSizes(const WhatIfConfig& config) const;

    Result<Prediction> predict(const WhatIfConfig& config, const PredictOptions& options = {}) const;

    struct Data; // opaque: the indexed recording and the fit (src/whatif_internal.h); copies share it

private:
    std::shared_ptr<const Data> m_data;
};

// `lockstep advise`: the caps that minimize predicted step time, and how sure the model is.
struct AdviseOptions {
    std::vector<int64_t> bucketCaps;      // candidates; empty = a grid from 0.25 MiB to 256 MiB
    std::vector<int64_t> firstBucketCaps; // candidates; empty = a grid from 0.25 MiB to 8 MiB
};
struct AdviceCandidate {
    WhatIfConfig config;
    WhatIfNumbers numbers;
};
struct Advice {
    WhatIfConfig current;          // the recorded configuration
    WhatIfConfig best;
    double measuredStepMs = 0;     // the recorded run, measured
    double replayedMs = 0;         // the model's replay of the recorded configuration, every step
    double selfErrorPct = 0;       // (replayed - measured) / measured * 100: a consistency check, never confidence
    double predictedCurrentMs = 0; // the recorded caps over the steps advise replays (at most 32
                                   // steady steps), to compare with the candidates
    double predictedBestMs = 0;
    double gainMs = 0;             // predictedCurrent - predictedBest (model against model)
    double gainPct = 0;            // gainMs / predictedCurrent * 100
    // The verdict. Change: the best layout's predicted gain clears its interval (the held-out
    // error of bucket-cap changes widened by the recording's noise), and nothing the recording
    // cannot tell undermines it. Keep: every other layout is predicted slower by more than its
    // interval. CannotTell: otherwise; `candidate` is the layout to measure.
    enum class Verdict { Change, Keep, CannotTell };
    Verdict verdict = Verdict::CannotTell;
    WhatIfConfig candidate;        // the best layout other than the recorded one (the one to measure)
    double candidateMs = 0;        // its predicted step time
    double candidateGainPct = 0;   // (predictedCurrent - candidateMs) / predictedCurrent * 100
    PredictionInterval interval;   // the candidate's interval (a bucket-cap change)
    bool gainWithinError = false;  // |candidateGainPct| <= interval.halfWidthPct
    bool confident = false;        // verdict == Change (kept for scripts reading lockstep.whatif/1)
    std::string confidenceNote;    // why the recording cannot tell, or empty
    std::string measureHint;       // what measurement would tell (one short run at the candidate)
    std::vector<AdviceCandidate> candidates; // one per distinct bucket layout, fastest first
    std::vector<std::string> notes;
};
Result<Advice> advise(const WhatIfModel& model, const AdviseOptions& options = {});

// Text for a terminal and JSON for scripts (whatif_report.cpp).
std::string predictionsText(const WhatIfModel& model, const std::vector<Prediction>& predictions);
std::string predictionsJson(const WhatIfModel& model, const std::vector<Prediction>& predictions);
std::string adviceText(const Advice& advice);
std::string adviceJson(const Advice& advice);

} // namespace lockstep::core
