// The run database's writer and reader (schema in schema.cpp).
//
// Writer speed (first two rounds: one row per span, schema <= 5; the third round replaced it).
// Spans arrive by the million; appendSpans binds prepared multi-row INSERTs
// inside a transaction that stays open until commit() (the recorder commits once per step).
// Layout and settings were chosen with bench_db (numbers in bench/db/bench_db.cpp's header):
// spans is a WITHOUT ROWID table clustered on (lane, start_ns, seq), so a span is one b-tree
// insert instead of two and the window query reads one contiguous key range with no row
// lookups. Measured against a rowid table with a (lane, start_ns, seq) index, 2 M spans:
// CPU rate 1.25 vs 1.12 M spans/s, 44 vs 68 bytes per span, window query 0.22 vs 0.30 ms.
// Inserts go 128 rows per statement, in (lane, start) order.
//
// Second round (bench_db, 4 M spans, CPU rates bulk / one commit per step, each variant run
// 2-3 times on the shared machine, load ~2.5; the spread between runs was 5-10%):
//   before                                            1.42 / 1.30 M/s, 43.6 bytes/span
//   dur_ns (end - start, 2-3 bytes) instead of end_ns 1.38-1.43 / 1.26-1.33, 36.9 bytes: kept
//     for the size (its CPU gain is inside the noise), and because it is free for readers.
//   an unchanged parameter is not bound again         1.45-1.51 / 1.36-1.43 vs 1.40-1.42 /
//     1.18-1.33 without (a statement keeps its bindings across reset; lane, kind, step, bucket,
//     bytes and now seq mostly repeat slot by slot): kept.
//   seq = count of equal starts in the lane (0 almost always) instead of a global counter
//                                                     1.50-1.54 / 1.42-1.44 vs 1.48-1.51 /
//     1.25-1.39, 33.7 bytes/span: kept (a zero costs no byte in a record, and its bind repeats).
//   page size 16 K / 32 K / 64 K                      1.41-1.46 / 1.25-1.26, 1.33-1.38 /
//     1.10-1.23, 1.34 / 1.07 vs 8 K 1.41-1.43 / 1.31-1.33: 8 K stays.
//   256 / 512 rows per statement                      within noise of 128 (1.38-1.47): 128 stays.
//   wal_autocheckpoint 4096 / 65536 / 0 (never)       within noise; checkpoints cost ~2%: stays.
//   mmap_size 1 GB                                    1.44-1.45 / 1.32-1.33, no better: not used.
//   NOT NULL only on the key columns (6 HaltIfNull opcodes less per row, of ~40)
//                                                     1.58 / 1.43-1.46 vs 1.52-1.56 / 1.37-1.43
//     in 3 alternating pairs: kept (the writer binds every column; schema.cpp).
// After: 1.58 M/s bulk, 1.45 M/s with a commit per step, 33.7 bytes/span, window query
// 0.24 ms; saveRun (spans already in lane order: every insert lands on the b-tree's right edge)
// 2.0 M/s. What remains is SQLite itself (perf: VDBE 18%, the key seek 11%, page memmoves 4%,
// kernel writes of WAL and checkpoint 16%, the writer's own code 2%).
//
// Third round: span blocks (schema 6, issue 31: >= 2 M spans/s and <= 20 bytes per span). A row
// per span cost SQLite's per-row work (VDBE, key seek, cell) on every span and 34 bytes on disk,
// most of it record header, key repeated per row and b-tree slack. Now a lane's spans are encoded
// by core/span_block.h (varints, start as a delta from the previous start, the other fields only
// when they differ from the previous span's: bench_db's spans take ~7 bytes) in blocks of up to
// kSpanBlockSpans, one row each (schema.cpp span_blocks). The writer keeps each lane's open block
// decoded in memory and rewrites its row at every commit ("Span blocks" below).
// Block size, bench_db 4 M spans, CPU rates bulk / step commits, two alternating rounds at load
// average 8-12 (the spread between rounds was 10-30%):
//   512   8.0-9.1 / 3.8-5.5 M/s, 18.3 bytes/span, window 0.07-0.09 ms (p95 0.12-0.14)
//   1024  9.9-10.7 / 5.9-6.9,      9.2 bytes,      window 0.07-0.08 (p95 0.12-0.13)
//   2048  10.7-12.2 / 5.4-5.7,     8.6 bytes,      window 0.09-0.11 (p95 0.15-0.21): kept
//   4096  10.0 / 3.3-3.4,          8.4 bytes,      window 0.17-0.20 (p95 1.7-12)
//   8192  8.0-9.5 / 2.4-2.5,       8.7 bytes,      window 0.29-0.34 (p95 13-20)
// 512 spans (~4.5 KB) spill just past a WITHOUT ROWID cell's local maximum (~2 KB on 8 KB pages)
// into an overflow page that stays mostly empty: twice the bytes. Larger blocks cost step commits
// (the open block is rewritten whole at every commit: up to 4096 spans re-encoded and re-stored
// per lane per step) and window queries (a whole block is decoded to find ~1000 spans).
// Against the rows (main's bench_db, 2 M spans, same machine and hour): CPU 1.24 -> 12.8 M/s
// bulk, 0.90 -> 5.6 M/s with a commit per step, 33.6 -> 8.7 bytes/span, window query 0.38 ->
// 0.10 ms median, load 586 -> 123 ms CPU. Measured at 10 M: docs/benchmarks.md.
// The cost of rewriting the open block shows with small steps (writeStep on 8 lanes, CPU per
// commit, rows -> blocks, one run each, load ~8): 10 spans per lane per step 285 -> 365 us
// (28% more: each commit re-encodes and re-stores ~1000 spans per lane); 100 spans 1008 -> 421 us;
// 625 spans 3505 -> 653 us. A recorder with millisecond steps pays ~80 us more per step on its
// writer thread; not worth a second layout (an uncompressed tail per lane) yet.
//
// Fourth round: instant blocks (schema 8). The gradient-ready instants, ~0.8 per span, were still
// a row each with a (lane, ts) index: 49.6 bytes an instant, four fifths of bench_big's file (10 M
// spans, 1024 ranks: 49.9 bytes per span in all). They now go through the same writer (OpenBlock,
// append, flushLane, storeBlock are templates over the record) into instant_blocks, encoded by
// core/instant_block.h (~5.1 bytes an instant on that run: flags, a 3-byte time delta, a 1-byte
// name difference). Block size, bench_big 10 M, one run each, load 2-7:
//   2048 instants (~10.5 KB)  7.9 bytes/instant on disk, 16.5 bytes/span for the whole file
//   9 KiB (~1,800 instants)   6.0 bytes/instant,         15.0 bytes/span: kept
// SQLite keeps between ~1 KB and ~2 KB of a row in its b-tree cell on 8 KB pages and the rest in
// whole overflow pages: a 10.5 KB row took two overflow pages, the second holding ~1 KB (dbstat:
// 1.75 overflow pages per block, 21 MB of them unused); a row of 9.2-10.2 KB fills exactly one.
// So instant blocks close at a byte size (the encoder takes the longest prefix that fits), with
// a count only as a bound for tiny instants; the 1 byte left per instant is mostly each lane's
// last, partial block. Writing rose from 0.99 to 2.5-4.4 M spans/s wall (4.7-6.2 M/s CPU, the
// generator's time included); bench_db (spans only) is unchanged within noise (CPU 13.5-14.8 vs
// main's 13.2-13.9 M/s bulk, 6.7-6.9 vs 6.7-7.1 M/s with step commits, at load ~7).
//
// Live reading. The recorder commits once per step and writes the step row in the same
// transaction as the step's spans. A transaction may still carry spans of a step that has no
// row yet (the next step's data loading, an all-reduce in flight across the commit), and a run
// that died mid-step leaves such spans behind forever. RunReader::load() therefore reads in one
// read transaction (one WAL snapshot: the writer goes on appending, unblocked) and keeps a span
// or instant only if its (rank, step) has a committed step row, or its step is kNoStep (spans
// outside the step structure: imports, setup). So a reader sees whole steps only.
#include "lockstep/core/run_db.h"
#include "lockstep/core/summary_store.h"

#include "lockstep/core/clock_sync.h"
#include "lockstep/core/diagnostics.h"
#include "lockstep/core/fields.h"
#include "lockstep/core/output_file.h"
#include "lockstep/core/span_block.h"

#include "blocks.h"
#include "schema.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

namespace lockstep::core {

namespace {

// A prepared statement that finalizes itself.
class Stmt {
public:
    Stmt() = default;
    ~Stmt() { sqlite3_finalize(m_st); }
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;
    int prepare(sqlite3* db, const char* sql)
    {
        sqlite3_finalize(m_st);
        m_st = nullptr;
        return sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &m_st, nullptr);
    }
    void finalize()
    {
        sqlite3_finalize(m_st);
        m_st = nullptr;
    }
    sqlite3_stmt* get() const { return m_st; }
    void bind(int i, int64_t v) { sqlite3_bind_int64(m_st, i, v); }
    void bind(int i, int v) { sqlite3_bind_int(m_st, i, v); }
    void bind(int i, double v)
    {
        if (std::isnan(v))
            sqlite3_bind_null(m_st, i);
        else
            sqlite3_bind_double(m_st, i, v);
    }
    void bind(int i, std::string_view v)
    {
        sqlite3_bind_text(m_st, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    }
    // Steps to completion (no rows expected) and resets; returns the SQLite code.
    int run()
    {
        const int rc = sqlite3_step(m_st);
        sqlite3_reset(m_st);
        return rc == SQLITE_ROW ? SQLITE_DONE : rc;
    }

private:
    sqlite3_stmt* m_st = nullptr;
};

std::string columnText(sqlite3_stmt* st, int i)
{
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st, i));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(st, i))) : std::string();
}

int64_t stepKey(int32_t rank, int32_t step)
{
    return (static_cast<int64_t>(rank) << 32) | static_cast<uint32_t>(step);
}

// Settings of the writing connection, chosen with bench_db (2 M spans, CPU rate, noisy within
// about 5% on the shared development machine):
//  - WAL is required: readers must never block the recorder.
//  - synchronous=OFF while recording: an application crash still cannot corrupt a WAL file, only
//    an OS crash or power loss can; it saved 5-10% CPU and every fsync stall at checkpoints
//    against NORMAL. close() turns it to FULL before the final checkpoint, so a finished run is
//    durable.
//  - checkpoints every 16384 pages (128 MiB of WAL) instead of 1000: fewer rewrites of the same
//    interior pages; a 64 MiB page cache holds the b-tree's right edges.
//  - page_size 8192: 4096 and 16384 were within noise, 65536 ~20% slower; 8192 gave the best
//    median.
constexpr const char* kWriterPragmas =
    "PRAGMA journal_mode = WAL;"
    "PRAGMA synchronous = OFF;"
    "PRAGMA cache_size = -65536;"
    "PRAGMA wal_autocheckpoint = 16384;"
    "PRAGMA temp_store = MEMORY;";
