// Synthetic runs for tests, benchmarks and the UI's performance checks: a deterministic,
// plausible DDP timeline (forward, backward segments, gradient-ready instants, bucket
// all-reduces that overlap backward, optimizer) of any size. Not a substitute for recorded
// runs in correctness tests of the runtime; a way to make a 10-million-span run in seconds.
#pragma once

#include "lockstep/core/types.h"

namespace lockstep::core {

struct SyntheticParams {
    int32_t worldSize = 2;
    int32_t steps = 10;
    int32_t buckets = 4;
    int32_t backwardSegmentsPerBucket = 4; // spans per bucket on the compute lane
    TimeNs stepNs = 10'000'000;             // 10 ms
    double commFraction = 0.4;              // all-reduce time relative to backward
    int32_t stragglerRank = -1;             // this rank launches late
    TimeNs stragglerDelayNs = 0;
    // Noise: every rank starts every step late by a uniform random [0, arrivalNoiseNs), drawn
    // independently (a busy machine's scheduling), so the late rank changes from step to step.
    TimeNs arrivalNoiseNs = 0;
    uint64_t seed = 1;
};
Run makeSyntheticRun(const SyntheticParams& params);
// Convenience for benchmarks: about `totalSpans` spans.
Run makeSyntheticRunWithSpans(int64_t totalSpans, int32_t worldSize = 2);

} // namespace lockstep::core
