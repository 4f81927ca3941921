// The run database's schema: the ONE place it is declared, with a comment per column, and its
// migration steps. Everything that opens a run file (writer, reader, validator) shares the
// checks at the bottom of this file.
//
// Conventions
//  - Times are int64 ns of CLOCK_REALTIME in the recording rank's own clock (never corrected on
//    disk; RankInfo's offsets are stored beside them and RunReader::load applies them).
//  - Strings that repeat millions of times (span and instant names) are interned in `strings`
//    and referenced by id; id 0 is the empty string.
//  - Enums: the hot data (span and instant blocks; spans and instants rows before) store small ints, the
//    numeric values of SpanKind / InstantKind in types.h (one byte each on disk); the cold tables store the names from
//    types.cpp (lanes.kind = laneKindName, run.status = runStatusName, diagnostics.severity =
//    severityName) so that a person reading the file with the sqlite3 shell sees words.
//  - "no step" / "no bucket" are stored as -1 (kNoStep, kNoBucket); a NaN loss as NULL.
//
// Versions (PRAGMA user_version; PRAGMA application_id = kApplicationId, "LKST")
//  1  the base DDL below.
//  2  lanes.max_dur_ns: the longest span of each lane, kept by the writer, so that a window
//     query can bound its index range from below (a span overlapping [t0, t1) starts at or after
//     t0 - max_dur). Migration adds the column and backfills it from spans.
//  3  steps.cpu_ns, steps.runq_ns: the training thread's CPU time and run-queue wait in the step
//     (Step::cpuNs, runqNs), NULL when not measured. Migration adds the columns (NULL).
//  4  ranks.boot_id, ranks.clock_uncertainty_ns: the kernel boot id of each rank's host (ranks
//     with rank 0's boot id share its clock: no offset) and the offset's uncertainty (half the
//     kept round trip). Migration adds them ('' and half the stored round trip); readers of
//     older files fall back to host names (clock_sync.h).
//  5  run.framework_version: what recorded the run ("torch 2.11.0+cu130"; RunConfig::
//     frameworkVersion). Migration adds it (''). The run and ranks tables' columns are the rows
//     of kRunConfigFields and kRankFields (fields.h), each with the version that added it;
//     test_fields checks they agree at every version (PRAGMA table_info).
//  6  span_blocks replaces spans: a lane's spans are stored in blocks of up to kSpanBlockSpans
//     (2048), each one row with the block's key and bounds and its spans encoded as varints
//     (span_block.h has the format; run_db.cpp "Third round" the measurements: bench_db's 10 M
//     spans take 8.6 bytes each where rows took 33.7, and are written ~9x faster in CPU time). lanes.block_reach_ns bounds a window query's
//     range of blocks from below, as max_dur_ns bounded the range of spans. Migration creates
//     the table, converts the spans rows (in (lane, start_ns, seq) order, blocks of 2048) with the
//     same codec the writer uses (a C++ step: convertSpansToBlocks) and drops spans. The sqlite3
//     shell can no longer list spans: `lockstep export --chrome`, or the Python module
//     (lockstep._core.load_run), reads them.
//  7  summaries: the run's stored analysis (summary_store.h). Migration creates the table (empty).
//  8  instant_blocks replaces instants (and its index instants_lane_ts): a lane's instants in
//     blocks of up to kInstantBlockBytes (9 KiB) encoded by instant_block.h, as span blocks
//     (run_db.cpp "Fourth round"; on bench_big's 10 M-span run the instants took 49.6
//     bytes each as rows with their index). Migration converts the rows (in (lane, ts_ns, rowid)
//     order) with the writer's codec (convertInstantsToBlocks) and drops the table and index.
// A new file runs the base DDL and then every migration step: the path old files take is the
// path every new file takes, so migrations cannot rot.
#include "schema.h"

#include "lockstep/core/run_db.h"
#include "lockstep/core/span_block.h"

#include "blocks.h"

#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

