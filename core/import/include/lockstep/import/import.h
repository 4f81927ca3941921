// Importers: torch.profiler (Kineto) Chrome-trace JSON (plain or gzip) and Nsight Systems
// SQLite exports (`nsys export --type sqlite`) into one Lockstep run database, one file per rank.
// The format of each file is detected from its content (gzip magic, '{' or '[' JSON, the SQLite
// header), never from its name. Qt-free; errors are values (core/result.h), nothing throws.
//
// Malformed events never abort an import: they are counted per kind ("missing ts", "negative
// duration", "unmatched B/E", ...; the closed list is core/diagnostics.h) into the run's
// diagnostics table. Only a file that cannot be read at all (missing, not a trace, a JSON
// without trace events, truncated before any event, ...) is an error.
//
// Steps: host spans belong to the step whose window holds their start; GPU kernels, copies and
// memsets to the step that LAUNCHED them, found through correlation ids (Kineto: the runtime
// call's "correlation" or the ac2g flow, else the operator's "External id"; nsys: the
// CUPTI_ACTIVITY_KIND_RUNTIME row with the same correlationId). Device work without a launch
// record or launched outside every step belongs to no step and is counted in the diagnostics.
//
// A trace that `lockstep export --chrome` wrote imports back into the same run: its
// "lockstepRun" header holds the configuration, ranks, lanes and buckets (one file, every rank).
#pragma once

#include "lockstep/core/result.h"
#include "lockstep/core/types.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::core {

enum class TraceFormat : uint8_t {
    Unknown = 0,
    KinetoJson = 1,   // Chrome trace-event JSON from torch.profiler: {"traceEvents": [...]} or [...]
    KinetoJsonGz = 2, // the same, gzip-compressed (".json.gz", export_chrome_trace("x.json.gz"))
    NsysSqlite = 3,   // Nsight Systems export: CUPTI_ACTIVITY_KIND_* tables, StringIds, NVTX_EVENTS
};
const char* traceFormatName(TraceFormat format);
// Looks at the first bytes of the file only. Error when the file cannot be opened.
Result<TraceFormat> detectTraceFormat(const std::string& path);
TraceFormat detectTraceFormat(std::string_view firstBytes);

// The first profiled step carries the profiler's own start-up cost (and the first CUDA graph or
// cudnn autotune); profilers usually record steps that are already past the job's warm-up.
inline constexpr int kDefaultImportWarmup = 1;

// Names (spans, lanes, parameters) longer than this are cut at a character boundary and counted
// in the "name truncated" diagnostic.
inline constexpr size_t kImportNameLimit = 1024;

struct ImportOptions {
    // Rank of the first file; the next files get rank+1, rank+2, ... When unset, a Kineto file's
    // "distributedInfo".rank is used, else the file's position in the list.
    std::optional<int> rank;
    // World size of the run; when unset, "distributedInfo".world_size, else the number of ranks.
    std::optional<int> worldSize;
    bool overwrite = false;          // replace an existing output file (CLI --force)
    std::string runName;             // defaults to the output file's stem
    bool includePythonFunctions = false; // "python_function" events: many, and rarely useful
    // Warm-up: the first N steps of the trace (the N lowest step numbers present, whatever they
    // are: profilers number steps from wherever their schedule started) are excluded from
    // run-level numbers. Stored as RunConfig::warmupSteps = the number of the first steady step.
    // When unset: kDefaultImportWarmup. A trace with no more than N steps has no steady step and
    // its reports say so. Ignored for a trace Lockstep exported (it carries its own) unless set.
    std::optional<int> warmupSteps;
    // Files parsed at once, each on a thread of its own (CLI --jobs); 0: one per hardware
    // thread (std::thread::hardware_concurrency), never more than there are files. The result
    // does not depend on it: the parsed files are added to the run in file order, one at a time.
    int jobs = 0;
    // importTraces: store the run's summaries (summary_store.h) in the output before it is moved
    // into place, as every import does. false leaves them out (the run file is still whole, and
    // reads analyse it in full until core::storeSummaries(path) adds them): for benchmarks that
    // time the parse and write apart from the analysis.
    bool storeSummaries = true;
};

// How far an import is, for a progress display: files added to the run out of all of them, and
// input bytes parsed (compressed bytes for gzip) out of the files' sizes, after `seconds`.
struct ImportProgress {
    int filesDone = 0;
    int files = 0;
    int64_t bytesDone = 0;
    int64_t bytesTotal = 0;
    double seconds = 0;
};
using ImportProgressFn = std::function<void(const ImportProgress&)>;

struct ImportStats {
    int files = 0;
    int ranks = 0;
    int worldSize = 0;
    int64_t bytesRead = 0;     // input bytes (decompressed size for gzip)
    int64_t events = 0;        // trace events / rows seen
    int64_t spans = 0;         // spans written
    int64_t commSpans = 0;     // of which communication (Comm + CommKernel)
    int64_t lanes = 0;
    int64_t steps = 0;         // step rows (rank, step)
    int64_t skipped = 0;       // events counted into diagnostics
    std::vector<Diagnostic> diagnostics;
};

// Imports `files` (one per rank) into a new run database at `outDb` through core's writer,
// whole or not at all. The files are parsed on options.jobs threads and written by the calling
// thread in file order as they are parsed, each file's part freed once written: memory holds a
// few files' parsed events at a time (at most jobs + 2 files and about
// kImportInFlightBytes of input in flight), not the whole run.
// `progress` is called with a fraction in [0, 1] from the calling thread; it may be empty.
Result<ImportStats> importTraces(const std::vector<std::string>& files, const std::string& outDb,
                                 const ImportOptions& options = {},
                                 std::function<void(double)> progress = {});
// The same, with files and bytes done (called from the calling thread a few times a second and
// after each file).
Result<ImportStats> importTraces(const std::vector<std::string>& files, const std::string& outDb,
                                 const ImportOptions& options, const ImportProgressFn& progress);

// Input bytes (a gzip file's counted as kGzipInflation times its size) that may be parsed and
// not yet written at once; a file larger than that is parsed alone.
inline constexpr int64_t kImportInFlightBytes = int64_t{1} << 30;
inline constexpr int64_t kGzipInflation = 8;

// The same, into memory only (the run is normalized; config.source is "kineto" or "nsys").
Result<Run> importTracesToRun(const std::vector<std::string>& files, const ImportOptions& options = {},
                              std::function<void(double)> progress = {}, ImportStats* stats = nullptr);

// In-memory entry points for tests and fuzzers: one rank's trace given as bytes (JSON, gzip or
// SQLite image; format detected from content).
Result<Run> importTraceBytes(std::string_view bytes, const ImportOptions& options = {},
                             ImportStats* stats = nullptr);

} // namespace lockstep::core
