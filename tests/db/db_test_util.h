// Helpers shared by the tests of the run database: a small hand-built run, file contents.
#pragma once

#include "lockstep/core/run_db.h"
#include "test_support.h"

#include <string>

namespace dbtest {

using namespace lockstep::core;

inline constexpr TimeNs kBase = 1'700'000'000'000'000'000ll;
inline constexpr TimeNs kStepNs = 1'000'000; // 1 ms

// A run of `ranks` ranks (first rank `firstRank`) and `steps` steps: per rank a compute lane
// (forward, two backward segments, optimizer) and a comm lane (two bucket all-reduces), two
// gradient-ready instants per step, plus one span outside any step. Rank r's clock is
// `r * 1000` ns behind rank 0 (offset +1000*r).
inline Run makeRun(int ranks, int steps, int firstRank = 0, int worldSize = -1)
{
    Run run;
    run.config.name = "tiny";
    run.config.model = "mlp";
    run.config.worldSize = worldSize > 0 ? worldSize : ranks;
    run.config.backend = "gloo";
    run.config.device = "cpu";
    run.config.bucketCapBytes = 4096;
    run.config.batchPerRank = 8;
    run.config.stepsPlanned = steps;
    run.config.warmupSteps = 1;
    run.config.commandLine = "lockstep run --world-size 2";
    run.config.host = "node1";
    run.config.createdNs = kBase;
    run.config.status = RunStatus::Completed;
    run.config.extra["seed"] = "7";
    run.buckets = {Bucket{0, 1024, {"fc2.bias", "fc2.weight"}}, Bucket{1, 2048, {"fc1.bias", "fc1.weight"}}};
    const StringId fwd = run.strings.intern("forward");
    const StringId bwd = run.strings.intern("backward");
    const StringId opt = run.strings.intern("optimizer");
    const StringId ar = run.strings.intern("allreduce");
    const StringId p0 = run.strings.intern("fc2.weight");
    const StringId p1 = run.strings.intern("fc1.weight");
    const StringId setup = run.strings.intern("setup \"quoted\"");
    for (int i = 0; i < ranks; ++i) {
        const int r = firstRank + i;
        run.ranks.push_back(RankInfo{.rank = r, .host = "node1", .pid = 100 + r, .device = "cpu",
                                     .clockOffsetNs = 1000 * r, .clockRttNs = 50});
        const LaneId compute{static_cast<uint32_t>(run.lanes.size())};
        run.lanes.push_back(Lane{compute, r, LaneKind::Compute, -1, -1, "compute"});
        const LaneId comm{static_cast<uint32_t>(run.lanes.size())};
        run.lanes.push_back(Lane{comm, r, LaneKind::Comm, -1, -1, "comm"});
        const TimeNs local0 = kBase - 1000 * r; // rank r's clock reads 1000*r less
        run.spans.push_back(Span{local0 - 500'000, local0 - 100'000, 0, compute, setup, kNoStep, kNoBucket, SpanKind::Other});
        for (int s = 0; s < steps; ++s) {
            const TimeNs t = local0 + s * kStepNs;
            // CPU time and run-queue wait measured on every step but rank 0's first (-1: not measured).
            const bool measured = r != firstRank || s != 0;
            run.steps.push_back(Step{r, s, t, t + kStepNs, 1.0 / (s + 1), 8, measured ? kStepNs / 2 + r : -1,
                                     measured ? 1000 * (s + 1) : -1});
            run.spans.push_back(Span{t, t + 200'000, 0, compute, fwd, s, kNoBucket, SpanKind::Forward});
            run.spans.push_back(Span{t + 200'000, t + 400'000, 0, compute, bwd, s, kNoBucket, SpanKind::Backward});
            run.spans.push_back(Span{t + 400'000, t + 700'000, 0, compute, bwd, s, kNoBucket, SpanKind::Backward});
            run.spans.push_back(Span{t + 800'000, t + 900'000, 0, compute, opt, s, kNoBucket, SpanKind::Optimizer});
            run.spans.push_back(Span{t + 400'123, t + 600'456, 1024, comm, ar, s, 0, SpanKind::Comm});
            run.spans.push_back(Span{t + 700'001, t + 799'999, 2048, comm, ar, s, 1, SpanKind::Comm});
            run.instants.push_back(Instant{t + 400'000, compute, p0, s, 0, InstantKind::GradReady});
            run.instants.push_back(Instant{t + 700'000, compute, p1, s, 1, InstantKind::GradReady});
        }
    }
    run.diagnostics.push_back(Diagnostic{"replica check", Severity::Info, 2, "small"});
    run.normalize();
    return run;
}

// The whole file, to check that something left it byte for byte as it was.
inline std::string fileBytes(const std::string& path) { return lockstep::test::readFile(path); }

using lockstep::test::contains;
using lockstep::test::exists;

} // namespace dbtest