namespace lockstep::core {

const int kSchemaVersion = 8;

namespace schema {
namespace {

// Version 1. Kept exactly as first shipped: migrations start from it.
constexpr const char* kBaseDdl = R"sql(
-- Interned strings: span/instant names. id 0 is ''.
CREATE TABLE strings (
  id   INTEGER PRIMARY KEY,  -- StringId.v, dense from 0
  text TEXT NOT NULL         -- the string
);

-- The run: exactly one row (id = 1), one column per RunConfig field.
CREATE TABLE run (
  id                     INTEGER PRIMARY KEY CHECK (id = 1),
  name                   TEXT NOT NULL DEFAULT '',  -- shown in the browser
  source                 TEXT NOT NULL DEFAULT 'lockstep', -- lockstep | kineto | nsys
  model                  TEXT NOT NULL DEFAULT '',  -- mlp | transformer | convnet | imported
  model_args             TEXT NOT NULL DEFAULT '',  -- e.g. "layers=8 width=1024"
  world_size             INTEGER NOT NULL DEFAULT 1, -- number of ranks
  backend                TEXT NOT NULL DEFAULT '',  -- gloo | nccl
  device                 TEXT NOT NULL DEFAULT '',  -- cpu | cuda
  bucket_cap_bytes       INTEGER NOT NULL DEFAULT 0, -- DDP bucket cap
  first_bucket_cap_bytes INTEGER NOT NULL DEFAULT 0, -- cap of the first bucket
  batch_per_rank         INTEGER NOT NULL DEFAULT 0, -- samples per rank per step
  steps_planned          INTEGER NOT NULL DEFAULT 0, -- steps the run was asked to do
  warmup_steps           INTEGER NOT NULL DEFAULT 3, -- excluded from steady-state metrics
  optimizer              TEXT NOT NULL DEFAULT '',  -- sgd | adamw
  compress               TEXT NOT NULL DEFAULT '',  -- none | fp16 | bf16
  accumulate             INTEGER NOT NULL DEFAULT 1, -- gradient accumulation steps
  link_gbps              REAL NOT NULL DEFAULT 0,   -- emulated link speed, 0 = not emulated
  command_line           TEXT NOT NULL DEFAULT '',  -- how the run was started
  host                   TEXT NOT NULL DEFAULT '',  -- host that launched it
  created_ns             INTEGER NOT NULL DEFAULT 0, -- start of the run
  ended_ns               INTEGER NOT NULL DEFAULT 0, -- end of the run, 0 while running
  status                 TEXT NOT NULL DEFAULT 'running', -- runStatusName: running|completed|failed
  failure_cause          TEXT NOT NULL DEFAULT ''   -- why it failed, '' otherwise
);

-- RunConfig::extra: anything else (fault injection, seeds, ...).
CREATE TABLE config_extra (
  key   TEXT PRIMARY KEY,  -- name
  value TEXT NOT NULL      -- value as text
);

-- One row per rank, with its clock alignment to rank 0 (types.h RankInfo).
CREATE TABLE ranks (
  rank                INTEGER PRIMARY KEY, -- 0 .. world_size-1
  host                TEXT NOT NULL DEFAULT '', -- host name
  pid                 INTEGER NOT NULL DEFAULT 0, -- process id
  device              TEXT NOT NULL DEFAULT '', -- "cpu", "cuda:0"
  clock_offset_ns     INTEGER NOT NULL DEFAULT 0, -- rank 0's clock - this rank's, at sync start
  clock_rtt_ns        INTEGER NOT NULL DEFAULT 0, -- round trip of the kept sample
  clock_sync_start_ns INTEGER NOT NULL DEFAULT 0, -- local time of the start sample (0 = unknown)
  clock_offset_end_ns INTEGER NOT NULL DEFAULT 0, -- offset at the end sample
  clock_sync_end_ns   INTEGER NOT NULL DEFAULT 0  -- local time of the end sample (0 = none)
);

-- Timeline lanes: rank x kind/stream.
CREATE TABLE lanes (
  id     INTEGER PRIMARY KEY, -- LaneId.v, dense from 0
  rank   INTEGER NOT NULL,    -- owning rank
  kind   TEXT NOT NULL,       -- laneKindName: compute | comm | gpu_stream | host_thread
  device INTEGER NOT NULL DEFAULT -1, -- GPU index for gpu_stream lanes, -1 otherwise
  stream INTEGER NOT NULL DEFAULT -1, -- CUDA stream or host thread id, -1 if none
  name   TEXT NOT NULL DEFAULT ''     -- shown in the timeline
);

-- Steps per rank. A step row is committed in the same transaction as the step's spans: readers
-- use its presence to tell finished steps from the one still being written.
CREATE TABLE steps (
  rank     INTEGER NOT NULL, -- rank
  step     INTEGER NOT NULL, -- step number from 0
  start_ns INTEGER NOT NULL, -- step start (rank's clock)
  end_ns   INTEGER NOT NULL, -- step end (rank's clock)
  loss     REAL,             -- training loss, NULL if unknown
  samples  INTEGER NOT NULL DEFAULT 0, -- samples this rank processed in this step
  PRIMARY KEY (rank, step)
) WITHOUT ROWID;

-- Gradient buckets (the same on every rank).
CREATE TABLE buckets (
  idx    INTEGER PRIMARY KEY,      -- bucket index, launch order
  bytes  INTEGER NOT NULL,         -- payload of its all-reduce
  params TEXT NOT NULL DEFAULT ''  -- parameter names in packing order, joined by '\n'
);

-- Spans: the hot table (millions of rows). Clustered on its key: the (lane, start_ns) index IS
-- the table (WITHOUT ROWID), so a window query is one range scan with no row lookups and an
-- append is one b-tree insert. See run_db.cpp "Writer speed" for the measurements.
-- Only the key columns are declared NOT NULL: the writer binds every column of every row, and
-- the six per-row null checks cost ~2.5% of the insert CPU (bench_db). Never NULL all the same.
CREATE TABLE spans (
  lane     INTEGER NOT NULL, -- lanes.id
  start_ns INTEGER NOT NULL, -- start (rank's clock)
  seq      INTEGER NOT NULL, -- makes the key unique (spans may share a start): 0 normally,
                             -- ascending in append order among equal starts (run_db.cpp)
  dur_ns   INTEGER, -- end - start_ns, >= 0 (a small varint where end_ns took 8 bytes)
  kind     INTEGER, -- SpanKind numeric value (types.h)
  name     INTEGER, -- strings.id
  step     INTEGER, -- step it belongs to, -1 = none
  bucket   INTEGER, -- bucket index for collectives, -1 = none
  bytes    INTEGER, -- payload of a collective or memcpy, 0 otherwise
  PRIMARY KEY (lane, start_ns, seq)
) WITHOUT ROWID;

-- Instants: gradient-ready events and markers.
CREATE TABLE instants (
  lane   INTEGER NOT NULL, -- lanes.id
  kind   INTEGER NOT NULL, -- InstantKind numeric value (0 = grad ready, 1 = marker)
  name   INTEGER NOT NULL, -- strings.id (the parameter name for grad ready)
  ts_ns  INTEGER NOT NULL, -- time (rank's clock)
  step   INTEGER NOT NULL, -- step, -1 = none
  bucket INTEGER NOT NULL  -- bucket of the parameter, -1 = none
);
CREATE INDEX instants_lane_ts ON instants (lane, ts_ns);

-- Anomalies counted per kind (Perfetto's habit): never abort an import or a recording.
CREATE TABLE diagnostics (
  kind     TEXT PRIMARY KEY, -- e.g. "misplaced end event"
  severity TEXT NOT NULL,    -- severityName: info | warning | error
  count    INTEGER NOT NULL, -- occurrences
  message  TEXT NOT NULL DEFAULT '' -- an example or explanation
);

INSERT INTO strings (id, text) VALUES (0, '');
INSERT INTO run (id) VALUES (1);
)sql";

Status convertSpansToBlocks(sqlite3* db);
Status convertInstantsToBlocks(sqlite3* db);

struct Migration {
    int toVersion;
    const char* sql;
    Status (*convert)(sqlite3*) = nullptr; // run after sql, in the same transaction
};

// Each step takes the file from toVersion - 1 to toVersion, in one transaction.
const std::array<Migration, 7> kMigrations = {{
    {2, R"sql(
-- lanes.max_dur_ns: the longest span (dur_ns) of the lane, 0 if none. Kept by the
-- writer (updated in the same transaction as the spans); window queries widen their lower bound
-- on start_ns by it.
ALTER TABLE lanes ADD COLUMN max_dur_ns INTEGER NOT NULL DEFAULT 0;
UPDATE lanes SET max_dur_ns =
  COALESCE((SELECT MAX(dur_ns) FROM spans WHERE spans.lane = lanes.id), 0);
)sql"},
    {3, R"sql(
-- The rank's training thread in the step (Linux scheduler statistics): ns on a CPU, and ns
-- runnable but waiting for a CPU. NULL = not measured.
ALTER TABLE steps ADD COLUMN cpu_ns INTEGER;
ALTER TABLE steps ADD COLUMN runq_ns INTEGER;
)sql"},
    {4, R"sql(
-- The rank's kernel boot id (/proc/sys/kernel/random/boot_id): ranks with rank 0's boot id read
-- its clock and take no offset. '' = not recorded.
ALTER TABLE ranks ADD COLUMN boot_id TEXT NOT NULL DEFAULT '';
-- The offset is right within +- this (half the kept exchange's round trip), ns.
ALTER TABLE ranks ADD COLUMN clock_uncertainty_ns INTEGER NOT NULL DEFAULT 0;
UPDATE ranks SET clock_uncertainty_ns = (clock_rtt_ns + 1) / 2 WHERE clock_rtt_ns > 0;
)sql"},
    {5, R"sql(
-- What recorded the run: the framework and its version ("torch 2.11.0+cu130", "torch 1.13.0").
-- '' = not recorded (files before version 5, imported traces that do not say).
ALTER TABLE run ADD COLUMN framework_version TEXT NOT NULL DEFAULT '';
)sql"},
    {6, R"sql(
-- Spans in blocks: the hot table (thousands of rows, a block of up to 2048 spans each, where
-- spans had one row per span). A block holds spans of one lane sorted by start, equal starts in
-- append order, encoded by span_block.h's codec (about 9 bytes a span where a row took 34).
-- Blocks of a lane may overlap in time (a span appended after later ones went into the lane's
-- open block): readers merge them by (start, seq), which is (start, append order). Clustered on
-- its key like spans was; a window query reads the blocks whose [first_start_ns, max_end_ns]
-- meets the window, from first_start_ns >= t0 - lanes.block_reach_ns on.
CREATE TABLE span_blocks (
  lane           INTEGER NOT NULL, -- lanes.id
  first_start_ns INTEGER NOT NULL, -- start of the block's first span (rank's clock)
  seq            INTEGER NOT NULL, -- the block's number in its lane, from 0 in the order blocks
                                   -- were started: every span of block n was appended before
                                   -- any span of block n + 1 at the same start
  last_start_ns  INTEGER NOT NULL, -- start of its last span
  max_end_ns     INTEGER NOT NULL, -- the latest end of its spans
  count          INTEGER NOT NULL, -- spans in data, 1 .. 2048
  data           BLOB NOT NULL,    -- the spans (span_block.h): start, dur >= 0, kind, name
                                   -- (strings.id), step (-1 none), bucket (-1 none), bytes
  PRIMARY KEY (lane, first_start_ns, seq)
) WITHOUT ROWID;
-- The largest max_end_ns - first_start_ns of the lane's blocks, 0 if none. Kept by the writer in
-- the same transaction as the blocks.
ALTER TABLE lanes ADD COLUMN block_reach_ns INTEGER NOT NULL DEFAULT 0;
)sql", convertSpansToBlocks},
    {7, R"sql(
-- Stored summaries (summary_store.h): the run's analysis, computed once by whoever finished the
-- file (merge, import, `lockstep index`) and read by `report` and the app instead of every span.
-- One row per part; a writer that opens the file deletes them all (they describe what it changes).
CREATE TABLE summaries (
  part    TEXT PRIMARY KEY,  -- summaryPartName: run | steps | buckets
  version INTEGER NOT NULL,  -- kSummaryVersion of the codec that wrote it; another version is stale
  stamp   TEXT NOT NULL,     -- the file's contents it was computed from (steps, ranks, lanes, span
                             -- count...): a part whose stamp differs from the file's is stale
  data    BLOB NOT NULL      -- the part's records (summary_store.cpp), zlib-compressed
);
)sql"},
    {8, R"sql(
-- Instants in blocks, as spans are since version 6: a block of up to 9 KiB (4096 instants) of one
-- lane sorted by time, equal times in append order, encoded by instant_block.h's codec (about 6 bytes
-- an instant on disk where a row and its index entry took 50). Blocks of a lane may overlap in time, as
-- span blocks may: readers merge them by (ts, seq), which is (ts, append order). Load reads them
-- all; there is no window query on instants, so no reach and no max end.
CREATE TABLE instant_blocks (
  lane        INTEGER NOT NULL, -- lanes.id
  first_ts_ns INTEGER NOT NULL, -- time of the block's first instant (rank's clock)
  seq         INTEGER NOT NULL, -- the block's number in its lane, from 0 in the order blocks
                                -- were started: every instant of block n was appended before any
                                -- instant of block n + 1 at the same time
  last_ts_ns  INTEGER NOT NULL, -- time of its last instant
  count       INTEGER NOT NULL, -- instants in data, 1 .. 4096
  data        BLOB NOT NULL,    -- the instants (instant_block.h): ts, kind (InstantKind value),
                                -- name (strings.id), step (-1 none), bucket (-1 none)
  PRIMARY KEY (lane, first_ts_ns, seq)
) WITHOUT ROWID;
)sql", convertInstantsToBlocks},
}};

// Rows of an old table into blocks (migrations 6 and 8): `select` gives the lane, then what
// `readRow` reads, in key order (lane, time, append order); blocks as the writer closes them (at
// Table<R>::kPerBlock records or kMaxBytes bytes) per lane, block seq from 0 in time order.
// `reach` receives each lane's largest max end - first key.
template <class R>
Status convertRowsToBlocks(sqlite3* db, const char* select, R (*readRow)(sqlite3_stmt*), const char* what,
                           std::vector<std::pair<int64_t, int64_t>>& reach)
{
    using Table = blocks::Table<R>;
    sqlite3_stmt* sel = nullptr;
    sqlite3_stmt* ins = nullptr;
    const auto done = [&](Status s) {
        sqlite3_finalize(sel);
        sqlite3_finalize(ins);
        return s;
    };
    int rc = sqlite3_prepare_v2(db, select, -1, &sel, nullptr);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, Table::kInsert, -1, &ins, nullptr);
    if (rc != SQLITE_OK)
        return done(fail(sqliteError(db, rc, sqlite3_db_filename(db, "main"), what)));
    std::vector<R> block;
    std::string blob;
    int64_t lane = 0, seq = 0;
    // Stores one block from the front of `block` (all of it, or as much as one block holds) and
    // drops those records.
    const auto storeFront = [&]() -> Status {
        blocks::Row row;
        if (auto s = blocks::encode(std::span<const R>(block), blob, row, Table::kMaxBytes); !s)
            return fail(ErrorCode::BadFile, std::string(what) + ": " + s.error().message);
        const int64_t values[] = {lane, row.first, seq++, row.last, row.maxEnd, row.count};
        for (int i = 0; i < 6; ++i)
            sqlite3_bind_int64(ins, i + 1, values[i]);
        sqlite3_bind_blob(ins, 7, blob.data(), static_cast<int>(blob.size()), SQLITE_STATIC);
        const int r = sqlite3_step(ins);
        sqlite3_reset(ins);
        if (r != SQLITE_DONE)
            return fail(sqliteError(db, r, sqlite3_db_filename(db, "main"), what));
        if (reach.empty() || reach.back().first != lane)
            reach.emplace_back(lane, 0);
        reach.back().second = std::max(reach.back().second, row.maxEnd - row.first);
        block.erase(block.begin(), block.begin() + static_cast<ptrdiff_t>(row.count));
        return {};
    };
    const auto flush = [&]() -> Status {
        while (!block.empty())
            if (auto s = storeFront(); !s)
                return s;
        return {};
    };
    while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
        const int64_t rowLane = sqlite3_column_int64(sel, 0);
        if (rowLane != lane) {
            if (auto s = flush(); !s)
                return done(s);
            seq = 0;
            lane = rowLane;
        } else if (block.size() == Table::kPerBlock) {
            if (auto s = storeFront(); !s)
                return done(s);
        }
        block.push_back(readRow(sel));
    }
    if (rc != SQLITE_DONE)
        return done(fail(sqliteError(db, rc, sqlite3_db_filename(db, "main"), what)));
    return done(flush());
}

// Migration 6's conversion: spans rows, in key order, into blocks of kSpanBlockSpans per lane,
// the lanes' reach, then the spans table is dropped.
Status convertSpansToBlocks(sqlite3* db)
{
    const char* what = "converting spans to blocks";
    std::vector<std::pair<int64_t, int64_t>> reach; // (lane, reach)
    const auto readRow = [](sqlite3_stmt* sel) {
        Span sp;
        sp.start = sqlite3_column_int64(sel, 1);
        sp.end = sp.start + sqlite3_column_int64(sel, 2);
        const int kind = sqlite3_column_int(sel, 3);
        sp.kind = kind >= 0 && kind < kSpanKindCount ? static_cast<SpanKind>(kind) : SpanKind::Other;
        sp.name = StringId{static_cast<uint32_t>(sqlite3_column_int64(sel, 4))};
        sp.step = sqlite3_column_int(sel, 5);
        sp.bucket = sqlite3_column_int(sel, 6);
        sp.bytes = sqlite3_column_int64(sel, 7);
        return sp;
    };
    if (auto s = convertRowsToBlocks<Span>(db,
                                           "SELECT lane, start_ns, dur_ns, kind, name, step, bucket, bytes FROM spans "
                                           "ORDER BY lane, start_ns, seq",
                                           +readRow, what, reach);
        !s)
        return s;
    sqlite3_stmt* upd = nullptr;
    int rc = sqlite3_prepare_v2(db, "UPDATE lanes SET block_reach_ns = ?2 WHERE id = ?1", -1, &upd, nullptr);
    for (const auto& [l, r] : reach) {
        if (rc != SQLITE_OK)
            break;
        sqlite3_bind_int64(upd, 1, l);
        sqlite3_bind_int64(upd, 2, r);
        rc = sqlite3_step(upd) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
        sqlite3_reset(upd);
    }
    sqlite3_finalize(upd);
    if (rc != SQLITE_OK)
        return fail(sqliteError(db, rc, sqlite3_db_filename(db, "main"), what));
    return exec(db, "DROP TABLE spans", what);
}

// Migration 8's conversion: instants rows, in (lane, ts_ns, rowid) order (rowid: append order
// among equal times), into blocks as the writer makes them, then the instants table and
// its index are dropped.
Status convertInstantsToBlocks(sqlite3* db)
{
    const char* what = "converting instants to blocks";
    std::vector<std::pair<int64_t, int64_t>> reach; // unused: instants have no window query
    const auto readRow = [](sqlite3_stmt* sel) {
        Instant in;
        in.kind = sqlite3_column_int(sel, 1) == 1 ? InstantKind::Marker : InstantKind::GradReady;
        in.name = StringId{static_cast<uint32_t>(sqlite3_column_int64(sel, 2))};
        in.ts = sqlite3_column_int64(sel, 3);
        in.step = sqlite3_column_int(sel, 4);
        in.bucket = sqlite3_column_int(sel, 5);
        return in;
    };
    if (auto s = convertRowsToBlocks<Instant>(db,
                                              "SELECT lane, kind, name, ts_ns, step, bucket FROM instants "
                                              "ORDER BY lane, ts_ns, rowid",
                                              +readRow, what, reach);
        !s)
        return s;
    return exec(db, "DROP INDEX instants_lane_ts; DROP TABLE instants", what);
}

uint32_t be32(const unsigned char* p)
{
    return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

bool fileExists(const std::string& path)
{
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}

// Percent-encodes a path for a file: URI (SQLite treats '?', '#' and '%' specially).
std::string fileUri(const std::string& path)
{
    std::string uri = "file:";
    for (unsigned char c : path) {
        if (c == '?' || c == '#' || c == '%' || c < 0x20 || c >= 0x7f) {
            char buf[4];
            std::snprintf(buf, sizeof buf, "%%%02X", c);
            uri += buf;
        } else {
            uri += static_cast<char>(c);
        }
    }
    return uri;
}

} // namespace

// A full disk reaches SQLite as SQLITE_FULL (its unix VFS maps ENOSPC to it); a file-size limit
// or a quota as a failed write, SQLITE_IOERR_WRITE, whose errno SQLite does not always keep.
// Both are the disk refusing data: one wording for all, and the callers give the error the code
// ErrorCode::DiskFull (result.h). "" for other errors.
std::string diskFullReason(sqlite3* db, int rc)
{
    const int err = db ? sqlite3_system_errno(db) : 0;
    const int extended = db ? sqlite3_extended_errcode(db) : rc;
    if ((rc & 0xff) == SQLITE_FULL || err == ENOSPC || err == EFBIG || err == EDQUOT)
        return std::string(kDiskFull) + " (" + (err ? std::strerror(err) : "database or disk is full") + ")";
    if (rc == SQLITE_IOERR_WRITE || extended == SQLITE_IOERR_WRITE)
        return std::string(kDiskFull) + " or failing (a write was refused)";
    return {};
}

Status exec(sqlite3* db, const char* sql, const char* what)
{
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
        std::string msg = std::string(what) + ": " + (err ? err : sqlite3_errstr(rc));
        sqlite3_free(err);
        if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB)
            return fail(ErrorCode::BadFile, std::string(what) + ": the run database is corrupt or truncated");
        if (const std::string full = diskFullReason(db, rc); !full.empty())
            return fail(ErrorCode::DiskFull, std::string(what) + ": " + full);
        return fail(msg);
    }
    return {};
}