// Larger pages: fewer b-tree splits and page headers per span; fixed when the file is created.
constexpr const char* kPageSizePragma = "PRAGMA page_size = 8192;";

// One row of a SELECT of schema::spanColumnList(true) (kSpanReadColumns) from a file older than
// kSpanBlocksVersion: the span, and the file's lane and string ids (the caller maps them).
struct SpanRow {
    Span span;
    int64_t lane = 0;
    int64_t name = 0;
};
SpanRow readSpanRow(sqlite3_stmt* st)
{
    using namespace schema;
    constexpr int lane = spanReadIndex(kSpanLane), start = spanReadIndex(kSpanStart), dur = spanReadIndex(kSpanDur),
                  kindAt = spanReadIndex(kSpanKind), name = spanReadIndex(kSpanName), step = spanReadIndex(kSpanStep),
                  bucket = spanReadIndex(kSpanBucket), bytes = spanReadIndex(kSpanBytes);
    static_assert(std::min({lane, start, dur, kindAt, name, step, bucket, bytes}) >= 0);
    SpanRow r;
    r.lane = sqlite3_column_int64(st, lane);
    r.name = sqlite3_column_int64(st, name);
    Span& sp = r.span;
    const int kind = sqlite3_column_int(st, kindAt);
    sp.kind = kind >= 0 && kind < kSpanKindCount ? static_cast<SpanKind>(kind) : SpanKind::Other;
    sp.start = sqlite3_column_int64(st, start);
    sp.end = sp.start + sqlite3_column_int64(st, dur);
    sp.step = sqlite3_column_int(st, step);
    sp.bucket = sqlite3_column_int(st, bucket);
    sp.bytes = sqlite3_column_int64(st, bytes);
    return r;
}

// Field tables (fields.h) to SQL: the column list of the fields a file of `version` has, in the
// table's order; "?1, ?2, ..." for all of them; binding a record's fields to those slots; reading
// them back from columns 0.. of a row selected with that column list.
template <class Record, size_t N>
std::string fieldColumns(const std::array<Field<Record>, N>& fields, int version = std::numeric_limits<int>::max())
{
    std::string out;
    for (const Field<Record>& f : fields)
        if (f.sinceSchema <= version)
            out += (out.empty() ? "" : ", ") + std::string(f.name);
    return out;
}

template <class Record, size_t N>
std::string fieldSlots(const std::array<Field<Record>, N>&)
{
    std::string out;
    for (size_t i = 1; i <= N; ++i)
        out += (i > 1 ? ", ?" : "?") + std::to_string(i);
    return out;
}

template <class Record, size_t N>
void bindFields(Stmt& st, const std::array<Field<Record>, N>& fields, const Record& record)
{
    for (size_t i = 0; i < N; ++i) {
        const int slot = static_cast<int>(i + 1);
        if (fieldIsNull(fields[i], record)) {
            sqlite3_bind_null(st.get(), slot);
            continue;
        }
        visitField(fields[i], record, [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>)
                st.bind(slot, std::string_view(v));
            else if constexpr (std::is_same_v<T, std::vector<std::string>>)
                st.bind(slot, std::string_view(joinTextList(v)));
            else if constexpr (std::is_enum_v<T>)
                st.bind(slot, std::string_view(enumName(v)));
            else if constexpr (std::is_same_v<T, uint32_t>)
                st.bind(slot, static_cast<int64_t>(v));
            else
                st.bind(slot, v);
        });
    }
}

// A field whose column is newer than the file keeps the record's default; NULL in a nullable
// column reads as the field's "unknown".
template <class Record, size_t N>
void readFields(sqlite3_stmt* s, const std::array<Field<Record>, N>& fields, int version, Record& record)
{
    int col = 0;
    for (const Field<Record>& f : fields) {
        if (f.sinceSchema > version)
            continue;
        const int i = col++;
        if (f.has(kFieldNullable) && sqlite3_column_type(s, i) == SQLITE_NULL) {
            setFieldNull(f, record);
            continue;
        }
        visitField(f, record, [&](auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>)
                v = columnText(s, i);
            else if constexpr (std::is_same_v<T, std::vector<std::string>>)
                v = splitTextList(columnText(s, i));
            else if constexpr (std::is_enum_v<T>)
                enumFromName(columnText(s, i), &v);
            else if constexpr (std::is_same_v<T, double>)
                v = sqlite3_column_double(s, i);
            else if constexpr (std::is_same_v<T, int32_t>)
                v = sqlite3_column_int(s, i);
            else
                v = static_cast<T>(sqlite3_column_int64(s, i));
        });
    }
}

// The rows of a rank, a step, a bucket: every field of its table (fields.h). A lane's row also
// sets max_dur_ns and block_reach_ns, which the writer keeps (0 until the lane's first span).
const std::string kInsertRank =
    "INSERT OR REPLACE INTO ranks (" + fieldColumns(kRankFields) + ") VALUES (" + fieldSlots(kRankFields) + ")";
const std::string kInsertStep =
    "INSERT OR REPLACE INTO steps (" + fieldColumns(kStepFields) + ") VALUES (" + fieldSlots(kStepFields) + ")";
const std::string kInsertBucket =
    "INSERT OR REPLACE INTO buckets (" + fieldColumns(kBucketFields) + ") VALUES (" + fieldSlots(kBucketFields) + ")";
// A diagnostic of a kind already stored adds its count (and gives a message if it had none).
const std::string kInsertDiagnostic = "INSERT INTO diagnostics (" + fieldColumns(kDiagnosticFields) + ") VALUES ("
    + fieldSlots(kDiagnosticFields) + ") ON CONFLICT (kind) DO UPDATE SET count = count + excluded.count, "
    "message = CASE WHEN message = '' THEN excluded.message ELSE message END";
const std::string kInsertLane =
    "INSERT INTO lanes (" + fieldColumns(kLaneFields) + ", max_dur_ns, block_reach_ns) VALUES (" + fieldSlots(kLaneFields) + ", 0, 0)";

// A rank's row: every field of kRankFields (fields.h).
} // namespace

// ---------------------------------------------------------------------------------------------
// RunWriter

// A lane's blocks of one kind (spans or instants) as the writer holds them (see appendSpans): the
// open block (the lane's last, not yet full) decoded once and kept, and the records appended
// since the last flush.
template <class R>
struct OpenBlock {
    std::vector<R> open;          // sorted by key (start, time), equal keys in append order
    int64_t openSeq = 0;          // the open block's seq
    bool openStored = false;      // a row holds an earlier state of it ...
    TimeNs storedFirst = 0;       // ... under this first key
    bool openDirty = false;       // it has records its row lacks
    std::vector<R> pending;       // appended since the last flush, in append order

    // At a commit, for a lane that got nothing in the transaction: gives back the buffers' spare
    // room. A writer that goes lane after lane (merge, the importers, bench_big's rank-major
    // order) would otherwise keep every lane's largest batch: 1.5 GB for bench_big's 2,048 lanes
    // of spans and instants, 0.25 GB with this. Lanes written in every transaction (the recorder,
    // bench_db) keep theirs and reallocate nothing.
    void trimIfIdle()
    {
        if (!pending.empty() || openDirty)
            return;
        std::vector<R>().swap(pending);
        open.shrink_to_fit();
    }
};

struct LaneBlocks {
    OpenBlock<Span> spans;
    OpenBlock<Instant> instants;
    int64_t maxDur = 0, maxDurStored = 0; // lanes.max_dur_ns
    int64_t reach = 0, reachStored = 0;   // lanes.block_reach_ns
    OpenBlock<Span>& of(const Span*) { return spans; }
    OpenBlock<Instant>& of(const Instant*) { return instants; }
};

// A block table's statements.
struct BlockStmts {
    Stmt ins, del;
};

struct RunWriter::Impl {
    std::string path;
    sqlite3* db = nullptr;
    StringTable strings;
    size_t stringsStored = 1; // strings[0] ('') is in the file from the start
    std::vector<LaneBlocks> lanes;
    std::string blob;          // the block being written
    bool inTxn = false;
    bool closed = false;
    std::string deferredError; // from intern(), which cannot return one
    BlockStmts spanBlocks, instantBlocks;
    Stmt insString, insStep, insRank, insLane, insBucket, insDiag, updLane;
    BlockStmts& stmtsOf(const Span*) { return spanBlocks; }
    BlockStmts& stmtsOf(const Instant*) { return instantBlocks; }

    ~Impl()
    {
        if (db)
            sqlite3_close_v2(db);
    }

    Status error(int rc, const char* what) const
    {
        return fail(schema::sqliteError(db, rc, path, what));
    }

    Status begin()
    {
        if (closed || !db)
            return fail(path + ": the writer is closed");
        if (inTxn)
            return {};
        const int rc = sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
        if (rc != SQLITE_OK)
            return error(rc, "beginning a transaction");
        inTxn = true;
        return {};
    }

    Status prepareAll()
    {
        struct P {
            Stmt* st;
            const char* sql;
        };
        const P ps[] = {
            {&spanBlocks.ins, blocks::Table<Span>::kInsert},
            {&spanBlocks.del, blocks::Table<Span>::kDelete},
            {&instantBlocks.ins, blocks::Table<Instant>::kInsert},
            {&instantBlocks.del, blocks::Table<Instant>::kDelete},
            {&insString, "INSERT OR REPLACE INTO strings (id, text) VALUES (?1, ?2)"},
            {&insStep, kInsertStep.c_str()},
            {&insRank, kInsertRank.c_str()},
            {&insLane, kInsertLane.c_str()},
            {&insBucket, kInsertBucket.c_str()},
            {&insDiag, kInsertDiagnostic.c_str()},
            {&updLane, "UPDATE lanes SET max_dur_ns = ?2, block_reach_ns = ?3 WHERE id = ?1"},
        };
        for (const P& p : ps) {
            const int rc = p.st->prepare(db, p.sql);
            if (rc != SQLITE_OK)
                return error(rc, "preparing statements");
        }
        return {};
    }

    Status flushStrings()
    {
        while (stringsStored < strings.size()) {
            insString.bind(1, static_cast<int64_t>(stringsStored));
            insString.bind(2, std::string_view(strings.texts()[stringsStored]));
            const int rc = insString.run();
            if (rc != SQLITE_DONE)
                return error(rc, "storing a string");
            ++stringsStored;
        }
        return {};
    }

