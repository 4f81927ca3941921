// Synthetic runs for tests, benchmarks and the UI's performance checks: a deterministic,
// plausible DDP timeline (data loading, forward per module, backward segments, gradient-ready
// instants, bucket all-reduces that overlap backward, optimizer) of any size. Not a substitute
// for recorded runs in correctness tests of the runtime; a way to make a 10-million-span run in
// seconds. One model, two outputs: a Run in memory (makeSyntheticRun), or the same run written
// step by step straight into a run file in bounded memory (writeSyntheticRun), for runs too big
// to hold (issue 31: 100 M spans over 1024 ranks).
#pragma once

#include "lockstep/core/result.h"
#include "lockstep/core/run_db.h"
#include "lockstep/core/types.h"

#include <string>

namespace lockstep::core {

struct SyntheticParams {
    int32_t worldSize = 2;
    int32_t steps = 10;
    int32_t buckets = 4;
    int32_t backwardSegmentsPerBucket = 4; // spans per bucket on the compute lane
    int32_t forwardSpans = 1;               // forward cut into this many spans (one per module)
    TimeNs stepNs = 10'000'000;             // 10 ms
    double commFraction = 0.4;              // all-reduce time relative to backward
    int32_t stragglerRank = -1;             // this rank launches late
    TimeNs stragglerDelayNs = 0;
    // Noise: every rank starts every step late by a uniform random [0, arrivalNoiseNs), drawn
    // independently (a busy machine's scheduling), so the late rank changes from step to step.
    TimeNs arrivalNoiseNs = 0;
    // Hiccups: each rank-step's data loading is, with this probability, hiccupNs longer (a slow
    // read, a page fault storm): occasional late ranks that are not a straggler.
    double hiccupChance = 0;
    TimeNs hiccupNs = 0;
    // Hosts: ranks r .. r + ranksPerHost - 1 share host "node-NNN" and its boot id, so ranks on
    // rank 0's host share its clock and the others carry a measured offset of 0 within
    // clockUncertaintyNs (docs/design.md "Time and clocks"). 0: every rank on "localhost".
    int32_t ranksPerHost = 0;
    TimeNs clockUncertaintyNs = 10'000;
    uint64_t seed = 1;
};
Run makeSyntheticRun(const SyntheticParams& params);
// Convenience for benchmarks: about `totalSpans` spans.
Run makeSyntheticRunWithSpans(int64_t totalSpans, int32_t worldSize = 2);

// How many spans, instants and step rows the parameters give (what either output holds).
struct SyntheticCounts {
    int64_t spans = 0;
    int64_t instants = 0;
    int64_t steps = 0; // (rank, step) rows
};
SyntheticCounts syntheticCounts(const SyntheticParams& params);

// A big run's shape: `ranks` ranks, 8 to a host, 16 buckets of 10 backward segments, forward cut
// so that each rank-step has `spansPerRankStep` spans (at least 180), and as many steps as make
// about `totalSpans`; a straggler (rank 3/4 of the way up, 2 % of the step late), ±0.5 % arrival
// noise and hiccups on 0.1 % of rank-steps. 100 ms steps.
SyntheticParams bigRunParams(int64_t totalSpans, int32_t ranks, int32_t spansPerRankStep = 200, uint64_t seed = 1);

// The order writeSyntheticRun hands spans to the writer in (the file's contents are the same).
enum class SyntheticOrder {
    // Rank after rank, one transaction per rank holding all its steps: how merge and the
    // importers write (shard after shard), each lane's spans appended at its end of the table.
    RankMajor,
    // Step after step, one transaction per step holding every rank's spans of that step: how a
    // writer that sees all ranks live would write; each transaction touches every lane.
    StepMajor,
};

// Writes the run makeSyntheticRun(params) returns (the same spans, instants, steps, ranks, lanes,
// buckets and configuration) into a new run file at `path`, in bounded memory: one step of every
// rank (StepMajor), or one rank's steps plus 16 bytes per rank-step of what they need from the
// others (RankMajor: the run is made twice, the first time keeping only that), never the run:
// a 100 M-span run took 118 MB (bench_big). The file is whole when this returns success
// (RunWriter::close); until then its status says running. A stop requested through `stop` ends
// it after the current step or rank with ErrorCode::Cancelled.
Result<SyntheticCounts> writeSyntheticRun(const SyntheticParams& params, const std::string& path,
                                          RunWriter::Mode mode = RunWriter::Mode::CreateNew,
                                          SyntheticOrder order = SyntheticOrder::RankMajor, std::stop_token stop = {});

} // namespace lockstep::core