Error sqliteError(sqlite3* db, int rc, const std::string& path, const char* what)
{
    const int primary = rc & 0xff;
    if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB)
        return Error{path + ": the run database is corrupt or truncated (" + what + ")", ErrorCode::BadFile};
    if (const std::string full = diskFullReason(db, rc); !full.empty())
        return Error{path + ": " + what + ": " + full, ErrorCode::DiskFull};
    return Error{path + ": " + what + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc))};
}

Result<int> userVersion(sqlite3* db)
{
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, nullptr);
    if (rc != SQLITE_OK)
        return fail(sqliteError(db, rc, sqlite3_db_filename(db, "main"), "reading user_version"));
    rc = sqlite3_step(st);
    const int v = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_finalize(st);
    if (v < 0)
        return fail(sqliteError(db, rc, sqlite3_db_filename(db, "main"), "reading user_version"));
    return v;
}

Status createOrMigrate(sqlite3* db, int targetVersion)
{
    if (targetVersion < 0)
        targetVersion = kSchemaVersion;
    auto version = userVersion(db);
    if (!version)
        return std::unexpected(version.error());
    int v = *version;
    if (v > kSchemaVersion)
        return fail(ErrorCode::BadFile, "the run database has schema version " + std::to_string(v)
                    + ", newer than this build's " + std::to_string(kSchemaVersion)
                    + "; use a newer Lockstep");
    if (v == 0) {
        // A fresh file: base DDL, application_id and version 1 in one transaction.
        std::string sql = "BEGIN;\n";
        sql += kBaseDdl;
        sql += "PRAGMA application_id = " + std::to_string(kApplicationId) + ";\n";
        sql += "PRAGMA user_version = 1;\nCOMMIT;";
        if (auto s = exec(db, sql.c_str(), "creating the schema"); !s) {
            sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
            return s;
        }
        v = 1;
    }
    for (const Migration& m : kMigrations) {
        if (m.toVersion <= v || m.toVersion > targetVersion)
            continue;
        const std::string bump = "PRAGMA user_version = " + std::to_string(m.toVersion) + ";\nCOMMIT;";
        Status s = exec(db, (std::string("BEGIN;\n") + m.sql).c_str(), "migrating the run database");
        if (s && m.convert)
            s = m.convert(db);
        if (s)
            s = exec(db, bump.c_str(), "migrating the run database");
        if (!s) {
            sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
            return fail(s.error(), s.error().message + " (to version " + std::to_string(m.toVersion) + ")");
        }
        v = m.toVersion;
    }
    return {};
}