    // Stores the block in `blob` (its row values `row`) as the lane's open block of its kind (seq
    // b.openSeq), replacing the row of its earlier state; a row under another first key is deleted
    // first.
    template <class R>
    Status storeBlock(uint32_t lane, OpenBlock<R>& b, const blocks::Row& row)
    {
        BlockStmts& st = stmtsOf(static_cast<const R*>(nullptr));
        int rc = SQLITE_DONE;
        if (b.openStored && b.storedFirst != row.first) {
            st.del.bind(1, static_cast<int64_t>(lane));
            st.del.bind(2, b.storedFirst);
            st.del.bind(3, b.openSeq);
            rc = st.del.run();
        }
        if (rc == SQLITE_DONE) {
            // blocks::Table: the same parameters in both tables (instant_blocks has no max end).
            const int64_t values[] = {lane, row.first, b.openSeq, row.last, row.maxEnd, row.count};
            for (int i = 0; i < 6; ++i)
                st.ins.bind(i + 1, values[i]);
            sqlite3_bind_blob(st.ins.get(), 7, blob.data(), static_cast<int>(blob.size()), SQLITE_STATIC);
            rc = st.ins.run();
        }
        if (rc != SQLITE_DONE)
            return error(rc, blocks::Table<R>::kStoring);
        b.openStored = true;
        b.storedFirst = row.first;
        if constexpr (std::is_same_v<R, Span>)
            lanes[lane].reach = std::max(lanes[lane].reach, row.maxEnd - row.first);
        return {};
    }

    // Moves the lane's pending records of one kind into its open block (a merge by key when some
    // come before the block's last: append order kept among equal keys), stores every full block
    // (blocks::Table's kPerBlock records or kMaxBytes bytes) and starts the next; with `all`,
    // stores the open block's remainder too.
    template <class R>
    Status flushLane(uint32_t lane, bool all)
    {
        using Table = blocks::Table<R>;
        OpenBlock<R>& b = lanes[lane].of(static_cast<const R*>(nullptr));
        if (!b.pending.empty()) {
            const auto byKey = [](const R& x, const R& y) { return blocks::key(x) < blocks::key(y); };
            if (!std::is_sorted(b.pending.begin(), b.pending.end(), byKey))
                std::stable_sort(b.pending.begin(), b.pending.end(), byKey);
            if (b.open.empty() || blocks::key(b.pending.front()) >= blocks::key(b.open.back())) {
                b.open.insert(b.open.end(), b.pending.begin(), b.pending.end());
            } else {
                std::vector<R> merged;
                merged.reserve(b.open.size() + b.pending.size());
                std::merge(b.open.begin(), b.open.end(), b.pending.begin(), b.pending.end(), std::back_inserter(merged),
                           byKey);
                b.open.swap(merged);
            }
            b.pending.clear();
            b.openDirty = true;
        }
        if (!b.openDirty)
            return {};
        Status result;
        size_t done = 0;
        bool restStored = false;
        while (done < b.open.size()) {
            const size_t left = b.open.size() - done;
            // Fewer than kPerBlock records fill a block only by their bytes.
            if (!all && left < Table::kPerBlock && Table::kMaxBytes == SIZE_MAX)
                break;
            blocks::Row row;
            const auto next = std::span<const R>(b.open).subspan(done, std::min(left, Table::kPerBlock));
            if (auto s = blocks::encode(next, blob, row, Table::kMaxBytes); !s) {
                result = fail(path + ": " + s.error().message);
                break;
            }
            const auto taken = static_cast<size_t>(row.count);
            const bool full = taken == Table::kPerBlock || taken < left;
            if (!full && !all)
                break;
            if (auto s = storeBlock(lane, b, row); !s) {
                result = s;
                break;
            }
            if (!full) {
                restStored = true;
                break;
            }
            done += taken;
            ++b.openSeq;
            b.openStored = false;
        }
        // The full blocks are stored: only the rest stays open (also after an error).
        b.open.erase(b.open.begin(), b.open.begin() + static_cast<ptrdiff_t>(done));
        if (done > 0 || restStored)
            b.openDirty = !restStored && !b.open.empty();
        return result;
    }

    // appendSpans / appendInstants after their checks: buffers the records per lane and stores
    // the lanes' full blocks.
    template <class R>
    Status append(std::span<const R> records)
    {
        for (const R& r : records) {
            LaneBlocks& l = lanes[r.lane.v];
            l.of(&r).pending.push_back(r);
            if constexpr (std::is_same_v<R, Span>)
                l.maxDur = std::max(l.maxDur, r.end - r.start);
        }
        for (uint32_t l = 0; l < lanes.size(); ++l) {
            if (lanes[l].of(static_cast<const R*>(nullptr)).pending.size() < blocks::Table<R>::kPerBlock)
                continue;
            if (auto s = flushStrings(); !s)
                return s;
            if (auto s = flushLane<R>(l, false); !s)
                return s;
        }
        return {};
    }

    // openExisting: each lane's last block of one kind (the highest seq), kept open when it is not
    // full (decoded once, here), so appending continues it.
    template <class R>
    Status readOpenBlocks()
    {
        Stmt st;
        int rc = st.prepare(db, blocks::Table<R>::kLast);
        for (uint32_t l = 0; rc == SQLITE_OK && l < lanes.size(); ++l) {
            st.bind(1, static_cast<int64_t>(l));
            const int step = sqlite3_step(st.get());
            if (step == SQLITE_ROW) {
                OpenBlock<R>& b = lanes[l].of(static_cast<const R*>(nullptr));
                b.openSeq = sqlite3_column_int64(st.get(), 1);
                if (sqlite3_column_int64(st.get(), 2) >= static_cast<int64_t>(blocks::Table<R>::kPerBlock)) {
                    ++b.openSeq;
                } else {
                    const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(st.get(), 3));
                    const auto n = static_cast<size_t>(sqlite3_column_bytes(st.get(), 3));
                    if (auto s = blocks::decode(std::span(p, n), LaneId{l}, b.open); !s) {
                        sqlite3_reset(st.get());
                        return fail(s.error(), path + ": " + s.error().message);
                    }
                    b.openStored = true;
                    b.storedFirst = sqlite3_column_int64(st.get(), 0);
                }
            } else if (step != SQLITE_DONE) {
                rc = step;
            }
            sqlite3_reset(st.get());
        }
        if (rc != SQLITE_OK)
            return error(rc, blocks::Table<R>::kReading);
        return {};
    }

    // openExisting: each lane's bounds and its open blocks.
    Status readLaneState()
    {
        Stmt st;
        int rc = st.prepare(db, "SELECT id, max_dur_ns, block_reach_ns FROM lanes ORDER BY id");
        while (rc == SQLITE_OK && (rc = sqlite3_step(st.get())) == SQLITE_ROW) {
            rc = SQLITE_OK; // keep stepping
            if (sqlite3_column_int64(st.get(), 0) != static_cast<int64_t>(lanes.size()))
                return fail(path + ": lane ids are not dense; cannot append to this file");
            LaneBlocks& b = lanes.emplace_back();
            b.maxDur = b.maxDurStored = sqlite3_column_int64(st.get(), 1);
            b.reach = b.reachStored = sqlite3_column_int64(st.get(), 2);
        }
        if (rc != SQLITE_DONE && rc != SQLITE_OK)
            return error(rc, "reading lanes");
        if (auto s = readOpenBlocks<Span>(); !s)
            return s;
        return readOpenBlocks<Instant>();
    }

    Status commit()
    {
        if (!deferredError.empty())
            return fail(deferredError);
        if (auto s = begin(); !s)
            return s;
        if (auto s = flushStrings(); !s)
            return s;
        // Every lane's spans and instants go into its blocks in this transaction (with the step
        // rows that came with them), and the lanes' bounds with the blocks that raised them, so a live
        // reader's window query is never narrower than the data it can see.
        for (uint32_t i = 0; i < lanes.size(); ++i) {
            LaneBlocks& b = lanes[i];
            b.spans.trimIfIdle();
            b.instants.trimIfIdle();
            if (auto s = flushLane<Span>(i, true); !s)
                return s;
            if (auto s = flushLane<Instant>(i, true); !s)
                return s;
            if (b.maxDur == b.maxDurStored && b.reach == b.reachStored)
                continue;
            updLane.bind(1, static_cast<int64_t>(i));
            updLane.bind(2, b.maxDur);
            updLane.bind(3, b.reach);
            const int rc = updLane.run();
            if (rc != SQLITE_DONE)
                return error(rc, "updating lane bounds");
            b.maxDurStored = b.maxDur;
            b.reachStored = b.reach;
        }
        const int rc = sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
        if (rc != SQLITE_OK)
            return error(rc, "committing");
        inTxn = false;
        return {};
    }
};

RunWriter::RunWriter(std::unique_ptr<Impl> impl)
    : m_impl(std::move(impl))
{
}

RunWriter::~RunWriter()
{
    if (m_impl && !m_impl->closed)
        (void)close();
}

Status RunWriter::writeStep(const Step& step, std::span<const Span> spans, std::span<const Instant> instants)
{
    if (auto s = appendSpans(spans); !s)
        return s;
    if (auto s = appendInstants(instants); !s)
        return s;
    if (auto s = addStep(step); !s)
        return s;
    return commit();
}

const std::string& RunWriter::path() const { return m_impl->path; }

namespace {
// SQLite's memory statistics take a global mutex on every allocation; nobody reads them here.
// Turned off once, before the library initializes (a no-op, SQLITE_MISUSE, if something in the
// process initialized SQLite first).
void tuneSqliteOnce()
{
    static const bool done = [] {
        sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
        return true;
    }();
    (void)done;
}
} // namespace

Result<std::unique_ptr<RunWriter>> RunWriter::create(const std::string& path, const RunConfig& config, Mode mode)
{
    tuneSqliteOnce();
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        return fail(path + ": is a directory");
    if (mode == Mode::CreateNew) {
        if (FILE* f = std::fopen(path.c_str(), "rb")) {
            std::fclose(f);
            return fail(path + ": already exists (choose another name or overwrite)");
        }
    } else {
        for (const char* suffix : {"", "-wal", "-shm", "-journal"})
            std::remove((path + suffix).c_str());
    }
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    const int rc = sqlite3_open_v2(path.c_str(), &impl->db,
                                   SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
                                       | SQLITE_OPEN_EXRESCODE,
                                   nullptr);
    if (rc != SQLITE_OK)
        return fail(schema::sqliteError(impl->db, rc, path, "creating the run database"));
    // The schema is created in rollback-journal mode and only then switched to WAL: so the main
    // file holds application_id and user_version from the first moment a reader can see it
    // (in WAL mode page 1 would sit in the -wal file until the first checkpoint).
    if (auto s = schema::exec(impl->db, kPageSizePragma, path.c_str()); !s)
        return std::unexpected(s.error());
    if (auto s = schema::createOrMigrate(impl->db); !s)
        return fail(s.error(), path + ": " + s.error().message);
    if (auto s = schema::exec(impl->db, kWriterPragmas, path.c_str()); !s)
        return std::unexpected(s.error());
    if (auto s = impl->prepareAll(); !s)
        return std::unexpected(s.error());
    std::unique_ptr<RunWriter> w(new RunWriter(std::move(impl)));
    if (auto s = w->setConfig(config); !s)
        return std::unexpected(s.error());
    if (auto s = w->commit(); !s)
        return std::unexpected(s.error());
    return w;
}

