// libFuzzer target: the run database's instant block decoder (core/instant_block.h) on arbitrary
// bytes. Every input must decode or fail with ErrorCode::BadFile, never read past the bytes (ASan)
// or overflow (UBSan); what decodes must encode and decode again to the same instants.
#include "lockstep/core/instant_block.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace lockstep::core;
    std::vector<Instant> instants;
    InstantBlockSummary summary;
    auto decoded = decodeInstantBlock(std::span(data, size), LaneId{1}, instants, &summary);
    if (!decoded) {
        if (decoded.error().code != ErrorCode::BadFile)
            std::abort();
        return 0;
    }
    if (instants.empty() || summary.count != static_cast<int64_t>(instants.size()))
        std::abort();
    std::string again;
    std::vector<Instant> back;
    if (!encodeInstantBlock(instants, again)
        || !decodeInstantBlock(std::span(reinterpret_cast<const uint8_t*>(again.data()), again.size()), LaneId{1}, back))
        std::abort();
    for (size_t i = 0; i < instants.size(); ++i) {
        const Instant& a = instants[i];
        const Instant& b = back.at(i);
        if (a.ts != b.ts || a.name.v != b.name.v || a.step != b.step || a.bucket != b.bucket || a.kind != b.kind
            || a.lane != b.lane)
            std::abort();
    }
    return 0;
}
