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
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;

namespace lockstep::core {

// Bumped whenever the schema changes; older files are migrated on open-for-write and read
// through the migration path; newer ones are refused with a clear message.
extern const int kSchemaVersion;
// PRAGMA application_id of every Lockstep run database ("LKST").
inline constexpr int32_t kApplicationId = 0x4C4B5354;

// Errors of a write that found the disk full (also a file-size limit or a quota) have the code
// ErrorCode::DiskFull (the recorder stops the run on it) and say this phrase to the user.
inline constexpr std::string_view kDiskFull = "disk full";

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
    // Replaces a stored summary part (summary_store.h storeSummaries; committed with the rest).
    // openExisting deletes every stored part first: whoever changes a run invalidates them.
    Status putSummary(std::string_view part, int version, std::string_view stamp, std::string_view data);
    // Everything appended since the last commit becomes visible to readers at once.
    Status commit();
    // One recorded step, as both recorders (the runtime's and the Python recorder) write it: its
    // spans and instants, its row, and the commit that shows them to readers together (a live
    // reader never sees a step without its spans).
    Status writeStep(const Step& step, std::span<const Span> spans, std::span<const Instant> instants);
    // Commits, finalizes derived columns (per-lane max span duration), checkpoints the write-ahead
    // log into the file and switches it back to rollback-journal mode, closes. Only when all of
    // that succeeded is the file whole on its own (no -wal beside it); otherwise the error says
    // why (a full disk, a reader that held the file for seconds) and the file may need its -wal.
    Status close();