Result<std::unique_ptr<RunWriter>> RunWriter::openExisting(const std::string& path)
{
    if (auto s = schema::checkHeader(path, nullptr); !s)
        return std::unexpected(s.error());
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    int rc = sqlite3_open_v2(path.c_str(), &impl->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE, nullptr);
    if (rc != SQLITE_OK)
        return fail(schema::sqliteError(impl->db, rc, path, "opening for writing"));
    sqlite3_busy_timeout(impl->db, 2000);
    if (auto s = schema::createOrMigrate(impl->db); !s)
        return fail(s.error(), path + ": " + s.error().message);
    if (auto s = schema::exec(impl->db, kWriterPragmas, path.c_str()); !s)
        return std::unexpected(s.error());
    if (auto s = impl->prepareAll(); !s)
        return std::unexpected(s.error());
    // Continue the file's string table and lane numbering.
    {
        Stmt st;
        rc = st.prepare(impl->db, "SELECT id, text FROM strings ORDER BY id");
        while (rc == SQLITE_OK && (rc = sqlite3_step(st.get())) == SQLITE_ROW) {
            rc = SQLITE_OK; // keep stepping
            const auto id = sqlite3_column_int64(st.get(), 0);
            const StringId got = impl->strings.intern(columnText(st.get(), 1));
            if (static_cast<int64_t>(got.v) != id)
                return fail(path + ": the string table is not dense; cannot append to this file");
        }
        if (rc != SQLITE_DONE && rc != SQLITE_OK)
            return fail(schema::sqliteError(impl->db, rc, path, "reading strings"));
        impl->stringsStored = impl->strings.size();
    }
    if (auto s = impl->readLaneState(); !s)
        return std::unexpected(s.error());
    // Whatever this writer changes, the stored summaries described the file before it: gone, in
    // the writer's first transaction (summary_store.h).
    if (auto s = impl->begin(); !s)
        return std::unexpected(s.error());
    if (rc = sqlite3_exec(impl->db, "DELETE FROM summaries", nullptr, nullptr, nullptr); rc != SQLITE_OK)
        return fail(schema::sqliteError(impl->db, rc, path, "clearing stored summaries"));
    return std::unique_ptr<RunWriter>(new RunWriter(std::move(impl)));
}

Status RunWriter::setConfig(const RunConfig& c)
{
    auto& d = *m_impl;
    if (auto s = d.begin(); !s)
        return s;
    Stmt st;
    // The run row: every field of kRunConfigFields (fields.h), one row-value assignment.
    static const std::string update =
        "UPDATE run SET (" + fieldColumns(kRunConfigFields) + ") = (" + fieldSlots(kRunConfigFields) + ") WHERE id = 1";
    int rc = st.prepare(d.db, update.c_str());
    if (rc != SQLITE_OK)
        return d.error(rc, "storing the configuration");
    bindFields(st, kRunConfigFields, c);
    if ((rc = st.run()) != SQLITE_DONE)
        return d.error(rc, "storing the configuration");
    if ((rc = sqlite3_exec(d.db, "DELETE FROM config_extra", nullptr, nullptr, nullptr)) != SQLITE_OK)
        return d.error(rc, "storing the configuration");
    if ((rc = st.prepare(d.db, "INSERT INTO config_extra (key, value) VALUES (?1, ?2)")) != SQLITE_OK)
        return d.error(rc, "storing the configuration");
    for (const auto& [k, v] : c.extra) {
        st.bind(1, std::string_view(k));
        st.bind(2, std::string_view(v));
        if ((rc = st.run()) != SQLITE_DONE)
            return d.error(rc, "storing the configuration");
    }
    return {};
}

Status RunWriter::setStatus(RunStatus status, const std::string& failureCause, TimeNs endedNs)
{
    auto& d = *m_impl;
    if (auto s = d.begin(); !s)
        return s;
    Stmt st;
    int rc = st.prepare(d.db, "UPDATE run SET status = ?1, failure_cause = ?2, "
                              "ended_ns = CASE WHEN ?3 != 0 THEN ?3 ELSE ended_ns END WHERE id = 1");
    if (rc != SQLITE_OK)
        return d.error(rc, "storing the status");
    st.bind(1, std::string_view(runStatusName(status)));
    st.bind(2, std::string_view(failureCause));
    st.bind(3, endedNs);
    if ((rc = st.run()) != SQLITE_DONE)
        return d.error(rc, "storing the status");
    return {};
}

Status RunWriter::addRank(const RankInfo& r)
{
    auto& d = *m_impl;
    if (auto s = d.begin(); !s)
        return s;
    auto& st = d.insRank;
    bindFields(st, kRankFields, r);
    const int rc = st.run();
    if (rc != SQLITE_DONE)
        return d.error(rc, "storing a rank");
    return {};
}

Result<LaneId> RunWriter::addLane(const Lane& lane)
{
    auto& d = *m_impl;
    if (auto s = d.begin(); !s)
        return std::unexpected(s.error());
    const LaneId id{static_cast<uint32_t>(d.lanes.size())};
    Lane row = lane;
    row.id = id;
    bindFields(d.insLane, kLaneFields, row);
    const int rc = d.insLane.run();
    if (rc != SQLITE_DONE)
        return std::unexpected(d.error(rc, "storing a lane").error());
    d.lanes.emplace_back();
    return id;
}

Status RunWriter::addBucket(const Bucket& b)
{
    auto& d = *m_impl;
    if (auto s = d.begin(); !s)
        return s;
    bindFields(d.insBucket, kBucketFields, b);
    const int rc = d.insBucket.run();
    if (rc != SQLITE_DONE)
        return d.error(rc, "storing a bucket");
    return {};
}

Status RunWriter::addStep(const Step& s)
{
    auto& d = *m_impl;
    if (auto b = d.begin(); !b)
        return b;
    bindFields(d.insStep, kStepFields, s); // "unknown" (NaN loss, -1 CPU times) as NULL
    const int rc = d.insStep.run();
    if (rc != SQLITE_DONE)
        return d.error(rc, "storing a step");
    return {};
}

StringId RunWriter::intern(std::string_view text)
{
    // Stored lazily (before the next span insert or commit), so interning costs a hash lookup.
    return m_impl->strings.intern(text);
}

// Span blocks (instant blocks likewise: appendInstants). appendSpans only checks the spans and
// buffers them per lane; a lane's buffer goes into its blocks (Impl::flushLane) when it holds a
// block's worth, and every lane's at commit(),
// inside the transaction that commits them: a step row still commits with its spans. The open
// block (the lane's last, not full) is rewritten whole at each commit from the spans kept in
// memory (never decoded again); a full block is written once and never touched again. A span
// that starts before the lane's last start (rare: a lane's spans arrive in start order) is
// merged into the open block; if earlier blocks hold later starts, blocks overlap in time and
// readers merge them by (start, seq): every span of a block was appended before the spans of a
// later block that share its start, so that is append order among equal starts, as the seq
// column of the spans table gave.
Status RunWriter::appendSpans(std::span<const Span> spans)
{
    auto& d = *m_impl;
    if (auto s = d.begin(); !s)
        return s;
    const size_t lanes = d.lanes.size();
    for (const Span& sp : spans) {
        if (sp.lane.v >= lanes)
            return fail(d.path + ": a span names lane " + std::to_string(sp.lane.v) + ", which was never added");
        if (sp.name.v >= d.strings.size())
            return fail(d.path + ": a span names string " + std::to_string(sp.name.v) + ", which was never interned");
        if (sp.end < sp.start)
            return fail(d.path + ": a span ends before it starts (lane " + std::to_string(sp.lane.v) + ", start "
                        + std::to_string(sp.start) + ", end " + std::to_string(sp.end) + ")");
    }
    return d.append(spans);
}

// Instant blocks: the same mechanism as span blocks (Impl::append, flushLane), each lane with an
// open instant block beside its open span block.
Status RunWriter::appendInstants(std::span<const Instant> instants)
{
    auto& d = *m_impl;
    if (auto s = d.begin(); !s)
        return s;
    for (const Instant& in : instants) {
        if (in.lane.v >= d.lanes.size())
            return fail(d.path + ": an instant names lane " + std::to_string(in.lane.v) + ", which was never added");
        if (in.name.v >= d.strings.size())
            return fail(d.path + ": an instant names string " + std::to_string(in.name.v) + ", which was never interned");
    }
    return d.append(instants);
}

Status RunWriter::addDiagnostic(const Diagnostic& g)
{
    // Kinds are a closed list (core/diagnostics.h); its severity is the one declared there.
    const auto kind = diagnosticKindFromName(g.kind);
    if (!kind)
        return fail(m_impl->path + ": unknown diagnostic kind \"" + g.kind
                    + "\" (the kinds are listed in lockstep/core/diagnostics.h)");
    auto& d = *m_impl;
    if (auto s = d.begin(); !s)
        return s;
    Diagnostic row = g;
    row.severity = diagnosticInfo(*kind).severity;
    bindFields(d.insDiag, kDiagnosticFields, row);
    const int rc = d.insDiag.run();
    if (rc != SQLITE_DONE)
        return d.error(rc, "storing a diagnostic");
    return {};
}

Status RunWriter::putSummary(std::string_view part, int version, std::string_view stamp, std::string_view data)
{
    auto& d = *m_impl;
    if (auto s = d.begin(); !s)
        return s;
    Stmt st;
    int rc = st.prepare(d.db, "INSERT OR REPLACE INTO summaries (part, version, stamp, data) VALUES (?, ?, ?, ?)");
    if (rc != SQLITE_OK)
        return d.error(rc, "storing a summary");
    st.bind(1, part);
    st.bind(2, version);
    st.bind(3, stamp);
    sqlite3_bind_blob64(st.get(), 4, data.data(), data.size(), SQLITE_STATIC);
    rc = st.run();
    if (rc != SQLITE_DONE)
        return d.error(rc, "storing a summary");
    return {};
}

Status RunWriter::commit()
{
    if (m_impl->closed)
        return fail(m_impl->path + ": the writer is closed");
    return m_impl->commit();
}