// The SQLite file header (https://sqlite.org/fileformat.html#the_database_header) carries all we
// need to refuse a file without letting SQLite near it: the magic string (0), page size (16),
// change counter (24), page count (28, valid when 92 equals 24), user_version (60) and
// application_id (68), all big-endian.
Status checkHeader(const std::string& path, int* version)
{
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        const int err = errno;
        if (err == ENOENT)
            return fail(ErrorCode::BadFile, path + ": no such file");
        if (err == ELOOP)
            return fail(ErrorCode::BadFile, path + ": a loop of symbolic links, not a file");
        return fail(ErrorCode::BadFile, path + ": cannot be read: " + std::strerror(err));
    }
    if (S_ISDIR(st.st_mode))
        return fail(ErrorCode::BadFile, path + ": is a directory, not a Lockstep run database");
    // A FIFO (or socket, or device) is never opened: reading one could wait forever.
    if (!S_ISREG(st.st_mode))
        return fail(ErrorCode::BadFile, path + ": is not a regular file (a pipe, socket or device), not a Lockstep run database");
    if (st.st_size == 0)
        return fail(ErrorCode::BadFile, path + ": the file is empty, not a Lockstep run database");
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return fail(ErrorCode::BadFile, path + ": cannot be read (permission?)");
    unsigned char h[100] = {};
    in.read(reinterpret_cast<char*>(h), sizeof h);
    const auto got = in.gcount();
    static constexpr char kMagic[] = "SQLite format 3";
    if (got < 16 || std::memcmp(h, kMagic, 16) != 0)
        return fail(ErrorCode::BadFile, path + ": not a Lockstep run database (not an SQLite file)");
    if (got < 100)
        return fail(ErrorCode::BadFile, path + ": the run database is corrupt or truncated (header cut short)");
    if (static_cast<int32_t>(be32(h + 68)) != kApplicationId)
        return fail(ErrorCode::BadFile, path + ": an SQLite database, but not a Lockstep run database (application_id "
                    + std::to_string(static_cast<int32_t>(be32(h + 68))) + ")");
    const int v = static_cast<int32_t>(be32(h + 60));
    if (v > kSchemaVersion)
        return fail(ErrorCode::BadFile, path + ": the run database has schema version " + std::to_string(v)
                    + ", newer than this build's " + std::to_string(kSchemaVersion)
                    + "; open it with a newer Lockstep");
    if (v < 1)
        return fail(ErrorCode::BadFile, path + ": a Lockstep file without a schema version; not a run database");
    uint32_t pageSize = (uint32_t(h[16]) << 8) | h[17];
    if (pageSize == 1)
        pageSize = 65536;
    if (pageSize < 512 || (pageSize & (pageSize - 1)) != 0)
        return fail(ErrorCode::BadFile, path + ": the run database is corrupt or truncated (bad page size)");
    // While a writer is live the newest pages sit in the -wal file and a checkpoint may be
    // growing the main file right now; the size check only holds for a file at rest.
    const bool live = fileExists(path + "-wal");
    const uint32_t pages = be32(h + 28);
    if (!live && pages != 0 && be32(h + 24) == be32(h + 92)) {
        const auto expected = static_cast<int64_t>(pages) * pageSize;
        if (st.st_size < expected || st.st_size % pageSize != 0)
            return fail(ErrorCode::BadFile, path + ": the run database is corrupt or truncated (" + std::to_string(st.st_size)
                        + " bytes, the header says " + std::to_string(expected) + ")");
    }
    if (version)
        *version = v;
    return {};
}

