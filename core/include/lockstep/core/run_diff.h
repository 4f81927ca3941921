// What changed between two runs (`lockstep diff A B`, the Compare page's "What changed").
//
// A user comparing two runs asks three questions in order, and the diff answers them in that order:
//  1. What did I change? The configuration fields that differ: everything in the comparison
//     signature (comparison.h: model and sizes, batch, caps, compression, world size, backend,
//     device, injected faults, ...), then the rest of the recorded configuration (host, versions,
//     planned steps, any `extra` key), each with A's and B's value.
//  2. Which parts of the step moved? The step time and its five parts (docs/design.md), means
//     over each run's steady steps and ranks, with B − A and whether that is beyond noise: the
//     difference must exceed twice its standard error (each run's per-step values, averaged over
//     ranks, give a standard deviation over its steady steps; se = sqrt(sa²/na + sb²/nb)) and be
//     at least 1 % of A's step time. The straggler verdicts of both runs are set side by side.
//  3. Which spans grew or shrank? Spans keyed by (name, rank, bucket, kind), their total time per
//     steady step in each run, sorted by |B − A|. Work (compute, copies, data loading) comes in
//     one list and communication and waits in another: a late rank makes the others' waits and
//     all-reduces longer, so the cause is looked for among the work first.
#pragma once

#include "lockstep/core/types.h"

#include <string>
#include <vector>

namespace lockstep::core {

struct ConfigChange {
    std::string field;
    std::string a; // "" = not recorded in that run ("(none)" in text)
    std::string b;
    bool signature = false; // part of the comparison signature (a setting, not a circumstance)
};

struct PartChange {
    std::string part; // "step time", "compute only", "overlapped", "exposed communication", ...
    double aMs = 0;
    double bMs = 0;
    double deltaMs = 0;
    double noiseMs = 0; // two standard errors of the difference
    bool moved = false; // |delta| > noise and >= 1 % of A's step time
};

struct SpanChange {
    std::string name;
    int32_t rank = 0;
    int32_t bucket = kNoBucket;
    SpanKind kind = SpanKind::Other;
    double aMs = 0;       // total time of these spans per steady step (0: none in A)
    double bMs = 0;
    double deltaMs = 0;   // bMs - aMs
};

struct RunDiff {
    std::string aName;
    std::string bName;
    std::vector<ConfigChange> config;  // signature fields first, then the rest
    std::vector<PartChange> parts;     // step time, then the five parts, in that order
    std::string aStraggler;            // the report's verdict: "none", "rank 1", "n/a (1 rank)"
    std::string bStraggler;
    std::vector<SpanChange> work;      // largest |delta| first, at most DiffOptions::topSpans
    std::vector<SpanChange> waits;     // communication, waits and other, same order
    int32_t aSteadySteps = 0;
    int32_t bSteadySteps = 0;
};

struct DiffOptions {
    size_t topSpans = 10;
};

struct RunAnalysis;
RunDiff diffRuns(const Run& a, const Run& b, const DiffOptions& options = {});
// The same with each run's analyze() already done (the app keeps it with the loaded run).
RunDiff diffRuns(const Run& a, const RunAnalysis& analysisA, const Run& b, const RunAnalysis& analysisB,
                 const DiffOptions& options = {});

// The diff as text for a terminal, and as JSON (schema "lockstep.diff/1", docs/report-json.md).
std::string diffText(const RunDiff& diff);
std::string diffJson(const RunDiff& diff);

} // namespace lockstep::core