namespace {
// How long close() waits for readers to let go of the file before giving up on the checkpoint:
// a live reader's read transaction takes milliseconds; 10 s covers a loaded machine.
constexpr int kCloseBusyMs = 10'000;

// Folds the write-ahead log into the file. Normally by leaving WAL mode (the pragma answers the
// mode it ended in), which checkpoints and deletes the -wal. Leaving WAL mode needs the file to
// itself; with another connection open (a live reader), a TRUNCATE checkpoint still copies every
// committed frame into the file and empties the log, so the file is whole without its -wal (the
// last connection to close removes it). A checkpoint waits for readers' transactions to end
// (the busy timeout); only a reader holding one for that long, or a full disk, makes it fail.
Status foldWal(sqlite3* db, const std::string& path)
{
    if (auto s = schema::exec(db, "PRAGMA synchronous = FULL", path.c_str()); !s)
        return s;
    const auto failure = [&](int rc, const char* fallback) {
        std::string why = schema::diskFullReason(db, rc);
        const ErrorCode code = why.empty() ? ErrorCode::Failed : ErrorCode::DiskFull;
        if (why.empty())
            why = rc == SQLITE_ROW || rc == SQLITE_DONE ? fallback : sqlite3_errmsg(db);
        return fail(code, path + ": cannot fold the write-ahead log into the file: " + why);
    };
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode = DELETE", -1, &st, nullptr);
    std::string mode;
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
        mode = columnText(st, 0);
    sqlite3_finalize(st);
    if (mode == "delete")
        return {};
    const int primary = rc & 0xff;
    if (rc != SQLITE_ROW && primary != SQLITE_BUSY && primary != SQLITE_LOCKED)
        return failure(rc, "");
    int busy = 1;
    rc = sqlite3_prepare_v2(db, "PRAGMA wal_checkpoint(TRUNCATE)", -1, &st, nullptr);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
        busy = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (rc == SQLITE_ROW && busy == 0)
        return {};
    return failure(rc, "a reader kept the file busy");
}
} // namespace

Status RunWriter::close()
{
    auto& d = *m_impl;
    if (d.closed)
        return {};
    Status result = d.commit();
    if (!result && d.inTxn) {
        sqlite3_exec(d.db, "ROLLBACK", nullptr, nullptr, nullptr);
        d.inTxn = false;
    }
    d.closed = true;
    // Finalize statements before closing so that sqlite3_close checkpoints and removes the WAL.
    for (Stmt* s : {&d.spanBlocks.ins, &d.spanBlocks.del, &d.instantBlocks.ins, &d.instantBlocks.del, &d.insString,
                    &d.insStep, &d.insRank, &d.insLane, &d.insBucket, &d.insDiag, &d.updLane})
        s->finalize();
    // A finished run goes back to rollback-journal mode: the checkpoint folds the WAL into the
    // file, which then stands on its own (no -wal beside it to lose or to carry along). The mode
    // change needs the file to itself: a live reader (the app re-reading a recording run) holds
    // it for milliseconds at a time, so the busy timeout waits for it. If the change still does
    // not happen (a full disk during the checkpoint, a reader that never lets go), close() says
    // so: callers that promise a whole file (OutputFile) must not publish it.
    if (result) {
        sqlite3_busy_timeout(d.db, kCloseBusyMs);
        result = foldWal(d.db, d.path);
    }
    const int rc = sqlite3_close(d.db);
    if (rc != SQLITE_OK && result)
        result = d.error(rc, "closing");
    if (rc == SQLITE_OK)
        d.db = nullptr;
    return result;
}

Status recoverRunFile(const std::string& path)
{
    if (auto s = schema::checkHeader(path, nullptr); !s)
        return s;
    // A -wal (killed while recording) or a hot -journal (killed while creating the file, before
    // it switched to WAL mode): a read-write open replays or rolls back either.
    struct stat st {};
    if (::stat((path + "-wal").c_str(), &st) != 0 && ::stat((path + "-journal").c_str(), &st) != 0)
        return {}; // at rest: nothing to recover
    sqlite3* db = nullptr;
    const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
                                   nullptr);
    Status result;
    if (rc != SQLITE_OK) {
        result = fail(schema::sqliteError(db, rc, path, "opening to recover"));
    } else {
        sqlite3_busy_timeout(db, kCloseBusyMs);
        result = foldWal(db, path);
    }
    sqlite3_close(db);
    return result;
}

// ---------------------------------------------------------------------------------------------
// RunReader

namespace {

// Which span and instant rows load() keeps, and on which lane. Built once the small tables are
// read: takes the file's lanes into the run, renumbered densely (lanes[i].id.v == i); files we
// write are dense already. A row is kept when its step is committed (or it has none).
class RowFilter {
public:
    RowFilter(Run& run, std::vector<Lane>& lanes)
    {
        for (Lane& l : lanes) {
            m_laneIndex.emplace(l.id.v, static_cast<uint32_t>(run.lanes.size()));
            l.id = LaneId{static_cast<uint32_t>(run.lanes.size())};
            m_laneRank.push_back(l.rank);
            run.lanes.push_back(std::move(l));
        }
        m_lanes = run.lanes.size();
        m_denseLanes = std::all_of(m_laneIndex.begin(), m_laneIndex.end(),
                                   [](const auto& kv) { return kv.first == kv.second; });
        indexSteps(run.steps);
    }
    RowFilter(const RowFilter&) = delete;
    RowFilter& operator=(const RowFilter&) = delete;

    bool keep(uint32_t lane, int32_t step) const
    {
        if (step == kNoStep)
            return true;
        if (step >= 0 && step < kBitmapSteps) {
            const auto& bits = *m_laneSteps[lane];
            return static_cast<size_t>(step) < bits.size() && bits[static_cast<size_t>(step)];
        }
        return m_committed.contains(stepKey(m_laneRank[lane], step));
    }

    // The run's lane for the file's lane id; false for a lane the file does not have.
    bool lookupLane(int64_t fileLane, uint32_t* out) const
    {
        if (m_denseLanes) {
            if (fileLane < 0 || static_cast<size_t>(fileLane) >= m_lanes)
                return false;
            *out = static_cast<uint32_t>(fileLane);
            return true;
        }
        auto it = m_laneIndex.find(fileLane);
        if (it == m_laneIndex.end())
            return false;
        *out = it->second;
        return true;
    }

private:
    // The per-span test is the hot loop of load(): a bitmap per lane over step numbers answers
    // it without hashing; the hash set remains for step numbers too large for a bitmap.
    static constexpr int32_t kBitmapSteps = 1 << 20;

    void indexSteps(const std::vector<Step>& steps)
    {
        m_committed.reserve(steps.size() * 2);
        for (const Step& s : steps)
            m_committed.insert(stepKey(s.rank, s.step));
        for (const Step& s : steps) {
            if (s.step < 0 || s.step >= kBitmapSteps)
                continue;
            auto& bits = m_rankSteps[s.rank];
            if (bits.size() <= static_cast<size_t>(s.step))
                bits.resize(static_cast<size_t>(s.step) + 1, false);
            bits[static_cast<size_t>(s.step)] = true;
        }
        static const std::vector<bool> kNone;
        m_laneSteps.assign(m_lanes, &kNone);
        for (size_t l = 0; l < m_lanes; ++l) {
            if (auto it = m_rankSteps.find(m_laneRank[l]); it != m_rankSteps.end())
                m_laneSteps[l] = &it->second;
        }
    }

    std::unordered_map<int64_t, uint32_t> m_laneIndex; // file lane id -> run lane
    std::vector<int32_t> m_laneRank;                   // run lane -> rank
    size_t m_lanes = 0;
    bool m_denseLanes = true;
    std::unordered_set<int64_t> m_committed;
    std::unordered_map<int32_t, std::vector<bool>> m_rankSteps;
    std::vector<const std::vector<bool>*> m_laneSteps;
};

// The stop token checked every 65,536 rows of the span and instant reads: a few ms of reading,
// a negligible cost per row.
struct RowStopCheck {
    const std::stop_token& stop;
    uint32_t rows = 0;
    bool operator()() { return (++rows & 0xFFFF) == 0 && stop.stop_requested(); }
};

// The scan follows the table's key (lane, start_ns, seq), so spans arrive sorted by lane and
// start already (clock correction is monotonic within a lane); only runs of equal starts
// need ordering by end. That is O(n) where normalize() would sort 10 M spans again (~1.5 s).
// Anything else (a file from elsewhere, an odd correction) takes the full normalize().
void normalizeLoaded(Run& run)
{
    const auto byLaneStart = [](const Span& a, const Span& b) {
        return a.lane.v != b.lane.v ? a.lane.v < b.lane.v : a.start < b.start;
    };
    if (!std::is_sorted(run.spans.begin(), run.spans.end(), byLaneStart)) {
        run.normalize();
        return;
    }
    for (size_t i = 0; i < run.spans.size();) {
        size_t j = i + 1;
        while (j < run.spans.size() && run.spans[j].lane == run.spans[i].lane
               && run.spans[j].start == run.spans[i].start)
            ++j;
        if (j - i > 1)
            std::stable_sort(run.spans.begin() + static_cast<ptrdiff_t>(i),
                             run.spans.begin() + static_cast<ptrdiff_t>(j),
                             [](const Span& a, const Span& b) { return a.end < b.end; });
        i = j;
    }
    std::vector<Span> spans = std::move(run.spans);
    run.spans.clear();
    run.normalize(); // the rest: instants, steps, buckets, ranks (small or nearly sorted)
    run.spans = std::move(spans);
}

// Blocks of one lane read in key order (first key, seq) concatenate to (key, append order) unless
// two of them overlap (schema.cpp, span_blocks and instant_blocks); then the lane's records are put
// in that order by a sort on (key, block seq, position). BlockOrder watches the blocks of a lane go
// by, each as the range of `spans` (or instants) its kept records took, and sorts only when one was
// out of order.
template <class R>
class BlockOrder {
public:
    // A block (`first` and `last` its first and last start before any filtering) whose kept
    // spans start at spans[begin].
    void add(int64_t seq, TimeNs first, TimeNs last, size_t begin)
    {
        if (!m_ranges.empty() && !(m_last < first || (m_last == first && m_seq < seq)))
            m_merge = true;
        m_ranges.emplace_back(seq, begin);
        m_last = last;
        m_seq = seq;
    }
    // The lane is done: its spans end at spans.end().
    void finish(std::vector<R>& spans)
    {
        if (m_merge && !m_ranges.empty()) {
            struct Key {
                TimeNs start;
                int64_t seq;
                size_t at;
            };
            std::vector<Key> keys;
            const size_t first = m_ranges.front().second;
            keys.reserve(spans.size() - first);
            for (size_t r = 0; r < m_ranges.size(); ++r) {
                const size_t end = r + 1 < m_ranges.size() ? m_ranges[r + 1].second : spans.size();
                for (size_t i = m_ranges[r].second; i < end; ++i)
                    keys.push_back(Key{blocks::key(spans[i]), m_ranges[r].first, i});
            }
            std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
                return std::tie(a.start, a.seq, a.at) < std::tie(b.start, b.seq, b.at);
            });
            std::vector<R> sorted;
            sorted.reserve(keys.size());
            for (const Key& k : keys)
                sorted.push_back(spans[k.at]);
            std::copy(sorted.begin(), sorted.end(), spans.begin() + static_cast<ptrdiff_t>(first));
        }
        m_ranges.clear();
        m_merge = false;
    }