    const std::string& path() const;

private:
    struct Impl;
    explicit RunWriter(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

// Recovers a run file whose writer died (a killed rank's shard): its committed transactions are
// in the -wal beside it (or, killed while the file was being created, a hot -journal is), which a
// read-only reader cannot always use (SQLite must rebuild the log's index, or roll back, first).
// Opening it for writing replays the log; it is then folded into the file and the file leaves
// WAL mode, so it reads like any closed run. Only for files nobody writes any
// more (the launcher's shards once every rank has exited); a file at rest is left unchanged.
Status recoverRunFile(const std::string& path);

struct LoadOptions {
    bool correctClocks = true; // apply each rank's offset to rank 0 (docs/design.md "Time and clocks")
    // A load whose stop is requested gives up within ~65 k rows (a few ms) and fails with
    // ErrorCode::Cancelled: a viewer's superseded load of a 10 M-span run does not read it to the end.
    std::stop_token stop{};
    // false: the small tables only (configuration, ranks, lanes, steps, buckets, diagnostics), no
    // spans and no instants: what a reader of stored summaries needs (summary_store.h).
    bool spans = true;
};
// Puts every rank's times on rank 0's clock: decides whose offset applies (clock_sync.h
// alignClocks: ranks with rank 0's boot id take none; `bootIdsRecorded` false for files older
// than schema 4, where one host name stands in), records that decision in run.ranks, applies the
// offsets to spans, instants and steps and sets clocksCorrected. RunReader::load does it unless
// told not to; the live view does it on the stitched shards.
void correctRunClocks(Run& run, bool bootIdsRecorded);

// The message of a load or analysis that stopped because its stop was requested (its code is
// ErrorCode::Cancelled: tell it by the code).
inline constexpr const char* kCancelled = "cancelled: a stop was requested";

class RunReader {
public:
    // Opens read-only after the header checks of validateRunFile(). Creates nothing beside the
    // file: a finished run (rollback-journal mode, or WAL mode with no -wal left) is opened
    // immutable; a run still being written (its -wal present) is read live, as a WAL reader.
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
    // A stored summary part (summary_store.h): its codec version, the stamp of the contents it was
    // computed from, and its bytes; nullopt when the file has none (or predates table summaries).
    struct StoredSummary {
        int version = 0;
        std::string stamp;
        std::string data;
    };
    Result<std::optional<StoredSummary>> storedSummary(std::string_view part);
    // Spans of one lane that overlap [t0, t1), in start order, through the (lane, start) index.
    // Times are the file's (uncorrected) times. Strings come from the reader's table.
    Result<std::vector<Span>> spansInWindow(LaneId lane, TimeNs t0, TimeNs t1);
    // A time window of one lane of a loaded run.
    struct LaneWindow {
        LaneId lane;   // the run's (load() numbers lanes densely in file order)
        TimeNs start = 0;
        TimeNs end = 0;
    };
    // For each window, the spans load() gives its lane whose start lies in [start, end), in
    // load()'s order, exactly as load() gives them: clocks corrected, names in load()'s string
    // ids, spans of steps the file has no committed row of left out. `header` is this file as
    // load() read it (LoadOptions::spans false will do). What the app's timeline streams in
    // (run_overview.h OverviewDetail) instead of loading every span.
    Result<std::vector<std::vector<Span>>> laneSpans(const Run& header, std::span<const LaneWindow> windows);
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
// Writes a whole in-memory Run into a file (importers, tests), whole or not at all
// (output_file.h): CreateNew refuses an existing file, Overwrite replaces it only on success.
Status saveRun(const Run& run, const std::string& path, RunWriter::Mode mode = RunWriter::Mode::CreateNew);
// saveRun's writing alone: a new file at `path`, not atomic (for an OutputFile's path, committed
// by the caller, e.g. with OutputFile::commitAll).
Status writeRun(const Run& run, const std::string& path);

struct MergeStats {
    int ranks = 0;
    int64_t spans = 0;
    int64_t instants = 0;
    int steps = 0;
    bool written = true; // false: keepExistingWithoutSteps kept the existing output
};

struct MergeOptions {
    bool overwrite = false; // replace an existing output (only once the merge succeeded)
    // With overwrite: a merged run without a single step does not replace an existing output
    // (the launcher's --force: a job that failed at start-up keeps the old run); the stats say
    // written == false.
    bool keepExistingWithoutSteps = false;
    // The shards must hold every rank of their world size (ranks 0..N-1): merge refuses a set with
    // ranks missing, naming them. A launcher merging what a failed job left sets this.
    bool allowMissingRanks = false;
    // A launcher's verdict, when it has one (it saw every rank's exit): replaces the status the
    // shards say. endedNs 0 keeps the shards' end time.
    std::optional<RunStatus> status;
    std::string failureCause;
    TimeNs endedNs = 0;
};

// Merges rank shards (each a run database holding one or more ranks) into one run database,
// written whole or not at all and never over one of the shards (output_file.h).
//
// The stitching rule (the same for loadShards below): shards in order of their lowest rank;
// lanes renumbered, strings re-interned; a rank in two shards is refused; the configuration is
// the lowest rank's shard's with worldSize = the largest of the shards' world sizes and the
// number of distinct ranks (a missing shard does not shrink the world), created at the earliest
// shard's start and ended at the latest end, failed if any shard failed (the first cause in rank
// order), else running if any shard is; a bucket index is defined by the first shard that has
// it; a (rank, step) by the first shard that has it; diagnostics are summed by kind (the worst
// severity kept). Each shard contributes its committed steps only, like any reader.
Result<MergeStats> mergeRunFiles(const std::vector<std::string>& shards, const std::string& out,
                                 const MergeOptions& options = {});
inline Result<MergeStats> mergeRunFiles(const std::vector<std::string>& shards, const std::string& out,
                                        RunWriter::Mode mode)
{
    MergeOptions options;
    options.overwrite = mode == RunWriter::Mode::Overwrite;
    return mergeRunFiles(shards, out, options);
}

// The shards of a run still being recorded, stitched in memory by mergeRunFiles' rule (clocks
// corrected): what a live view shows before the launcher merges them. A shard that cannot be read
// yet (just created) is skipped; an error only when none can be read. Stops as LoadOptions::stop.
Result<Run> loadShards(const std::vector<std::string>& shards, std::stop_token stop = {});

} // namespace lockstep::core
