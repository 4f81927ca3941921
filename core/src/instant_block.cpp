// The instant block codec (instant_block.h has the format).
#include "lockstep/core/instant_block.h"

#include "block_codec.h"

#include <algorithm>
#include <limits>

namespace lockstep::core {

using namespace blockcodec;

namespace {

constexpr uint8_t kFormat = 1;
constexpr uint8_t kKindBit = 1, kNameBit = 2, kStepBit = 4, kBucketBit = 8;
constexpr uint8_t kKnownBits = kKindBit | kNameBit | kStepBit | kBucketBit;

Status corrupt(const char* what)
{
    return fail(ErrorCode::BadFile, std::string("the run database is corrupt: a corrupt instant block (") + what + ")");
}

Instant firstPrevious(TimeNs ts, LaneId lane)
{
    Instant prev;
    prev.ts = ts;
    prev.lane = lane;
    prev.kind = InstantKind::GradReady;
    prev.name = StringId{0};
    prev.step = kNoStep;
    prev.bucket = kNoBucket;
    return prev;
}

} // namespace

Status encodeInstantBlock(std::span<const Instant> instants, std::string& out, InstantBlockSummary* summary,
                          size_t maxBytes)
{
    out.clear();
    if (instants.empty())
        return fail("an instant block must hold at least one instant");
    // The instants first (the count is known once they are), then the header in front.
    thread_local std::string body;
    body.clear();
    body.reserve(std::min<size_t>(16 + instants.size() * 6, maxBytes));
    Instant prev = firstPrevious(instants.front().ts, LaneId{0});
    constexpr size_t kHeaderMax = 1 + 10 + 10;
    size_t taken = 0;
    for (const Instant& in : instants) {
        if (in.ts < prev.ts)
            return fail("instant block: instants are not sorted by time");
        const size_t before = body.size();
        const uint8_t flags = (in.kind != prev.kind ? kKindBit : 0) | (in.name.v != prev.name.v ? kNameBit : 0)
                              | (in.step != prev.step ? kStepBit : 0) | (in.bucket != prev.bucket ? kBucketBit : 0);
        body.push_back(static_cast<char>(flags));
        // Unsigned difference: a delta above INT64_MAX still round-trips.
        putVarint(body, static_cast<uint64_t>(in.ts) - static_cast<uint64_t>(prev.ts));
        if (flags & kKindBit)
            body.push_back(static_cast<char>(in.kind));
        if (flags & kNameBit)
            putVarint(body, zigzag(int64_t(in.name.v) - int64_t(prev.name.v)));
        if (flags & kStepBit)
            putVarint(body, zigzag(int64_t(in.step) - int64_t(prev.step)));
        if (flags & kBucketBit)
            putVarint(body, zigzag(in.bucket));
        if (taken > 0 && body.size() + kHeaderMax > maxBytes) {
            body.resize(before); // the block is full without it
            break;
        }
        ++taken;
        prev = in;
    }
    out.reserve(kHeaderMax + body.size());
    out.push_back(static_cast<char>(kFormat));
    putVarint(out, taken);
    putVarint(out, zigzag(instants.front().ts));
    out += body;
    if (summary)
        *summary = InstantBlockSummary{instants.front().ts, instants[taken - 1].ts, static_cast<int64_t>(taken)};
    return {};
}

// One loop over the instants with a check after every read.
Status decodeInstantBlock(std::span<const uint8_t> data, LaneId lane, std::vector<Instant>& out,
                          InstantBlockSummary* summary)
{
    Reader in(data);
    uint8_t format = 0;
    uint64_t count = 0, firstTs = 0;
    if (!in.byte(format) || format != kFormat)
        return corrupt("unknown format");
    if (!in.varint(count) || !in.varint(firstTs))
        return corrupt("truncated header");
    // Every instant takes at least 2 bytes (flags, time delta): a count the bytes cannot hold is
    // refused before anything is reserved for it.
    if (count == 0 || count > in.left() / 2)
        return corrupt("bad count");
    if (out.capacity() < out.size() + count)
        out.reserve(std::max<size_t>(out.size() + count, out.capacity() * 2));
    Instant prev = firstPrevious(unzigzag(firstTs), lane);
    const TimeNs first = prev.ts;
    for (uint64_t i = 0; i < count; ++i) {
        uint8_t flags = 0;
        uint64_t delta = 0;
        if (!in.byte(flags) || !in.varint(delta))
            return corrupt("truncated");
        if (flags & ~kKnownBits)
            return corrupt("unknown flags");
        Instant x = prev;
        const __int128 ts = static_cast<__int128>(prev.ts) + delta;
        if (ts > std::numeric_limits<int64_t>::max())
            return corrupt("time out of range");
        x.ts = static_cast<TimeNs>(ts);
        uint64_t v = 0;
        if (flags & kKindBit) {
            uint8_t k = 0;
            if (!in.byte(k))
                return corrupt("truncated");
            x.kind = k == static_cast<uint8_t>(InstantKind::Marker) ? InstantKind::Marker : InstantKind::GradReady;
        }
        if (flags & kNameBit) {
            if (!in.varint(v))
                return corrupt("truncated");
            // unzigzag's range is all of int64: the sum is done in 128 bits.
            const __int128 name = static_cast<__int128>(prev.name.v) + unzigzag(v);
            if (name < 0 || name > std::numeric_limits<uint32_t>::max())
                return corrupt("bad name");
            x.name = StringId{static_cast<uint32_t>(name)};
        }
        if (flags & kStepBit) {
            int64_t step = 0;
            if (!in.varint(v) || __builtin_add_overflow(int64_t(prev.step), unzigzag(v), &step) || !fitsInt32(step))
                return corrupt("bad step");
            x.step = static_cast<int32_t>(step);
        }
        if (flags & kBucketBit) {
            if (!in.varint(v) || !fitsInt32(unzigzag(v)))
                return corrupt("bad bucket");
            x.bucket = static_cast<int32_t>(unzigzag(v));
        }
        out.push_back(x);
        prev = x;
    }
    if (!in.atEnd())
        return corrupt("bytes after the last instant");
    if (summary)
        *summary = InstantBlockSummary{first, prev.ts, static_cast<int64_t>(count)};
    return {};
}

} // namespace lockstep::core