private:
    std::vector<std::pair<int64_t, size_t>> m_ranges; // (block seq, first kept span)
    TimeNs m_last = 0;
    int64_t m_seq = 0;
    bool m_merge = false;
};

// A block row's data column as bytes.
std::span<const uint8_t> blobColumn(sqlite3_stmt* st, int i)
{
    const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(st, i));
    return {p, p ? static_cast<size_t>(sqlite3_column_bytes(st, i)) : size_t(0)};
}

} // namespace

struct RunReader::Impl {
    std::string path;
    sqlite3* db = nullptr;
    int version = 0;
    StringTable strings;
    std::vector<StringId> stringMap; // file id -> strings id (identity for files we wrote)
    std::unordered_map<uint32_t, int64_t> v1MaxDur; // version-1 files: computed on the fly
    Stmt window;

    ~Impl()
    {
        window.finalize();
        if (db)
            sqlite3_close_v2(db);
    }

    Error error(int rc, const char* what) const { return schema::sqliteError(db, rc, path, what); }

    // The one read loop of the small tables: runs `sql`, maps each row with `row`.
    template <class T, class RowFn>
    Result<std::vector<T>> readRows(const char* sql, const char* what, RowFn row) const
    {
        Stmt st;
        int rc = st.prepare(db, sql);
        if (rc != SQLITE_OK)
            return std::unexpected(error(rc, what));
        std::vector<T> out;
        while ((rc = sqlite3_step(st.get())) == SQLITE_ROW)
            out.push_back(row(st.get()));
        if (rc != SQLITE_DONE)
            return std::unexpected(error(rc, what));
        return out;
    }

    // The rows of a table of fields.h (the columns the file has), in `order`.
    template <class Record, size_t N>
    Result<std::vector<Record>> readFieldRows(const std::array<Field<Record>, N>& fields, const char* table,
                                              const char* order, const char* what) const
    {
        const std::string sql = "SELECT " + fieldColumns(fields, version) + " FROM " + table + " ORDER BY " + order;
        return readRows<Record>(sql.c_str(), what, [&](sqlite3_stmt* s) {
            Record r;
            readFields(s, fields, version, r);
            return r;
        });
    }

    // Reads strings the table has gained since the last call (a live writer keeps interning).
    Status refreshStrings()
    {
        Stmt st;
        int rc = st.prepare(db, "SELECT id, text FROM strings WHERE id >= ?1 ORDER BY id");
        if (rc != SQLITE_OK)
            return std::unexpected(error(rc, "reading strings"));
        st.bind(1, static_cast<int64_t>(stringMap.size()));
        while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
            const auto id = sqlite3_column_int64(st.get(), 0);
            if (id < 0 || id > (1ll << 31))
                return fail(ErrorCode::BadFile, path + ": the run database is corrupt (bad string id)");
            if (static_cast<size_t>(id) >= stringMap.size())
                stringMap.resize(static_cast<size_t>(id) + 1, StringId{0});
            stringMap[static_cast<size_t>(id)] = strings.intern(columnText(st.get(), 1));
        }
        if (rc != SQLITE_DONE)
            return std::unexpected(error(rc, "reading strings"));
        return {};
    }

    StringId mapString(int64_t id) const
    {
        return id >= 0 && static_cast<size_t>(id) < stringMap.size() ? stringMap[static_cast<size_t>(id)]
                                                                     : StringId{0};
    }

    // load()'s span rows: those `filter` keeps, appended to run.spans; rows on unknown lanes
    // counted in `orphans`.
    Status readSpans(Run& run, const RowFilter& filter, RowStopCheck& stopRequested, int64_t& orphans) const
    {
        Stmt st;
        int rc;
        if ((rc = st.prepare(db, "SELECT count(*) FROM spans")) == SQLITE_OK
            && sqlite3_step(st.get()) == SQLITE_ROW)
            run.spans.reserve(static_cast<size_t>(std::max<int64_t>(0, sqlite3_column_int64(st.get(), 0))));
        rc = st.prepare(db, ("SELECT " + schema::spanColumnList(true) + " FROM spans").c_str());
        if (rc != SQLITE_OK)
            return std::unexpected(error(rc, "reading spans"));
        while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
            if (stopRequested())
                return fail(ErrorCode::Cancelled, kCancelled);
            SpanRow row = readSpanRow(st.get());
            uint32_t lane = 0;
            if (!filter.lookupLane(row.lane, &lane)) {
                ++orphans;
                continue;
            }
            if (!filter.keep(lane, row.span.step))
                continue;
            row.span.lane = LaneId{lane};
            row.span.name = mapString(row.name);
            run.spans.push_back(row.span);
        }
        if (rc != SQLITE_DONE)
            return std::unexpected(error(rc, "reading spans"));
        return {};
    }

    // readSpans() and readInstants() for files of kSpanBlocksVersion and kInstantBlocksVersion
    // on: the blocks in key order, each decoded into `out` and filtered in place; blocks on
    // unknown lanes counted in `orphans`.
    template <class R>
    Status readBlocks(std::vector<R>& out, const RowFilter& filter, RowStopCheck& stopRequested, int64_t& orphans) const
    {
        using Table = blocks::Table<R>;
        Stmt st;
        int rc;
        if ((rc = st.prepare(db, Table::kCount)) == SQLITE_OK && sqlite3_step(st.get()) == SQLITE_ROW)
            out.reserve(out.size() + static_cast<size_t>(std::max<int64_t>(0, sqlite3_column_int64(st.get(), 0))));
        rc = st.prepare(db, Table::kAll);
        if (rc != SQLITE_OK)
            return std::unexpected(error(rc, Table::kReading));
        BlockOrder<R> order;
        int64_t current = std::numeric_limits<int64_t>::min();
        while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
            const int64_t fileLane = sqlite3_column_int64(st.get(), 0);
            uint32_t lane = 0;
            if (!filter.lookupLane(fileLane, &lane)) {
                orphans += std::max<int64_t>(0, sqlite3_column_int64(st.get(), 2));
                continue;
            }
            if (fileLane != current) {
                order.finish(out);
                current = fileLane;
            }
            const size_t begin = out.size();
            if (auto s = blocks::decode(blobColumn(st.get(), 3), LaneId{lane}, out); !s)
                return fail(s.error(), path + ": " + s.error().message);
            order.add(sqlite3_column_int64(st.get(), 1), blocks::key(out[begin]), blocks::key(out.back()), begin);
            size_t kept = begin;
            for (size_t i = begin; i < out.size(); ++i) {
                if (stopRequested())
                    return fail(ErrorCode::Cancelled, kCancelled);
                R& r = out[i];
                if (!filter.keep(lane, r.step))
                    continue;
                r.name = mapString(r.name.v);
                out[kept++] = r;
            }
            out.resize(kept);
        }
        if (rc != SQLITE_DONE)
            return std::unexpected(error(rc, Table::kReading));
        order.finish(out);
        return {};
    }

    // spansInWindow() for files of kSpanBlocksVersion on: the blocks that meet the window,
    // decoded and filtered (names are the file's ids: the caller maps them).
    Status rowsInWindow(LaneId lane, TimeNs t0, TimeNs t1, std::vector<Span>& out);
    Status blocksInWindow(LaneId lane, TimeNs t0, TimeNs t1, std::vector<Span>& out)
    {
        sqlite3_stmt* st = window.get();
        sqlite3_bind_int64(st, 1, lane.v);
        sqlite3_bind_int64(st, 2, t0);
        sqlite3_bind_int64(st, 3, t1);
        BlockOrder<Span> order;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            const size_t begin = out.size();
            if (auto s = decodeSpanBlock(blobColumn(st, 1), lane, out); !s) {
                sqlite3_reset(st);
                return fail(s.error(), path + ": " + s.error().message);
            }
            order.add(sqlite3_column_int64(st, 0), out[begin].start, out.back().start, begin);
            size_t kept = begin;
            for (size_t i = begin; i < out.size(); ++i) {
                const Span& sp = out[i];
                if (sp.start < t1 && (sp.end > t0 || sp.start >= t0))
                    out[kept++] = sp;
            }
            out.resize(kept);
        }
        sqlite3_reset(st);
        if (rc != SQLITE_DONE)
            return std::unexpected(error(rc, "reading a window"));
        order.finish(out);
        return {};
    }

    // load()'s instant rows (files before kInstantBlocksVersion), as readSpans().
    Status readInstants(Run& run, const RowFilter& filter, RowStopCheck& stopRequested, int64_t& orphans) const
    {
        Stmt st;
        int rc = st.prepare(db, "SELECT lane, kind, name, ts_ns, step, bucket FROM instants");
        if (rc != SQLITE_OK)
            return std::unexpected(error(rc, "reading instants"));
        while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
            if (stopRequested())
                return fail(ErrorCode::Cancelled, kCancelled);
            sqlite3_stmt* s = st.get();
            Instant in;
            uint32_t lane = 0;
            if (!filter.lookupLane(sqlite3_column_int64(s, 0), &lane)) {
                ++orphans;
                continue;
            }
            in.step = sqlite3_column_int(s, 4);
            if (!filter.keep(lane, in.step))
                continue;
            in.lane = LaneId{lane};
            in.kind = sqlite3_column_int(s, 1) == 1 ? InstantKind::Marker : InstantKind::GradReady;
            in.name = mapString(sqlite3_column_int64(s, 2));
            in.ts = sqlite3_column_int64(s, 3);
            in.bucket = sqlite3_column_int(s, 5);
            run.instants.push_back(in);
        }
        if (rc != SQLITE_DONE)
            return std::unexpected(error(rc, "reading instants"));
        return {};
    }
};

RunReader::RunReader(std::unique_ptr<Impl> impl)
    : m_impl(std::move(impl))
{
}
RunReader::~RunReader() = default;

namespace {
// validateRunFile's check of the span or instant blocks: each decodes, and its row's bounds and
// count are the decoded records' (a window query trusts them). Decoding 10 M spans takes ~0.1 s.
template <class R>
Status checkBlocks(sqlite3* db, const std::string& path)
{
    using Table = blocks::Table<R>;
    Stmt st;
    const std::string what = std::string("checking the ") + Table::kName;
    int rc = st.prepare(db, Table::kCheck);
    if (rc != SQLITE_OK)
        return fail(schema::sqliteError(db, rc, path, what.c_str()));
    std::vector<R> records;
    while ((rc = sqlite3_step(st.get())) == SQLITE_ROW) {
        records.clear();
        blocks::Row sum;
        const int64_t lane = sqlite3_column_int64(st.get(), 0);
        if (auto s = blocks::decode(blobColumn(st.get(), 5), LaneId{0}, records, &sum); !s)
            return fail(s.error(), path + ": " + s.error().message + " (lane " + std::to_string(lane) + ")");
        if (sum.first != sqlite3_column_int64(st.get(), 1) || sum.last != sqlite3_column_int64(st.get(), 2)
            || sum.maxEnd != sqlite3_column_int64(st.get(), 3) || sum.count != sqlite3_column_int64(st.get(), 4))
            return fail(ErrorCode::BadFile, path + ": the run database is corrupt: a block of " + Table::kName + " of lane "
                        + std::to_string(lane) + " does not match its row");
    }
    if (rc != SQLITE_DONE)
        return fail(schema::sqliteError(db, rc, path, what.c_str()));
    return {};
}
} // namespace

