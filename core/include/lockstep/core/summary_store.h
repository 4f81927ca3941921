// Stored summaries: a run's analysis (analysis.h RunAnalysis), computed once and kept in its run
// file (table `summaries`, schema.cpp), so that `lockstep report` and the app's first screen read a
// few rows instead of loading and analysing every span (issue 31: a 100 M-span run).
//
// One mechanism, three rules:
//  - WRITTEN by storeSummaries(path): it loads the file exactly as every reader does
//    (RunReader::load, clocks corrected), runs core::analyze, and writes the parts below. Merge,
//    import, the what-if prediction and the big-run generator call it once their file is whole;
//    `lockstep index RUN` calls it for any other file (a run recorded by an older build).
//  - INVALIDATED by any writer: RunWriter::openExisting deletes every stored part before it
//    changes anything, and a new file has none. A part also records the summary codec's version
//    (kSummaryVersion) and a stamp of the file's contents (its steps, ranks and clock offsets,
//    lanes, buckets, span count and the analysis-relevant configuration) and of the code that
//    computed it (a fingerprint of core's load and analysis sources, core/CMakeLists.txt): a part
//    whose version or stamp does not match the file and this build is stale and is ignored, so a
//    run analysed by an older build is analysed again, never shown with old numbers.
//  - READ by loadAnalyzedRun(): the run's small tables (no spans, no instants) plus the stored
//    parts asked for when they are fresh; otherwise (missing, stale, a file still being written)
//    the whole run is loaded and analysed in memory, exactly as before. Readers never write: a
//    missing summary costs time, never a wrong number.
//
// The stored analysis equals core::analyze on the loaded run field for field (tests/analysis
// test_summary_store compares their encodings byte for byte on generated and recorded runs).
// Whoever adds a field to a record of analysis.h adds it to its field list in summary_store.cpp
// (a static_assert on the record's size stops the build until they do); the changed sources
// change the fingerprint, so older stored analyses are not read.
#pragma once

#include "lockstep/core/analysis.h"
#include "lockstep/core/result.h"
#include "lockstep/core/run_overview.h"
#include "lockstep/core/types.h"

#include <stop_token>
#include <string>
#include <vector>

namespace lockstep::core {

// The summary codec's version (the layout of the parts): parts written by another are stale.
inline constexpr int kSummaryVersion = 2;

// The parts of a stored analysis, each one row, read only when asked for (a bit mask).
enum SummaryPart : unsigned {
    // Run level: RunSummary, the per-rank summaries, the steady steps, the step stragglers, each
    // rank's straggling and the run's straggler evidence, and the loaded run's diagnostics.
    // Kilobytes: all `lockstep report` needs.
    kSummaryRun = 1,
    // Per (rank, step): StepBreakdown and RankStepWait (the heatmap, `report --json`).
    kSummarySteps = 2,
    // Per (rank, step, bucket): BucketStat, and per (step, bucket): BucketSkew.
    kSummaryBuckets = 4,
    kSummaryAll = 7, // the analysis
    // Not the analysis: each lane's overview (run_overview.h), what the app's timeline draws first.
    kSummaryOverview = 8,
};
const char* summaryPartName(SummaryPart part); // "run", "steps", "buckets", "overview"

struct AnalyzedRunOptions {
    unsigned parts = kSummaryAll; // the parts of the analysis the caller reads
    // true: the run's spans and instants are loaded too (the timeline); false: only when the
    // summary must be computed (then they are dropped again unless asked for).
    bool spans = false;
    // With spans false: when the analysis has to be computed, keep the spans loaded for it (a
    // reader that would draw them next need not load them twice).
    bool keepComputedSpans = false;
    std::stop_token stop{};
};

// A run and its analysis, as a reader gets them.
struct AnalyzedRun {
    Run run;                // spans and instants only when asked for (or computed from them)
    RunAnalysis analysis;   // the parts asked for; other parts' vectors are empty
    // kSummaryOverview asked for and `stored`: the file's overview. Empty when the analysis was
    // computed (the spans were loaded for it: a reader draws those).
    RunOverview overview;
    bool stored = false;    // the analysis came from the file's stored summaries
    std::string whyComputed; // when !stored: "no stored summary", "stale summary (...)", ...
};

// Loads `path` and its analysis: stored parts when fresh, else computed (see above). Fails like
// RunReader::open/load (ErrorCode::Cancelled once `stop` is requested).
Result<AnalyzedRun> loadAnalyzedRun(const std::string& path, const AnalyzedRunOptions& options = {});

// Computes the analysis of the run file at `path` and stores it in the file, replacing any stored
// summary (RunWriter::openExisting: an older schema is migrated first). The file must be whole
// (a file with a -wal beside it, being written or left by a writer that died, is refused). Memory:
// what RunReader::load and analyze need, once.
Status storeSummaries(const std::string& path, std::stop_token stop = {});

// The encoding of one part of `analysis` of `run` (the loaded run: its diagnostics are part of
// kSummaryRun), as storeSummaries writes it before compression. Two analyses are equal exactly
// when their encodings are (NaN equals NaN): what tests compare.
std::string encodeSummaryPart(const Run& run, const RunAnalysis& analysis, SummaryPart part);
// Its inverse: fills `part`'s records of `analysis` (and, for kSummaryRun, `diagnostics`) from an
// encoding. False for anything that is not exactly one well-formed part (truncated, trailing bytes,
// a value out of its field's range, a count the bytes cannot hold); never reads past the bytes
// (fuzz_summary_part runs it on arbitrary bytes).
bool decodeSummaryPart(const std::string& encoded, SummaryPart part, RunAnalysis& analysis,
                       std::vector<Diagnostic>& diagnostics);
// The same for the kSummaryOverview part.
std::string encodeOverviewPart(const RunOverview& overview);
bool decodeOverviewPart(const std::string& encoded, RunOverview& overview);

} // namespace lockstep::core
