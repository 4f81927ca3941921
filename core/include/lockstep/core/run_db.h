// The run database: one SQLite file per run, the contract between recorder, importers,
// analyses and the app. The schema lives in one place (src/schema.cpp) with a comment per
// column. Rank shards, merged runs and imported traces all use this one schema.
//
// Writers commit in batches (one transaction per step for the recorder) in WAL mode, so a
// reader opened while a run records sees whole steps only and never blocks the writer.
#pragma once

#include "lockstep/core/result.h"
#include "lockstep/core/types.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

struct sqlite3;

namespace lockstep::core {

// Bumped whenever the schema changes; older files are migrated on open-for-write and read
// through the migration path; newer ones are refused with a clear message.
extern const int kSchemaVersion;
// PRAGMA application_id of every Lockstep run database ("LKST").
inline constexpr int32_t kApplicationId = 0x4C4B5354;

// Checks, without changing the file, that `path` is a Lockstep run database this build can
// read. Errors name the problem: missing, not SQLite, not a run database, truncated/corrupt,
// newer schema version.
Status validateRunFile(const std::string& path);

class RunWriter {
public:
    enum class Mode { CreateNew, Overwrite };
    // Creates a new run database. CreateNew refuses an existing file.
    static Result<std::unique_ptr<RunWriter>> create(const std::string& path, const RunConfig& config,
                                                     Mode mode = Mode::CreateNew);
    // Opens an existing run database to append to it (an importer adding to a run, a tool
    // fixing its status). Refuses foreign, corrupt and newer files like validateRunFile; an
    // older schema is migrated to kSchemaVersion first (the only path that changes a file's
    // version: readers never do).
    static Result<std::unique_ptr<RunWriter>> openExisting(const std::string& path);
    ~RunWriter();
    RunWriter(const RunWriter&) = delete;
    RunWriter& operator=(const RunWriter&) = delete;

    Status setConfig(const RunConfig& config);
    Status setStatus(RunStatus status, const std::string& failureCause = {}, TimeNs endedNs = 0);
    Status addRank(const RankInfo& rank);   // insert or replace by rank
    Result<LaneId> addLane(const Lane& lane); // lane.id is assigned and returned
    Status addBucket(const Bucket& bucket); // insert or replace by index
    Status addStep(const Step& step);       // insert or replace by (rank, step)
    // Strings are interned in the writer's table; ids are stable for the file.
    StringId intern(std::string_view text);
    Status appendSpans(std::span<const Span> spans);
    Status appendInstants(std::span<const Instant> instants);
    // Adds `count` to the diagnostic of this kind (creating it if new).
    Status addDiagnostic(const Diagnostic& diagnostic);
    // Everything appended since the last commit becomes visible to readers at once.
    Status commit();
    // Commits, finalizes derived columns (per-lane max span duration), closes.
    Status close();

    const std::string& path() const;

private:
    struct Impl;
    explicit RunWriter(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

struct LoadOptions {
    bool correctClocks = true; // apply each rank's offset to rank 0 (DESIGN.md "Time and clocks")
};

class RunReader {
public:
    // Opens read-only after validateRunFile(); never writes to the file.
    static Result<std::unique_ptr<RunReader>> open(const std::string& path);
    ~RunReader();
    RunReader(const RunReader&) = delete;
    RunReader& operator=(const RunReader&) = delete;

    int schemaVersion() const;
    Result<RunConfig> config();
    Result<std::vector<RankInfo>> ranks();
    Result<std::vector<Lane>> lanes();
    Result<std::vector<Step>> steps();
    Result<std::vector<Bucket>> buckets();
    Result<std::vector<Diagnostic>> diagnostics();
    Result<int64_t> spanCount();
    // Spans of one lane that overlap [t0, t1), in start order, through the (lane, start) index.
    // Times are the file's (uncorrected) times. Strings come from the reader's table.
    Result<std::vector<Span>> spansInWindow(LaneId lane, TimeNs t0, TimeNs t1);
    const StringTable& strings() const;
    // The whole run, in one read transaction (a consistent snapshot while a run records):
    // only steps whose step row is committed are included, with their spans and instants.
    Result<Run> load(const LoadOptions& options = {});

private:
    struct Impl;
    explicit RunReader(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

// Convenience: RunReader::open + load.
Result<Run> loadRun(const std::string& path, const LoadOptions& options = {});
// Writes a whole in-memory Run into a new file (used by merge, importers, tests).
Status saveRun(const Run& run, const std::string& path, RunWriter::Mode mode = RunWriter::Mode::CreateNew);

struct MergeStats {
    int ranks = 0;
    int64_t spans = 0;
    int64_t instants = 0;
    int steps = 0;
};
// Merges rank shards (each a run database holding one or more ranks) into one run database.
// Lanes are renumbered, strings re-interned; the config comes from the lowest rank's shard with
// worldSize = number of distinct ranks; the run is failed if any shard is failed (first cause
// kept); diagnostics are summed by kind.
Result<MergeStats> mergeRunFiles(const std::vector<std::string>& shards, const std::string& out,
                                 RunWriter::Mode mode = RunWriter::Mode::CreateNew);

} // namespace lockstep::core