Status validateRunFile(const std::string& path)
{
    int version = 0;
    auto db = schema::openReadOnly(path, &version);
    if (!db)
        return std::unexpected(db.error());
    // quick_check reads every page and checks the b-tree structure: what cheap checks cannot
    // see (a damaged page in the middle of the spans) shows up here and not halfway into load().
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(*db, "PRAGMA quick_check(1)", -1, &st, nullptr);
    std::string verdict;
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
        verdict = columnText(st, 0);
    sqlite3_finalize(st);
    Status result;
    if (verdict != "ok") {
        if (rc != SQLITE_ROW && (rc & 0xff) != SQLITE_CORRUPT && (rc & 0xff) != SQLITE_NOTADB)
            result = fail(schema::sqliteError(*db, rc, path, "checking the file"));
        else
            result = fail(ErrorCode::BadFile, path + ": the run database is corrupt or truncated"
                          + (verdict.empty() ? std::string() : " (" + verdict + ")"));
    } else if (version >= schema::kSpanBlocksVersion) {
        result = checkBlocks<Span>(*db, path);
        if (result && version >= schema::kInstantBlocksVersion)
            result = checkBlocks<Instant>(*db, path);
    }
    sqlite3_close(*db);
    return result;
}

// open() runs every check of validateRunFile except the last, quick_check: that one reads the
// whole file (about 0.4 s per million spans, ~4 s for a 10-million-span run) and the app opens
// runs interactively, some of them still recording. A damaged page that the cheap checks cannot
// see is reported, with the same "corrupt or truncated" message, by the read that reaches it.
Result<std::unique_ptr<RunReader>> RunReader::open(const std::string& path)
{
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    auto db = schema::openReadOnly(path, &impl->version);
    if (!db)
        return std::unexpected(db.error());
    impl->db = *db;
    if (auto s = impl->refreshStrings(); !s)
        return std::unexpected(s.error());
    // Spans overlapping [t0, t1): start < t1 and (end > t0, or a zero-length span at/after t0).
    // end <= start + max_dur bounds the index range from below: start >= t0 - max_dur. The max
    // is read in the same statement (one snapshot) so a live writer cannot widen it in between.
    // From kSpanBlocksVersion on, the blocks that hold such spans: first_start < t1, max_end >= t0,
    // and (as end - first_start <= block_reach) first_start >= t0 - block_reach.
    const std::string sql = impl->version >= schema::kSpanBlocksVersion
        ? std::string("SELECT seq, data FROM span_blocks WHERE lane = ?1 AND first_start_ns >= ?2 - "
                      "(SELECT block_reach_ns FROM lanes WHERE id = ?1) AND first_start_ns < ?3 AND max_end_ns >= ?2 "
                      "ORDER BY first_start_ns, seq")
        : "SELECT " + schema::spanColumnList(true) + " FROM spans "
            + (impl->version >= schema::kMaxDurVersion
                   ? "WHERE lane = ?1 AND start_ns >= ?2 - (SELECT max_dur_ns FROM lanes WHERE id = ?1) "
                   : "WHERE lane = ?1 AND start_ns >= ?2 - ?4 ")
            + "AND start_ns < ?3 AND (start_ns + dur_ns > ?2 OR start_ns >= ?2) ORDER BY start_ns";
    const int rc = impl->window.prepare(impl->db, sql.c_str());
    if (rc != SQLITE_OK)
        return std::unexpected(impl->error(rc, "preparing the window query"));
    return std::unique_ptr<RunReader>(new RunReader(std::move(impl)));
}

int RunReader::schemaVersion() const { return m_impl->version; }
const StringTable& RunReader::strings() const { return m_impl->strings; }

Result<RunConfig> RunReader::config()
{
    auto& d = *m_impl;
    Stmt st;
    // The columns of kRunConfigFields (fields.h) that the file has.
    int rc = st.prepare(d.db, ("SELECT " + fieldColumns(kRunConfigFields, d.version) + " FROM run WHERE id = 1").c_str());
    if (rc != SQLITE_OK)
        return std::unexpected(d.error(rc, "reading the configuration"));
    rc = sqlite3_step(st.get());
    if (rc == SQLITE_DONE)
        return fail(ErrorCode::BadFile, d.path + ": the run database has no run row");
    if (rc != SQLITE_ROW)
        return std::unexpected(d.error(rc, "reading the configuration"));
    RunConfig c;
    readFields(st.get(), kRunConfigFields, d.version, c);
    if (c.name.empty()) {
        // Defaults to the file's stem.
        std::string stem = d.path.substr(d.path.find_last_of('/') + 1);
        if (auto dot = stem.rfind('.'); dot != std::string::npos && dot > 0)
            stem.resize(dot);
        c.name = stem;
    }
    if ((rc = st.prepare(d.db, "SELECT key, value FROM config_extra ORDER BY key")) != SQLITE_OK)
        return std::unexpected(d.error(rc, "reading the configuration"));
    while ((rc = sqlite3_step(st.get())) == SQLITE_ROW)
        c.extra[columnText(st.get(), 0)] = columnText(st.get(), 1);
    if (rc != SQLITE_DONE)
        return std::unexpected(d.error(rc, "reading the configuration"));
    return c;
}

Result<std::vector<RankInfo>> RunReader::ranks()
{
    const int version = m_impl->version;
    // The columns of kRankFields (fields.h) that the file has.
    const std::string sql = "SELECT " + fieldColumns(kRankFields, version) + " FROM ranks ORDER BY rank";
    return m_impl->readRows<RankInfo>(sql.c_str(), "reading ranks", [version](sqlite3_stmt* s) {
        RankInfo r;
        readFields(s, kRankFields, version, r);
        if (version < schema::kBootIdVersion)
            r.clockUncertaintyNs = halfRoundTrip(r.clockRttNs);
        return r;
    });
}

Result<std::vector<Lane>> RunReader::lanes()
{
    return m_impl->readFieldRows(kLaneFields, "lanes", "id", "reading lanes");
}

Result<std::vector<Step>> RunReader::steps()
{
    return m_impl->readFieldRows(kStepFields, "steps", "rank, step", "reading steps");
}

Result<std::vector<Bucket>> RunReader::buckets()
{
    return m_impl->readFieldRows(kBucketFields, "buckets", "idx", "reading buckets");
}

Result<std::vector<Diagnostic>> RunReader::diagnostics()
{
    return m_impl->readFieldRows(kDiagnosticFields, "diagnostics", "kind", "reading diagnostics");
}

Result<int64_t> RunReader::spanCount()
{
    auto& d = *m_impl;
    Stmt st;
    int rc = st.prepare(d.db, d.version >= schema::kSpanBlocksVersion ? "SELECT COALESCE(sum(count), 0) FROM span_blocks"
                                                                        : "SELECT count(*) FROM spans");
    if (rc != SQLITE_OK || (rc = sqlite3_step(st.get())) != SQLITE_ROW)
        return std::unexpected(d.error(rc, "counting spans"));
    return static_cast<int64_t>(sqlite3_column_int64(st.get(), 0));
}

Result<std::optional<RunReader::StoredSummary>> RunReader::storedSummary(std::string_view part)
{
    auto& d = *m_impl;
    if (d.version < schema::kSummariesVersion)
        return std::optional<StoredSummary>{};
    Stmt st;
    int rc = st.prepare(d.db, "SELECT version, stamp, data FROM summaries WHERE part = ?");
    if (rc != SQLITE_OK)
        return std::unexpected(d.error(rc, "reading a stored summary"));
    st.bind(1, part);
    rc = sqlite3_step(st.get());
    if (rc == SQLITE_DONE)
        return std::optional<StoredSummary>{};
    if (rc != SQLITE_ROW)
        return std::unexpected(d.error(rc, "reading a stored summary"));
    StoredSummary out;
    out.version = sqlite3_column_int(st.get(), 0);
    out.stamp = columnText(st.get(), 1);
    const auto blob = blobColumn(st.get(), 2);
    out.data.assign(reinterpret_cast<const char*>(blob.data()), blob.size());
    return std::optional<StoredSummary>{std::move(out)};
}

Result<std::vector<Span>> RunReader::spansInWindow(LaneId lane, TimeNs t0, TimeNs t1)
{
    auto& d = *m_impl;
    std::vector<Span> out;
    if (t1 <= t0)
        return out;
    if (auto s = d.version >= schema::kSpanBlocksVersion ? d.blocksInWindow(lane, t0, t1, out)
                                                          : d.rowsInWindow(lane, t0, t1, out);
        !s)
        return std::unexpected(s.error());
    // Names as the file's string ids: a string interned after the reader's last look is read now.
    const bool unknownString = std::any_of(out.begin(), out.end(), [&](const Span& s) {
        return s.name.v >= d.stringMap.size();
    });
    if (unknownString) {
        if (auto s = d.refreshStrings(); !s)
            return std::unexpected(s.error());
    }
    for (Span& s : out)
        s.name = d.mapString(s.name.v);
    return out;
}