std::string spanColumnList(bool readColumnsOnly)
{
    std::string out;
    const auto add = [&](SpanColumn c) { out += (out.empty() ? "" : ", ") + std::string(kSpanColumnNames[size_t(c)]); };
    if (readColumnsOnly)
        for (SpanColumn c : kSpanReadColumns)
            add(c);
    else
        for (int c = 0; c < kSpanColumnCount; ++c)
            add(static_cast<SpanColumn>(c));
    return out;
}

Result<sqlite3*> openReadOnly(const std::string& path, int* version)
{
    int v = 0;
    if (auto s = checkHeader(path, &v); !s)
        return std::unexpected(s.error());
    // Header bytes 18 and 19 (write and read format versions) are 2 in WAL mode, 1 otherwise.
    bool walMode = false;
    {
        std::ifstream in(path, std::ios::binary);
        unsigned char h[20] = {};
        in.read(reinterpret_cast<char*>(h), sizeof h);
        walMode = in.gcount() == sizeof h && (h[18] == 2 || h[19] == 2);
    }
    const bool atRest = walMode && !fileExists(path + "-wal") && !fileExists(path + "-journal");
    const std::string uri = fileUri(path) + (atRest ? "?immutable=1" : "?mode=ro");
    sqlite3* db = nullptr;
    int rc = sqlite3_open_v2(uri.c_str(), &db,
                             SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
        Error error = sqliteError(db, rc, path, "opening");
        sqlite3_close(db);
        return fail(std::move(error));
    }
    // Readers wait briefly for a checkpointing writer instead of failing with SQLITE_BUSY.
    sqlite3_busy_timeout(db, 2000);
    // The version and the tables, read through SQLite this time (page 1 may be newer in the WAL).
    auto uv = userVersion(db);
    if (!uv) {
        const int code = sqlite3_extended_errcode(db);
        sqlite3_close(db);
        if (code == SQLITE_READONLY_RECOVERY || code == SQLITE_READONLY_CANTINIT)
            return fail(ErrorCode::BadFile, path + ": its writer stopped in the middle of writing; the write-ahead log beside it "
                               "must be recovered by a writer first (lockstep merge of the file does not do that)");
        return fail(uv.error(), path + ": " + uv.error().message);
    }
    if (*uv > kSchemaVersion || *uv < 1) {
        sqlite3_close(db);
        return fail(ErrorCode::BadFile, path + ": unsupported run database schema version " + std::to_string(*uv));
    }
    sqlite3_stmt* st = nullptr;
    const std::string tables_sql = std::string("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN "
                                               "('strings','run','config_extra','ranks','lanes','steps','buckets','")
        + (*uv >= kSpanBlocksVersion ? "span_blocks" : "spans") + "','"
        + (*uv >= kInstantBlocksVersion ? "instant_blocks" : "instants") + "','diagnostics')";
    rc = sqlite3_prepare_v2(db, tables_sql.c_str(), -1, &st, nullptr);
    int tables = -1;
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
        tables = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (tables < 0) {
        Error error = sqliteError(db, rc, path, "reading the schema");
        sqlite3_close(db);
        return fail(std::move(error));
    }
    if (tables != 10) {
        sqlite3_close(db);
        return fail(ErrorCode::BadFile, path + ": not a Lockstep run database (tables missing)");
    }
    if (version)
        *version = *uv;
    return db;
}

} // namespace schema
} // namespace lockstep::core
