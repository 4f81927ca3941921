// How right the what-if model is on configurations it was NOT fitted to: the one table of its
// measured error, per kind of change, and the interval every prediction carries (whatif.h,
// Prediction::interval; docs/whatif.md, "How sure").
//
// The model is fitted to one recording; replaying that recording's own configuration reproduces
// it almost exactly by construction (selfErrorPct, a consistency check), so it says nothing about
// another configuration. What does: predictions of configurations that were then run for real,
// on models and settings nobody tuned the model against (bench/whatif/bench_whatif.py, the
// held-out set: SET=heldout). Each row below is the 90th percentile of |predicted - measured| /
// measured over that bench's single (prediction, real run) pairs of one kind of change, and says
// where it came from. A prediction's interval combines the rows of the kinds it changes with the
// recording's own step-to-step noise (intervalFor, whatif_interval.cpp).
//
// Data, not code: when the bench is run again and its held-out numbers move, this table is what
// changes (and docs/whatif.md, which quotes it).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::core {

// What a configuration changes relative to its recording.
enum class ChangeKind : uint8_t {
    None,         // the recorded configuration again: how much a repeat of the same run differs
    BucketCap,    // bucket cap or first-bucket cap (a different bucket layout)
    LinkSpeed,    // the emulated link (--link-gbps)
    WorldSize,    // the number of ranks
    ComputeScale, // compute k times as fast or slow: cannot be run, never measured
    Compression,  // fp16 / bf16: not in the bench
};

struct HeldOutError {
    ChangeKind kind;
    const char* key;   // JSON: "none", "bucket_cap", "link_speed", "world_size", "compute_scale", "compression"
    const char* label; // text: "bucket-cap changes"
    double p90AbsPct;  // 90th percentile of |predicted - measured| / measured * 100; < 0: never measured
    int pairs;         // single (prediction, real run) pairs the percentile is over
    const char* source;
};

// Measured 2026-11-27 by `SET=heldout REPEATS=1 PASSES=2 bench/whatif/bench_whatif.py`, passes 0
// and 1 pooled, predicted by the model as of the contention cap (whatif_fit.cpp contentionOf; the
// rule before it gave 14.8 and 26.7 for caps and world size, the rest alike): the five held-out models (mlp-wide, mlp-deep, mlp-t2, transformer-s, convnet-w),
// 16 steps, 4 warm-up, one pair per target and pass, on the 2-core development machine with
// nothing else running (load average 0.5-2.1: the runs' own ranks). Even so two runs of one
// configuration at most one run apart differed by 16-23 % at the 90th percentile
// (whatif_noise_p90_pct; median 5-7 %): this VM runs the same work at different speeds from one
// run to the next, so the rows hold that. Passes 2 and 3 (docs/whatif.md) check the coverage
// these rows give on runs they were not read from. The world-size row covers 2 -> 1 and 1 -> 2
// ranks on one host. Kinds never run against the model (compute scale, compression) have no row
// of their own: the widest measured row stands in, and the interval says it is not measured.
// (The table before this one was read off one pass at load 9 beside three other builds, where
// runs of one configuration differed by 58 %: its rows were 36-76 %, intervals about +-53 %,
// and advise could never tell.)
inline constexpr std::array<HeldOutError, 6> kHeldOutErrors{{
    {ChangeKind::None, "none", "a repeat of the recorded configuration", 20.6, 10,
     "bench/whatif held-out passes 0-1, cap25 targets (the base's own configuration run again)"},
    {ChangeKind::BucketCap, "bucket_cap", "bucket-cap changes", 14.6, 30,
     "bench/whatif held-out passes 0-1, 1/4/100 MiB targets from 25 MiB recordings"},
    {ChangeKind::LinkSpeed, "link_speed", "emulated-link changes", 7.6, 10,
     "bench/whatif held-out passes 0-1, 1 Gbit/s targets from 25 MiB recordings"},
    {ChangeKind::WorldSize, "world_size", "world-size changes", 26.6, 20,
     "bench/whatif held-out passes 0-1, 2 -> 1 and 1 -> 2 rank targets"},
    {ChangeKind::ComputeScale, "compute_scale", "compute-scale changes", -1, 0,
     "never measured: a compute scale cannot be run for real"},
    {ChangeKind::Compression, "compression", "compression changes", -1, 0, "not in bench/whatif"},
}};

// How busy the table's machine was: the runs above waited for a CPU (their training thread
// runnable, not running: Step::runqNs) for at most this share of their steady steps' time (the
// 90th percentile over pass 0's 70 runs; median 5.4 %). A recording that waited longer was made
// on a busier machine than the table's, whose runs differ from one another by more: its CPU wait
// beyond this share widens its intervals (stepNoisePct).
inline constexpr double kTableCpuWaitPct = 10.9;

const HeldOutError& heldOutError(ChangeKind kind);

// The interval of one prediction: a run of the predicted configuration is expected to measure a
// mean step time in [lowMs, highMs] (90 %: the rows are 90th percentiles). halfWidthPct is the
// relative error e the interval allows, |predicted - measured| / measured <= e, so
// low = predicted / (1 + e) and high = predicted / (1 - e) (infinite when e >= 100 %).
struct PredictionInterval {
    double lowMs = 0;
    double highMs = 0;
    double halfWidthPct = 0; // e * 100: sqrt(sum of the changed kinds' rows^2 + noisePct^2)
    double heldOutPct = 0;   // the rows' part
    double noisePct = 0;     // the recording's part: its steady steps' noise and its CPU wait beyond the table's
    std::vector<ChangeKind> kinds; // what the configuration changes (None alone: nothing)
    bool measured = true;    // false: a changed kind has no measured row (the widest row stood in)
};

// The interval of a prediction of `predictedMs` that changes `kinds`, from a recording whose
// steady-step noise is `noisePct` (WhatIfModel::stepNoisePct).
PredictionInterval intervalFor(const std::vector<ChangeKind>& kinds, double predictedMs, double noisePct);
// "bucket-cap changes, world-size changes" / "a repeat of the recorded configuration".
std::string describeKinds(const std::vector<ChangeKind>& kinds);

} // namespace lockstep::core