Result<std::vector<std::vector<Span>>> RunReader::laneSpans(const Run& header, std::span<const LaneWindow> windows)
{
    if (!header.clocksCorrected)
        return fail("laneSpans: the run was loaded without its clocks corrected");
    auto lanes = this->lanes(); // the file's lane ids, in the order load() numbers them
    if (!lanes)
        return std::unexpected(lanes.error());
    if (lanes->size() != header.lanes.size())
        return fail("laneSpans: the file's lanes changed since the run was loaded");
    std::unordered_map<int32_t, const RankInfo*> byRank;
    for (const RankInfo& r : header.ranks)
        byRank.emplace(r.rank, &r);
    // A step's spans are kept when the step's row is committed (load()'s RowFilter): header.steps
    // is sorted by (rank, step).
    auto committed = [&](int32_t rank, int32_t step) {
        const auto it = std::lower_bound(header.steps.begin(), header.steps.end(), std::pair{rank, step},
                                         [](const Step& s, std::pair<int32_t, int32_t> k) { return std::pair{s.rank, s.step} < k; });
        return it != header.steps.end() && it->rank == rank && it->step == step;
    };
    std::vector<std::vector<Span>> out(windows.size());
    for (size_t w = 0; w < windows.size(); ++w) {
        const LaneWindow& win = windows[w];
        if (win.lane.v >= header.lanes.size())
            return fail("laneSpans: no lane " + std::to_string(win.lane.v) + " in the run");
        if (win.end <= win.start)
            continue;
        const Lane& lane = header.lanes[win.lane.v];
        auto rankIt = byRank.find(lane.rank);
        const RankInfo* rank = rankIt == byRank.end() ? nullptr : rankIt->second;
        // The file's times: the correction is an offset that moves from clockOffsetNs to
        // clockOffsetEndNs; read wide enough for either, then keep the corrected starts asked for.
        TimeNs lo = 0, hi = 0;
        if (rank) {
            lo = std::min(rank->clockOffsetNs, rank->clockOffsetEndNs);
            hi = std::max(rank->clockOffsetNs, rank->clockOffsetEndNs);
        }
        auto spans = spansInWindow(LaneId{static_cast<uint32_t>((*lanes)[win.lane.v].id.v)}, win.start - hi - 1, win.end - lo + 1);
        if (!spans)
            return std::unexpected(spans.error());
        std::vector<Span>& dst = out[w];
        for (Span s : *spans) {
            if (rank) {
                s.start = rank->correct(s.start);
                s.end = rank->correct(s.end);
            }
            if (s.start < win.start || s.start >= win.end)
                continue;
            if (s.step != kNoStep && !committed(lane.rank, s.step))
                continue;
            s.lane = win.lane;
            dst.push_back(s);
        }
        std::stable_sort(dst.begin(), dst.end(), [](const Span& a, const Span& b) { return std::tie(a.start, a.end) < std::tie(b.start, b.end); });
    }
    return out;
}

// spansInWindow() for files before kSpanBlocksVersion: spans rows through the (lane, start) index.
Status RunReader::Impl::rowsInWindow(LaneId lane, TimeNs t0, TimeNs t1, std::vector<Span>& out)
{
    auto& d = *this;
    sqlite3_stmt* st = d.window.get();
    sqlite3_bind_int64(st, 1, lane.v);
    sqlite3_bind_int64(st, 2, t0);
    sqlite3_bind_int64(st, 3, t1);
    if (d.version < schema::kMaxDurVersion) {
        auto it = d.v1MaxDur.find(lane.v);
        if (it == d.v1MaxDur.end()) {
            Stmt m;
            int rc = m.prepare(d.db, "SELECT COALESCE(MAX(dur_ns), 0) FROM spans WHERE lane = ?1");
            if (rc != SQLITE_OK)
                return fail(d.error(rc, "reading a window"));
            m.bind(1, static_cast<int64_t>(lane.v));
            if ((rc = sqlite3_step(m.get())) != SQLITE_ROW)
                return fail(d.error(rc, "reading a window"));
            it = d.v1MaxDur.emplace(lane.v, sqlite3_column_int64(m.get(), 0)).first;
        }
        sqlite3_bind_int64(st, 4, it->second);
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        SpanRow row = readSpanRow(st);
        row.span.lane = lane;
        row.span.name = StringId{static_cast<uint32_t>(row.name)}; // mapped by spansInWindow
        out.push_back(row.span);
    }
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
        return fail(d.error(rc, "reading a window"));
    return {};
}

void correctRunClocks(Run& run, bool bootIdsRecorded)
{
    // Whose offset applies first (clock_sync.h): ranks that share rank 0's clock take none.
    const ClockAlignment alignment = alignClocks(run.ranks, bootIdsRecorded);
    if (alignment.assumedFromHostNames) {
        const char* kind = diagnosticInfo(DiagnosticKind::ClockAssumedShared).name;
        if (std::none_of(run.diagnostics.begin(), run.diagnostics.end(),
                         [&](const Diagnostic& g) { return g.kind == kind; }))
            run.diagnostics.push_back(makeDiagnostic(DiagnosticKind::ClockAssumedShared, 1, alignment.note));
    }
    std::unordered_map<int32_t, const RankInfo*> byRank;
    for (const RankInfo& r : run.ranks)
        byRank.emplace(r.rank, &r);
    std::vector<const RankInfo*> laneInfo(run.lanes.size(), nullptr);
    for (size_t i = 0; i < run.lanes.size(); ++i) {
        auto it = byRank.find(run.lanes[i].rank);
        laneInfo[i] = it == byRank.end() ? nullptr : it->second;
    }
    for (Span& s : run.spans) {
        if (const RankInfo* r = laneInfo[s.lane.v]) {
            s.start = r->correct(s.start);
            s.end = r->correct(s.end);
        }
    }
    for (Instant& in : run.instants) {
        if (const RankInfo* r = laneInfo[in.lane.v])
            in.ts = r->correct(in.ts);
    }
    for (Step& s : run.steps) {
        auto it = byRank.find(s.rank);
        if (it != byRank.end()) {
            s.start = it->second->correct(s.start);
            s.end = it->second->correct(s.end);
        }
    }
    run.clocksCorrected = true;
}

Result<Run> RunReader::load(const LoadOptions& options)
{
    auto& d = *m_impl;
    // One read transaction: every SELECT below sees the same WAL snapshot.
    int rc = sqlite3_exec(d.db, "BEGIN", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK)
        return std::unexpected(d.error(rc, "starting a read"));
    struct EndRead {
        sqlite3* db;
        ~EndRead() { sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr); }
    } endRead{d.db};

    Run run;
    auto config = this->config();
    if (!config)
        return std::unexpected(config.error());
    run.config = std::move(*config);
    auto ranks = this->ranks();
    if (!ranks)
        return std::unexpected(ranks.error());
    run.ranks = std::move(*ranks);
    auto lanes = this->lanes();
    if (!lanes)
        return std::unexpected(lanes.error());
    auto steps = this->steps();
    if (!steps)
        return std::unexpected(steps.error());
    run.steps = std::move(*steps);
    auto buckets = this->buckets();
    if (!buckets)
        return std::unexpected(buckets.error());
    run.buckets = std::move(*buckets);
    auto diags = this->diagnostics();
    if (!diags)
        return std::unexpected(diags.error());
    run.diagnostics = std::move(*diags);
    if (auto s = d.refreshStrings(); !s)
        return std::unexpected(s.error());
    run.strings = d.strings;

    // Lanes renumbered densely; spans and instants kept when their step is committed.
    const RowFilter filter(run, *lanes);
    int64_t orphans = 0;
    RowStopCheck stopRequested{options.stop};
    if (options.spans) {
        if (auto s = d.version >= schema::kSpanBlocksVersion ? d.readBlocks(run.spans, filter, stopRequested, orphans)
                                                              : d.readSpans(run, filter, stopRequested, orphans);
            !s)
            return std::unexpected(s.error());
        if (auto s = d.version >= schema::kInstantBlocksVersion
                ? d.readBlocks(run.instants, filter, stopRequested, orphans)
                : d.readInstants(run, filter, stopRequested, orphans);
            !s)
            return std::unexpected(s.error());
    }
    if (orphans > 0)
        run.diagnostics.push_back(makeDiagnostic(DiagnosticKind::EventOnUnknownLane, orphans));

    if (options.correctClocks)
        correctRunClocks(run, d.version >= schema::kBootIdVersion);
    normalizeLoaded(run);
    return run;
}

Result<Run> loadRun(const std::string& path, const LoadOptions& options)
{
    auto reader = RunReader::open(path);
    if (!reader)
        return std::unexpected(reader.error());
    return (*reader)->load(options);
}

// saveRun's writing, into a new file.
Status writeRun(const Run& run, const std::string& path)
{
    auto writer = RunWriter::create(path, run.config, RunWriter::Mode::CreateNew);
    if (!writer)
        return std::unexpected(writer.error());
    RunWriter& w = **writer;
    // Times of a clock-corrected run are in rank 0's clock already: store zero offsets so that a
    // later load does not correct them twice (the round trip stays as a quality measure).
    for (RankInfo r : run.ranks) {
        if (run.clocksCorrected) {
            r.clockOffsetNs = r.clockOffsetEndNs = 0;
            r.clockSyncStartNs = r.clockSyncEndNs = 0;
        }
        if (auto s = w.addRank(r); !s)
            return s;
    }
    std::vector<LaneId> laneMap(run.lanes.size());
    for (size_t i = 0; i < run.lanes.size(); ++i) {
        auto id = w.addLane(run.lanes[i]);
        if (!id)
            return std::unexpected(id.error());
        laneMap[i] = *id;
    }
    std::vector<StringId> stringMap(run.strings.size());
    for (size_t i = 0; i < run.strings.size(); ++i)
        stringMap[i] = w.intern(run.strings.texts()[i]);
    for (const Bucket& b : run.buckets)
        if (auto s = w.addBucket(b); !s)
            return s;
    for (const Step& st : run.steps)
        if (auto s = w.addStep(st); !s)
            return s;
    const auto mapLane = [&](LaneId l) -> Result<LaneId> {
        // Lanes are looked up by position; lanes[i].id.v == i holds for a normalized run.
        if (l.v >= laneMap.size())
            return fail(path + ": a span names lane " + std::to_string(l.v) + ", which the run does not have");
        return laneMap[l.v];
    };
    constexpr size_t kChunk = 1 << 16;
    std::vector<Span> chunk;
    chunk.reserve(std::min(kChunk, run.spans.size()));
    for (size_t i = 0; i < run.spans.size(); i += kChunk) {
        chunk.clear();
        for (size_t j = i; j < std::min(run.spans.size(), i + kChunk); ++j) {
            Span s = run.spans[j];
            auto l = mapLane(s.lane);
            if (!l)
                return std::unexpected(l.error());
            s.lane = *l;
            s.name = s.name.v < stringMap.size() ? stringMap[s.name.v] : StringId{0};
            chunk.push_back(s);
        }
        if (auto s = w.appendSpans(chunk); !s)
            return s;
    }
    std::vector<Instant> instants;
    instants.reserve(run.instants.size());
    for (Instant in : run.instants) {
        auto l = mapLane(in.lane);
        if (!l)
            return std::unexpected(l.error());
        in.lane = *l;
        in.name = in.name.v < stringMap.size() ? stringMap[in.name.v] : StringId{0};
        instants.push_back(in);
    }
    if (auto s = w.appendInstants(instants); !s)
        return s;
    for (const Diagnostic& g : run.diagnostics)
        if (auto s = w.addDiagnostic(g); !s)
            return s;
    if (auto s = w.close(); !s)
        return s;
    return storeSummaries(path);
}

Status saveRun(const Run& run, const std::string& path, RunWriter::Mode mode)
{
    auto output = OutputFile::create(path, mode == RunWriter::Mode::Overwrite);
    if (!output)
        return std::unexpected(output.error());
    if (auto s = writeRun(run, output->path()); !s)
        return std::unexpected(output->explain(s.error()));
    return output->commit();
}

} // namespace lockstep::core
