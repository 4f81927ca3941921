// Private to lockstep::core: span blocks and instant blocks behind one interface, so that the
// writer (run_db.cpp), the reader and migrations (schema.cpp) handle both with one piece of code
// each. A block's row is (lane, first key, seq, last key, [max end,] count, data) in either table.
#pragma once

#include "lockstep/core/instant_block.h"
#include "lockstep/core/span_block.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lockstep::core::blocks {

// A block's row values: its first and last key (span start, instant time), the latest end of its
// records (an instant's is its time) and their count.
struct Row {
    TimeNs first = 0;
    TimeNs last = 0;
    TimeNs maxEnd = 0;
    int64_t count = 0;
};

inline TimeNs key(const Span& s) { return s.start; }
inline TimeNs key(const Instant& i) { return i.ts; }

template <class R>
struct Table;
template <>
struct Table<Span> {
    // A block is full at kPerBlock records or kMaxBytes bytes, whichever comes first.
    static constexpr size_t kPerBlock = kSpanBlockSpans;
    static constexpr size_t kMaxBytes = SIZE_MAX;
    static constexpr const char* kName = "span_blocks";
    static constexpr const char* kStoring = "storing spans";
    static constexpr const char* kReading = "reading spans";
    // Parameters: ?1 lane, ?2 first, ?3 seq, ?4 last, ?5 max end, ?6 count, ?7 data (both tables).
    static constexpr const char* kInsert =
        "INSERT OR REPLACE INTO span_blocks (lane, first_start_ns, seq, last_start_ns, max_end_ns, count, data) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
    static constexpr const char* kDelete = "DELETE FROM span_blocks WHERE lane = ?1 AND first_start_ns = ?2 AND seq = ?3";
    // A lane's last block (the writer continues it).
    static constexpr const char* kLast =
        "SELECT first_start_ns, seq, count, data FROM span_blocks WHERE lane = ?1 ORDER BY seq DESC LIMIT 1";
    // Every block in key order (load), their records, and every block with its row (the validator).
    static constexpr const char* kAll = "SELECT lane, seq, count, data FROM span_blocks ORDER BY lane, first_start_ns, seq";
    static constexpr const char* kCount = "SELECT COALESCE(sum(count), 0) FROM span_blocks";
    static constexpr const char* kCheck =
        "SELECT lane, first_start_ns, last_start_ns, max_end_ns, count, data FROM span_blocks";
};
template <>
struct Table<Instant> {
    static constexpr size_t kPerBlock = kInstantBlockInstants;
    static constexpr size_t kMaxBytes = kInstantBlockBytes;
    static constexpr const char* kName = "instant_blocks";
    static constexpr const char* kStoring = "storing instants";
    static constexpr const char* kReading = "reading instants";
    static constexpr const char* kInsert =
        "INSERT OR REPLACE INTO instant_blocks (lane, first_ts_ns, seq, last_ts_ns, count, data) "
        "VALUES (?1, ?2, ?3, ?4, ?6, ?7)";
    static constexpr const char* kDelete = "DELETE FROM instant_blocks WHERE lane = ?1 AND first_ts_ns = ?2 AND seq = ?3";
    static constexpr const char* kLast =
        "SELECT first_ts_ns, seq, count, data FROM instant_blocks WHERE lane = ?1 ORDER BY seq DESC LIMIT 1";
    static constexpr const char* kAll = "SELECT lane, seq, count, data FROM instant_blocks ORDER BY lane, first_ts_ns, seq";
    static constexpr const char* kCount = "SELECT COALESCE(sum(count), 0) FROM instant_blocks";
    static constexpr const char* kCheck =
        "SELECT lane, first_ts_ns, last_ts_ns, last_ts_ns, count, data FROM instant_blocks";
};

// Encodes all of `records`, or the longest prefix within `maxBytes` (row.count says how many).
inline Status encode(std::span<const Span> spans, std::string& out, Row& row, size_t /*maxBytes: no limit*/ = SIZE_MAX)
{
    SpanBlockSummary s;
    auto st = encodeSpanBlock(spans, out, &s);
    row = Row{s.firstStart, s.lastStart, s.maxEnd, s.count};
    return st;
}
inline Status encode(std::span<const Instant> instants, std::string& out, Row& row, size_t maxBytes = SIZE_MAX)
{
    InstantBlockSummary s;
    auto st = encodeInstantBlock(instants, out, &s, maxBytes);
    row = Row{s.firstTs, s.lastTs, s.lastTs, s.count};
    return st;
}
inline Status decode(std::span<const uint8_t> data, LaneId lane, std::vector<Span>& out, Row* row = nullptr)
{
    SpanBlockSummary s;
    auto st = decodeSpanBlock(data, lane, out, &s);
    if (row)
        *row = Row{s.firstStart, s.lastStart, s.maxEnd, s.count};
    return st;
}
inline Status decode(std::span<const uint8_t> data, LaneId lane, std::vector<Instant>& out, Row* row = nullptr)
{
    InstantBlockSummary s;
    auto st = decodeInstantBlock(data, lane, out, &s);
    if (row)
        *row = Row{s.firstTs, s.lastTs, s.lastTs, s.count};
    return st;
}

} // namespace lockstep::core::blocks
