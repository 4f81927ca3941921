// Private to lockstep::core: the run database's schema (schema.cpp is the one place it is
// declared), its migration steps, and the checks every opener shares.
#pragma once

#include "lockstep/core/result.h"

#include <sqlite3.h>

#include <array>
#include <string>

namespace lockstep::core::schema {

// Brings an open, writable connection to kSchemaVersion. On an empty database this creates the
// whole schema (base DDL, then every migration step, the same path an old file takes), on an
// older file it applies the missing steps, each in its own transaction together with the
// user_version bump. `targetVersion` exists for tests that need a file of an older version.
Status createOrMigrate(sqlite3* db, int targetVersion = -1);

// The version this connection's file declares (PRAGMA user_version).
Result<int> userVersion(sqlite3* db);

// Executes SQL (no results), mapping errors to messages that name `what` and to their codes
// (a corrupt file ErrorCode::BadFile, a full disk ErrorCode::DiskFull).
Status exec(sqlite3* db, const char* sql, const char* what);

// Why a write failed when the disk refused it ("disk full (No space left on device)"), else "".
std::string diskFullReason(sqlite3* db, int rc);

// The error of a failed SQLite call: corrupt/not-a-database codes become "corrupt or truncated"
// (ErrorCode::BadFile), a full disk says so (diskFullReason, ErrorCode::DiskFull).
Error sqliteError(sqlite3* db, int rc, const std::string& path, const char* what);

// Header-level checks done before SQLite ever opens the file (so a foreign file is never touched
// and no -wal/-shm appears next to it): exists, non-empty, SQLite magic, application_id,
// user_version known to this build, file size consistent with the header's page count.
// `version` receives the header's user_version.
Status checkHeader(const std::string& path, int* version);

// Opens `path` read-only after checkHeader and verifies the tables readers need. Never creates a
// file beside it: a file at rest (rollback-journal mode, or WAL mode without a -wal file: a writer
// that closed cleanly or never wrote) is opened immutable, so SQLite takes no locks and makes no
// -wal/-shm (also in a read-only folder); a file with a -wal beside it is being written (or its
// writer died) and is opened as a WAL reader (mode=ro), which sees its committed transactions.
Result<sqlite3*> openReadOnly(const std::string& path, int* version);

// The lanes.max_dur_ns column exists from this version on; older files compute it on the fly.
inline constexpr int kMaxDurVersion = 2;
// The steps.cpu_ns and steps.runq_ns columns exist from this version on; older files read -1.
inline constexpr int kStepCpuVersion = 3;
// ranks.boot_id and ranks.clock_uncertainty_ns (clock_sync.h).
inline constexpr int kBootIdVersion = 4;
// span_blocks (span_block.h) and lanes.block_reach_ns replace the spans table from this version
// on; readers of older files read spans rows (the columns below).
inline constexpr int kSpanBlocksVersion = 6;
// Table summaries (summary_store.h) exists from this version on; older files have no stored summary.
inline constexpr int kSummariesVersion = 7;
// instant_blocks (instant_block.h) replaces the instants table from this version on; readers of
// older files read instants rows.
inline constexpr int kInstantBlocksVersion = 8;

// The spans table's columns (files before kSpanBlocksVersion; schema.cpp declares the table with a
// comment per column), in the table's order. The readers' SELECTs of older files and their reads
// are built from this one list and these indices; a test checks it against a version-5 table.
enum SpanColumn : int {
    kSpanLane,
    kSpanStart,
    kSpanSeq,
    kSpanDur,
    kSpanKind,
    kSpanName,
    kSpanStep,
    kSpanBucket,
    kSpanBytes,
    kSpanColumnCount
};
inline constexpr std::array<const char*, kSpanColumnCount> kSpanColumnNames = {
    "lane", "start_ns", "seq", "dur_ns", "kind", "name", "step", "bucket", "bytes"};
// What readers select: every column but seq (it only makes the key unique). Reading it cost ~8%
// of load()'s CPU and ~10% of a window query (bench_db), for nothing.
inline constexpr std::array<SpanColumn, kSpanColumnCount - 1> kSpanReadColumns = {
    kSpanLane, kSpanStart, kSpanDur, kSpanKind, kSpanName, kSpanStep, kSpanBucket, kSpanBytes};
// Where a column is in a row of kSpanReadColumns.
constexpr int spanReadIndex(SpanColumn c)
{
    for (size_t i = 0; i < kSpanReadColumns.size(); ++i)
        if (kSpanReadColumns[i] == c)
            return int(i);
    return -1;
}
// "lane, start_ns, seq, ...": all columns in the table's order (the writer's INSERT), or with
// readColumnsOnly those of kSpanReadColumns in its order (the readers' SELECTs).
std::string spanColumnList(bool readColumnsOnly = false);

} // namespace lockstep::core::schema
