// The span block codec: how the run database stores a lane's spans (schema.cpp, table
// span_blocks; run_db.cpp "Span blocks"). A block is up to kSpanBlockSpans spans of one lane,
// sorted by start, equal starts in append order, encoded row by row with varints:
//
//   header   u8 format (1), varint count, zigzag varint first start
//   per span u8 flags (bit 0 kind, 1 name, 2 step, 3 bucket, 4 bytes: the field differs from the
//            previous span's and follows; the others must be 0)
//            varint start - previous start (>= 0; the first span's is 0)
//            varint duration (end - start, >= 0)
//            [u8 kind] [varint name id] [zigzag varint step - previous step]
//            [zigzag varint bucket] [zigzag varint bytes]
//   "previous" starts as kind 0, name 0, step kNoStep, bucket kNoBucket, bytes 0.
//
// The decoder checks every read against the blob's end and every value against its type's
// range; a blob that is not exactly one well-formed block is an Error with ErrorCode::BadFile
// ("corrupt span block"), never an over-read or a crash (fuzz_span_block runs it on arbitrary
// bytes).
#pragma once

#include "lockstep/core/result.h"
#include "lockstep/core/types.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lockstep::core {

// Spans per block (the writer closes a block at this many; a block may hold fewer). See
// run_db.cpp "Span blocks" for the measurement that chose it.
inline constexpr size_t kSpanBlockSpans = 2048;

// What a block's row says about it besides its bytes (the columns of span_blocks).
struct SpanBlockSummary {
    TimeNs firstStart = 0;
    TimeNs lastStart = 0;
    TimeNs maxEnd = 0;
    int64_t count = 0;
};

// Encodes `spans` (one lane's; their lane field is not stored) into `out` (replaced). Refuses,
// with ErrorCode::Failed, spans that are not sorted by start or that end before they start, and
// an empty block. `summary` receives the block's row values.
Status encodeSpanBlock(std::span<const Span> spans, std::string& out, SpanBlockSummary* summary = nullptr);

// Decodes a block, appending its spans to `out` with lane `lane` and the stored name ids as they
// are. Anything but a well-formed block (truncated, trailing bytes, a count that does not match,
// an overflowing time, a value out of its field's range, unknown flags) is ErrorCode::BadFile;
// `out` may then hold part of the block. `summary`, when given, receives the decoded block's
// first start, last start, max end and count (callers compare them with the row's).
Status decodeSpanBlock(std::span<const uint8_t> data, LaneId lane, std::vector<Span>& out,
                       SpanBlockSummary* summary = nullptr);

} // namespace lockstep::core
