// The instant block codec: how the run database stores a lane's instants (schema.cpp, table
// instant_blocks; run_db.cpp "Instant blocks"), the sibling of span_block.h. A block is up to
// kInstantBlockBytes bytes (kInstantBlockInstants instants) of one lane's instants, sorted by
// time, equal times in append order, encoded row by row with varints:
//
//   header      u8 format (1), varint count, zigzag varint first time
//   per instant u8 flags (bit 0 kind, 1 name, 2 step, 3 bucket: the field differs from the
//               previous instant's and follows; the others must be 0)
//               varint ts - previous ts (>= 0; the first instant's is 0)
//               [u8 kind] [zigzag varint name id - previous name id]
//               [zigzag varint step - previous step] [zigzag varint bucket]
//   "previous" starts as kind 0 (grad ready), name 0, step kNoStep, bucket kNoBucket.
//
// The name is a difference because a step's gradient-ready instants name the parameters one
// after the other (interned in order: ids that differ by one), which then take one byte.
// The decoder checks every read against the blob's end and every value against its type's
// range; a blob that is not exactly one well-formed block is an Error with ErrorCode::BadFile
// ("corrupt instant block"), never an over-read or a crash (fuzz_instant_block runs it on
// arbitrary bytes).
#pragma once

#include "lockstep/core/result.h"
#include "lockstep/core/types.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lockstep::core {

// A block is closed at kInstantBlockBytes bytes or kInstantBlockInstants instants, whichever comes
// first (a block may hold fewer). The bytes: a block row of up to ~10.2 KB keeps at most 2 KB in
// its b-tree cell and the rest in one 8 KB overflow page (SQLite's payload split for the writer's
// 8 KB pages); past that a second overflow page holds a few hundred bytes and wastes the rest. At
// 9 KiB the cell keeps ~1 KB and the overflow page is full (run_db.cpp "Instant blocks" has the
// measurement). The count only bounds a block of tiny instants.
inline constexpr size_t kInstantBlockBytes = 9216;
inline constexpr size_t kInstantBlockInstants = 4096;

// What a block's row says about it besides its bytes (the columns of instant_blocks).
struct InstantBlockSummary {
    TimeNs firstTs = 0;
    TimeNs lastTs = 0;
    int64_t count = 0;
};

// Encodes `instants` (one lane's; their lane field is not stored) into `out` (replaced): all of
// them, or the longest prefix (at least one) whose block takes at most `maxBytes` bytes. Refuses,
// with ErrorCode::Failed, instants that are not sorted by time and an empty block. `summary`
// receives the block's row values; its count says how many instants the block took.
Status encodeInstantBlock(std::span<const Instant> instants, std::string& out, InstantBlockSummary* summary = nullptr,
                          size_t maxBytes = SIZE_MAX);

// Decodes a block, appending its instants to `out` with lane `lane` and the stored name ids as
// they are. Anything but a well-formed block (truncated, trailing bytes, a count that does not
// match, an overflowing time, a value out of its field's range, unknown flags) is
// ErrorCode::BadFile; `out` may then hold part of the block. A kind this build does not know
// reads as InstantKind::GradReady (as the instants rows of older files did). `summary`, when
// given, receives the decoded block's first time, last time and count.
Status decodeInstantBlock(std::span<const uint8_t> data, LaneId lane, std::vector<Instant>& out,
                          InstantBlockSummary* summary = nullptr);

} // namespace lockstep::core
