// The span block codec (span_block.h has the format).
#include "lockstep/core/span_block.h"

#include "block_codec.h"

#include <algorithm>
#include <limits>

namespace lockstep::core {

using namespace blockcodec;

namespace {

constexpr uint8_t kFormat = 1;
constexpr uint8_t kKindBit = 1, kNameBit = 2, kStepBit = 4, kBucketBit = 8, kBytesBit = 16;
constexpr uint8_t kKnownBits = kKindBit | kNameBit | kStepBit | kBucketBit | kBytesBit;

Status corrupt(const char* what)
{
    return fail(ErrorCode::BadFile, std::string("the run database is corrupt: a corrupt span block (") + what + ")");
}

} // namespace

// What "previous" is before a block's first span (the header comment): kind 0, name 0, no step,
// no bucket, no bytes; the encoder and the decoder start from the same one.
static Span blockStart(TimeNs start, LaneId lane)
{
    Span s;
    s.start = start;
    s.lane = lane;
    s.kind = static_cast<SpanKind>(0);
    s.name = StringId{0};
    s.step = kNoStep;
    s.bucket = kNoBucket;
    s.bytes = 0;
    return s;
}

Status encodeSpanBlock(std::span<const Span> spans, std::string& out, SpanBlockSummary* summary)
{
    out.clear();
    if (spans.empty())
        return fail("a span block must hold at least one span");
    out.reserve(16 + spans.size() * 12);
    out.push_back(static_cast<char>(kFormat));
    putVarint(out, spans.size());
    putVarint(out, zigzag(spans.front().start));
    Span prev = blockStart(spans.front().start, LaneId{});
    TimeNs maxEnd = std::numeric_limits<TimeNs>::min();
    for (const Span& s : spans) {
        if (s.start < prev.start)
            return fail("span block: spans are not sorted by start");
        if (s.end < s.start)
            return fail("a span ends before it starts (start " + std::to_string(s.start) + ", end "
                        + std::to_string(s.end) + "); durations must be >= 0");
        const uint8_t flags = (s.kind != prev.kind ? kKindBit : 0) | (s.name.v != prev.name.v ? kNameBit : 0)
                              | (s.step != prev.step ? kStepBit : 0) | (s.bucket != prev.bucket ? kBucketBit : 0)
                              | (s.bytes != prev.bytes ? kBytesBit : 0);
        out.push_back(static_cast<char>(flags));
        // Unsigned differences: a start delta or duration above INT64_MAX still round-trips.
        putVarint(out, static_cast<uint64_t>(s.start) - static_cast<uint64_t>(prev.start));
        putVarint(out, static_cast<uint64_t>(s.end) - static_cast<uint64_t>(s.start));
        if (flags & kKindBit)
            out.push_back(static_cast<char>(s.kind));
        if (flags & kNameBit)
            putVarint(out, s.name.v);
        if (flags & kStepBit)
            putVarint(out, zigzag(int64_t(s.step) - int64_t(prev.step)));
        if (flags & kBucketBit)
            putVarint(out, zigzag(s.bucket));
        if (flags & kBytesBit)
            putVarint(out, zigzag(s.bytes));
        maxEnd = std::max(maxEnd, s.end);
        prev = s;
    }
    if (summary)
        *summary = SpanBlockSummary{spans.front().start, spans.back().start, maxEnd, static_cast<int64_t>(spans.size())};
    return {};
}

// Long (~70 lines): one loop over the spans with a check after every read.
Status decodeSpanBlock(std::span<const uint8_t> data, LaneId lane, std::vector<Span>& out, SpanBlockSummary* summary)
{
    Reader in(data);
    uint8_t format = 0;
    uint64_t count = 0, firstStart = 0;
    if (!in.byte(format) || format != kFormat)
        return corrupt("unknown format");
    if (!in.varint(count) || !in.varint(firstStart))
        return corrupt("truncated header");
    // Every span takes at least 3 bytes (flags, start delta, duration): a count the bytes cannot
    // hold is refused before anything is reserved for it.
    if (count == 0 || count > in.left() / 3)
        return corrupt("bad count");
    // Geometric growth: an exact reserve per block would copy the whole vector every block.
    if (out.capacity() < out.size() + count)
        out.reserve(std::max<size_t>(out.size() + count, out.capacity() * 2));
    Span prev = blockStart(unzigzag(firstStart), lane);
    TimeNs maxEnd = std::numeric_limits<TimeNs>::min();
    const TimeNs first = prev.start;
    for (uint64_t i = 0; i < count; ++i) {
        uint8_t flags = 0;
        uint64_t delta = 0, dur = 0;
        if (!in.byte(flags) || !in.varint(delta) || !in.varint(dur))
            return corrupt("truncated");
        if (flags & ~kKnownBits)
            return corrupt("unknown flags");
        Span s = prev;
        // In 128 bits: a start delta or duration may exceed INT64_MAX (int64 extremes).
        const __int128 start = static_cast<__int128>(prev.start) + delta;
        const __int128 end = start + dur;
        if (end > std::numeric_limits<int64_t>::max())
            return corrupt("time out of range");
        s.start = static_cast<TimeNs>(start);
        s.end = static_cast<TimeNs>(end);
        uint64_t v = 0;
        if (flags & kKindBit) {
            uint8_t k = 0;
            if (!in.byte(k))
                return corrupt("truncated");
            s.kind = k < kSpanKindCount ? static_cast<SpanKind>(k) : SpanKind::Other;
        }
        if (flags & kNameBit) {
            if (!in.varint(v) || v > std::numeric_limits<uint32_t>::max())
                return corrupt("bad name");
            s.name = StringId{static_cast<uint32_t>(v)};
        }
        if (flags & kStepBit) {
            int64_t step = 0;
            if (!in.varint(v) || __builtin_add_overflow(int64_t(prev.step), unzigzag(v), &step) || !fitsInt32(step))
                return corrupt("bad step");
            s.step = static_cast<int32_t>(step);
        }
        if (flags & kBucketBit) {
            if (!in.varint(v) || !fitsInt32(unzigzag(v)))
                return corrupt("bad bucket");
            s.bucket = static_cast<int32_t>(unzigzag(v));
        }
        if (flags & kBytesBit) {
            if (!in.varint(v))
                return corrupt("truncated");
            s.bytes = unzigzag(v);
        }
        maxEnd = std::max(maxEnd, s.end);
        out.push_back(s);
        prev = s;
    }
    if (!in.atEnd())
        return corrupt("bytes after the last span");
    if (summary)
        *summary = SpanBlockSummary{first, prev.start, maxEnd, static_cast<int64_t>(count)};
    return {};
}

} // namespace lockstep::core
